/* ==== >>llama: the Llama decode step as a program, text generation ============================ */
/* Included twice from amk.h: with AMK__PART_DECL (declarations) and AMK__PART_IMPL. */

#ifdef AMK__PART_DECL

/* How the decode step is built. */
typedef struct amk_llama_build_opts {
    int max_seq;      /* KV cache rows (the longest context); 0 = min(config max_pos, 4096) */
    int weight_dtype; /* dtype of the matrices and the embedding: F32 (default), BF16 or F16 */
    int act_dtype;    /* activations and KV cache: F32 (default), BF16 or F16 */
    int num_sms;      /* tiles are sized so each of this many SMs moves the same weight bytes */
    int kv_splits;    /* attention tiles along the KV length, 1..8 (merged by ATTENTION_COMBINE) */
} amk_llama_build_opts;

/* Defaults: max_seq 0 (auto), F32 weights and activations, 132 SMs (H100), 4 KV splits. */
AMK_API void amk_llama_build_opts_default(amk_llama_build_opts *o);

/* A named shape with its real hyper-parameters: "llama3-8b", "llama3.2-1b", "smollm2-135m". */
AMK_API amk_result amk_llama_config_preset(const char *name, amk_llama_config *cfg);
/* A config from an HF config.json alone (no weights needed): the random-weight mode uses it. */
AMK_API amk_result amk_llama_config_load_json(const char *path, amk_llama_config *cfg, amk_diag *d);

/* Builds the decode step of cfg (one token at position pos, KV cache persisted across steps):
   EMBED; per layer RMSNORM, Q/K/V GEMV tiles, ROPE, KV_APPEND, split-KV ATTENTION_TILE and
   ATTENTION_COMBINE, O tiles, ADD, RMSNORM, gate/up tiles, SILU_MUL, down tiles, ADD; final
   RMSNORM, LM-head tiles, SAMPLE_ARGMAX. Buffers: IO_INPUT "token" and "pos" (I32 [1]); WEIGHT
   buffers whose source is the HF tensor name (the LM head reads the embedding when tied);
   KV_CACHE "k_cache.L"/"v_cache.L" [max_seq, n_kv_heads, head_dim]; IO_OUTPUT "logits" (F32
   [1, vocab]) and "next_token" (I32 [1], the argmax). The program is not lowered yet (no SMs, no
   pages): amk_program_lower does that. meta["kv_window"] holds the rows per KV split. */
AMK_API amk_result amk_llama_build(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                   amk_program **out, amk_diag *d);

/* Sets the per-step params of a built step for position pos: KV_APPEND pos, and each
   ATTENTION_TILE's kv_len so the windows cover rows [0, pos]. AMK_ERR_RUNTIME if pos is outside
   the KV cache. (The "pos" input buffer is the caller's to write.) */
AMK_API amk_result amk_llama_set_pos(amk_program *p, int pos, amk_diag *d);

typedef enum amk_backend {
    AMK_BACKEND_AUTO = 0, /* the GPU when there is one, else the reference VM */
    AMK_BACKEND_CPU = 1,  /* the reference VM */
    AMK_BACKEND_CUDA = 2  /* the megakernel; fails without a GPU */
} amk_backend;

typedef struct amk_llm_opts {
    amk_llama_build_opts build;
    amk_backend backend;
    uint64_t random_seed; /* amk_llm_open_random: the weights' seed */
    /* The device VM image (amk_vm.cuh built by `make device`: a cubin, fatbin or PTX). Without one
       AUTO runs on the reference VM and CUDA fails. */
    const void *device_image;
    size_t device_image_size;
    double timeout_ms;    /* per GPU step; <= 0: 10 s */
    /* Called while weights load (what: "weights", done/total in bytes). May be NULL. */
    void (*progress)(void *user, const char *what, uint64_t done, uint64_t total);
    void *progress_user;
} amk_llm_opts;

/* A model ready to run: its config, its decode-step program, its weights on a backend, and its
   tokenizer (NULL for random weights). */
typedef struct amk_llm amk_llm;

AMK_API void amk_llm_opts_default(amk_llm_opts *o);
/* Opens a model file (see amk_model_open), builds, lowers and loads its decode step. */
AMK_API amk_result amk_llm_open(const char *model_path, const amk_llm_opts *o, amk_llm **out,
                                amk_diag *d);
/* The same program with random weights (uniform, scaled by 1/sqrt(fan-in); norms 1). */
AMK_API amk_result amk_llm_open_random(const amk_llama_config *cfg, const amk_llm_opts *o,
                                       amk_llm **out, amk_diag *d);
AMK_API void amk_llm_close(amk_llm *m);
AMK_API const amk_llama_config *amk_llm_config(const amk_llm *m);
AMK_API const amk_program *amk_llm_program(const amk_llm *m);
AMK_API const amk_tokenizer *amk_llm_tokenizer(const amk_llm *m);
AMK_API int amk_llm_max_seq(const amk_llm *m);
AMK_API const char *amk_llm_backend_name(const amk_llm *m); /* "cpu" or "cuda" */
/* Runs one decode step: token at position pos. *logits (may be NULL) points at vocab floats owned
   by m, valid until the next step; *argmax (may be NULL) gets the greedy token. Positions must
   be fed in order from 0 (the KV cache holds the earlier ones). */
AMK_API amk_result amk_llm_step(amk_llm *m, int token, int pos, const float **logits, int *argmax,
                                amk_diag *d);
/* The GPU backend's runtime (NULL on the reference VM): for timing and the timeline. */
AMK_API amk_cuda *amk_llm_cuda(amk_llm *m);
/* Zeroes the KV cache (a new conversation). */
AMK_API amk_result amk_llm_reset(amk_llm *m, amk_diag *d);

