/* tests/test_gguf.c - the GGUF reader and ggml dequantization: metadata of every value type,
   tensors of every supported type against an independent double-precision dequantizer written
   from REFERENCE.md §1.4, hand-computed blocks, and corrupt, truncated and hostile files.
   With `--write-seeds DIR` it also writes the fuzzer's seed files. */
#define _POSIX_C_SOURCE 200809L
#include "../amk.h"
#include "amk_test.h"
#include "data/model/gguf_writer.h"
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------------------------- */

static amk_t_rng rng = {1};
static uint32_t rnd(void) { return (uint32_t)(amk_t_rng_next(&rng) >> 32); } /* deterministic test data */
static float rnd_sym(void) { return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0); }

static void put_f16(unsigned char *p, float f) {
    uint16_t h = amk_f32_to_f16(f);
    p[0] = (unsigned char)(h & 0xFF);
    p[1] = (unsigned char)(h >> 8);
}
static double get_f16(const unsigned char *p) { return amk_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Parses a copy of exactly n bytes (so ASan sees any read past the end), closing the result at
   once; a failure must leave the handle NULL. */
static amk_result parse_copy(const unsigned char *data, size_t n, amk_diag *d) {
    unsigned char *copy = (unsigned char *)malloc(n ? n : 1);
    amk_gguf *g = (amk_gguf *)&g; /* why: a non-NULL poison that a failure must reset */
    amk_result r;
    memcpy(copy, data, n);
    r = amk_gguf_parse(copy, n, &g, d);
    CHECK(r == AMK_OK ? g != NULL : g == NULL);
    if (r == AMK_OK) amk_gguf_close(g);
    free(copy);
    return r;
}
/* Parses w's file; expects a failure with result r whose message contains want. */
static void expect_ok(const tw_gguf *w) {
    size_t n;
    unsigned char *f = tw_finish(w, &n);
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_MSG(parse_copy(f, n, &d) == AMK_OK, "%s", d.message);
    free(f);
}

static void expect_fail(const tw_gguf *w, amk_result r, const char *want) {
    size_t n;
    unsigned char *f = tw_finish(w, &n);
    amk_diag d;
    amk_result got;
    amk_diag_clear(&d);
    got = parse_copy(f, n, &d);
    CHECK_MSG(got == r, "result %s, want %s (%s)", amk_result_str(got), amk_result_str(r), d.message);
    CHECK_MSG(strstr(d.message, want) != NULL, "message '%s' lacks '%s'", d.message, want);
    free(f);
}

/* ---- independent dequantization, straight from REFERENCE.md §1.4, in double ------------------ */

/* Q4_K's and Q5_K's 6-bit (scale, min) of sub-block sub from scales[12] */
static void k4_pair(const unsigned char *sc, int sub, int *s, int *m) {
    if (sub < 4) { *s = sc[sub] & 63; *m = sc[sub + 4] & 63; }
    else { *s = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4); *m = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4); }
}

