/* ==== >>model: Llama models from GGUF or safetensors + config.json, behind one interface ======= */
/* Included twice from amk.h: once with AMK__PART_DECL defined (public declarations, inside
   extern "C"), once with AMK__PART_IMPL defined (the implementation). */
#ifdef AMK__PART_DECL

/* The hyper-parameters of a Llama-architecture model (REFERENCE.md §1.5, §2.3, §3). */
typedef struct amk_llama_config {
    char arch[32];             /* "llama" */
    char name[128];
    int n_layers, hidden, intermediate, n_heads, n_kv_heads, head_dim, vocab, max_pos;
    float rms_eps, rope_theta;
    int rope_llama3;           /* 1: llama3 scaling with the four fields below */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_ctx;
    int tie_embeddings;        /* 1: the LM head is the embedding table */
    int bos_id, eos_ids[4], n_eos; /* bos_id -1 when unknown */
    int attention_bias, mlp_bias; /* unsupported when 1: open fails with AMK_ERR_UNSUPPORTED */
} amk_llama_config;

/* An open model: its config and its weights, read by HF name whatever the file format. */
typedef struct amk_model amk_model;

/* Opens a model: a .gguf file (found by its magic); a .safetensors file (config.json beside it);
   a directory with config.json and model.safetensors or model.safetensors.index.json (sharded);
   or an index file. Checks the config (AMK_ERR_UNSUPPORTED for another architecture, biases,
   RoPE scaling other than llama3, or a hidden_act other than silu) and that every weight of the
   config exists with its shape (AMK_ERR_NOT_FOUND / AMK_ERR_MISMATCH, naming the tensor). Files
   stay mapped until amk_model_close. */
AMK_API amk_result amk_model_open(const char *path, amk_model **out, amk_diag *d);
/* Closes m and unmaps its files. NULL is fine. */
AMK_API void amk_model_close(amk_model *m);
AMK_API const amk_llama_config *amk_model_config(const amk_model *m);
AMK_API const amk_gguf *amk_model_gguf(const amk_model *m); /* NULL unless a GGUF (tokenizer uses it) */
AMK_API const char *amk_model_dir(const amk_model *m);      /* directory of the model files */
/* Weight by its HF name ("model.layers.3.self_attn.q_proj.weight", "model.embed_tokens.weight",
   "model.norm.weight", "lm_head.weight"), with HF shape [out, in] (rank 1 for norms; unused
   entries 1). For GGUF the name is mapped (REFERENCE §1.6) and the Q/K row permutation is UNDONE
   (§1.7 option (b), with n_heads for q and n_kv_heads for k) so the result equals the HF tensor;
   lm_head falls back to the embedding when tied/absent. AMK_ERR_NOT_FOUND names a missing one. */
AMK_API amk_result amk_model_tensor_shape(amk_model *m, const char *hf_name, int *rank, int64_t shape[4], amk_diag *d);
/* Converts/dequantizes into dst (dst_bytes must equal numel * dtype size) as dtype F32, F16 or BF16. */
AMK_API amk_result amk_model_tensor_read(amk_model *m, const char *hf_name, int dtype, void *dst, size_t dst_bytes, amk_diag *d);

#endif /* AMK__PART_DECL */

#ifdef AMK__PART_IMPL

struct amk_model {
    amk_llama_config cfg;
    char *dir;                       /* directory of the model files */
    amk_gguf *gguf;                  /* a GGUF model, else NULL */
    amk_safetensors *shards; int n_shards; /* a safetensors model */
};

/* A weight located in the files: what amk_model_tensor_read needs. */
typedef struct amk__model_src {
    uint32_t type;         /* ggml type of the stored data (F32/F16/BF16 for safetensors) */
    int rank;
    int64_t shape[4];      /* HF order, unused entries 1 */
    const void *data;
    uint64_t nbytes;
    int perm_heads;        /* GGUF attn_q/attn_k: un-permute rows within this many heads; 0 none */
} amk__model_src;

/* HF per-layer suffix -> GGUF per-layer suffix (REFERENCE §1.6); perm: 1 q (n_heads), 2 k. */
static const struct amk__model_layer_name { const char *hf, *gguf; int perm; } amk__model_layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0},
    {"self_attn.q_proj.weight", "attn_q.weight", 1},
    {"self_attn.k_proj.weight", "attn_k.weight", 2},
    {"self_attn.v_proj.weight", "attn_v.weight", 0},
    {"self_attn.o_proj.weight", "attn_output.weight", 0},
    {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
    {"mlp.up_proj.weight", "ffn_up.weight", 0},
    {"mlp.down_proj.weight", "ffn_down.weight", 0},
};
#define AMK__MODEL_N_LAYER_NAMES ((int)(sizeof amk__model_layer_names / sizeof amk__model_layer_names[0]))

