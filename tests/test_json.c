/* tests/test_json.c - the JSON layer. The strict DOM parser (every error class with its line:col
   and path, nesting depth, duplicate keys, numbers, strings and UTF-8, canonical output) and the
   program format of spec §6 (golden round trips, the spec's own indent=2 style, a malformed corpus
   with the expected result and JSON path of each file, a truncation sweep, the writer's refusals).
   The DOM is internal to the implementation, so this file compiles a private copy of it
   (AMK_STATIC: every function static, nothing clashes with tests/impl.c). Run from the repository
   root (make test does). */
#define _POSIX_C_SOURCE 200809L
#define AMK_STATIC
#define AMK_IMPLEMENTATION
#if defined(__GNUC__)
/* why: AMK_STATIC turns every API function this file does not call into an unused static */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include "../amk.h"
#include "amk_test.h"
#include <dirent.h>
#include <locale.h>
#include <time.h>
#include <unistd.h>

#define DATA "tests/data/json/"

/* ---- helpers ------------------------------------------------------------------------------------ */

/* Parses a copy of exactly n bytes (no NUL after it, so ASan sees any read past the end). */
static amk_result parse_n(const char *text, size_t n, int depth, amk__jdoc *doc, amk_diag *d) {
    char *copy = (char *)malloc(n ? n : 1);
    amk_result r;
    if (n) memcpy(copy, text, n);
    amk_diag_clear(d);
    r = amk__json_parse(copy, n, depth, doc, d);
    free(copy);
    return r;
}
static amk_result parse(const char *text, amk__jdoc *doc, amk_diag *d) {
    return parse_n(text, strlen(text), 64, doc, d);
}

/* The canonical compact form of a document, or NULL if it does not parse. Caller frees. */
static char *canon_n(const char *text, size_t n) {
    amk__jdoc doc;
    amk_diag d;
    amk__sb sb;
    if (parse_n(text, n, 64, &doc, &d) != AMK_OK) return NULL;
    memset(&sb, 0, sizeof sb);
    amk__json_put_value(&sb, doc.root);
    amk__json_free(&doc);
    return sb.p;
}
static char *canon(const char *text) { return canon_n(text, strlen(text)); }

static char *slurp(const char *path, size_t *n) {
    char *data;
    amk_diag d;
    if (amk__read_file(path, &data, n, &d) != AMK_OK) return NULL;
    return data;
}

static amk_program *load_text(const char *text, size_t n, amk_diag *d) {
    amk_program *p = NULL;
    char *copy = (char *)malloc(n ? n : 1);
    if (n) memcpy(copy, text, n);
    amk_program_load_json(copy, n, &p, d);
    free(copy);
    return p;
}

static char *write_prog(const amk_program *p) {
    char *out = NULL;
    size_t n = 0;
    if (amk_program_write_json(p, &out, &n) != AMK_OK) return NULL;
    if (out && strlen(out) != n) { amk_free(out); return NULL; }
    return out;
}

/* A copy of text with the first `from` replaced by `to` (the test's own mutations). */
static char *replace1(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    size_t a, nf = strlen(from), nt = strlen(to), n = strlen(text);
    char *r;
    if (!at) return NULL;
    a = (size_t)(at - text);
    r = (char *)malloc(n - nf + nt + 1);
    memcpy(r, text, a);
    memcpy(r + a, to, nt);
    memcpy(r + a + nt, at + nf, n - a - nf + 1);
    return r;
}

/* ---- DOM: values --------------------------------------------------------------------------------- */

static void test_dom_values(void) {
    amk__jdoc doc;
    amk_diag d;
    const amk__jval *r, *a, *v;
    const char *text = "{\"a\": [1, -2, 3.5, true, false, null, \"s\"],\n"
                       "  \"b\": {},\n"
                       "  \"c\": [], \"a2\": {\"x\": \"y\"}}";
    CHECK_EQ_INT(parse(text, &doc, &d), AMK_OK);
    r = doc.root;
    CHECK_EQ_INT(r->type, AMK__J_OBJECT);
    CHECK_EQ_INT(r->n, 4);
    CHECK_EQ_INT(r->line, 1);
    CHECK_EQ_INT(r->col, 1);
    CHECK_STR(r->keys[0], "a");
    CHECK_STR(r->keys[3], "a2");
    a = amk__json_get(r, "a");
    CHECK(a == &r->items[0]);
    CHECK_EQ_INT(a->type, AMK__J_ARRAY);
    CHECK_EQ_INT(a->n, 7);
    CHECK_EQ_INT(a->col, 7);
    CHECK_EQ_INT(a->items[0].type, AMK__J_INT);
    CHECK_EQ_INT(a->items[0].i, 1);
    CHECK(a->items[0].f == 1.0);
    CHECK_EQ_INT(a->items[1].i, -2);
    CHECK_EQ_INT(a->items[1].col, 11);
    CHECK_EQ_INT(a->items[2].type, AMK__J_REAL);
    CHECK(a->items[2].f == 3.5);
    CHECK_EQ_INT(a->items[2].big, 0);
    CHECK_EQ_INT(a->items[3].type, AMK__J_BOOL);
    CHECK_EQ_INT(a->items[3].i, 1);
    CHECK_EQ_INT(a->items[4].i, 0);
    CHECK_EQ_INT(a->items[5].type, AMK__J_NULL);
    CHECK_EQ_INT(a->items[6].type, AMK__J_STRING);
    CHECK_STR(a->items[6].s, "s");
    CHECK_EQ_INT(a->items[6].slen, 1);
    v = amk__json_get(r, "b");
    CHECK(v && v->type == AMK__J_OBJECT && v->n == 0);
    CHECK_EQ_INT(v->line, 2);
    CHECK_EQ_INT(v->col, 8);
    v = amk__json_get(r, "c");
    CHECK(v && v->type == AMK__J_ARRAY && v->n == 0 && v->line == 3 && v->col == 8);
    v = amk__json_get(amk__json_get(r, "a2"), "x");
    CHECK(v && v->type == AMK__J_STRING && strcmp(v->s, "y") == 0);
    CHECK(amk__json_get(r, "missing") == NULL);
    CHECK(amk__json_get(a, "a") == NULL); /* not an object */
    CHECK(amk__json_get(NULL, "a") == NULL);
    amk__json_free(&doc);

    /* any value at top level, surrounded by whitespace */
    CHECK_EQ_INT(parse(" \t\r\n42 \n", &doc, &d), AMK_OK);
    CHECK(doc.root->type == AMK__J_INT && doc.root->i == 42 && doc.root->line == 2 && doc.root->col == 1);
    amk__json_free(&doc);
    CHECK_EQ_INT(parse("\"top\"", &doc, &d), AMK_OK);
    CHECK(doc.root->type == AMK__J_STRING && strcmp(doc.root->s, "top") == 0);
    amk__json_free(&doc);
    CHECK_EQ_INT(parse("null", &doc, &d), AMK_OK);
    CHECK_EQ_INT(doc.root->type, AMK__J_NULL);
    amk__json_free(&doc);
    CHECK_EQ_INT(parse("[[[]],{\"k\":[{}]}]", &doc, &d), AMK_OK);
    CHECK_EQ_INT(doc.root->n, 2);
    CHECK_EQ_INT(doc.root->items[0].items[0].type, AMK__J_ARRAY);
    CHECK_EQ_INT(doc.root->items[1].items[0].items[0].type, AMK__J_OBJECT);
    amk__json_free(&doc);
    amk__json_free(&doc); /* freeing twice (root and arena cleared) is harmless */
}

/* ---- DOM: numbers ---------------------------------------------------------------------------------- */

