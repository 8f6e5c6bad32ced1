/* amk_core.h - AMK's base layer. Part of AMK (amk.h is the umbrella and has the library's manual:
   usage, config, errors, memory, threading, and the list of layers).

   WHAT IT DOES
     Results and caller-owned diagnostics (amk_result, amk_diag), the allocator macros, checked
     size arithmetic for every size read from a file, a string builder, file reading and mapping,
     the dtype names and scalar conversions every backend shares (round to nearest even), random
     numbers, UTF-8, and the strict JSON DOM that the program file, config.json, tokenizer.json
     and safetensors headers are parsed with (depth-limited, never crashes on input).
   WHAT IT DOES NOT DO
     Know anything about programs, models or GPUs: every other layer builds on it.
   CONTENTS
     declarations >>config >>api >>util >>dtypes | implementation >>impl_common >>impl_jsondom */
#ifndef AMK_CORE_H
#define AMK_CORE_H


/* why: mmap/fstat are POSIX; under -std=c99 glibc hides them unless asked before the first system
   header. Include amk.h first in the implementation file, or define _POSIX_C_SOURCE yourself. */
#if defined(AMK_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>
#include "amk_ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>config ================================================================================ */
#ifndef AMK_API
#ifdef AMK_STATIC
#define AMK_API static
#else
#define AMK_API extern
#endif
#endif

#define AMK_VERSION_STRING "0.1.0"


/* ==== >>api: results and diagnostics ========================================================== */

typedef enum amk_result {
    AMK_OK = 0,
    AMK_ERR_INVALID_ARG,   /* a caller passed a NULL or out-of-range argument */
    AMK_ERR_OUT_OF_MEMORY, /* an allocation failed */
    AMK_ERR_IO,            /* a file could not be opened, read, mapped or written */
    AMK_ERR_PARSE,         /* malformed input: JSON, safetensors, GGUF, ... (diag has where) */
    AMK_ERR_VERSION,       /* ir_version major mismatch */
    AMK_ERR_REJECTED,      /* validate rejected the program (diag/report has every reason) */
    AMK_ERR_STUCK,         /* a counter walk could not make progress (deadlock) */
    AMK_ERR_RUNTIME,       /* a value met at run time is out of range (a token id, a position) */
    AMK_ERR_NOT_FOUND,     /* a named tensor or entry is missing */
    AMK_ERR_MISMATCH,      /* a tensor's dtype or shape does not match its buffer */
    AMK_ERR_UNSUPPORTED,   /* valid input this build cannot handle */
    AMK_ERR_NO_DRIVER,     /* no CUDA driver on this machine */
    AMK_ERR_CUDA,          /* a CUDA driver call failed (diag has the error name) */
    AMK_ERR_TIMEOUT,       /* a launch exceeded its timeout and was aborted */
    AMK_RESULT_COUNT
} amk_result;

/* A short English description of a result code; never NULL. */
AMK_API const char *amk_result_str(amk_result r);

/* Caller-owned diagnostic filled by fallible calls (pass NULL to skip). Fields that do not apply
   are -1 (ids) or 0/empty. */
typedef struct amk_diag {
    amk_result result;
    char check[32];  /* validator check id ("RACE_READ", ...) or "" */
    int task;        /* task index in program order, -1 if none */
    int buffer;      /* buffer id, -1 if none */
    int counter;     /* counter id, -1 if none */
    int line, col;   /* 1-based location in JSON text, 0 if none */
    char path[192];  /* JSON path like /tasks/17/waits/0, or a file name, "" if none */
    char message[512];
    char cuda_error[64];
    char jit_log[2048];
} amk_diag;

/* Resets every field of d to "nothing to report". */
AMK_API void amk_diag_clear(amk_diag *d);

/* Frees memory the library returned to the caller (JSON text, ...). NULL is fine. */
AMK_API void amk_free(void *ptr);

/* ==== >>util: checked sizes, files, shapes, random numbers ====================================== */

/* Size arithmetic: 1 and *out = a + b (a * b) when a, b >= 0 and the result fits int64_t; else 0
   and *out untouched. out may be NULL (the check alone). */
AMK_API int amk_add_i64(int64_t a, int64_t b, int64_t *out);
AMK_API int amk_mul_i64(int64_t a, int64_t b, int64_t *out);

/* Reads a whole file into *data (NUL-terminated after *size bytes; free it with amk_free).
   AMK_ERR_IO (diag names the file and the cause), AMK_ERR_OUT_OF_MEMORY, AMK_ERR_INVALID_ARG. */
AMK_API amk_result amk_file_read(const char *path, char **data, size_t *size, amk_diag *d);
/* Writes size bytes of data to path (created or truncated). AMK_ERR_IO, AMK_ERR_INVALID_ARG. */
AMK_API amk_result amk_file_write(const char *path, const void *data, size_t size, amk_diag *d);

/* "[3, 4]" ("[]" for rank <= 0 or a NULL shape) into buf, NUL-terminated, truncated if it does not
   fit; nothing for a NULL buf or size 0. */
AMK_API void amk_shape_format(char *buf, size_t size, const int64_t *shape, int rank);

/* The library's seeded random numbers (xoshiro256**, seeded through splitmix64): the generator
   behind amk run --random and random weights, so a seed gives the same numbers everywhere. Plain
   state, no allocation; an unseeded one must not be used. A NULL r: no-op, results 0. */
typedef struct amk_rng { uint64_t s[4]; } amk_rng;
AMK_API void amk_rng_seed(amk_rng *r, uint64_t seed);
AMK_API uint64_t amk_rng_next_u64(amk_rng *r);         /* the next 64 random bits */
AMK_API uint64_t amk_rng_below(amk_rng *r, uint64_t n); /* in [0, n) (by modulo); 0 when n == 0 */
AMK_API float amk_rng_uniform_sym(amk_rng *r);         /* uniform in [-1, 1), 24 random bits */

/* ==== >>dtypes: names and scalar conversions (spec §1.1) ======================================= */

/* dtype helpers. Names are the spec's ("F32", "BF16", ...). */
AMK_API const char *amk_dtype_name(int dtype);           /* "?" for an unknown code */
AMK_API int amk_dtype_from_name(const char *name);       /* -1 if unknown */
AMK_API int amk_dtype_bits(int dtype);                   /* 4 for I4, 0 if unknown or a block format */
AMK_API int64_t amk_dtype_nbytes(int dtype, int64_t n);  /* ceil(n*bits/8), or the blocks that hold n
                                                            elements' bytes; -1 on overflow */
/* The block formats (AMK_DTYPE_Q8_0 ... AMK_DTYPE_IQ4_NL, GGUF's): 1 for one of them. Such a
   buffer is a weight, read as float (amk_dtype_load_f32 decodes an element's block), never
   written. amk_dtype_block gives the elements a block (0 for any other dtype) and, through bytes
   (may be NULL), its size. */
AMK_API int amk_dtype_is_block(int dtype);
AMK_API int amk_dtype_block(int dtype, int *bytes);
AMK_API int amk_dtype_is_float(int dtype);               /* F32, F16, BF16, F8* */
AMK_API int amk_dtype_is_int(int dtype);                 /* I32, I8, I4, U8, BOOL */
AMK_API const char *amk_kind_name(int kind);
AMK_API int amk_kind_from_name(const char *name);
AMK_API const char *amk_space_name(int space);
AMK_API int amk_space_from_name(const char *name);

/* Element i of an array of dtype at base (nbytes long), as the backends read and write it. Loads
   give 0 and stores return 0 (writing nothing) for a NULL base, an unknown dtype or an element
   not inside nbytes. load_f32: integers convert exactly up to 2^24. load_i64: floats truncate
   toward zero, NaN reads 0. store_f32: rounds to nearest even; integers round and saturate
   (BOOL: v != 0). store_i64: exact for I32 (saturating), else through store_f32. I4 is two
   a byte, low nibble first. A block format loads its element through the block that holds it
   (the whole block inside nbytes) and stores nothing (0). */
AMK_API float amk_dtype_load_f32(const void *base, size_t nbytes, int dtype, int64_t i);
AMK_API int64_t amk_dtype_load_i64(const void *base, size_t nbytes, int dtype, int64_t i);
AMK_API int amk_dtype_store_f32(void *base, size_t nbytes, int dtype, int64_t i, float v);
AMK_API int amk_dtype_store_i64(void *base, size_t nbytes, int dtype, int64_t i, int64_t v);

/* Scalar conversions shared by every backend (round to nearest even; NaN stays NaN; F8E4M3 has
   no infinity and saturates to +-448; F8E5M2 overflows to infinity). */
AMK_API float amk_f16_to_f32(uint16_t h);
AMK_API uint16_t amk_f32_to_f16(float f);
AMK_API float amk_bf16_to_f32(uint16_t h);
AMK_API uint16_t amk_f32_to_bf16(float f);
AMK_API float amk_f8e4m3_to_f32(uint8_t v);
AMK_API uint8_t amk_f32_to_f8e4m3(float f);
AMK_API float amk_f8e5m2_to_f32(uint8_t v);
AMK_API uint8_t amk_f32_to_f8e5m2(float f);


#ifdef __cplusplus
}
#endif
#endif /* AMK_CORE_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_CORE_IMPLEMENTATION_DONE)
#define AMK_CORE_IMPLEMENTATION_DONE
/* ==== >>impl_common: allocation, diagnostics, checked sizes, strings, dtypes, files ========== */
/* (part of amk.h's implementation; included once from amk.h) */

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <stdarg.h>
#include <math.h>
#include <limits.h>
#include <errno.h>
#include <float.h>
#if !defined(_WIN32)
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#endif

#if defined(AMK_MALLOC) && defined(AMK_FREE) && defined(AMK_REALLOC)
/* all three given */
#elif !defined(AMK_MALLOC) && !defined(AMK_FREE) && !defined(AMK_REALLOC)
#define AMK_MALLOC(sz) malloc(sz)
#define AMK_REALLOC(p, sz) realloc(p, sz)
#define AMK_FREE(p) free(p)
#else
#error "Define all of AMK_MALLOC, AMK_REALLOC and AMK_FREE, or none of them."
#endif