/* The GGUF name of an HF name into out (0 if it has none); *perm as in the table. */
AMK__FN int amk__model_gguf_name(const char *hf, char *out, size_t size, int *perm) {
    static const char *const globals[3][2] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                              {"model.norm.weight", "output_norm.weight"},
                                              {"lm_head.weight", "output.weight"}};
    const char *p;
    int i, nd = 0;
    *perm = 0;
    for (i = 0; i < 3; i++)
        if (strcmp(hf, globals[i][0]) == 0) { snprintf(out, size, "%s", globals[i][1]); return 1; }
    if (strncmp(hf, "model.layers.", 13) != 0) return 0;
    p = hf + 13;
    while (p[nd] >= '0' && p[nd] <= '9') nd++;
    /* why: 9 digits keep the layer index inside int; a leading 0 would alias another layer */
    if (nd == 0 || nd > 9 || p[nd] != '.' || (p[0] == '0' && nd > 1)) return 0;
    for (i = 0; i < AMK__MODEL_N_LAYER_NAMES; i++)
        if (strcmp(p + nd + 1, amk__model_layer_names[i].hf) == 0) {
            snprintf(out, size, "blk.%.*s.%s", nd, p, amk__model_layer_names[i].gguf);
            *perm = amk__model_layer_names[i].perm;
            return 1;
        }
    return 0;
}

/* Locates hf_name: GGUF via the name map, safetensors by name in every shard; lm_head falls back
   to the embedding. */
AMK__FN amk_result amk__model_find(const amk_model *m, const char *hf_name, amk__model_src *s,
                                   amk_diag *d) {
    int k;
    memset(s, 0, sizeof *s);
    for (k = 0; k < 4; k++) s->shape[k] = 1;
    if (!hf_name) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: tensor name is NULL");
    if (m->gguf) {
        char gname[96] = "";
        int perm;
        const amk_gguf_tensor *t = NULL;
        if (amk__model_gguf_name(hf_name, gname, sizeof gname, &perm)) {
            t = amk_gguf_find_tensor(m->gguf, gname);
            if (!t && strcmp(hf_name, "lm_head.weight") == 0)
                t = amk_gguf_find_tensor(m->gguf, "token_embd.weight");
        }
        if (!t)
            return amk__fail(d, AMK_ERR_NOT_FOUND, "model has no tensor '%s'%s%s%s", hf_name,
                             gname[0] ? " (GGUF '" : "", gname[0] ? gname : "", gname[0] ? "')" : "");
        s->type = t->type;
        s->rank = t->n_dims;
        for (k = 0; k < t->n_dims; k++) s->shape[k] = t->dims[t->n_dims - 1 - k];
        s->data = t->data;
        s->nbytes = t->nbytes;
        s->perm_heads = perm == 1 ? m->cfg.n_heads : perm == 2 ? m->cfg.n_kv_heads : 0;
        return AMK_OK;
    }
    {
        const amk_st_tensor *t = NULL;
        for (k = 0; k < m->n_shards && !t; k++) t = amk_safetensors_find(&m->shards[k], hf_name);
        if (!t && strcmp(hf_name, "lm_head.weight") == 0)
            for (k = 0; k < m->n_shards && !t; k++)
                t = amk_safetensors_find(&m->shards[k], "model.embed_tokens.weight");
        if (!t) return amk__fail(d, AMK_ERR_NOT_FOUND, "model has no tensor '%s'", hf_name);
        if (t->dtype == AMK_DTYPE_F32) s->type = AMK_GGML_F32;
        else if (t->dtype == AMK_DTYPE_F16) s->type = AMK_GGML_F16;
        else if (t->dtype == AMK_DTYPE_BF16) s->type = AMK_GGML_BF16;
        else
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, "
                             "F16 or BF16)", hf_name, t->dtype_name);
        if (t->rank > 4)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s': rank %d (at most 4)", hf_name,
                             t->rank);
        s->rank = t->rank;
        for (k = 0; k < t->rank; k++) s->shape[k] = t->shape[k];
        s->data = t->data;
        s->nbytes = t->nbytes;
        return AMK_OK;
    }
}

AMK_API amk_result amk_model_tensor_shape(amk_model *m, const char *hf_name, int *rank,
                                          int64_t shape[4], amk_diag *d) {
    amk__model_src s;
    amk_result r;
    int k;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL model");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    if (rank) *rank = s.rank;
    if (shape)
        for (k = 0; k < 4; k++) shape[k] = s.shape[k];
    return AMK_OK;
}

