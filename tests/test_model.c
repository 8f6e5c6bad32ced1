/* tests/test_model.c - model import: a tiny Llama (2 layers, hidden 64, 4 heads, 2 KV heads, vocab
   32) written by the test as GGUF (Q8_0, F16 and F32 tensors, Q/K rows permuted as the converter
   does) and as safetensors + config.json (single file and sharded, both RoPE spellings). Every
   weight read back must equal the HF-order tensor it came from, bit for bit. Also: errors, and
   the real SmolLM2 GGUF when models/ has it. */
#define _POSIX_C_SOURCE 200809L
#include "../amk.h"
#include "amk_test.h"
#include "data/model/gguf_writer.h"
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define N_LAYERS 2
#define HIDDEN 64
#define INTER 128
#define N_HEADS 4
#define N_KV 2
#define HEAD_DIM 16
#define VOCAB 32
#define MAX_W (N_LAYERS * 9 + 3)

/* One weight of the tiny model: E is the HF-order tensor every reader must return. */
typedef struct tiny_weight {
    char name[64];       /* HF name */
    char gname[64];      /* GGUF name */
    int rank;
    int64_t rows, cols;  /* HF [rows, cols]; cols 1 for a vector */
    uint32_t gtype;      /* GGUF storage: F32, F16 or Q8_0 */
    int perm_heads;      /* q/k: heads whose rows the converter permutes */
    float *e;            /* [rows, cols] f32, exactly representable in gtype */
} tiny_weight;

static tiny_weight W[MAX_W];
static int n_w;
static char tmpdir[128];

static amk_t_rng rng = {2};
static float rnd_sym(void) { return amk_t_rng_sym(&rng); }

/* Q8_0 round trip of a row (what dequantize(quantize(x)) gives), written from the block layout. */
static void q8_roundtrip(float *x, int64_t n) {
    unsigned char blk[34];
    int64_t b;
    int j;
    for (b = 0; b < n / 32; b++) {
        float d;
        tw_quant_q8_0(x + 32 * b, 32, blk);
        d = amk_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        for (j = 0; j < 32; j++) x[32 * b + j] = (float)(int8_t)blk[2 + j] * d;
    }
}

static void add_weight(const char *name, const char *gname, int64_t rows, int64_t cols,
                       uint32_t gtype, int perm_heads) {
    tiny_weight *w = &W[n_w++];
    int64_t i, r;
    snprintf(w->name, sizeof w->name, "%s", name);
    snprintf(w->gname, sizeof w->gname, "%s", gname);
    w->rank = cols > 1 ? 2 : 1;
    w->rows = rows;
    w->cols = cols;
    w->gtype = gtype;
    w->perm_heads = perm_heads;
    w->e = (float *)malloc((size_t)(rows * cols) * sizeof(float));
    for (i = 0; i < rows * cols; i++) w->e[i] = cols == 1 ? 1.0f + 0.1f * rnd_sym() : 0.2f * rnd_sym();
    for (r = 0; r < rows; r++) {
        float *row = w->e + r * cols;
        if (gtype == AMK_GGML_Q8_0) q8_roundtrip(row, cols);
        if (gtype == AMK_GGML_F16)
            for (i = 0; i < cols; i++) row[i] = amk_f16_to_f32(amk_f32_to_f16(row[i]));
    }
}

static void build_weights(void) {
    static const char *const hf[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
        "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj"};
    static const char *const gg[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                      "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    const int64_t rows[9] = {HIDDEN, N_HEADS * HEAD_DIM, N_KV * HEAD_DIM, N_KV * HEAD_DIM, HIDDEN,
                             HIDDEN, INTER, INTER, HIDDEN};
    const int64_t cols[9] = {1, HIDDEN, HIDDEN, HIDDEN, N_HEADS * HEAD_DIM, 1, HIDDEN, HIDDEN, INTER};
    /* storage per layer entry: layer 0 and 1 differ so q and k are tried as Q8_0 and F16 */
    const uint32_t types[2][9] = {
        {AMK_GGML_F32, AMK_GGML_Q8_0, AMK_GGML_F16, AMK_GGML_F32, AMK_GGML_Q8_0, AMK_GGML_F32,
         AMK_GGML_F16, AMK_GGML_Q8_0, AMK_GGML_Q8_0},
        {AMK_GGML_F32, AMK_GGML_F16, AMK_GGML_Q8_0, AMK_GGML_Q8_0, AMK_GGML_F16, AMK_GGML_F32,
         AMK_GGML_Q8_0, AMK_GGML_F32, AMK_GGML_F16}};
    char a[64], b[64];
    int l, i;
    n_w = 0;
    add_weight("model.embed_tokens.weight", "token_embd.weight", VOCAB, HIDDEN, AMK_GGML_Q8_0, 0);
    for (l = 0; l < N_LAYERS; l++)
        for (i = 0; i < 9; i++) {
            snprintf(a, sizeof a, "model.layers.%d.%s.weight", l, hf[i]);
            snprintf(b, sizeof b, "blk.%d.%s.weight", l, gg[i]);
            add_weight(a, b, rows[i], cols[i], types[l][i], i == 1 ? N_HEADS : i == 2 ? N_KV : 0);
        }
    add_weight("model.norm.weight", "output_norm.weight", HIDDEN, 1, AMK_GGML_F32, 0);
    add_weight("lm_head.weight", "output.weight", VOCAB, HIDDEN, AMK_GGML_Q8_0, 0);
}

static char *path_in(const char *sub) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, sub);
    return buf[k];
}

/* ---- GGUF writer: permutes q/k rows like convert_hf_to_gguf.py and stores each type ----------- */

typedef struct gguf_opts {
    int tied;                /* leave out output.weight */
    const char *skip;        /* a GGUF tensor to leave out */
    const char *arch;
    int rope_freqs;          /* add rope_freqs.weight */
    int scaling_keys;        /* add the llama3 scaling keys */
    float eps;               /* layer_norm_rms_epsilon; 0: 1e-5 */
    int window;              /* llama.attention.sliding_window (a Mistral's); 0: none; -1: the key 0 */
} gguf_opts;

static void write_tiny_gguf(const char *path, const gguf_opts *o) {
    tw_gguf w;
    const char *toks[VOCAB];
    char tokbuf[VOCAB][16];
    int i;
    size_t n;
    unsigned char *f;
    tw_init(&w, 3);
    tw_kv_str(&w, "general.architecture", o->arch ? o->arch : "llama");
    tw_kv_str(&w, "general.name", "tiny");
    tw_kv_u32(&w, "llama.block_count", N_LAYERS);
    tw_kv_u32(&w, "llama.context_length", 256);
    tw_kv_u32(&w, "llama.embedding_length", HIDDEN);
    tw_kv_u32(&w, "llama.feed_forward_length", INTER);
    tw_kv_u32(&w, "llama.attention.head_count", N_HEADS);
    tw_kv_u32(&w, "llama.attention.head_count_kv", N_KV);
    tw_kv_f32(&w, "llama.rope.freq_base", 100000.0f);
    tw_kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", o->eps != 0.0f ? o->eps : 1e-5f);
    tw_kv_u32(&w, "llama.rope.dimension_count", HEAD_DIM);
    if (o->window) tw_kv_u32(&w, "llama.attention.sliding_window", o->window > 0 ? (uint32_t)o->window : 0u);
    if (o->scaling_keys) {
        tw_kv_str(&w, "llama.rope.scaling.type", "llama3");
        tw_kv_f32(&w, "llama.rope.scaling.factor", 32.0f);
        tw_kv_f32(&w, "llama.rope.scaling.low_freq_factor", 1.0f);
        tw_kv_f32(&w, "llama.rope.scaling.high_freq_factor", 4.0f);
        tw_kv_u32(&w, "llama.rope.scaling.original_context_length", 8192);
    }
    for (i = 0; i < VOCAB; i++) { snprintf(tokbuf[i], sizeof tokbuf[i], "t%d", i); toks[i] = tokbuf[i]; }
    tw_kv_strs(&w, "tokenizer.ggml.tokens", VOCAB, toks);
    tw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    tw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    for (i = 0; i < n_w; i++) {
        const tiny_weight *t = &W[i];
        int64_t dims[2], r, c, nel = t->rows * t->cols;
        float *src = (float *)malloc((size_t)nel * sizeof(float));
        unsigned char *data;
        size_t nbytes;
        if ((o->tied && strcmp(t->gname, "output.weight") == 0) || (o->skip && strcmp(t->gname, o->skip) == 0)) {
            free(src);
            continue;
        }
        for (r = 0; r < t->rows; r++) {
            int64_t from = r;
            if (t->perm_heads) { /* gguf row h*d + 2j + u holds hf row h*d + u*d/2 + j */
                int64_t d = t->rows / t->perm_heads, h = r / d, j = (r % d) / 2, u = r % 2;
                from = h * d + u * (d / 2) + j;
            }
            for (c = 0; c < t->cols; c++) src[r * t->cols + c] = t->e[from * t->cols + c];
        }
        if (t->gtype == AMK_GGML_F32) {
            nbytes = (size_t)nel * 4;
            data = (unsigned char *)malloc(nbytes);
            memcpy(data, src, nbytes);
        } else if (t->gtype == AMK_GGML_F16) {
            nbytes = (size_t)nel * 2;
            data = (unsigned char *)malloc(nbytes);
            for (r = 0; r < nel; r++) {
                uint16_t h = amk_f32_to_f16(src[r]);
                data[2 * r] = (unsigned char)(h & 0xFF);
                data[2 * r + 1] = (unsigned char)(h >> 8);
            }
        } else {
            nbytes = (size_t)(nel / 32 * 34);
            data = (unsigned char *)malloc(nbytes);
            tw_quant_q8_0(src, nel, data);
        }
        dims[0] = t->rank == 2 ? t->cols : t->rows; /* GGUF order: the contiguous axis first */
        dims[1] = t->rows;
        tw_tensor(&w, t->gname, t->gtype, t->rank, dims, data, nbytes);
        free(data);
        free(src);
    }
    if (o->rope_freqs) {
        float fr[HEAD_DIM / 2];
        int64_t dims[1] = {HEAD_DIM / 2};
        for (i = 0; i < HEAD_DIM / 2; i++) fr[i] = 1.0f;
        tw_tensor(&w, "rope_freqs.weight", AMK_GGML_F32, 1, dims, fr, sizeof fr);
    }
    f = tw_finish(&w, &n);
    CHECK(tw_write_file(path, f, n));
    free(f);
    tw_free(&w);
}

