/* tests/test_nfc.c - NFC normalization (amk_nfc.h): every vector of
   tests/data/tokenizer/nfc_cases.txt (the expected NFC from Python's unicodedata, written by
   scripts/gen_nfc_tables.py) with *out NULL exactly when the text was in NFC, idempotence, bytes
   that are not UTF-8 passed through, long runs of marks, random bytes, and every allocation
   failing in turn. amk__nfc is internal, so this file compiles a private copy of the
   implementation (AMK_STATIC, as test_json.c does) with a counting allocator. Run from the
   repository root (make test does). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <stdint.h>
#include <time.h>

/* The allocator of this file's copy of the library: counts calls, and fails call number
   t_fail_at (counting from 0) when that is >= 0. */
static long t_allocs, t_fail_at = -1;
static void *t_malloc(size_t n) { return t_allocs++ == t_fail_at ? NULL : malloc(n); }
static void *t_realloc(void *p, size_t n) { return t_allocs++ == t_fail_at ? NULL : realloc(p, n); }
#define AMK_MALLOC(sz) t_malloc(sz)
#define AMK_REALLOC(p, sz) t_realloc(p, sz)
#define AMK_FREE(p) free(p)

#define AMK_STATIC
#define AMK_IMPLEMENTATION
#if defined(__GNUC__)
/* why: AMK_STATIC turns every API function this file does not call into an unused static */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include "../amk.h"
#include "../amk_nfc.h"
#include "amk_test.h"

#define DATA "tests/data/tokenizer/"

/* ---- helpers --------------------------------------------------------------------------------- */

/* The NFC of s[0..n) as a malloc'd copy (the input itself when amk__nfc said "already NFC");
   *changed = whether amk__nfc returned a buffer. NULL when amk__nfc failed. The input is copied
   into a buffer of exactly n bytes first, so ASan sees any read past its end. */
static unsigned char *nfc_n(const unsigned char *s, size_t n, size_t *len, int *changed) {
    unsigned char *in = (unsigned char *)malloc(n ? n : 1), *out = (unsigned char *)1, *r;
    size_t out_len = 12345;
    int ok;
    if (n) memcpy(in, s, n);
    ok = amk__nfc(in, n, &out, &out_len);
    if (!ok) {
        CHECK(out == NULL && out_len == 0);
        free(in);
        return NULL;
    }
    *changed = out != NULL;
    if (out) {
        r = (unsigned char *)malloc(out_len ? out_len : 1);
        if (out_len) memcpy(r, out, out_len);
        *len = out_len;
        amk__free(out);
        free(in);
        return r;
    }
    CHECK(out_len == n);
    *len = n;
    return in;
}

/* Checks NFC(s) == want (and NULL out exactly when s == want), and NFC(want) == want. */
static int expect_n(const char *label, const void *s, size_t n, const void *want, size_t want_n) {
    size_t len = 0, len2 = 0;
    int changed = -1, changed2 = -1, good;
    unsigned char *r = nfc_n((const unsigned char *)s, n, &len, &changed), *r2;
    good = r && len == want_n && memcmp(r, want, want_n) == 0 &&
           changed == !(n == want_n && memcmp(s, want, n) == 0);
    free(r);
    r2 = nfc_n((const unsigned char *)want, want_n, &len2, &changed2);
    good = good && r2 && changed2 == 0 && len2 == want_n;
    free(r2);
    CHECK_MSG(good, "%s", label);
    return good;
}
static int expect(const char *label, const char *s, const char *want) {
    return expect_n(label, s, strlen(s), want, strlen(want));
}

static size_t utf8_of(const uint32_t *cps, size_t n, unsigned char *buf) {
    size_t i, k = 0;
    for (i = 0; i < n; i++) k += amk__utf8_put(buf + k, cps[i]);
    return k;
}

/* Hex code points separated by spaces, up to the end of s[0..n). Returns the count, -1 if bad. */
static long parse_cps(const char *s, size_t n, uint32_t *cps, size_t cap) {
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned long v = 0;
        size_t d = 0;
        if (s[i] == ' ') { i++; continue; }
        for (; i < n && s[i] != ' '; i++, d++) {
            int c = s[i];
            int x = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (x < 0 || d >= 6) return -1;
            v = v * 16 + (unsigned long)x;
        }
        if (k == cap || v > 0x10FFFF) return -1;
        cps[k++] = (uint32_t)v;
    }
    return (long)k;
}

/* ---- the vectors from Python --------------------------------------------------------------- */

