/* safetensors: write/read round trips of every dtype AMK uses, metadata, and hand-made corrupt
   files (each must fail with AMK_ERR_PARSE and a message naming the tensor, never crash). */
#include "../amk.h"
#include "amk_test.h"
#include <stdint.h>

static char tmp_base[512]; /* argv[0]-based, so parallel builds in other dirs never collide */

/* A temp file name; four rotating buffers so a test can hold a few at once. */
static const char *tmp_path(const char *suffix) {
    static char bufs[4][600];
    static int next;
    char *buf = bufs[next++ & 3];
    snprintf(buf, sizeof bufs[0], "%s.%s", tmp_base, suffix);
    return buf;
}

static int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* A hand-made file: 8-byte length (header_len, or strlen(header) when ~0), header, data_len
   bytes of 0xAB. */
static unsigned char *make_file(const char *header, uint64_t header_len, size_t data_len, size_t *size) {
    size_t hl = strlen(header), i;
    unsigned char *buf = (unsigned char *)malloc(8 + hl + data_len + 1);
    if (header_len == ~(uint64_t)0) header_len = hl;
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)(header_len >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0xAB, data_len);
    *size = 8 + hl + data_len;
    return buf;
}

/* Parses a hand-made file; returns the result, message in d. */
static amk_result parse_made(const char *header, size_t data_len, amk_diag *d) {
    size_t size;
    unsigned char *buf = make_file(header, ~(uint64_t)0, data_len, &size);
    amk_safetensors st;
    amk_result r;
    amk_diag_clear(d);
    r = amk_safetensors_parse(buf, size, &st, d);
    if (r == AMK_OK) amk_safetensors_close(&st);
    free(buf);
    return r;
}

static void test_roundtrip_every_dtype(void) {
    static const int dtypes[] = {AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_BF16, AMK_DTYPE_F8E4M3,
                                 AMK_DTYPE_F8E5M2, AMK_DTYPE_I32, AMK_DTYPE_I8, AMK_DTYPE_U8, AMK_DTYPE_BOOL};
    static const char *st_names[] = {"F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I32", "I8", "U8", "BOOL"};
    enum { N = 9 };
    int64_t shapes[N][4] = {{0}};
    int ranks[N];
    amk_st_entry e[N + 1];
    char names[N][32];
    unsigned char data[N][2 * 3 * 4 * 5 * 4];
    int64_t zero_shape[2] = {0, 7};
    amk_safetensors st;
    amk_diag d;
    int i, j;
    const char *path = tmp_path("rt.safetensors");
    for (i = 0; i < N; i++) {
        ranks[i] = i % 5; /* ranks 0..4 across the dtypes */
        for (j = 0; j < ranks[i]; j++) shapes[i][j] = 2 + j;
        for (j = 0; j < (int)sizeof data[i]; j++) data[i][j] = (unsigned char)(i * 31 + j * 7);
        snprintf(names[i], sizeof names[i], "layer.%d.%s", i, st_names[i]);
        e[i].name = names[i];
        e[i].dtype = dtypes[i];
        e[i].rank = ranks[i];
        e[i].shape = shapes[i];
        e[i].data = data[i];
    }
    e[N].name = "empty"; /* a zero-size tensor */
    e[N].dtype = AMK_DTYPE_F32;
    e[N].rank = 2;
    e[N].shape = zero_shape;
    e[N].data = NULL;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_safetensors_write(path, e, N + 1, &d), AMK_OK);
    CHECK(!file_exists(tmp_path("rt.safetensors.tmp")));
    CHECK_EQ_INT(amk_safetensors_open(path, &st, &d), AMK_OK);
    CHECK_EQ_INT(st.n_tensors, N + 1);
    CHECK_EQ_INT(st.n_metadata, 0);
    if (st.n_tensors == N + 1) {
        const unsigned char *base = (const unsigned char *)st.map;
        uint64_t hlen = 0;
        for (j = 0; j < 8; j++) hlen |= (uint64_t)base[j] << (8 * j);
        CHECK_EQ_INT((8 + hlen) % 8, 0);                 /* data starts 8-byte aligned */
        CHECK(base[8 + hlen - 1] == '}' || base[8 + hlen - 1] == ' ');
        CHECK((const unsigned char *)st.tensors[0].data == base + 8 + hlen); /* consecutive */
        for (i = 0; i < N; i++) {
            const amk_st_tensor *t = &st.tensors[i];
            int64_t numel = 1;
            CHECK_STR(t->name, names[i]);                /* file order = given order */
            CHECK_EQ_INT(t->dtype, dtypes[i]);
            CHECK_STR(t->dtype_name, st_names[i]);
            CHECK_EQ_INT(t->rank, ranks[i]);
            for (j = 0; j < ranks[i]; j++) { CHECK_EQ_INT(t->shape[j], shapes[i][j]); numel *= shapes[i][j]; }
            CHECK_EQ_INT((int64_t)t->nbytes, amk_dtype_nbytes(dtypes[i], numel));
            CHECK(memcmp(t->data, data[i], (size_t)t->nbytes) == 0);
            if (i) CHECK((const unsigned char *)t->data ==
                         (const unsigned char *)st.tensors[i - 1].data + st.tensors[i - 1].nbytes);
            CHECK(amk_safetensors_find(&st, names[i]) == t);
        }
        CHECK_EQ_INT(st.tensors[N].nbytes, 0);
        CHECK_EQ_INT(st.tensors[N].rank, 2);
        CHECK_EQ_INT(st.tensors[N].shape[0], 0);
        CHECK_EQ_INT(st.tensors[N].shape[1], 7);
        CHECK(amk_safetensors_find(&st, "missing") == NULL);
        CHECK(amk_safetensors_find(&st, "layer.0") == NULL); /* exact names only */
    }
    amk_safetensors_close(&st);
    CHECK(st.tensors == NULL && st.n_tensors == 0);
    remove(path);
}