/* ---- safetensors + config.json --------------------------------------------------------------- */

/* Writes the weights whose index is in [from, to) (lm_head only when !tied) as F32. */
static void write_shard(const char *path, int from, int to, int tied) {
    amk_st_entry e[MAX_W];
    int64_t shapes[MAX_W][2];
    int i, n = 0;
    amk_diag d;
    for (i = from; i < to; i++) {
        if (tied && strcmp(W[i].name, "lm_head.weight") == 0) continue;
        shapes[n][0] = W[i].rows;
        shapes[n][1] = W[i].cols;
        e[n].name = W[i].name;
        e[n].dtype = AMK_DTYPE_F32;
        e[n].rank = W[i].rank;
        e[n].shape = shapes[n];
        e[n].data = W[i].e;
        n++;
    }
    CHECK_EQ_INT(amk_safetensors_write(path, e, n, &d), AMK_OK);
}

static void write_text(const char *path, const char *text) { CHECK(tw_write_file(path, text, strlen(text))); }

/* config.json of the tiny model; rope is the RoPE part, extra more members (may be ""). */
static void write_config(const char *dir, int tied, const char *rope, const char *extra) {
    char text[2048], path[256];
    snprintf(text, sizeof text,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
             "\"_name_or_path\": \"tiny\", \"hidden_size\": %d, \"intermediate_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
             "\"hidden_act\": \"silu\", \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-05, "
             "\"vocab_size\": %d, \"bos_token_id\": 1, \"eos_token_id\": [2], "
             "\"tie_word_embeddings\": %s, \"attention_bias\": false, \"torch_dtype\": \"float32\", "
             "%s%s}", HIDDEN, INTER, N_LAYERS, N_HEADS, N_KV, VOCAB, tied ? "true" : "false", rope,
             extra);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, text);
}
#define ROPE_OLD "\"rope_theta\": 100000.0, \"rope_scaling\": null"
#define ROPE_V5 "\"rope_parameters\": {\"rope_theta\": 100000.0, \"rope_type\": \"default\"}"

static void make_dir(const char *sub) { mkdir(path_in(sub), 0755); }

/* dir "st": single file, untied, old spelling. dir "sh": two shards + index, tied, v5 spelling. */
static void write_st_models(void) {
    char index[4096];
    size_t len;
    int i, split = 1 + 9; /* embed + layer 0 in shard 1 */
    make_dir("st");
    write_shard(path_in("st/model.safetensors"), 0, n_w, 0);
    write_config(path_in("st"), 0, ROPE_OLD, "");
    make_dir("sh");
    write_shard(path_in("sh/model-00001-of-00002.safetensors"), 0, split, 1);
    write_shard(path_in("sh/model-00002-of-00002.safetensors"), split, n_w, 1);
    write_config(path_in("sh"), 1, ROPE_V5, "");
    len = (size_t)snprintf(index, sizeof index, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
    for (i = 0; i < n_w - 1; i++)
        len += (size_t)snprintf(index + len, sizeof index - len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                                i ? ", " : "", W[i].name, i < split ? 1 : 2);
    snprintf(index + len, sizeof index - len, "}}");
    write_text(path_in("sh/model.safetensors.index.json"), index);
}

/* ---- checks ------------------------------------------------------------------------------------ */

static void check_config(const amk_llama_config *c, int tied) {
    CHECK_STR(c->arch, "llama");
    CHECK_STR(c->name, "tiny");
    CHECK_EQ_INT(c->n_layers, N_LAYERS);
    CHECK_EQ_INT(c->hidden, HIDDEN);
    CHECK_EQ_INT(c->intermediate, INTER);
    CHECK_EQ_INT(c->n_heads, N_HEADS);
    CHECK_EQ_INT(c->n_kv_heads, N_KV);
    CHECK_EQ_INT(c->head_dim, HEAD_DIM);
    CHECK_EQ_INT(c->vocab, VOCAB);
    CHECK_EQ_INT(c->max_pos, 256);
    CHECK(c->rms_eps == 1e-5f);
    CHECK(c->rope_theta == 100000.0f);
    CHECK_EQ_INT(c->rope_llama3, 0);
    CHECK_EQ_INT(c->tie_embeddings, tied);
    CHECK_EQ_INT(c->bos_id, 1);
    CHECK_EQ_INT(c->n_eos, 1);
    CHECK_EQ_INT(c->eos_ids[0], 2);
    CHECK_EQ_INT(c->attention_bias, 0);
    CHECK_EQ_INT(c->mlp_bias, 0);
}

/* Every weight reads back equal to E (lm_head: the embedding when tied), as F32, F16 and BF16. */
static void check_weights(amk_model *m, int tied) {
    int i, bad = 0;
    amk_diag d;
    for (i = 0; i < n_w && bad < 3; i++) {
        const tiny_weight *t = &W[i];
        const tiny_weight *src = tied && strcmp(t->name, "lm_head.weight") == 0 ? &W[0] : t;
        int64_t shape[4], nel = t->rows * t->cols, k;
        int rank = -1;
        float *y = (float *)malloc((size_t)nel * 4);
        uint16_t *h = (uint16_t *)malloc((size_t)nel * 2);
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk_model_tensor_shape(m, t->name, &rank, shape, &d), AMK_OK);
        CHECK_EQ_INT(rank, t->rank);
        CHECK(shape[0] == t->rows && (t->rank == 1 || shape[1] == t->cols));
        CHECK_EQ_INT(amk_model_tensor_read(m, t->name, AMK_DTYPE_F32, y, (size_t)nel * 4, &d), AMK_OK);
        if (memcmp(y, src->e, (size_t)nel * 4) != 0) {
            bad++;
            for (k = 0; k < nel && y[k] == src->e[k]; k++) {}
            CHECK_MSG(0, "%s (%s) element %lld: %g, want %g", t->name, amk_gguf_type_name(t->gtype),
                      (long long)k, y[k], src->e[k]);
        }
        CHECK_EQ_INT(amk_model_tensor_read(m, t->name, AMK_DTYPE_BF16, h, (size_t)nel * 2, &d), AMK_OK);
        for (k = 0; k < nel && h[k] == amk_f32_to_bf16(src->e[k]); k++) {}
        CHECK_MSG(k == nel, "%s as BF16 differs at %lld", t->name, (long long)k);
        CHECK_EQ_INT(amk_model_tensor_read(m, t->name, AMK_DTYPE_F16, h, (size_t)nel * 2, &d), AMK_OK);
        for (k = 0; k < nel && h[k] == amk_f32_to_f16(src->e[k]); k++) {}
        CHECK_MSG(k == nel, "%s as F16 differs at %lld", t->name, (long long)k);
        { /* in its own bits: a block format's blocks (Q/K rows un-permuted), decoding to E */
            int dt = -2;
            CHECK_EQ_INT(amk_model_tensor_dtype(m, t->name, &dt, &d), AMK_OK);
            if (amk_model_gguf(m)) /* as the file stores it (gtype); a safetensors file holds floats */
                CHECK_EQ_INT(dt, amk_gguf_type_dtype(src->gtype) >= 0 ? amk_gguf_type_dtype(src->gtype)
                                 : src->gtype == AMK_GGML_F16 ? AMK_DTYPE_F16 : AMK_DTYPE_F32);
            else
                CHECK(dt == AMK_DTYPE_F32 || dt == AMK_DTYPE_F16 || dt == AMK_DTYPE_BF16);
            if (amk_dtype_is_block(dt)) {
                const size_t nb = (size_t)amk_dtype_nbytes(dt, nel);
                unsigned char *raw = (unsigned char *)malloc(nb);
                CHECK_EQ_INT(amk_model_tensor_read(m, t->name, dt, raw, nb, &d), AMK_OK);
                for (k = 0; k < nel && amk_dtype_load_f32(raw, nb, dt, k) == src->e[k]; k++) {}
                CHECK_MSG(k == nel, "%s in its own %s differs at %lld", t->name, amk_dtype_name(dt), (long long)k);
                CHECK_EQ_INT(amk_model_tensor_read(m, t->name, dt == AMK_DTYPE_Q8_0 ? AMK_DTYPE_Q4_0 : AMK_DTYPE_Q8_0,
                                                   raw, nb, &d), AMK_ERR_INVALID_ARG);
                free(raw);
            }
        }
        free(y);
        free(h);
    }
}