#ifndef AMK_JSON_MAX_DEPTH
#define AMK_JSON_MAX_DEPTH 64 /* why: programs nest 5 deep; 64 leaves room and bounds the stack */
#endif

#define AMK__UNUSED(x) ((void)(x))
/* Internal functions: static, and not an error when a build leaves one unused. */
#if defined(__GNUC__) || defined(__clang__)
#define AMK__FN static __attribute__((unused))
#else
#define AMK__FN static
#endif
#ifdef __cplusplus
#define AMK__RESTRICT __restrict /* why: C++ has no restrict; GCC, Clang and MSVC take __restrict */
#else
#define AMK__RESTRICT restrict
#endif

/* ---- allocation ------------------------------------------------------------------------------ */

AMK__FN void *amk__malloc(size_t n) { return AMK_MALLOC(n ? n : 1); }
AMK__FN void *amk__calloc(size_t count, size_t size) {
    void *p;
    if (size && count > SIZE_MAX / size) return NULL;
    p = amk__malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}
AMK__FN void *amk__realloc(void *p, size_t n) { return AMK_REALLOC(p, n ? n : 1); }
AMK__FN void amk__free(void *p) { if (p) AMK_FREE(p); }

AMK_API void amk_free(void *ptr) { amk__free(ptr); }

AMK__FN char *amk__strndup(const char *s, size_t n) {
    char *r = (char *)amk__malloc(n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n);
    r[n] = 0;
    return r;
}
AMK__FN char *amk__strdup(const char *s) { return s ? amk__strndup(s, strlen(s)) : NULL; }

/* Grows *items (element size elem) so it holds at least need elements; 0 on failure. */
AMK__FN int amk__grow(void **items, int *cap, int need, size_t elem) {
    int ncap;
    void *np;
    if (need <= *cap) return 1;
    if (need < 0 || need > INT_MAX / 2) return 0;
    ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    if ((size_t)ncap > SIZE_MAX / elem) return 0;
    np = amk__realloc(*items, (size_t)ncap * elem);
    if (!np) return 0;
    *items = np;
    *cap = ncap;
    return 1;
}

/* ---- checked arithmetic: every size read from a file goes through these ---------------------- */

AMK__FN int amk__mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > INT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}
AMK__FN int amk__add_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}
AMK__FN int amk__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}
AMK__FN int amk__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a > UINT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}
AMK_API int amk_add_i64(int64_t a, int64_t b, int64_t *out) { int64_t r; return amk__add_i64(a, b, out ? out : &r); }
AMK_API int amk_mul_i64(int64_t a, int64_t b, int64_t *out) { int64_t r; return amk__mul_i64(a, b, out ? out : &r); }

/* ---- diagnostics ----------------------------------------------------------------------------- */

AMK_API void amk_diag_clear(amk_diag *d) {
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->task = d->buffer = d->counter = -1;
}

/* Sets d's result and message (printf format) and returns r, so callers write
   `return amk__fail(d, AMK_ERR_PARSE, "...", ...);`. Keeps location fields already set. */
AMK__FN amk_result amk__fail(amk_diag *d, amk_result r, const char *fmt, ...) {
    if (d) {
        va_list ap;
        d->result = r;
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return r;
}

static const char *const amk__result_strs[AMK_RESULT_COUNT] = {
    "ok",
    "invalid argument",
    "out of memory",
    "i/o error",
    "malformed input",
    "unsupported format version",
    "program rejected by validation",
    "counter walk stuck (deadlock)",
    "value out of range at run time",
    "not found",
    "dtype or shape mismatch",
    "unsupported",
    "no CUDA driver",
    "CUDA error",
    "timeout",
};

AMK_API const char *amk_result_str(amk_result r) {
    if ((int)r < 0 || r >= AMK_RESULT_COUNT) return "unknown result";
    return amk__result_strs[r];
}

/* ---- string builder ---------------------------------------------------------------------------- */

typedef struct amk__sb {
    char *p;
    size_t len, cap;
    int oom; /* sticky: an append failed */
} amk__sb;

AMK__FN int amk__sb_reserve(amk__sb *sb, size_t extra) {
    size_t need, ncap;
    char *np;
    if (sb->oom) return 0;
    if (extra > SIZE_MAX - sb->len - 1) { sb->oom = 1; return 0; }
    need = sb->len + extra + 1;
    if (need <= sb->cap) return 1;
    ncap = sb->cap ? sb->cap : 256;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) { ncap = need; break; }
        ncap *= 2;
    }
    np = (char *)amk__realloc(sb->p, ncap);
    if (!np) { sb->oom = 1; return 0; }
    sb->p = np;
    sb->cap = ncap;
    return 1;
}
AMK__FN void amk__sb_putn(amk__sb *sb, const char *s, size_t n) {
    if (!amk__sb_reserve(sb, n)) return;
    if (n) memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = 0;
}
AMK__FN void amk__sb_puts(amk__sb *sb, const char *s) { amk__sb_putn(sb, s, strlen(s)); }
AMK__FN void amk__sb_putc(amk__sb *sb, char c) { amk__sb_putn(sb, &c, 1); }
AMK__FN void amk__sb_printf(amk__sb *sb, const char *fmt, ...) {
    char small[256];
    int n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) { sb->oom = 1; return; }
    if ((size_t)n < sizeof small) { amk__sb_putn(sb, small, (size_t)n); return; }
    if (!amk__sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->p + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}
AMK__FN void amk__sb_free(amk__sb *sb) { amk__free(sb->p); memset(sb, 0, sizeof *sb); }

/* Shortest decimal that reads back as exactly v, spelled as Python's repr writes floats (1e-06,
   0.1, 100000.0, 1e+300, -0.0): always with a '.' or an exponent, so it reads back as a real, not
   an integer. why: byte-stable JSON round trips, and programs identical to the spec's own output.
   A non-finite v gives "null" (JSON has no such numbers; writers refuse them before this). */
AMK__FN void amk__fmt_double(char *out, size_t size, double v) {
    char tmp[40], dig[24], probe[48];
    int prec, nd = 0, e10 = 0, decpt, i, neg = 0;
    size_t o = 0;
    if (!(v <= DBL_MAX && v >= -DBL_MAX)) { snprintf(out, size, "null"); return; }
    for (prec = 1; prec <= 17; prec++) {
        const char *c, *e;
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        neg = tmp[0] == '-';
        e = strchr(tmp, 'e');
        if (!e) break; /* cannot happen for a finite value */
        nd = 0;
        for (c = tmp; c < e; c++)
            if (*c >= '0' && *c <= '9') dig[nd++] = *c;
        e10 = atoi(e + 1);
        dig[nd] = 0;
        snprintf(probe, sizeof probe, "%s%se%d", neg ? "-" : "", dig, e10 - (nd - 1));
        if (strtod(probe, NULL) == v) break;
    }
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    decpt = e10 + 1; /* v = 0.dig * 10^decpt */
    if (neg) tmp[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        tmp[o++] = dig[0];
        if (nd > 1) { tmp[o++] = '.'; for (i = 1; i < nd; i++) tmp[o++] = dig[i]; }
        snprintf(tmp + o, sizeof tmp - o, "e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
    } else if (decpt <= 0) {
        tmp[o++] = '0'; tmp[o++] = '.';
        for (i = 0; i < -decpt; i++) tmp[o++] = '0';
        for (i = 0; i < nd; i++) tmp[o++] = dig[i];
        tmp[o] = 0;
    } else {
        for (i = 0; i < decpt; i++) tmp[o++] = i < nd ? dig[i] : '0';
        tmp[o++] = '.';
        if (nd <= decpt) tmp[o++] = '0';
        for (i = decpt; i < nd; i++) tmp[o++] = dig[i];
        tmp[o] = 0;
    }
    snprintf(out, size, "%s", tmp);
}

AMK_API void amk_shape_format(char *buf, size_t size, const int64_t *shape, int rank) {
    size_t len;
    int i;
    if (!buf || !size) return;
    if (!shape) rank = 0;
    len = (size_t)snprintf(buf, size, "[");
    for (i = 0; i < rank && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* ---- files ----------------------------------------------------------------------------------- */

/* Reads a whole file into a NUL-terminated heap buffer. */
AMK__FN amk_result amk__read_file(const char *path, char **data, size_t *size, amk_diag *d) {
    FILE *f;
    long n;
    char *buf;
    *data = NULL;
    *size = 0;
    f = fopen(path, "rb");
    if (!f) return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
#if !defined(_WIN32)
    { /* why: fopen succeeds on a directory, whose ftell is LONG_MAX */
        struct stat st;
        if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
            fclose(f);
            return amk__fail(d, AMK_ERR_IO, "'%s' is not a regular file", path);
        }
    }
#endif
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return amk__fail(d, AMK_ERR_IO, "cannot size '%s' (not a regular file?)", path);
    }
    buf = (char *)amk__malloc((size_t)n + 1);
    if (!buf) { fclose(f); return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path); }
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        amk__free(buf);
        fclose(f);
        return amk__fail(d, AMK_ERR_IO, "short read on '%s'", path);
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    *size = (size_t)n;
    return AMK_OK;
}

AMK__FN amk_result amk__write_file(const char *path, const void *data, size_t size, amk_diag *d) {
    FILE *f = fopen(path, "wb");
    if (!f) return amk__fail(d, AMK_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return amk__fail(d, AMK_ERR_IO, "short write on '%s'", path);
    }
    if (fclose(f) != 0) return amk__fail(d, AMK_ERR_IO, "cannot finish writing '%s'", path);
    return AMK_OK;
}