/* Sampling: temperature 0 is greedy; else softmax(logits / temperature) restricted to the top_k
   most likely (0 = all) and the smallest set whose probability reaches top_p (1 = all). */
typedef struct amk_sampler {
    float temperature;
    int top_k;
    float top_p;
    uint64_t state[4];
    int *scratch_idx; float *scratch_p; int scratch_n; /* internal */
} amk_sampler;
AMK_API void amk_sampler_init(amk_sampler *s, float temperature, int top_k, float top_p,
                              uint64_t seed);
AMK_API int amk_sampler_sample(amk_sampler *s, const float *logits, int n);
AMK_API void amk_sampler_free(amk_sampler *s);

#endif /* AMK__PART_DECL */

#ifdef AMK__PART_IMPL

AMK_API void amk_llama_build_opts_default(amk_llama_build_opts *o) {
    memset(o, 0, sizeof *o);
    o->weight_dtype = AMK_DTYPE_F32;
    o->act_dtype = AMK_DTYPE_F32;
    o->num_sms = 132; /* why: an H100 SXM has 132 SMs */
    o->kv_splits = 4;
}

AMK_API amk_result amk_llama_config_preset(const char *name, amk_llama_config *c) {
    if (!name || !c) return AMK_ERR_INVALID_ARG;
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "llama");
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rms_eps = 1e-5f;
    c->n_eos = 1;
    if (strcmp(name, "llama3-8b") == 0) { /* REFERENCE §3.3 */
        c->n_layers = 32; c->hidden = 4096; c->intermediate = 14336; c->n_heads = 32;
        c->n_kv_heads = 8; c->head_dim = 128; c->vocab = 128256; c->max_pos = 8192;
        c->rope_theta = 500000.0f; c->bos_id = 128000; c->eos_ids[0] = 128001;
        return AMK_OK;
    }
    if (strcmp(name, "llama3.2-1b") == 0) {
        c->n_layers = 16; c->hidden = 2048; c->intermediate = 8192; c->n_heads = 32;
        c->n_kv_heads = 8; c->head_dim = 64; c->vocab = 128256; c->max_pos = 131072;
        c->rope_theta = 500000.0f; c->rope_llama3 = 1; c->rope_factor = 32.0f;
        c->rope_low_freq_factor = 1.0f; c->rope_high_freq_factor = 4.0f; c->rope_orig_ctx = 8192;
        c->tie_embeddings = 1; c->bos_id = 128000; c->eos_ids[0] = 128001;
        return AMK_OK;
    }
    if (strcmp(name, "smollm2-135m") == 0) { /* REFERENCE §3.1 */
        c->n_layers = 30; c->hidden = 576; c->intermediate = 1536; c->n_heads = 9;
        c->n_kv_heads = 3; c->head_dim = 64; c->vocab = 49152; c->max_pos = 8192;
        c->rope_theta = 100000.0f; c->tie_embeddings = 1; c->bos_id = 1; c->eos_ids[0] = 2;
        return AMK_OK;
    }
    return AMK_ERR_NOT_FOUND;
}

AMK_API amk_result amk_llama_config_load_json(const char *path, amk_llama_config *cfg, amk_diag *d) {
    char *text = NULL;
    size_t len = 0;
    amk__jdoc doc;
    amk_result r;
    if (!path || !cfg) return AMK_ERR_INVALID_ARG;
    memset(cfg, 0, sizeof *cfg);
    r = amk__read_file(path, &text, &len, d);
    if (r != AMK_OK) return r;
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r == AMK_OK) {
        r = amk__model_config_json(doc.root, cfg, d);
        if (r == AMK_OK) r = amk__model_check_config(cfg, d);
        amk__json_free(&doc);
    }
    amk__free(text);
    if (r != AMK_OK && d && !strstr(d->message, path)) {
        char msg[sizeof d->message];
        memcpy(msg, d->message, sizeof msg);
        snprintf(d->message, sizeof d->message, "%.200s: %.300s", path, msg);
    }
    return r;
}

/* ---- the builder ---------------------------------------------------------------------------- */

typedef struct amk__lb {
    amk_program *p;
    const amk_llama_config *c;
    amk_llama_build_opts o;
    char name[160];
} amk__lb;

AMK__FN int amk__lb_buf(amk__lb *b, int kind, int dtype, int64_t d0, int64_t d1, int64_t d2,
                       int rank, const char *source, const char *fmt, ...) {
    int64_t shape[3];
    va_list ap;
    shape[0] = d0; shape[1] = d1; shape[2] = d2;
    va_start(ap, fmt);
    vsnprintf(b->name, sizeof b->name, fmt, ap);
    va_end(ap);
    return amk_program_add_buffer(b->p, b->name, (amk_buffer_kind)kind, (amk_dtype)dtype, rank,
                                  shape, kind == AMK_KIND_ACTIVATION ? AMK_SPACE_GLOBAL_SCRATCH
                                                                     : AMK_SPACE_HBM, source);
}

/* One task waiting for all producers of each listed counter (count in *_n). */
AMK__FN int amk__lb_task(amk__lb *b, int op, const int *ins, int n_in, int out, int counter,
                        const int *wait_c, const int *wait_n, int n_wait, int64_t est_bytes,
                        const char *label) {
    int t = amk_program_add_task(b->p, op, ins, n_in, &out, 1, counter, label), i;
    if (t < 0) return -1;
    for (i = 0; i < n_wait; i++) amk_task_add_wait(b->p, t, wait_c[i], wait_n[i]);
    b->p->tasks[t].est_bytes = est_bytes;
    return t;
}

/* Rows per tile so that the rows of one phase (matrices read together, same K) spread over the
   SMs: ceil(total_rows / num_sms). */
AMK__FN int amk__lb_tile_rows(int64_t total_rows, int num_sms) {
    int64_t r = (total_rows + num_sms - 1) / num_sms;
    return r < 1 ? 1 : (int)r;
}