static amk_model *open_ok(const char *path) {
    amk_model *m = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_model_open(path, &m, &d), AMK_OK);
    if (!m) fprintf(stderr, "open '%s': %s\n", path, d.message);
    return m;
}
/* Opening path fails with r and a message holding want. */
static void open_fails(const char *path, amk_result r, const char *want) {
    amk_model *m = (amk_model *)&m;
    amk_diag d;
    amk_result got;
    amk_diag_clear(&d);
    got = amk_model_open(path, &m, &d);
    CHECK_MSG(got == r, "%s: result %s, want %s (%s)", path, amk_result_str(got), amk_result_str(r), d.message);
    CHECK(m == NULL);
    CHECK_MSG(strstr(d.message, want) != NULL, "message '%s' lacks '%s'", d.message, want);
}

/* dir/config.json: a tiny llama config (hidden 64, ffn 128, 2 layers, 4 heads, vocab 32) with the
   JSON fields extra added; opening dir fails with r, the message holding want. */
static void config_fails(const char *dir, const char *extra, amk_result r, const char *want) {
    char text[512], path[256];
    snprintf(text, sizeof text, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 32, %s}", extra);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, text);
    open_fails(dir, r, want);
}

static void test_gguf_untied(void) {
    gguf_opts o;
    amk_model *m;
    memset(&o, 0, sizeof o);
    write_tiny_gguf(path_in("untied.gguf"), &o);
    if (!(m = open_ok(path_in("untied.gguf")))) return;
    check_config(amk_model_config(m), 0);
    CHECK(amk_model_gguf(m) != NULL);
    CHECK_EQ_INT(amk_gguf_n_tensors(amk_model_gguf(m)), n_w);
    CHECK_STR(amk_model_dir(m), tmpdir);
    check_weights(m, 0);
    amk_model_close(m);
}

static void test_gguf_tied(void) {
    gguf_opts o;
    amk_model *m;
    memset(&o, 0, sizeof o);
    o.tied = 1;
    write_tiny_gguf(path_in("tied.gguf"), &o);
    if (!(m = open_ok(path_in("tied.gguf")))) return;
    check_config(amk_model_config(m), 1);
    check_weights(m, 1);
    amk_model_close(m);
}

static void test_safetensors_dir(void) {
    amk_model *m;
    amk_llama_config gc;
    gguf_opts o;
    memset(&o, 0, sizeof o);
    write_tiny_gguf(path_in("untied.gguf"), &o);
    if (!(m = open_ok(path_in("untied.gguf")))) return;
    gc = *amk_model_config(m);
    amk_model_close(m);
    if (!(m = open_ok(path_in("st")))) return;
    check_config(amk_model_config(m), 0);
    CHECK(memcmp(&gc, amk_model_config(m), sizeof gc) == 0); /* the same config from both formats */
    CHECK(amk_model_gguf(m) == NULL);
    CHECK_STR(amk_model_dir(m), path_in("st"));
    check_weights(m, 0);
    amk_model_close(m);
    /* the .safetensors file itself, config.json beside it */
    if (!(m = open_ok(path_in("st/model.safetensors")))) return;
    check_config(amk_model_config(m), 0);
    CHECK_STR(amk_model_dir(m), path_in("st"));
    amk_model_close(m);
}

/* A model directory's tokenizer is its tokenizer.json (amk_tokenizer_from_model): none there is an
   I/O error naming it; once it is there, the same ids as that file read directly. */
static void test_tokenizer_from_model_dir(void) {
    const char *src = "tests/data/tokenizer/smollm2_tokenizer.json", *text = "Hello world, 12345!";
    amk_model *m;
    amk_tokenizer *t = NULL, *ref = NULL;
    amk_diag d;
    size_t n = 0;
    char *json = (char *)amk_t_read_file(src, &n);
    int a[32], b[32], na, nb, i;
    CHECK(json != NULL);
    if (!json || !(m = open_ok(path_in("st")))) { free(json); return; }
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_tokenizer_from_model(m, &t, &d), AMK_ERR_IO);
    CHECK(t == NULL && strstr(d.message, "st/tokenizer.json") != NULL);
    CHECK(tw_write_file(path_in("st/tokenizer.json"), json, n));
    CHECK_EQ_INT(amk_tokenizer_from_model(m, &t, &d), AMK_OK);
    CHECK_EQ_INT(amk_tokenizer_from_json(src, &ref, &d), AMK_OK);
    if (t && ref) {
        na = amk_tokenizer_encode(t, text, strlen(text), 0, a, 32);
        nb = amk_tokenizer_encode(ref, text, strlen(text), 0, b, 32);
        CHECK(na > 3 && na <= 32 && na == nb);
        for (i = 0; i < na && i < nb; i++) CHECK_EQ_INT(a[i], b[i]);
    }
    remove(path_in("st/tokenizer.json"));
    amk_tokenizer_free(t);
    amk_tokenizer_free(ref);
    amk_model_close(m);
    free(json);
}

static void test_safetensors_sharded(void) {
    amk_model *m;
    if (!(m = open_ok(path_in("sh")))) return;
    check_config(amk_model_config(m), 1);
    check_weights(m, 1);
    amk_model_close(m);
    if (!(m = open_ok(path_in("sh/model.safetensors.index.json")))) return;
    check_config(amk_model_config(m), 1);
    amk_model_close(m);
}

/* Only the config part of the GGUF differs: untied config.json but no lm_head stored. */
static void test_untied_config_without_lm_head(void) {
    amk_model *m;
    make_dir("nolm");
    write_shard(path_in("nolm/model.safetensors"), 0, n_w - 1, 1);
    write_config(path_in("nolm"), 0, ROPE_OLD, "");
    if (!(m = open_ok(path_in("nolm")))) return;
    CHECK_EQ_INT(amk_model_config(m)->tie_embeddings, 1);
    check_weights(m, 1);
    amk_model_close(m);
}

