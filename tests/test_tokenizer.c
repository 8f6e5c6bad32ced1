/* tokenizer: the byte alphabet, the three pre-tokenizers on hand-checked splits, BPE merge order,
   special tokens, hostile bytes, and SmolLM2's real tokenizer against reference ids from HF
   tokenizers (tests/data/tokenizer, made by scripts/tokenizer_reference.py). */
#define _POSIX_C_SOURCE 200809L /* mkdir, getpid */
#include "../amk.h"
#include "amk_test.h"
#include <stdint.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA "tests/data/tokenizer/"
#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static amk_tokenizer *smol; /* SmolLM2 from smollm2_tokenizer.json, shared by the tests */

/* ---- helpers --------------------------------------------------------------------------------- */

/* GPT-2's bytes_to_unicode, written out independently of the library: the printable bytes keep
   their code point, the rest get 256, 257, ... in byte order. Writes the UTF-8 of byte b's char. */
static void byte_char(int b, char *out) {
    int cps[256], n = 0, i;
    unsigned cp;
    for (i = 0; i < 256; i++) cps[i] = -1;
    for (i = 0x21; i <= 0x7E; i++) cps[i] = i;
    for (i = 0xA1; i <= 0xAC; i++) cps[i] = i;
    for (i = 0xAE; i <= 0xFF; i++) cps[i] = i;
    for (i = 0; i < 256; i++)
        if (cps[i] < 0) cps[i] = 256 + n++;
    cp = (unsigned)cps[b];
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); out[2] = 0; }
}

/* Pre-tokenizes text and joins the pieces with '|' (a piece boundary) for exact comparison. */
static const char *split(amk_pretok p, const char *text) {
    static char out[1024];
    size_t ends[128], len = strlen(text), start = 0, k = 0;
    int n = amk_tokenizer_pretokenize(p, text, len, ends, 128), i;
    if (n < 0 || n > 128) return "(error)";
    for (i = 0; i < n; i++) {
        if (i) out[k++] = '|';
        memcpy(out + k, text + start, ends[i] - start);
        k += ends[i] - start;
        start = ends[i];
    }
    out[k] = 0;
    return out;
}

/* Encodes text and compares with the expected ids. */
static int encodes_to(const amk_tokenizer *t, const char *text, size_t len, const int *want, int n_want) {
    int ids[512], n = amk_tokenizer_encode(t, text, len, 0, ids, 512), i;
    if (n != n_want) { fprintf(stderr, "  '%.40s': %d ids, want %d\n", text, n, n_want); return 0; }
    for (i = 0; i < n; i++)
        if (ids[i] != want[i]) { fprintf(stderr, "  '%.40s': id %d is %d, want %d\n", text, i, ids[i], want[i]); return 0; }
    return 1;
}

/* decode(encode(text)) into out; returns its length or -1. */
static long roundtrip(const amk_tokenizer *t, const char *text, size_t len, char *out, size_t cap) {
    int n = amk_tokenizer_encode(t, text, len, 0, NULL, 0), i;
    int *ids;
    long k = 0;
    if (n < 0) return -1;
    ids = (int *)malloc((size_t)(n ? n : 1) * sizeof(int));
    if (amk_tokenizer_encode(t, text, len, 0, ids, n) != n) { free(ids); return -1; }
    for (i = 0; i < n; i++) {
        int m = amk_tokenizer_decode(t, ids[i], out + k, cap - (size_t)k);
        if (m < 0) { free(ids); return -1; }
        k += m;
    }
    free(ids);
    return k;
}

/* text with the bytes that have no token removed: what a round trip gives back. */
static size_t kept_bytes(const amk_tokenizer *t, const char *text, size_t len, char *out) {
    size_t i, k = 0;
    for (i = 0; i < len; i++)
        if (amk_tokenizer_byte_token(t, (unsigned char)text[i]) >= 0) out[k++] = text[i];
    return k;
}

/* A toy tokenizer: the 256 byte tokens (ids 0..255), then extra tokens, merges and types. */
static amk_tokenizer *toy(const char *const *extra, int n_extra, const char *const *merges, int n_merges,
                          const int *extra_types, amk_pretok pretok, int ignore_merges) {
    static char bytes[256][4];
    const char *tokens[300];
    int types[300], i;
    amk_tokenizer_spec s;
    amk_tokenizer *t = NULL;
    amk_diag d;
    for (i = 0; i < 256; i++) { byte_char(i, bytes[i]); tokens[i] = bytes[i]; types[i] = 1; }
    for (i = 0; i < n_extra; i++) { tokens[256 + i] = extra[i]; types[256 + i] = extra_types ? extra_types[i] : 1; }
    memset(&s, 0, sizeof s);
    s.n_tokens = 256 + n_extra;
    s.tokens = tokens;
    s.token_types = types;
    s.n_merges = n_merges;
    s.merges = merges;
    s.pretok = pretok;
    s.bos_id = s.eos_id = -1;
    s.ignore_merges = ignore_merges;
    amk_diag_clear(&d);
    if (amk_tokenizer_create(&s, &t, &d) != AMK_OK) fprintf(stderr, "  toy: %s\n", d.message);
    return t;
}

/* JSON string unescape of s (pointing after the opening quote) into out; returns the byte count
   and sets *end after the closing quote. Enough JSON for the reference files (\uXXXX, pairs). */
