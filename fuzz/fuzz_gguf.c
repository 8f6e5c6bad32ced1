/* libFuzzer harness for the GGUF reader: parse; on success read every key and every array
   element, check every tensor lies inside the input and is found by name, dequantize the first
   block of each tensor (and whole small ones); then read the Llama config from the metadata and,
   when it and the weights check out, read every weight through the model layer (name mapping and
   the Q/K un-permutation) as amk_model_open would. */
#define AMK_IMPLEMENTATION
#include "../amk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch_metadata(const amk_gguf *g) {
    int i;
    for (i = 0; i < amk_gguf_n_kv(g); i++) {
        const char *key = amk_gguf_kv_key(g, i);
        uint32_t et = 0;
        int64_t n, k, iv;
        double fv;
        int bv;
        size_t len;
        int j;
        if (!key || amk_gguf_kv_type(g, i) > 12) abort();
        /* a key holding a NUL byte finds a shorter key, or none: check the types only for j == i */
        j = amk_gguf_find_key(g, key);
        if (j >= 0 && strcmp(amk_gguf_kv_key(g, j), key) != 0) abort();
        amk_gguf_get_int(g, key, &iv);
        amk_gguf_get_float(g, key, &fv);
        amk_gguf_get_bool(g, key, &bv);
        if (amk_gguf_get_string(g, key, &len) && j == i && amk_gguf_kv_type(g, i) != 8) abort();
        n = amk_gguf_array_len(g, key, &et);
        if (j == i && (n >= 0) != (amk_gguf_kv_type(g, i) == 9)) abort();
        for (k = 0; k < n; k++) {
            const char *s = amk_gguf_array_string(g, key, k, &len);
            volatile char sink;
            if (s && len) { sink = s[0]; sink = s[len - 1]; (void)sink; }
            amk_gguf_array_int(g, key, k, &iv);
            amk_gguf_array_float(g, key, k, &fv);
        }
    }
}

static void touch_tensors(const amk_gguf *g, const uint8_t *data, size_t size) {
    int i;
    for (i = 0; i < amk_gguf_n_tensors(g); i++) {
        const amk_gguf_tensor *t = amk_gguf_tensor_at(g, i);
        const uint8_t *p = (const uint8_t *)t->data;
        const amk__ggml_traits *tr = amk__ggml_type_traits(t->type);
        float y[256];
        uint16_t h[4096];
        int64_t numel = t->dims[0] * t->dims[1] * t->dims[2] * t->dims[3];
        if (!tr || p < data || t->nbytes > (uint64_t)(data + size - p)) abort(); /* outside */
        if (amk_gguf_find_tensor(g, t->name) != t) abort(); /* names are unique */
        if (t->n_dims < 1 || t->n_dims > 4) abort();
        if (amk__gguf_deq_for(t->type)) {
            if (amk_gguf_dequant(t->type, t->data, t->nbytes, tr->blck, AMK_DTYPE_F32, y, NULL) != AMK_OK) abort();
            if (numel <= 4096 &&
                amk_gguf_dequant(t->type, t->data, t->nbytes, numel, AMK_DTYPE_F16, h, NULL) != AMK_OK)
                abort();
        }
    }
}

/* The model layer over this GGUF, without a file: config, weight checks, every weight read. */
static void touch_model(amk_gguf *g) {
    amk_model m;
    amk_diag d;
    int i, l;
    memset(&m, 0, sizeof m);
    m.cfg.bos_id = -1;
    m.gguf = g;
    if (amk__model_config_gguf(g, &m.cfg, &d) != AMK_OK) return;
    if (amk__model_check_config(&m.cfg, &d) != AMK_OK) return;
    if (amk__model_check_weights(&m, &d) != AMK_OK) return;
    for (l = -1; l < m.cfg.n_layers; l++)
        for (i = 0; i < (l < 0 ? 3 : AMK__MODEL_N_LAYER_NAMES); i++) {
            static const char *const globals[3] = {"model.embed_tokens.weight", "model.norm.weight",
                                                   "lm_head.weight"};
            char name[96];
            int64_t shape[4], numel;
            int rank;
            void *buf;
            if (l < 0) snprintf(name, sizeof name, "%s", globals[i]);
            else snprintf(name, sizeof name, "model.layers.%d.%s", l, amk__model_layer_names[i].hf);
            if (amk_model_tensor_shape(&m, name, &rank, shape, &d) != AMK_OK) abort(); /* checked */
            numel = shape[0] * shape[1] * shape[2] * shape[3];
            buf = malloc((size_t)numel * 2);
            if (!buf) abort();
            if (amk_model_tensor_read(&m, name, AMK_DTYPE_BF16, buf, (size_t)numel * 2, &d) != AMK_OK) abort();
            free(buf);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    amk_gguf *g = NULL;
    if (amk_gguf_parse(data, size, &g, NULL) != AMK_OK) {
        if (g) abort();
        return 0;
    }
    touch_metadata(g);
    touch_tensors(g, data, size);
    touch_model(g);
    amk_gguf_close(g);
    return 0;
}