AMK_API amk_result amk_file_read(const char *path, char **data, size_t *size, amk_diag *d) {
    if (data) *data = NULL;
    if (size) *size = 0;
    if (!path || !data || !size) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_file_read: NULL argument");
    return amk__read_file(path, data, size, d);
}
AMK_API amk_result amk_file_write(const char *path, const void *data, size_t size, amk_diag *d) {
    if (!path || (!data && size)) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_file_write: NULL argument");
    return amk__write_file(path, data, size, d);
}

/* Maps a file read-only (falls back to reading it where mmap is unavailable). *owned tells how to
   release it: amk__unmap_file. */
AMK__FN amk_result amk__map_file(const char *path, void **map, size_t *size, amk_diag *d) {
#if !defined(_WIN32)
    struct stat st;
    void *m;
    int fd = open(path, O_RDONLY);
    *map = NULL;
    *size = 0;
    if (fd < 0) return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return amk__fail(d, AMK_ERR_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) { close(fd); *map = NULL; *size = 0; return AMK_OK; }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return amk__fail(d, AMK_ERR_IO, "'%s' is too large to map", path);
    }
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return amk__fail(d, AMK_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    *map = m;
    *size = (size_t)st.st_size;
    return AMK_OK;
#else
    char *data;
    amk_result r = amk__read_file(path, &data, size, d);
    *map = data;
    return r;
#endif
}
AMK__FN void amk__unmap_file(void *map, size_t size) {
#if !defined(_WIN32)
    if (map && size) munmap(map, size);
#else
    AMK__UNUSED(size);
    amk__free(map);
#endif
}

/* ---- block formats: GGUF's quantized blocks (AMK_DTYPE_Q8_0 ... IQ4_NL; REFERENCE.md §1.4 and
   ggml-quants.c's dequantize_row_*) ------------------------------------------------------------ */

/* Each decodes nb blocks at x into nb * (elements a block) floats at y. */
typedef void (*amk__blk_fn)(const uint8_t *x, int64_t nb, float *y);

AMK__FN float amk__blk_f16(const uint8_t *b) { return amk_f16_to_f32((uint16_t)(b[0] | b[1] << 8)); }

