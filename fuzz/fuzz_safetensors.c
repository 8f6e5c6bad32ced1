/* libFuzzer harness for the safetensors reader: parse; on success touch every tensor's first and
   last byte (ASan flags any pointer outside the input) and check the parse's own promises.
   Two framings: an input that starts with '{' is a bare header (up to the first NUL byte; the
   rest is the data buffer) and gets its 8-byte length prepended here, so mutations of the JSON
   keep a consistent length; any other input is parsed as a whole file. */
#define AMK_IMPLEMENTATION
#include "../amk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_file(const uint8_t *data, size_t size) {
    amk_safetensors st;
    amk_diag d;
    volatile uint8_t sink = 0;
    int i;
    if (amk_safetensors_parse(data, size, &st, &d) != AMK_OK) return;
    for (i = 0; i < st.n_tensors; i++) {
        const amk_st_tensor *t = &st.tensors[i];
        const uint8_t *p = (const uint8_t *)t->data;
        if (p < data || t->nbytes > (uint64_t)(data + size - p)) abort(); /* outside the input */
        if (t->rank < 0 || t->rank > 8) abort();
        if (amk_safetensors_find(&st, t->name) != t) abort(); /* names are unique */
        if (t->nbytes) { sink ^= p[0]; sink ^= p[t->nbytes - 1]; }
    }
    for (i = 0; i < st.n_metadata; i++)
        if (!st.metadata[i].key || !st.metadata[i].json || st.metadata[i].json[0] != '"') abort();
    amk_safetensors_close(&st);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] == '{') {
        const uint8_t *nul = (const uint8_t *)memchr(data, 0, size);
        size_t hlen = nul ? (size_t)(nul - data) : size, rest = nul ? size - hlen - 1 : 0;
        uint8_t *file = (uint8_t *)malloc(8 + hlen + rest);
        int i;
        if (!file) return 0;
        for (i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
        memcpy(file + 8, data, hlen);
        if (rest) memcpy(file + 8 + hlen, nul + 1, rest);
        check_file(file, 8 + hlen + rest);
        free(file);
    } else {
        check_file(data, size);
    }
    return 0;
}