static void test_write_empty_and_values(void) {
    const char *path = tmp_path("empty.safetensors");
    float v[3] = {1.5f, -2.0f, 3.25f};
    int64_t shape[1] = {3};
    amk_st_entry e;
    amk_safetensors st;
    size_t size;
    unsigned char *bytes;
    CHECK_EQ_INT(amk_safetensors_write(path, NULL, 0, NULL), AMK_OK);
    bytes = amk_t_read_file(path, &size);
    CHECK_EQ_INT(size, 16); /* 8 + "{}" padded to 8 */
    if (bytes && size == 16) CHECK(memcmp(bytes + 8, "{}      ", 8) == 0);
    free(bytes);
    CHECK_EQ_INT(amk_safetensors_open(path, &st, NULL), AMK_OK);
    CHECK_EQ_INT(st.n_tensors, 0);
    amk_safetensors_close(&st);
    /* overwrite in place with real content; exact bytes of the header */
    e.name = "w"; e.dtype = AMK_DTYPE_F32; e.rank = 1; e.shape = shape; e.data = v;
    CHECK_EQ_INT(amk_safetensors_write(path, &e, 1, NULL), AMK_OK);
    bytes = amk_t_read_file(path, &size);
    {
        const char *want = "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}";
        size_t hl = strlen(want), padded = (8 + hl + 7) / 8 * 8 - 8;
        CHECK_EQ_INT(size, 8 + padded + 12);
        if (bytes && size == 8 + padded + 12) {
            CHECK_EQ_INT(bytes[0], padded);
            CHECK(memcmp(bytes + 8, want, hl) == 0);
            CHECK(memcmp(bytes + 8 + padded, v, 12) == 0);
        }
    }
    free(bytes);
    remove(path);
}