/* Q8_0: [d f16][qs int8 x32]; y = qs*d */
AMK__FN void amk__blk_deq_q8_0(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 34, y += 32) {
        float d = amk__blk_f16(x);
        for (j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * d;
    }
}
/* Q4_0: [d f16][qs u8 x16]; low nibbles are y[0..15], high nibbles y[16..31]; y = (q-8)*d */
AMK__FN void amk__blk_deq_q4_0(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 18, y += 32) {
        float d = amk__blk_f16(x);
        const uint8_t *qs = x + 2;
        for (j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}
/* Q4_1: [d f16][m f16][qs u8 x16]; y = q*d + m */
AMK__FN void amk__blk_deq_q4_1(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 20, y += 32) {
        float d = amk__blk_f16(x), m = amk__blk_f16(x + 2);
        const uint8_t *qs = x + 4;
        for (j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}
/* Q5_0 / Q5_1: [d f16]([m f16])[qh u32: bit j = 5th bit of y[j]][qs u8 x16 as Q4_0] */
AMK__FN void amk__blk_deq_q5(const uint8_t *x, int64_t nb, float *y, int has_m) {
    int64_t b;
    int j;
    const int bsize = has_m ? 24 : 22, hoff = has_m ? 4 : 2;
    for (b = 0; b < nb; b++, x += bsize, y += 32) {
        float d = amk__blk_f16(x), m = has_m ? amk__blk_f16(x + 2) : 0.0f;
        uint32_t qh = (uint32_t)x[hoff] | (uint32_t)x[hoff + 1] << 8 | (uint32_t)x[hoff + 2] << 16 |
                      (uint32_t)x[hoff + 3] << 24;
        const uint8_t *qs = x + hoff + 4;
        const int off = has_m ? 0 : 16;
        for (j = 0; j < 16; j++) {
            int q0 = (int)((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - off;
            int q1 = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - off;
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}
AMK__FN void amk__blk_deq_q5_0(const uint8_t *x, int64_t nb, float *y) { amk__blk_deq_q5(x, nb, y, 0); }
AMK__FN void amk__blk_deq_q5_1(const uint8_t *x, int64_t nb, float *y) { amk__blk_deq_q5(x, nb, y, 1); }

/* The 6-bit (scale, min) pair of sub-block s (0..7) of a Q4_K/Q5_K block's scales[12]. */
AMK__FN void amk__blk_k4_scale_min(const uint8_t *sc, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
        *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}
/* Q4_K: [d f16][dmin f16][scales 12: 8 packed 6-bit (scale, min) pairs][qs 128]. Chunk c of 64
   outputs: low nibbles of qs[32c..] with sub-block 2c, high nibbles with 2c+1; y = d*sc*q - dmin*m.
   Q5_K: [d][dmin][scales 12][qh 32][qs 128], the same with a fifth bit: output l of chunk c's low
   half takes bit 2c of qh[l], of its high half bit 2c + 1. */
AMK__FN void amk__blk_deq_k45(const uint8_t *x, int64_t nb, float *y, int five) {
    int64_t b;
    int c, l;
    const int bsize = five ? 176 : 144;
    for (b = 0; b < nb; b++, x += bsize) {
        const float d = amk__blk_f16(x), dmin = amk__blk_f16(x + 2);
        const uint8_t *sc = x + 4, *qh = x + 16, *q = x + (five ? 48 : 16);
        for (c = 0; c < 4; c++, q += 32) {
            int j;
            float dd[2], mm[2];
            for (j = 0; j < 2; j++) {
                int scale, min;
                amk__blk_k4_scale_min(sc, 2 * c + j, &scale, &min);
                dd[j] = d * (float)scale;
                mm[j] = dmin * (float)min;
            }
            for (l = 0; l < 32; l++) /* the low nibbles (with bit 2c of qh[l] in Q5_K) */
                *y++ = dd[0] * (float)((q[l] & 0xF) | (five ? (qh[l] >> (2 * c) & 1) << 4 : 0)) - mm[0];
            for (l = 0; l < 32; l++) /* the high nibbles (bit 2c + 1) */
                *y++ = dd[1] * (float)((q[l] >> 4) | (five ? (qh[l] >> (2 * c + 1) & 1) << 4 : 0)) - mm[1];
        }
    }
}
AMK__FN void amk__blk_deq_q4_k(const uint8_t *x, int64_t nb, float *y) { amk__blk_deq_k45(x, nb, y, 0); }
AMK__FN void amk__blk_deq_q5_k(const uint8_t *x, int64_t nb, float *y) { amk__blk_deq_k45(x, nb, y, 1); }
/* Q2_K: [scales 16: a 4-bit scale (low) and min (high) a sub-block of 16][qs 64][d f16][dmin f16].
   Two halves of 128 outputs, half n from qs[32n..32n+31]: outputs 32j + l (l < 16) are bits 2j of
   qs[32n + l] with sub-block 8n + 2j, outputs 32j + 16 + l bits 2j of qs[32n + 16 + l] with 8n + 2j + 1;
   y = d*scale*q - dmin*min. */
AMK__FN void amk__blk_deq_q2_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int n, j, h, l;
    for (b = 0; b < nb; b++, x += 84) {
        const float d = amk__blk_f16(x + 80), dmin = amk__blk_f16(x + 82);
        for (n = 0; n < 2; n++)
            for (j = 0; j < 4; j++)
                for (h = 0; h < 2; h++) {
                    const uint8_t s = x[8 * n + 2 * j + h], *q = x + 16 + 32 * n + 16 * h;
                    const float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
                    for (l = 0; l < 16; l++) *y++ = dl * (float)((q[l] >> (2 * j)) & 3) - ml;
                }
    }
}
/* Q3_K: [hmask 32][qs 64][scales 12: 16 packed 6-bit scales, offset 32][d f16]. The same output
   order as Q2_K; the 2-bit value is q - 4 where the output's bit of hmask[l] (bit 4n + j, l the
   byte's index 0..31 in the half) is clear; y = d*(scale - 32)*q. */
AMK__FN int amk__blk_q3k_scale(const uint8_t *sc, int s) {
    const int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4, hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | hi << 4) - 32;
}
AMK__FN void amk__blk_deq_q3_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int n, j, h, l;
    for (b = 0; b < nb; b++, x += 110) {
        const float d = amk__blk_f16(x + 108);
        const uint8_t *hm = x, *sc = x + 96;
        for (n = 0; n < 2; n++)
            for (j = 0; j < 4; j++)
                for (h = 0; h < 2; h++) {
                    const uint8_t *q = x + 32 + 32 * n + 16 * h, *m = hm + 16 * h;
                    const float dl = d * (float)amk__blk_q3k_scale(sc, 8 * n + 2 * j + h);
                    for (l = 0; l < 16; l++)
                        *y++ = dl * (float)((int)((q[l] >> (2 * j)) & 3) - ((m[l] >> (4 * n + j)) & 1 ? 0 : 4));
                }
    }
}
/* IQ4_NL: [d f16][qs u8 x16], Q4_0's nibble placement; y = d * a 16-entry table of nonlinear levels. */
AMK__FN void amk__blk_deq_iq4_nl(const uint8_t *x, int64_t nb, float *y) {
    static const int8_t levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 18, y += 32) {
        const float d = amk__blk_f16(x);
        for (j = 0; j < 16; j++) {
            y[j] = d * (float)levels[x[2 + j] & 0xF];
            y[j + 16] = d * (float)levels[x[2 + j] >> 4];
        }
    }
}
/* Q6_K: [ql 128][qh 64][scales int8 x16][d f16]; two halves of 128 outputs, q in 0..63 minus 32 */
AMK__FN void amk__blk_deq_q6_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int n, l;
    for (b = 0; b < nb; b++, x += 210) {
        float d = amk__blk_f16(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* Each block format, from AMK_DTYPE_Q8_0 on: elements and bytes a block, its decoder, the byte
   offsets in a block of its f16 scale d and of its f16 min (-1: none): amk_ir.h's AMK_BLOCK_*. */
static const struct amk__blk_format {
    int elems, bytes;
    amk__blk_fn decode;
    int d_off, m_off;
} amk__blk_formats[AMK_DTYPE_COUNT - AMK_DTYPE_Q8_0] = {
#define AMK__BLK_FORMAT(t, fn) {AMK_BLOCK_ELEMS(t), AMK_BLOCK_BYTES(t), fn, AMK_BLOCK_D_OFF(t), AMK_BLOCK_M_OFF(t)}
    AMK__BLK_FORMAT(AMK_DTYPE_Q8_0, amk__blk_deq_q8_0), AMK__BLK_FORMAT(AMK_DTYPE_Q4_0, amk__blk_deq_q4_0),
    AMK__BLK_FORMAT(AMK_DTYPE_Q4_1, amk__blk_deq_q4_1), AMK__BLK_FORMAT(AMK_DTYPE_Q5_0, amk__blk_deq_q5_0),
    AMK__BLK_FORMAT(AMK_DTYPE_Q5_1, amk__blk_deq_q5_1), AMK__BLK_FORMAT(AMK_DTYPE_Q2_K, amk__blk_deq_q2_k),
    AMK__BLK_FORMAT(AMK_DTYPE_Q3_K, amk__blk_deq_q3_k), AMK__BLK_FORMAT(AMK_DTYPE_Q4_K, amk__blk_deq_q4_k),
    AMK__BLK_FORMAT(AMK_DTYPE_Q5_K, amk__blk_deq_q5_k), AMK__BLK_FORMAT(AMK_DTYPE_Q6_K, amk__blk_deq_q6_k),
    AMK__BLK_FORMAT(AMK_DTYPE_IQ4_NL, amk__blk_deq_iq4_nl)
#undef AMK__BLK_FORMAT
};

/* The decoder of block format t; NULL for any other dtype. */
AMK__FN amk__blk_fn amk__blk_decoder(int t) {
    return amk_dtype_is_block(t) ? amk__blk_formats[t - AMK_DTYPE_Q8_0].decode : NULL;
}

/* Elements [off, off + n) of a buffer of block dtype t as floats into dst: the blocks that hold
   them decoded (whole blocks straight into dst; the partial ones at the ends through a block). */
AMK__FN void amk__blk_load(const void *base, int t, int64_t off, int64_t n, float *dst) {
    const amk__blk_fn fn = amk__blk_decoder(t);
    const int64_t E = amk__blk_formats[t - AMK_DTYPE_Q8_0].elems, B = amk__blk_formats[t - AMK_DTYPE_Q8_0].bytes;
    const uint8_t *x = (const uint8_t *)base;
    float tmp[256];
    while (n > 0) {
        const int64_t b = off / E, e0 = off - b * E;
        if (e0 == 0 && n >= E) { /* whole blocks */
            const int64_t nb = n / E;
            fn(x + b * B, nb, dst);
            off += nb * E; dst += nb * E; n -= nb * E;
        } else { /* one block's part */
            const int64_t k = E - e0 < n ? E - e0 : n;
            fn(x + b * B, 1, tmp);
            memcpy(dst, tmp + e0, (size_t)k * sizeof(float));
            off += k; dst += k; n -= k;
        }
    }
}

/* ---- enum names (spec §1.1, canonical order) --------------------------------------------------- */

static const char *const amk__dtype_names[AMK_DTYPE_COUNT] = {
    "F32", "F16", "BF16", "F8E4M3", "F8E5M2", "I32", "I8", "I4", "U8", "BOOL",
    "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL"};
/* bits an element; 0 for the block formats (amk_dtype_block) */
static const int amk__dtype_bits_tab[AMK_DTYPE_COUNT] = {32, 16, 16, 8, 8, 32, 8, 4, 8, 8,
                                                        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
static const char *const amk__kind_names[AMK_KIND_COUNT] = {
    "WEIGHT", "ACTIVATION", "KV_CACHE", "IO_INPUT", "IO_OUTPUT", "CONST"};
static const char *const amk__space_names[AMK_SPACE_COUNT] = {
    "HBM", "GLOBAL_SCRATCH", "SMEM", "REGISTER"};

AMK__FN int amk__name_lookup(const char *const *names, int n, const char *name) {
    int i;
    if (!name) return -1;
    for (i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

AMK_API const char *amk_dtype_name(int t) { return t >= 0 && t < AMK_DTYPE_COUNT ? amk__dtype_names[t] : "?"; }
AMK_API int amk_dtype_from_name(const char *n) { return amk__name_lookup(amk__dtype_names, AMK_DTYPE_COUNT, n); }
AMK_API int amk_dtype_bits(int t) { return t >= 0 && t < AMK_DTYPE_COUNT ? amk__dtype_bits_tab[t] : 0; }
AMK_API int amk_dtype_is_block(int t) { return AMK_DTYPE_IS_BLOCK(t); }
AMK_API int amk_dtype_block(int t, int *bytes) {
    const int ok = amk_dtype_is_block(t);
    if (bytes) *bytes = ok ? amk__blk_formats[t - AMK_DTYPE_Q8_0].bytes : 0;
    return ok ? amk__blk_formats[t - AMK_DTYPE_Q8_0].elems : 0;
}
AMK_API int64_t amk_dtype_nbytes(int t, int64_t n) {
    int64_t bits;
    if (amk_dtype_is_block(t)) { /* the blocks that hold n elements */
        const int E = amk_dtype_block(t, NULL);
        if (n < 0 || !amk__mul_i64(n / E + (n % E != 0), amk__blk_formats[t - AMK_DTYPE_Q8_0].bytes, &bits)) return -1;
        return bits;
    }
    if (n < 0 || !amk__mul_i64(n, amk_dtype_bits(t), &bits) || bits > INT64_MAX - 7) return -1;
    return (bits + 7) / 8;
}
AMK_API int amk_dtype_is_float(int t) { return t >= AMK_DTYPE_F32 && t <= AMK_DTYPE_F8E5M2; }
AMK_API int amk_dtype_is_int(int t) { return t >= AMK_DTYPE_I32 && t <= AMK_DTYPE_BOOL; }
AMK_API const char *amk_kind_name(int k) { return k >= 0 && k < AMK_KIND_COUNT ? amk__kind_names[k] : "?"; }
AMK_API int amk_kind_from_name(const char *n) { return amk__name_lookup(amk__kind_names, AMK_KIND_COUNT, n); }
AMK_API const char *amk_space_name(int s) { return s >= 0 && s < AMK_SPACE_COUNT ? amk__space_names[s] : "?"; }
AMK_API int amk_space_from_name(const char *n) { return amk__name_lookup(amk__space_names, AMK_SPACE_COUNT, n); }

/* ---- scalar dtype conversions ----------------------------------------------------------------- */

AMK__FN uint32_t amk__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AMK__FN float amk__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

AMK_API float amk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return amk__bits_f32(sign | 0x7F800000u | (man << 13));
    return amk__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

AMK_API uint16_t amk_f32_to_f16(float f) {
    uint32_t u = amk__f32_bits(f), sign = (u >> 16) & 0x8000u, absu = u & 0x7FFFFFFFu;
    if (absu > 0x7F800000u) return (uint16_t)(sign | 0x7E00u); /* NaN */
    if (absu >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65520: inf */
    if (absu < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        float a = amk__bits_f32(absu);
        /* why: a * 2^24 then round-to-nearest-even gives the subnormal mantissa exactly */
        float scaled = a * 16777216.0f;
        uint32_t m = (uint32_t)scaled;
        float frac = scaled - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    } else {
        uint32_t e = (absu >> 23) - 112, man = absu & 0x7FFFFFu;
        uint32_t h = (e << 10) | (man >> 13), rest = man & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
}

AMK_API float amk_bf16_to_f32(uint16_t h) { return amk__bits_f32((uint32_t)h << 16); }
AMK_API uint16_t amk_f32_to_bf16(float f) {
    uint32_t u = amk__f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Generic minifloat decode: 1 sign, ebits exponent, mbits mantissa, bias. */
AMK__FN float amk__minifloat_to_f32(uint32_t v, int ebits, int mbits, int bias) {
    uint32_t sign = v >> (ebits + mbits), exp = (v >> mbits) & ((1u << ebits) - 1u);
    uint32_t man = v & ((1u << mbits) - 1u);
    float r;
    if (exp == 0) r = ldexpf((float)man, 1 - bias - mbits);
    else r = ldexpf((float)(man | (1u << mbits)), (int)exp - bias - mbits);
    return sign ? -r : r;
}

AMK_API float amk_f8e4m3_to_f32(uint8_t v) {
    if ((v & 0x7Fu) == 0x7Fu) return amk__bits_f32(0x7FC00000u | ((uint32_t)(v & 0x80u) << 24));
    return amk__minifloat_to_f32(v, 4, 3, 7);
}
AMK_API float amk_f8e5m2_to_f32(uint8_t v) {
    uint32_t exp = (v >> 2) & 0x1Fu;
    if (exp == 31) { /* inf or NaN, like f16 */
        return amk_f16_to_f32((uint16_t)((uint16_t)v << 8));
    }
    return amk__minifloat_to_f32(v, 5, 2, 15);
}

/* Round-to-nearest-even encode of a finite |f| into a minifloat magnitude; max_code is the largest
   finite code; overflow gives overflow_code. */
AMK__FN uint32_t amk__f32_to_minifloat(float f, int ebits, int mbits, int bias, uint32_t max_code,
                                      uint32_t overflow_code) {
    uint32_t sign = f < 0.0f || (f == 0.0f && (amk__f32_bits(f) >> 31)) ? 1u : 0u;
    double a = fabs((double)f), best_err = -1.0;
    uint32_t lo = 0, hi = max_code, code;
    /* why: the codes of a minifloat are monotonic in value, so binary search finds the two
       neighbours of a; ties go to the even code (round to nearest even). */
    double maxv = (double)amk__minifloat_to_f32(max_code, ebits, mbits, bias);
    double ulp_top = maxv - (double)amk__minifloat_to_f32(max_code - 1u, ebits, mbits, bias);
    if (a >= maxv + ulp_top / 2) return (sign << (ebits + mbits)) | overflow_code;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1u) / 2u;
        if ((double)amk__minifloat_to_f32(mid, ebits, mbits, bias) <= a) lo = mid;
        else hi = mid - 1u;
    }
    code = lo;
    if (code < max_code) {
        double v0 = (double)amk__minifloat_to_f32(code, ebits, mbits, bias);
        double v1 = (double)amk__minifloat_to_f32(code + 1u, ebits, mbits, bias);
        double e0 = a - v0, e1 = v1 - a;
        if (e1 < e0 || (e1 == e0 && (code & 1u))) code++;
    }
    AMK__UNUSED(best_err);
    return (sign << (ebits + mbits)) | code;
}

AMK_API uint8_t amk_f32_to_f8e4m3(float f) {
    if (f != f) return 0x7Fu;
    /* why: E4M3FN has no infinity; the largest finite value 448 is code 0x7E; saturate */
    return (uint8_t)amk__f32_to_minifloat(f, 4, 3, 7, 0x7Eu, 0x7Eu);
}
AMK_API uint8_t amk_f32_to_f8e5m2(float f) {
    if (f != f) return 0x7Fu;
    return (uint8_t)amk__f32_to_minifloat(f, 5, 2, 15, 0x7Bu, 0x7Cu); /* 57344 max, then inf */
}

/* Reads element i of a buffer of dtype t as float (integers convert exactly up to 2^24). */
AMK__FN float amk__load_f32(const void *base, int t, int64_t i) {
    const uint8_t *b = (const uint8_t *)base;
    switch (t) {
    case AMK_DTYPE_F32: { float v; memcpy(&v, b + 4 * i, 4); return v; }
    case AMK_DTYPE_F16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return amk_f16_to_f32(h); }
    case AMK_DTYPE_BF16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return amk_bf16_to_f32(h); }
    case AMK_DTYPE_F8E4M3: return amk_f8e4m3_to_f32(b[i]);
    case AMK_DTYPE_F8E5M2: return amk_f8e5m2_to_f32(b[i]);
    case AMK_DTYPE_I32: { int32_t v; memcpy(&v, b + 4 * i, 4); return (float)v; }
    case AMK_DTYPE_I8: return (float)(int8_t)b[i];
    case AMK_DTYPE_I4: { /* stored q + 8 (IR_SPEC_NOTES), element 2k in the low nibble */
        uint8_t byte = b[i >> 1];
        int q = (int)((i & 1) ? (byte >> 4) : (byte & 15)) - 8;
        return (float)q;
    }
    case AMK_DTYPE_U8: return (float)b[i];
    case AMK_DTYPE_BOOL: return b[i] ? 1.0f : 0.0f;
    default:
        if (amk__blk_decoder(t)) { /* why one element through its block: weights are read by rows
                                     (amk__blk_load); this serves the odd element */
            float v;
            amk__blk_load(base, t, i, 1, &v);
            return v;
        }
        return 0.0f;
    }
}

/* Reads element i as an integer (floats truncate toward zero; NaN reads as 0). */
AMK__FN int64_t amk__load_i64(const void *base, int t, int64_t i) {
    const uint8_t *b = (const uint8_t *)base;
    if (t == AMK_DTYPE_I32) { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    if (t == AMK_DTYPE_I8) return (int8_t)b[i];
    if (t == AMK_DTYPE_U8 || t == AMK_DTYPE_BOOL) return b[i];
    {
        float f = amk__load_f32(base, t, i);
        if (f != f) return 0;
        if (f >= 9.2e18f) return INT64_MAX;
        if (f <= -9.2e18f) return INT64_MIN;
        return (int64_t)f;
    }
}

AMK__FN int32_t amk__sat_i32(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return (int32_t)lrint(v);
}

/* Writes v as element i of a buffer of dtype t (integers round to nearest and saturate). */
AMK__FN void amk__store_f32(void *base, int t, int64_t i, float v) {
    uint8_t *b = (uint8_t *)base;
    switch (t) {
    case AMK_DTYPE_F32: memcpy(b + 4 * i, &v, 4); break;
    case AMK_DTYPE_F16: { uint16_t h = amk_f32_to_f16(v); memcpy(b + 2 * i, &h, 2); break; }
    case AMK_DTYPE_BF16: { uint16_t h = amk_f32_to_bf16(v); memcpy(b + 2 * i, &h, 2); break; }
    case AMK_DTYPE_F8E4M3: b[i] = amk_f32_to_f8e4m3(v); break;
    case AMK_DTYPE_F8E5M2: b[i] = amk_f32_to_f8e5m2(v); break;
    case AMK_DTYPE_I32: { int32_t x = amk__sat_i32(v, -2147483648.0, 2147483647.0); memcpy(b + 4 * i, &x, 4); break; }
    case AMK_DTYPE_I8: b[i] = (uint8_t)(int8_t)amk__sat_i32(v, -128, 127); break;
    case AMK_DTYPE_I4: {
        uint8_t q = (uint8_t)(amk__sat_i32(v, -8, 7) + 8), *p = b + (i >> 1);
        *p = (i & 1) ? (uint8_t)((*p & 0x0Fu) | (q << 4)) : (uint8_t)((*p & 0xF0u) | q);
        break;
    }
    case AMK_DTYPE_U8: b[i] = (uint8_t)amk__sat_i32(v, 0, 255); break;
    case AMK_DTYPE_BOOL: b[i] = v != 0.0f; break;
    default: break;
    }
}

/* Writes an integer exactly (for ids and argmax results). */
AMK__FN void amk__store_i64(void *base, int t, int64_t i, int64_t v) {
    uint8_t *b = (uint8_t *)base;
    if (t == AMK_DTYPE_I32) {
        int32_t x = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
        memcpy(b + 4 * i, &x, 4);
    } else {
        amk__store_f32(base, t, i, (float)v);
    }
}

/* 1 if element i of dtype t lies inside nbytes at a non-NULL base (the public load/store's guard;
   for a block format, the whole block that holds it). */
AMK__FN int amk__elem_inside(const void *base, size_t nbytes, int t, int64_t i) {
    int64_t end = i >= 0 && i < INT64_MAX ? amk_dtype_nbytes(t, i + 1) : -1;
    return base && (amk_dtype_bits(t) > 0 || amk_dtype_is_block(t)) && end >= 0 && (uint64_t)end <= (uint64_t)nbytes;
}
AMK_API float amk_dtype_load_f32(const void *base, size_t nbytes, int t, int64_t i) {
    return amk__elem_inside(base, nbytes, t, i) ? amk__load_f32(base, t, i) : 0.0f;
}
AMK_API int64_t amk_dtype_load_i64(const void *base, size_t nbytes, int t, int64_t i) {
    return amk__elem_inside(base, nbytes, t, i) ? amk__load_i64(base, t, i) : 0;
}
AMK_API int amk_dtype_store_f32(void *base, size_t nbytes, int t, int64_t i, float v) {
    if (amk_dtype_is_block(t) || !amk__elem_inside(base, nbytes, t, i)) return 0;
    amk__store_f32(base, t, i, v);
    return 1;
}
AMK_API int amk_dtype_store_i64(void *base, size_t nbytes, int t, int64_t i, int64_t v) {
    if (amk_dtype_is_block(t) || !amk__elem_inside(base, nbytes, t, i)) return 0;
    amk__store_i64(base, t, i, v);
    return 1;
}

/* ---- random numbers: splitmix64 (seeding) + xoshiro256** ---------------------------------------- */

typedef amk_rng amk__rng; /* the public type; the functions below are its implementation */

AMK__FN uint64_t amk__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
AMK__FN void amk__rng_seed(amk__rng *r, uint64_t seed) {
    int i;
    for (i = 0; i < 4; i++) r->s[i] = amk__splitmix64(&seed);
}
AMK__FN uint64_t amk__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
AMK__FN uint64_t amk__rng_u64(amk__rng *r) {
    uint64_t *s = r->s, res = amk__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = amk__rotl(s[3], 45);
    return res;
}
/* Uniform in [0, n) for n >= 1. */
AMK__FN uint64_t amk__rng_below(amk__rng *r, uint64_t n) { return n ? amk__rng_u64(r) % n : 0; }
/* Uniform float in [-1, 1). */
AMK__FN float amk__rng_sym(amk__rng *r) {
    return (float)((double)(amk__rng_u64(r) >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
AMK_API void amk_rng_seed(amk_rng *r, uint64_t seed) { if (r) amk__rng_seed(r, seed); }
AMK_API uint64_t amk_rng_next_u64(amk_rng *r) { return r ? amk__rng_u64(r) : 0; }
AMK_API uint64_t amk_rng_below(amk_rng *r, uint64_t n) { return r ? amk__rng_below(r, n) : 0; }
AMK_API float amk_rng_uniform_sym(amk_rng *r) { return r ? amk__rng_sym(r) : 0.0f; }

/* ---- bit sets --------------------------------------------------------------------------------- */

typedef uint64_t amk__word;
#define AMK__WORDS(n) (((size_t)(n) + 63) / 64)
AMK__FN int amk__bit_get(const amk__word *b, size_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1u); }
AMK__FN void amk__bit_set(amk__word *b, size_t i) { b[i >> 6] |= (amk__word)1 << (i & 63); }

/* ---- UTF-8 (shared by the JSON parser and the tokenizer) ----------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..avail), 0 if invalid (overlong, surrogate, above
   U+10FFFF, bad or missing continuation byte). RFC 3629 table 4. */
AMK__FN int amk__utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    int n, i;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)n > avail) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

AMK__FN size_t amk__utf8_put(unsigned char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- internal JSON DOM (implemented in >>impl_json; shared by every parser of the library) ----- */

typedef enum amk__jtype {
    AMK__J_NULL = 0, AMK__J_BOOL, AMK__J_INT, AMK__J_REAL, AMK__J_STRING, AMK__J_ARRAY, AMK__J_OBJECT
} amk__jtype;

typedef struct amk__jval amk__jval;
struct amk__jval {
    amk__jtype type;
    int line, col;          /* where the value starts, 1-based */
    int big;                /* an integer literal outside int64: type is REAL, f is its value */
    int64_t i;              /* INT value; BOOL 0/1 */
    double f;               /* REAL value (also set for INT) */
    const char *s;          /* STRING: decoded UTF-8, NUL-terminated (may hold \0: use slen) */
    size_t slen;
    int n;                  /* ARRAY / OBJECT: number of children */
    amk__jval *items;       /* ARRAY elements, OBJECT values, in document order */
    const char **keys;      /* OBJECT keys (decoded, NUL-terminated), in document order */
    size_t *key_lens;
};

typedef struct amk__jdoc {
    amk__jval *root;
    void *arena;            /* internal */
} amk__jdoc;

/* Parses len bytes of strict RFC 8259 JSON (UTF-8 checked, no comments, no trailing commas,
   duplicate object keys rejected, nesting deeper than max_depth rejected). Memory is bounded by a
   small multiple of len. On error d gets line:col and a message. */
AMK__FN amk_result amk__json_parse(const char *text, size_t len, int max_depth, amk__jdoc *doc,
                                  amk_diag *d);
AMK__FN void amk__json_free(amk__jdoc *doc);
/* The value of key in an object (first match), or NULL (also for a non-object). */
static const amk__jval *amk__json_get(const amk__jval *obj, const char *key);
/* Appends s as a quoted, escaped JSON string. */
AMK__FN void amk__json_put_string(amk__sb *sb, const char *s, size_t len);
/* Appends the canonical compact JSON of v (used to keep meta values). */
AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v);

/* ==== >>impl_jsondom: the strict JSON DOM every parser of the library uses ===================== */
/* (part of amk.h's implementation; included once from amk.h)

   The DOM parser is iterative: open containers live on an explicit frame stack (at most
   max_depth deep) and finished values on a slot stack; when a container closes, its children are
   copied into one arena block. So the C stack never grows with the input, and memory is a few
   arena blocks proportional to the input length, not one malloc per node. */

/* ---- arena ----------------------------------------------------------------------------------- */

typedef struct amk__jblock {
    struct amk__jblock *next;
    size_t used, cap;
} amk__jblock;

/* why: 16 keeps every carved object (pointers, int64, double) aligned like malloc's own result */
#define AMK__JALIGN 16
#define AMK__JHDR ((sizeof(amk__jblock) + AMK__JALIGN - 1) / AMK__JALIGN * AMK__JALIGN)
#define AMK__JBLOCK_MIN ((size_t)1 << 16) /* why: 64 KiB amortises malloc; small docs use one */
#define AMK__JBLOCK_MAX ((size_t)1 << 22) /* why: 4 MiB caps the unused tail of the last block */

/* n bytes from the arena, 16-aligned; NULL on out of memory. */
AMK__FN void *amk__jarena_alloc(amk__jblock **head, size_t n) {
    amk__jblock *b = *head;
    void *r;
    if (n > SIZE_MAX - AMK__JHDR - AMK__JALIGN) return NULL;
    n = (n + AMK__JALIGN - 1) / AMK__JALIGN * AMK__JALIGN;
    if (!b || b->cap - b->used < n) {
        /* blocks double up to the cap; an allocation larger than that gets a block of its own */
        size_t cap = !b ? AMK__JBLOCK_MIN : b->cap >= AMK__JBLOCK_MAX / 2 ? AMK__JBLOCK_MAX : b->cap * 2;
        if (cap < n) cap = n;
        b = (amk__jblock *)amk__malloc(AMK__JHDR + cap);
        if (!b) return NULL;
        b->next = *head;
        b->used = 0;
        b->cap = cap;
        *head = b;
    }
    r = (char *)b + AMK__JHDR + b->used;
    b->used += n;
    return r;
}

AMK__FN void amk__jarena_free(amk__jblock *b) {
    while (b) {
        amk__jblock *next = b->next;
        amk__free(b);
        b = next;
    }
}

/* ---- parser state ------------------------------------------------------------------------------ */

/* A finished value waiting for its container to close, with its key when the container is an
   object. */
typedef struct amk__jslot {
    amk__jval v;
    const char *key;
    size_t key_len;
    int key_line, key_col;
} amk__jslot;

/* An open container. key* is the member key read last (objects), waiting for its value. */
typedef struct amk__jframe {
    int is_object;
    int in_value;       /* a child value is being read (so an error path names it) */
    int start;          /* first slot of this container's children */
    int line, col;
    const char *key;
    size_t key_len;
    int key_line, key_col;
} amk__jframe;

typedef struct amk__jp {
    const unsigned char *s;
    size_t len, pos;
    int line;
    size_t line_start;  /* offset of the first byte of the current line */
    int max_depth;
    amk__jblock *arena;
    amk__jslot *slots; int n_slots, cap_slots;
    amk__jframe *frames; int n_frames, cap_frames;
    amk_diag *d;
} amk__jp;

AMK__FN int amk__jp_col(const amk__jp *p, size_t pos) {
    size_t c = pos - p->line_start + 1;
    return c > (size_t)INT_MAX ? INT_MAX : (int)c;
}

/* Appends one JSON Pointer segment (RFC 6901: '~' -> "~0", '/' -> "~1") to path[size]; a path
   that does not fit is cut short. */
AMK__FN void amk__jpath_put(char *path, size_t size, const char *seg, size_t n) {
    size_t len = strlen(path), i;
    if (len + 1 >= size) return;
    path[len++] = '/';
    for (i = 0; i < n && len + 2 < size; i++) {
        char c = seg[i];
        if (c == '~' || c == '/') { path[len++] = '~'; path[len++] = c == '~' ? '0' : '1'; }
        else path[len++] = c ? c : '?';
    }
    path[len] = 0;
}
AMK__FN void amk__jpath_put_index(char *path, size_t size, int64_t i) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)i);
    amk__jpath_put(path, size, num, strlen(num));
}

/* Reports a parse error at line:col with a printf message; returns AMK_ERR_PARSE. d->path gets
   the JSON path of the value being read, from the open containers. */
AMK__FN amk_result amk__jp_fail_at(amk__jp *p, int line, int col, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    int i;
    if (!p->d) return AMK_ERR_PARSE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->d->line = line;
    p->d->col = col;
    p->d->path[0] = 0;
    for (i = 0; i < p->n_frames && p->frames[i].in_value; i++) {
        const amk__jframe *f = &p->frames[i];
        if (f->is_object) {
            amk__jpath_put(p->d->path, sizeof p->d->path, f->key, f->key_len);
        } else {
            int next = i + 1 < p->n_frames ? p->frames[i + 1].start : p->n_slots;
            amk__jpath_put_index(p->d->path, sizeof p->d->path, next - f->start);
        }
    }
    return amk__fail(p->d, AMK_ERR_PARSE, "%s", msg);
}
#define AMK__JP_FAIL(p, pos, ...) amk__jp_fail_at((p), (p)->line, amk__jp_col((p), (pos)), __VA_ARGS__)

AMK__FN amk_result amk__jp_oom(amk__jp *p) {
    if (p->d) { p->d->line = p->line; p->d->col = amk__jp_col(p, p->pos); }
    return amk__fail(p->d, AMK_ERR_OUT_OF_MEMORY, "out of memory parsing JSON");
}

AMK__FN amk_result amk__jp_eof(amk__jp *p) { return AMK__JP_FAIL(p, p->len, "unexpected end of input"); }

/* Describes the byte at pos for a message: 'x' for printable ASCII, else its hex code. */
AMK__FN void amk__jp_describe(const amk__jp *p, size_t pos, char *buf, size_t size) {
    unsigned c = p->s[pos];
    if (c >= 0x20 && c < 0x7F) snprintf(buf, size, "character '%c'", (char)c);
    else snprintf(buf, size, "byte 0x%02X", c);
}

AMK__FN void amk__jp_ws(amk__jp *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c == '\n') {
            if (p->line < INT_MAX) p->line++;
            p->line_start = p->pos + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        p->pos++;
    }
}

AMK__FN int amk__jp_hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        unsigned c = s[i], h;
        if (c >= '0' && c <= '9') h = c - '0';
        else if (c >= 'a' && c <= 'f') h = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') h = c - 'A' + 10;
        else return 0;
        v = v * 16 + h;
    }
    *out = v;
    return 1;
}


/* Parses the string starting at the '"' at p->pos into a NUL-terminated arena copy. */
AMK__FN amk_result amk__jp_string(amk__jp *p, const char **out, size_t *out_len) {
    const unsigned char *s = p->s;
    size_t q = p->pos + 1, span;
    unsigned char *o, *w;
    /* why: the decoded text is never longer than the raw text up to the closing quote, so one
       exact-size allocation suffices; this scan only sizes it, the loop below validates. */
    while (q < p->len && s[q] != '"') q += s[q] == '\\' ? 2 : 1;
    span = (q < p->len ? q : p->len) - p->pos;
    w = o = (unsigned char *)amk__jarena_alloc(&p->arena, span + 1);
    if (!o) return amk__jp_oom(p);
    q = p->pos + 1;
    for (;;) {
        unsigned c;
        if (q >= p->len) return AMK__JP_FAIL(p, p->len, "unexpected end of input in a string");
        c = s[q];
        if (c == '"') break;
        if (c < 0x20) return AMK__JP_FAIL(p, q, "control character 0x%02X in a string (must be escaped)", c);
        if (c == '\\') {
            unsigned cp;
            if (q + 1 >= p->len) return AMK__JP_FAIL(p, p->len, "unexpected end of input in a string");
            switch (s[q + 1]) {
            case '"': *w++ = '"'; q += 2; continue;
            case '\\': *w++ = '\\'; q += 2; continue;
            case '/': *w++ = '/'; q += 2; continue;
            case 'b': *w++ = '\b'; q += 2; continue;
            case 'f': *w++ = '\f'; q += 2; continue;
            case 'n': *w++ = '\n'; q += 2; continue;
            case 'r': *w++ = '\r'; q += 2; continue;
            case 't': *w++ = '\t'; q += 2; continue;
            case 'u': break;
            default: {
                char what[32];
                amk__jp_describe(p, q + 1, what, sizeof what);
                return AMK__JP_FAIL(p, q, "invalid escape: backslash followed by %s", what);
            }
            }
            if (p->len - q < 6 || !amk__jp_hex4(s + q + 2, &cp))
                return AMK__JP_FAIL(p, q, "\\u must be followed by 4 hex digits");
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return AMK__JP_FAIL(p, q, "lone low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->len - q < 12 || s[q + 6] != '\\' || s[q + 7] != 'u' || !amk__jp_hex4(s + q + 8, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return AMK__JP_FAIL(p, q, "lone high surrogate \\u%04X (a low surrogate escape must follow)", cp);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
            }
            w += amk__utf8_put(w, cp);
            q += 6;
        } else if (c < 0x80) {
            *w++ = (unsigned char)c;
            q++;
        } else {
            int n = amk__utf8_seq_len(s + q, p->len - q);
            if (!n) return AMK__JP_FAIL(p, q, "invalid UTF-8 in a string");
            memcpy(w, s + q, (size_t)n);
            w += n;
            q += (size_t)n;
        }
    }
    *w = 0;
    *out = (const char *)o;
    *out_len = (size_t)(w - o);
    p->pos = q + 1;
    return AMK_OK;
}

/* Converts the number text s[start..end) (already checked against the JSON grammar) to a double
   independently of the process locale: the '.' is removed and the exponent adjusted, so strtod
   only sees digits and an exponent ("12.5e3" -> "125e2"). 0 if it overflows to infinity. */
AMK__FN int amk__jp_number_value(const unsigned char *s, size_t start, size_t end, double *out) {
    char small[96], *buf = small;
    size_t i = start, n = 0, cap = end - start + 32;
    int64_t exp10 = 0, n_frac = 0, e = 0;
    int eneg = 0, ok;
    double v;
    if (cap > sizeof small) {
        buf = (char *)amk__malloc(cap);
        if (!buf) return -1;
    }
    if (s[i] == '-') buf[n++] = s[i++];
    while (i < end && s[i] >= '0' && s[i] <= '9') buf[n++] = (char)s[i++];
    if (i < end && s[i] == '.') {
        i++;
        while (i < end && s[i] >= '0' && s[i] <= '9') {
            buf[n++] = (char)s[i++];
            n_frac++;
        }
    }
    if (i < end && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < end && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        /* why: saturate; past 10^9 the value is 0 or infinity unless the mantissa itself is
           about a gigabyte of digits */
        while (i < end) {
            if (e < 1000000000) e = e * 10 + (s[i] - '0');
            i++;
        }
    }
    exp10 = (eneg ? -e : e) - n_frac;
    snprintf(buf + n, cap - n, "e%lld", (long long)exp10);
    v = strtod(buf, NULL);
    ok = v <= DBL_MAX && v >= -DBL_MAX;
    if (buf != small) amk__free(buf);
    *out = v;
    return ok;
}

/* Whether the text at pos spells NaN or Infinity (for a precise message). */
AMK__FN int amk__jp_is_nonfinite(const amk__jp *p, size_t pos) {
    size_t avail = p->len - pos;
    return (avail >= 3 && memcmp(p->s + pos, "NaN", 3) == 0) ||
           (avail >= 8 && memcmp(p->s + pos, "Infinity", 8) == 0);
}

/* Parses the number at p->pos into v (INT when integral and within int64, else REAL). */
AMK__FN amk_result amk__jp_number(amk__jp *p, amk__jval *v) {
    const unsigned char *s = p->s;
    size_t start = p->pos, i = p->pos;
    int neg = 0, integral = 1, overflow = 0, cv;
    int64_t acc = 0;
    if (s[i] == '-') { neg = 1; i++; }
    if (i >= p->len) return amk__jp_eof(p);
    if (s[i] == '0') {
        i++;
        if (i < p->len && s[i] >= '0' && s[i] <= '9')
            return AMK__JP_FAIL(p, start, "leading zeros are not allowed in a number");
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < p->len && s[i] >= '0' && s[i] <= '9') {
            int dg = s[i] - '0';
            if (!overflow) {
                /* accumulate negatives toward INT64_MIN so -9223372036854775808 is an INT */
                if (neg) {
                    if (acc < INT64_MIN / 10 || (acc == INT64_MIN / 10 && dg > 8)) overflow = 1;
                    else acc = acc * 10 - dg;
                } else {
                    if (acc > INT64_MAX / 10 || (acc == INT64_MAX / 10 && dg > 7)) overflow = 1;
                    else acc = acc * 10 + dg;
                }
            }
            i++;
        }
    } else {
        char what[32];
        if (amk__jp_is_nonfinite(p, i)) return AMK__JP_FAIL(p, start, "Infinity and NaN are not valid JSON numbers");
        amk__jp_describe(p, i, what, sizeof what);
        return AMK__JP_FAIL(p, i, "expected a digit after '-', found %s", what);
    }
    if (i < p->len && s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len) return amk__jp_eof(p);
        if (s[i] < '0' || s[i] > '9') return AMK__JP_FAIL(p, i, "expected a digit after '.' in a number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len) return amk__jp_eof(p);
        if (s[i] < '0' || s[i] > '9') return AMK__JP_FAIL(p, i, "expected a digit in the exponent of a number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (integral && !overflow) {
        v->type = AMK__J_INT;
        v->i = acc;
        v->f = (double)acc;
        p->pos = i;
        return AMK_OK;
    }
    cv = amk__jp_number_value(s, start, i, &v->f);
    if (cv < 0) return amk__jp_oom(p);
    if (!cv) return AMK__JP_FAIL(p, start, "number out of range of a double");
    v->type = AMK__J_REAL;
    v->big = integral; /* an integer literal outside int64 */
    p->pos = i;
    return AMK_OK;
}

AMK__FN amk_result amk__jp_literal(amk__jp *p, const char *word, size_t n) {
    size_t avail = p->len - p->pos;
    if (memcmp(p->s + p->pos, word, avail < n ? avail : n) != 0)
        return AMK__JP_FAIL(p, p->pos, "invalid literal (expected %s)", word);
    if (avail < n) return amk__jp_eof(p);
    p->pos += n;
    return AMK_OK;
}

/* Parses a scalar value at p->pos (not at end of input). */
AMK__FN amk_result amk__jp_scalar(amk__jp *p, amk__jval *v) {
    unsigned c = p->s[p->pos];
    char what[32];
    switch (c) {
    case '"':
        v->type = AMK__J_STRING;
        return amk__jp_string(p, &v->s, &v->slen);
    case 't': v->type = AMK__J_BOOL; v->i = 1; return amk__jp_literal(p, "true", 4);
    case 'f': v->type = AMK__J_BOOL; v->i = 0; return amk__jp_literal(p, "false", 5);
    case 'n': v->type = AMK__J_NULL; return amk__jp_literal(p, "null", 4);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return amk__jp_number(p, v);
        if (amk__jp_is_nonfinite(p, p->pos))
            return AMK__JP_FAIL(p, p->pos, "Infinity and NaN are not valid JSON numbers");
        if (c == 0xEF && p->len - p->pos >= 3 && p->s[p->pos + 1] == 0xBB && p->s[p->pos + 2] == 0xBF)
            return AMK__JP_FAIL(p, p->pos, "a UTF-8 byte order mark is not allowed");
        if (c == '/') return AMK__JP_FAIL(p, p->pos, "comments are not allowed in JSON");
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected a value, found %s", what);
    }
}

/* Reads `"key" :` of an object member into the top frame. */
AMK__FN amk_result amk__jp_key(amk__jp *p, int after_comma) {
    amk__jframe *f = &p->frames[p->n_frames - 1];
    amk_result r;
    char what[32];
    amk__jp_ws(p);
    if (p->pos >= p->len) return amk__jp_eof(p);
    if (p->s[p->pos] != '"') {
        if (after_comma && p->s[p->pos] == '}') return AMK__JP_FAIL(p, p->pos, "trailing comma before '}'");
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected a string key, found %s", what);
    }
    f->key_line = p->line;
    f->key_col = amk__jp_col(p, p->pos);
    r = amk__jp_string(p, &f->key, &f->key_len);
    if (r != AMK_OK) return r;
    f->in_value = 1;
    amk__jp_ws(p);
    if (p->pos >= p->len) return amk__jp_eof(p);
    if (p->s[p->pos] != ':') {
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected ':' after an object key, found %s", what);
    }
    p->pos++;
    return AMK_OK;
}

typedef struct amk__jkey { const char *s; size_t len; int idx; } amk__jkey;

AMK__FN int amk__jkey_cmp(const void *a, const void *b) {
    const amk__jkey *x = (const amk__jkey *)a, *y = (const amk__jkey *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->s, y->s, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Index (in document order) of the first member whose key repeats an earlier one, -1 if none,
   -2 on out of memory. O(n log n): tokenizer.json has objects with 50k keys. */
AMK__FN int amk__jp_find_dup(const amk__jslot *m, int n) {
    amk__jkey *k;
    int i, j, first = -1;
    if (n <= 8) { /* why: pairwise is cheaper than sorting for the objects programs are made of */
        for (i = 1; i < n; i++)
            for (j = 0; j < i; j++)
                if (m[i].key_len == m[j].key_len && memcmp(m[i].key, m[j].key, m[i].key_len) == 0) return i;
        return -1;
    }
    k = (amk__jkey *)amk__malloc((size_t)n * sizeof(amk__jkey));
    if (!k) return -2;
    for (i = 0; i < n; i++) { k[i].s = m[i].key; k[i].len = m[i].key_len; k[i].idx = i; }
    qsort(k, (size_t)n, sizeof(amk__jkey), amk__jkey_cmp);
    for (i = 1; i < n; i++)
        if (k[i].len == k[i - 1].len && memcmp(k[i].s, k[i - 1].s, k[i].len) == 0 && (first < 0 || k[i].idx < first))
            first = k[i].idx;
    amk__free(k);
    return first;
}

/* Closes the top container: moves its children from the slot stack into the arena. */
AMK__FN amk_result amk__jp_close(amk__jp *p, amk__jval *v) {
    amk__jframe *f = &p->frames[p->n_frames - 1];
    int n = p->n_slots - f->start, i;
    amk__jslot *m = n ? p->slots + f->start : NULL;
    memset(v, 0, sizeof *v);
    v->type = f->is_object ? AMK__J_OBJECT : AMK__J_ARRAY;
    v->line = f->line;
    v->col = f->col;
    v->n = n;
    if (n) {
        v->items = (amk__jval *)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(amk__jval));
        if (!v->items) return amk__jp_oom(p);
        for (i = 0; i < n; i++) v->items[i] = m[i].v;
    }
    if (f->is_object && n) {
        int dup = amk__jp_find_dup(m, n);
        if (dup == -2) return amk__jp_oom(p);
        if (dup >= 0) {
            char name[48]; /* why: enough to recognise a key; longer ones end in "..." */
            size_t k, kn = m[dup].key_len < sizeof name - 1 ? m[dup].key_len : sizeof name - 1;
            for (k = 0; k < kn; k++) {
                unsigned char c = (unsigned char)m[dup].key[k];
                name[k] = (char)(c < 0x20 || c == 0x7F ? '?' : c);
            }
            name[kn] = 0;
            f->key = m[dup].key; /* the error path names the duplicate member */
            f->key_len = m[dup].key_len;
            f->in_value = 1;
            return amk__jp_fail_at(p, m[dup].key_line, m[dup].key_col, "duplicate key \"%s%s\"", name,
                                   kn < m[dup].key_len ? "..." : "");
        }
        v->keys = (const char **)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(const char *));
        v->key_lens = (size_t *)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(size_t));
        if (!v->keys || !v->key_lens) return amk__jp_oom(p);
        for (i = 0; i < n; i++) { v->keys[i] = m[i].key; v->key_lens[i] = m[i].key_len; }
    }
    p->n_slots = f->start;
    p->n_frames--;
    return AMK_OK;
}