static void test_vectors(void) {
    enum { CAP = 4096 };
    static uint32_t in_cp[CAP], want_cp[CAP];
    static unsigned char in[CAP * 4], want[CAP * 4];
    size_t size, at = 0;
    char *text = (char *)amk_t_read_file(DATA "nfc_cases.txt", &size);
    long cases = 0, same = 0, bad = 0;
    int saw_long = 0, saw_hangul = 0;
    CHECK_MSG(text != NULL, "cannot read " DATA "nfc_cases.txt (run from the repository root)");
    if (!text) return;
    while (at < size) {
        char *line = text + at, *nl = (char *)memchr(line, '\n', size - at);
        size_t len = nl ? (size_t)(nl - line) : size - at;
        char *f1, *f2;
        long ni, nw;
        at += len + 1;
        if (len == 0 || line[0] == '#') continue;
        f1 = (char *)memchr(line, ';', len);
        f2 = f1 ? (char *)memchr(f1 + 1, ';', len - (size_t)(f1 + 1 - line)) : NULL;
        CHECK_MSG(f1 && f2, "malformed line %.40s", line);
        if (!f1 || !f2) { bad++; continue; }
        ni = parse_cps(f1 + 1, (size_t)(f2 - f1 - 1), in_cp, CAP);
        nw = parse_cps(f2 + 1, (size_t)(line + len - f2 - 1), want_cp, CAP);
        CHECK_MSG(ni >= 0 && nw >= 0, "malformed line %.40s", line);
        if (ni < 0 || nw < 0) { bad++; continue; }
        {
            char label[64];
            size_t ll = (size_t)(f1 - line);
            size_t bi = utf8_of(in_cp, (size_t)ni, in), bw = utf8_of(want_cp, (size_t)nw, want);
            if (ll > sizeof label - 1) ll = sizeof label - 1;
            memcpy(label, line, ll);
            label[ll] = 0;
            if (!expect_n(label, in, bi, want, bw) && ++bad > 20) break;
            same += bi == bw && memcmp(in, want, bi) == 0;
            saw_long |= ni > 300;
            saw_hangul |= strncmp(label, "hangul_lvt", 10) == 0;
        }
        cases++;
    }
    free(text);
    printf("  %ld NFC vectors (%ld already in NFC), %ld failed\n", cases, same, bad);
    CHECK(cases > 6000);
    CHECK(same > 1000 && same < cases - 1000);
    CHECK(saw_long && saw_hangul);
    CHECK_EQ_INT(bad, 0);
}