static size_t unescape(const char *s, char *out, const char **end) {
    size_t k = 0;
    while (*s && *s != '"') {
        if (*s != '\\') { out[k++] = *s++; continue; }
        s++;
        if (*s == 'u') {
            unsigned cp, lo;
            char hex[5];
            memcpy(hex, s + 1, 4); hex[4] = 0;
            cp = (unsigned)strtoul(hex, NULL, 16);
            s += 5;
            if (cp >= 0xD800 && cp < 0xDC00 && s[0] == '\\' && s[1] == 'u') {
                memcpy(hex, s + 2, 4);
                lo = (unsigned)strtoul(hex, NULL, 16);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            if (cp < 0x80) out[k++] = (char)cp;
            else if (cp < 0x800) { out[k++] = (char)(0xC0 | (cp >> 6)); out[k++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                out[k++] = (char)(0xE0 | (cp >> 12)); out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[k++] = (char)(0xF0 | (cp >> 18)); out[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[k++] = (char)(0x80 | (cp & 0x3F));
            }
            continue;
        }
        switch (*s) {
        case 'n': out[k++] = '\n'; break;
        case 't': out[k++] = '\t'; break;
        case 'r': out[k++] = '\r'; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        default: out[k++] = *s; break; /* \" \\ \/ */
        }
        s++;
    }
    *end = *s ? s + 1 : s;
    return k;
}

/* ---- the byte alphabet ----------------------------------------------------------------------- */

static void test_byte_map(void) {
    amk_tokenizer *t = toy(NULL, 0, NULL, 0, NULL, AMK_PRETOK_GPT2, 0);
    char ch[4], buf[8];
    int b;
    CHECK(t != NULL);
    if (!t) return;
    for (b = 0; b < 256; b++) {
        byte_char(b, ch);
        CHECK_EQ_INT(amk_tokenizer_token_id(t, ch), b);
        CHECK_EQ_INT(amk_tokenizer_byte_token(t, b), b);
        CHECK_EQ_INT(amk_tokenizer_decode(t, b, buf, sizeof buf), 1);
        CHECK_EQ_INT((unsigned char)buf[0], b);
    }
    /* the well-known letters: space is U+0120 'Ġ', newline U+010A 'Ċ', 0xAD the last, U+0143 */
    CHECK_EQ_INT(amk_tokenizer_token_id(t, "\xC4\xA0"), ' ');
    CHECK_EQ_INT(amk_tokenizer_token_id(t, "\xC4\x8A"), '\n');
    CHECK_EQ_INT(amk_tokenizer_token_id(t, "\xC5\x83"), 0xAD);
    CHECK_EQ_INT(amk_tokenizer_token_id(t, "\xC4\xA1"), 0x7F);
    CHECK_EQ_INT(amk_tokenizer_token_id(t, "A"), 'A');
    CHECK_EQ_INT(amk_tokenizer_byte_token(t, 256), -1);
    amk_tokenizer_free(t);
}

/* ---- pre-tokenizers -------------------------------------------------------------------------- */

static void test_pretok_smollm(void) {
    /* expected splits checked against HF tokenizers 0.23.3 (Digits(individual) + ByteLevel) */
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "Hello world! 123"), "Hello| world|!| |1|2|3");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "a  1"), "a|  |1");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "a   b"), "a|  | b");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "a \t\nb"), "a| \t|\n|b");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "don't I'LL"), "don|'t| I|'|LL");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "it's we're they've I'm he'll she'd"),
              "it|'s| we|'re| they|'ve| I|'m| he|'ll| she|'d");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "x\xC2\xB2y"), "x|\xC2\xB2|y");        /* ² is \p{N} */
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "a\x1C\x1C" "b"), "a|\x1C\x1C|b");     /* U+001C is not \s */
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "a\xC2\x85\xC2\x85" "b"), "a|\xC2\x85|\xC2\x85|b"); /* U+0085 is */
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "v2.0"), "v|2|.|0");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "  x"), " | x");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "x  "), "x|  ");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "''s"), "''|s");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "!'s"), "!'|s");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, " !?x"), " !?|x");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C"), "\xE4\xBD\xA0\xE5\xA5\xBD|\xEF\xBC\x8C");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "\xE0\xA4\x95\xE0\xA5\x8D\xE0\xA4\xB7"), "\xE0\xA4\x95|\xE0\xA5\x8D|\xE0\xA4\xB7"); /* virama is Mn */
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "\xE2\x80\xA8\xE2\x80\xA8x"), "\xE2\x80\xA8|\xE2\x80\xA8|x");
    CHECK_STR(split(AMK_PRETOK_SMOLLM, "a\n\nb"), "a|\n|\n|b");
    CHECK_EQ_INT(amk_tokenizer_pretokenize(AMK_PRETOK_SMOLLM, "", 0, NULL, 0), 0);
}

static void test_pretok_gpt2(void) {
    /* the GPT-2 regex alone: digits run together and take a leading space */
    CHECK_STR(split(AMK_PRETOK_GPT2, "Hello world! 123"), "Hello| world|!| 123");
    CHECK_STR(split(AMK_PRETOK_GPT2, "a  123"), "a| | 123");
    CHECK_STR(split(AMK_PRETOK_GPT2, "x1y"), "x|1|y");
    CHECK_STR(split(AMK_PRETOK_GPT2, "a   "), "a|   ");
    CHECK_STR(split(AMK_PRETOK_GPT2, "a\t b"), "a|\t| b");
    CHECK_STR(split(AMK_PRETOK_GPT2, "'S 'll"), "'|S| '|ll");
    /* invalid UTF-8 bytes are "other" characters, one byte each */
    CHECK_STR(split(AMK_PRETOK_GPT2, "a\xFF\xC3 b"), "a|\xFF\xC3| b");
    CHECK_STR(split(AMK_PRETOK_GPT2, " \xE2\x82x"), " \xE2\x82|x");
}

static void test_pretok_llama3(void) {
    /* No Llama-3 model is available here: these splits were worked out by hand from the regex
       (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
       \s*[\r\n]+|\s+(?!\S)|\s+ (leftmost alternative that matches, each greedy with backtracking);
       the ones marked HF were also run through HF tokenizers' Split with that regex. */
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "12345"), "123|45");                       /* HF */
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "IT'S"), "IT|'S");                         /* HF */
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "x'\xC5\xBF y"), "x|'\xC5\xBF| y");        /* HF: ſ folds to s */
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "a \n\n b"), "a| \n\n| b");                /* HF */
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "Hello world! 1234567"), "Hello| world|!| |123|456|7");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "(word"), "(word");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "((word"), "((|word");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "\tword"), "\tword");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "\nword"), "\n|word");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "I'LL DON'T we'Re"), "I|'LL| DON|'T| we|'Re");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "x!!\n\ny"), "x|!!\n\n|y");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "a  \n  b"), "a|  \n| | b");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "a   b"), "a|  | b");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "a   "), "a|   ");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, " ?x"), " ?|x");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "x\r\n"), "x|\r\n");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "1a"), "1|a");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "a1"), "a|1");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, " 1"), " |1");
    CHECK_STR(split(AMK_PRETOK_LLAMA3, "'x"), "'x");
}

/* ---- BPE ------------------------------------------------------------------------------------- */

static void test_merge_order(void) {
    /* ids: 256 "aa", 257 "bc", 258 "ab", 259 "aaa", 260 "aaaa" */
    static const char *const extra[] = {"aa", "bc", "ab", "aaa", "aaaa"};
    static const char *const merges[] = {"b c", "a a", "a b", "aa a", "aa aa"};
    amk_tokenizer *t = toy(extra, 5, merges, 5, NULL, AMK_PRETOK_GPT2, 0);
    int want1[] = {'a', 257};           /* "abc": "b c" ranks before "a b" */
    int want2[] = {259};                /* "aaa": equal ranks, the leftmost pair first: aa|a -> aaa
                                           (the right pair first would end as a|aa) */
    int want3[] = {260};                /* "aaaa": aa|aa then "aa aa" (rank 4), not "aa a" */
    int want4[] = {260, 259};           /* "aaaaaaa": aa|aa|aa|a, then "aa a" (rank 3) before
                                           "aa aa" (rank 4): aa|aa|aaa -> aaaa|aaa */
    int want5[] = {258};                /* "ab" */
    CHECK(t != NULL);
    if (!t) return;
    CHECK(encodes_to(t, "abc", 3, want1, 2));
    CHECK(encodes_to(t, "aaa", 3, want2, 1));
    CHECK(encodes_to(t, "aaaa", 4, want3, 1));
    CHECK(encodes_to(t, "aaaaaaa", 7, want4, 2));
    CHECK(encodes_to(t, "ab", 2, want5, 1));
    amk_tokenizer_free(t);
}

