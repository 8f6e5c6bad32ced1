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

/* ---- enum names (spec §1.1, canonical order) --------------------------------------------------- */

static const char *const amk__dtype_names[AMK_DTYPE_COUNT] = {
    "F32", "F16", "BF16", "F8E4M3", "F8E5M2", "I32", "I8", "I4", "U8", "BOOL"};
static const int amk__dtype_bits_tab[AMK_DTYPE_COUNT] = {32, 16, 16, 8, 8, 32, 8, 4, 8, 8};
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
AMK_API int64_t amk_dtype_nbytes(int t, int64_t n) {
    int64_t bits;
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
    default: return 0.0f;
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

/* ---- random numbers: splitmix64 (seeding) + xoshiro256** ---------------------------------------- */

typedef struct amk__rng { uint64_t s[4]; } amk__rng;

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