static void test_write_rejects(void) {
    const char *path = tmp_path("bad.safetensors");
    int64_t shape[2] = {2, 2}, neg[1] = {-1};
    unsigned char data[16] = {0};
    amk_st_entry e[2];
    amk_diag d;
    remove(path);
    e[0].name = "a"; e[0].dtype = AMK_DTYPE_F32; e[0].rank = 2; e[0].shape = shape; e[0].data = data;
    e[1] = e[0];
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, &d), AMK_ERR_INVALID_ARG); /* duplicate name */
    CHECK(strstr(d.message, "'a'") != NULL);
    e[1].name = "b";
    e[1].dtype = AMK_DTYPE_I4;                                     /* no safetensors dtype */
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "'b'") && strstr(d.message, "I4"));
    e[1].dtype = AMK_DTYPE_F32;
    e[1].shape = neg; e[1].rank = 1;
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, &d), AMK_ERR_INVALID_ARG);
    e[1].shape = shape; e[1].rank = 9;
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, &d), AMK_ERR_INVALID_ARG);
    e[1].rank = 2; e[1].data = NULL;                               /* 16 bytes but no data */
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, &d), AMK_ERR_INVALID_ARG);
    e[1].data = data; e[1].name = "__metadata__";
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, &d), AMK_ERR_INVALID_ARG);
    CHECK(!file_exists(path));
    CHECK(!file_exists(tmp_path("bad.safetensors.tmp")));
    /* a directory that does not exist: an I/O error, nothing left behind */
    snprintf(d.message, sizeof d.message, "x");
    CHECK_EQ_INT(amk_safetensors_write("/nonexistent-dir-amk/x.safetensors", e, 1, &d), AMK_ERR_IO);
    CHECK(strstr(d.message, "nonexistent-dir-amk") != NULL);
}

static void test_metadata_and_foreign_dtypes(void) {
    const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"q\":\"a\\\"b\"},"
                    "\"big\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                    "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[16,24]}}   ";
    size_t size;
    unsigned char *buf = make_file(h, ~(uint64_t)0, 24, &size);
    amk_safetensors st;
    amk_diag d;
    CHECK_EQ_INT(amk_safetensors_parse(buf, size, &st, &d), AMK_OK);
    CHECK_EQ_INT(st.n_metadata, 2);
    CHECK_EQ_INT(st.n_tensors, 2);
    if (st.n_metadata == 2) {
        CHECK_STR(st.metadata[0].key, "format");
        CHECK_STR(st.metadata[0].json, "\"pt\""); /* amk_meta keeps canonical JSON text */
        CHECK_STR(st.metadata[1].key, "q");
        CHECK_STR(st.metadata[1].json, "\"a\\\"b\"");
    }
    if (st.n_tensors == 2) {
        CHECK_EQ_INT(st.tensors[0].dtype, -1);
        CHECK_STR(st.tensors[0].dtype_name, "I64");
        CHECK_EQ_INT(st.tensors[0].nbytes, 16);
        CHECK(st.tensors[0].data == buf + size - 24);
        CHECK_EQ_INT(st.tensors[1].dtype, -1);
        CHECK_STR(st.tensors[1].dtype_name, "F64");
        CHECK_EQ_INT(st.tensors[1].rank, 0);
        CHECK_EQ_INT(st.tensors[1].nbytes, 8);
    }
    amk_safetensors_close(&st);
    free(buf);
}