/* The whole document: values, then after each value either the end of its container, a comma,
   or (at top level) the end of input. */
AMK__FN amk_result amk__jp_run(amk__jp *p, amk__jval *root) {
    amk_result r;
    for (;;) {
        amk__jval v;
        unsigned c;
        memset(&v, 0, sizeof v);
        amk__jp_ws(p);
        if (p->pos >= p->len) return amk__jp_eof(p);
        c = p->s[p->pos];
        v.line = p->line;
        v.col = amk__jp_col(p, p->pos);
        if (c == '[' || c == '{') {
            amk__jframe *f;
            if (p->n_frames >= p->max_depth)
                return AMK__JP_FAIL(p, p->pos, "nesting deeper than %d", p->max_depth);
            if (!amk__grow((void **)&p->frames, &p->cap_frames, p->n_frames + 1, sizeof(amk__jframe)))
                return amk__jp_oom(p);
            f = &p->frames[p->n_frames++];
            memset(f, 0, sizeof *f);
            f->is_object = c == '{';
            f->start = p->n_slots;
            f->line = v.line;
            f->col = v.col;
            p->pos++;
            amk__jp_ws(p);
            if (p->pos < p->len && p->s[p->pos] == (c == '{' ? '}' : ']')) {
                p->pos++;
                r = amk__jp_close(p, &v);
                if (r != AMK_OK) return r;
            } else {
                f->in_value = !f->is_object;
                if (f->is_object && (r = amk__jp_key(p, 0)) != AMK_OK) return r;
                continue;
            }
        } else {
            r = amk__jp_scalar(p, &v);
            if (r != AMK_OK) return r;
        }
        /* v is complete: hand it to its container, closing containers as they end */
        for (;;) {
            amk__jframe *f;
            amk__jslot *sl;
            char what[32];
            if (p->n_frames == 0) {
                amk__jp_ws(p);
                if (p->pos < p->len) {
                    amk__jp_describe(p, p->pos, what, sizeof what);
                    return AMK__JP_FAIL(p, p->pos, "unexpected %s after the JSON value", what);
                }
                *root = v;
                return AMK_OK;
            }
            f = &p->frames[p->n_frames - 1];
            if (!amk__grow((void **)&p->slots, &p->cap_slots, p->n_slots + 1, sizeof(amk__jslot)))
                return amk__jp_oom(p);
            sl = &p->slots[p->n_slots++];
            sl->v = v;
            sl->key = f->key;
            sl->key_len = f->key_len;
            sl->key_line = f->key_line;
            sl->key_col = f->key_col;
            f->in_value = 0;
            amk__jp_ws(p);
            if (p->pos >= p->len) return amk__jp_eof(p);
            c = p->s[p->pos];
            if (c == ',') {
                p->pos++;
                if (f->is_object) {
                    if ((r = amk__jp_key(p, 1)) != AMK_OK) return r;
                } else {
                    amk__jp_ws(p);
                    if (p->pos < p->len && p->s[p->pos] == ']')
                        return AMK__JP_FAIL(p, p->pos, "trailing comma before ']'");
                    f->in_value = 1;
                }
                break;
            }
            if (c != (f->is_object ? '}' : ']')) {
                amk__jp_describe(p, p->pos, what, sizeof what);
                return AMK__JP_FAIL(p, p->pos, "expected ',' or '%c' after %s, found %s", f->is_object ? '}' : ']',
                                    f->is_object ? "object member" : "array element", what);
            }
            p->pos++;
            if ((r = amk__jp_close(p, &v)) != AMK_OK) return r;
        }
    }
}