static void test_llama3_rope(void) {
    amk_model *m;
    gguf_opts o;
    const amk_llama_config *c;
    make_dir("r3");
    write_shard(path_in("r3/model.safetensors"), 0, n_w, 0);
    write_config(path_in("r3"), 0, "\"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": "
                 "\"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 8192}", "");
    if ((m = open_ok(path_in("r3")))) {
        c = amk_model_config(m);
        CHECK(c->rope_theta == 500000.0f && c->rope_llama3 == 1 && c->rope_factor == 32.0f &&
              c->rope_low_freq_factor == 1.0f && c->rope_high_freq_factor == 4.0f &&
              c->rope_orig_ctx == 8192);
        amk_model_close(m);
    }
    write_config(path_in("r3"), 0, "\"rope_theta\": 500000, \"rope_scaling\": {\"type\": \"llama3\", "
                 "\"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                 "\"original_max_position_embeddings\": 8192}", "");
    if ((m = open_ok(path_in("r3")))) {
        c = amk_model_config(m);
        CHECK(c->rope_theta == 500000.0f && c->rope_llama3 == 1 && c->rope_factor == 8.0f);
        amk_model_close(m);
    }
    /* linear and YaRN (the original context defaults to max_position_embeddings; betas 1 and 32);
       dynamic NTK and YaRN's mscale are refused */
    write_config(path_in("r3"), 0, "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}", "");
    if ((m = open_ok(path_in("r3")))) {
        c = amk_model_config(m);
        CHECK(c->rope_type == AMK_ROPE_YARN && c->rope_factor == 4.0f && c->rope_orig_ctx == c->max_pos &&
              c->rope_low_freq_factor == 1.0f && c->rope_high_freq_factor == 32.0f && !c->rope_llama3);
        amk_model_close(m);
    }
    write_config(path_in("r3"), 0, "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.5}", "");
    if ((m = open_ok(path_in("r3")))) {
        c = amk_model_config(m);
        CHECK(c->rope_type == AMK_ROPE_LINEAR && c->rope_factor == 2.5f);
        amk_model_close(m);
    }
    write_config(path_in("r3"), 0, "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4}", "");
    open_fails(path_in("r3"), AMK_ERR_UNSUPPORTED, "RoPE scaling 'dynamic'");
    write_config(path_in("r3"), 0, "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"mscale\": 1, "
                 "\"mscale_all_dim\": 1}", "");
    open_fails(path_in("r3"), AMK_ERR_UNSUPPORTED, "mscale");
    write_config(path_in("r3"), 0, "\"rope_scaling\": {\"rope_type\": \"linear\"}", "");
    open_fails(path_in("r3"), AMK_ERR_PARSE, "linear RoPE scaling needs a finite factor");
    write_config(path_in("r3"), 0, "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 4}", "");
    open_fails(path_in("r3"), AMK_ERR_PARSE, "lacks 'low_freq_factor'");
    /* GGUF: rope_freqs.weight alone is not enough yet; with the scaling keys it is */
    memset(&o, 0, sizeof o);
    o.rope_freqs = 1;
    write_tiny_gguf(path_in("freqs.gguf"), &o);
    open_fails(path_in("freqs.gguf"), AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling");
    o.scaling_keys = 1;
    write_tiny_gguf(path_in("freqs.gguf"), &o);
    if ((m = open_ok(path_in("freqs.gguf")))) {
        c = amk_model_config(m);
        CHECK(c->rope_llama3 == 1 && c->rope_factor == 32.0f && c->rope_low_freq_factor == 1.0f &&
              c->rope_high_freq_factor == 4.0f && c->rope_orig_ctx == 8192);
        amk_model_close(m);
    }
}

static void test_errors(void) {
    gguf_opts o;
    amk_model *m;
    amk_diag d;
    float buf[HIDDEN];
    /* a missing tensor is named, in HF and GGUF terms */
    memset(&o, 0, sizeof o);
    o.skip = "blk.1.ffn_up.weight";
    write_tiny_gguf(path_in("missing.gguf"), &o);
    open_fails(path_in("missing.gguf"), AMK_ERR_NOT_FOUND,
               "model has no tensor 'model.layers.1.mlp.up_proj.weight' (GGUF 'blk.1.ffn_up.weight')");
    memset(&o, 0, sizeof o);
    o.arch = "gemma";
    write_tiny_gguf(path_in("gemma.gguf"), &o);
    open_fails(path_in("gemma.gguf"), AMK_ERR_UNSUPPORTED, "architecture 'gemma' is not supported (only llama, qwen2 and qwen3)");
    o.arch = "qwen2"; /* its hyper-parameters under "qwen2.", which the tiny file writes under "llama." */
    write_tiny_gguf(path_in("qwen.gguf"), &o);
    open_fails(path_in("qwen.gguf"), AMK_ERR_PARSE, "GGUF lacks the key 'qwen2.block_count'");
    /* reads: unknown names, wrong sizes, wrong dtypes */
    memset(&o, 0, sizeof o);
    write_tiny_gguf(path_in("untied.gguf"), &o);
    if ((m = open_ok(path_in("untied.gguf")))) {
        CHECK_EQ_INT(amk_model_tensor_read(m, "model.layers.7.mlp.up_proj.weight", AMK_DTYPE_F32, buf, sizeof buf, &d), AMK_ERR_NOT_FOUND);
        CHECK(strstr(d.message, "'model.layers.7.mlp.up_proj.weight'") != NULL);
        CHECK_EQ_INT(amk_model_tensor_read(m, "model.layers.01.mlp.up_proj.weight", AMK_DTYPE_F32, buf, sizeof buf, &d), AMK_ERR_NOT_FOUND);
        CHECK_EQ_INT(amk_model_tensor_shape(m, "token_embd.weight", NULL, NULL, &d), AMK_ERR_NOT_FOUND);
        CHECK_EQ_INT(amk_model_tensor_read(m, "model.norm.weight", AMK_DTYPE_F32, buf, sizeof buf - 4, &d), AMK_ERR_MISMATCH);
        CHECK(strstr(d.message, "model.norm.weight") != NULL);
        CHECK_EQ_INT(amk_model_tensor_read(m, "model.norm.weight", AMK_DTYPE_I32, buf, sizeof buf, &d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_model_tensor_read(m, "model.norm.weight", AMK_DTYPE_F32, buf, sizeof buf, &d), AMK_OK);
        amk_model_close(m);
    }
    /* config.json problems */
    make_dir("bad");
    write_shard(path_in("bad/model.safetensors"), 0, n_w, 0);
    write_config(path_in("bad"), 0, ROPE_OLD, ", \"mlp_bias\": false");
    if ((m = open_ok(path_in("bad")))) amk_model_close(m);
    write_config(path_in("bad"), 0, ROPE_OLD, ", \"mlp_bias\": true");
    open_fails(path_in("bad"), AMK_ERR_UNSUPPORTED, "MLP biases");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"llama\", \"hidden_size\": 64, \"attention_bias\": true, "
               "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 32}");
    open_fails(path_in("bad"), AMK_ERR_UNSUPPORTED, "attention biases are not supported");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"gemma\"}");
    open_fails(path_in("bad"), AMK_ERR_UNSUPPORTED, "model_type 'gemma' is not supported (only llama, mistral, qwen2 and qwen3)");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"mistral\", \"sliding_window\": 0}"); /* (null: none) */
    open_fails(path_in("bad"), AMK_ERR_PARSE, "'sliding_window' is out of range");
    write_text(path_in("bad/config.json"), "{\"architectures\": [\"GemmaForCausalLM\"]}");
    open_fails(path_in("bad"), AMK_ERR_UNSUPPORTED, "MistralForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"qwen2\", \"use_sliding_window\": true}");
    open_fails(path_in("bad"), AMK_ERR_UNSUPPORTED, "Qwen2's sliding window (use_sliding_window true) is not supported yet");
    { /* a Qwen2 config over the tiny Llama's weights: its q/k/v biases are missing */
        char text[512];
        snprintf(text, sizeof text, "{\"model_type\": \"qwen2\", \"hidden_size\": %d, \"intermediate_size\": %d, "
                 "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
                 "\"vocab_size\": %d, \"tie_word_embeddings\": false}", HIDDEN, INTER, N_LAYERS, N_HEADS, N_KV, VOCAB);
        write_text(path_in("bad/config.json"), text);
        open_fails(path_in("bad"), AMK_ERR_NOT_FOUND, "model.layers.0.self_attn.q_proj.bias");
        text[20] = '3'; /* "qwen2" -> "qwen3": its q/k norms are missing */
        write_text(path_in("bad/config.json"), text);
        open_fails(path_in("bad"), AMK_ERR_NOT_FOUND, "model.layers.0.self_attn.q_norm.weight");
    }
    write_config(path_in("bad"), 0, ROPE_OLD, ", \"head_dim\": 8");
    open_fails(path_in("bad"), AMK_ERR_MISMATCH, "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [64, 64]; the config implies [32, 64]");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": \"64\"}");
    open_fails(path_in("bad"), AMK_ERR_PARSE, "'hidden_size' must be an integer");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64}");
    open_fails(path_in("bad"), AMK_ERR_PARSE, "config.json lacks 'intermediate_size'");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"llama\", \"hidden_size\": 64,");
    open_fails(path_in("bad"), AMK_ERR_PARSE, "config.json");
    write_text(path_in("bad/config.json"), "{\"model_type\": \"llama\", \"hidden_act\": \"gelu\"}");
    open_fails(path_in("bad"), AMK_ERR_UNSUPPORTED, "hidden_act 'gelu'");
    config_fails(path_in("bad"), "\"num_key_value_heads\": 3", AMK_ERR_PARSE, "4 heads do not split into 3 KV heads");
    config_fails(path_in("bad"), "\"eos_token_id\": [1, 2, 3, 4, 5]", AMK_ERR_UNSUPPORTED, "eos_token_id lists 5 ids");
    /* floats the step's validator would reject later are config errors, naming the field */
    {
        static const char *const bad_floats[5][2] = {
            {"\"rms_norm_eps\": 1e300", "'rms_norm_eps' is 1e+300, outside a float's range"},
            {"\"rms_norm_eps\": 0", "rms_norm_eps 0 must be positive and finite"},
            {"\"rms_norm_eps\": -1e-5", "rms_norm_eps -1e-05 must be positive and finite"},
            {"\"rope_theta\": -10000.0", "rope_theta -10000 must be positive and finite"},
            {"\"rope_theta\": 1e39", "'rope_theta' is 1e+39, outside a float's range"}};
        int k;
        for (k = 0; k < 5; k++) config_fails(path_in("bad"), bad_floats[k][0], AMK_ERR_PARSE, bad_floats[k][1]);
    }
    memset(&o, 0, sizeof o);
    o.eps = (float)INFINITY;
    write_tiny_gguf(path_in("eps.gguf"), &o);
    open_fails(path_in("eps.gguf"), AMK_ERR_PARSE, "rms_norm_eps inf must be positive and finite");
    o.eps = (float)NAN;
    write_tiny_gguf(path_in("eps.gguf"), &o);
    open_fails(path_in("eps.gguf"), AMK_ERR_PARSE, "must be positive and finite");
    memset(&o, 0, sizeof o); /* a Mistral converted as "llama": its window read, a zero one refused */
    o.window = 6;
    write_tiny_gguf(path_in("window.gguf"), &o);
    if ((m = open_ok(path_in("window.gguf")))) {
        CHECK_EQ_INT(amk_model_config(m)->sliding_window, 6);
        amk_model_close(m);
    }
    o.window = -1;
    write_tiny_gguf(path_in("window.gguf"), &o);
    open_fails(path_in("window.gguf"), AMK_ERR_PARSE, "GGUF key 'llama.attention.sliding_window' is 0");
}