static void test_ignore_merges(void) {
    /* "abc" is a token but no merge reaches it: only ignore_merges uses it whole */
    static const char *const extra[] = {"ab", "abc"};
    static const char *const merges[] = {"a b"};
    amk_tokenizer *t0 = toy(extra, 2, merges, 1, NULL, AMK_PRETOK_LLAMA3, 0);
    amk_tokenizer *t1 = toy(extra, 2, merges, 1, NULL, AMK_PRETOK_LLAMA3, 1);
    int w0[] = {256, 'c'}, w1[] = {257};
    CHECK(t0 && t1);
    if (t0 && t1) {
        CHECK(encodes_to(t0, "abc", 3, w0, 2));
        CHECK(encodes_to(t1, "abc", 3, w1, 1));
    }
    amk_tokenizer_free(t0);
    amk_tokenizer_free(t1);
}

static void test_specials(void) {
    /* 256 "<x", 257 "<xy>" control, 258 "ab" normal, 259 "<s>" user-defined */
    static const char *const extra[] = {"<x", "<xy>", "ab", "<s>"};
    static const char *const merges[] = {"a b"};
    static const int types[] = {3, 3, 1, 4};
    amk_tokenizer *t = toy(extra, 4, merges, 1, types, AMK_PRETOK_GPT2, 0);
    int w1[] = {257}, w2[] = {256, 257}, w3[] = {256, 'y'}, w4[] = {258, 259, 258}, w5[] = {'<', 'y', '>'};
    char buf[16];
    CHECK(t != NULL);
    if (!t) return;
    CHECK(encodes_to(t, "<xy>", 4, w1, 1));        /* the longest special at a position */
    CHECK(encodes_to(t, "<x<xy>", 6, w2, 2));
    CHECK(encodes_to(t, "<xy", 3, w3, 2));
    CHECK(encodes_to(t, "ab<s>ab", 7, w4, 3));
    CHECK(encodes_to(t, "<y>", 3, w5, 3));
    CHECK(amk_tokenizer_is_special(t, 257) && amk_tokenizer_is_special(t, 259) && !amk_tokenizer_is_special(t, 258));
    CHECK_EQ_INT(amk_tokenizer_decode(t, 257, buf, sizeof buf), 4);
    CHECK(memcmp(buf, "<xy>", 4) == 0);
    CHECK_EQ_INT(amk_tokenizer_token_id(t, "<xy>"), 257);
    amk_tokenizer_free(t);
    /* without token types nothing is special: "<xy>" goes through BPE */
    {
        const char *tokens[2] = {"a", "<xy>"};
        amk_tokenizer_spec s;
        amk_tokenizer *u = NULL;
        int ids[8];
        memset(&s, 0, sizeof s);
        s.n_tokens = 2;
        s.tokens = tokens;
        s.pretok = AMK_PRETOK_GPT2;
        s.bos_id = 0;
        s.eos_id = -1;
        s.add_bos = 1;
        CHECK_EQ_INT(amk_tokenizer_create(&s, &u, NULL), AMK_OK);
        /* no byte tokens for < x y >: every byte dropped; the default add_bos adds id 0 */
        CHECK_EQ_INT(amk_tokenizer_encode(u, "<xy>", 4, -1, ids, 8), 1);
        CHECK_EQ_INT(ids[0], 0);
        CHECK_EQ_INT(amk_tokenizer_encode(u, "<xy>a", 5, 0, ids, 8), 1);
        CHECK_EQ_INT(ids[0], 0);
        amk_tokenizer_free(u);
    }
}

static void test_create_errors(void) {
    static const char *const extra[] = {"ab"};
    static const char *const bad_merge[] = {"a c"};   /* "ac" is not a token */
    static const char *const no_space[] = {"ab"};
    const char *tokens[1] = {"a"};
    amk_tokenizer_spec s;
    amk_tokenizer *t = (amk_tokenizer *)&s;
    amk_diag d;
    char buf[300][4];
    const char *all[300];
    int i;
    for (i = 0; i < 256; i++) { byte_char(i, buf[i]); all[i] = buf[i]; }
    all[256] = extra[0];
    memset(&s, 0, sizeof s);
    s.n_tokens = 257;
    s.tokens = all;
    s.bos_id = s.eos_id = -1;
    s.n_merges = 1;
    s.merges = bad_merge;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, &d), AMK_ERR_PARSE);
    CHECK(t == NULL);
    CHECK(strstr(d.message, "merge 0") != NULL);
    s.merges = no_space;
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, &d), AMK_ERR_PARSE);
    s.n_merges = 0;
    s.bos_id = 257;
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, &d), AMK_ERR_PARSE);
    s.bos_id = -1;
    s.pretok = (amk_pretok)7;
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, &d), AMK_ERR_INVALID_ARG);
    s.pretok = AMK_PRETOK_GPT2;
    s.n_tokens = 0;
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, &d), AMK_ERR_INVALID_ARG);
    s.n_tokens = 1;
    s.tokens = tokens;
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, &d), AMK_OK);
    CHECK_EQ_INT(amk_tokenizer_n_vocab(t), 1);
    amk_tokenizer_free(t);
    CHECK_EQ_INT(amk_tokenizer_create(NULL, &t, &d), AMK_ERR_INVALID_ARG);
    /* bad calls on the query side */
    CHECK_EQ_INT(amk_tokenizer_encode(NULL, "a", 1, 0, NULL, 0), -1);
    CHECK_EQ_INT(amk_tokenizer_decode(NULL, 0, NULL, 0), -1);
    CHECK_EQ_INT(amk_tokenizer_pretokenize(AMK_PRETOK_GPT2, NULL, 3, NULL, 0), -1);
    CHECK_EQ_INT(amk_tokenizer_token_id(NULL, "a"), -1);
}

/* ---- SmolLM2 --------------------------------------------------------------------------------- */

static void test_smollm_load(void) {
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_tokenizer_from_json(DATA "smollm2_tokenizer.json", &smol, &d), AMK_OK);
    if (!smol) { fprintf(stderr, "  %s\n", d.message); return; }
    CHECK_EQ_INT(amk_tokenizer_n_vocab(smol), 49152);
    CHECK_EQ_INT(amk_tokenizer_bos(smol), 1);     /* from tokenizer_config.json beside it */
    CHECK_EQ_INT(amk_tokenizer_eos(smol), 2);
    CHECK_EQ_INT(amk_tokenizer_add_bos(smol), 0);
    CHECK_EQ_INT(amk_tokenizer_pretok(smol), AMK_PRETOK_SMOLLM);
    CHECK_EQ_INT(amk_tokenizer_token_id(smol, "<|im_start|>"), 1);
    CHECK_EQ_INT(amk_tokenizer_token_id(smol, "\xC4\xA0"), 216);   /* Ġ */
    CHECK_EQ_INT(amk_tokenizer_token_id(smol, "\xC4\x8A"), 198);   /* Ċ */
    CHECK_EQ_INT(amk_tokenizer_token_id(smol, "no such token"), -1);
    CHECK(amk_tokenizer_is_special(smol, 16) && !amk_tokenizer_is_special(smol, 17));
    CHECK_EQ_INT(amk_tokenizer_byte_token(smol, 0x04), -1);     /* SmolLM2 lacks 21 byte tokens */
    CHECK_EQ_INT(amk_tokenizer_byte_token(smol, 0xFF), -1);
    CHECK_EQ_INT(amk_tokenizer_byte_token(smol, 0x00), 190);
}