/* GEMV tiles of W [N, K] over x into out; all signal counter; returns the tile count. */
AMK__FN int amk__lb_gemv(amk__lb *b, int x, int w, int out, int counter, int64_t N, int64_t K,
                        int rows, int wait_c, int wait_n, const char *what, int layer) {
    int n_tiles = 0;
    int64_t off;
    int wbytes = amk_dtype_bits(b->o.weight_dtype) / 8;
    for (off = 0; off < N; off += rows) {
        int64_t nt = N - off < rows ? N - off : rows;
        int ins[2], t;
        char label[64];
        ins[0] = x; ins[1] = w;
        snprintf(label, sizeof label, "L%d %s[%lld:%lld]", layer, what, (long long)off, (long long)(off + nt));
        t = amk__lb_task(b, AMK_OP_GEMV_TILE, ins, 2, out, counter, &wait_c, &wait_n, 1,
                         nt * K * wbytes, label);
        if (t < 0) return -1;
        amk_task_set_int(b->p, t, "K", K);
        amk_task_set_int(b->p, t, "N_tile", nt);
        amk_task_set_int(b->p, t, "n_off", off);
        n_tiles++;
    }
    return n_tiles;
}

AMK_API amk_result amk_llama_build(const amk_llama_config *c, const amk_llama_build_opts *opts,
                                   amk_program **out, amk_diag *d) {
    amk__lb b;
    amk_program *p;
    int L, H, I, NH, NKV, HD, V, S, max_seq, window, ad, wd;
    int token, pos, embed, lm_w, x, cx, t, i, one = 1;
    char meta[32];
    int64_t q_rows, kv_rows;
    *out = NULL;
    memset(&b, 0, sizeof b);
    if (opts) b.o = *opts; else amk_llama_build_opts_default(&b.o);
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: no config");
    L = c->n_layers; H = c->hidden; I = c->intermediate; NH = c->n_heads; NKV = c->n_kv_heads;
    HD = c->head_dim; V = c->vocab;
    if (L < 1 || H < 1 || I < 1 || NH < 1 || NKV < 1 || HD < 2 || HD % 2 || V < 1 || NH % NKV)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "llama build: bad shape (layers %d hidden %d ffn %d heads %d/%d head_dim %d vocab %d)",
                         L, H, I, NH, NKV, HD, V);
    max_seq = b.o.max_seq > 0 ? b.o.max_seq : (c->max_pos > 0 && c->max_pos < 4096 ? c->max_pos : 4096);
    S = b.o.kv_splits < 1 ? 1 : b.o.kv_splits > 8 ? 8 : b.o.kv_splits; /* why: COMBINE takes <= 8 */
    if (S > max_seq) S = max_seq;
    window = (max_seq + S - 1) / S;
    ad = b.o.act_dtype; wd = b.o.weight_dtype;
    if (!amk_dtype_is_float(ad) || !amk_dtype_is_float(wd) || b.o.num_sms < 1)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: dtypes must be float, num_sms >= 1");
    p = amk_program_create();
    if (!p) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    b.p = p; b.c = c;
    amk_program_set_meta_string(p, "model", c->name[0] ? c->name : "llama");
    amk_program_set_meta_string(p, "regime", "decode");
    amk_program_set_meta_string(p, "dtype", amk_dtype_name(wd));
    snprintf(meta, sizeof meta, "%d", window);
    amk_program_set_meta_string(p, "kv_window", meta);

    q_rows = (int64_t)NH * HD;
    kv_rows = (int64_t)NKV * HD;
    token = amk__lb_buf(&b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "token");
    pos = amk__lb_buf(&b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "pos");
    embed = amk__lb_buf(&b, AMK_KIND_WEIGHT, wd, V, H, 0, 2, "model.embed_tokens.weight", "model.embed_tokens.weight");
    x = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "x.0");
    cx = amk_program_add_counter(p, "embed done");
    {
        int ins[2];
        ins[0] = token; ins[1] = embed;
        t = amk__lb_task(&b, AMK_OP_EMBED, ins, 2, x, cx, NULL, NULL, 0, (int64_t)H * (amk_dtype_bits(wd) / 8), "embed");
        amk_task_set_int(p, t, "hidden", H);
    }
    for (i = 0; i < L; i++) {
        int w_an, w_q, w_k, w_v, w_o, w_fn, w_g, w_u, w_dn, kc, vc;
        int xn, q, k, v, qr, kr, attn, o, h, hn, g, u, a, dn, xo;
        int c_n1, c_q, c_k, c_v, c_qr, c_kr, c_ka, c_va, c_att, c_comb, c_o, c_h, c_n2, c_g, c_u, c_a, c_d, c_x;
        int n_q, n_k, n_v, n_o, n_g, n_u, n_d, rows, j, ins[8], parts[8];
        char src[128];
#define AMK__W(var, r0, r1, rank, fmt) \
        snprintf(src, sizeof src, fmt, i); \
        var = amk__lb_buf(&b, AMK_KIND_WEIGHT, (rank) == 1 ? AMK_DTYPE_F32 : wd, r0, r1, 0, rank, src, "%s", src)
        AMK__W(w_an, H, 0, 1, "model.layers.%d.input_layernorm.weight");
        AMK__W(w_q, q_rows, H, 2, "model.layers.%d.self_attn.q_proj.weight");
        AMK__W(w_k, kv_rows, H, 2, "model.layers.%d.self_attn.k_proj.weight");
        AMK__W(w_v, kv_rows, H, 2, "model.layers.%d.self_attn.v_proj.weight");
        AMK__W(w_o, H, q_rows, 2, "model.layers.%d.self_attn.o_proj.weight");
        AMK__W(w_fn, H, 0, 1, "model.layers.%d.post_attention_layernorm.weight");
        AMK__W(w_g, I, H, 2, "model.layers.%d.mlp.gate_proj.weight");
        AMK__W(w_u, I, H, 2, "model.layers.%d.mlp.up_proj.weight");
        AMK__W(w_dn, H, I, 2, "model.layers.%d.mlp.down_proj.weight");
#undef AMK__W
        kc = amk__lb_buf(&b, AMK_KIND_KV_CACHE, ad, max_seq, NKV, HD, 3, NULL, "k_cache.%d", i);
        vc = amk__lb_buf(&b, AMK_KIND_KV_CACHE, ad, max_seq, NKV, HD, 3, NULL, "v_cache.%d", i);
        xn = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "xn.%d", i);
        q = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "q.%d", i);
        k = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, kv_rows, 0, 2, NULL, "k.%d", i);
        v = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, kv_rows, 0, 2, NULL, "v.%d", i);
        qr = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "q_rot.%d", i);
        kr = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, kv_rows, 0, 2, NULL, "k_rot.%d", i);
        attn = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "attn.%d", i);
        o = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "o.%d", i);
        h = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "h.%d", i);
        hn = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "hn.%d", i);
        g = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, I, 0, 2, NULL, "gate.%d", i);
        u = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, I, 0, 2, NULL, "up.%d", i);
        a = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, I, 0, 2, NULL, "act.%d", i);
        dn = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "down.%d", i);
        xo = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "x.%d", i + 1);

        c_n1 = amk_program_add_counter(p, "attn norm");
        c_q = amk_program_add_counter(p, "q tiles"); c_k = amk_program_add_counter(p, "k tiles");
        c_v = amk_program_add_counter(p, "v tiles");
        c_qr = amk_program_add_counter(p, "rope q"); c_kr = amk_program_add_counter(p, "rope k");
        c_ka = amk_program_add_counter(p, "k append"); c_va = amk_program_add_counter(p, "v append");
        c_att = amk_program_add_counter(p, "attention tiles");
        c_comb = S > 1 ? amk_program_add_counter(p, "attention combine") : c_att;
        c_o = amk_program_add_counter(p, "o tiles"); c_h = amk_program_add_counter(p, "residual 1");
        c_n2 = amk_program_add_counter(p, "ffn norm");
        c_g = amk_program_add_counter(p, "gate tiles"); c_u = amk_program_add_counter(p, "up tiles");
        c_a = amk_program_add_counter(p, "silu mul"); c_d = amk_program_add_counter(p, "down tiles");
        c_x = amk_program_add_counter(p, "residual 2");

        { /* attention block */
            char label[64];
            ins[0] = x; ins[1] = w_an;
            snprintf(label, sizeof label, "L%d attn_norm", i);
            t = amk__lb_task(&b, AMK_OP_RMSNORM, ins, 2, xn, c_n1, &cx, &one, 1, (int64_t)H * 4, label);
            amk_task_set_real(p, t, "eps", c->rms_eps);
            amk_task_set_int(p, t, "hidden", H);
            rows = amk__lb_tile_rows(q_rows + 2 * kv_rows, b.o.num_sms);
            n_q = amk__lb_gemv(&b, xn, w_q, q, c_q, q_rows, H, rows, c_n1, 1, "q", i);
            n_k = amk__lb_gemv(&b, xn, w_k, k, c_k, kv_rows, H, rows, c_n1, 1, "k", i);
            n_v = amk__lb_gemv(&b, xn, w_v, v, c_v, kv_rows, H, rows, c_n1, 1, "v", i);
            if (n_q < 0 || n_k < 0 || n_v < 0) goto fail;
            /* why: K and V are ready before Q (fewer rows); their rope and appends come first in
               list order, so an SM that also holds rope q does not block them behind it */
            ins[0] = k; ins[1] = pos;
            snprintf(label, sizeof label, "L%d rope k", i);
            t = amk__lb_task(&b, AMK_OP_ROPE, ins, 2, kr, c_kr, &c_k, &n_k, 1, 0, label);
            if (t < 0) goto fail;
            amk_task_set_int(p, t, "head_dim", HD);
            amk_task_set_real(p, t, "theta", c->rope_theta);
            if (c->rope_llama3) {
                amk_task_set_real(p, t, "rope_factor", c->rope_factor);
                amk_task_set_real(p, t, "rope_low_freq_factor", c->rope_low_freq_factor);
                amk_task_set_real(p, t, "rope_high_freq_factor", c->rope_high_freq_factor);
                amk_task_set_int(p, t, "rope_orig_ctx", c->rope_orig_ctx);
            }
            ins[0] = kr; ins[1] = kc;
            snprintf(label, sizeof label, "L%d k append", i);
            j = amk__lb_task(&b, AMK_OP_KV_APPEND, ins, 2, kc, c_ka, &c_kr, &one, 1, 0, label);
            amk_task_set_int(p, j, "pos", 0);
            ins[0] = v; ins[1] = vc;
            snprintf(label, sizeof label, "L%d v append", i);
            j = amk__lb_task(&b, AMK_OP_KV_APPEND, ins, 2, vc, c_va, &c_v, &n_v, 1, 0, label);
            amk_task_set_int(p, j, "pos", 0);
            ins[0] = q; ins[1] = pos;
            snprintf(label, sizeof label, "L%d rope q", i);
            j = amk__lb_task(&b, AMK_OP_ROPE, ins, 2, qr, c_qr, &c_q, &n_q, 1, 0, label);
            if (j < 0) goto fail;
            { /* the same rope params as k */
                int pi;
                for (pi = 0; pi < p->tasks[t].n_params; pi++) {
                    const amk_param *pr = &p->tasks[t].params[pi];
                    if (pr->type == AMK_PARAM_INT) amk_task_set_int(p, j, pr->key, pr->i);
                    else amk_task_set_real(p, j, pr->key, pr->f);
                }
            }
            for (j = 0; j < S; j++) {
                int wc[3], wn[3], part;
                wc[0] = c_qr; wc[1] = c_ka; wc[2] = c_va; wn[0] = wn[1] = wn[2] = 1;
                part = S > 1 ? amk__lb_buf(&b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, NH, HD + 2, 0, 2, NULL, "attn_part.%d.%d", i, j)
                             : attn;
                parts[j] = part;
                ins[0] = qr; ins[1] = kc; ins[2] = vc;
                snprintf(label, sizeof label, "L%d attention[%d]", i, j);
                t = amk__lb_task(&b, AMK_OP_ATTENTION_TILE, ins, 3, part, c_att, wc, wn, 3,
                                 2LL * window * kv_rows * (amk_dtype_bits(ad) / 8), label);
                if (t < 0) goto fail;
                amk_task_set_int(p, t, "head_dim", HD);
                amk_task_set_int(p, t, "kv_start", (int64_t)j * window);
                amk_task_set_int(p, t, "kv_len", 0);
                amk_task_set_real(p, t, "scale", 1.0 / sqrt((double)HD));
                amk_task_set_int(p, t, "n_heads", NH);
                amk_task_set_int(p, t, "n_kv_heads", NKV);
                if (S > 1) amk_task_set_int(p, t, "flags", AMK_ATTN_FLAG_PARTIAL);
            }
            if (S > 1) {
                snprintf(label, sizeof label, "L%d attention combine", i);
                t = amk__lb_task(&b, AMK_OP_ATTENTION_COMBINE, parts, S, attn, c_comb, &c_att, &S, 1, 0, label);
                amk_task_set_int(p, t, "head_dim", HD);
            }
            n_o = amk__lb_gemv(&b, attn, w_o, o, c_o, H, q_rows, amk__lb_tile_rows(H, b.o.num_sms), c_comb, 1, "o", i);
            if (n_o < 0) goto fail;
            ins[0] = x; ins[1] = o;
            snprintf(label, sizeof label, "L%d residual 1", i);
            amk__lb_task(&b, AMK_OP_ADD, ins, 2, h, c_h, &c_o, &n_o, 1, 0, label);
        }
        { /* MLP block */
            char label[64];
            ins[0] = h; ins[1] = w_fn;
            snprintf(label, sizeof label, "L%d ffn_norm", i);
            t = amk__lb_task(&b, AMK_OP_RMSNORM, ins, 2, hn, c_n2, &c_h, &one, 1, (int64_t)H * 4, label);
            amk_task_set_real(p, t, "eps", c->rms_eps);
            amk_task_set_int(p, t, "hidden", H);
            rows = amk__lb_tile_rows(2LL * I, b.o.num_sms);
            n_g = amk__lb_gemv(&b, hn, w_g, g, c_g, I, H, rows, c_n2, 1, "gate", i);
            n_u = amk__lb_gemv(&b, hn, w_u, u, c_u, I, H, rows, c_n2, 1, "up", i);
            if (n_g < 0 || n_u < 0) goto fail;
            {
                int wc[2], wn[2];
                wc[0] = c_g; wc[1] = c_u; wn[0] = n_g; wn[1] = n_u;
                ins[0] = g; ins[1] = u;
                snprintf(label, sizeof label, "L%d silu_mul", i);
                amk__lb_task(&b, AMK_OP_SILU_MUL, ins, 2, a, c_a, wc, wn, 2, 0, label);
            }
            n_d = amk__lb_gemv(&b, a, w_dn, dn, c_d, H, I, amk__lb_tile_rows(H, b.o.num_sms), c_a, 1, "down", i);
            if (n_d < 0) goto fail;
            ins[0] = h; ins[1] = dn;
            snprintf(label, sizeof label, "L%d residual 2", i);
            amk__lb_task(&b, AMK_OP_ADD, ins, 2, xo, c_x, &c_d, &n_d, 1, 0, label);
        }
        x = xo; cx = c_x;
    }
    { /* head */
        int w_norm = amk__lb_buf(&b, AMK_KIND_WEIGHT, AMK_DTYPE_F32, H, 0, 0, 1, "model.norm.weight", "model.norm.weight");
        int xf = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "x.final");
        int logits = amk__lb_buf(&b, AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, V, 0, 2, NULL, "logits");
        int next = amk__lb_buf(&b, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "next_token");
        int c_fn = amk_program_add_counter(p, "final norm"), c_lm = amk_program_add_counter(p, "lm head tiles");
        int c_s = amk_program_add_counter(p, "argmax"), n_lm, ins[2];
        lm_w = c->tie_embeddings ? embed
                                 : amk__lb_buf(&b, AMK_KIND_WEIGHT, wd, V, H, 0, 2, "lm_head.weight", "lm_head.weight");
        ins[0] = x; ins[1] = w_norm;
        t = amk__lb_task(&b, AMK_OP_RMSNORM, ins, 2, xf, c_fn, &cx, &one, 1, (int64_t)H * 4, "final norm");
        amk_task_set_real(p, t, "eps", c->rms_eps);
        amk_task_set_int(p, t, "hidden", H);
        n_lm = amk__lb_gemv(&b, xf, lm_w, logits, c_lm, V, H, amk__lb_tile_rows(V, b.o.num_sms), c_fn, 1, "lm_head", L);
        if (n_lm < 0) goto fail;
        amk__lb_task(&b, AMK_OP_SAMPLE_ARGMAX, &logits, 1, next, c_s, &c_lm, &n_lm, 1, 0, "argmax");
    }
    if (p->build_error != AMK_OK) {
        amk_result r = p->build_error;
        amk_program_free(p);
        return amk__fail(d, r, "llama build: %s", amk_result_str(r));
    }
    *out = p;
    return AMK_OK;
