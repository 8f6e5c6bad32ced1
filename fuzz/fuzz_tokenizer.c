/* libFuzzer harness for the tokenizer. Run from the repo root: LLVMFuzzerInitialize loads SmolLM2's
   tokenizer from tests/data/tokenizer/smollm2_tokenizer.json, and the Qwen2-style (NFC) and
   SentencePiece ones of tests/data/tokenizer/families. The first input byte picks a mode:
     0, 1  the rest is text: encode it (twice: counting, then writing), decode every id, and abort
           unless the bytes come back (less the byte values SmolLM2 has no token for); encode and
           decode it with the other two (ids in range, nothing more: NFC and the space prefix
           change the bytes); also run every pre-tokenizer alone and check its pieces tile the text;
     2     the rest is a tokenizer.json document: build a tokenizer from it, and if that works,
           encode the document itself with it and decode every id;
     3     the same with a tokenizer_config.json after the first NUL byte;
     4     the rest is a GGUF file: parse it and build a tokenizer from its tokenizer.ggml.* keys
           (mode = first byte % 5). */
#define AMK_IMPLEMENTATION
#include "../amk.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static amk_tokenizer *smol, *others[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    amk_diag d;
    (void)argc;
    (void)argv;
    if (amk_tokenizer_from_json("tests/data/tokenizer/families/qwen2/tokenizer.json", &others[0], &d) != AMK_OK ||
        amk_tokenizer_from_json("tests/data/tokenizer/families/spm/tokenizer.json", &others[1], &d) != AMK_OK ||
        amk_tokenizer_from_json("tests/data/tokenizer/smollm2_tokenizer.json", &smol, &d) != AMK_OK) {
        fprintf(stderr, "fuzz_tokenizer: run from the repo root (%s)\n", d.message);
        abort();
    }
    return 0;
}

/* Encodes text with t and decodes every id into back; returns the byte count, -1 if encode failed. */
static long encode_decode(const amk_tokenizer *t, const char *text, size_t len, char **back) {
    int n = amk_tokenizer_encode(t, text, len, 0, NULL, 0), m, i, nv = amk_tokenizer_n_vocab(t);
    int *ids;
    size_t total = 0, cap = 0, tl;
    if (n < 0) return -1;
    ids = (int *)malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!ids) return -1;
    m = amk_tokenizer_encode(t, text, len, 0, ids, n);
    if (m != n) abort(); /* the count must not depend on cap */
    for (i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= nv || !amk_tokenizer_token_bytes(t, ids[i], &tl)) abort();
        cap += tl;
    }
    *back = (char *)malloc(cap ? cap : 1);
    for (i = 0; *back && i < n; i++) {
        int k = amk_tokenizer_decode(t, ids[i], *back + total, cap - total);
        if (k < 0) abort();
        total += (size_t)k;
    }
    free(ids);
    return *back ? (long)total : -1;
}

static void check_pieces(const char *text, size_t len) {
    size_t *ends = (size_t *)malloc((len ? len : 1) * sizeof(size_t));
    int p, n, i;
    for (p = 0; ends && p <= (int)AMK_PRETOK_METASPACE; p++) {
        n = amk_tokenizer_pretokenize((amk_pretok)p, text, len, ends, (int)len);
        if (n < 0 || (size_t)n > len || (len && ends[n - 1] != len) || (!len && n)) abort();
        for (i = 0; i < n; i++)
            if (ends[i] == 0 || (i && ends[i] <= ends[i - 1])) abort(); /* pieces are non-empty */
    }
    free(ends);
}

static void check_text(const char *text, size_t len) {
    char *back = NULL, *kept = (char *)malloc(len ? len : 1);
    size_t i, k = 0;
    long n;
    if (!kept) return;
    for (i = 0; i < len; i++)
        if (amk_tokenizer_byte_token(smol, (unsigned char)text[i]) >= 0) kept[k++] = text[i];
    n = encode_decode(smol, text, len, &back);
    if (n >= 0 && ((size_t)n != k || memcmp(back, kept, k) != 0)) abort(); /* no round trip */
    free(back);
    for (i = 0; i < 2; i++) {
        back = NULL;
        encode_decode(others[i], text, len, &back);
        free(back);
    }
    free(kept);
    check_pieces(text, len);
}

static void check_gguf(const char *data, size_t len) {
    amk_gguf *g = NULL;
    amk_tokenizer *t = NULL;
    amk_diag d;
    char *back = NULL;
    static const char text[] = "Hello <s> world 123 don't\n";
    if (amk_gguf_parse(data, len, &g, &d) != AMK_OK) return;
    if (amk_tokenizer_from_gguf(g, &t, &d) == AMK_OK) {
        encode_decode(t, text, sizeof text - 1, &back);
        free(back);
        amk_tokenizer_free(t);
    } else if (t) {
        abort();
    }
    amk_gguf_close(g);
}

static void check_json(const char *json, size_t len, const char *config, size_t config_len) {
    amk_tokenizer *t = NULL;
    amk_diag d;
    char *back = NULL;
    if (amk_tokenizer_from_json_text(json, len, config, config_len, &t, &d) != AMK_OK) {
        if (t) abort();
        return;
    }
    if (amk_tokenizer_bos(t) >= amk_tokenizer_n_vocab(t) || amk_tokenizer_eos(t) >= amk_tokenizer_n_vocab(t)) abort();
    encode_decode(t, json, len, &back);
    free(back);
    amk_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *rest = (const char *)data + 1;
    size_t n = size ? size - 1 : 0;
    if (size == 0) return 0;
    switch (data[0] % 5) {
    case 0:
    case 1: check_text(rest, n); break;
    case 2: check_json(rest, n, NULL, 0); break;
    case 4: check_gguf(rest, n); break;
    default: {
        const char *nul = (const char *)memchr(rest, 0, n);
        size_t jl = nul ? (size_t)(nul - rest) : n;
        check_json(rest, jl, nul ? nul + 1 : NULL, nul ? n - jl - 1 : 0);
        break;
    }
    }
    return 0;
}