static void test_dom_numbers(void) {
    static const struct { const char *text; int type, big; int64_t i; double f; } ok[] = {
        {"0", AMK__J_INT, 0, 0, 0.0},
        {"-0", AMK__J_INT, 0, 0, 0.0},
        {"9223372036854775807", AMK__J_INT, 0, INT64_MAX, 9223372036854775807.0},
        {"-9223372036854775808", AMK__J_INT, 0, INT64_MIN, -9223372036854775808.0},
        {"9223372036854775808", AMK__J_REAL, 1, 0, 9223372036854775808.0},
        {"-9223372036854775809", AMK__J_REAL, 1, 0, -9223372036854775809.0},
        {"123456789012345678901234567890", AMK__J_REAL, 1, 0, 1.2345678901234568e29},
        {"1E2", AMK__J_REAL, 0, 0, 100.0},
        {"2.5e+3", AMK__J_REAL, 0, 0, 2500.0},
        {"1e-2", AMK__J_REAL, 0, 0, 0.01},
        {"0.1", AMK__J_REAL, 0, 0, 0.1},
        {"-0.0", AMK__J_REAL, 0, 0, -0.0},
        {"100000.0", AMK__J_REAL, 0, 0, 100000.0},
        {"1e-400", AMK__J_REAL, 0, 0, 0.0},
        {"4.9406564584124654e-324", AMK__J_REAL, 0, 0, 4.9406564584124654e-324},
        {"1.7976931348623157e308", AMK__J_REAL, 0, 0, 1.7976931348623157e308},
        {"0.1000000000000000055511151231257827021181583404541015625", AMK__J_REAL, 0, 0, 0.1},
        {"12.5e-1", AMK__J_REAL, 0, 0, 1.25},
        {"0.000000000000000000000000000001e30", AMK__J_REAL, 0, 0, 1.0},
        {"1e99999999999999999999", AMK__J_REAL, 0, 0, -1.0}, /* marker: error, see below */
    };
    static const struct { const char *text; int col; const char *msg; } bad[] = {
        {"01", 1, "leading zeros"},
        {"-01", 1, "leading zeros"},
        {"-", 2, "unexpected end of input"},
        {"-a", 2, "expected a digit after '-'"},
        {"1.", 3, "unexpected end of input"},
        {"1.e5", 3, "expected a digit after '.'"},
        {".5", 1, "expected a value"},
        {"+1", 1, "expected a value"},
        {"1e", 3, "unexpected end of input"},
        {"1e+", 4, "unexpected end of input"},
        {"1ex", 3, "expected a digit in the exponent"},
        {"0x10", 2, "after the JSON value"},
        {"1.5.2", 4, "after the JSON value"},
        {"NaN", 1, "Infinity and NaN"},
        {"Infinity", 1, "Infinity and NaN"},
        {"-Infinity", 1, "Infinity and NaN"},
        {"1e309", 1, "out of range"},
        {"-1e99999999999999999999", 1, "out of range"},
    };
    amk__jdoc doc;
    amk_diag d;
    size_t k;
    for (k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        amk_result r = parse(ok[k].text, &doc, &d);
        if (ok[k].f == -1.0) { /* 1e(huge): overflows to infinity, so it is an error */
            CHECK_EQ_INT(r, AMK_ERR_PARSE);
            continue;
        }
        CHECK_MSG(r == AMK_OK, "%s: %s", ok[k].text, d.message);
        if (r != AMK_OK) continue;
        CHECK_MSG((int)doc.root->type == ok[k].type, "%s", ok[k].text);
        CHECK_MSG(doc.root->big == ok[k].big, "%s", ok[k].text);
        if (ok[k].type == AMK__J_INT) CHECK_MSG(doc.root->i == ok[k].i, "%s", ok[k].text);
        CHECK_MSG(doc.root->f == ok[k].f, "%s: %.17g", ok[k].text, doc.root->f);
        CHECK_MSG(signbit(doc.root->f) == signbit(ok[k].f) || doc.root->type == AMK__J_INT, "%s", ok[k].text);
        amk__json_free(&doc);
    }
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK_MSG(parse(bad[k].text, &doc, &d) == AMK_ERR_PARSE, "%s", bad[k].text);
        CHECK_MSG(d.line == 1 && d.col == bad[k].col, "%s: at %d:%d", bad[k].text, d.line, d.col);
        CHECK_MSG(strstr(d.message, bad[k].msg) != NULL, "%s: %s", bad[k].text, d.message);
        CHECK(doc.root == NULL);
    }
}

/* Numbers read and write the same whatever LC_NUMERIC says (a ',' decimal point must not leak
   into either). `make test` builds a de_DE.UTF-8 locale for it (LOCPATH). */
static void test_dom_numbers_locale(void) {
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8"};
    size_t k;
    for (k = 0; k < sizeof names / sizeof names[0]; k++) {
        char *c;
        if (!setlocale(LC_NUMERIC, names[k])) continue;
        CHECK_STR(localeconv()->decimal_point, ","); /* the locale really changed number parsing */
        c = canon("[1.5, 2.25e-7, 100000.0]");
        CHECK_STR(c, "[1.5,2.25e-07,100000.0]");
        free(c);
        setlocale(LC_NUMERIC, "C");
        return;
    }
    printf("test_dom_numbers_locale: no comma-decimal locale installed (make test builds one with localedef); not checked\n");
}

/* ---- DOM: strings and UTF-8 ----------------------------------------------------------------------- */

static void test_dom_strings(void) {
    amk__jdoc doc;
    amk_diag d;
    size_t k;
    static const struct { const char *text, *bytes; size_t len; } ok[] = {
        {"\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\" \\ / \b \f \n \r \t", 15},
        {"\"\\u0041\\u00e9\\u20AC\"", "A\xC3\xA9\xE2\x82\xAC", 6},
        {"\"\\ud83d\\ude00\"", "\xF0\x9F\x98\x80", 4},
        {"\"\\uDBFF\\uDFFF\"", "\xF4\x8F\xBF\xBF", 4},
        {"\"a\\u0000b\"", "a\0b", 3},
        {"\"\xC2\x80\xDF\xBF\"", "\xC2\x80\xDF\xBF", 4},                 /* U+0080, U+07FF */
        {"\"\xE0\xA0\x80\xED\x9F\xBF\"", "\xE0\xA0\x80\xED\x9F\xBF", 6}, /* U+0800, U+D7FF */
        {"\"\xEE\x80\x80\xEF\xBF\xBF\"", "\xEE\x80\x80\xEF\xBF\xBF", 6}, /* U+E000, U+FFFF */
        {"\"\xF0\x90\x80\x80\xF4\x8F\xBF\xBF\"", "\xF0\x90\x80\x80\xF4\x8F\xBF\xBF", 8}, /* U+10000, U+10FFFF */
        {"\"\x7F\"", "\x7F", 1},
        {"\"\"", "", 0},
    };
    static const struct { const char *text; int col; const char *msg; } bad[] = {
        {"\"\xC0\x80\"", 2, "invalid UTF-8"},             /* overlong NUL */
        {"\"\xC1\xBF\"", 2, "invalid UTF-8"},             /* overlong */
        {"\"ab\xE0\x9F\xBF\"", 4, "invalid UTF-8"},       /* overlong 3-byte */
        {"\"\xF0\x8F\xBF\xBF\"", 2, "invalid UTF-8"},     /* overlong 4-byte */
        {"\"\xED\xA0\x80\"", 2, "invalid UTF-8"},         /* UTF-16 surrogate D800 */
        {"\"\xED\xBF\xBF\"", 2, "invalid UTF-8"},         /* surrogate DFFF */
        {"\"\xF4\x90\x80\x80\"", 2, "invalid UTF-8"},     /* U+110000 */
        {"\"\xF5\x80\x80\x80\"", 2, "invalid UTF-8"},
        {"\"\xFF\"", 2, "invalid UTF-8"},
        {"\"\x80\"", 2, "invalid UTF-8"},                 /* lone continuation byte */
        {"\"\xC2\"", 2, "invalid UTF-8"},                 /* cut short by the quote */
        {"\"\xE2\x82\"", 2, "invalid UTF-8"},
        {"\"\xC2\x41\"", 2, "invalid UTF-8"},             /* bad continuation */
        {"\"x\xF0\x9F\x98", 3, "invalid UTF-8"},          /* cut short by the end */
        {"\"\\ud800\"", 2, "lone high surrogate"},
        {"\"\\ud800\\u0041\"", 2, "lone high surrogate"},
        {"\"\\ud800\\\"", 2, "lone high surrogate"},
        {"\"\\udc00\"", 2, "lone low surrogate"},
        {"\"\\u12G4\"", 2, "4 hex digits"},
        {"\"\\u12\"", 2, "4 hex digits"},
        {"\"\\a\"", 2, "invalid escape"},
        {"\"\\'\"", 2, "invalid escape"},
        {"\"a\x01\"", 3, "control character 0x01"},
        {"\"a\nb\"", 3, "control character 0x0A"},
        {"\"abc", 5, "unexpected end of input"},
        {"\"abc\\", 6, "unexpected end of input"},
    };
    for (k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        CHECK_MSG(parse(ok[k].text, &doc, &d) == AMK_OK, "case %d: %s", (int)k, d.message);
        if (!doc.root) continue;
        CHECK_EQ_INT(doc.root->type, AMK__J_STRING);
        CHECK_MSG(doc.root->slen == ok[k].len && memcmp(doc.root->s, ok[k].bytes, ok[k].len) == 0, "case %d", (int)k);
        CHECK_EQ_INT(doc.root->s[doc.root->slen], 0);
        amk__json_free(&doc);
    }
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK_MSG(parse(bad[k].text, &doc, &d) == AMK_ERR_PARSE, "case %d", (int)k);
        CHECK_MSG(d.line == 1 && d.col == bad[k].col, "case %d at %d:%d", (int)k, d.line, d.col);
        CHECK_MSG(strstr(d.message, bad[k].msg) != NULL, "case %d: %s", (int)k, d.message);
    }
    /* raw non-ASCII outside a string is no value */
    CHECK_EQ_INT(parse("[\xC3\xA9]", &doc, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(d.col, 2);
}

/* ---- DOM: syntax errors, each with line:col and the path of the value being read -------------- */

static void test_dom_errors(void) {
    static const struct { const char *text; int line, col; const char *path, *msg; } bad[] = {
        {"", 1, 1, "", "unexpected end of input"},
        {"  \n  ", 2, 3, "", "unexpected end of input"},
        {"[1,]", 1, 4, "", "trailing comma before ']'"},
        {"{\"a\":1,}", 1, 8, "", "trailing comma before '}'"},
        {"[1 2]", 1, 4, "", "expected ',' or ']' after array element"},
        {"{\"a\":1 \"b\":2}", 1, 8, "", "expected ',' or '}' after object member"},
        {"{\"a\" 1}", 1, 6, "/a", "expected ':' after an object key"},
        {"{1:2}", 1, 2, "", "expected a string key"},
        {"{'a':2}", 1, 2, "", "expected a string key"},
        {"[1]\n x", 2, 2, "", "after the JSON value"},
        {"[1] [2]", 1, 5, "", "after the JSON value"},
        {"/* c */ 1", 1, 1, "", "comments are not allowed"},
        {"[1, // c\n 2]", 1, 5, "/1", "comments are not allowed"},
        {"\xEF\xBB\xBF[]", 1, 1, "", "byte order mark"},
        {"tru", 1, 4, "", "unexpected end of input"},
        {"trux", 1, 1, "", "invalid literal (expected true)"},
        {"[fals]", 1, 2, "/0", "invalid literal (expected false)"},
        {"nul", 1, 4, "", "unexpected end of input"},
        {"[None]", 1, 2, "/0", "expected a value, found character 'N'"},
        {"[Infinit]", 1, 2, "/0", "expected a value, found character 'I'"},
        {"[-NaN]", 1, 2, "/0", "Infinity and NaN"},
        {"{\"a\":\n  [1,\n   {\"b\": x}]}", 3, 10, "/a/1/b", "expected a value, found character 'x'"},
        {"[\n\n  \"\\q\"]", 3, 4, "/0", "invalid escape"},
        {"[\r\n1,\r\n x]", 3, 2, "/1", "expected a value"},
        {"{\"a\": {\"b\": [0, [1, {\"c\": }]]}}", 1, 27, "/a/b/1/1/c", "expected a value, found character '}'"},
        {"{\"a~b/c\": [}", 1, 12, "/a~0b~1c/0", "expected a value"},
        {"[\"a\", {\"k\": 1, }]", 1, 16, "/1", "trailing comma before '}'"},
        {"{\"a\": [1, 2", 1, 12, "/a", "unexpected end of input"},
        {"{\"a\": [1, 2,", 1, 13, "/a/2", "unexpected end of input"},
        {"{\"a\"", 1, 5, "/a", "unexpected end of input"},
        {"{\"a\":", 1, 6, "/a", "unexpected end of input"},
        {"[\"a\":1]", 1, 5, "", "expected ',' or ']' after array element"},
        {"{\"a\":1]", 1, 7, "", "expected ',' or '}' after object member"},
        {"]", 1, 1, "", "expected a value, found character ']'"},
        {"\x01", 1, 1, "", "expected a value, found byte 0x01"},
    };
    size_t k;
    amk__jdoc doc;
    amk_diag d;
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK_MSG(parse(bad[k].text, &doc, &d) == AMK_ERR_PARSE, "case %d", (int)k);
        CHECK_EQ_INT(d.result, AMK_ERR_PARSE);
        CHECK_MSG(d.line == bad[k].line && d.col == bad[k].col, "case %d: at %d:%d, expected %d:%d (%s)", (int)k,
                  d.line, d.col, bad[k].line, bad[k].col, d.message);
        CHECK_MSG(strcmp(d.path, bad[k].path) == 0, "case %d: path '%s', expected '%s'", (int)k, d.path, bad[k].path);
        CHECK_MSG(strstr(d.message, bad[k].msg) != NULL, "case %d: %s", (int)k, d.message);
        CHECK(doc.root == NULL && doc.arena == NULL);
    }
    /* a NULL diag is fine */
    CHECK_EQ_INT(amk__json_parse("[1,", 3, 64, &doc, NULL), AMK_ERR_PARSE);
    CHECK_EQ_INT(amk__json_parse(NULL, 0, 64, &doc, NULL), AMK_ERR_PARSE);
}