AMK_API amk_result amk_model_tensor_read(amk_model *m, const char *hf_name, int dtype, void *dst,
                                         size_t dst_bytes, amk_diag *d) {
    amk__model_src s;
    amk_result r;
    int64_t numel = 1, want;
    int k;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL model");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    if (dtype != AMK_DTYPE_F32 && dtype != AMK_DTYPE_F16 && dtype != AMK_DTYPE_BF16)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%s': cannot read as %s (F32, F16 or "
                         "BF16)", hf_name, amk_dtype_name(dtype));
    for (k = 0; k < s.rank; k++)
        if (!amk__mul_i64(numel, s.shape[k], &numel))
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': element count overflows", hf_name);
    want = amk_dtype_nbytes(dtype, numel);
    if (want < 0 || (uint64_t)want != (uint64_t)dst_bytes)
        return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s': %lld elements as %s need %lld bytes, "
                         "the destination has %llu", hf_name, (long long)numel,
                         amk_dtype_name(dtype), (long long)want, (unsigned long long)dst_bytes);
    if (!s.perm_heads) return amk_gguf_dequant(s.type, s.data, s.nbytes, numel, dtype, dst, d);
    {
        /* undo the converter's Q/K row permutation (REFERENCE §1.7 (b)): within each head of hd
           rows, HF row j < hd/2 is GGUF row 2j and HF row j + hd/2 is GGUF row 2j + 1 */
        int64_t rows = s.shape[0], row_len = s.shape[1], hd, row;
        uint64_t row_bytes;
        size_t out_row = (size_t)amk_dtype_nbytes(dtype, row_len);
        if (s.rank != 2 || rows % s.perm_heads != 0 || (rows / s.perm_heads) % 2 != 0)
            return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s': %lld rows do not split into %d "
                             "heads of an even size", hf_name, (long long)rows, s.perm_heads);
        hd = rows / s.perm_heads;
        row_bytes = s.nbytes / (uint64_t)rows;
        for (row = 0; row < rows; row++) {
            int64_t h = row / hd, j = row % hd;
            int64_t src = h * hd + (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
            r = amk_gguf_dequant(s.type, (const uint8_t *)s.data + (uint64_t)src * row_bytes,
                                 row_bytes, row_len, dtype, (uint8_t *)dst + (size_t)row * out_row, d);
            if (r != AMK_OK) return r;
        }
        return AMK_OK;
    }
}

/* ---- config from GGUF metadata (REFERENCE §1.5) ----------------------------------------------- */

/* Reads an integer key into [lo, hi]; absent: *out = dflt, or an error when required. */
AMK__FN amk_result amk__model_gguf_int(const amk_gguf *g, const char *key, int required, int dflt,
                                       int lo, int hi, int *out, amk_diag *d) {
    int64_t v;
    if (amk_gguf_find_key(g, key) < 0) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the key '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (!amk_gguf_get_int(g, key, &v))
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is not an integer", key);
    if (v < lo || v > hi)
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is %lld (must be in [%d, %d])", key,
                         (long long)v, lo, hi);
    *out = (int)v;
    return AMK_OK;
}
AMK__FN amk_result amk__model_gguf_float(const amk_gguf *g, const char *key, int required,
                                         float dflt, float *out, amk_diag *d) {
    double v;
    if (amk_gguf_find_key(g, key) < 0) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the key '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (!amk_gguf_get_float(g, key, &v))
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is not a number", key);
    *out = (float)v;
    return AMK_OK;
}