static double ref_elem(uint32_t type, const unsigned char *blk, int e) {
    switch (type) {
    case AMK_GGML_Q8_0: return get_f16(blk) * (double)(int8_t)blk[2 + e];
    case AMK_GGML_Q4_0:
    case AMK_GGML_Q4_1: {
        int hdr = type == AMK_GGML_Q4_0 ? 2 : 4;
        int q = e < 16 ? (blk[hdr + e] & 15) : (blk[hdr + e - 16] >> 4);
        if (type == AMK_GGML_Q4_0) return (q - 8) * get_f16(blk);
        return q * get_f16(blk) + get_f16(blk + 2);
    }
    case AMK_GGML_Q5_0:
    case AMK_GGML_Q5_1: {
        int hdr = type == AMK_GGML_Q5_0 ? 2 : 4;
        uint32_t qh = (uint32_t)blk[hdr] | (uint32_t)blk[hdr + 1] << 8 |
                      (uint32_t)blk[hdr + 2] << 16 | (uint32_t)blk[hdr + 3] << 24;
        const unsigned char *qs = blk + hdr + 4;
        int q = (e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4)) | (int)(((qh >> e) & 1) << 4);
        if (type == AMK_GGML_Q5_0) return (q - 16) * get_f16(blk);
        return q * get_f16(blk) + get_f16(blk + 2);
    }
    case AMK_GGML_Q4_K: {
        const unsigned char *sc = blk + 4, *qs = blk + 16;
        int c = e / 64, w = e % 64, sub = 2 * c + (w >= 32), l = w % 32, s, m, q;
        k4_pair(sc, sub, &s, &m);
        q = w < 32 ? (qs[32 * c + l] & 15) : (qs[32 * c + l] >> 4);
        return get_f16(blk) * s * q - get_f16(blk + 2) * m;
    }
    case AMK_GGML_Q6_K: {
        const unsigned char *ql = blk, *qh = blk + 128;
        const signed char *sc = (const signed char *)(blk + 192);
        int n = e / 128, r = e % 128, grp = r / 32, l = r % 32;
        int lo = ql[64 * n + l + 32 * (grp & 1)];
        int q = (grp >= 2 ? lo >> 4 : lo & 15) | (((qh[32 * n + l] >> (2 * grp)) & 3) << 4);
        return get_f16(blk + 208) * sc[8 * n + l / 16 + 2 * grp] * (q - 32);
    }
    case AMK_GGML_Q5_K: { /* Q4_K's scales and nibbles, qs at 48; bit (2c + high half) of qh[l] is the 5th */
        const unsigned char *sc = blk + 4, *qh = blk + 16, *qs = blk + 48;
        int c = e / 64, w = e % 64, hi = w >= 32, sub = 2 * c + hi, l = w % 32, s, m, q;
        k4_pair(sc, sub, &s, &m);
        q = (hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15) + 16 * ((qh[l] >> sub) & 1);
        return get_f16(blk) * s * q - get_f16(blk + 2) * m;
    }
    case AMK_GGML_Q2_K: { /* scales[16] (scale low nibble, min high), qs[64], d, dmin */
        int n = e / 128, r = e % 128, j = r / 32, h = (r % 32) / 16, l = r % 16;
        int sb = blk[8 * n + 2 * j + h], q = (blk[16 + 32 * n + 16 * h + l] >> (2 * j)) & 3;
        return get_f16(blk + 80) * (sb & 15) * q - get_f16(blk + 82) * (sb >> 4);
    }
    case AMK_GGML_Q3_K: { /* hmask[32], qs[64], scales[12] (16 6-bit, -32), d */
        const unsigned char *sc = blk + 96;
        int n = e / 128, r = e % 128, j = r / 32, h = (r % 32) / 16, l = r % 16, i = 16 * h + l;
        int s = 8 * n + 2 * j + h, lo, hi2, q;
        if (s < 4) { lo = sc[s] & 15; hi2 = sc[s + 8] & 3; }
        else if (s < 8) { lo = sc[s] & 15; hi2 = (sc[s + 4] >> 2) & 3; }
        else if (s < 12) { lo = sc[s - 8] >> 4; hi2 = (sc[s] >> 4) & 3; }
        else { lo = sc[s - 8] >> 4; hi2 = (sc[s - 4] >> 6) & 3; }
        q = ((blk[32 + 32 * n + i] >> (2 * j)) & 3) - (((blk[i] >> (4 * n + j)) & 1) ? 0 : 4);
        return get_f16(blk + 108) * ((lo | hi2 << 4) - 32) * q;
    }
    case AMK_GGML_IQ4_NL: {
        static const int lv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        int q = e < 16 ? (blk[2 + e] & 15) : (blk[2 + e - 16] >> 4);
        return get_f16(blk) * lv[q];
    }
    default: return 0.0;
    }
}
static int blk_elems(uint32_t t) {
    return t == AMK_GGML_Q2_K || t == AMK_GGML_Q3_K || t == AMK_GGML_Q4_K || t == AMK_GGML_Q5_K || t == AMK_GGML_Q6_K ? 256 : 32;
}
static int blk_bytes(uint32_t t) {
    switch (t) {
    case AMK_GGML_Q8_0: return 34;
    case AMK_GGML_Q4_0: return 18;
    case AMK_GGML_Q4_1: return 20;
    case AMK_GGML_Q5_0: return 22;
    case AMK_GGML_Q5_1: return 24;
    case AMK_GGML_Q2_K: return 84;
    case AMK_GGML_Q3_K: return 110;
    case AMK_GGML_Q4_K: return 144;
    case AMK_GGML_Q5_K: return 176;
    case AMK_GGML_Q6_K: return 210;
    case AMK_GGML_IQ4_NL: return 18;
    default: return 0;
    }
}
/* Random blocks: random quant bytes, sane f16 scales (some negative). */
static unsigned char *random_blocks(uint32_t t, int nb) {
    int bb = blk_bytes(t), b, i, off[2];
    unsigned char *p = (unsigned char *)malloc((size_t)(bb * nb));
    for (i = 0; i < bb * nb; i++) p[i] = (unsigned char)rnd();
    amk_t_block_scales(amk_gguf_type_dtype(t), off);
    for (b = 0; b < nb; b++) {
        unsigned char *x = p + b * bb;
        put_f16(x + off[0], rnd_sym() * 0.1f);
        if (off[1] >= 0) put_f16(x + off[1], rnd_sym());
    }
    return p;
}
/* Dequantizes src (nb blocks of t) three ways and checks them against ref_elem. */
static void check_dequant(uint32_t t, const unsigned char *src, int nb) {
    int n = nb * blk_elems(t), i, bad = 0;
    float *y = (float *)malloc((size_t)n * 4);
    uint16_t *h = (uint16_t *)malloc((size_t)n * 2), *bf = (uint16_t *)malloc((size_t)n * 2);
    amk_diag d;
    CHECK_EQ_INT(amk_gguf_dequant(t, src, (uint64_t)(nb * blk_bytes(t)), n, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK_EQ_INT(amk_gguf_dequant(t, src, (uint64_t)(nb * blk_bytes(t)), n, AMK_DTYPE_F16, h, &d), AMK_OK);
    CHECK_EQ_INT(amk_gguf_dequant(t, src, (uint64_t)(nb * blk_bytes(t)), n, AMK_DTYPE_BF16, bf, &d), AMK_OK);
    for (i = 0; i < n && bad < 5; i++) {
        double want = ref_elem(t, src + (i / blk_elems(t)) * blk_bytes(t), i % blk_elems(t));
        if (!(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-7)) {
            bad++;
            CHECK_MSG(0, "%s element %d: %.9g, want %.9g", amk_gguf_type_name(t), i, y[i], want);
        }
        if (h[i] != amk_f32_to_f16(y[i]) || bf[i] != amk_f32_to_bf16(y[i])) {
            bad++;
            CHECK_MSG(0, "%s element %d: F16/BF16 output differs from rounding the F32 output",
                      amk_gguf_type_name(t), i);
        }
    }
    free(y); free(h); free(bf);
}

/* ---- metadata ---------------------------------------------------------------------------------- */

static void test_metadata_types(void) {
    tw_gguf w;
    tw_buf *b;
    size_t n, len;
    unsigned char *f;
    amk_gguf *g = NULL;
    amk_diag d;
    int64_t iv;
    double fv;
    int bv;
    uint32_t et;
    const char *s;
    static const char *const strs[3] = {"a", "", "ccc"};
    tw_init(&w, 3);
    tw_u8(tw_key(&w, "u8", AMK_GGUF_UINT8), 200);
    tw_u8(tw_key(&w, "i8", AMK_GGUF_INT8), (unsigned)(uint8_t)-5);
    tw_u16(tw_key(&w, "u16", AMK_GGUF_UINT16), 60000);
    tw_u16(tw_key(&w, "i16", AMK_GGUF_INT16), (unsigned)(uint16_t)-30000);
    tw_u32(tw_key(&w, "u32", AMK_GGUF_UINT32), 4000000000u);
    tw_kv_i32(&w, "i32", -2000000000);
    tw_kv_f32(&w, "f32", 1.5f);
    tw_kv_bool(&w, "bool", 1);
    tw_kv_str(&w, "str", "hello");
    tw_strn(tw_key(&w, "str0", AMK_GGUF_STRING), "a\0b", 3);
    tw_u64(tw_key(&w, "u64big", AMK_GGUF_UINT64), 9223372036854775813ull);
    tw_u64(tw_key(&w, "u64", AMK_GGUF_UINT64), 123);
    tw_u64(tw_key(&w, "i64", AMK_GGUF_INT64), (uint64_t)-4611686018427387904LL);
    tw_f64(tw_key(&w, "f64", AMK_GGUF_FLOAT64), 0.1);
    b = tw_key(&w, "a.u8", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_UINT8); tw_u64(b, 3); tw_u8(b, 1); tw_u8(b, 2); tw_u8(b, 255);
    b = tw_key(&w, "a.i16", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_INT16); tw_u64(b, 2); tw_u16(b, 0xFFFF); tw_u16(b, 2);
    b = tw_key(&w, "a.f32", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_FLOAT32); tw_u64(b, 2); tw_f32(b, 0.5f); tw_f32(b, -2.0f);
    b = tw_key(&w, "a.f64", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_FLOAT64); tw_u64(b, 1); tw_f64(b, -0.25);
    b = tw_key(&w, "a.bool", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_BOOL); tw_u64(b, 2); tw_u8(b, 1); tw_u8(b, 0);
    b = tw_key(&w, "a.u64", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_UINT64); tw_u64(b, 1); tw_u64(b, UINT64_MAX);
    b = tw_key(&w, "a.empty", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_INT32); tw_u64(b, 0);
    tw_kv_strs(&w, "a.str", 3, strs);
    /* [[1, 2], [3]] of i32, and [[["x"]]] of strings (depth 3) */
    b = tw_key(&w, "a.nested", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 2);
    tw_u32(b, AMK_GGUF_INT32); tw_u64(b, 2); tw_u32(b, 1); tw_u32(b, 2);
    tw_u32(b, AMK_GGUF_INT32); tw_u64(b, 1); tw_u32(b, 3);
    b = tw_key(&w, "a.deep", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 1);
    tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 1); tw_u32(b, AMK_GGUF_STRING); tw_u64(b, 1); tw_str(b, "x");
    tw_kv_str(&w, "general.architecture", "llama");
    f = tw_finish(&w, &n);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_gguf_parse(f, n, &g, &d), AMK_OK);
    if (!g) { fprintf(stderr, "%s\n", d.message); free(f); tw_free(&w); return; }
    CHECK_EQ_INT(amk_gguf_version(g), 3);
    CHECK_EQ_INT(amk_gguf_n_tensors(g), 0);
    CHECK_EQ_INT(amk_gguf_n_kv(g), 25);
    CHECK_STR(amk_gguf_kv_key(g, 0), "u8");
    CHECK_STR(amk_gguf_kv_key(g, 24), "general.architecture");
    CHECK(amk_gguf_kv_key(g, 25) == NULL && amk_gguf_kv_key(g, -1) == NULL);
    CHECK_EQ_INT(amk_gguf_find_key(g, "f64"), 13);
    CHECK_EQ_INT(amk_gguf_find_key(g, "nope"), -1);
    CHECK_EQ_INT(amk_gguf_kv_type(g, 13), AMK_GGUF_FLOAT64);
    CHECK_EQ_INT(amk_gguf_kv_type(g, 14), AMK_GGUF_ARRAY);
    CHECK(amk_gguf_get_int(g, "u8", &iv) && iv == 200);
    CHECK(amk_gguf_get_int(g, "i8", &iv) && iv == -5);
    CHECK(amk_gguf_get_int(g, "u16", &iv) && iv == 60000);
    CHECK(amk_gguf_get_int(g, "i16", &iv) && iv == -30000);
    CHECK(amk_gguf_get_int(g, "u32", &iv) && iv == 4000000000LL);
    CHECK(amk_gguf_get_int(g, "i32", &iv) && iv == -2000000000LL);
    CHECK(amk_gguf_get_int(g, "u64", &iv) && iv == 123);
    CHECK(amk_gguf_get_int(g, "i64", &iv) && iv == -4611686018427387904LL);
    iv = 7;
    CHECK(!amk_gguf_get_int(g, "u64big", &iv) && iv == 7); /* above INT64_MAX: not convertible */
    CHECK(!amk_gguf_get_int(g, "f32", &iv) && !amk_gguf_get_int(g, "bool", &iv));
    CHECK(!amk_gguf_get_int(g, "str", &iv) && !amk_gguf_get_int(g, "missing", &iv));
    CHECK(amk_gguf_get_float(g, "f32", &fv) && fv == 1.5);
    CHECK(amk_gguf_get_float(g, "f64", &fv) && fv == 0.1);
    CHECK(amk_gguf_get_float(g, "i16", &fv) && fv == -30000.0);
    CHECK(amk_gguf_get_float(g, "u64big", &fv) && fv == 9223372036854775813.0);
    CHECK(!amk_gguf_get_float(g, "str", &fv) && !amk_gguf_get_float(g, "bool", &fv));
    CHECK(amk_gguf_get_bool(g, "bool", &bv) && bv == 1);
    CHECK(!amk_gguf_get_bool(g, "u8", &bv));
    s = amk_gguf_get_string(g, "str", &len);
    CHECK_STR(s, "hello");
    CHECK_EQ_INT(len, 5);
    s = amk_gguf_get_string(g, "str0", &len);
    CHECK(s && len == 3 && memcmp(s, "a\0b", 4) == 0);
    CHECK(amk_gguf_get_string(g, "u8", &len) == NULL);
    CHECK_EQ_INT(amk_gguf_array_len(g, "a.u8", &et), 3);
    CHECK_EQ_INT(et, AMK_GGUF_UINT8);
    CHECK(amk_gguf_array_int(g, "a.u8", 2, &iv) && iv == 255);
    CHECK(!amk_gguf_array_int(g, "a.u8", 3, &iv) && !amk_gguf_array_int(g, "a.u8", -1, &iv));
    CHECK(amk_gguf_array_int(g, "a.i16", 0, &iv) && iv == -1);
    CHECK(amk_gguf_array_float(g, "a.i16", 1, &fv) && fv == 2.0);
    CHECK(amk_gguf_array_float(g, "a.f32", 1, &fv) && fv == -2.0);
    CHECK(!amk_gguf_array_int(g, "a.f32", 1, &iv));
    CHECK(amk_gguf_array_float(g, "a.f64", 0, &fv) && fv == -0.25);
    CHECK(amk_gguf_array_int(g, "a.bool", 0, &iv) && iv == 1);
    CHECK(!amk_gguf_array_int(g, "a.u64", 0, &iv));
    CHECK(amk_gguf_array_float(g, "a.u64", 0, &fv) && fv == 18446744073709551615.0);
    CHECK_EQ_INT(amk_gguf_array_len(g, "a.empty", &et), 0);
    CHECK_EQ_INT(amk_gguf_array_len(g, "u8", &et), -1);
    CHECK_EQ_INT(amk_gguf_array_len(g, "a.str", &et), 3);
    CHECK_EQ_INT(et, AMK_GGUF_STRING);
    s = amk_gguf_array_string(g, "a.str", 2, &len);
    CHECK(s && len == 3 && memcmp(s, "ccc", 3) == 0);
    s = amk_gguf_array_string(g, "a.str", 1, &len);
    CHECK(s && len == 0);
    CHECK(amk_gguf_array_string(g, "a.str", 3, &len) == NULL);
    CHECK(amk_gguf_array_string(g, "a.u8", 0, &len) == NULL);
    CHECK(!amk_gguf_array_int(g, "a.str", 0, &iv));
    CHECK_EQ_INT(amk_gguf_array_len(g, "a.nested", &et), 2);
    CHECK_EQ_INT(et, AMK_GGUF_ARRAY);
    CHECK(!amk_gguf_array_int(g, "a.nested", 0, &iv) && !amk_gguf_array_float(g, "a.nested", 0, &fv));
    CHECK_EQ_INT(amk_gguf_array_len(g, "a.deep", &et), 1);
    CHECK_STR(amk_gguf_get_string(g, "general.architecture", NULL), "llama");
    amk_gguf_close(g);
    free(f);
    tw_free(&w);
    /* NULL handles are harmless */
    CHECK_EQ_INT(amk_gguf_n_kv(NULL), 0);
    CHECK(amk_gguf_find_tensor(NULL, "x") == NULL && amk_gguf_find_key(NULL, "x") == -1);
    amk_gguf_close(NULL);
}