AMK__FN amk_result amk__json_parse(const char *text, size_t len, int max_depth, amk__jdoc *doc,
                                  amk_diag *d) {
    amk__jp p;
    amk__jval root;
    amk_result r;
    doc->root = NULL;
    doc->arena = NULL;
    if (!text && len) return amk__fail(d, AMK_ERR_INVALID_ARG, "JSON text is NULL");
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)(text ? text : "");
    p.len = len;
    p.line = 1;
    p.max_depth = max_depth < 0 ? 0 : max_depth;
    p.d = d;
    memset(&root, 0, sizeof root);
    r = amk__jp_run(&p, &root);
    amk__free(p.slots);
    amk__free(p.frames);
    if (r == AMK_OK) {
        doc->root = (amk__jval *)amk__jarena_alloc(&p.arena, sizeof(amk__jval));
        if (!doc->root) r = amk__jp_oom(&p);
        else *doc->root = root;
    }
    if (r != AMK_OK) {
        amk__jarena_free(p.arena);
        doc->root = NULL;
        return r;
    }
    doc->arena = p.arena;
    return AMK_OK;
}

AMK__FN void amk__json_free(amk__jdoc *doc) {
    if (!doc) return;
    amk__jarena_free((amk__jblock *)doc->arena);
    doc->arena = NULL;
    doc->root = NULL;
}