static void test_reference_vectors(void) {
    /* REFERENCE §3.2 (a third-party packer script; HF tokenizers agrees) */
    int w1[] = {19556, 905, 17, 216, 33, 34, 35}, w2[] = {198}, w3[] = {504, 3575, 282, 4649, 314};
    int ids[4];
    if (!smol) { CHECK(smol != NULL); return; }
    CHECK(encodes_to(smol, "Hello world! 123", 16, w1, 7));
    CHECK(encodes_to(smol, "\n", 1, w2, 1));
    CHECK(encodes_to(smol, "The capital of France is", 24, w3, 5));
    /* cap smaller than the encoding: the full count back, only cap ids written */
    ids[2] = -7;
    CHECK_EQ_INT(amk_tokenizer_encode(smol, "Hello world! 123", 16, 0, ids, 2), 7);
    CHECK_EQ_INT(ids[0], 19556);
    CHECK_EQ_INT(ids[1], 905);
    CHECK_EQ_INT(ids[2], -7);
    /* add_bos: 1 prepends <|im_start|>, -1 follows the tokenizer (no BOS for SmolLM2) */
    CHECK_EQ_INT(amk_tokenizer_encode(smol, "\n", 1, 1, ids, 4), 2);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(ids[1], 198);
    CHECK_EQ_INT(amk_tokenizer_encode(smol, "\n", 1, -1, ids, 4), 1);
    CHECK_EQ_INT(amk_tokenizer_encode(smol, "", 0, 0, ids, 4), 0);
    CHECK_EQ_INT(amk_tokenizer_encode(smol, NULL, 0, 1, ids, 4), 1);
    CHECK_EQ_INT(ids[0], 1);
}

/* Every case of the reference file `path` ({"text": ..., key: [ids], ...} a line) encodes to the
   ids under `key`, and, with roundtrip, decodes back to the text less the bytes the vocabulary has
   no token for. Returns the cases, or -1 if any differs. */
static int check_cases(const amk_tokenizer *t, const char *what, const char *path, const char *key, int roundtrip_too) {
    size_t size;
    char *json = amk_t_read_file(path, &size), *line, *text, *back, pat[32];
    int n_cases = 0, bad = 0, *ids;
    if (!json) { fprintf(stderr, "  no %s\n", path); return -1; }
    snprintf(pat, sizeof pat, "\"%s\": [", key);
    text = (char *)malloc(size + 1);
    back = (char *)malloc(size + 1);
    ids = (int *)malloc(size * sizeof(int) + sizeof(int));
    for (line = strstr(json, "{\"text\": \""); line; line = strstr(line, "{\"text\": \"")) {
        const char *p = line + 10, *q;
        size_t tl = unescape(p, text, &q), kl;
        int want[2048], n_want = 0, n, i;
        long bl;
        q = strstr(q, pat);
        if (!q) break;
        q += strlen(pat);
        while (*q && *q != ']' && n_want < 2048) {
            char *e;
            want[n_want++] = (int)strtol(q, &e, 10);
            q = e;
            while (*q == ',' || *q == ' ') q++;
        }
        n = amk_tokenizer_encode(t, text, tl, 0, ids, (int)size);
        if (n != n_want || memcmp(ids, want, (size_t)n * sizeof(int)) != 0) {
            if (bad++ < 5) {
                fprintf(stderr, "  %s case %d '%.*s': got %d ids [", what, n_cases, (int)(tl > 40 ? 40 : tl), text, n);
                for (i = 0; i < n && i < 12; i++) fprintf(stderr, "%d ", ids[i]);
                fprintf(stderr, "] want %d [", n_want);
                for (i = 0; i < n_want && i < 12; i++) fprintf(stderr, "%d ", want[i]);
                fprintf(stderr, "]\n");
            }
        }
        bl = roundtrip_too ? roundtrip(t, text, tl, back, size) : 0;
        kl = roundtrip_too ? kept_bytes(t, text, tl, text) : 0;
        if (bl != (long)kl || memcmp(back, text, kl) != 0) {
            if (bad++ < 5) fprintf(stderr, "  %s case %d does not round-trip\n", what, n_cases);
        }
        n_cases++;
        line = (char *)q;
    }
    free(json);
    free(text);
    free(back);
    free(ids);
    if (bad) return -1;
    return n_cases;
}
/* smollm2_ref.json: HF tokenizers' ids for SmolLM2's tokenizer, round trips too. */
static int check_reference(const amk_tokenizer *t, const char *what) {
    return check_cases(t, what, DATA "smollm2_ref.json", "ids", 1);
}

/* Issue 41's tokenizers (tests/data/tokenizer/families, scripts/tokenizer_families.py: made
   without downloads, ids from HF tokenizers and SentencePiece). Qwen2's layout: a byte-level BPE
   with the NFC normalizer and Qwen2's Split regex; its tokenizer.json against HF, its GGUF (pre
   "qwen2", no normalizer, as llama.cpp) against HF without the normalizer. */