/* ---- tensors ------------------------------------------------------------------------------------ */

#define N_QUANT 11
static const uint32_t quant_types[N_QUANT] = {AMK_GGML_Q8_0, AMK_GGML_Q4_0, AMK_GGML_Q4_1, AMK_GGML_Q5_0,
                                              AMK_GGML_Q5_1, AMK_GGML_Q2_K, AMK_GGML_Q3_K, AMK_GGML_Q4_K,
                                              AMK_GGML_Q5_K, AMK_GGML_Q6_K, AMK_GGML_IQ4_NL};

/* A file with a tensor of every supported type (plain, then quantized with 2 rows each), version
   v and alignment al (written as general.alignment when not 32). */
static void check_tensor_file(uint32_t v, uint64_t al) {
    tw_gguf w;
    unsigned char *blocks[N_QUANT], *f;
    float f32s[24];
    uint16_t f16s[32], bf16s[4];
    size_t n, data_start;
    amk_gguf *g = NULL;
    amk_diag d;
    int i, q;
    int64_t dims2[2], dims4[4] = {32, 2, 3, 2};
    unsigned char *q4d;
    char name[32];
    tw_init(&w, v);
    w.align = al;
    if (al != 32) tw_kv_u32(&w, "general.alignment", (uint32_t)al);
    for (i = 0; i < 24; i++) f32s[i] = rnd_sym() * 100.0f;
    for (i = 0; i < 32; i++) f16s[i] = amk_f32_to_f16(rnd_sym());
    for (i = 0; i < 4; i++) bf16s[i] = amk_f32_to_bf16(rnd_sym() * 1e10f);
    dims2[0] = 8; dims2[1] = 3;
    tw_tensor(&w, "t.f32", AMK_GGML_F32, 2, dims2, f32s, sizeof f32s);
    dims2[0] = 16; dims2[1] = 2;
    tw_tensor(&w, "t.f16", AMK_GGML_F16, 2, dims2, f16s, sizeof f16s);
    dims2[0] = 4;
    tw_tensor(&w, "t.bf16", AMK_GGML_BF16, 1, dims2, bf16s, sizeof bf16s);
    for (q = 0; q < N_QUANT; q++) {
        uint32_t t = quant_types[q];
        blocks[q] = random_blocks(t, 4);
        dims2[0] = 2 * blk_elems(t); dims2[1] = 2;
        snprintf(name, sizeof name, "t.%s", amk_gguf_type_name(t));
        tw_tensor(&w, name, t, 2, dims2, blocks[q], (size_t)(4 * blk_bytes(t)));
    }
    q4d = random_blocks(AMK_GGML_Q8_0, 12);
    tw_tensor(&w, "t.4d", AMK_GGML_Q8_0, 4, dims4, q4d, 12 * 34);
    f = tw_finish(&w, &n);
    data_start = n - w.data.n;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_gguf_parse(f, n, &g, &d), AMK_OK);
    if (!g) fprintf(stderr, "%s\n", d.message);
    if (g) {
    CHECK_EQ_INT(amk_gguf_version(g), v);
    CHECK_EQ_INT(amk_gguf_n_tensors(g), 4 + N_QUANT);
    for (i = 0; i < amk_gguf_n_tensors(g); i++) {
        const amk_gguf_tensor *t = amk_gguf_tensor_at(g, i);
        CHECK(t->offset % al == 0);
        CHECK((const unsigned char *)t->data == f + data_start + t->offset);
        CHECK(amk_gguf_find_tensor(g, t->name) == t);
    }
    CHECK(amk_gguf_tensor_at(g, 4 + N_QUANT) == NULL && amk_gguf_find_tensor(g, "t.nope") == NULL);
    {
        const amk_gguf_tensor *t = amk_gguf_find_tensor(g, "t.f32");
        float y[24];
        CHECK(t && t->type == AMK_GGML_F32 && t->n_dims == 2 && t->dims[0] == 8 && t->dims[1] == 3 &&
              t->dims[2] == 1 && t->nbytes == 96);
        CHECK_EQ_INT(amk_gguf_dequant(t->type, t->data, t->nbytes, 24, AMK_DTYPE_F32, y, &d), AMK_OK);
        CHECK(memcmp(y, f32s, sizeof y) == 0);
        t = amk_gguf_find_tensor(g, "t.f16");
        CHECK(t && t->type == AMK_GGML_F16 && t->nbytes == 64);
        {
            uint16_t back[32];
            float y32[32];
            CHECK_EQ_INT(amk_gguf_dequant(t->type, t->data, t->nbytes, 32, AMK_DTYPE_F16, back, &d), AMK_OK);
            CHECK(memcmp(back, f16s, sizeof back) == 0);
            CHECK_EQ_INT(amk_gguf_dequant(t->type, t->data, t->nbytes, 32, AMK_DTYPE_F32, y32, &d), AMK_OK);
            CHECK(y32[5] == amk_f16_to_f32(f16s[5]) && y32[31] == amk_f16_to_f32(f16s[31]));
        }
        t = amk_gguf_find_tensor(g, "t.bf16");
        CHECK(t && t->type == AMK_GGML_BF16 && t->n_dims == 1 && t->nbytes == 8);
        {
            float y4[4];
            uint16_t back[4];
            CHECK_EQ_INT(amk_gguf_dequant(t->type, t->data, t->nbytes, 4, AMK_DTYPE_F32, y4, &d), AMK_OK);
            CHECK(y4[3] == amk_bf16_to_f32(bf16s[3]));
            CHECK_EQ_INT(amk_gguf_dequant(t->type, t->data, t->nbytes, 4, AMK_DTYPE_BF16, back, &d), AMK_OK);
            CHECK(memcmp(back, bf16s, sizeof back) == 0);
        }
    }
    for (q = 0; q < N_QUANT; q++) {
        uint32_t ty = quant_types[q];
        const amk_gguf_tensor *t;
        snprintf(name, sizeof name, "t.%s", amk_gguf_type_name(ty));
        t = amk_gguf_find_tensor(g, name);
        CHECK(t && t->type == ty && t->dims[0] == 2 * blk_elems(ty) && t->dims[1] == 2);
        if (!t) continue;
        CHECK_EQ_INT(t->nbytes, 4 * blk_bytes(ty));
        CHECK(memcmp(t->data, blocks[q], (size_t)t->nbytes) == 0);
        check_dequant(ty, (const unsigned char *)t->data, 4);
    }
    {
        const amk_gguf_tensor *t = amk_gguf_find_tensor(g, "t.4d");
        CHECK(t && t->n_dims == 4 && t->dims[3] == 2 && t->nbytes == 12 * 34);
    }
    amk_gguf_close(g);
    }
    for (q = 0; q < N_QUANT; q++) free(blocks[q]);
    free(q4d);
    free(f);
    tw_free(&w);
}