/* What amk_model_open makes of a path that is no model (issue 38): the message names the file and
   what it is, not a config.json the file never needed. */
static void test_not_a_model(void) {
    write_text(path_in("junk.gguf"), "XXXXjunk");
    open_fails(path_in("junk.gguf"), AMK_ERR_PARSE, "junk.gguf': not a GGUF file (magic 0x58585858, expected 'GGUF')");
    write_text(path_in("empty.safetensors"), "");
    open_fails(path_in("empty.safetensors"), AMK_ERR_PARSE, "empty.safetensors': empty file (expected a .gguf file");
    open_fails("/dev/null", AMK_ERR_PARSE, "'/dev/null': empty file");
    write_text(path_in("program.json"), "{\"ir_version\": \"1.0\", \"buffers\": []}");
    open_fails(path_in("program.json"), AMK_ERR_PARSE, "program.json': not a safetensors index (no weight_map object");
    write_text(path_in("notes.txt"), "hello, world");
    open_fails(path_in("notes.txt"), AMK_ERR_PARSE, "notes.txt': neither GGUF (no 'GGUF' magic) nor safetensors");
    make_dir("nocfg");
    open_fails(path_in("nocfg"), AMK_ERR_IO, "nocfg': a directory without config.json");
    open_fails(path_in("nope.gguf"), AMK_ERR_IO, "cannot open");
}

static void test_shard_errors(void) {
    size_t n1, n2;
    unsigned char *s1 = amk_t_read_file(path_in("sh/model-00001-of-00002.safetensors"), &n1);
    unsigned char *s2 = amk_t_read_file(path_in("sh/model-00002-of-00002.safetensors"), &n2);
    size_t ni;
    unsigned char *idx = amk_t_read_file(path_in("sh/model.safetensors.index.json"), &ni);
    CHECK(s1 && s2 && idx);
    if (!s1 || !s2 || !idx) return;
    make_dir("tr");
    write_config(path_in("tr"), 1, ROPE_V5, "");
    CHECK(tw_write_file(path_in("tr/model.safetensors.index.json"), idx, ni));
    CHECK(tw_write_file(path_in("tr/model-00001-of-00002.safetensors"), s1, n1));
    /* a truncated shard: the error names the shard file */
    CHECK(tw_write_file(path_in("tr/model-00002-of-00002.safetensors"), s2, n2 - 100));
    open_fails(path_in("tr"), AMK_ERR_PARSE, "model-00002-of-00002.safetensors");
    /* a missing shard */
    remove(path_in("tr/model-00002-of-00002.safetensors"));
    open_fails(path_in("tr"), AMK_ERR_IO, "model-00002-of-00002.safetensors");
    /* both shards present, but the index puts a tensor in the wrong one */
    CHECK(tw_write_file(path_in("tr/model-00002-of-00002.safetensors"), s2, n2));
    write_text(path_in("tr/model.safetensors.index.json"),
               "{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\", "
               "\"model.embed_tokens.weight\": \"model-00002-of-00002.safetensors\"}}");
    open_fails(path_in("tr"), AMK_ERR_NOT_FOUND, "maps tensor 'model.norm.weight' to "
               "'model-00001-of-00002.safetensors', which does not hold it");
    write_text(path_in("tr/model.safetensors.index.json"),
               "{\"weight_map\": {\"model.norm.weight\": \"../sh/model-00002-of-00002.safetensors\"}}");
    open_fails(path_in("tr"), AMK_ERR_PARSE, "is not a plain file name");
    write_text(path_in("tr/model.safetensors.index.json"), "{\"weight_map\": []}");
    open_fails(path_in("tr"), AMK_ERR_PARSE, "no weight_map object");
    /* the index's JSON errors name the index, line and column */
    write_text(path_in("tr/model.safetensors.index.json"), "{\"weight_map\": {");
    open_fails(path_in("tr"), AMK_ERR_PARSE, "tr/model.safetensors.index.json':1:17: unexpected end of input");
    open_fails(path_in("nope"), AMK_ERR_IO, "nope");
    free(s1);
    free(s2);
    free(idx);
}