fail:
    amk_program_free(p);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "llama build: out of memory");
}

AMK_API amk_result amk_llama_set_pos(amk_program *p, int pos, amk_diag *d) {
    char buf[32];
    long window;
    int i;
    if (!p) return AMK_ERR_INVALID_ARG;
    if (!amk_program_meta_string(p, "kv_window", buf, sizeof buf) || (window = strtol(buf, NULL, 10)) < 1)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "program has no meta kv_window (not built by amk_llama_build)");
    for (i = 0; i < p->n_tasks; i++) {
        amk_task *t = &p->tasks[i];
        if (t->op == AMK_OP_KV_APPEND) {
            const amk_buffer *cache = t->n_inputs == 2 && t->inputs[1] >= 0 && t->inputs[1] < p->n_buffers
                                          ? &p->buffers[t->inputs[1]] : NULL;
            if (!cache || pos < 0 || pos >= cache->shape[0])
                return amk__fail(d, AMK_ERR_RUNTIME, "position %d is outside the KV cache (%lld rows)",
                                 pos, cache ? (long long)cache->shape[0] : 0LL);
            amk_task_set_int(p, i, "pos", pos);
        } else if (t->op == AMK_OP_ATTENTION_TILE) {
            int64_t start = amk__param_i(t, "kv_start", 0), len = (int64_t)pos + 1 - start;
            amk_task_set_int(p, i, "kv_len", len < 0 ? 0 : len > window ? window : len);
        }
    }
    return AMK_OK;
}