/* ---- DOM: nesting depth ------------------------------------------------------------------------- */

static char *nested(int depth, char open, char close) {
    char *s = (char *)malloc((size_t)depth * 2 + 1);
    memset(s, open, (size_t)depth);
    memset(s + depth, close, (size_t)depth);
    s[depth * 2] = 0;
    return s;
}

static void test_dom_depth(void) {
    amk__jdoc doc;
    amk_diag d;
    char *s = nested(64, '[', ']'), *big;
    size_t n = (size_t)1 << 20, k;
    clock_t t0;
    CHECK_EQ_INT(parse(s, &doc, &d), AMK_OK);
    amk__json_free(&doc);
    free(s);
    s = nested(65, '[', ']');
    CHECK_EQ_INT(parse(s, &doc, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(d.col, 65);
    CHECK_STR(d.message, "nesting deeper than 64");
    CHECK_EQ_INT(strlen(d.path), 64 * 2); /* "/0" per open array */
    free(s);
    /* objects count the same; max_depth is the caller's */
    {
        amk__sb sb;
        memset(&sb, 0, sizeof sb);
        for (k = 0; k < 3; k++) amk__sb_puts(&sb, "{\"a\":");
        amk__sb_puts(&sb, "1}}}");
        CHECK_EQ_INT(parse_n(sb.p, sb.len, 3, &doc, &d), AMK_OK);
        amk__json_free(&doc);
        CHECK_EQ_INT(parse_n(sb.p, sb.len, 2, &doc, &d), AMK_ERR_PARSE);
        CHECK_STR(d.message, "nesting deeper than 2");
        CHECK_STR(d.path, "/a/a");
        CHECK_EQ_INT(parse_n("7", 1, 0, &doc, &d), AMK_OK);
        amk__json_free(&doc);
        CHECK_EQ_INT(parse_n("[]", 2, 0, &doc, &d), AMK_ERR_PARSE);
        amk__sb_free(&sb);
    }
    /* 1 MiB of '[' fails at the 65th, at once */
    big = (char *)malloc(n);
    memset(big, '[', n);
    t0 = clock();
    CHECK_EQ_INT(parse_n(big, n, 64, &doc, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(d.col, 65);
    /* the parser itself is iterative: a 1 MiB deep document with a huge max_depth needs no stack */
    CHECK_EQ_INT(parse_n(big, n, INT_MAX, &doc, &d), AMK_ERR_PARSE);
    CHECK_STR(d.message, "unexpected end of input");
    for (k = n / 2; k < n; k++) big[k] = ']';
    CHECK_EQ_INT(parse_n(big, n, INT_MAX, &doc, &d), AMK_OK);
    amk__json_free(&doc);
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0);
    free(big);
}

/* ---- DOM: duplicate keys ------------------------------------------------------------------------ */

static void test_dom_dup_keys(void) {
    amk__jdoc doc;
    amk_diag d;
    amk__sb sb;
    int k, n = 50000;
    clock_t t0;
    CHECK_EQ_INT(parse("{\"a\":1,\n \"b\":2, \"a\":3}", &doc, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(d.line, 2);
    CHECK_EQ_INT(d.col, 9);
    CHECK_STR(d.message, "duplicate key \"a\"");
    CHECK_STR(d.path, "/a");
    CHECK_EQ_INT(parse("{\"x\": {\"k\": 1, \"k\": 2}}", &doc, &d), AMK_ERR_PARSE);
    CHECK_STR(d.path, "/x/k");
    CHECK_EQ_INT(d.col, 16);
    /* the same key in different objects is fine; keys differ past an embedded NUL */
    CHECK_EQ_INT(parse("[{\"k\": 1}, {\"k\": 2, \"k2\": 3}]", &doc, &d), AMK_OK);
    amk__json_free(&doc);
    CHECK_EQ_INT(parse("{\"a\\u0000b\": 1, \"a\\u0000c\": 2, \"a\": 3}", &doc, &d), AMK_OK);
    amk__json_free(&doc);
    CHECK_EQ_INT(parse("{\"a\\u0000b\": 1, \"a\\u0000b\": 2}", &doc, &d), AMK_ERR_PARSE);
    CHECK_STR(d.message, "duplicate key \"a?b\"");
    /* escapes decode before comparing */
    CHECK_EQ_INT(parse("{\"\\u0041\": 1, \"A\": 2}", &doc, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(d.col, 15);

    /* 50k keys (a tokenizer.json vocabulary): fast, and the first repeat in document order is the
       one reported */
    memset(&sb, 0, sizeof sb);
    amk__sb_putc(&sb, '{');
    for (k = 0; k < n; k++) amk__sb_printf(&sb, "%s\"tok%d\": %d", k ? ",\n" : "", (k * 7919) % n, k);
    amk__sb_putc(&sb, '}');
    t0 = clock();
    CHECK_EQ_INT(parse_n(sb.p, sb.len, 64, &doc, &d), AMK_OK);
    CHECK_EQ_INT(doc.root->n, n);
    CHECK(amk__json_get(doc.root, "tok0") != NULL);
    amk__json_free(&doc);
    sb.len--; /* replace the closing brace with two repeats */
    amk__sb_printf(&sb, ",\n\"tok%d\": 1,\n\"tok%d\": 2}", 777, 5);
    CHECK_EQ_INT(parse_n(sb.p, sb.len, 64, &doc, &d), AMK_ERR_PARSE);
    CHECK_STR(d.message, "duplicate key \"tok777\"");
    CHECK_EQ_INT(d.line, n + 1);
    CHECK_EQ_INT(d.col, 1);
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 3.0);
    amk__sb_free(&sb);
}

/* ---- DOM: canonical output ---------------------------------------------------------------------- */

static void test_dom_put_value(void) {
    static const struct { const char *in, *out; } cases[] = {
        {" { \"k\" : [ 1 , 2.50 , -0.0 , 1E2 , 1e-7 , true , false, null ] , \"o\" : { } , \"e\": [ ] } ",
         "{\"k\":[1,2.5,-0.0,100.0,1e-07,true,false,null],\"o\":{},\"e\":[]}"},
        {"\"\\u00e9\\n\\u001f\\\"\\\\\\/\\b\\f\\r\\t\\u007f\"", "\"\xC3\xA9\\n\\u001f\\\"\\\\/\\b\\f\\r\\t\x7F\""},
        {"[9223372036854775807, 9223372036854775808, -0]", "[9223372036854775807,9.223372036854776e+18,0]"},
        {"{\"b\": 1, \"a\": 2}", "{\"b\":1,\"a\":2}"},
        {"\"a\\u0000b\"", "\"a\\u0000b\""},
    };
    size_t k;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *c = canon(cases[k].in), *c2;
        CHECK_STR(c, cases[k].out);
        c2 = c ? canon(c) : NULL; /* canonical output is a fixed point */
        CHECK_STR(c2, cases[k].out);
        free(c);
        free(c2);
    }
    {
        amk__sb sb;
        memset(&sb, 0, sizeof sb);
        amk__json_put_string(&sb, "q\"\\\x01\x1F\x7F\xE2\x9C\x93", 9);
        CHECK_STR(sb.p, "\"q\\\"\\\\\\u0001\\u001f\x7F\xE2\x9C\x93\"");
        sb.len = 0;
        amk__json_put_string(&sb, NULL, 0);
        CHECK_STR(sb.p, "\"\"");
        amk__sb_free(&sb);
    }
}

/* Reals print like Python's repr (the reference writer's json.dumps) and read back exactly. */
static void test_fmt_real(void) {
    static const struct { double v; const char *s; } cases[] = {
        {100000.0, "100000.0"}, {1e-06, "1e-06"}, {0.1, "0.1"}, {1e300, "1e+300"}, {-0.0, "-0.0"},
        {0.0, "0.0"}, {0.0001, "0.0001"}, {1e-05, "1e-05"}, {1e16, "1e+16"},
        {1234567890123456.0, "1234567890123456.0"}, {12345678901234567.0, "1.2345678901234568e+16"},
        {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
        {0.30000000000000004, "0.30000000000000004"}, {123.456, "123.456"}, {-1.25e-07, "-1.25e-07"},
        {1e22, "1e+22"}, {3e15, "3000000000000000.0"}, {65504.0, "65504.0"}, {2.5, "2.5"}, {-7.0, "-7.0"},
        {1.5e-300, "1.5e-300"},
    };
    size_t k;
    char buf[40];
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        amk__jdoc doc;
        amk_diag d;
        amk__fmt_double(buf, sizeof buf, cases[k].v);
        CHECK_STR(buf, cases[k].s);
        CHECK_EQ_INT(parse(buf, &doc, &d), AMK_OK);
        if (!doc.root) continue;
        CHECK_EQ_INT(doc.root->type, AMK__J_REAL);
        CHECK(doc.root->f == cases[k].v && signbit(doc.root->f) == signbit(cases[k].v));
        amk__json_free(&doc);
    }
}

/* ---- program: golden round trips ------------------------------------------------------------------ */

static const char *const goldens[] = {DATA "golden/spec_example.json", DATA "golden/full.json",
                                      DATA "golden/small.json", DATA "golden/empty.json"};

static void test_golden_roundtrip(void) {
    size_t k;
    for (k = 0; k < sizeof goldens / sizeof goldens[0]; k++) {
        size_t n;
        char *text = slurp(goldens[k], &n), *w1, *w2;
        amk_program *p, *q;
        amk_diag d;
        CHECK_MSG(text != NULL, "%s", goldens[k]);
        if (!text) continue;
        CHECK_EQ_INT(amk_program_load_file(goldens[k], &p, &d), AMK_OK);
        if (!p) { fprintf(stderr, "%s\n", d.message); free(text); continue; }
        w1 = write_prog(p);
        CHECK_MSG(w1 && strcmp(w1, text) == 0, "%s: load -> write differs from the golden bytes", goldens[k]);
        q = w1 ? load_text(w1, strlen(w1), &d) : NULL;
        CHECK(q != NULL);
        w2 = q ? write_prog(q) : NULL;
        CHECK_MSG(w1 && w2 && strcmp(w1, w2) == 0, "%s: write(read(write)) != write", goldens[k]);
        /* a clone writes the same bytes (clone and writer agree on every field) */
        amk_program_free(q);
        q = amk_program_clone(p);
        amk_free(w2);
        w2 = q ? write_prog(q) : NULL;
        CHECK_MSG(w1 && w2 && strcmp(w1, w2) == 0, "%s: clone writes differently", goldens[k]);
        amk_free(w1);
        amk_free(w2);
        amk_program_free(q);
        amk_program_free(p);
        free(text);
    }
}

static const amk_param *param(const amk_task *t, const char *key) { return amk_task_param(t, key); }

/* Every field of the full golden lands where it belongs. */
static void test_golden_values(void) {
    amk_program *p;
    amk_diag d;
    const amk_task *t;
    const amk_param *pr;
    char buf[64];
    CHECK_EQ_INT(amk_program_load_file(DATA "golden/full.json", &p, &d), AMK_OK);
    if (!p) return;
    CHECK_EQ_INT(p->n_meta, 5);
    CHECK_STR(p->meta[0].key, "model");
    CHECK_STR(p->meta[0].json, "\"tiny-llama\"");
    CHECK_STR(p->meta[2].json,
              "{\"seed\":7,\"tags\":[\"a\",\"b\"],\"ratio\":0.5,\"ok\":true,\"none\":null,\"big\":1.2345678901234568e+29}");
    CHECK_STR(amk_program_meta_string(p, "unicode", buf, sizeof buf), "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80");
    CHECK_STR(amk_program_meta_string(p, "escapes", buf, sizeof buf), "q\"b\\s/t\tn\nc\x01");
    CHECK(amk_program_meta_string(p, "notes", buf, sizeof buf) == NULL);

    CHECK_EQ_INT(p->has_target, 1);
    CHECK_STR(p->target.name, "h100");
    CHECK_EQ_INT(p->target.sm_arch, 90);
    CHECK_EQ_INT(p->target.num_sms, 132);
    CHECK_EQ_INT(p->target.smem_bytes_per_block_optin, 232448);
    CHECK_EQ_INT(p->target.max_regs_per_thread, 255);
    CHECK_EQ_INT(p->target.hbm_bytes, 85899345920LL);
    CHECK(p->target.fp16_tflops == 989.4 && p->target.clock_ghz == 1.98 && p->target.hbm_bandwidth_gbs == 3350.0);
    CHECK_EQ_INT(p->target.supports_cooperative, 1);
    CHECK_EQ_INT(p->target.wddm_tdr, 0);
    CHECK_STR(p->target.note, "datasheet \"values\"");

    CHECK_EQ_INT(p->n_buffers, 10);
    CHECK_STR(p->buffers[1].name, "embed.w\xC3\xA9ight");
    CHECK_EQ_INT(p->buffers[1].dtype, AMK_DTYPE_BF16);
    CHECK_EQ_INT(p->buffers[1].kind, AMK_KIND_WEIGHT);
    CHECK(p->buffers[1].rank == 2 && p->buffers[1].shape[0] == 32 && p->buffers[1].shape[1] == 16);
    CHECK_STR(p->buffers[1].source, "model.embed_tokens.weight");
    CHECK_STR(p->buffers[2].name, "\xE6\xB3\xA8\xE6\x84\x8F\xE5\x8A\x9B");
    CHECK_EQ_INT(p->buffers[2].space, AMK_SPACE_SMEM);
    CHECK_STR(p->buffers[3].name, "tab\tname");
    CHECK(p->buffers[4].rank == 4 && p->buffers[4].shape[3] == 4 && p->buffers[4].dtype == AMK_DTYPE_F8E4M3);
    CHECK(p->buffers[0].source == NULL);
    CHECK_STR(p->buffers[5].source, "");
    CHECK(p->buffers[6].rank == 0 && p->buffers[6].space == AMK_SPACE_REGISTER);
    CHECK(p->buffers[7].shape[0] == 0 && amk_buffer_numel(&p->buffers[7]) == 0);
    CHECK_EQ_INT(p->buffers[9].dtype, AMK_DTYPE_BOOL);

    CHECK_EQ_INT(p->n_counters, 3);
    CHECK_STR(p->counters[1].note, "second (listed first)"); /* stored at index id */
    CHECK_EQ_INT(p->counters[1].id, 1);
    CHECK_EQ_INT(p->counters[2].init, 4294967295LL);

    CHECK_EQ_INT(p->n_tasks, 3);
    t = &p->tasks[0]; /* tasks keep list order */
    CHECK(t->id == 2 && t->op == AMK_OP_EMBED && t->sm == 0 && t->est_bytes == 1024 && t->op_name == NULL);
    CHECK_STR(t->label, "embed \xE2\x86\x92 h");
    t = &p->tasks[1];
    CHECK(t->id == 0 && t->op == AMK_OP_RMSNORM && t->sm == 131 && t->est_bytes == INT64_MAX && t->est_flops == 64);
    CHECK_EQ_INT(t->n_params, 13);
    pr = param(t, "eps");
    CHECK(pr && pr->type == AMK_PARAM_REAL && pr->f == 1e-06);
    pr = param(t, "hidden");
    CHECK(pr && pr->type == AMK_PARAM_INT && pr->i == 16);
    pr = param(t, "theta");
    CHECK(pr && pr->type == AMK_PARAM_REAL && pr->f == 100000.0);
    pr = param(t, "negz");
    CHECK(pr && pr->type == AMK_PARAM_REAL && pr->f == 0.0 && signbit(pr->f));
    pr = param(t, "tiny");
    CHECK(pr && pr->f == 5e-324);
    pr = param(t, "neg");
    CHECK(pr && pr->type == AMK_PARAM_INT && pr->i == -42);
    pr = param(t, "flag");
    CHECK(pr && pr->type == AMK_PARAM_BOOL && pr->i == 1);
    pr = param(t, "off");
    CHECK(pr && pr->type == AMK_PARAM_BOOL && pr->i == 0);
    pr = param(t, "mode");
    CHECK(pr && pr->type == AMK_PARAM_STRING && strcmp(pr->s, "fast") == 0);
    pr = param(t, "nothing");
    CHECK(pr && pr->type == AMK_PARAM_NULL);
    CHECK_STR(t->params[0].key, "eps"); /* stored order */
    t = &p->tasks[2];
    CHECK(t->id == 1 && t->op == -1 && t->sm == -1 && t->n_inputs == 0 && t->n_outputs == 1 && t->outputs[0] == 9);
    CHECK_STR(t->op_name, "FUSED_MYSTERY");
    CHECK_EQ_INT(t->n_waits, 3);
    CHECK(t->waits[1].counter == 0 && t->waits[1].threshold == INT64_MIN && t->waits[2].threshold == INT64_MAX);
    CHECK_EQ_INT(t->n_params, 0);

    CHECK_EQ_INT(p->has_pages, 1);
    CHECK_EQ_INT(p->n_pages, 2);
    CHECK(p->pages[0].space == AMK_SPACE_SMEM && p->pages[0].nbytes == 64 && p->pages[0].live_start == -1);
    CHECK(p->pages[1].id == 1 && p->pages[1].live_end == 2);
    CHECK(p->buffer_page[2] == 0 && p->buffer_page[3] == 1 && p->buffer_page[0] == -1 && p->buffer_page[9] == -1);

    CHECK_EQ_INT(p->has_config, 1);
    CHECK_EQ_INT(p->config.n_tiling, 3);
    CHECK_STR(p->config.tiling[0].archetype, "gemv");
    CHECK(p->config.tiling[0].n_items == 2 && p->config.tiling[0].items[1].value == 64);
    CHECK_STR(p->config.tiling[0].items[1].key, "K_tile");
    CHECK_EQ_INT(p->config.tiling[2].n_items, 0);
    CHECK_EQ_INT(p->config.n_fusion, 3);
    CHECK_STR(p->config.fusion[0].names[1], "GEMV_TILE");
    CHECK_EQ_INT(p->config.fusion[2].n_names, 0);
    CHECK_EQ_INT(p->config.sm_assignment, AMK_SM_EXPLICIT);
    CHECK_EQ_INT(p->config.n_explicit, 3);
    CHECK(p->config.explicit_task[1] == 0 && p->config.explicit_sm[1] == 131);
    CHECK_EQ_INT(p->config.pipelining_depth, 3);
    CHECK_EQ_INT(p->config.page_allocation, AMK_PAGES_LINEAR);
    CHECK_EQ_INT(p->config.threads_per_block, 512);
    CHECK_EQ_INT(p->config.smem_bytes_per_block, 200000);
    amk_program_free(p);

    /* absent target, pages and config */
    CHECK_EQ_INT(amk_program_load_file(DATA "golden/empty.json", &p, &d), AMK_OK);
    if (!p) return;
    CHECK(!p->has_target && !p->has_pages && !p->has_config && p->buffer_page == NULL);
    CHECK(p->n_buffers == 0 && p->n_tasks == 0 && p->n_meta == 0);
    CHECK_EQ_INT(p->config.threads_per_block, 256); /* defaults */
    amk_program_free(p);
}

/* The spec's own style (json.dumps(indent=2), any key order, unknown target/config fields,
   optional fields missing) loads and writes the committed canonical form. */
static void test_spec_style(void) {
    size_t n;
    char *expect = slurp(DATA "spec_style.expected.json", &n), *w;
    amk_program *p;
    amk_diag d;
    CHECK(expect != NULL);
    CHECK_EQ_INT(amk_program_load_file(DATA "spec_style.json", &p, &d), AMK_OK);
    if (!p || !expect) { free(expect); amk_program_free(p); return; }
    w = write_prog(p);
    CHECK_MSG(w && strcmp(w, expect) == 0, "spec_style.json does not write spec_style.expected.json");
    CHECK_STR(p->tasks[0].label, "");
    CHECK(p->tasks[0].id == 1 && p->tasks[0].n_waits == 0 && p->tasks[0].sm == -1 && p->tasks[0].est_bytes == 0);
    CHECK_STR(p->counters[1].note, "");
    CHECK_EQ_INT(p->buffers[0].space, AMK_SPACE_HBM);
    CHECK(p->buffers[0].source == NULL);
    CHECK(p->target.hbm_bandwidth_gbs == 1792.0 && p->target.wddm_tdr == 1 && p->target.supports_cooperative == 0);
    CHECK(p->target.regs_per_sm == 0 && p->target.note[0] == 0);
    CHECK(p->config.sm_assignment == AMK_SM_EXPLICIT && p->config.n_explicit == 2 && p->config.explicit_task[0] == 1);
    CHECK_EQ_INT(p->config.pipelining_depth, 2);
    CHECK_EQ_INT(p->config.page_allocation, AMK_PAGES_LINEAR);
    CHECK_EQ_INT(p->n_meta, 3);
    amk_free(w);
    amk_program_free(p);
    free(expect);
}

/* ---- program: malformed corpus ------------------------------------------------------------------- */

/* tests/data/json/bad/NAME.json: the result, JSON path and line:col each must give. Generated
   with tests/data/json/make_bad.py, which computes line:col from the text independently. */
static const struct { const char *name; amk_result result; const char *path; int line, col; } bad_files[] = {
    {"trunc_empty", AMK_ERR_PARSE, "", 1, 1},
    {"trunc_ws_only", AMK_ERR_PARSE, "", 2, 2},
    {"trunc_in_root_key", AMK_ERR_PARSE, "", 2, 8},
    {"trunc_in_string", AMK_ERR_PARSE, "/buffers/0/name", 7, 25},
    {"trunc_after_comma", AMK_ERR_PARSE, "/buffers/1", 8, 5},
    {"trunc_in_literal", AMK_ERR_PARSE, "/buffers/0/source", 7, 110},
    {"trunc_in_number", AMK_ERR_PARSE, "/tasks/1/waits/0/threshold", 21, 124},
    {"trunc_in_exponent", AMK_ERR_PARSE, "/tasks/0/params/eps", 20, 118},
    {"trunc_before_close", AMK_ERR_PARSE, "", 39, 1},
    {"not_object", AMK_ERR_PARSE, "", 1, 1},
    {"top_null", AMK_ERR_PARSE, "", 1, 1},
    {"ir_version_missing", AMK_ERR_PARSE, "/ir_version", 1, 1},
    {"ir_version_int", AMK_ERR_PARSE, "/ir_version", 2, 17},
    {"ir_version_two_parts", AMK_ERR_PARSE, "/ir_version", 2, 17},
    {"ir_version_major", AMK_ERR_VERSION, "/ir_version", 2, 17},
    {"abi_version_int", AMK_ERR_PARSE, "/abi_version", 3, 18},
    {"tasks_missing", AMK_ERR_PARSE, "/tasks", 1, 1},
    {"buffers_object", AMK_ERR_PARSE, "/buffers", 6, 14},
    {"dup_top_key", AMK_ERR_PARSE, "/tasks", 20, 3},
    {"meta_array", AMK_ERR_PARSE, "/meta", 4, 11},
    {"meta_null", AMK_ERR_PARSE, "/meta", 4, 11},
    {"buffer_null", AMK_ERR_PARSE, "/buffers/0", 7, 5},
    {"buffer_id_string", AMK_ERR_PARSE, "/buffers/0/id", 7, 12},
    {"buffer_id_real", AMK_ERR_PARSE, "/buffers/0/id", 7, 12},
    {"buffer_id_bool", AMK_ERR_PARSE, "/buffers/0/id", 7, 12},
    {"buffer_id_dup", AMK_ERR_PARSE, "/buffers/1/id", 8, 12},
    {"buffer_id_range", AMK_ERR_PARSE, "/buffers/5/id", 12, 12},
    {"buffer_id_missing", AMK_ERR_PARSE, "/buffers/0/id", 7, 5},
    {"buffer_dtype_unknown", AMK_ERR_PARSE, "/buffers/0/dtype", 7, 57},
    {"buffer_kind_lowercase", AMK_ERR_PARSE, "/buffers/0/kind", 7, 36},
    {"buffer_kind_code", AMK_ERR_PARSE, "/buffers/0/kind", 7, 36},
    {"buffer_space_unknown", AMK_ERR_PARSE, "/buffers/2/space", 9, 93},
    {"buffer_shape_string", AMK_ERR_PARSE, "/buffers/0/shape", 7, 73},
    {"buffer_shape_negative", AMK_ERR_PARSE, "/buffers/1/shape/0", 8, 77},
    {"buffer_shape_real", AMK_ERR_PARSE, "/buffers/1/shape/0", 8, 77},
    {"buffer_shape_rank5", AMK_ERR_PARSE, "/buffers/1/shape", 8, 76},
    {"buffer_numel_overflow", AMK_ERR_PARSE, "/buffers/1/shape", 8, 76},
    {"buffer_bytes_overflow", AMK_ERR_PARSE, "/buffers/1/shape", 8, 76},
    {"buffer_dim_huge", AMK_ERR_PARSE, "/buffers/1/shape/0", 8, 77},
    {"buffer_unknown_key", AMK_ERR_PARSE, "/buffers/1/stride", 8, 133},
    {"buffer_name_missing", AMK_ERR_PARSE, "/buffers/0/name", 7, 5},
    {"buffer_name_null", AMK_ERR_PARSE, "/buffers/0/name", 7, 23},
    {"buffer_source_int", AMK_ERR_PARSE, "/buffers/1/source", 8, 108},
    {"buffer_name_nul", AMK_ERR_PARSE, "/buffers/0/name", 7, 23},
    {"counter_init_above_u32", AMK_ERR_PARSE, "/counters/0/init", 15, 23},
    {"counter_init_negative", AMK_ERR_PARSE, "/counters/0/init", 15, 23},
    {"counter_init_real", AMK_ERR_PARSE, "/counters/0/init", 15, 23},
    {"counter_note_null", AMK_ERR_PARSE, "/counters/0/note", 15, 34},
    {"counter_id_dup", AMK_ERR_PARSE, "/counters/2/id", 17, 12},
    {"counter_unknown_key", AMK_ERR_PARSE, "/counters/0/producers", 15, 55},
    {"task_null", AMK_ERR_PARSE, "/tasks/0", 20, 5},
    {"task_unknown_key", AMK_ERR_PARSE, "/tasks/0/priority", 20, 212},
    {"task_id_dup", AMK_ERR_PARSE, "/tasks/1/id", 21, 12},
    {"task_id_range", AMK_ERR_PARSE, "/tasks/2/id", 22, 12},
    {"task_id_negative", AMK_ERR_PARSE, "/tasks/2/id", 22, 12},
    {"task_op_int", AMK_ERR_PARSE, "/tasks/2/op", 22, 21},
    {"task_op_missing", AMK_ERR_PARSE, "/tasks/2/op", 22, 5},
    {"task_input_missing_buffer", AMK_ERR_PARSE, "/tasks/2/inputs/1", 22, 42},
    {"task_input_real", AMK_ERR_PARSE, "/tasks/2/inputs/1", 22, 42},
    {"task_input_bool", AMK_ERR_PARSE, "/tasks/2/inputs/1", 22, 42},
    {"task_outputs_not_array", AMK_ERR_PARSE, "/tasks/2/outputs", 22, 57},
    {"task_out_counter_range", AMK_ERR_PARSE, "/tasks/2/out_counter", 22, 77},
    {"task_out_counter_null", AMK_ERR_PARSE, "/tasks/2/out_counter", 22, 77},
    {"task_wait_counter_range", AMK_ERR_PARSE, "/tasks/2/waits/0/counter", 22, 102},
    {"task_wait_threshold_string", AMK_ERR_PARSE, "/tasks/2/waits/0/threshold", 22, 118},
    {"task_wait_threshold_huge", AMK_ERR_PARSE, "/tasks/2/waits/0/threshold", 22, 118},
    {"task_wait_unknown_key", AMK_ERR_PARSE, "/tasks/2/waits/0/timeout", 22, 132},
    {"task_wait_missing_threshold", AMK_ERR_PARSE, "/tasks/2/waits/0/threshold", 22, 90},
    {"task_waits_object", AMK_ERR_PARSE, "/tasks/2/waits", 22, 89},
    {"task_params_nested_array", AMK_ERR_PARSE, "/tasks/1/params/K", 21, 145},
    {"task_params_nested_object", AMK_ERR_PARSE, "/tasks/2/params/x", 22, 139},
    {"task_params_array", AMK_ERR_PARSE, "/tasks/2/params", 22, 133},
    {"task_params_big_int", AMK_ERR_PARSE, "/tasks/1/params/K", 21, 145},
    {"task_params_dup_key", AMK_ERR_PARSE, "/tasks/1/params/K", 21, 149},
    {"task_sm_negative", AMK_ERR_PARSE, "/tasks/2/sm", 22, 143},
    {"task_sm_string", AMK_ERR_PARSE, "/tasks/2/sm", 22, 143},
    {"task_est_bytes_negative", AMK_ERR_PARSE, "/tasks/0/est_bytes", 20, 162},
    {"task_label_null", AMK_ERR_PARSE, "/tasks/0/label", 20, 192},
    {"target_name_too_long", AMK_ERR_PARSE, "/target/name", 5, 22},
    {"target_note_too_long", AMK_ERR_PARSE, "/target/note", 5, 381},
    {"target_num_sms_real", AMK_ERR_PARSE, "/target/num_sms", 5, 56},
    {"target_num_sms_overflow", AMK_ERR_PARSE, "/target/num_sms", 5, 56},
    {"target_cooperative_int", AMK_ERR_PARSE, "/target/supports_cooperative", 5, 348},
    {"target_bandwidth_string", AMK_ERR_PARSE, "/target/hbm_bandwidth_gbs", 5, 275},
    {"target_string", AMK_ERR_PARSE, "/target", 5, 13},
    {"pages_missing_page", AMK_ERR_PARSE, "/pages/buffer_to_page/2", 25, 29},
    {"pages_bad_key", AMK_ERR_PARSE, "/pages/buffer_to_page/h", 25, 29},
    {"pages_key_leading_zero", AMK_ERR_PARSE, "/pages/buffer_to_page/02", 25, 30},
    {"pages_key_no_buffer", AMK_ERR_PARSE, "/pages/buffer_to_page/6", 25, 29},
    {"pages_page_id_dup", AMK_ERR_PARSE, "/pages/pages/1/id", 28, 14},
    {"pages_nbytes_negative", AMK_ERR_PARSE, "/pages/pages/0/nbytes", 27, 54},
    {"pages_missing_list", AMK_ERR_PARSE, "/pages/pages", 24, 12},
    {"config_sm_assignment_unknown", AMK_ERR_PARSE, "/config/sm_assignment", 33, 22},
    {"config_sm_assignment_bad_key", AMK_ERR_PARSE, "/config/sm_assignment/one", 33, 38},
    {"config_sm_assignment_negative", AMK_ERR_PARSE, "/config/sm_assignment/0", 33, 28},
    {"config_page_allocation_unknown", AMK_ERR_PARSE, "/config/page_allocation", 35, 24},
    {"config_tiling_real", AMK_ERR_PARSE, "/config/tiling/gemv/N_tile", 31, 35},
    {"config_tiling_slash_key", AMK_ERR_PARSE, "/config/tiling/a~1b~0c", 31, 25},
    {"config_fusion_flat", AMK_ERR_PARSE, "/config/fusion_grouping/0", 32, 25},
    {"config_threads_string", AMK_ERR_PARSE, "/config/threads_per_block", 36, 26},
    {"deep_nesting", AMK_ERR_PARSE, "/meta/model/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0", 4, 83},
    {"invalid_utf8", AMK_ERR_PARSE, "/buffers/0/name", 7, 25},
    {"overlong_utf8", AMK_ERR_PARSE, "/buffers/0/name", 7, 24},
    {"utf8_surrogate_bytes", AMK_ERR_PARSE, "/tasks/0/label", 20, 193},
    {"lone_surrogate_escape", AMK_ERR_PARSE, "/tasks/0/label", 20, 193},
    {"raw_control_char", AMK_ERR_PARSE, "/tasks/0/label", 20, 195},
    {"trailing_comma_array", AMK_ERR_PARSE, "/tasks", 23, 3},
    {"trailing_comma_object", AMK_ERR_PARSE, "/counters/0", 15, 41},
    {"comment", AMK_ERR_PARSE, "", 1, 1},
    {"nan_param", AMK_ERR_PARSE, "/tasks/0/params/eps", 20, 115},
    {"infinity_param", AMK_ERR_PARSE, "/tasks/0/params/eps", 20, 115},
    {"leading_zero", AMK_ERR_PARSE, "/tasks/0/params/hidden", 20, 132},
    {"real_overflow", AMK_ERR_PARSE, "/tasks/0/params/eps", 20, 115},
    {"single_quotes", AMK_ERR_PARSE, "/meta", 4, 12},
    {"garbage_after", AMK_ERR_PARSE, "", 40, 1},
    {"second_value", AMK_ERR_PARSE, "", 40, 1},
    {"bom", AMK_ERR_PARSE, "", 1, 1},
    {"missing_colon", AMK_ERR_PARSE, "/meta/model", 4, 20},
    {"missing_comma", AMK_ERR_PARSE, "/buffers/0", 7, 27},
    {"bad_escape", AMK_ERR_PARSE, "/tasks/0/label", 20, 193},
    {"short_unicode_escape", AMK_ERR_PARSE, "/tasks/0/label", 20, 193},
};
#define N_BAD ((int)(sizeof bad_files / sizeof bad_files[0]))

static void test_bad_corpus(void) {
    int k, listed = 0;
    DIR *dir;
    struct dirent *e;
    CHECK(N_BAD >= 40);
    for (k = 0; k < N_BAD; k++) {
        char path[256], prefix[300];
        amk_program *p = (amk_program *)&p; /* must come back NULL */
        amk_diag d;
        amk_result r;
        snprintf(path, sizeof path, DATA "bad/%s.json", bad_files[k].name);
        r = amk_program_load_file(path, &p, &d);
        CHECK_MSG(r == bad_files[k].result, "%s: result %d (%s), expected %d", bad_files[k].name, (int)r, d.message,
                  (int)bad_files[k].result);
        CHECK_MSG(d.result == r, "%s", bad_files[k].name);
        CHECK_MSG(strcmp(d.path, bad_files[k].path) == 0, "%s: path '%s', expected '%s' (%s)", bad_files[k].name, d.path,
                  bad_files[k].path, d.message);
        CHECK_MSG(d.line == bad_files[k].line && d.col == bad_files[k].col, "%s: at %d:%d, expected %d:%d (%s)",
                  bad_files[k].name, d.line, d.col, bad_files[k].line, bad_files[k].col, d.message);
        snprintf(prefix, sizeof prefix, "%s:%d:%d: ", path, bad_files[k].line, bad_files[k].col);
        CHECK_MSG(strncmp(d.message, prefix, strlen(prefix)) == 0 && strlen(d.message) > strlen(prefix) + 5,
                  "%s: message '%s'", bad_files[k].name, d.message);
        CHECK(p == NULL);
        amk_program_free(p);
    }
    /* every file of the corpus is in the table */
    dir = opendir(DATA "bad");
    CHECK(dir != NULL);
    while (dir && (e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name);
        int found = 0;
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        for (k = 0; k < N_BAD; k++)
            if (strlen(bad_files[k].name) == n - 5 && strncmp(bad_files[k].name, e->d_name, n - 5) == 0) found = 1;
        CHECK_MSG(found, "%s is not in the test table", e->d_name);
        listed++;
    }
    if (dir) closedir(dir);
    CHECK_EQ_INT(listed, N_BAD);
}

/* Every prefix of every golden fails cleanly; the one ending at the final '}' (before the
   newline) is itself a complete document and loads. */
static void test_truncation_sweep(void) {
    static const char *const files[] = {DATA "golden/full.json", DATA "golden/spec_example.json",
                                        DATA "spec_style.json"};
    size_t f;
    for (f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t n, cut, end;
        char *text = slurp(files[f], &n);
        int bad = 0;
        CHECK(text != NULL);
        if (!text) continue;
        end = n;
        while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) end--;
        for (cut = 0; cut <= n; cut++) {
            amk_diag d;
            amk_program *p = load_text(text, cut, &d);
            if (cut < end) {
                if (p || d.result != AMK_ERR_PARSE || d.line < 1 || d.col < 1 || !d.message[0]) bad++;
            } else if (!p) {
                bad++;
            }
            amk_program_free(p);
        }
        CHECK_MSG(bad == 0, "%s: %d prefixes misbehaved", files[f], bad);
        free(text);
    }
}

/* ---- program: versions, arguments ------------------------------------------------------------------- */

static void test_versions(void) {
    static const struct { const char *v; amk_result r; } cases[] = {
        {"\"0.2.0\"", AMK_OK}, {"\"0.3.7\"", AMK_OK}, {"\"0.0.0\"", AMK_OK}, {"\"0.2.123456789\"", AMK_OK},
        {"\"1.0.0\"", AMK_ERR_VERSION}, {"\"10.2.0\"", AMK_ERR_VERSION},
        {"\"0.2\"", AMK_ERR_PARSE}, {"\"0.2.0-rc1\"", AMK_ERR_PARSE}, {"\"v0.2.0\"", AMK_ERR_PARSE},
        {"\"0..0\"", AMK_ERR_PARSE}, {"\"\"", AMK_ERR_PARSE}, {"\"0.2.0.1\"", AMK_ERR_PARSE},
        {"\"0.2.1234567890\"", AMK_ERR_PARSE}, {"0.2", AMK_ERR_PARSE}, {"null", AMK_ERR_PARSE},
    };
    size_t k, n;
    char *base = slurp(DATA "golden/small.json", &n);
    CHECK(base != NULL);
    if (!base) return;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *text = replace1(base, "\"0.2.0\"", cases[k].v);
        amk_diag d;
        amk_program *p = load_text(text, strlen(text), &d);
        CHECK_MSG((p ? AMK_OK : d.result) == cases[k].r, "ir_version %s: %s", cases[k].v, d.message);
        if (!p) CHECK_STR(d.path, "/ir_version");
        if (cases[k].r == AMK_ERR_VERSION && strcmp(cases[k].v, "\"1.0.0\"") == 0)
            CHECK_STR(d.message, "ir_version 1.0.0 is not supported (this is 0.2.0)");
        amk_program_free(p);
        free(text);
    }
    free(base);
}

static void test_load_args(void) {
    amk_program *p = NULL;
    amk_diag d;
    CHECK_EQ_INT(amk_program_load_json(NULL, 5, &p, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_program_load_json("{}", 2, NULL, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_program_load_json(NULL, 0, &p, &d), AMK_ERR_PARSE);
    CHECK(p == NULL);
    CHECK_EQ_INT(amk_program_load_json("{\"ir_version\": 1}", 17, &p, NULL), AMK_ERR_PARSE); /* no diag */
    CHECK_EQ_INT(amk_program_load_file(NULL, &p, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_program_load_file(DATA "no_such_file.json", &p, &d), AMK_ERR_IO);
    CHECK(strstr(d.message, "no_such_file.json") != NULL);
    CHECK_EQ_INT(amk_program_load_file(DATA "bad", &p, &d), AMK_ERR_IO); /* a directory */
    CHECK(p == NULL);
    CHECK_EQ_INT(amk_program_write_json(NULL, NULL, NULL), AMK_ERR_INVALID_ARG);
}

/* Meta with 50k keys (the dup check is not quadratic) round trips. */
static void test_big_meta(void) {
    amk__sb sb;
    amk_program *p;
    amk_diag d;
    char *w1, *w2;
    int k, n = 50000;
    clock_t t0 = clock();
    memset(&sb, 0, sizeof sb);
    amk__sb_puts(&sb, "{\"ir_version\": \"0.2.0\", \"buffers\": [], \"counters\": [], \"tasks\": [], \"meta\": {");
    for (k = 0; k < n; k++) amk__sb_printf(&sb, "%s\"k%d\": [%d, \"v\"]", k ? ", " : "", n - k, k);
    amk__sb_puts(&sb, "}}");
    p = load_text(sb.p, sb.len, &d);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ_INT(p->n_meta, n);
        CHECK_STR(p->meta[n - 1].key, "k1");
        CHECK_STR(p->meta[n - 1].json, "[49999,\"v\"]");
        w1 = write_prog(p);
        amk_program_free(p);
        p = w1 ? load_text(w1, strlen(w1), &d) : NULL;
        w2 = p ? write_prog(p) : NULL;
        CHECK(w1 && w2 && strcmp(w1, w2) == 0);
        CHECK(w1 && strstr(w1, "\"k1\": [49999, \"v\"]}") != NULL);
        amk_free(w1);
        amk_free(w2);
        amk_program_free(p);
    }
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0);
    amk__sb_free(&sb);
}

/* ---- program: writing ------------------------------------------------------------------------------ */

static amk_program *build_small(void) {
    amk_program *p = amk_program_create();
    int64_t sx[2] = {1, 16}, sw[1] = {16};
    int in0[2], out0[1], t;
    amk_target tg;
    in0[0] = amk_program_add_buffer(p, "x \xE2\x9C\x93", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, sx, AMK_SPACE_HBM, NULL);
    in0[1] = amk_program_add_buffer(p, "w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, sw, AMK_SPACE_HBM, "norm.weight");
    out0[0] = amk_program_add_buffer(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, sx, AMK_SPACE_HBM, NULL);
    amk_program_add_counter(p, "done");
    t = amk_program_add_task(p, AMK_OP_RMSNORM, in0, 2, out0, 1, 0, "norm \"q\"");
    amk_task_set_real(p, t, "eps", 1e-06);
    amk_task_set_int(p, t, "hidden", 16);
    amk_task_set_real(p, t, "theta", 100000.0);
    amk_task_set_real(p, t, "z", -0.0);
    amk_program_set_meta_string(p, "model", "built \"in\" code");
    amk_target_builtin("h100", &tg);
    amk_program_set_target(p, &tg);
    return p;
}

static void test_write_builder(void) {
    amk_program *p = build_small(), *q;
    amk_diag d;
    char *w1, *w2;
    CHECK_EQ_INT(p->build_error, AMK_OK);
    w1 = write_prog(p);
    CHECK(w1 != NULL);
    if (!w1) { amk_program_free(p); return; }
    CHECK(strstr(w1, "\"params\": {\"eps\": 1e-06, \"hidden\": 16, \"theta\": 100000.0, \"z\": -0.0}") != NULL);
    CHECK(strstr(w1, "\"meta\": {\"model\": \"built \\\"in\\\" code\"},\n") != NULL);
    CHECK(strstr(w1, "\"label\": \"norm \\\"q\\\"\"}") != NULL);
    CHECK(strstr(w1, "\"hbm_bandwidth_gbs\": 3350.0, \"fp16_tflops\": 989.4") != NULL);
    CHECK(strstr(w1, "\"pages\": null,\n  \"config\": null\n}\n") != NULL);
    CHECK(strncmp(w1, "{\n  \"ir_version\": \"0.2.0\",\n  \"abi_version\": \"0.2\",\n", 49) == 0);
    q = load_text(w1, strlen(w1), &d);
    CHECK(q != NULL);
    w2 = q ? write_prog(q) : NULL;
    CHECK(w2 && strcmp(w1, w2) == 0);
    if (q) {
        const amk_param *pr = amk_task_param(&q->tasks[0], "z");
        CHECK(pr && pr->type == AMK_PARAM_REAL && signbit(pr->f));
        CHECK_STR(q->buffers[0].name, "x \xE2\x9C\x93");
    }
    amk_free(w1);
    amk_free(w2);
    amk_program_free(q);
    amk_program_free(p);
}

/* A weight in a GGUF block format goes out by its name and comes back as the same dtype. */
static void test_block_dtype_roundtrip(void) {
    amk_program *p = amk_program_create(), *q;
    int64_t sh[2] = {4, 512};
    amk_diag d;
    char *w;
    amk_program_add_buffer(p, "w", AMK_KIND_WEIGHT, AMK_DTYPE_Q6_K, 2, sh, AMK_SPACE_HBM, "w");
    w = write_prog(p);
    CHECK(w && strstr(w, "\"dtype\": \"Q6_K\"") != NULL);
    q = w ? load_text(w, strlen(w), &d) : NULL;
    CHECK(q && q->n_buffers == 1 && q->buffers[0].dtype == AMK_DTYPE_Q6_K);
    CHECK_EQ_INT(amk_dtype_from_name("IQ4_NL"), AMK_DTYPE_IQ4_NL);
    amk_free(w);
    amk_program_free(q);
    amk_program_free(p);
}

/* The writer refuses what would not load again, rather than write a broken file. */
static void test_write_refuses(void) {
    int k;
    for (k = 0; k < 16; k++) {
        amk_program *p = build_small();
        char *out = (char *)&p;
        size_t n = 7;
        switch (k) {
        case 0: amk_task_set_real(p, 0, "eps", NAN); break;
        case 1: amk_task_set_real(p, 0, "eps", INFINITY); break;
        case 2: p->target.clock_ghz = -INFINITY; break;
        case 3: p->tasks[0].inputs[0] = 99; break;
        case 4: p->tasks[0].out_counter = 1; break;
        case 5: amk_task_add_wait(p, 0, 5, 1); break;
        case 6: p->buffers[1].name[0] = (char)0xFF; break;
        case 7: p->buffers[0].kind = 42; break;
        case 8: p->buffers[0].dtype = -1; break;
        case 9: p->tasks[0].op = 77; break;
        case 10: p->tasks[0].id = 3; break;
        case 11: p->counters[0].init = -1; break;
        case 12: p->tasks[0].sm = -5; break;
        case 13: amk__free(p->meta[0].json); p->meta[0].json = amk__strdup("{"); break;
        case 14: p->buffers[0].shape[0] = -1; break;
        default: /* a page table naming a page that does not exist */
            p->has_pages = 1;
            p->buffer_page = (int *)amk__malloc(3 * sizeof(int));
            p->buffer_page[0] = p->buffer_page[1] = -1;
            p->buffer_page[2] = 0;
            break;
        }
        CHECK_MSG(amk_program_write_json(p, &out, &n) == AMK_ERR_INVALID_ARG, "case %d", k);
        CHECK(out == NULL && n == 0);
        amk_program_free(p);
    }
    {
        /* op -1 with its JSON name writes that name */
        amk_program *p = build_small();
        char *w;
        p->tasks[0].op = -1;
        p->tasks[0].op_name = amk__strdup("NEW_OP");
        w = write_prog(p);
        CHECK(w && strstr(w, "\"op\": \"NEW_OP\"") != NULL);
        amk_free(w);
        amk_program_free(p);
    }
}

static void test_save_and_load_file(void) {
    char path[] = "/tmp/amk_test_json_XXXXXX";
    int fd = mkstemp(path);
    amk_program *p = build_small(), *q = NULL;
    amk_diag d;
    char *w1, *w2, *disk;
    size_t n;
    CHECK(fd >= 0);
    if (fd < 0) { amk_program_free(p); return; }
    close(fd);
    CHECK_EQ_INT(amk_program_save(p, path, &d), AMK_OK);
    disk = slurp(path, &n);
    w1 = write_prog(p);
    CHECK(disk && w1 && strcmp(disk, w1) == 0);
    CHECK_EQ_INT(amk_program_load_file(path, &q, &d), AMK_OK);
    w2 = q ? write_prog(q) : NULL;
    CHECK(w1 && w2 && strcmp(w1, w2) == 0);
    CHECK_EQ_INT(amk_program_save(p, "/nonexistent-dir/x.json", &d), AMK_ERR_IO);
    p->tasks[0].inputs[0] = 42;
    CHECK_EQ_INT(amk_program_save(p, path, &d), AMK_ERR_INVALID_ARG);
    CHECK(d.message[0] != 0);
    CHECK_EQ_INT(amk_program_save(NULL, path, &d), AMK_ERR_INVALID_ARG);
    unlink(path);
    free(disk);
    amk_free(w1);
    amk_free(w2);
    amk_program_free(p);
    amk_program_free(q);
}

/* amk_file_read / amk_file_write: bytes round trip (NUL inside, NUL after), empty files, and the
   errors: a missing file, a directory, an unwritable path, NULL arguments. */
static void test_file_read_write(void) {
    char path[] = "/tmp/amk_test_file_XXXXXX";
    int fd = mkstemp(path);
    amk_diag d;
    char *data = NULL;
    size_t n = 99;
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_file_write(path, "abc\0def", 7, &d), AMK_OK);
    CHECK_EQ_INT(amk_file_read(path, &data, &n, &d), AMK_OK);
    CHECK_EQ_INT(n, 7);
    CHECK(data && memcmp(data, "abc\0def", 8) == 0);
    amk_free(data);
    CHECK_EQ_INT(amk_file_write(path, NULL, 0, &d), AMK_OK);
    CHECK_EQ_INT(amk_file_read(path, &data, &n, &d), AMK_OK);
    CHECK(n == 0 && data && data[0] == 0);
    amk_free(data);
    unlink(path);
    CHECK_EQ_INT(amk_file_read(path, &data, &n, &d), AMK_ERR_IO);
    CHECK(data == NULL && n == 0 && strstr(d.message, path) != NULL);
    CHECK_EQ_INT(amk_file_read("/tmp", &data, &n, &d), AMK_ERR_IO);
    CHECK(strstr(d.message, "not a regular file") != NULL);
    CHECK_EQ_INT(amk_file_write("/nonexistent-dir/x.bin", "a", 1, &d), AMK_ERR_IO);
    CHECK(strstr(d.message, "/nonexistent-dir/x.bin") != NULL);
    CHECK_EQ_INT(amk_file_read(NULL, &data, &n, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_file_read(path, NULL, &n, NULL), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_file_read(path, &data, NULL, NULL), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_file_write(NULL, "a", 1, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_file_write(path, NULL, 1, &d), AMK_ERR_INVALID_ARG);
    CHECK(access(path, F_OK) != 0); /* a refused write creates nothing */
}

int main(void) {
    RUN(test_dom_values);
    RUN(test_dom_numbers);
    RUN(test_dom_numbers_locale);
    RUN(test_dom_strings);
    RUN(test_dom_errors);
    RUN(test_dom_depth);
    RUN(test_dom_dup_keys);
    RUN(test_dom_put_value);
    RUN(test_fmt_real);
    RUN(test_golden_roundtrip);
    RUN(test_golden_values);
    RUN(test_spec_style);
    RUN(test_bad_corpus);
    RUN(test_truncation_sweep);
    RUN(test_versions);
    RUN(test_load_args);
    RUN(test_big_meta);
    RUN(test_write_builder);
    RUN(test_block_dtype_roundtrip);
    RUN(test_write_refuses);
    RUN(test_save_and_load_file);
    RUN(test_file_read_write);
    TEST_SUMMARY();
}