AMK__FN amk_result amk__model_config_gguf(const amk_gguf *g, amk_llama_config *c, amk_diag *d) {
    const char *arch = amk_gguf_get_string(g, "general.architecture", NULL), *s;
    const amk_gguf_tensor *emb = amk_gguf_find_tensor(g, "token_embd.weight");
    amk_result r;
    int64_t ntok;
    int has_freqs = amk_gguf_find_tensor(g, "rope_freqs.weight") != NULL, i;
    static const char *const eos_keys[3] = {"tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    if (!arch) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the string 'general.architecture'");
    if (strcmp(arch, "llama") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "architecture '%.100s' is not supported (only "
                         "llama)", arch);
    snprintf(c->arch, sizeof c->arch, "llama");
    if ((s = amk_gguf_get_string(g, "general.name", NULL)) != NULL)
        snprintf(c->name, sizeof c->name, "%s", s);
    if ((r = amk__model_gguf_int(g, "llama.block_count", 1, 0, 1, INT_MAX, &c->n_layers, d)) ||
        (r = amk__model_gguf_int(g, "llama.embedding_length", 1, 0, 1, INT_MAX, &c->hidden, d)) ||
        (r = amk__model_gguf_int(g, "llama.feed_forward_length", 1, 0, 1, INT_MAX, &c->intermediate, d)) ||
        (r = amk__model_gguf_int(g, "llama.attention.head_count", 1, 0, 1, INT_MAX, &c->n_heads, d)) ||
        (r = amk__model_gguf_int(g, "llama.attention.head_count_kv", 0, c->n_heads, 1, INT_MAX, &c->n_kv_heads, d)) ||
        (r = amk__model_gguf_int(g, "llama.context_length", 1, 0, 1, INT_MAX, &c->max_pos, d)) ||
        (r = amk__model_gguf_float(g, "llama.attention.layer_norm_rms_epsilon", 1, 0, &c->rms_eps, d)) ||
        (r = amk__model_gguf_float(g, "llama.rope.freq_base", 0, 10000.0f, &c->rope_theta, d)))
        return r;
    /* head_dim: rope.dimension_count, else attention.key_length, else hidden / heads */
    if ((r = amk__model_gguf_int(g, "llama.attention.key_length", 0, c->hidden / c->n_heads, 1,
                                 INT_MAX, &c->head_dim, d)) ||
        (r = amk__model_gguf_int(g, "llama.rope.dimension_count", 0, c->head_dim, 1, INT_MAX,
                                 &c->head_dim, d)))
        return r;
    /* vocab: llama.vocab_size, else the token list, else the embedding's rows */
    ntok = amk_gguf_array_len(g, "tokenizer.ggml.tokens", NULL);
    if (ntok < 0 && emb) ntok = emb->n_dims == 2 ? emb->dims[1] : -1;
    if (ntok > INT_MAX) ntok = -1;
    if ((r = amk__model_gguf_int(g, "llama.vocab_size", ntok < 1, (int)ntok, 1, INT_MAX, &c->vocab, d)))
        return r;
    /* RoPE scaling: only llama3 (rope_freqs.weight or scaling.type "llama3") */
    s = amk_gguf_get_string(g, "llama.rope.scaling.type", NULL);
    if (s && strcmp(s, "none") != 0 && strcmp(s, "llama3") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "RoPE scaling '%.100s' is not supported (only "
                         "llama3)", s);
    if (has_freqs || (s && strcmp(s, "llama3") == 0)) {
        static const char *const keys[3] = {"llama.rope.scaling.factor",
                                            "llama.rope.scaling.low_freq_factor",
                                            "llama.rope.scaling.high_freq_factor"};
        for (i = 0; i < 3; i++)
            if (amk_gguf_find_key(g, keys[i]) < 0)
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling (rope_freqs.weight) "
                                 "without the key '%s' is not supported yet", keys[i]);
        if (amk_gguf_find_key(g, "llama.rope.scaling.original_context_length") < 0)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling without the key "
                             "'llama.rope.scaling.original_context_length' is not supported yet");
        c->rope_llama3 = 1;
        if ((r = amk__model_gguf_float(g, keys[0], 1, 0, &c->rope_factor, d)) ||
            (r = amk__model_gguf_float(g, keys[1], 1, 0, &c->rope_low_freq_factor, d)) ||
            (r = amk__model_gguf_float(g, keys[2], 1, 0, &c->rope_high_freq_factor, d)) ||
            (r = amk__model_gguf_int(g, "llama.rope.scaling.original_context_length", 1, 0, 1,
                                     INT_MAX, &c->rope_orig_ctx, d)))
            return r;
    }
    if ((r = amk__model_gguf_int(g, "tokenizer.ggml.bos_token_id", 0, -1, 0, INT_MAX, &c->bos_id, d)))
        return r;
    for (i = 0; i < 3; i++) {
        int id, k, seen = 0;
        if ((r = amk__model_gguf_int(g, eos_keys[i], 0, -1, 0, INT_MAX, &id, d))) return r;
        for (k = 0; k < c->n_eos; k++) seen |= c->eos_ids[k] == id;
        if (id >= 0 && !seen) c->eos_ids[c->n_eos++] = id;
    }
    c->tie_embeddings = amk_gguf_find_tensor(g, "output.weight") == NULL;
    c->attention_bias = amk_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->mlp_bias = amk_gguf_find_tensor(g, "blk.0.ffn_up.bias") != NULL;
    return AMK_OK;
}

/* ---- config from config.json (REFERENCE §2.3) ------------------------------------------------- */

AMK__FN amk_result amk__model_json_fail(amk_diag *d, const amk__jval *at, amk_result r,
                                        const char *fmt, const char *key) {
    if (d && at) { d->line = at->line; d->col = at->col; }
    return amk__fail(d, r, fmt, key);
}