/* ---- sampling ------------------------------------------------------------------------------- */

AMK_API void amk_sampler_init(amk_sampler *s, float temperature, int top_k, float top_p, uint64_t seed) {
    amk__rng r;
    memset(s, 0, sizeof *s);
    s->temperature = temperature;
    s->top_k = top_k;
    s->top_p = top_p;
    amk__rng_seed(&r, seed);
    memcpy(s->state, r.s, sizeof s->state);
}

AMK_API void amk_sampler_free(amk_sampler *s) {
    amk__free(s->scratch_idx);
    amk__free(s->scratch_p);
    s->scratch_idx = NULL;
    s->scratch_p = NULL;
    s->scratch_n = 0;
}

AMK__FN int amk__argmax(const float *x, int n) {
    int i, best = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
    return best;
}

/* Sorts idx[0..n) by p descending (heap sort: no recursion, no qsort context). */
AMK__FN void amk__sort_desc(int *idx, const float *p, int n) {
    int i, end;
    for (i = n / 2 - 1; i >= 0; i--) { /* min-heap on p, then extract to the end */
        int r = i;
        for (;;) {
            int c = 2 * r + 1, tmp;
            if (c >= n) break;
            if (c + 1 < n && p[idx[c + 1]] < p[idx[c]]) c++;
            if (p[idx[r]] <= p[idx[c]]) break;
            tmp = idx[r]; idx[r] = idx[c]; idx[c] = tmp; r = c;
        }
    }
    for (end = n - 1; end > 0; end--) {
        int r = 0, tmp = idx[0];
        idx[0] = idx[end]; idx[end] = tmp;
        for (;;) {
            int c = 2 * r + 1;
            if (c >= end) break;
            if (c + 1 < end && p[idx[c + 1]] < p[idx[c]]) c++;
            if (p[idx[r]] <= p[idx[c]]) break;
            tmp = idx[r]; idx[r] = idx[c]; idx[c] = tmp; r = c;
        }
    }
}