static void test_tensors_v3(void) { check_tensor_file(3, 32); }
static void test_tensors_v2_align64(void) { check_tensor_file(2, 64); }
static void test_tensors_align24(void) { check_tensor_file(3, 24); } /* multiple of 8, not 2^k */

/* Many random blocks of each type against the double-precision reference. */
static void test_dequant_random_blocks(void) {
    int q;
    for (q = 0; q < N_QUANT; q++) {
        unsigned char *b = random_blocks(quant_types[q], 64);
        check_dequant(quant_types[q], b, 64);
        free(b);
    }
}

/* A zeroed Q4_K/Q5_K block's header: d = 1, dmin = 0.5; sub-block 0: sc 1, m 2; sub-block 5: sc
   37, m 45 (the high bits kept in scales[1] and scales[5]). */
static void k4_header(unsigned char *b, size_t n) {
    memset(b, 0, n);
    put_f16(b, 1.0f); put_f16(b + 2, 0.5f);
    b[4 + 0] = 1; b[4 + 4] = 2;
    b[4 + 9] = (37 & 15) | ((45 & 15) << 4);
    b[4 + 1] |= (37 >> 4) << 6;
    b[4 + 5] |= (45 >> 4) << 6;
}

/* Blocks computed by hand from the formulas. */
static void test_dequant_fixed_blocks(void) {
    unsigned char b[210];
    float y[256];
    amk_diag d;
    /* Q4_K: d = 1, dmin = 0.5; sub-block 0: sc 1, m 2; sub-block 5: sc 37, m 45 (uses the high
       bits kept in scales[1] and scales[5], which must not leak into sub-blocks 1 and 5's low
       fields). */
    k4_header(b, sizeof b);
    b[16 + 0] = 0x03;             /* y[0]: low nibble 3, sub-block 0 */
    b[16 + 64] = 0x70;            /* y[160]: chunk 2 high nibble 7, sub-block 5 */
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q4_K, b, 144, 256, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 2.0f);          /* 1*1*3 - 0.5*2 */
    CHECK(y[1] == -1.0f);         /* q 0 */
    CHECK(y[32] == 0.0f);         /* sub-block 1: sc = m = 0 (only high bits set in its bytes) */
    CHECK(y[128] == 0.0f);        /* sub-block 4: sc = m = 0 */
    CHECK(y[160] == 236.5f);      /* 1*37*7 - 0.5*45 */
    CHECK(y[161] == -22.5f);
    /* Q6_K: d = 0.5 (last!), scales[0] = 2, scales[2] = -3, scales[4] = 1 */
    memset(b, 0, sizeof b);
    put_f16(b + 208, 0.5f);
    b[192 + 0] = 2; b[192 + 2] = (unsigned char)-3; b[192 + 4] = 1;
    b[0] = 0x05; b[128] = 2 | 1 << 2;   /* y[0]: q = 5 | 2<<4 = 37 */
    b[32] = 0x0F;                        /* y[32]: q = 15 | 1<<4 = 31 */
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q6_K, b, 210, 256, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 5.0f);          /* 0.5*2*(37-32) */
    CHECK(y[32] == 1.5f);         /* 0.5*-3*(31-32) */
    CHECK(y[64] == -16.0f);       /* 0.5*1*(0-32) */
    CHECK(y[128] == 0.0f);        /* scales[8] = 0 */
    /* Q4_0: d = 2, qs[0] = 0x9A */
    memset(b, 0, sizeof b);
    put_f16(b, 2.0f); b[2] = 0x9A;
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q4_0, b, 18, 32, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 4.0f && y[16] == 2.0f && y[1] == -16.0f);
    /* Q4_1: d = 2, m = -1, qs[0] = 0x9A */
    put_f16(b + 2, -1.0f); b[2] = 0; b[4] = 0x9A;
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q4_1, b, 20, 32, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 19.0f && y[16] == 17.0f && y[1] == -1.0f);
    /* Q5_0: d = 1, qh bits 0 and 16, qs[0] = 0x21 */
    memset(b, 0, sizeof b);
    put_f16(b, 1.0f); b[2] = 1; b[4] = 1; b[6] = 0x21;
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q5_0, b, 22, 32, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 1.0f && y[16] == 2.0f && y[1] == -16.0f);
    /* Q5_1: d = 1, m = 0.5, qh bit 31, qs[15] = 0xF0 */
    memset(b, 0, sizeof b);
    put_f16(b, 1.0f); put_f16(b + 2, 0.5f); b[7] = 0x80; b[8 + 15] = 0xF0;
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q5_1, b, 24, 32, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[31] == 31.5f && y[15] == 0.5f);
    /* Q8_0: d = 0.25 */
    memset(b, 0, sizeof b);
    put_f16(b, 0.25f); b[2] = (unsigned char)-128; b[33] = 127;
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q8_0, b, 34, 32, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == -32.0f && y[31] == 31.75f && y[1] == 0.0f);
    /* Q5_K: Q4_K's block with qh[32] before qs (at 48). d = 1, dmin = 0.5; sub-block 0: sc 1, m 2;
       sub-block 5: sc 37, m 45; qh[0] bit 0 (y[0]'s 5th bit) and qh[0] bit 5 (y[160]'s: chunk 2,
       high half) */
    k4_header(b, sizeof b);
    b[16 + 0] = 1 | 1 << 5;
    b[48 + 0] = 0x03;             /* y[0]: low nibble 3 + 16 */
    b[48 + 64] = 0x70;            /* y[160]: 7 + 16 */
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q5_K, b, 176, 256, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 18.0f);         /* 1*1*19 - 0.5*2 */
    CHECK(y[1] == -1.0f);         /* q 0, no 5th bit */
    CHECK(y[32] == 0.0f);         /* sub-block 1: sc = m = 0 */
    CHECK(y[160] == 828.5f);      /* 1*37*23 - 0.5*45 */
    CHECK(y[161] == -22.5f);
    CHECK(y[192] == 0.0f);        /* chunk 3, low half: qh[0] bit 6 clear, sub-block 6 zero */
    /* Q2_K: scales[16] first (scale low nibble, min high), qs[64], d = 0.5 at 80, dmin = 0.25 at 82.
       Sub-block 0: scale 3, min 2; sub-block 3 (half 0, j 1, second 16): scale 5, min 1; sub-block
       9 (half 1, j 0, second 16): scale 7, min 0 */
    memset(b, 0, sizeof b);
    put_f16(b + 80, 0.5f); put_f16(b + 82, 0.25f);
    b[0] = 3 | 2 << 4; b[3] = 5 | 1 << 4; b[9] = 7;
    b[16 + 0] = 2;                /* y[0]: bits 0-1 of qs[0] = 2 */
    b[16 + 16 + 4] = 3 << 2;      /* y[32 + 16 + 4]: bits 2-3 of qs[20] = 3 */
    b[16 + 32 + 16 + 1] = 1;      /* y[128 + 16 + 1]: bits 0-1 of qs[49] = 1 */
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q2_K, b, 84, 256, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 2.5f);          /* 0.5*3*2 - 0.25*2 */
    CHECK(y[1] == -0.5f);         /* q 0 */
    CHECK(y[52] == 7.25f);        /* 0.5*5*3 - 0.25*1 */
    CHECK(y[145] == 3.5f);        /* 0.5*7*1 */
    CHECK(y[16] == 0.0f);         /* sub-block 1 zero */
    /* Q3_K: hmask[32], qs[64], scales[12], d = 0.5 at 108. Scale 0 is 33 (low nibble 1 in scales[0],
       high bits 2 in scales[8] bits 0-1), so 1; scale 13 (half 1, j 2, second 16) is 20 (low nibble
       4 in the high nibble of scales[5], high bits 1 in scales[9] bits 6-7), so -12. */
    memset(b, 0, sizeof b);
    put_f16(b + 108, 0.5f);
    b[96 + 0] = 1; b[96 + 8] = 2;                 /* scale 0: 1 | 2 << 4 = 33, less 32: 1 */
    b[96 + 5] = 4 << 4; b[96 + 9] = 1 << 6;       /* scale 13: 4 | 1 << 4 = 20, less 32: -12 */
    b[32 + 0] = 3;                                /* y[0]: q 3, hmask[0] bit 0 set: 3 */
    b[0] = 1;
    b[32 + 32 + 16 + 2] = 2 << 4;                 /* y[128 + 64 + 16 + 2]: q 2, hmask[18] bit 6 clear: -2 */
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q3_K, b, 110, 256, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == 1.5f);          /* 0.5*1*3 */
    CHECK(y[1] == -2.0f);         /* q 0, hmask bit clear: -4 */
    CHECK(y[210] == 12.0f);       /* 0.5*-12*-2 */
    /* IQ4_NL: d = 0.5, qs[0] = 0xF0 (y[0] level 0 = -127, y[16] level 15 = 113) */
    memset(b, 0, sizeof b);
    put_f16(b, 0.5f); b[2] = 0xF0;
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_IQ4_NL, b, 18, 32, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK(y[0] == -63.5f && y[16] == 56.5f && y[1] == -63.5f);
}