/* An integer member in [lo, hi]; absent or null: dflt, or an error when required. */
AMK__FN amk_result amk__model_json_int(const amk__jval *o, const char *key, int required, int dflt,
                                       int lo, int hi, int *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "config.json lacks '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (v->type != AMK__J_INT)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be an integer", key);
    if (v->i < lo || v->i > hi)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' is out of range", key);
    *out = (int)v->i;
    return AMK_OK;
}
AMK__FN amk_result amk__model_json_float(const amk__jval *o, const char *key, float dflt,
                                         float *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) { *out = dflt; return AMK_OK; }
    if (v->type != AMK__J_INT && v->type != AMK__J_REAL)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be a number", key);
    *out = (float)v->f;
    return AMK_OK;
}
AMK__FN amk_result amk__model_json_bool(const amk__jval *o, const char *key, int *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) { *out = 0; return AMK_OK; }
    if (v->type != AMK__J_BOOL)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be true or false", key);
    *out = (int)v->i;
    return AMK_OK;
}
/* A string member, or NULL when absent or not a string. */
AMK__FN const char *amk__model_json_str(const amk__jval *o, const char *key) {
    const amk__jval *v = amk__json_get(o, key);
    return v && v->type == AMK__J_STRING ? v->s : NULL;
}

AMK__FN amk_result amk__model_config_json(const amk__jval *o, amk_llama_config *c, amk_diag *d) {
    const char *mt = amk__model_json_str(o, "model_type"), *s;
    const amk__jval *v, *rope;
    amk_result r;
    int i;
    if (!o || o->type != AMK__J_OBJECT)
        return amk__fail(d, AMK_ERR_PARSE, "config.json is not a JSON object");
    if (mt && strcmp(mt, "llama") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "model_type '%.100s' is not supported (only "
                         "llama)", mt);
    if (!mt) {
        const amk__jval *a = amk__json_get(o, "architectures");
        int ok = 0;
        for (i = 0; a && a->type == AMK__J_ARRAY && i < a->n; i++)
            ok |= a->items[i].type == AMK__J_STRING && strcmp(a->items[i].s, "LlamaForCausalLM") == 0;
        if (!ok)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "config.json names neither model_type 'llama' "
                             "nor the architecture LlamaForCausalLM");
    }
    snprintf(c->arch, sizeof c->arch, "llama");
    if ((s = amk__model_json_str(o, "_name_or_path")) != NULL) snprintf(c->name, sizeof c->name, "%s", s);
    s = amk__model_json_str(o, "hidden_act");
    if (s && strcmp(s, "silu") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "hidden_act '%.100s' is not supported (only silu)", s);
    if ((r = amk__model_json_int(o, "num_hidden_layers", 1, 0, 1, INT_MAX, &c->n_layers, d)) ||
        (r = amk__model_json_int(o, "hidden_size", 1, 0, 1, INT_MAX, &c->hidden, d)) ||
        (r = amk__model_json_int(o, "intermediate_size", 1, 0, 1, INT_MAX, &c->intermediate, d)) ||
        (r = amk__model_json_int(o, "num_attention_heads", 1, 0, 1, INT_MAX, &c->n_heads, d)) ||
        (r = amk__model_json_int(o, "num_key_value_heads", 0, c->n_heads, 1, INT_MAX, &c->n_kv_heads, d)) ||
        (r = amk__model_json_int(o, "head_dim", 0, c->hidden / c->n_heads, 1, INT_MAX, &c->head_dim, d)) ||
        (r = amk__model_json_int(o, "vocab_size", 1, 0, 1, INT_MAX, &c->vocab, d)) ||
        /* why: 2048 and 1e-6 are transformers' LlamaConfig defaults */
        (r = amk__model_json_int(o, "max_position_embeddings", 0, 2048, 1, INT_MAX, &c->max_pos, d)) ||
        (r = amk__model_json_float(o, "rms_norm_eps", 1e-6f, &c->rms_eps, d)) ||
        (r = amk__model_json_bool(o, "tie_word_embeddings", &c->tie_embeddings, d)) ||
        (r = amk__model_json_bool(o, "attention_bias", &c->attention_bias, d)) ||
        (r = amk__model_json_bool(o, "mlp_bias", &c->mlp_bias, d)) ||
        (r = amk__model_json_int(o, "bos_token_id", 0, -1, 0, INT_MAX, &c->bos_id, d)))
        return r;
    /* eos_token_id: an int, a list of up to 4, or null */
    v = amk__json_get(o, "eos_token_id");
    if (v && v->type == AMK__J_ARRAY) {
        if (v->n > 4)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "config.json: eos_token_id lists %d ids (at "
                             "most 4)", v->n);
        for (i = 0; i < v->n; i++) {
            if (v->items[i].type != AMK__J_INT || v->items[i].i < 0 || v->items[i].i > INT_MAX)
                return amk__model_json_fail(d, &v->items[i], AMK_ERR_PARSE, "config.json: '%s' "
                                            "must hold token ids", "eos_token_id");
            c->eos_ids[c->n_eos++] = (int)v->items[i].i;
        }
    } else {
        int id;
        if ((r = amk__model_json_int(o, "eos_token_id", 0, -1, 0, INT_MAX, &id, d))) return r;
        if (id >= 0) c->eos_ids[c->n_eos++] = id;
    }
    /* RoPE: rope_theta + rope_scaling, or (transformers v5) rope_parameters holding both */
    rope = amk__json_get(o, "rope_parameters");
    if (rope && rope->type != AMK__J_OBJECT && rope->type != AMK__J_NULL)
        return amk__model_json_fail(d, rope, AMK_ERR_PARSE, "config.json: '%s' must be an object",
                                    "rope_parameters");
    if (!rope || rope->type == AMK__J_NULL) {
        if ((r = amk__model_json_float(o, "rope_theta", 10000.0f, &c->rope_theta, d))) return r;
        rope = amk__json_get(o, "rope_scaling");
        if (rope && rope->type != AMK__J_OBJECT && rope->type != AMK__J_NULL)
            return amk__model_json_fail(d, rope, AMK_ERR_PARSE, "config.json: '%s' must be an "
                                        "object or null", "rope_scaling");
    } else {
        const amk__jval *t = amk__json_get(o, "rope_theta");
        if ((r = amk__model_json_float(rope, "rope_theta",
                                       t && (t->type == AMK__J_INT || t->type == AMK__J_REAL) ? (float)t->f : 10000.0f,
                                       &c->rope_theta, d)))
            return r;
    }
    if (rope && rope->type == AMK__J_OBJECT) {
        const char *rt = amk__model_json_str(rope, "rope_type");
        if (!rt) rt = amk__model_json_str(rope, "type");
        if (rt && strcmp(rt, "llama3") == 0) {
            static const char *const need[4] = {"factor", "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings"};
            for (i = 0; i < 4; i++)
                if (!amk__json_get(rope, need[i]))
                    return amk__fail(d, AMK_ERR_PARSE, "config.json: llama3 rope scaling lacks '%s'",
                                     need[i]);
            c->rope_llama3 = 1;
            if ((r = amk__model_json_float(rope, "factor", 0, &c->rope_factor, d)) ||
                (r = amk__model_json_float(rope, "low_freq_factor", 0, &c->rope_low_freq_factor, d)) ||
                (r = amk__model_json_float(rope, "high_freq_factor", 0, &c->rope_high_freq_factor, d)) ||
                (r = amk__model_json_int(rope, "original_max_position_embeddings", 1, 0, 1, INT_MAX,
                                         &c->rope_orig_ctx, d)))
                return r;
        } else if (rt && strcmp(rt, "default") != 0) {
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "RoPE scaling '%.100s' is not supported (only "
                             "llama3)", rt);
        }
    }
    return AMK_OK;
}