/* The real model, when present (REFERENCE §3.1). */
static void test_real_smollm2(void) {
    static const char *const path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    static const char *const suffix[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
        "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj"};
    amk_model *m;
    const amk_llama_config *c;
    const amk_gguf *g;
    int counts[64], i, l, n_read = 0;
    int64_t total = 0;
    float *buf;
    clock_t t0;
    amk_diag d;
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "%s missing: run `make model`", path);
    if (!f) return;
    fclose(f);
    if (!(m = open_ok(path))) return;
    c = amk_model_config(m);
    CHECK_EQ_INT(c->n_layers, 30);
    CHECK_EQ_INT(c->hidden, 576);
    CHECK_EQ_INT(c->intermediate, 1536);
    CHECK_EQ_INT(c->n_heads, 9);
    CHECK_EQ_INT(c->n_kv_heads, 3);
    CHECK_EQ_INT(c->head_dim, 64);
    CHECK_EQ_INT(c->vocab, 49152);
    CHECK_EQ_INT(c->max_pos, 8192);
    CHECK(c->rope_theta == 100000.0f && c->rms_eps == 1e-5f && c->rope_llama3 == 0);
    CHECK_EQ_INT(c->tie_embeddings, 1);
    CHECK_EQ_INT(c->bos_id, 1);
    CHECK(c->n_eos == 1 && c->eos_ids[0] == 2);
    g = amk_model_gguf(m);
    memset(counts, 0, sizeof counts);
    for (i = 0; i < amk_gguf_n_tensors(g); i++) {
        uint32_t t = amk_gguf_tensor_at(g, i)->type;
        if (t < 64) counts[t]++;
    }
    printf("test_real_smollm2: tensor types:");
    for (i = 0; i < 64; i++)
        if (counts[i]) printf(" %s x%d", amk_gguf_type_name((uint32_t)i), counts[i]);
    printf("\n");
    buf = (float *)malloc((size_t)49152 * 576 * sizeof(float));
    t0 = clock();
    for (l = -1; l <= 30; l++)
        for (i = 0; i < (l < 0 || l == 30 ? (l < 0 ? 1 : 2) : 9); i++) {
            char name[96];
            int64_t shape[4], nel;
            int rank;
            if (l < 0) snprintf(name, sizeof name, "model.embed_tokens.weight");
            else if (l == 30) snprintf(name, sizeof name, i ? "lm_head.weight" : "model.norm.weight");
            else snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, suffix[i]);
            CHECK_EQ_INT(amk_model_tensor_shape(m, name, &rank, shape, &d), AMK_OK);
            nel = rank == 2 ? shape[0] * shape[1] : shape[0];
            CHECK_EQ_INT(amk_model_tensor_read(m, name, AMK_DTYPE_F32, buf, (size_t)nel * 4, &d), AMK_OK);
            CHECK(buf[0] == buf[0] && buf[nel - 1] == buf[nel - 1]);
            total += nel;
            n_read++;
        }
    printf("test_real_smollm2: read %d weights, %lld values as F32 in %.2f s\n", n_read,
           (long long)total, (double)(clock() - t0) / CLOCKS_PER_SEC);
    CHECK_EQ_INT(n_read, 30 * 9 + 3);
    { /* layer 0's q_proj in its own Q4_1 blocks (rows un-permuted): decoded, the F32 read's values */
        const char *q = "model.layers.0.self_attn.q_proj.weight";
        const int64_t nel = 576 * 576;
        const size_t nb = (size_t)amk_dtype_nbytes(AMK_DTYPE_Q4_1, nel);
        unsigned char *raw = (unsigned char *)malloc(nb);
        int dt = -1;
        int64_t k;
        CHECK_EQ_INT(amk_model_tensor_dtype(m, q, &dt, &d), AMK_OK);
        CHECK_EQ_INT(dt, AMK_DTYPE_Q4_1);
        CHECK_EQ_INT(amk_model_tensor_read(m, q, AMK_DTYPE_F32, buf, (size_t)nel * 4, &d), AMK_OK);
        CHECK_EQ_INT(amk_model_tensor_read(m, q, AMK_DTYPE_Q4_1, raw, nb, &d), AMK_OK);
        for (k = 0; k < nel && amk_dtype_load_f32(raw, nb, AMK_DTYPE_Q4_1, k) == buf[k]; k++) {}
        CHECK_MSG(k == nel, "%s in Q4_1 differs from its F32 read at %lld", q, (long long)k);
        free(raw);
    }
    free(buf);
    amk_model_close(m);
}

/* What amk_llm reports of the fold ("fold" progress): calls, and the last done and total. */
/* A tokenizer of n one-character tokens ('A', 'B', ...; n <= 58), no merges, BOS 1 and EOS 2: the
   tiny model's own (its embedding has VOCAB rows). */
static amk_tokenizer *tiny_tokenizer(int n) {
    static char text[58][2];
    const char *toks[58];
    amk_tokenizer_spec s;
    amk_tokenizer *t = NULL;
    int i;
    for (i = 0; i < n && i < 58; i++) {
        text[i][0] = (char)('A' + i);
        text[i][1] = 0;
        toks[i] = text[i];
    }
    memset(&s, 0, sizeof s);
    s.n_tokens = n;
    s.tokens = toks;
    s.pretok = AMK_PRETOK_GPT2;
    s.bos_id = 1;
    s.eos_id = 2;
    CHECK_EQ_INT(amk_tokenizer_create(&s, &t, NULL), AMK_OK);
    return t;
}

/* The tiny GGUF model opened on the reference VM with a tokenizer of n_tokens tokens (NULL and
   the error in d when it does not open). */
static amk_llm *open_tiny_llm(int n_tokens, int max_seq, amk_diag *d) {
    amk_llm_opts o;
    amk_llm *m = NULL;
    amk_model *mdl = NULL;
    gguf_opts go;
    memset(&go, 0, sizeof go);
    write_tiny_gguf(path_in("llm.gguf"), &go);
    CHECK_EQ_INT(amk_model_open(path_in("llm.gguf"), &mdl, d), AMK_OK);
    if (!mdl) return NULL;
    amk_llm_opts_default(&o);
    o.backend = AMK_BACKEND_CPU;
    o.build.num_sms = 8;
    o.build.max_seq = max_seq;
    amk_llm_open_model(mdl, tiny_tokenizer(n_tokens), &o, &m, d);
    return m;
}

/* Every public function of amk_llm.h, amk_model.h and amk_tok.h given NULL for a pointer argument:
   no crash, AMK_ERR_INVALID_ARG with a message naming the argument where the function returns a
   result, nothing done by a free-like one (amk_sampler_free, amk_*_close, amk_tokenizer_free). A
   call that takes objects over frees them also when out is NULL (ASan's leak check sees it). */