AMK_API int amk_sampler_sample(amk_sampler *s, const float *logits, int n) {
    int i, k, best;
    float mx;
    double sum = 0.0, acc = 0.0, u;
    amk__rng r;
    if (!s || !logits || n < 1) return -1;
    best = amk__argmax(logits, n);
    if (!(s->temperature > 0.0f)) return best;
    if (s->scratch_n < n) {
        amk_sampler_free(s);
        s->scratch_idx = (int *)amk__malloc((size_t)n * sizeof(int));
        s->scratch_p = (float *)amk__malloc((size_t)n * sizeof(float));
        if (!s->scratch_idx || !s->scratch_p) { amk_sampler_free(s); return best; }
        s->scratch_n = n;
    }
    mx = logits[best];
    for (i = 0; i < n; i++) {
        float v = logits[i];
        s->scratch_p[i] = v == v ? expf((v - mx) / s->temperature) : 0.0f;
        s->scratch_idx[i] = i;
    }
    amk__sort_desc(s->scratch_idx, s->scratch_p, n);
    k = s->top_k > 0 && s->top_k < n ? s->top_k : n;
    for (i = 0; i < k; i++) sum += s->scratch_p[s->scratch_idx[i]];
    if (s->top_p > 0.0f && s->top_p < 1.0f) { /* smallest prefix reaching top_p */
        double keep = 0.0;
        for (i = 0; i < k; i++) {
            keep += s->scratch_p[s->scratch_idx[i]] / sum;
            if (keep >= s->top_p) { k = i + 1; break; }
        }
        sum = 0.0;
        for (i = 0; i < k; i++) sum += s->scratch_p[s->scratch_idx[i]];
    }
    memcpy(r.s, s->state, sizeof r.s);
    u = (double)(amk__rng_u64(&r) >> 11) / 9007199254740992.0 * sum; /* why: 53 random bits */
    memcpy(s->state, r.s, sizeof r.s);
    for (i = 0; i < k; i++) {
        acc += s->scratch_p[s->scratch_idx[i]];
        if (u < acc) return s->scratch_idx[i];
    }
    return s->scratch_idx[k - 1];
}

/* ---- the LLM object --------------------------------------------------------------------------- */