static void test_dequant_errors(void) {
    unsigned char b[144];
    float y[256];
    amk_diag d;
    memset(b, 0, sizeof b);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q8_0, b, 34, 31, AMK_DTYPE_F32, y, &d), AMK_ERR_INVALID_ARG);
    CHECK(strstr(d.message, "block size 32") != NULL);
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q8_0, b, 33, 32, AMK_DTYPE_F32, y, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q8_0, b, 34, -32, AMK_DTYPE_F32, y, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q8_0, b, 34, 32, AMK_DTYPE_I32, y, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_gguf_dequant(16 /* IQ2_XXS */, b, 144, 256, AMK_DTYPE_F32, y, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "IQ2_XXS") != NULL);
    CHECK_EQ_INT(amk_gguf_dequant(4, b, 144, 32, AMK_DTYPE_F32, y, &d), AMK_ERR_UNSUPPORTED);
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q4_K, b, 144, INT64_MAX - 255, AMK_DTYPE_F32, y, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_gguf_dequant(AMK_GGML_Q4_K, b, 144, 0, AMK_DTYPE_F32, y, &d), AMK_OK);
    CHECK_STR(amk_gguf_type_name(12), "Q4_K");
    CHECK_STR(amk_gguf_type_name(30), "BF16");
    CHECK_STR(amk_gguf_type_name(4), "?");
    CHECK_STR(amk_gguf_type_name(1000), "?");
}

/* ---- corrupt, truncated and hostile files ------------------------------------------------------ */

/* A small valid file: a few kvs (one string array) and two tensors. */
static unsigned char *small_file(size_t *n) {
    tw_gguf w;
    static const char *const toks[3] = {"<s>", "a", "bc"};
    unsigned char q8[2 * 34], *f;
    float v[4] = {1, 2, 3, 4};
    int64_t d1[1] = {4}, d2[2] = {32, 2};
    memset(q8, 0x11, sizeof q8);
    tw_init(&w, 3);
    tw_kv_str(&w, "general.architecture", "llama");
    tw_kv_u32(&w, "llama.block_count", 2);
    tw_kv_strs(&w, "tokenizer.ggml.tokens", 3, toks);
    tw_tensor(&w, "norm", AMK_GGML_F32, 1, d1, v, sizeof v);
    tw_tensor(&w, "w", AMK_GGML_Q8_0, 2, d2, q8, sizeof q8);
    f = tw_finish(&w, n);
    tw_free(&w);
    return f;
}