static void test_null_args(void) {
    amk_diag d;
    amk_llm *m = (amk_llm *)&m;
    amk_model *mdl = (amk_model *)&mdl;
    amk_tokenizer *t = (amk_tokenizer *)&t;
    amk_gguf *g = (amk_gguf *)&g;
    amk_safetensors st;
    amk_llama_config cfg;
    amk_llm_opts o;
    amk_sampler smp;
    float f[4] = {0, 1, 2, 3};
    int ids[4], rank;
    int64_t shape[4];
    size_t len;
    gguf_opts go;
#define EXPECT_NULL(call, want) do { amk_diag_clear(&d); CHECK_EQ_INT((call), AMK_ERR_INVALID_ARG); \
        CHECK_MSG(strstr(d.message, (want)) != NULL, "%s: message '%s' lacks '%s'", #call, d.message, (want)); } while (0)
    /* amk_llm.h */
    amk_llm_opts_default(NULL);
    amk_llama_build_opts_default(NULL);
    amk_llm_opts_default(&o);
    o.backend = AMK_BACKEND_CPU;
    EXPECT_NULL(amk_llm_open("x.gguf", &o, NULL, &d), "out is NULL");
    EXPECT_NULL(amk_llm_open(NULL, &o, &m, &d), "path is NULL");
    CHECK(m == NULL);
    EXPECT_NULL(amk_llm_open_model(NULL, NULL, &o, NULL, &d), "out is NULL");
    memset(&go, 0, sizeof go);
    write_tiny_gguf(path_in("null.gguf"), &go);
    CHECK_EQ_INT(amk_model_open(path_in("null.gguf"), &mdl, &d), AMK_OK);
    EXPECT_NULL(amk_llm_open_model(mdl, tiny_tokenizer(VOCAB), &o, NULL, &d), "out is NULL"); /* both freed */
    m = (amk_llm *)&m;
    EXPECT_NULL(amk_llm_open_model(NULL, tiny_tokenizer(VOCAB), &o, &m, &d), "NULL model");
    CHECK(m == NULL);
    CHECK_EQ_INT(amk_llama_config_preset("smollm2-135m", &cfg), AMK_OK);
    EXPECT_NULL(amk_llm_open_random(&cfg, &o, NULL, &d), "out is NULL");
    EXPECT_NULL(amk_llm_open_random(NULL, &o, &m, &d), "cfg is NULL");
    EXPECT_NULL(amk_llm_step(NULL, 1, 0, NULL, NULL, &d), "m is NULL");
    EXPECT_NULL(amk_llm_generate(NULL, 1, 0, 1, ids, &d), "NULL argument");
    EXPECT_NULL(amk_llm_reset(NULL, &d), "m is NULL");
    EXPECT_NULL(amk_llm_seek(NULL, 0, &d), "m is NULL");
    amk_llm_close(NULL);
    CHECK(amk_llm_config(NULL) == NULL && amk_llm_program(NULL) == NULL && amk_llm_tokenizer(NULL) == NULL);
    CHECK(amk_llm_max_seq(NULL) == 0 && amk_llm_cuda(NULL) == NULL);
    CHECK_STR(amk_llm_backend_name(NULL), "cpu");
    amk_sampler_init(NULL, 1.0f, 0, 1.0f, 1);
    amk_sampler_free(NULL);
    amk_sampler_init(&smp, 1.0f, 0, 1.0f, 1);
    CHECK_EQ_INT(amk_sampler_sample(NULL, f, 4), -1);
    CHECK_EQ_INT(amk_sampler_sample(&smp, NULL, 4), -1);
    amk_sampler_free(&smp);
    /* amk_arch.h's config loader (the random-weight mode's) */
    EXPECT_NULL(amk_llama_config_load_json(NULL, &cfg, &d), "path is NULL");
    EXPECT_NULL(amk_llama_config_load_json("tests/data/cli/tiny_config.json", NULL, &d), "cfg is NULL");
    /* amk_model.h */
    EXPECT_NULL(amk_model_open(NULL, &mdl, &d), "path is NULL");
    EXPECT_NULL(amk_model_open("x", NULL, &d), "out is NULL");
    amk_model_close(NULL);
    CHECK(amk_model_config(NULL) == NULL && amk_model_gguf(NULL) == NULL && amk_model_dir(NULL) == NULL);
    EXPECT_NULL(amk_model_tensor_shape(NULL, "model.norm.weight", &rank, shape, &d), "NULL model");
    EXPECT_NULL(amk_model_tensor_read(NULL, "model.norm.weight", AMK_DTYPE_F32, f, 16, &d), "NULL model");
    EXPECT_NULL(amk_model_tensor_dtype(NULL, "model.norm.weight", &rank, &d), "NULL model");
    CHECK_EQ_INT(amk_model_open(path_in("null.gguf"), &mdl, &d), AMK_OK);
    if (mdl) {
        EXPECT_NULL(amk_model_tensor_dtype(mdl, "model.norm.weight", NULL, &d), "NULL dtype");
        EXPECT_NULL(amk_model_tensor_dtype(mdl, NULL, &rank, &d), "tensor name is NULL");
        EXPECT_NULL(amk_model_tensor_shape(mdl, NULL, &rank, shape, &d), "tensor name is NULL");
        CHECK_EQ_INT(amk_model_tensor_shape(mdl, "model.norm.weight", NULL, NULL, &d), AMK_OK);
        EXPECT_NULL(amk_model_tensor_read(mdl, NULL, AMK_DTYPE_F32, f, 16, &d), "tensor name is NULL");
        EXPECT_NULL(amk_model_tensor_read(mdl, "model.norm.weight", AMK_DTYPE_F32, NULL, HIDDEN * 4, &d), "NULL destination");
        amk_model_close(mdl);
    }
    EXPECT_NULL(amk_safetensors_open(NULL, &st, &d), "no path");
    EXPECT_NULL(amk_safetensors_open("x", NULL, &d), "no output");
    EXPECT_NULL(amk_safetensors_parse(f, 16, NULL, &d), "no output");
    EXPECT_NULL(amk_safetensors_parse(NULL, 16, &st, &d), "no data");
    EXPECT_NULL(amk_safetensors_write(NULL, NULL, 0, &d), "bad path or entries");
    EXPECT_NULL(amk_safetensors_write("x", NULL, 1, &d), "bad path or entries");
    CHECK(amk_safetensors_find(NULL, "a") == NULL);
    amk_safetensors_close(NULL);
    EXPECT_NULL(amk_gguf_open(NULL, &g, &d), "path is NULL");
    EXPECT_NULL(amk_gguf_open("x", NULL, &d), "out is NULL");
    EXPECT_NULL(amk_gguf_parse(NULL, 16, &g, &d), "data is NULL");
    EXPECT_NULL(amk_gguf_parse(f, 16, NULL, &d), "out is NULL");
    amk_gguf_close(NULL);
    CHECK(amk_gguf_version(NULL) == 0 && amk_gguf_n_tensors(NULL) == 0 && amk_gguf_tensor_at(NULL, 0) == NULL);
    CHECK(amk_gguf_find_tensor(NULL, "a") == NULL && amk_gguf_n_kv(NULL) == 0 && amk_gguf_kv_key(NULL, 0) == NULL);
    CHECK(amk_gguf_find_key(NULL, "a") == -1 && amk_gguf_kv_type(NULL, 0) == 0);
    CHECK(!amk_gguf_get_int(NULL, "a", NULL) && !amk_gguf_get_float(NULL, "a", NULL) && !amk_gguf_get_bool(NULL, "a", NULL));
    CHECK(amk_gguf_get_string(NULL, "a", &len) == NULL && amk_gguf_array_len(NULL, "a", NULL) == -1);
    CHECK(amk_gguf_array_string(NULL, "a", 0, &len) == NULL && !amk_gguf_array_int(NULL, "a", 0, NULL));
    CHECK(!amk_gguf_array_float(NULL, "a", 0, NULL));
    EXPECT_NULL(amk_gguf_dequant(AMK_GGML_F32, NULL, 16, 4, AMK_DTYPE_F32, f, &d), "NULL buffer");
    EXPECT_NULL(amk_gguf_dequant(AMK_GGML_F32, f, 16, 4, AMK_DTYPE_F32, NULL, &d), "NULL buffer");
    /* amk_tok.h */
    EXPECT_NULL(amk_tokenizer_create(NULL, &t, &d), "bad spec");
    EXPECT_NULL(amk_tokenizer_create(NULL, NULL, &d), "out is NULL");
    EXPECT_NULL(amk_tokenizer_from_gguf(NULL, &t, &d), "gguf is NULL");
    EXPECT_NULL(amk_tokenizer_from_json(NULL, &t, &d), "path is NULL");
    EXPECT_NULL(amk_tokenizer_from_json("x", NULL, &d), "out is NULL");
    EXPECT_NULL(amk_tokenizer_from_json_text(NULL, 0, NULL, 0, &t, &d), "json is NULL");
    EXPECT_NULL(amk_tokenizer_from_model(NULL, &t, &d), "NULL argument");
    amk_tokenizer_free(NULL);
    CHECK_EQ_INT(amk_tokenizer_encode(NULL, "a", 1, 0, ids, 4), -1);
    t = tiny_tokenizer(VOCAB);
    if (t) {
        CHECK_EQ_INT(amk_tokenizer_encode(t, NULL, 1, 0, ids, 4), -1);
        CHECK_EQ_INT(amk_tokenizer_encode(t, "A", 1, 0, NULL, 4), -1);
        CHECK_EQ_INT(amk_tokenizer_encode(t, "A", 1, 0, NULL, 0), 1); /* the count alone */
        CHECK_EQ_INT(amk_tokenizer_decode(t, 0, NULL, 4), -1);
        CHECK(amk_tokenizer_token_bytes(t, 0, NULL) != NULL);
        CHECK_EQ_INT(amk_tokenizer_token_id(t, NULL), -1);
        CHECK_EQ_INT(amk_tokenizer_pretokenize(AMK_PRETOK_GPT2, NULL, 1, NULL, 0), -1);
        CHECK_EQ_INT(amk_tokenizer_chat_prompt(NULL, NULL, NULL, NULL, 0), -1);
        CHECK(amk_tokenizer_chat_prompt(NULL, NULL, "hi", NULL, 16) > 0);
        amk_tokenizer_free(t);
    }
    CHECK(amk_tokenizer_decode(NULL, 0, (char *)ids, 4) == -1 && amk_tokenizer_token_bytes(NULL, 0, &len) == NULL);
    CHECK(amk_tokenizer_n_vocab(NULL) == 0 && amk_tokenizer_bos(NULL) == -1 && amk_tokenizer_eos(NULL) == -1);
    CHECK(amk_tokenizer_add_bos(NULL) == 0 && amk_tokenizer_is_special(NULL, 0) == 0 && amk_tokenizer_byte_token(NULL, 65) == -1);
#undef EXPECT_NULL
}

/* The tokenizer against the embedding (issue 38): more tokens than its rows is refused when the
   model opens (an id past them would read outside the table); fewer is legal (HF pads the
   embedding). The config's BOS and EOS ids must lie within the rows too. */
static void test_tokenizer_vocab(void) {
    amk_diag d;
    amk_llm *m;
    amk_diag_clear(&d);
    m = open_tiny_llm(VOCAB + 8, 16, &d);
    CHECK(m == NULL);
    CHECK_EQ_INT(d.result, AMK_ERR_MISMATCH);
    CHECK_MSG(strstr(d.message, "the tokenizer has 40 tokens, more than the 32 rows of the embedding") != NULL, "%s", d.message);
    amk_diag_clear(&d);
    m = open_tiny_llm(VOCAB - 8, 16, &d);
    CHECK_MSG(m != NULL, "%s", d.message);
    amk_llm_close(m);
    make_dir("ids");
    write_shard(path_in("ids/model.safetensors"), 0, n_w, 0);
    config_fails(path_in("ids"), "\"bos_token_id\": 32", AMK_ERR_PARSE, "bos_token_id 32 is outside the vocabulary of 32 tokens");
    config_fails(path_in("ids"), "\"eos_token_id\": [2, 49152]", AMK_ERR_PARSE,
                 "eos_token_id 49152 is outside the vocabulary of 32 tokens");
}

/* Positions go in order (issue 38): a fresh model's next position is 0, a step moves it to pos + 1,
   a step past it is refused with AMK_ERR_INVALID_ARG (nothing run), an earlier one is legal (the
   rows after it no longer count); amk_llm_generate likewise; amk_llm_reset starts over at 0 and
   amk_llm_seek moves it on purpose. */
static void test_step_order(void) {
    amk_diag d;
    amk_llm *m;
    int a = -1, g[4];
    amk_diag_clear(&d);
    m = open_tiny_llm(VOCAB, 16, &d);
    CHECK_MSG(m != NULL, "%s", d.message);
    if (!m) return;
    CHECK_EQ_INT(amk_llm_step(m, 3, 5, NULL, &a, &d), AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, "position 5 skips ahead: the KV cache holds no position yet") != NULL, "%s", d.message);
    CHECK_EQ_INT(a, -1);
    CHECK_EQ_INT(amk_llm_step(m, 3, 0, NULL, &a, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_step(m, 3, 2, NULL, &a, &d), AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, "holds positions 0..0, so the next step is at position 1 at most") != NULL, "%s", d.message);
    CHECK_EQ_INT(amk_llm_step(m, 3, 1, NULL, &a, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_step(m, 4, 0, NULL, &a, &d), AMK_OK); /* back: position 0 again */
    CHECK_EQ_INT(amk_llm_step(m, 3, 2, NULL, &a, &d), AMK_ERR_INVALID_ARG); /* row 1 no longer counts */
    CHECK_EQ_INT(amk_llm_generate(m, 3, 3, 2, g, &d), AMK_ERR_INVALID_ARG);
    CHECK(strstr(d.message, "amk_llm_generate: position 3 skips ahead") != NULL);
    CHECK_EQ_INT(amk_llm_generate(m, 3, 1, 2, g, &d), AMK_OK); /* positions 1, 2 */
    CHECK_EQ_INT(amk_llm_step(m, g[1], 3, NULL, &a, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_reset(m, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_step(m, 3, 1, NULL, &a, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_llm_seek(m, 17, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_llm_seek(m, -1, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_llm_seek(m, 7, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_step(m, 3, 7, NULL, &a, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_step(m, 3, 16, NULL, &a, &d), AMK_ERR_RUNTIME); /* outside the cache: as before */
    amk_llm_close(m);
}

/* The context against the model and the machine (issue 38): build.max_seq above the config's
   max_pos is refused before anything is built; on the reference VM a KV cache larger than the
   machine's physical memory is refused before it is allocated (2 TB here: 8 layers of 8 KV heads
   of 256 at 16M rows, F32), as AMK_ERR_INVALID_ARG naming the KV cache. */
static void test_context_limits(void) {
    amk_llama_config c;
    amk_llm_opts o;
    amk_llm *m = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    memset(&c, 0, sizeof c);
    snprintf(c.arch, sizeof c.arch, "llama");
    c.n_layers = 8; c.hidden = 64; c.intermediate = 64; c.n_heads = 8; c.n_kv_heads = 8; c.head_dim = 256;
    c.vocab = 40; c.max_pos = 256; c.rms_eps = 1e-5f; c.rope_theta = 10000.0f; c.tie_embeddings = 1;
    c.bos_id = 1; c.eos_ids[0] = 2; c.n_eos = 1;
    amk_llm_opts_default(&o);
    o.backend = AMK_BACKEND_CPU;
    o.build.num_sms = 8;
    o.build.max_seq = 257;
    CHECK_EQ_INT(amk_llm_open_random(&c, &o, &m, &d), AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, "a context of 257 tokens is longer than the model's context of 256") != NULL, "%s", d.message);
    c.max_pos = 1 << 24;
    o.build.max_seq = 1 << 24;
    CHECK_EQ_INT(amk_llm_open_random(&c, &o, &m, &d), AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, "the KV cache of a 16777216-token context needs 2199.0 GB") != NULL, "%s", d.message);
    CHECK(m == NULL);
    o.build.max_seq = 16;
    CHECK_EQ_INT(amk_llm_open_random(&c, &o, &m, &d), AMK_OK);
    amk_llm_close(m);
}

static int fold_calls;
static uint64_t fold_done, fold_total;
static void fold_progress(void *user, const char *what, uint64_t done, uint64_t total) {
    (void)user;
    if (strcmp(what, "fold") != 0) return;
    fold_calls++;
    fold_done = done;
    fold_total = total;
}

/* The loader's folded Q/K/V (qkv_fold 1): the tiny model from a GGUF file (Q8_0, F16 and F32
   tensors) and from safetensors, opened folded and unfolded on the reference VM: W_cat.0 derived
   from the file's q/k/v_proj and input_layernorm of layer 1 and down_proj of layer 0 as F32, so the
   same greedy tokens over 8 steps and logits within 2e-5 (fp32 sums in another order; the folded
   test of test_llama.c measured 1e-6); progress "fold" ends at its total (layer 0's rows). */
static void test_llm_fold(void) {
    static const char *const paths[2] = {"fold.gguf", "st"};
    gguf_opts go;
    int f, k, pos, i;
    memset(&go, 0, sizeof go);
    write_tiny_gguf(path_in("fold.gguf"), &go);
    for (f = 0; f < 2; f++) {
        amk_llm *m[2] = {NULL, NULL};
        const float *lg[2];
        int a[2], tok = 3;
        double worst = 0.0;
        amk_diag d;
        amk_diag_clear(&d);
        for (k = 0; k < 2; k++) {
            amk_llm_opts o;
            amk_model *mdl = open_ok(path_in(paths[f]));
            amk_tokenizer *tok_k = NULL;
            if (!mdl) continue;
            tok_k = tiny_tokenizer(VOCAB);
            CHECK(tok_k != NULL);
            amk_llm_opts_default(&o);
            o.backend = AMK_BACKEND_CPU;
            o.build.num_sms = 8;
            o.build.max_seq = 16;
            o.build.kv_splits = 1;
            o.build.attn_o = 1;
            o.build.mlp_accum = 1;
            o.build.qkv_fold = k;
            o.progress = fold_progress;
            fold_calls = 0;
            CHECK_EQ_INT(amk_llm_open_model(mdl, tok_k, &o, &m[k], &d), AMK_OK);
            if (!m[k]) fprintf(stderr, "open %s: %s\n", paths[f], d.message);
            CHECK_EQ_INT(fold_calls > 0, k);
            if (k) CHECK(fold_done == INTER && fold_total == INTER);
        }
        if (m[0] && m[1]) {
            char buf[8];
            CHECK(amk_program_meta_string(amk_llm_program(m[1]), "qkv_fold", buf, sizeof buf));
            for (pos = 0; pos < 8; pos++) {
                for (k = 0; k < 2; k++) CHECK_EQ_INT(amk_llm_step(m[k], tok, pos, &lg[k], &a[k], &d), AMK_OK);
                for (i = 0; i < VOCAB; i++)
                    if (fabs((double)lg[0][i] - (double)lg[1][i]) > worst) worst = fabs((double)lg[0][i] - (double)lg[1][i]);
                CHECK_EQ_INT(a[0], a[1]);
                tok = a[0];
            }
            CHECK_MSG(worst < 2e-5, "%s: folded logits differ by %.3g", paths[f], worst);
        }
        amk_llm_close(m[0]);
        amk_llm_close(m[1]);
    }
}

static void cleanup(void) {
    char cmd[300];
    /* why: the test made this tree under /tmp with a pid-unique name; remove it whole */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(void) {
    int i;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/amk_test_model_%ld", (long)getpid());
    mkdir(tmpdir, 0755);
    build_weights();
    write_st_models();
    RUN(test_gguf_untied);
    RUN(test_gguf_tied);
    RUN(test_safetensors_dir);
    RUN(test_tokenizer_from_model_dir);
    RUN(test_safetensors_sharded);
    RUN(test_untied_config_without_lm_head);
    RUN(test_llama3_rope);
    RUN(test_errors);
    RUN(test_shard_errors);
    RUN(test_not_a_model);
    RUN(test_real_smollm2);
    RUN(test_llm_fold);
    RUN(test_null_args);
    RUN(test_tokenizer_vocab);
    RUN(test_step_order);
    RUN(test_context_limits);
    cleanup();
    for (i = 0; i < n_w; i++) free(W[i].e);
    TEST_SUMMARY();
}