struct amk_llm {
    amk_llama_config cfg;
    amk_llm_opts opts;
    amk_program *prog;
    amk_model *model;         /* NULL for random weights */
    amk_tokenizer *tok;       /* NULL for random weights */
    amk_refvm *vm;            /* the CPU backend, or */
    amk_cuda *cuda;           /* the GPU backend */
    int buf_token, buf_pos, buf_logits, buf_next;
    int max_seq;
    float *logits;            /* [vocab] host copy handed to the caller */
};

AMK_API void amk_llm_opts_default(amk_llm_opts *o) {
    memset(o, 0, sizeof *o);
    amk_llama_build_opts_default(&o->build);
    o->backend = AMK_BACKEND_AUTO;
    o->random_seed = 1;
}

AMK_API const amk_llama_config *amk_llm_config(const amk_llm *m) { return m ? &m->cfg : NULL; }
AMK_API const amk_program *amk_llm_program(const amk_llm *m) { return m ? m->prog : NULL; }
AMK_API const amk_tokenizer *amk_llm_tokenizer(const amk_llm *m) { return m ? m->tok : NULL; }
AMK_API int amk_llm_max_seq(const amk_llm *m) { return m ? m->max_seq : 0; }
AMK_API amk_cuda *amk_llm_cuda(amk_llm *m) { return m ? m->cuda : NULL; }
AMK_API const char *amk_llm_backend_name(const amk_llm *m) { return m && m->cuda ? "cuda" : "cpu"; }

AMK_API void amk_llm_close(amk_llm *m) {
    if (!m) return;
    amk_refvm_free(m->vm);
    amk_cuda_free(m->cuda);
    amk_program_free(m->prog);
    amk_tokenizer_free(m->tok);
    amk_model_close(m->model);
    amk__free(m->logits);
    amk__free(m);
}

AMK__FN int amk__find_buffer(const amk_program *p, const char *name) {
    int i;
    for (i = 0; i < p->n_buffers; i++)
        if (strcmp(p->buffers[i].name, name) == 0) return i;
    return -1;
}

/* Builds and lowers the step of m->cfg and creates the CPU VM. */
AMK__FN amk_result amk__llm_prepare(amk_llm *m, amk_diag *d) {
    amk_result r;
    amk_config sc;
    amk_target tgt;
    r = amk_llama_build(&m->cfg, &m->opts.build, &m->prog, d);
    if (r != AMK_OK) return r;
    amk_config_default(&sc);
    sc.threads_per_block = 512; /* why: 26% faster GEMV tiles than 256 on the H100 (bench/NOTES.md) */
    amk_target_builtin("h100", &tgt);
    if (m->opts.build.num_sms > 0) tgt.num_sms = m->opts.build.num_sms;
    r = amk_program_lower(m->prog, &sc, &tgt, d);
    if (r != AMK_OK) return r;
    m->buf_token = amk__find_buffer(m->prog, "token");
    m->buf_pos = amk__find_buffer(m->prog, "pos");
    m->buf_logits = amk__find_buffer(m->prog, "logits");
    m->buf_next = amk__find_buffer(m->prog, "next_token");
    m->max_seq = (int)m->prog->buffers[amk__find_buffer(m->prog, "k_cache.0")].shape[0];
    m->logits = (float *)amk__calloc((size_t)m->cfg.vocab, sizeof(float));
    if (!m->logits) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (m->opts.backend != AMK_BACKEND_CPU) {
        if (!m->opts.device_image) {
            if (m->opts.backend == AMK_BACKEND_CUDA)
                return amk__fail(d, AMK_ERR_INVALID_ARG, "no device image (build it with `make device`)");
        } else {
            r = amk_cuda_create(m->prog, m->opts.device_image, m->opts.device_image_size, &m->cuda, d);
            if (r == AMK_ERR_NO_DRIVER && m->opts.backend == AMK_BACKEND_AUTO) amk_diag_clear(d);
            else if (r != AMK_OK) return r;
        }
    }
    return m->cuda ? AMK_OK : amk_refvm_create(m->prog, &m->vm, d);
}

/* Fills every WEIGHT buffer: from the model file, or random (seeded) when m->model is NULL. */
AMK__FN amk_result amk__llm_load_weights(amk_llm *m, amk_diag *d) {
    uint64_t total = 0, done = 0;
    int i;
    amk__rng rng;
    for (i = 0; i < m->prog->n_buffers; i++)
        if (m->prog->buffers[i].kind == AMK_KIND_WEIGHT) total += (uint64_t)amk__buffer_nbytes(&m->prog->buffers[i]);
    amk__rng_seed(&rng, m->opts.random_seed);
    for (i = 0; i < m->prog->n_buffers; i++) {
        const amk_buffer *b = &m->prog->buffers[i];
        size_t nb = (size_t)amk__buffer_nbytes(b);
        void *dst;
        amk_result r = AMK_OK;
        if (b->kind != AMK_KIND_WEIGHT) continue;
        if (m->cuda) { /* GPU: random weights made on the device; file weights through a staging copy */
            if (!m->model) {
                float scale = b->rank == 2 ? 1.7320508f / sqrtf((float)b->shape[1]) : 0.0f; /* why: unit variance per output */
                r = b->rank == 2 ? amk_cuda_fill_random(m->cuda, i, m->opts.random_seed * 1000003u + (uint64_t)i, scale, d)
                                 : amk_cuda_fill_value(m->cuda, i, 1.0f, d);
            } else {
                void *stage = amk__malloc(nb);
                if (!stage) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory staging '%s'", b->name);
                r = amk_model_tensor_read(m->model, b->source, b->dtype, stage, nb, d);
                if (r == AMK_OK) r = amk_cuda_upload(m->cuda, i, stage, nb, d);
                amk__free(stage);
            }
            if (r != AMK_OK) return r;
            done += nb;
            if (m->opts.progress) m->opts.progress(m->opts.progress_user, "weights", done, total);
            continue;
        }
        dst = amk_refvm_buffer(m->vm, i, &nb);
        if (!dst) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", b->name);
        if (m->model) {
            r = amk_model_tensor_read(m->model, b->source, b->dtype, dst, nb, d);
            if (r != AMK_OK) return r;
        } else {
            int64_t n = amk_buffer_numel(b), j;
            float scale = b->rank == 2 ? 1.0f / sqrtf((float)b->shape[1]) : 0.0f;
            for (j = 0; j < n; j++)
                amk__store_f32(dst, b->dtype, j, b->rank == 2 ? amk__rng_sym(&rng) * scale * 1.7320508f : 1.0f);
        }
        done += nb;
        if (m->opts.progress) m->opts.progress(m->opts.progress_user, "weights", done, total);
    }
    return AMK_OK;
}