AMK__FN const amk__jval *amk__json_get(const amk__jval *obj, const char *key) {
    size_t n;
    int i;
    if (!obj || obj->type != AMK__J_OBJECT || !key) return NULL;
    n = strlen(key);
    for (i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
    return NULL;
}

AMK__FN void amk__json_put_string(amk__sb *sb, const char *s, size_t len) {
    size_t i, run = 0;
    amk__sb_putc(sb, '"');
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\t') esc = "\\t";
        else if (c == '\r') esc = "\\r";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        if (!esc) { run++; continue; }
        if (run) amk__sb_putn(sb, s + i - run, run); /* the plain bytes before this one */
        run = 0;
        amk__sb_puts(sb, esc);
    }
    if (run) amk__sb_putn(sb, s + len - run, run);
    amk__sb_putc(sb, '"');
}


/* Writes v as JSON; spaced puts ", " and ": " between items (the program file's style),
   otherwise the output is compact. */
AMK__FN void amk__json_put_value_sep(amk__sb *sb, const amk__jval *v, int spaced) {
    const char *comma = spaced ? ", " : ",", *colon = spaced ? ": " : ":";
    char num[40];
    int i;
    switch (v->type) {
    case AMK__J_NULL: amk__sb_puts(sb, "null"); break;
    case AMK__J_BOOL: amk__sb_puts(sb, v->i ? "true" : "false"); break;
    case AMK__J_INT: amk__sb_printf(sb, "%lld", (long long)v->i); break;
    case AMK__J_REAL: amk__fmt_double(num, sizeof num, v->f); amk__sb_puts(sb, num); break;
    case AMK__J_STRING: amk__json_put_string(sb, v->s, v->slen); break;
    case AMK__J_ARRAY:
        amk__sb_putc(sb, '[');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_puts(sb, comma);
            amk__json_put_value_sep(sb, &v->items[i], spaced);
        }
        amk__sb_putc(sb, ']');
        break;
    case AMK__J_OBJECT:
        amk__sb_putc(sb, '{');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_puts(sb, comma);
            amk__json_put_string(sb, v->keys[i], v->key_lens[i]);
            amk__sb_puts(sb, colon);
            amk__json_put_value_sep(sb, &v->items[i], spaced);
        }
        amk__sb_putc(sb, '}');
        break;
    }
}

AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v) { amk__json_put_value_sep(sb, v, 0); }

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */
