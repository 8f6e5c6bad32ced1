/* tests/amk_test.h - the tiny test harness every host test uses.

   A test is a function `static void test_x(void)`; RUN(test_x) runs it and counts it passed when
   none of its CHECKs failed. Each test binary ends with TEST_SUMMARY(), which prints
   "<file>: N passed, N failed" and exits nonzero on any failure. tests/run.sh adds the binaries'
   counts and prints the final "N passed, N failed" line. */
#ifndef AMK_TEST_H
#define AMK_TEST_H
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include <stdint.h>

static int amk_t_passed, amk_t_failed, amk_t_cur_failed;
static const char *amk_t_cur = "";

#define CHECK(cond) do { if (!(cond)) { amk_t_cur_failed++; \
    fprintf(stderr, "%s:%d: [%s] CHECK failed: %s\n", __FILE__, __LINE__, amk_t_cur, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { if (!(cond)) { amk_t_cur_failed++; \
    fprintf(stderr, "%s:%d: [%s] CHECK failed: %s: ", __FILE__, __LINE__, amk_t_cur, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_EQ_INT(a, b) do { long long amk_t_a = (long long)(a), amk_t_b = (long long)(b); \
    if (amk_t_a != amk_t_b) { amk_t_cur_failed++; fprintf(stderr, "%s:%d: [%s] %s == %s failed: %lld != %lld\n", \
    __FILE__, __LINE__, amk_t_cur, #a, #b, amk_t_a, amk_t_b); } } while (0)
#define CHECK_STR(a, b) do { const char *amk_t_a = (a), *amk_t_b = (b); \
    if (!amk_t_a || !amk_t_b || strcmp(amk_t_a, amk_t_b) != 0) { amk_t_cur_failed++; \
    fprintf(stderr, "%s:%d: [%s] %s == %s failed: '%s' != '%s'\n", __FILE__, __LINE__, amk_t_cur, \
    #a, #b, amk_t_a ? amk_t_a : "(null)", amk_t_b ? amk_t_b : "(null)"); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double amk_t_a = (double)(a), amk_t_b = (double)(b); \
    if (!(fabs(amk_t_a - amk_t_b) <= (tol))) { amk_t_cur_failed++; \
    fprintf(stderr, "%s:%d: [%s] |%s - %s| <= %g failed: %.9g vs %.9g\n", __FILE__, __LINE__, \
    amk_t_cur, #a, #b, (double)(tol), amk_t_a, amk_t_b); } } while (0)

/* The tests' seeded random numbers: splitmix64 (the library's own generator is internal). */
typedef struct amk_t_rng { uint64_t s; } amk_t_rng;
static inline uint64_t amk_t_rng_next(amk_t_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1), 24 random bits. */
static inline float amk_t_rng_sym(amk_t_rng *r) {
    return (float)((double)(amk_t_rng_next(r) >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* A whole file, NUL-terminated, in memory the caller frees with free(); NULL if it cannot be
   read (*size is then 0). */
static inline void *amk_t_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    *size = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) buf = (char *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    *size = (size_t)n;
    return buf;
}

#define RUN(fn) RUN_AS(fn, #fn)
/* RUN under another name (CHECK messages show it): a string that outlives the test. With
   AMK_TEST_ONLY set, only the tests whose name holds it run (the others count neither way). */
#define RUN_AS(fn, name) do { const char *amk_t_only = getenv("AMK_TEST_ONLY"); \
    if (amk_t_only && *amk_t_only && !strstr((name), amk_t_only)) break; \
    amk_t_cur = (name); amk_t_cur_failed = 0; fn(); \
    if (amk_t_cur_failed) amk_t_failed++; else amk_t_passed++; } while (0)

#define TEST_SUMMARY() do { printf("%s: %d passed, %d failed\n", __FILE__, amk_t_passed, amk_t_failed); \
    return amk_t_failed ? 1 : 0; } while (0)

#ifdef AMK_IR_H
/* Where a block of GGUF block format dt (AMK_DTYPE_Q8_0 ... IQ4_NL) keeps its f16 scales: off[0]
   its d, off[1] its dmin or m (-1: none). Random blocks get finite scales there. */
static inline void amk_t_block_scales(int dt, int off[2]) {
    off[0] = dt == AMK_DTYPE_Q2_K ? 80 : dt == AMK_DTYPE_Q3_K ? 108 : dt == AMK_DTYPE_Q6_K ? 208 : 0;
    off[1] = dt == AMK_DTYPE_Q2_K ? 82
           : dt == AMK_DTYPE_Q4_1 || dt == AMK_DTYPE_Q5_1 || dt == AMK_DTYPE_Q4_K || dt == AMK_DTYPE_Q5_K ? 2 : -1;
}
#endif

#ifdef AMK_PROGRAM_H
/* An attention task's shape params (ATTENTION_TILE, _DECODE, _O): head_dim, n_heads, n_kv_heads,
   the window [kv_start, kv_start + kv_len) and scale. */
static inline void amk_t_attn(amk_program *p, int t, int hd, int nh, int nkv, int kv_start, int kv_len, double scale) {
    amk_task_set_int(p, t, "head_dim", hd);
    amk_task_set_int(p, t, "n_heads", nh);
    amk_task_set_int(p, t, "n_kv_heads", nkv);
    amk_task_set_int(p, t, "kv_start", kv_start);
    amk_task_set_int(p, t, "kv_len", kv_len);
    amk_task_set_real(p, t, "scale", scale);
}
#endif

#endif