AMK_API amk_result amk_llm_open(const char *path, const amk_llm_opts *o, amk_llm **out, amk_diag *d) {
    amk_llm *m;
    amk_result r;
    *out = NULL;
    m = (amk_llm *)amk__calloc(1, sizeof(amk_llm));
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (o) m->opts = *o; else amk_llm_opts_default(&m->opts);
    r = amk_model_open(path, &m->model, d);
    if (r == AMK_OK) {
        m->cfg = *amk_model_config(m->model);
        if (amk_model_gguf(m->model)) r = amk_tokenizer_from_gguf(amk_model_gguf(m->model), &m->tok, d);
        else {
            char tp[1024];
            snprintf(tp, sizeof tp, "%s/tokenizer.json", amk_model_dir(m->model));
            r = amk_tokenizer_from_json(tp, &m->tok, d);
        }
    }
    if (r == AMK_OK) r = amk__llm_prepare(m, d);
    if (r == AMK_OK) r = amk__llm_load_weights(m, d);
    if (r != AMK_OK) { amk_llm_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API amk_result amk_llm_open_random(const amk_llama_config *cfg, const amk_llm_opts *o,
                                       amk_llm **out, amk_diag *d) {
    amk_llm *m;
    amk_result r;
    *out = NULL;
    if (!cfg) return AMK_ERR_INVALID_ARG;
    m = (amk_llm *)amk__calloc(1, sizeof(amk_llm));
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (o) m->opts = *o; else amk_llm_opts_default(&m->opts);
    m->cfg = *cfg;
    r = amk__llm_prepare(m, d);
    if (r == AMK_OK) r = amk__llm_load_weights(m, d);
    if (r != AMK_OK) { amk_llm_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API amk_result amk_llm_step(amk_llm *m, int token, int pos, const float **logits, int *argmax,
                                amk_diag *d) {
    amk_result r;
    void *buf;
    size_t nb;
    int32_t v;
    int64_t j;
    if (!m) return AMK_ERR_INVALID_ARG;
    if (pos < 0 || pos >= m->max_seq)
        return amk__fail(d, AMK_ERR_RUNTIME, "context of %d tokens is longer than the KV cache (%d); use a larger --ctx",
                         pos + 1, m->max_seq);
    if (token < 0 || token >= m->cfg.vocab)
        return amk__fail(d, AMK_ERR_RUNTIME, "token id %d is outside the vocabulary (%d)", token, m->cfg.vocab);
    r = amk_llama_set_pos(m->prog, pos, d);
    if (r != AMK_OK) return r;
    if (m->cuda) {
        int32_t next = -1;
        v = token;
        r = amk_cuda_update_params(m->cuda, m->prog, d);
        if (r == AMK_OK) r = amk_cuda_upload(m->cuda, m->buf_token, &v, 4, d);
        v = pos;
        if (r == AMK_OK) r = amk_cuda_upload(m->cuda, m->buf_pos, &v, 4, d);
        if (r == AMK_OK) r = amk_cuda_run(m->cuda, m->opts.timeout_ms, d);
        if (r == AMK_OK) r = amk_cuda_download(m->cuda, m->buf_logits, m->logits, (size_t)m->cfg.vocab * 4, d);
        if (r == AMK_OK) r = amk_cuda_download(m->cuda, m->buf_next, &next, 4, d);
        if (r != AMK_OK) return r;
        if (logits) *logits = m->logits;
        if (argmax) *argmax = next;
        return AMK_OK;
    }
    v = token;
    buf = amk_refvm_buffer(m->vm, m->buf_token, &nb);
    memcpy(buf, &v, 4);
    v = pos;
    buf = amk_refvm_buffer(m->vm, m->buf_pos, &nb);
    memcpy(buf, &v, 4);
    r = amk_refvm_run(m->vm, NULL, d);
    if (r != AMK_OK) return r;
    buf = amk_refvm_buffer(m->vm, m->buf_logits, &nb);
    for (j = 0; j < m->cfg.vocab; j++) m->logits[j] = amk__load_f32(buf, AMK_DTYPE_F32, j);
    if (logits) *logits = m->logits;
    if (argmax) {
        buf = amk_refvm_buffer(m->vm, m->buf_next, &nb);
        *argmax = (int)amk__load_i64(buf, AMK_DTYPE_I32, 0);
    }
    return AMK_OK;
}

AMK_API amk_result amk_llm_reset(amk_llm *m, amk_diag *d) {
    int i;
    if (!m) return AMK_ERR_INVALID_ARG;
    for (i = 0; i < m->prog->n_buffers; i++) {
        size_t nb;
        void *b;
        if (m->prog->buffers[i].kind != AMK_KIND_KV_CACHE) continue;
        if (m->cuda) {
            amk_result r = amk_cuda_fill_value(m->cuda, i, 0.0f, d);
            if (r != AMK_OK) return r;
            continue;
        }
        b = amk_refvm_buffer(m->vm, i, &nb);
        if (!b) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for KV cache");
        memset(b, 0, nb);
    }
    return AMK_OK;
}

#endif /* AMK__PART_IMPL */