static void test_every_prefix_fails(void) {
    size_t n, k;
    unsigned char *f = small_file(&n);
    amk_gguf *g = NULL;
    amk_diag d;
    int bad = 0;
    for (k = 0; k < n && bad < 3; k++) {
        amk_result r = parse_copy(f, k, &d);
        if (r != AMK_ERR_PARSE) {
            bad++;
            CHECK_MSG(0, "prefix %zu: %s", k, amk_result_str(r));
        }
    }
    CHECK_EQ_INT(amk_gguf_parse(f, n, &g, &d), AMK_OK);
    amk_gguf_close(g);
    CHECK_EQ_INT(amk_gguf_parse(NULL, 0, &g, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(amk_gguf_parse(NULL, 5, &g, &d), AMK_ERR_INVALID_ARG);
    free(f);
}

/* Every single-byte change of the small file either parses or fails cleanly. */
static void test_byte_flips(void) {
    size_t n, k;
    unsigned char *f = small_file(&n), *c = (unsigned char *)malloc(n);
    static const unsigned char vals[4] = {0x00, 0xFF, 0x80, 0x07};
    int v;
    for (k = 0; k < n; k++)
        for (v = 0; v < 4; v++) {
            amk_gguf *g = NULL;
            memcpy(c, f, n);
            c[k] = vals[v];
            if (amk_gguf_parse(c, n, &g, NULL) == AMK_OK) {
                int i;
                for (i = 0; i < amk_gguf_n_tensors(g); i++) CHECK(amk_gguf_tensor_at(g, i)->data != NULL);
                amk_gguf_close(g);
            } else {
                CHECK(g == NULL);
            }
        }
    free(c);
    free(f);
}

static void test_bad_header(void) {
    size_t n;
    unsigned char *f = small_file(&n);
    amk_gguf *g = NULL;
    amk_diag d;
    f[3] = 'X';
    CHECK_EQ_INT(parse_copy(f, n, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "not a GGUF file") != NULL);
    f[3] = 'F';
    f[4] = 1; /* version 1 */
    CHECK_EQ_INT(parse_copy(f, n, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "version 1") != NULL);
    f[4] = 0; f[7] = 3; /* big-endian version 3 */
    CHECK_EQ_INT(parse_copy(f, n, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "big-endian") != NULL);
    f[4] = 7; f[7] = 0;
    CHECK_EQ_INT(parse_copy(f, n, &d), AMK_ERR_UNSUPPORTED);
    CHECK(g == NULL);
    free(f);
}

/* Counts far beyond the file fail before anything is allocated for them (ASan would report an
   allocation of 2^62 elements as an error). */
static void test_huge_counts(void) {
    tw_gguf w;
    tw_buf *b;
    size_t n;
    unsigned char *f;
    amk_diag d;
    tw_init(&w, 3);
    w.n_tensors = 1ull << 62;
    expect_fail(&w, AMK_ERR_PARSE, "tensor count 4611686018427387904");
    w.n_tensors = 0;
    w.n_kv = 1ull << 62;
    expect_fail(&w, AMK_ERR_PARSE, "metadata count");
    tw_free(&w);
    tw_init(&w, 3);
    b = tw_key(&w, "big", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_STRING); tw_u64(b, 1ull << 62);
    expect_fail(&w, AMK_ERR_PARSE, "key 'big': array of 4611686018427387904 STRING elements");
    tw_free(&w);
    tw_init(&w, 3);
    b = tw_key(&w, "big", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_UINT32); tw_u64(b, UINT64_MAX);
    expect_fail(&w, AMK_ERR_PARSE, "runs past the end");
    tw_free(&w);
    tw_init(&w, 3);
    b = tw_key(&w, "big", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 1000);
    expect_fail(&w, AMK_ERR_PARSE, "key 'big'");
    tw_free(&w);
    /* a string length past the end, in a key and in a value */
    tw_init(&w, 3);
    tw_kv_str(&w, "k", "v");
    f = tw_finish(&w, &n);
    f[24] = 0xFF; /* key length low byte: 255 */
    CHECK_EQ_INT(parse_copy(f, n, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "string length 255") != NULL);
    free(f);
    f = tw_finish(&w, &n);
    f[24 + 8 + 1 + 4] = 0x40; /* value length: 64 */
    CHECK_EQ_INT(parse_copy(f, n, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "string length 64") != NULL);
    free(f);
    tw_free(&w);
}

static void test_bad_values(void) {
    tw_gguf w;
    tw_buf *b;
    int i;
    tw_init(&w, 3);
    tw_u32(tw_key(&w, "weird", 13), 0);
    expect_fail(&w, AMK_ERR_PARSE, "key 'weird': unknown value type 13");
    tw_free(&w);
    tw_init(&w, 3);
    b = tw_key(&w, "weird", AMK_GGUF_ARRAY); tw_u32(b, 77); tw_u64(b, 0);
    expect_fail(&w, AMK_ERR_PARSE, "unknown array element type 77");
    tw_free(&w);
    tw_init(&w, 3);
    tw_kv_bool(&w, "flag", 2);
    expect_fail(&w, AMK_ERR_PARSE, "key 'flag': bool value 2");
    tw_free(&w);
    tw_init(&w, 3);
    tw_kv_u32(&w, "dup", 1);
    tw_kv_u32(&w, "dup", 2);
    expect_fail(&w, AMK_ERR_PARSE, "duplicate metadata key 'dup'");
    tw_free(&w);
    /* arrays nested 5 deep fail, 4 deep parse */
    tw_init(&w, 3);
    b = tw_key(&w, "deep", AMK_GGUF_ARRAY);
    for (i = 0; i < 4; i++) { tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 1); }
    tw_u32(b, AMK_GGUF_INT32); tw_u64(b, 0);
    expect_fail(&w, AMK_ERR_PARSE, "nested deeper than 4");
    tw_free(&w);
    {
        size_t n;
        unsigned char *f;
        amk_gguf *g = NULL;
        tw_init(&w, 3);
        b = tw_key(&w, "deep", AMK_GGUF_ARRAY);
        for (i = 0; i < 3; i++) { tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 1); }
        tw_u32(b, AMK_GGUF_INT32); tw_u64(b, 0);
        f = tw_finish(&w, &n);
        CHECK_EQ_INT(parse_copy(f, n, NULL), AMK_OK);
        amk_gguf_close(g);
        free(f);
        tw_free(&w);
    }
    /* alignment: not a multiple of 8, zero, a string */
    tw_init(&w, 3);
    tw_kv_u32(&w, "general.alignment", 12);
    expect_fail(&w, AMK_ERR_PARSE, "general.alignment");
    tw_free(&w);
    tw_init(&w, 3);
    tw_kv_u32(&w, "general.alignment", 0);
    expect_fail(&w, AMK_ERR_PARSE, "general.alignment");
    tw_free(&w);
    tw_init(&w, 3);
    tw_kv_str(&w, "general.alignment", "32");
    expect_fail(&w, AMK_ERR_PARSE, "general.alignment");
    tw_free(&w);
}

/* Writes one raw tensor info (no data) into w. */
static void raw_info(tw_gguf *w, const char *name, uint32_t n_dims, const uint64_t *dims,
                     uint32_t type, uint64_t offset) {
    uint32_t i;
    w->n_tensors++;
    tw_str(&w->info, name);
    tw_u32(&w->info, n_dims);
    for (i = 0; i < n_dims && i < 8; i++) tw_u64(&w->info, dims[i]);
    tw_u32(&w->info, type);
    tw_u64(&w->info, offset);
}