/* Rejects configs the Llama path cannot run or whose numbers are inconsistent. */
AMK__FN amk_result amk__model_check_config(const amk_llama_config *c, amk_diag *d) {
    if (c->attention_bias || c->mlp_bias)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "%s biases are not supported",
                         c->attention_bias ? "attention" : "MLP");
    if (c->n_heads % c->n_kv_heads != 0)
        return amk__fail(d, AMK_ERR_PARSE, "%d heads do not split into %d KV heads", c->n_heads,
                         c->n_kv_heads);
    if (c->head_dim < 2 || c->head_dim % 2 != 0)
        return amk__fail(d, AMK_ERR_PARSE, "head_dim %d is not a positive even number (RoPE "
                         "rotates pairs)", c->head_dim);
    if (!(c->rms_eps > 0.0f) || !(c->rope_theta > 0.0f) || c->rope_theta > FLT_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "rms_eps %g and rope_theta %g must be positive and "
                         "finite", (double)c->rms_eps, (double)c->rope_theta);
    if (c->rope_llama3 && !(c->rope_factor > 0.0f && c->rope_low_freq_factor > 0.0f &&
                            c->rope_high_freq_factor > c->rope_low_freq_factor))
        return amk__fail(d, AMK_ERR_PARSE, "llama3 RoPE scaling needs factor > 0 and "
                         "high_freq_factor > low_freq_factor > 0");
    return AMK_OK;
}

/* Checks that weight name exists with HF shape [rows] (cols 0) or [rows, cols] and a storage type
   the reader converts. */
AMK__FN amk_result amk__model_expect(const amk_model *m, const char *name, int64_t rows,
                                     int64_t cols, amk_diag *d) {
    amk__model_src s;
    amk_result r = amk__model_find(m, name, &s, d);
    char want[48], got[48];
    if (r != AMK_OK) return r;
    if (s.rank != (cols ? 2 : 1) || s.shape[0] != rows || (cols && s.shape[1] != cols)) {
        if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)rows);
        if (s.rank == 2) snprintf(got, sizeof got, "[%lld, %lld]", (long long)s.shape[0], (long long)s.shape[1]);
        else snprintf(got, sizeof got, "[%lld, ...] (rank %d)", (long long)s.shape[0], s.rank);
        return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s' has shape %s; the config implies %s",
                         name, got, want);
    }
    if (!amk__gguf_deq_for(s.type))
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s' is stored as %s, which cannot be "
                         "dequantized yet", name, amk_gguf_type_name(s.type));
    return AMK_OK;
}