/* A few by hand, as UTF-8 literals, independent of the vectors' encoding. */
static void test_by_hand(void) {
    expect("ascii", "plain ASCII text.", "plain ASCII text.");
    expect("e acute", "e\xCC\x81", "\xC3\xA9");
    expect("angstrom sign", "\xE2\x84\xAB", "\xC3\x85");
    expect("ohm sign", "\xE2\x84\xA6", "\xCE\xA9");
    expect("devanagari qa excluded", "\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC");
    expect("hangul L V T", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81");
    expect("hangul LV T", "\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81");
    expect("reorder and compose", "a\xCC\x81\xCC\x96", "\xC3\xA1\xCC\x96");
    expect("vietnamese", "e\xCC\x82\xCC\x81", "\xE1\xBA\xBF");
    expect_n("nul blocks", "e\0\xCC\x81", 4, "e\0\xCC\x81", 4);
    expect_n("nul after", "e\xCC\x81\0", 4, "\xC3\xA9\0", 3);
    {
        unsigned char *out = (unsigned char *)1;
        size_t len = 7;
        CHECK(amk__nfc(NULL, 0, &out, &len) == 1 && out == NULL && len == 0);
        CHECK(amk__nfc(NULL, 1, &out, &len) == 0 && out == NULL && len == 0);
    }
}

/* ---- hostile input --------------------------------------------------------------------------- */

static void test_invalid_bytes(void) {
    static const char *const alone[] = {
        "\xFF", "\xFE\xFF", "\x80", "\xBF\xBF\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF",
        "\xE0\x9F\xBF", "\xF0\x80\x80\xAF", "\xF0\x8F\xBF\xBF", "\xED\xA0\x80", "\xED\xBF\xBF",
        "\xED\xA0\x80\xED\xB0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xF8\x88\x80\x80\x80",
        "\xFC\x84\x80\x80\x80\x80", "\xCC", "\xE1\x84", "\xE1", "\xF0\x9F\x98", "\xF0\x9F",
        "\xC3\x28", "\xE2\x28\xA1", "\xCC\xCC\xCC",
    };
    size_t i;
    for (i = 0; i < sizeof alone / sizeof alone[0]; i++) {
        char label[32];
        snprintf(label, sizeof label, "invalid %u", (unsigned)i);
        expect(label, alone[i], alone[i]);
    }
    /* an invalid byte is a starter that composes with nothing: the mark stays after it */
    expect("mark after an invalid byte", "e\xFF\xCC\x81", "e\xFF\xCC\x81");
    expect("truncated mark then a mark", "e\xCC\xCC\x81", "e\xCC\xCC\x81");
    expect("marks reorder after an invalid byte", "\xFF\xCC\x81\xCC\x96", "\xFF\xCC\x96\xCC\x81");
    expect("composition on both sides", "A\xCC\x8A\xED\xA0\x80\xE2\x84\xAB",
           "\xC3\x85\xED\xA0\x80\xC3\x85");
    expect("jamo split by a truncated jamo", "\xE1\x84\x80\xE1\x85\xE1\x85\xA1",
           "\xE1\x84\x80\xE1\x85\xE1\x85\xA1");
    expect("jamo then a byte", "\xE1\x84\x80\xE1\x85\xA1\xFF", "\xEA\xB0\x80\xFF");
    expect("overlong acute", "e\xC0\x81", "e\xC0\x81");
    expect("surrogate then a decomposable", "\xED\xA0\x80\xE2\x84\xA6", "\xED\xA0\x80\xCE\xA9");
}

/* Random bytes: whole characters of the interesting kinds mixed with bytes of every value. The
   result is checked against what the rule for invalid bytes implies: each splits the text, and
   the NFC is the NFC of each valid piece with the bytes kept between them. And it is in NFC. */
static void test_random_bytes(void) {
    static const char *const bits[] = {
        "e", "a", "A", " ", "\xCC\x81", "\xCC\x96", "\xCC\x88", "\xCD\x85", "\xE1\x84\x80",
        "\xE1\x85\xA1", "\xE1\x86\xA8", "\xEA\xB0\x80", "\xE2\x84\xAB", "\xE0\xA5\x98",
        "\xE0\xA4\x95", "\xE0\xA4\xBC", "\xCE\xB1", "\xCC\x93", "\xF0\x9D\x85\x9E",
        "\xF0\x91\x82\x99", "\xF0\x91\x82\xBA", "\xE3\x82\x99", "\xE3\x81\x8B",
    };
    amk_t_rng rng = {20260513};
    int iter, fails = 0;
    for (iter = 0; iter < 20000 && fails < 5; iter++) {
        unsigned char buf[256], want[1024];
        size_t n = 0, nw = 0, i, len = 0, start = 0;
        int changed = 0, target = (int)(amk_t_rng_next(&rng) % 40), k;
        unsigned char *r;
        for (k = 0; k < target; k++) {
            uint64_t x = amk_t_rng_next(&rng);
            if (x % 4 == 0) {
                buf[n++] = (unsigned char)(x >> 8);
            } else {
                const char *b = bits[(x >> 8) % (sizeof bits / sizeof bits[0])];
                memcpy(buf + n, b, strlen(b));
                n += strlen(b);
            }
        }
        /* the expected result, piece by piece */
        for (i = 0; i <= n; ) {
            int sl = i < n ? amk__utf8_seq_len(buf + i, n - i) : 0;
            if (i == n || !sl) {
                size_t pl = 0;
                int ch = 0;
                unsigned char *p = nfc_n(buf + start, i - start, &pl, &ch);
                CHECK(p != NULL);
                if (!p) return;
                memcpy(want + nw, p, pl);
                nw += pl;
                free(p);
                if (i == n) break;
                want[nw++] = buf[i];
                start = ++i;
            } else {
                i += (size_t)sl;
            }
        }
        r = nfc_n(buf, n, &len, &changed);
        if (!r || len != nw || memcmp(r, want, nw) != 0 ||
            changed != !(n == nw && memcmp(buf, want, n) == 0)) {
            CHECK_MSG(0, "random bytes case %d (%u bytes)", iter, (unsigned)n);
            fails++;
        } else {
            size_t l2 = 0;
            int c2 = -1;
            unsigned char *r2 = nfc_n(r, len, &l2, &c2);
            CHECK_MSG(r2 && c2 == 0, "random bytes case %d not idempotent", iter);
            free(r2);
        }
        free(r);
    }
}

/* Long runs: linear time (a quadratic sort of 200000 marks would take minutes under ASan). */
static void test_long_runs(void) {
    enum { N = 100000 };
    unsigned char *in = (unsigned char *)malloc(4 * N + 8);
    unsigned char *want = (unsigned char *)malloc(4 * N + 8);
    size_t i, n = 0, nw = 0;
    clock_t t0 = clock();
    /* a + (U+0316 U+0301) x N: the marks sort by class (220 first); the first acute composes */
    in[n++] = 'a';
    for (i = 0; i < N; i++) {
        memcpy(in + n, "\xCC\x96\xCC\x81", 4);
        n += 4;
    }
    memcpy(want, "\xC3\xA1", 2);
    nw = 2;
    for (i = 0; i < N; i++, nw += 2) memcpy(want + nw, "\xCC\x96", 2);
    for (i = 0; i + 1 < N; i++, nw += 2) memcpy(want + nw, "\xCC\x81", 2);
    expect_n("a + 200000 marks", in, n, want, nw);
    /* the same marks with no starter at all: sorted, nothing composes */
    for (i = 0; i < N; i++) {
        memcpy(want + 2 * i, "\xCC\x96", 2);
        memcpy(want + 2 * (N + i), "\xCC\x81", 2);
    }
    expect_n("200000 marks alone", in + 1, n - 1, want, 4 * (size_t)N);
    /* L V pairs: N syllables */
    for (i = n = nw = 0; i < N / 2; i++) {
        memcpy(in + n, "\xE1\x84\x80\xE1\x85\xA1", 6);
        n += 6;
        memcpy(want + nw, "\xEA\xB0\x80", 3);
        nw += 3;
    }
    expect_n("50000 L V pairs", in, n, want, nw);
    /* one L then V after V: only the first composes */
    memcpy(in, "\xE1\x84\x80", 3);
    for (i = 0, n = 3; i < N / 2; i++, n += 3) memcpy(in + n, "\xE1\x85\xA1", 3);
    memcpy(want, "\xEA\xB0\x80", 3);
    memcpy(want + 3, in + 6, n - 6);
    expect_n("L + 50000 V", in, n, want, n - 3);
    free(in);
    free(want);
    CHECK_MSG((double)(clock() - t0) / CLOCKS_PER_SEC < 20.0, "long runs took %.1f s",
              (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* Every allocation failing in turn: 0, nothing leaked (LeakSanitizer), then success. And text
   already in NFC allocates nothing. */
static void test_out_of_memory(void) {
    /* short runs (insertion sort), then a run of 80 marks (the counting sort) */
    char texts[2][200] = {"a\xCC\x81\xCC\x96 \xE2\x84\xAB x", "o"};
    size_t t;
    for (t = 0; t < 80; t++) memcpy(texts[1] + 1 + 2 * t, t % 2 ? "\xCC\x81" : "\xCC\x96", 2);
    for (t = 0; t < 2; t++) {
        const char *s = texts[t];
        long k, calls;
        unsigned char *out = NULL;
        size_t len = 0;
        t_fail_at = -1;
        t_allocs = 0;
        CHECK(amk__nfc((const unsigned char *)s, strlen(s), &out, &len) == 1 && out != NULL);
        amk__free(out);
        calls = t_allocs;
        CHECK(calls > 0);
        for (k = 0; k < calls; k++) {
            int ok;
            t_fail_at = k;
            t_allocs = 0;
            out = (unsigned char *)1;
            ok = amk__nfc((const unsigned char *)s, strlen(s), &out, &len);
            CHECK_MSG(ok == 0 && out == NULL && len == 0, "allocation %ld of %ld failed", k, calls);
        }
        t_fail_at = -1;
    }
    {
        static const char *const nfc_texts[] = {
            "plain ASCII", "caf\xC3\xA9", "\xE6\xBC\xA2\xE5\xAD\x97", "\xED\x95\x9C\xEA\xB5\xAD",
            "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xD7\xA9\xD7\x81", "x\xCC\x81\xCC\x81",
        };
        for (t = 0; t < sizeof nfc_texts / sizeof nfc_texts[0]; t++) {
            const char *s = nfc_texts[t];
            unsigned char *out = (unsigned char *)1;
            size_t len = 0;
            t_allocs = 0;
            CHECK(amk__nfc((const unsigned char *)s, strlen(s), &out, &len) == 1);
            CHECK(out == NULL && len == strlen(s));
            /* the last has Maybes (U+0301): normalized to compare, so it may use scratch space */
            if (t + 1 < sizeof nfc_texts / sizeof nfc_texts[0])
                CHECK_MSG(t_allocs == 0, "text %u allocated", (unsigned)t);
        }
    }
}

int main(void) {
    RUN(test_vectors);
    RUN(test_by_hand);
    RUN(test_invalid_bytes);
    RUN(test_random_bytes);
    RUN(test_long_runs);
    RUN(test_out_of_memory);
    TEST_SUMMARY();
}