static void test_bad_tensors(void) {
    tw_gguf w;
    unsigned char data[256];
    uint64_t dims[5] = {32, 2, 1, 1, 1}, big[3] = {1ull << 32, 1ull << 32, 1ull << 32};
    memset(data, 0, sizeof data);
#define BAD_TENSOR(setup, want) do { tw_init(&w, 3); tw_put(&w.data, data, sizeof data); setup; \
        expect_fail(&w, AMK_ERR_PARSE, want); tw_free(&w); } while (0)
    BAD_TENSOR(raw_info(&w, "blk.3.attn_q.weight", 2, dims, 4, 0),
               "tensor 'blk.3.attn_q.weight': unknown ggml type code 4");
    BAD_TENSOR(raw_info(&w, "x", 2, dims, 99, 0), "tensor 'x': unknown ggml type code 99");
    BAD_TENSOR(raw_info(&w, "x", 5, dims, 0, 0), "tensor 'x': 5 dimensions");
    BAD_TENSOR(raw_info(&w, "x", 0, dims, 0, 0), "tensor 'x': 0 dimensions");
    BAD_TENSOR(raw_info(&w, "x", 3, big, 0, 0), "tensor 'x': element count overflows");
    big[0] = 1ull << 62;
    BAD_TENSOR(raw_info(&w, "x", 1, big, 0, 0), "tensor 'x': byte size overflows");
    big[0] = 1ull << 63;
    BAD_TENSOR(raw_info(&w, "x", 1, big, 0, 0), "tensor 'x': dimension 0 is 9223372036854775808");
    dims[1] = 0;
    BAD_TENSOR(raw_info(&w, "x", 2, dims, 0, 0), "tensor 'x': dimension 1 is 0");
    dims[1] = 2;
    dims[0] = 48;
    BAD_TENSOR(raw_info(&w, "x", 2, dims, AMK_GGML_Q8_0, 0),
               "tensor 'x': row length 48 is not a multiple of the Q8_0 block size 32");
    dims[0] = 32;
    BAD_TENSOR((raw_info(&w, "a", 1, dims, 0, 0), raw_info(&w, "a", 1, dims, 0, 128)),
               "duplicate tensor name 'a'");
    BAD_TENSOR(raw_info(&w, "blk.3.attn_q.weight", 2, dims, 0, 32),
               "tensor 'blk.3.attn_q.weight': data [offset 32, 256 bytes] runs past the end of the file");
    BAD_TENSOR(raw_info(&w, "x", 1, dims, 0, 8), "tensor 'x': offset 8 is not a multiple of the alignment 32");
    BAD_TENSOR(raw_info(&w, "x", 1, dims, 0, UINT64_MAX - 31), "runs past the end");
    BAD_TENSOR((w.n_tensors++, tw_strn(&w.info, "x\0y", 3), tw_u32(&w.info, 1), tw_u64(&w.info, 4),
                tw_u32(&w.info, 0), tw_u64(&w.info, 0)), "name holds a NUL byte");
#undef BAD_TENSOR
}

/* The size each tensor's type and shape imply against the file's data region (issue 38): in offset
   order one tensor's data must start where the one before ends (rounded up to the alignment), and
   the last end within the alignment of the file's end. A Q8_0 [256] tensor (272 bytes, the next at
   288) relabelled F16 (512 bytes) overlaps the next; an F16 [256] relabelled Q8_0 leaves 240 of
   its bytes unread. Bytes after the last tensor are ignored (as llama.cpp's reader does). */
static void test_tensor_layout(void) {
    tw_gguf w;
    unsigned char data[1024];
    uint64_t a256[1] = {256}, b32[1] = {32}, c128[1] = {128};
    memset(data, 0, sizeof data);
#define LAYOUT(nbytes, setup) do { tw_init(&w, 3); tw_put(&w.data, data, (nbytes)); setup; } while (0)
    /* as written: a Q8_0 [256] at 0 (272 bytes), b F32 [32] at 288 (128 bytes): the file ends at 416 */
    LAYOUT(416, (raw_info(&w, "a", 1, a256, AMK_GGML_Q8_0, 0), raw_info(&w, "b", 1, b32, AMK_GGML_F32, 288)));
    expect_ok(&w);
    tw_free(&w);
    /* the info order need not be the data order */
    LAYOUT(416, (raw_info(&w, "b", 1, b32, AMK_GGML_F32, 288), raw_info(&w, "a", 1, a256, AMK_GGML_Q8_0, 0)));
    expect_ok(&w);
    tw_free(&w);
    LAYOUT(928, (raw_info(&w, "a", 1, a256, AMK_GGML_F16, 0), raw_info(&w, "b", 1, b32, AMK_GGML_F32, 288),
                 raw_info(&w, "c", 1, c128, AMK_GGML_F32, 416)));
    expect_fail(&w, AMK_ERR_PARSE, "tensor 'a': F16 of 256 elements needs 512 bytes from offset 0, past the start "
                "of tensor 'b' at offset 288 (its type or shape does not match its data)");
    tw_free(&w);
    LAYOUT(640, (raw_info(&w, "a", 1, a256, AMK_GGML_Q8_0, 0), raw_info(&w, "b", 1, b32, AMK_GGML_F32, 512)));
    expect_fail(&w, AMK_ERR_PARSE, "tensor 'a': Q8_0 of 256 elements needs 272 bytes from offset 0, but tensor 'b' "
                "starts 512 bytes later");
    tw_free(&w);
    /* bytes after the last tensor: ignored, as llama.cpp's reader does (a last tensor past the
       file's end fails in amk__gguf_place) */
    LAYOUT(1024, (raw_info(&w, "a", 1, a256, AMK_GGML_Q8_0, 0), raw_info(&w, "b", 1, b32, AMK_GGML_F32, 288)));
    expect_ok(&w);
    tw_free(&w);
    LAYOUT(400, (raw_info(&w, "a", 1, a256, AMK_GGML_Q8_0, 0), raw_info(&w, "b", 1, b32, AMK_GGML_F32, 288)));
    expect_fail(&w, AMK_ERR_PARSE, "tensor 'b': data [offset 288, 128 bytes] runs");
    tw_free(&w);
    LAYOUT(416, (raw_info(&w, "a", 1, a256, AMK_GGML_Q8_0, 0), raw_info(&w, "b", 1, b32, AMK_GGML_F32, 0)));
    expect_fail(&w, AMK_ERR_PARSE, "past the start of tensor 'b' at offset 0"); /* two at one offset */
    tw_free(&w);
#undef LAYOUT
}

static void test_open_file(void) {
    char path[64];
    size_t n;
    unsigned char *f = small_file(&n);
    amk_gguf *g = NULL;
    amk_diag d;
    snprintf(path, sizeof path, "/tmp/amk_test_gguf_%ld.gguf", (long)getpid());
    CHECK(tw_write_file(path, f, n));
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_gguf_open(path, &g, &d), AMK_OK);
    if (g) {
        const amk_gguf_tensor *t = amk_gguf_find_tensor(g, "norm");
        float y[4];
        CHECK(t && t->nbytes == 16);
        if (t) {
            CHECK_EQ_INT(amk_gguf_dequant(t->type, t->data, t->nbytes, 4, AMK_DTYPE_F32, y, &d), AMK_OK);
            CHECK(y[0] == 1.0f && y[3] == 4.0f);
        }
        CHECK_EQ_INT(amk_gguf_array_len(g, "tokenizer.ggml.tokens", NULL), 3);
        amk_gguf_close(g);
    }
    /* truncated on disk: the message names the file and the tensor */
    CHECK(tw_write_file(path, f, n - 1));
    CHECK_EQ_INT(amk_gguf_open(path, &g, &d), AMK_ERR_PARSE);
    CHECK(g == NULL);
    CHECK(strncmp(d.message, "'/tmp/amk_test_gguf_", 20) == 0);
    CHECK(strstr(d.message, "tensor 'w'") != NULL);
    CHECK(strstr(d.path, "/tmp/amk_test_gguf_") == d.path);
    CHECK(tw_write_file(path, f, 0));
    CHECK_EQ_INT(amk_gguf_open(path, &g, &d), AMK_ERR_PARSE);
    remove(path);
    CHECK_EQ_INT(amk_gguf_open(path, &g, &d), AMK_ERR_IO);
    CHECK(strstr(d.message, path) != NULL);
    free(f);
}