/* Every weight the config implies must exist with its HF shape. */
AMK__FN amk_result amk__model_check_weights(const amk_model *m, amk_diag *d) {
    const amk_llama_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    /* [rows, cols] per entry of amk__model_layer_names, cols 0 for a vector */
    const int64_t shapes[AMK__MODEL_N_LAYER_NAMES][2] = {
        {c->hidden, 0}, {q, c->hidden}, {kv, c->hidden}, {kv, c->hidden}, {c->hidden, q},
        {c->hidden, 0}, {c->intermediate, c->hidden}, {c->intermediate, c->hidden},
        {c->hidden, c->intermediate}};
    char name[96];
    int layer, i;
    amk_result r;
    if ((r = amk__model_expect(m, "model.embed_tokens.weight", c->vocab, c->hidden, d)) ||
        (r = amk__model_expect(m, "model.norm.weight", c->hidden, 0, d)) ||
        (r = amk__model_expect(m, "lm_head.weight", c->vocab, c->hidden, d)))
        return r;
    for (layer = 0; layer < c->n_layers; layer++)
        for (i = 0; i < AMK__MODEL_N_LAYER_NAMES; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", layer, amk__model_layer_names[i].hf);
            if ((r = amk__model_expect(m, name, shapes[i][0], shapes[i][1], d))) return r;
        }
    return AMK_OK;
}

/* ---- opening ---------------------------------------------------------------------------------- */

AMK__FN char *amk__model_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)amk__malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}
AMK__FN char *amk__model_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
#ifdef _WIN32
    const char *bs = strrchr(path, '\\');
    if (bs && (!slash || bs > slash)) slash = bs;
#endif
    if (!slash) return amk__strdup(".");
    if (slash == path) return amk__strdup("/");
    return amk__strndup(path, (size_t)(slash - path));
}
AMK__FN int amk__model_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}
AMK__FN int amk__model_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Adds one more shard slot to m and opens path into it. */
AMK__FN amk_result amk__model_add_shard(amk_model *m, const char *path, amk_diag *d) {
    amk_safetensors *ns;
    amk_result r;
    ns = (amk_safetensors *)amk__realloc(m->shards, (size_t)(m->n_shards + 1) * sizeof *ns);
    if (!ns) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory opening '%s'", path);
    m->shards = ns;
    r = amk_safetensors_open(path, &m->shards[m->n_shards], d);
    if (r == AMK_OK) m->n_shards++;
    return r;
}

/* Opens every shard an index's weight_map names (each once) and checks each entry is there. */
AMK__FN amk_result amk__model_open_index(amk_model *m, const char *index_path, amk_diag *d) {
    char *text = NULL;
    size_t len;
    amk__jdoc doc;
    const amk__jval *map;
    const char **files = NULL;
    int n_files = 0, i, k;
    amk_result r = amk__read_file(index_path, &text, &len, d);
    if (r != AMK_OK) return r;
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) {
        amk__free(text);
        if (d) snprintf(d->path, sizeof d->path, "%s", index_path);
        return r;
    }
    map = amk__json_get(doc.root, "weight_map");
    if (!map || map->type != AMK__J_OBJECT || map->n == 0) {
        r = amk__fail(d, AMK_ERR_PARSE, "'%s': no weight_map object", index_path);
        goto done;
    }
    files = (const char **)amk__calloc((size_t)map->n, sizeof *files);
    if (!files) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); goto done; }
    for (i = 0; i < map->n && r == AMK_OK; i++) {
        const amk__jval *f = &map->items[i];
        char *p;
        if (f->type != AMK__J_STRING || f->slen == 0 || strlen(f->s) != f->slen || f->s[0] == '/' ||
            strstr(f->s, "..")) {
            r = amk__fail(d, AMK_ERR_PARSE, "'%s': weight_map['%.100s'] is not a plain file name",
                          index_path, map->keys[i]);
            break;
        }
        for (k = 0; k < n_files && strcmp(files[k], f->s) != 0; k++) {}
        if (k < n_files) continue;
        files[n_files++] = f->s;
        if (!(p = amk__model_join(m->dir, f->s))) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); break; }
        r = amk__model_add_shard(m, p, d);
        amk__free(p);
    }
    /* every entry must be in the shard the index names */
    for (i = 0; i < map->n && r == AMK_OK; i++) {
        for (k = 0; k < n_files && strcmp(files[k], map->items[i].s) != 0; k++) {}
        if (!amk_safetensors_find(&m->shards[k], map->keys[i]))
            r = amk__fail(d, AMK_ERR_NOT_FOUND, "'%s' maps tensor '%.150s' to '%.150s', which does "
                          "not hold it", index_path, map->keys[i], files[k]);
    }