#define FAM DATA "families/"
static void test_family_qwen2(void) {
    amk_tokenizer *t = NULL;
    amk_gguf *g = NULL;
    amk_diag d;
    int n;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_tokenizer_from_json(FAM "qwen2/tokenizer.json", &t, &d), AMK_OK);
    if (t) {
        CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_QWEN2);
        n = check_cases(t, "qwen2 json", FAM "qwen2/cases.json", "ids", 0);
        CHECK_MSG(n >= 300, "qwen2 tokenizer.json: %d cases matched", n);
        printf("test_tokenizer: %d Qwen2-style cases match HF tokenizers (tokenizer.json, NFC)\n", n);
        amk_tokenizer_free(t);
    } else {
        fprintf(stderr, "  %s\n", d.message);
    }
    CHECK_EQ_INT(amk_gguf_open(FAM "qwen2/model.gguf", &g, &d), AMK_OK);
    if (!g) return;
    CHECK_EQ_INT(amk_tokenizer_from_gguf(g, &t, &d), AMK_OK);
    amk_gguf_close(g);
    if (!t) return;
    CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_QWEN2);
    CHECK_EQ_INT(amk_tokenizer_add_bos(t), 0);
    n = check_cases(t, "qwen2 gguf", FAM "qwen2/cases.json", "gguf", 1);
    CHECK_MSG(n >= 300, "qwen2 GGUF: %d cases matched", n);
    {   /* ChatML from the vocabulary; no template, so no default system turn */
        char buf[128];
        CHECK_EQ_INT(amk_tokenizer_chat_format(t), AMK_CHAT_CHATML);
        CHECK(amk_tokenizer_chat_prompt(t, NULL, "Hi", buf, sizeof buf) > 0);
        CHECK_STR(buf, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
        CHECK(amk_tokenizer_chat_prompt(t, "Be brief.", "Hi", buf, sizeof buf) > 0);
        CHECK_STR(buf, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }
    amk_tokenizer_free(t);
}

/* SentencePiece BPE with byte fallback (Llama 2's settings): the legacy tokenizer.json
   (Prepend + Replace normalizer) and the Metaspace one against HF tokenizers, the GGUF (scores,
   types) against SentencePiece's own encoding of each stretch between specials. */
static void test_family_spm(void) {
    static const char *const files[2] = {FAM "spm/tokenizer.json", FAM "spm/tokenizer_metaspace.json"};
    static const char *const keys[2] = {"ids", "metaspace"};
    amk_tokenizer *t = NULL;
    amk_gguf *g = NULL;
    amk_diag d;
    int n, i, ids[8];
    char buf[16];
    for (i = 0; i < 2; i++) {
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk_tokenizer_from_json(files[i], &t, &d), AMK_OK);
        if (!t) { fprintf(stderr, "  %s: %s\n", files[i], d.message); continue; }
        CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_SPM);
        n = check_cases(t, files[i], FAM "spm/cases.json", keys[i], 0);
        CHECK_MSG(n >= 300, "%s: %d cases matched", files[i], n);
        printf("test_tokenizer: %d SentencePiece cases match HF tokenizers (%s)\n", n, keys[i]);
        amk_tokenizer_free(t);
    }
    CHECK_EQ_INT(amk_gguf_open(FAM "spm/model.gguf", &g, &d), AMK_OK);
    if (!g) return;
    CHECK_EQ_INT(amk_tokenizer_from_gguf(g, &t, &d), AMK_OK);
    amk_gguf_close(g);
    if (!t) { fprintf(stderr, "  %s\n", d.message); return; }
    CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_SPM);
    CHECK_EQ_INT(amk_tokenizer_add_bos(t), 1);
    CHECK_EQ_INT(amk_tokenizer_bos(t), 1);
    n = check_cases(t, "spm gguf", FAM "spm/cases.json", "gguf", 0);
    CHECK_MSG(n >= 300, "spm GGUF: %d cases matched", n);
    printf("test_tokenizer: %d SentencePiece cases match SentencePiece (GGUF)\n", n);
    /* decoding: "▁" is a space, a byte token its byte; BOS from add_bos */
    CHECK_EQ_INT(amk_tokenizer_encode(t, "\n", 1, -1, ids, 8) >= 2, 1);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(amk_tokenizer_decode(t, amk_tokenizer_byte_token(t, 0x0A), buf, sizeof buf), 1);
    CHECK_EQ_INT(buf[0], '\n');
    {   /* SentencePiece without a template or an [INST] token: Llama 2's format */
        char p[128];
        CHECK_EQ_INT(amk_tokenizer_chat_format(t), AMK_CHAT_LLAMA2);
        CHECK(amk_tokenizer_chat_prompt(t, "Be brief.", "Hi", p, sizeof p) > 0);
        CHECK_STR(p, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
        CHECK(amk_tokenizer_chat_prompt(t, NULL, "Hi", p, sizeof p) > 0);
        CHECK_STR(p, "[INST] Hi [/INST]");
    }
    amk_tokenizer_free(t);
    {   /* the format from tokenizer_config.json's chat_template: Mistral's, Llama 3's */
        static const char *const cfg[2] = {
            "{\"chat_template\": \"{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}\"}",
            "{\"chat_template\": [{\"name\": \"default\", \"template\": \"<|start_header_id|>{{ role }}\"}]}"};
        static const amk_chat_format want[2] = {AMK_CHAT_MISTRAL, AMK_CHAT_LLAMA3};
        size_t size;
        char *json = amk_t_read_file(FAM "spm/tokenizer.json", &size);
        CHECK(json != NULL);
        for (i = 0; json && i < 2; i++) {
            CHECK_EQ_INT(amk_tokenizer_from_json_text(json, size, cfg[i], strlen(cfg[i]), &t, &d), AMK_OK);
            if (t) {
                char pr[128];
                const int n = amk_tokenizer_chat_prompt(t, "Be brief.", "Hi", pr, sizeof pr);
                CHECK_EQ_INT(amk_tokenizer_chat_format(t), want[i]);
                if (i == 0) CHECK(n > 0 && strcmp(pr, "[INST] Be brief.\n\nHi [/INST]") == 0);
                else CHECK_EQ_INT(n, -1); /* Llama 3's format, but no <|start_header_id|> token */
            }
            amk_tokenizer_free(t);
            t = NULL;
        }
        free(json);
    }
}

static void test_reference_corpus(void) {
    int n;
    if (!smol) { CHECK(smol != NULL); return; }
    n = check_reference(smol, "json");
    CHECK_MSG(n >= 200, "%d reference cases matched (want all of >= 200)", n);
    printf("test_tokenizer: %d reference cases match HF tokenizers\n", n);
}

static void test_gguf_matches_json(void) {
    amk_gguf *g = NULL;
    amk_tokenizer *t = NULL;
    amk_diag d;
    FILE *f = fopen(MODEL, "rb");
    int n, i;
    CHECK_MSG(f != NULL, "%s missing: run `make model`", MODEL);
    if (!f) return;
    fclose(f);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_gguf_open(MODEL, &g, &d), AMK_OK);
    if (!g) return;
    CHECK_EQ_INT(amk_tokenizer_from_gguf(g, &t, &d), AMK_OK);
    amk_gguf_close(g); /* the tokenizer keeps copies */
    if (!t) { fprintf(stderr, "  %s\n", d.message); return; }
    CHECK_EQ_INT(amk_tokenizer_n_vocab(t), 49152);
    CHECK_EQ_INT(amk_tokenizer_bos(t), 1);
    CHECK_EQ_INT(amk_tokenizer_eos(t), 2);
    CHECK_EQ_INT(amk_tokenizer_add_bos(t), 0);
    CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_SMOLLM);
    for (i = 0; smol && i < 49152; i++) {
        size_t a, b;
        const char *x = amk_tokenizer_token_bytes(t, i, &a), *y = amk_tokenizer_token_bytes(smol, i, &b);
        if (a != b || memcmp(x, y, a) != 0 || amk_tokenizer_is_special(t, i) != amk_tokenizer_is_special(smol, i)) {
            CHECK_MSG(0, "token %d differs between GGUF and tokenizer.json", i);
            break;
        }
    }
    n = check_reference(t, "gguf");
    CHECK_MSG(n >= 200, "%d reference cases matched through GGUF", n);
    amk_tokenizer_free(t);
}

