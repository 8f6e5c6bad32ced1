/* tests/data/model/gguf_writer.h - a small in-memory GGUF writer for the tests (test_gguf.c,
   test_model.c): metadata of every value type, tensors at aligned offsets, v2 or v3, and byte
   access so tests can corrupt what it wrote. Static helpers only; include after amk.h. */
#ifndef AMK_TEST_GGUF_WRITER_H
#define AMK_TEST_GGUF_WRITER_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* why: each test uses a different subset of these helpers */
#if defined(__GNUC__) || defined(__clang__)
#define TW_FN static __attribute__((unused))
#else
#define TW_FN static
#endif

typedef struct tw_buf { unsigned char *p; size_t n, cap; } tw_buf;

TW_FN void tw_put(tw_buf *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = (unsigned char *)realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, x, n);
    b->n += n;
}
TW_FN void tw_le(tw_buf *b, uint64_t v, int bytes) {
    unsigned char t[8];
    int i;
    for (i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    tw_put(b, t, (size_t)bytes);
}
TW_FN void tw_u8(tw_buf *b, unsigned v) { tw_le(b, v, 1); }
TW_FN void tw_u16(tw_buf *b, unsigned v) { tw_le(b, v, 2); }
TW_FN void tw_u32(tw_buf *b, uint32_t v) { tw_le(b, v, 4); }
TW_FN void tw_u64(tw_buf *b, uint64_t v) { tw_le(b, v, 8); }
TW_FN void tw_f32(tw_buf *b, float f) { uint32_t u; memcpy(&u, &f, 4); tw_u32(b, u); }
TW_FN void tw_f64(tw_buf *b, double f) { uint64_t u; memcpy(&u, &f, 8); tw_u64(b, u); }
TW_FN void tw_strn(tw_buf *b, const char *s, size_t n) { tw_u64(b, n); tw_put(b, s, n); }
TW_FN void tw_str(tw_buf *b, const char *s) { tw_strn(b, s, strlen(s)); }

/* A file being written: metadata, tensor infos and data are kept apart until tw_finish. */
typedef struct tw_gguf {
    tw_buf kv, info, data;
    uint64_t n_kv, n_tensors;
    uint32_t version;
    uint64_t align;
} tw_gguf;

TW_FN void tw_init(tw_gguf *w, uint32_t version) {
    memset(w, 0, sizeof *w);
    w->version = version;
    w->align = 32;
}
TW_FN void tw_free(tw_gguf *w) { free(w->kv.p); free(w->info.p); free(w->data.p); }

/* Starts a key/value: writes the key and the type; the caller writes the value into w->kv. */
TW_FN tw_buf *tw_key(tw_gguf *w, const char *key, uint32_t type) {
    w->n_kv++;
    tw_str(&w->kv, key);
    tw_u32(&w->kv, type);
    return &w->kv;
}
TW_FN void tw_kv_u32(tw_gguf *w, const char *key, uint32_t v) { tw_u32(tw_key(w, key, AMK_GGUF_UINT32), v); }
TW_FN void tw_kv_i32(tw_gguf *w, const char *key, int32_t v) { tw_u32(tw_key(w, key, AMK_GGUF_INT32), (uint32_t)v); }
TW_FN void tw_kv_f32(tw_gguf *w, const char *key, float v) { tw_f32(tw_key(w, key, AMK_GGUF_FLOAT32), v); }
TW_FN void tw_kv_bool(tw_gguf *w, const char *key, int v) { tw_u8(tw_key(w, key, AMK_GGUF_BOOL), (unsigned)v); }
TW_FN void tw_kv_str(tw_gguf *w, const char *key, const char *v) { tw_str(tw_key(w, key, AMK_GGUF_STRING), v); }
TW_FN void tw_kv_strs(tw_gguf *w, const char *key, int n, const char *const *v) {
    tw_buf *b = tw_key(w, key, AMK_GGUF_ARRAY);
    int i;
    tw_u32(b, AMK_GGUF_STRING);
    tw_u64(b, (uint64_t)n);
    for (i = 0; i < n; i++) tw_str(b, v[i]);
}
TW_FN void tw_kv_i32s(tw_gguf *w, const char *key, int n, const int32_t *v) {
    tw_buf *b = tw_key(w, key, AMK_GGUF_ARRAY);
    int i;
    tw_u32(b, AMK_GGUF_INT32);
    tw_u64(b, (uint64_t)n);
    for (i = 0; i < n; i++) tw_u32(b, (uint32_t)v[i]);
}

/* Adds a tensor (dims in GGUF order, dims[0] contiguous) whose data is nbytes at data. */
TW_FN void tw_tensor(tw_gguf *w, const char *name, uint32_t type, int n_dims, const int64_t *dims,
                      const void *data, size_t nbytes) {
    int i;
    static const unsigned char zero[256] = {0};
    while (w->data.n % w->align) tw_put(&w->data, zero, 1);
    w->n_tensors++;
    tw_str(&w->info, name);
    tw_u32(&w->info, (uint32_t)n_dims);
    for (i = 0; i < n_dims; i++) tw_u64(&w->info, (uint64_t)dims[i]);
    tw_u32(&w->info, type);
    tw_u64(&w->info, w->data.n);
    tw_put(&w->data, data, nbytes);
}

/* The whole file (malloc'd; free it). */
TW_FN unsigned char *tw_finish(const tw_gguf *w, size_t *size) {
    tw_buf f;
    memset(&f, 0, sizeof f);
    tw_put(&f, "GGUF", 4);
    tw_u32(&f, w->version);
    tw_u64(&f, w->n_tensors);
    tw_u64(&f, w->n_kv);
    tw_put(&f, w->kv.p, w->kv.n);
    tw_put(&f, w->info.p, w->info.n);
    while (f.n % w->align) tw_u8(&f, 0);
    tw_put(&f, w->data.p, w->data.n);
    *size = f.n;
    return f.p;
}

TW_FN int tw_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* ---- Q8_0 quantizer (llama.cpp quantize_row_q8_0_ref): d = amax/127, q = round(x/d) ----------- */
TW_FN void tw_quant_q8_0(const float *x, int64_t n, unsigned char *out) {
    int64_t b;
    int j;
    for (b = 0; b < n / 32; b++, x += 32, out += 34) {
        float amax = 0.0f, d, id;
        uint16_t h;
        for (j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        h = amk_f32_to_f16(d);
        out[0] = (unsigned char)(h & 0xFF);
        out[1] = (unsigned char)(h >> 8);
        for (j = 0; j < 32; j++) out[2 + j] = (unsigned char)(int8_t)lrintf(x[j] * id);
    }
}

#endif