static void test_holes_and_empty_tensors_accepted(void) {
    amk_diag d;
    /* a hole [0, 8) before the tensor is accepted (unused bytes harm nothing) */
    CHECK_EQ_INT(parse_made("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16]}}", 16, &d), AMK_OK);
    /* a zero-size tensor inside another's range occupies nothing */
    CHECK_EQ_INT(parse_made("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                            "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]}}", 8, &d), AMK_OK);
    /* unsorted offsets, adjacent ranges */
    CHECK_EQ_INT(parse_made("{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
                            "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8, &d), AMK_OK);
    CHECK_EQ_INT(parse_made("{}", 0, &d), AMK_OK);
    CHECK_EQ_INT(parse_made("{\"__metadata__\":{}}", 0, &d), AMK_OK);
}

typedef struct bad_case {
    const char *header;
    size_t data_len;
    const char *want; /* substring of the message */
} bad_case;

static void test_corrupt_headers(void) {
    static const bad_case cases[] = {
        {"{\"model.x.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,10]}}", 48,
         "tensor 'model.x.weight': data_offsets [0, 10] do not match shape [3, 4] of F32 (48 bytes)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 16, "overlap tensor 'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 15,
         "tensor 'a': data_offsets [0, 16] run past the data buffer (15 bytes)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,16]}}", 16,
         "tensor 'a': shape [4294967296, 4294967296, 16]"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}", 0,
         "tensor 'a': shape [2305843009213693952] of F64 overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,0]}}", 0,
         "tensor 'a': shape[0] is not an integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "tensor 'a': data_offsets [8, 0] end before"},
        {"{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': unknown dtype 'F33'"},
        {"{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'f32'"},
        {"{\"a\":{\"dtype\":\"F32\\u0000\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': unknown dtype"},
        {"{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': dtype is not a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': shape[0] is not an integer >= 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "tensor 'a': shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", 8, "tensor 'a': shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8, "tensor 'a': shape is not an array"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': rank 9 exceeds 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "tensor 'a': data_offsets is not [begin, end]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", 8, "tensor 'a': data_offsets is not"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":{\"b\":0}}}", 8, "tensor 'a': data_offsets is not"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor 'a': missing field 'data_offsets'"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': missing field 'dtype'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":{\"y\":[[[]]]}}}", 8,
         "tensor 'a': unknown field 'x'"},
        {"{\"a\":[1,2]}", 0, "tensor 'a': entry is not an object"},
        {"{\"a\":null}", 0, "tensor 'a': entry is not an object"},
        {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "NUL byte"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate key"},
        {"{\"__metadata__\":{\"format\":1}}", 0, "__metadata__ 'format' is not a string"},
        {"{\"__metadata__\":[\"format\"]}", 0, "__metadata__ is not an object"},
        {"[{\"a\":1}]", 0, "must start with '{'"},
        {" {}", 0, "must start with '{'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "safetensors header:"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "safetensors header:"},
        {"{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0, "safetensors header:"},
        {"{\"a\":\"\xff\"}", 0, "safetensors header:"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        amk_diag d;
        amk_result r = parse_made(cases[i].header, cases[i].data_len, &d);
        CHECK_MSG(r == AMK_ERR_PARSE, "case %d: result %d", (int)i, (int)r);
        CHECK_EQ_INT(d.result, AMK_ERR_PARSE);
        CHECK_MSG(strstr(d.message, cases[i].want) != NULL, "case %d: message '%s' lacks '%s'",
                  (int)i, d.message, cases[i].want);
    }
}

static void test_bad_lengths(void) {
    static const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
    unsigned char small[7] = {0};
    amk_safetensors st;
    amk_diag d;
    size_t size;
    unsigned char *buf;
    CHECK_EQ_INT(amk_safetensors_parse(small, sizeof small, &st, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "shorter than the 8-byte") != NULL);
    CHECK_EQ_INT(amk_safetensors_parse(NULL, 0, &st, &d), AMK_ERR_PARSE);
    /* header length beyond the file */
    buf = make_file(h, strlen(h) + 5, 4, &size);
    CHECK_EQ_INT(amk_safetensors_parse(buf, size, &st, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "runs past the end of the file") != NULL);
    free(buf);
    /* an absurd header length (more than the file, and more than the 100 MB cap) */
    buf = make_file(h, (uint64_t)1 << 62, 4, &size);
    CHECK_EQ_INT(amk_safetensors_parse(buf, size, &st, &d), AMK_ERR_PARSE);
    free(buf);
    buf = make_file(h, ~(uint64_t)0 - 1, 4, &size);
    CHECK_EQ_INT(amk_safetensors_parse(buf, size, &st, &d), AMK_ERR_PARSE);
    free(buf);
    buf = make_file("", 0, 0, &size);
    CHECK_EQ_INT(amk_safetensors_parse(buf, size, &st, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "not a JSON object") != NULL);
    free(buf);
    CHECK_EQ_INT(amk_safetensors_parse(small, sizeof small, NULL, &d), AMK_ERR_INVALID_ARG);
}

static void test_header_limit(void) {
    /* why: a header over 100 MB is refused even when the file is that large (the cap) */
    size_t size = 8 + 100000001u;
    unsigned char *buf = (unsigned char *)calloc(1, size);
    amk_safetensors st;
    amk_diag d;
    uint64_t n = 100000001u;
    int i;
    if (!buf) return;
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    buf[8] = '{';
    CHECK_EQ_INT(amk_safetensors_parse(buf, size, &st, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, "100 MB") != NULL);
    free(buf);
}

static void test_truncated_at_every_byte(void) {
    const char *path = tmp_path("trunc.safetensors");
    int64_t s1[2] = {2, 3}, s2[1] = {5};
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[5] = {1, 2, 3, 4, 5};
    amk_st_entry e[2];
    unsigned char *bytes;
    size_t size, cut;
    int failures = 0;
    e[0].name = "alpha"; e[0].dtype = AMK_DTYPE_F32; e[0].rank = 2; e[0].shape = s1; e[0].data = a;
    e[1].name = "beta"; e[1].dtype = AMK_DTYPE_BF16; e[1].rank = 1; e[1].shape = s2; e[1].data = b;
    CHECK_EQ_INT(amk_safetensors_write(path, e, 2, NULL), AMK_OK);
    bytes = amk_t_read_file(path, &size);
    CHECK(bytes != NULL && size > 40);
    for (cut = 0; bytes && cut < size; cut++) {
        /* a fresh copy of exactly cut bytes, so ASan sees any read past the end */
        unsigned char *copy = (unsigned char *)malloc(cut ? cut : 1);
        amk_safetensors st;
        amk_diag d;
        amk_result r;
        memcpy(copy, bytes, cut);
        r = amk_safetensors_parse(copy, cut, &st, &d);
        if (r != AMK_ERR_PARSE) failures++;
        if (r == AMK_OK) amk_safetensors_close(&st);
        free(copy);
    }
    CHECK_EQ_INT(failures, 0);
    if (bytes) {
        amk_safetensors st;
        CHECK_EQ_INT(amk_safetensors_parse(bytes, size, &st, NULL), AMK_OK);
        CHECK_EQ_INT(st.n_tensors, 2);
        amk_safetensors_close(&st);
    }
    free(bytes);
    remove(path);
}

static void test_open_errors_name_the_file(void) {
    const char *path = tmp_path("corrupt.safetensors");
    size_t size;
    unsigned char *buf = make_file("{\"w.q\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", ~(uint64_t)0, 12, &size);
    FILE *f = fopen(path, "wb");
    amk_safetensors st;
    amk_diag d;
    if (f) { fwrite(buf, 1, size, f); fclose(f); }
    free(buf);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_safetensors_open(path, &st, &d), AMK_ERR_PARSE);
    CHECK(strncmp(d.message, path, strlen(path)) == 0);
    CHECK(strstr(d.message, ": tensor 'w.q': data_offsets [0, 8] do not match shape [3] of F32 (12 bytes)") != NULL);
    CHECK_STR(d.path, path);
    CHECK(st.tensors == NULL && st.map == NULL);
    remove(path);
    CHECK_EQ_INT(amk_safetensors_open(path, &st, &d), AMK_ERR_IO);
    CHECK(strstr(d.message, path) != NULL);
    f = fopen(path, "wb"); /* an empty file */
    if (f) fclose(f);
    CHECK_EQ_INT(amk_safetensors_open(path, &st, &d), AMK_ERR_PARSE);
    CHECK(strstr(d.message, path) != NULL);
    remove(path);
}

int main(int argc, char **argv) {
    (void)argc;
    snprintf(tmp_base, sizeof tmp_base, "%s", argv[0]);
    RUN(test_roundtrip_every_dtype);
    RUN(test_write_empty_and_values);
    RUN(test_write_rejects);
    RUN(test_metadata_and_foreign_dtypes);
    RUN(test_holes_and_empty_tensors_accepted);
    RUN(test_corrupt_headers);
    RUN(test_bad_lengths);
    RUN(test_header_limit);
    RUN(test_truncated_at_every_byte);
    RUN(test_open_errors_name_the_file);
    TEST_SUMMARY();
}