/* Hash lookups stay right with many names. */
static void test_many_names(void) {
    tw_gguf w;
    size_t n;
    unsigned char *f;
    amk_gguf *g = NULL;
    char name[32];
    int i, ok = 1;
    int64_t dims[1] = {1};
    float one = 1.0f;
    tw_init(&w, 3);
    w.align = 8;
    tw_kv_u32(&w, "general.alignment", 8);
    for (i = 0; i < 2000; i++) {
        snprintf(name, sizeof name, "key.%d", i);
        tw_kv_i32(&w, name, i);
        snprintf(name, sizeof name, "blk.%d.w", i);
        tw_tensor(&w, name, AMK_GGML_F32, 1, dims, &one, 4);
    }
    f = tw_finish(&w, &n);
    CHECK_EQ_INT(amk_gguf_parse(f, n, &g, NULL), AMK_OK);
    if (g) {
        for (i = 0; i < 2000; i++) {
            int64_t v = -1;
            snprintf(name, sizeof name, "key.%d", i);
            if (!amk_gguf_get_int(g, name, &v) || v != i || amk_gguf_find_key(g, name) != i + 1) ok = 0;
            snprintf(name, sizeof name, "blk.%d.w", i);
            if (amk_gguf_find_tensor(g, name) != amk_gguf_tensor_at(g, i)) ok = 0;
        }
        CHECK(ok);
        CHECK(amk_gguf_find_tensor(g, "blk.2000.w") == NULL);
        amk_gguf_close(g);
    }
    free(f);
    tw_free(&w);
}

/* ---- fuzz seeds ------------------------------------------------------------------------------- */

/* A one-layer Llama (hidden 32, 2 heads, 1 KV head, vocab 4) with Q8_0 matrices: reaches the
   fuzzer's model path. */
static unsigned char *tiny_llama(size_t *n) {
    static const char *const mats[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                        "ffn_up", "ffn_down"};
    static const int rows[7] = {32, 16, 16, 32, 32, 32, 32};
    tw_gguf w;
    float ones[32];
    int64_t dims[2];
    unsigned char *blk, *f;
    char name[32];
    int i;
    for (i = 0; i < 32; i++) ones[i] = 1.0f;
    tw_init(&w, 3);
    tw_kv_str(&w, "general.architecture", "llama");
    tw_kv_u32(&w, "llama.block_count", 1);
    tw_kv_u32(&w, "llama.context_length", 64);
    tw_kv_u32(&w, "llama.embedding_length", 32);
    tw_kv_u32(&w, "llama.feed_forward_length", 32);
    tw_kv_u32(&w, "llama.attention.head_count", 2);
    tw_kv_u32(&w, "llama.attention.head_count_kv", 1);
    tw_kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tw_kv_u32(&w, "llama.vocab_size", 4);
    blk = random_blocks(AMK_GGML_Q8_0, 32);
    dims[0] = 32; dims[1] = 4;
    tw_tensor(&w, "token_embd.weight", AMK_GGML_Q8_0, 2, dims, blk, 4 * 34);
    tw_tensor(&w, "output_norm.weight", AMK_GGML_F32, 1, dims, ones, sizeof ones);
    tw_tensor(&w, "blk.0.attn_norm.weight", AMK_GGML_F32, 1, dims, ones, sizeof ones);
    tw_tensor(&w, "blk.0.ffn_norm.weight", AMK_GGML_F32, 1, dims, ones, sizeof ones);
    for (i = 0; i < 7; i++) {
        dims[1] = rows[i];
        snprintf(name, sizeof name, "blk.0.%s.weight", mats[i]);
        tw_tensor(&w, name, AMK_GGML_Q8_0, 2, dims, blk, (size_t)rows[i] * 34);
    }
    free(blk);
    f = tw_finish(&w, n);
    tw_free(&w);
    return f;
}

static void test_tiny_llama_parses(void) {
    size_t n;
    unsigned char *f = tiny_llama(&n);
    amk_gguf *g = NULL;
    CHECK_EQ_INT(amk_gguf_parse(f, n, &g, NULL), AMK_OK);
    CHECK_EQ_INT(amk_gguf_n_tensors(g), 11);
    amk_gguf_close(g);
    free(f);
}

static void write_seeds(const char *dir) {
    char path[512];
    size_t n;
    unsigned char *f = small_file(&n);
    tw_gguf w;
    tw_buf *b;
    int q;
    int64_t dims[2];
    snprintf(path, sizeof path, "%s/small.gguf", dir);
    tw_write_file(path, f, n);
    free(f);
    /* one tensor of each supported type, v2, alignment 64 */
    tw_init(&w, 2);
    w.align = 64;
    tw_kv_u32(&w, "general.alignment", 64);
    for (q = 0; q < 7; q++) {
        char name[16];
        unsigned char *blk = random_blocks(quant_types[q], 1);
        dims[0] = blk_elems(quant_types[q]); dims[1] = 1;
        snprintf(name, sizeof name, "t%d", q);
        tw_tensor(&w, name, quant_types[q], 2, dims, blk, (size_t)blk_bytes(quant_types[q]));
        free(blk);
    }
    f = tw_finish(&w, &n);
    snprintf(path, sizeof path, "%s/quants_v2.gguf", dir);
    tw_write_file(path, f, n);
    free(f);
    tw_free(&w);
    /* metadata of every type */
    tw_init(&w, 3);
    tw_u8(tw_key(&w, "u8", AMK_GGUF_UINT8), 1);
    tw_u16(tw_key(&w, "i16", AMK_GGUF_INT16), 2);
    tw_kv_f32(&w, "f32", 1.0f);
    tw_f64(tw_key(&w, "f64", AMK_GGUF_FLOAT64), 2.0);
    tw_u64(tw_key(&w, "u64", AMK_GGUF_UINT64), 3);
    tw_kv_bool(&w, "b", 1);
    b = tw_key(&w, "nest", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_ARRAY); tw_u64(b, 1);
    tw_u32(b, AMK_GGUF_STRING); tw_u64(b, 2); tw_str(b, "x"); tw_str(b, "yz");
    b = tw_key(&w, "a", AMK_GGUF_ARRAY); tw_u32(b, AMK_GGUF_INT64); tw_u64(b, 2); tw_u64(b, 5); tw_u64(b, 6);
    f = tw_finish(&w, &n);
    snprintf(path, sizeof path, "%s/metadata.gguf", dir);
    tw_write_file(path, f, n);
    free(f);
    tw_free(&w);
    f = tiny_llama(&n);
    snprintf(path, sizeof path, "%s/tiny_llama.gguf", dir);
    tw_write_file(path, f, n);
    free(f);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) { write_seeds(argv[2]); return 0; }
    RUN(test_metadata_types);
    RUN(test_tensors_v3);
    RUN(test_tensors_v2_align64);
    RUN(test_tensors_align24);
    RUN(test_dequant_random_blocks);
    RUN(test_dequant_fixed_blocks);
    RUN(test_dequant_errors);
    RUN(test_every_prefix_fails);
    RUN(test_byte_flips);
    RUN(test_bad_header);
    RUN(test_huge_counts);
    RUN(test_bad_values);
    RUN(test_bad_tensors);
    RUN(test_tensor_layout);
    RUN(test_open_file);
    RUN(test_many_names);
    RUN(test_tiny_llama_parses);
    TEST_SUMMARY();
}