done:
    amk__free(files);
    amk__json_free(&doc);
    amk__free(text);
    return r;
}

/* Reads dir/config.json into m->cfg. */
AMK__FN amk_result amk__model_read_config(amk_model *m, amk_diag *d) {
    char *path = amk__model_join(m->dir, "config.json"), *text = NULL;
    size_t len;
    amk__jdoc doc;
    amk_result r;
    if (!path) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    r = amk__read_file(path, &text, &len, d);
    if (r == AMK_OK) {
        r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
        if (r == AMK_OK) {
            r = amk__model_config_json(doc.root, &m->cfg, d);
            amk__json_free(&doc);
        }
        amk__free(text);
    }
    if (r != AMK_OK && d) {
        char msg[sizeof d->message];
        memcpy(msg, d->message, sizeof msg);
        amk__fail(d, r, "'%s': %s", path, msg);
        snprintf(d->path, sizeof d->path, "%s", path);
    }
    amk__free(path);
    return r;
}

AMK__FN amk_result amk__model_open_files(amk_model *m, const char *path, amk_diag *d) {
    char *p = amk__model_join(path, "config.json");
    unsigned char magic[4] = {0, 0, 0, 0};
    FILE *f;
    amk_result r;
    int is_dir;
    if (!p) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    is_dir = amk__model_exists(p); /* why: portable: a directory is a path with config.json in it */
    amk__free(p);
    if (is_dir) {
        if (!(m->dir = amk__strdup(path))) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if ((r = amk__model_read_config(m, d)) != AMK_OK) return r;
        if (!(p = amk__model_join(path, "model.safetensors.index.json")))
            return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if (amk__model_exists(p)) {
            r = amk__model_open_index(m, p, d);
        } else {
            amk__free(p);
            if (!(p = amk__model_join(path, "model.safetensors")))
                return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
            r = amk__model_add_shard(m, p, d);
        }
        amk__free(p);
        return r;
    }
    if (!(f = fopen(path, "rb")))
        return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fread(magic, 1, 4, f) != 4) magic[0] = 0;
    fclose(f);
    if (!(m->dir = amk__model_dirname(path))) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (memcmp(magic, "GGUF", 4) == 0) {
        if ((r = amk_gguf_open(path, &m->gguf, d)) != AMK_OK) return r;
        if ((r = amk__model_config_gguf(m->gguf, &m->cfg, d)) != AMK_OK && d) {
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s': %s", path, msg);
        }
        return r;
    }
    if ((r = amk__model_read_config(m, d)) != AMK_OK) return r;
    if (amk__model_ends_with(path, ".json")) return amk__model_open_index(m, path, d);
    return amk__model_add_shard(m, path, d);
}

AMK_API amk_result amk_model_open(const char *path, amk_model **out, amk_diag *d) {
    amk_model *m;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_model_open: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_model_open: path is NULL");
    m = (amk_model *)amk__calloc(1, sizeof *m);
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    m->cfg.bos_id = -1;
    r = amk__model_open_files(m, path, d);
    if (r == AMK_OK) {
        r = amk__model_check_config(&m->cfg, d);
        if (r == AMK_OK) r = amk__model_check_weights(m, d);
        if (r != AMK_OK && d) { /* the files parsed: name the model in what they lack */
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s': %s", path, msg);
            snprintf(d->path, sizeof d->path, "%s", path);
        }
    }
    if (r == AMK_OK && !m->gguf && !m->cfg.tie_embeddings) {
        /* an untied config without lm_head reads the embedding, as tied models do */
        int k, has = 0;
        for (k = 0; k < m->n_shards; k++) has |= amk_safetensors_find(&m->shards[k], "lm_head.weight") != NULL;
        m->cfg.tie_embeddings = !has;
    }
    if (r != AMK_OK) { amk_model_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API void amk_model_close(amk_model *m) {
    int k;
    if (!m) return;
    amk_gguf_close(m->gguf);
    for (k = 0; k < m->n_shards; k++) amk_safetensors_close(&m->shards[k]);
    amk__free(m->shards);
    amk__free(m->dir);
    amk__free(m);
}

AMK_API const amk_llama_config *amk_model_config(const amk_model *m) { return m ? &m->cfg : NULL; }
AMK_API const amk_gguf *amk_model_gguf(const amk_model *m) { return m ? m->gguf : NULL; }
AMK_API const char *amk_model_dir(const amk_model *m) { return m ? m->dir : NULL; }

#endif /* AMK__PART_IMPL */