static void test_invalid_utf8(void) {
    /* lone continuation, truncated sequences, overlong, surrogate, above U+10FFFF, and bytes
       SmolLM2 has no token for (0xC0, 0xFF): these are dropped, all others come back */
    static const char text[] = "a\x80" "b\xC3 \xE2\x82" "c\xC0\xAF" "d\xED\xA0\x80" "e\xF4\x90\x80\x80"
                               "f\xFF\xFE" "g\xF0\x9F\x98" "\xE2\x82\xAC";
    char back[256], kept[256];
    long n;
    size_t k;
    if (!smol) { CHECK(smol != NULL); return; }
    n = roundtrip(smol, text, sizeof text - 1, back, sizeof back);
    k = kept_bytes(smol, text, sizeof text - 1, kept);
    CHECK_EQ_INT(k, sizeof text - 1 - 3); /* 0xC0, 0xFF, 0xFE */
    CHECK_EQ_INT(n, (long)k);
    CHECK(n == (long)k && memcmp(back, kept, k) == 0);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rng(void) { /* xorshift64 */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_random_megabyte(void) {
    size_t n = 1 << 20, i, k;
    char *text = (char *)malloc(n), *back = (char *)malloc(n), *kept = (char *)malloc(n);
    clock_t c0;
    long m;
    double secs;
    if (!smol) { CHECK(smol != NULL); free(text); free(back); free(kept); return; }
    for (i = 0; i < n; i++) text[i] = (char)(rng() >> 56);
    c0 = clock();
    m = roundtrip(smol, text, n, back, n);
    secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    k = kept_bytes(smol, text, n, kept);
    CHECK_EQ_INT(m, (long)k);
    CHECK(m == (long)k && memcmp(back, kept, k) == 0);
    CHECK_MSG(secs < 10.0, "1 MB of random bytes took %.2f s (two encodes + decode)", secs);
    free(text);
    free(back);
    free(kept);
}

/* Long pieces stay O(n log n): a 10k run of one letter (one piece, thousands of merges), of
   spaces, and of a two-letter pattern. */
static void test_long_pieces(void) {
    static const char *const pats[] = {"a", " ", "ab", "\xE4\xB8\xAD", "!"};
    size_t n = 10000;
    char *text = (char *)malloc(4 * n), *back = (char *)malloc(4 * n);
    int p;
    if (!smol) { CHECK(smol != NULL); free(text); free(back); return; }
    for (p = 0; p < 5; p++) {
        size_t pl = strlen(pats[p]), i, len = 0;
        clock_t c0;
        long m;
        double secs;
        for (i = 0; i < n; i++) { memcpy(text + len, pats[p], pl); len += pl; }
        c0 = clock();
        m = roundtrip(smol, text, len, back, 4 * n);
        secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
        CHECK(m == (long)len && memcmp(back, text, len) == 0);
        /* why: ~10 ms here without sanitizers; 1 s leaves room for ASan and a busy machine while
           a quadratic BPE (10^8 steps) would blow it */
        CHECK_MSG(secs < 1.0, "10k x '%s' took %.3f s", pats[p], secs);
    }
    free(text);
    free(back);
}

static void test_chat_prompt(void) {
    static const char want[] = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                               "Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    char buf[512], small[8];
    int n = amk_tokenizer_chat_prompt(smol, NULL, "Hi", buf, sizeof buf), ids[64], m, i, starts = 0, ends = 0;
    CHECK_EQ_INT(n, (int)sizeof want - 1);
    CHECK_STR(buf, want);
    CHECK_EQ_INT(amk_tokenizer_chat_prompt(NULL, "", "Q", buf, sizeof buf), 81);
    CHECK_STR(buf, "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
    CHECK_EQ_INT(amk_tokenizer_chat_prompt(NULL, "S", "Q", small, sizeof small), 82);
    CHECK_STR(small, "<|im_st");
    CHECK_EQ_INT(amk_tokenizer_chat_prompt(NULL, NULL, NULL, buf, sizeof buf), -1);
    {   /* Llama 3's headers, from a vocabulary that has them; no default system prompt */
        static const char *const hdr[3] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
        static const int types[3] = {3, 3, 3};
        amk_tokenizer *l3 = toy(hdr, 3, NULL, 0, types, AMK_PRETOK_LLAMA3, 1);
        CHECK(l3 != NULL);
        if (l3) {
            CHECK_EQ_INT(amk_tokenizer_chat_format(l3), AMK_CHAT_LLAMA3);
            CHECK(amk_tokenizer_chat_prompt(l3, NULL, "Hi", buf, sizeof buf) > 0);
            CHECK_STR(buf, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n");
            CHECK(amk_tokenizer_chat_prompt(l3, "S", "Hi", buf, sizeof buf) > 0);
            CHECK_STR(buf, "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user"
                           "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
            amk_tokenizer_free(l3);
        }
    }
    if (!smol) return;
    /* specials come out whole: <|im_start|> system \n ... */
    m = amk_tokenizer_encode(smol, want, sizeof want - 1, 0, ids, 64);
    CHECK(m > 10 && m <= 64);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(ids[m - 1], 198);
    for (i = 0; i < m && i < 64; i++) { starts += ids[i] == 1; ends += ids[i] == 2; }
    CHECK_EQ_INT(starts, 3);
    CHECK_EQ_INT(ends, 2);
}

static void test_decode_api(void) {
    char buf[4];
    size_t n;
    const char *p;
    if (!smol) { CHECK(smol != NULL); return; }
    CHECK_EQ_INT(amk_tokenizer_decode(smol, 1, buf, 4), -1);          /* "<|im_start|>" does not fit */
    CHECK_EQ_INT(amk_tokenizer_decode(smol, -1, buf, 4), -1);
    CHECK_EQ_INT(amk_tokenizer_decode(smol, 49152, buf, 4), -1);
    CHECK_EQ_INT(amk_tokenizer_decode(smol, 216, buf, 4), 1);         /* Ġ -> ' ' */
    CHECK_EQ_INT(buf[0], ' ');
    p = amk_tokenizer_token_bytes(smol, 1, &n);
    CHECK(p && n == 12 && memcmp(p, "<|im_start|>", 12) == 0);
    p = amk_tokenizer_token_bytes(smol, 905, &n);                     /* " world" */
    CHECK(p && n == 6 && memcmp(p, " world", 6) == 0);
}

/* ---- tokenizer.json variants and errors ------------------------------------------------------ */

/* A small tokenizer.json: bytes a, b, c, Ġ; tokens ab, abc; one special; pre-tokenizer and merge
   syntax given. */
static amk_result from_json_parts(const char *pre, const char *merges, const char *extra_model,
                                  const char *extra_root, const char *config, amk_tokenizer **t, amk_diag *d) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 6, \"content\": \"<s>\", \"special\": true}],"
             " \"pre_tokenizer\": %s %s,"
             " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"\\u0120\": 3,"
             " \"ab\": 4, \"abc\": 5, \"<s>\": 6}, \"merges\": %s %s}}",
             pre, extra_root, merges, extra_model);
    amk_diag_clear(d);
    return amk_tokenizer_from_json_text(json, strlen(json), config, config ? strlen(config) : 0, t, d);
}

static void test_json_variants(void) {
    static const char *bl = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}";
    static const char *smol_pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\","
        " \"individual_digits\": true}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}";
    static const char *llama_pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\","
        " \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
        "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
        " \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false,"
        " \"use_regex\": false}]}";
    amk_tokenizer *t = NULL;
    amk_diag d;
    int w1[] = {5}, w2[] = {4, 6, 3, 2};
    /* merges as "A B" strings and as pairs give the same tokenizer */
    CHECK_EQ_INT(from_json_parts(bl, "[\"a b\", \"ab c\"]", "", "", NULL, &t, &d), AMK_OK);
    if (t) {
        CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_GPT2);
        CHECK(encodes_to(t, "abc", 3, w1, 1));
        CHECK(encodes_to(t, "ab<s> c", 7, w2, 4));
        CHECK_EQ_INT(amk_tokenizer_bos(t), -1);
        amk_tokenizer_free(t);
    }
    CHECK_EQ_INT(from_json_parts(smol_pre, "[[\"a\", \"b\"], [\"ab\", \"c\"]]", "", "",
                                 "{\"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"abc\", \"add_bos_token\": true}",
                                 &t, &d), AMK_OK);
    if (t) {
        CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_SMOLLM);
        CHECK(encodes_to(t, "abc", 3, w1, 1));
        CHECK_EQ_INT(amk_tokenizer_bos(t), 6);
        CHECK_EQ_INT(amk_tokenizer_eos(t), 5);
        CHECK_EQ_INT(amk_tokenizer_add_bos(t), 1);
        amk_tokenizer_free(t);
    }
    /* Llama-3: Split + ByteLevel, ignore_merges, BOS from a TemplateProcessing post-processor */
    CHECK_EQ_INT(from_json_parts(llama_pre, "[\"a b\"]", ", \"ignore_merges\": true",
                                 ", \"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"},"
                                 " {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\","
                                 " \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}]}",
                                 NULL, &t, &d), AMK_OK);
    if (t) {
        int ids[4];
        CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_LLAMA3);
        CHECK(encodes_to(t, "abc", 3, w1, 1)); /* no merge reaches "abc": ignore_merges does */
        CHECK_EQ_INT(amk_tokenizer_encode(t, "a", 1, -1, ids, 4), 2);
        CHECK_EQ_INT(ids[0], 6);
        amk_tokenizer_free(t);
    } else {
        fprintf(stderr, "  llama3 json: %s\n", d.message);
    }
    /* unsupported and malformed */
    CHECK_EQ_INT(from_json_parts("{\"type\": \"Whitespace\"}", "[]", "", "", NULL, &t, &d), AMK_ERR_UNSUPPORTED);
    CHECK(t == NULL && strstr(d.message, "Whitespace") != NULL);
    CHECK_EQ_INT(from_json_parts("{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "[]", "", "", NULL, &t, &d),
                 AMK_ERR_UNSUPPORTED);
    CHECK_EQ_INT(from_json_parts(bl, "[\"a b\"]", ", \"byte_fallback\": true", "", NULL, &t, &d), AMK_ERR_UNSUPPORTED);
    CHECK_EQ_INT(from_json_parts(bl, "[\"a q\"]", "", "", NULL, &t, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(from_json_parts(bl, "[\"ab\"]", "", "", NULL, &t, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(from_json_parts(bl, "[7]", "", "", NULL, &t, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(d.line, 1);
    CHECK_STR(d.path, "/model/merges");
    CHECK_EQ_INT(from_json_parts(bl, "[]", "", "", "{\"add_bos_token\": 3}", &t, &d), AMK_ERR_PARSE);
    CHECK(t == NULL);
    CHECK_EQ_INT(from_json_parts(bl, "[]", "", "", "[", &t, &d), AMK_ERR_PARSE);
    CHECK_STR(d.path, "tokenizer_config.json");
    CHECK(t == NULL && strstr(d.message, "tokenizer_config.json:1:") != NULL);
    CHECK_EQ_INT(from_json_parts(bl, "[]", "", ", \"normalizer\": {\"type\": \"NFKC\"}", NULL, &t, &d), AMK_ERR_UNSUPPORTED);
    CHECK_STR(d.path, "/normalizer");
    {   /* ids out of range, shared ids, truncated JSON */
        static const char *bad[] = {
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"vocab\": {\"a\": 5}, \"merges\": []}}",
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"vocab\": {}, \"merges\": []}}",
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"vocab\": {\"a\": -1}}}",
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"vocab\": [1]}}",
            "{\"model\": {\"vocab\": {\"a\": 0}}}",
            "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"", "[]", "",
        };
        int i;
        for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
            amk_result r = amk_tokenizer_from_json_text(bad[i], strlen(bad[i]), NULL, 0, &t, &d);
            CHECK_MSG(r == AMK_ERR_PARSE || r == AMK_ERR_UNSUPPORTED, "bad json %d gave %d", i, (int)r);
            CHECK(t == NULL);
        }
    }
    {   /* an id hole and an added token that overrides a vocab string */
        static const char *j = "{\"added_tokens\": [{\"id\": 2, \"content\": \"<e>\"}], \"pre_tokenizer\": {\"type\": "
                               "\"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"vocab\": {\"a\": 0, \"x\": 2}}}";
        CHECK_EQ_INT(amk_tokenizer_from_json_text(j, strlen(j), NULL, 0, &t, &d), AMK_OK);
        if (t) {
            size_t n = 9;
            CHECK_EQ_INT(amk_tokenizer_n_vocab(t), 3);
            CHECK(amk_tokenizer_token_bytes(t, 1, &n) != NULL && n == 0);
            CHECK_EQ_INT(amk_tokenizer_token_id(t, "<e>"), 2);
            CHECK_EQ_INT(amk_tokenizer_token_id(t, "x"), -1);
            CHECK(amk_tokenizer_is_special(t, 2));
            amk_tokenizer_free(t);
        }
    }
    CHECK_EQ_INT(amk_tokenizer_from_json("tests/data/tokenizer/no_such_file.json", &t, &d), AMK_ERR_IO);
}

/* Errors in a tokenizer.json or the tokenizer_config.json beside it name that file and the line and
   column (issue 38: "unexpected end of input" alone named nothing). */
static void test_json_file_errors(void) {
    static const char *const cases[4][2] = {
        {"{\"model\": {", ":1:12: unexpected end of input"},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]", ":1:65: nesting deeper than 64"},
        {"{}", ":1:1: no \"model\" object"},
        {"", ":1:1: unexpected end of input"}};
    char dir[64], path[128], cpath[128], want[256];
    amk_tokenizer *t = NULL;
    amk_diag d;
    size_t n = 0;
    char *good = (char *)amk_t_read_file(DATA "smollm2_tokenizer.json", &n);
    FILE *f;
    int k;
    snprintf(dir, sizeof dir, "/tmp/amk_test_tok_%ld", (long)getpid());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
    for (k = 0; k < 4; k++) {
        if ((f = fopen(path, "wb"))) { fputs(cases[k][0], f); fclose(f); }
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk_tokenizer_from_json(path, &t, &d), AMK_ERR_PARSE);
        CHECK(t == NULL);
        snprintf(want, sizeof want, "%s%s", path, cases[k][1]);
        CHECK_MSG(strncmp(d.message, want, strlen(want)) == 0, "message '%s' does not start with '%s'", d.message, want);
    }
    /* a good tokenizer.json, a broken tokenizer_config.json beside it: the config is named */
    CHECK(good != NULL);
    if ((f = fopen(path, "wb"))) { if (good) fwrite(good, 1, n, f); fclose(f); }
    if ((f = fopen(cpath, "wb"))) { fputs("{\"bos_token\": ", f); fclose(f); }
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_tokenizer_from_json(path, &t, &d), AMK_ERR_PARSE);
    snprintf(want, sizeof want, "%s:1:15: unexpected end of input", cpath);
    CHECK_MSG(strcmp(d.message, want) == 0, "message '%s', want '%s'", d.message, want);
    if ((f = fopen(cpath, "wb"))) { fputs("[]", f); fclose(f); }
    CHECK_EQ_INT(amk_tokenizer_from_json(path, &t, &d), AMK_ERR_PARSE);
    snprintf(want, sizeof want, "%s:1:1: tokenizer_config.json is not an object", cpath);
    CHECK_MSG(strcmp(d.message, want) == 0, "message '%s', want '%s'", d.message, want);
    remove(cpath);
    remove(path);
    rmdir(dir);
    free(good);
}

/* ---- GGUF in memory -------------------------------------------------------------------------- */

typedef struct gbuf { unsigned char b[8192]; size_t n; } gbuf;
static void g_u32(gbuf *g, uint32_t v) { int i; for (i = 0; i < 4; i++) g->b[g->n++] = (unsigned char)(v >> (8 * i)); }
static void g_u64(gbuf *g, uint64_t v) { int i; for (i = 0; i < 8; i++) g->b[g->n++] = (unsigned char)(v >> (8 * i)); }
static void g_str(gbuf *g, const char *s) { size_t n = strlen(s); g_u64(g, n); memcpy(g->b + g->n, s, n); g->n += n; }
static void g_kv_str(gbuf *g, const char *k, const char *v) { g_str(g, k); g_u32(g, 8); g_str(g, v); }
static void g_kv_strs(gbuf *g, const char *k, const char *const *v, int n) {
    int i;
    g_str(g, k); g_u32(g, 9); g_u32(g, 8); g_u64(g, (uint64_t)n);
    for (i = 0; i < n; i++) g_str(g, v[i]);
}

/* A GGUF with tokenizer keys only: bytes a b c, tokens ab abc, a control token <s>. */
static amk_result gguf_tokenizer(const char *model, const char *pre, amk_tokenizer **t, amk_diag *d) {
    static const char *const tokens[] = {"<s>", "a", "b", "c", "ab", "abc"};
    static const char *const merges[] = {"a b", "ab c"};
    gbuf *g = (gbuf *)calloc(1, sizeof *g);
    amk_gguf *f = NULL;
    amk_result r;
    int i, n_kv = pre ? 6 : 5;
    g_u32(g, 0x46554747u); g_u32(g, 3); g_u64(g, 0); g_u64(g, (uint64_t)n_kv);
    g_kv_str(g, "tokenizer.ggml.model", model);
    if (pre) g_kv_str(g, "tokenizer.ggml.pre", pre);
    g_kv_strs(g, "tokenizer.ggml.tokens", tokens, 6);
    g_kv_strs(g, "tokenizer.ggml.merges", merges, 2);
    g_str(g, "tokenizer.ggml.token_type"); g_u32(g, 9); g_u32(g, 5); g_u64(g, 6);
    for (i = 0; i < 6; i++) g_u32(g, i == 0 ? 3 : 1);
    g_str(g, "tokenizer.ggml.bos_token_id"); g_u32(g, 4); g_u32(g, 0);
    amk_diag_clear(d);
    r = amk_gguf_parse(g->b, g->n, &f, d);
    if (r == AMK_OK) r = amk_tokenizer_from_gguf(f, t, d);
    amk_gguf_close(f);
    free(g);
    return r;
}

static void test_gguf_small(void) {
    amk_tokenizer *t = NULL;
    amk_diag d;
    int ids[8];
    CHECK_EQ_INT(gguf_tokenizer("gpt2", "smollm", &t, &d), AMK_OK);
    if (t) {
        CHECK_EQ_INT(amk_tokenizer_encode(t, "abc<s>ab", 8, -1, ids, 8), 3);
        CHECK_EQ_INT(ids[0], 5);
        CHECK_EQ_INT(ids[1], 0);
        CHECK_EQ_INT(ids[2], 4);
        CHECK_EQ_INT(amk_tokenizer_bos(t), 0);
        CHECK_EQ_INT(amk_tokenizer_eos(t), -1);
        CHECK_EQ_INT(amk_tokenizer_encode(t, "ab", 2, -1, ids, 8), 1);
        CHECK_EQ_INT(ids[0], 4);
        amk_tokenizer_free(t);
    } else {
        fprintf(stderr, "  gguf: %s\n", d.message);
    }
    CHECK_EQ_INT(gguf_tokenizer("gpt2", "llama-bpe", &t, &d), AMK_OK);
    if (t) {
        CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_LLAMA3);
        CHECK_EQ_INT(amk_tokenizer_add_bos(t), 1);
        amk_tokenizer_free(t);
    }
    CHECK_EQ_INT(gguf_tokenizer("gpt2", NULL, &t, &d), AMK_OK);
    if (t) { CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_GPT2); amk_tokenizer_free(t); }
    CHECK_EQ_INT(gguf_tokenizer("gpt2", "qwen2", &t, &d), AMK_OK);
    if (t) { CHECK_EQ_INT(amk_tokenizer_pretok(t), AMK_PRETOK_QWEN2); amk_tokenizer_free(t); }
    CHECK_EQ_INT(gguf_tokenizer("gpt2", "deepseek-llm", &t, &d), AMK_ERR_UNSUPPORTED);
    CHECK(t == NULL && strstr(d.message, "deepseek-llm") != NULL);
    CHECK_EQ_INT(gguf_tokenizer("llama", "default", &t, &d), AMK_ERR_PARSE); /* SentencePiece needs scores */
    CHECK(t == NULL && strstr(d.message, "scores") != NULL);
    CHECK_EQ_INT(gguf_tokenizer("bert", NULL, &t, &d), AMK_ERR_UNSUPPORTED);
    CHECK(t == NULL && strstr(d.message, "bert") != NULL);
    CHECK_EQ_INT(amk_tokenizer_from_gguf(NULL, &t, &d), AMK_ERR_INVALID_ARG);
}

int main(void) {
    RUN(test_byte_map);
    RUN(test_pretok_smollm);
    RUN(test_pretok_gpt2);
    RUN(test_pretok_llama3);
    RUN(test_merge_order);
    RUN(test_ignore_merges);
    RUN(test_specials);
    RUN(test_create_errors);
    RUN(test_smollm_load);
    RUN(test_family_qwen2);
    RUN(test_family_spm);
    RUN(test_reference_vectors);
    RUN(test_reference_corpus);
    RUN(test_gguf_matches_json);
    RUN(test_invalid_utf8);
    RUN(test_random_megabyte);
    RUN(test_long_pieces);
    RUN(test_chat_prompt);
    RUN(test_decode_api);
    RUN(test_json_variants);
    RUN(test_json_file_errors);
    RUN(test_gguf_small);
    amk_tokenizer_free(smol);
    TEST_SUMMARY();
}
