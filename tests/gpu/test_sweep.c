/* tests/gpu/test_sweep.c - the Llama builder's configurations on the GPU against the reference VM
   (issue 38: every emitted program runs; `make test-gpu-sweep`).

   A configuration is a shape (SmolLM2-135M, Llama-3.2-1B and Llama-3-8B cut to a few layers with
   their per-layer shapes, and shapes of the sweep's own: GQA 1, 3, 4 and 8, head_dim 64 and 128,
   hidden sizes that are not multiples of 128), a weight and an activation dtype (the five pairs of
   SW_DTYPES), a context (max_seq) and, for a few, a builder option. Each is opened twice through
   amk_llm, on the CUDA runtime and on the reference VM, from one safetensors file of random
   weights the test writes first, so both load the same weights through the same loader (the Q/K
   interleave, the transposes, the folded weight derived from the file alike). Both KV caches are
   then filled with the same random rows, keys scaled so the softmax is peaked (why: a step at a
   late position then attends over keys that matter, in every split and chunk; over zero rows its
   attention would be a dilute average a wrong row hides in). Both step through the same positions
   (sw_positions: the first rows, 16- and 32-row group edges, the edges of the KV splits and of a
   512-row chunk, the last two rows of the cache), amk_llm_seek to each, with the same tokens; then
   greedy decoding of the last SW_CHAIN positions: amk_llm_generate on the GPU (chained steps,
   one launch), steps on the reference VM.

   Checks, per step: the GPU's logits within tol * max|reference logit| of the reference's (tol by
   the activation dtype: sw_tol), nothing non-finite where the reference is finite; the device's
   greedy token equal to the argmax of the logits it returned; the greedy token equal to the
   reference's, or a near tie (the reference's logit of the GPU's token within 2 tol of its max).
   The chained tokens equal the reference's greedy ones up to the first near tie. A configuration
   the builder or runtime refuses fails, but for the documented refusal listed in sw_configs
   (SW_EXPECT_TOO_LONG), which must be refused with that error; an explicit qkv_fold 1 the GPU's
   forms do not take runs unfolded on the GPU (SW_EXPECT_GPU_UNFOLDS). A full run also checks that the sweep met
   every device form it claims to (the "coverage" line).

   Both sides run in worker threads: the reference VM's in most of the CPUs (it is single-threaded
   and slow), the GPU's in a few (its time is mostly the host's: the weights read, converted and
   uploaded; the steps on the device one configuration at a time); each configuration prints one
   line, in order, when both of its sides are done:
   its result, the worst error as a fraction of the tolerance, the step's shape on the device
   (KV splits, folded, ATTENTION_O, tasks in the lean, ring and lean-attention forms, the image) and
   the time each side took.

   Usage: test_sweep [--list] [--ref-only] [--self] [FILTER ...]
     FILTER    run only the configurations whose name holds every FILTER (names look like
               "smollm2/BF16-F32/ctx257", "8b/F16-F16/ctx8192", "g4h128/BF16-BF16/ctx33",
               "smollm2/BF16-F32/ctx300/qkv-fold1": `--list` prints them all)
     --list     print the configurations and exit
     --ref-only the reference VM's side alone (no GPU: its time, and that every step runs)
     --self     the GPU's side on the reference VM too (no GPU: checks the harness; errors are 0)
   Env: AMK_SWEEP_ONLY (filters as the arguments, separated by spaces or commas),
        AMK_SWEEP_THREADS (reference VM threads; default the CPUs less the GPU's threads and one),
        AMK_SWEEP_GPU_THREADS (threads opening and running configurations on the GPU, each its
        own amk_cuda; default 3; 1: one configuration on the GPU at a time),
        AMK_SWEEP_DIR (where the model files go; default $TMPDIR or /tmp; removed at the end
        unless AMK_SWEEP_KEEP=1), AMK_TEST_SEED (default from the clock, printed),
        AMK_TEST_SLOW (GPU step timeout multiplier). */
#define _POSIX_C_SOURCE 200809L
#define AMK_IMPLEMENTATION
#include "../../amk.h"
#include "../amk_test.h"
#include "amk_device_image.h"
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define SW_MAX_STEPS 24 /* positions a configuration steps through (sw_positions makes at most 20) */
#define SW_CHAIN 4      /* greedy steps at the end of the cache: one chained launch on the GPU */
#define SW_MAX_CONFIGS 512

static uint64_t g_seed;
static double g_slow = 1.0;
static int g_self, g_ref_only;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- what is swept -------------------------------------------------------------------------------

   Contexts. The device's form or the KV split changes at these (each swept just below, at and just
   above where it is one number):
     1            the smallest cache: one split of one row
     8, 9         the lean ATTENTION_O's tensor copies take cache rows in 8s (amk_plan_attn_rows)
     16, 17       the tensor-core attention's keys come in groups of 16 (amk_attn_decode_mma,
                  amk_plan_want's step)
     32, 33       the CUDA-core attention's chunk is a multiple of 32 rows (amk_attn_decode_cc)
     255-257      AMK_ATTN_SPEC_ROWS (amk_tune.h, 256): up to it the lean ATTENTION_O takes a task
                  (amk_plan_attn_lean_bytes: kv_len <= AMK_ATTN_SPEC_ROWS and <= threads / heads),
                  so the folded step is built (amk__lb_forms_ok: its PRENORM tasks run only in that
                  form), and the tensor-core ATTENTION_DECODE loads its window's rows with q,
                  before the position (amk_attn_decode_mma)
     511-513      up to 512 rows one KV split (amk__lb_auto_splits), which ATTENTION_O and the fold
                  need (pl->ao: S == 1); above it ATTENTION_DECODE + ATTENTION_COMBINE + O tiles,
                  splits of at least 128 rows up to a task a kv head a split on each SM (513: 5
                  splits of 112 rows). 512 is also a chunk's most rows (amk_attn_decode_mma,
                  amk_attn_decode_cc, amk_plan_want)
     1024-3585    k * 512, k * 512 + 1: 8 splits at 1024 and 1025 (windows of 128 and 144 rows),
                  more than 8 (stacked partial sets, a multiple of 8) beyond as the kv heads allow
                  (SmolLM2's 3 kv heads: 16 at 2048, 24 at 3072)
     4096, 4097   16 splits of 256 and 272 rows for 8 kv heads (8B, 1B), 32 of 128 and 129 for
                  SmolLM2; the CUDA-core path's chunk is what the launch's shared memory holds
     6000         16 splits of 384 rows (8 kv heads), or more splits of fewer rows
     8191, 8192   the model's context (SmolLM2 and Llama-3-8B: 8192): 16 splits of 512 rows (8 kv
                  heads), 40 of 208 for SmolLM2
   Positions within a context are sw_positions'. Shapes (per layer): the lean and ring tiles take K
   = hidden <= 768 (AMK_LEAN_PPL, AMK_RING_VPL) with BF16 weights; the one-step MLP and ATTENTION_O
   stage at most AMK_ROWS_STAGE_MAX (48 KB) of rows; the SM sets and the fold need small MLP and
   Q/K/V tiles (amk__lb_sm_sets); the PRENORM ATTENTION_O head_dim <= 64; the tensor-core attention
   BF16 caches; the tensor copies head_dim 64. The shapes of the sweep's own fall on both sides of
   those. */
static const int CTX_SMOL[] = {1,    8,    9,    16,   17,   32,   33,   255,  256,  257,  511,  512,  513,  1024, 1025,
                               1536, 1537, 2048, 2049, 2560, 2561, 3072, 3073, 3584, 3585, 4096, 4097, 6000, 8191, 8192};
static const int CTX_1B[] = {1, 17, 256, 257, 513, 4097, 8192};
static const int CTX_8B[] = {1, 256, 257, 4097, 8192};
static const int CTX_OWN[] = {33, 257, 4097};

typedef struct sw_shape {
    const char *name, *preset; /* preset: amk_llama_config_preset's name; NULL: the fields below */
    int layers, vocab;         /* the cut: layers kept; the vocabulary (0: the preset's) */
    int hidden, inter, heads, kv_heads, head_dim;
    int file_dtype;            /* the weights file's; why BF16 for the two large ones: half the bytes to write and read */
    const int *ctx;            /* the contexts swept, n_ctx of them */
    int n_ctx;
} sw_shape;

#define SW_CTX(a) a, (int)(sizeof a / sizeof a[0])
static const sw_shape SW_SHAPES[] = {
    {"smollm2", "smollm2-135m", 3, 0, 0, 0, 0, 0, 0, AMK_DTYPE_F32, SW_CTX(CTX_SMOL)}, /* 3 layers: a middle one folds both ways */
    {"1b", "llama3.2-1b", 2, 16384, 0, 0, 0, 0, 0, AMK_DTYPE_BF16, SW_CTX(CTX_1B)},
    {"8b", "llama3-8b", 1, 16384, 0, 0, 0, 0, 0, AMK_DTYPE_BF16, SW_CTX(CTX_8B)},
    /* gGhD: GQA G, head_dim D (q rows = heads * head_dim need not be hidden) */
    {"g1h64", NULL, 2, 5000, 320, 864, 5, 5, 64, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
    {"g1h128", NULL, 2, 5000, 704, 1856, 6, 6, 128, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
    {"g3h64", NULL, 2, 5000, 960, 2560, 15, 5, 64, AMK_DTYPE_F32, SW_CTX(CTX_OWN)}, /* SmolLM2-360M's layer: K > 768 */
    {"g3h64s", NULL, 2, 5000, 392, 1024, 6, 2, 64, AMK_DTYPE_F32, SW_CTX(CTX_OWN)}, /* small enough for the SM sets and the fold */
    {"g3h128", NULL, 2, 5000, 832, 2240, 6, 2, 128, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
    {"g4h64", NULL, 2, 5000, 544, 1472, 8, 2, 64, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
    {"g4h128", NULL, 2, 5000, 1000, 2816, 8, 2, 128, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
    {"g8h64", NULL, 2, 5000, 448, 1216, 8, 1, 64, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
    {"g8h128", NULL, 2, 5000, 1800, 4800, 16, 2, 128, AMK_DTYPE_F32, SW_CTX(CTX_OWN)},
};
#define SW_N_SHAPES ((int)(sizeof SW_SHAPES / sizeof SW_SHAPES[0]))

/* Weight and activation dtypes: `amk generate --dtype` sets the weights' (activations F32); `amk
   bench` runs BF16 weights with BF16 activations; F16 with F16 the same on the other half-float. */
static const int SW_DTYPES[][2] = {{AMK_DTYPE_F32, AMK_DTYPE_F32}, {AMK_DTYPE_BF16, AMK_DTYPE_F32},
                                   {AMK_DTYPE_F16, AMK_DTYPE_F32}, {AMK_DTYPE_BF16, AMK_DTYPE_BF16},
                                   {AMK_DTYPE_F16, AMK_DTYPE_F16}};
#define SW_N_DTYPES ((int)(sizeof SW_DTYPES / sizeof SW_DTYPES[0]))

enum {
    SW_EXPECT_RUNS = 0,
    SW_EXPECT_TOO_LONG,   /* a context longer than the model's: both opens INVALID_ARG (amk_llm_open) */
    SW_EXPECT_GPU_UNFOLDS /* qkv_fold 1 where no lean form takes the folded tasks: the reference VM runs
                             it folded, the GPU's amk_llm builds it unfolded (amk_llm_note), and the two
                             agree */
};

typedef struct sw_config {
    char name[80];
    int shape, wdt, adt, ctx;
    amk_llama_build_opts build; /* max_seq, the dtypes and the option named */
    int expect;
} sw_config;

static sw_config g_cfgs[SW_MAX_CONFIGS];
static int g_n_cfgs;

/* Appends a configuration: shape s, dtypes pair dt, context ctx, with the option `opt` (NULL: the
   builder's defaults) set to value v; its name says all of that. */
static void sw_add(int s, int dt, int ctx, const char *opt, int v, int expect) {
    sw_config *c;
    if (g_n_cfgs >= SW_MAX_CONFIGS) return;
    c = &g_cfgs[g_n_cfgs++];
    memset(c, 0, sizeof *c);
    c->shape = s;
    c->wdt = SW_DTYPES[dt][0];
    c->adt = SW_DTYPES[dt][1];
    c->ctx = ctx;
    c->expect = expect;
    amk_llama_build_opts_default(&c->build);
    c->build.max_seq = ctx;
    c->build.weight_dtype = c->wdt;
    c->build.act_dtype = c->adt;
    snprintf(c->name, sizeof c->name, "%s/%s-%s/ctx%d", SW_SHAPES[s].name, amk_dtype_name(c->wdt),
             amk_dtype_name(c->adt), ctx);
    if (!opt) return;
    snprintf(c->name + strlen(c->name), sizeof c->name - strlen(c->name), "/%s%d", opt, v);
    if (strcmp(opt, "mlp-steps") == 0) c->build.mlp_accum = v == 1;
    else if (strcmp(opt, "attn-steps") == 0) c->build.attn_o = v == 1;
    else if (strcmp(opt, "qkv-fold") == 0) c->build.qkv_fold = v;
    else if (strcmp(opt, "kv-splits") == 0) c->build.kv_splits = v;
    else if (strcmp(opt, "spec-ops") == 0) c->build.spec_ops = v;
    else if (strcmp(opt, "sms") == 0) c->build.num_sms = v;
}

/* Every shape at each of its contexts in every dtype pair; then the builder's options as `amk
   build` and `amk generate` take them (--mlp-steps, --attn-steps, --qkv-fold, --kv-splits,
   --spec-ops, --sms), each where it changes the step; then the documented refusal and the folds
   the GPU builds unfolded. */
static void sw_configs(void) {
    int s, k, dt;
    for (s = 0; s < SW_N_SHAPES; s++)
        for (k = 0; k < SW_SHAPES[s].n_ctx; k++)
            for (dt = 0; dt < SW_N_DTYPES; dt++) sw_add(s, dt, SW_SHAPES[s].ctx[k], NULL, 0, SW_EXPECT_RUNS);
    sw_add(0, 1, 128, "mlp-steps", 2, SW_EXPECT_RUNS);  /* SmolLM2 without the one-step MLP (and so ATTENTION_O) */
    sw_add(0, 1, 128, "attn-steps", 2, SW_EXPECT_RUNS); /* ... without ATTENTION_O (and so the fold) */
    sw_add(0, 1, 128, "qkv-fold", 0, SW_EXPECT_RUNS);   /* ... unfolded, the SM sets kept */
    sw_add(0, 3, 128, "qkv-fold", 0, SW_EXPECT_RUNS);
    sw_add(0, 1, 300, "kv-splits", 3, SW_EXPECT_RUNS);  /* windows of 100 rows: ATTENTION_DECODE's early loads with COMBINE */
    sw_add(0, 3, 300, "kv-splits", 3, SW_EXPECT_RUNS);
    sw_add(0, 3, 64, "kv-splits", 8, SW_EXPECT_RUNS);   /* windows of 8 rows */
    /* the split counts AMK's choice (one, or as many as fill the SMs) leaves out, and stacked sets
       beyond the automatic 16: 24 splits (3 sets an input), 64 (8 sets) */
    sw_add(0, 3, 300, "kv-splits", 2, SW_EXPECT_RUNS);
    sw_add(0, 1, 300, "kv-splits", 4, SW_EXPECT_RUNS);
    sw_add(0, 3, 300, "kv-splits", 6, SW_EXPECT_RUNS);
    sw_add(0, 1, 300, "kv-splits", 7, SW_EXPECT_RUNS);
    sw_add(0, 3, 1025, "kv-splits", 24, SW_EXPECT_RUNS);
    sw_add(0, 1, 2049, "kv-splits", 64, SW_EXPECT_RUNS);
    sw_add(0, 1, 300, "spec-ops", 1, SW_EXPECT_RUNS);   /* the spec's opcodes 0-18 alone */
    sw_add(0, 3, 1025, "spec-ops", 1, SW_EXPECT_RUNS);
    sw_add(0, 3, 128, "sms", 64, SW_EXPECT_RUNS);       /* fewer SMs than the device: larger tiles, no SM sets */
    sw_add(1, 3, 256, "mlp-steps", 1, SW_EXPECT_RUNS);  /* Llama-3.2-1B's MLP in one step: W_downT's rows too large to stage */
    sw_add(1, 3, 256, "attn-steps", 1, SW_EXPECT_RUNS); /* ATTENTION_O forced: its rows of W_oT too large to stage */
    sw_add(2, 3, 128, "mlp-steps", 1, SW_EXPECT_RUNS);
    sw_add(0, 1, 8193, NULL, 0, SW_EXPECT_TOO_LONG);
    sw_add(0, 1, 300, "qkv-fold", 1, SW_EXPECT_GPU_UNFOLDS); /* past 256 rows no lean ATTENTION_O */
    sw_add(0, 0, 128, "qkv-fold", 1, SW_EXPECT_GPU_UNFOLDS); /* F32 weights: the lean MLP tile takes BF16 rows only */
    for (k = 0; k < g_n_cfgs; k++)
        if (g_cfgs[k].expect == SW_EXPECT_TOO_LONG) strcat(g_cfgs[k].name, "/too-long");
}

/* ---- the model files ------------------------------------------------------------------------------ */

typedef struct sw_file {
    int wanted;              /* a selected configuration uses the shape */
    amk_llama_config cfg;
    char dir[600];           /* config.json and model.safetensors */
    amk_result rc;
    char msg[512];
    double ms;
} sw_file;

static sw_file g_files[SW_N_SHAPES];
static char g_root[512];

/* The config of shape s, its cut applied. */
static void sw_shape_config(int s, amk_llama_config *c) {
    const sw_shape *sh = &SW_SHAPES[s];
    if (sh->preset) {
        amk_llama_config_preset(sh->preset, c);
    } else {
        memset(c, 0, sizeof *c);
        c->hidden = sh->hidden; c->intermediate = sh->inter; c->n_heads = sh->heads;
        c->n_kv_heads = sh->kv_heads; c->head_dim = sh->head_dim; c->max_pos = 8192;
        c->rope_theta = 10000.0f; c->rms_eps = 1e-5f; c->tie_embeddings = 1; c->bos_id = 1;
        c->eos_ids[0] = 2; c->n_eos = 1;
    }
    c->n_layers = sh->layers;
    if (sh->vocab && sh->vocab != c->vocab) { /* a smaller vocabulary: special ids inside it */
        c->vocab = sh->vocab;
        c->bos_id = 1;
        c->eos_ids[0] = 2;
        c->n_eos = 1;
    }
}

static int sw_write_config_json(const char *path, const amk_llama_config *c) {
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_act\": \"silu\",\n"
               " \"hidden_size\": %d, \"intermediate_size\": %d, \"num_attention_heads\": %d,\n"
               " \"num_key_value_heads\": %d, \"head_dim\": %d, \"num_hidden_layers\": %d, \"vocab_size\": %d,\n"
               " \"max_position_embeddings\": %d, \"rms_norm_eps\": %g, \"rope_theta\": %.1f,\n"
               " \"tie_word_embeddings\": %s, \"bos_token_id\": %d, \"eos_token_id\": %d",
            c->hidden, c->intermediate, c->n_heads, c->n_kv_heads, c->head_dim, c->n_layers, c->vocab, c->max_pos,
            (double)c->rms_eps, (double)c->rope_theta, c->tie_embeddings ? "true" : "false", c->bos_id, c->eos_ids[0]);
    if (c->rope_llama3)
        fprintf(f, ",\n \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %g, \"low_freq_factor\": %g,"
                   " \"high_freq_factor\": %g, \"original_max_position_embeddings\": %d}",
                (double)c->rope_factor, (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor, c->rope_orig_ctx);
    fprintf(f, "}\n");
    return fclose(f) == 0;
}

/* v into element i of an array of dtype dt (nb bytes). why F32 and BF16 here: the 8B file's 350 M
   elements through amk_dtype_store_f32 took 13 s; the values are finite, BF16 rounds to nearest even. */
static void sw_store(void *p, size_t nb, int dt, int64_t i, float v) {
    uint32_t u;
    if (dt == AMK_DTYPE_F32) {
        ((float *)p)[i] = v;
    } else if (dt == AMK_DTYPE_BF16) {
        memcpy(&u, &v, 4);
        ((uint16_t *)p)[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    } else {
        amk_dtype_store_f32(p, nb, dt, i, v);
    }
}

/* A tensor of the weights file: rows x cols (cols 0: a vector) in dtype dt, uniform in +-sqrt(3 /
   cols) for a matrix (outputs of unit variance, as amk_llm's random weights), in [0.5, 1.5] for a
   norm (why not 1: a norm weight read at the wrong index then shows). NULL when out of memory. */
static void *sw_tensor(uint64_t seed, int dt, int64_t rows, int64_t cols) {
    const int64_t n = rows * (cols ? cols : 1);
    const size_t nb = (size_t)amk_dtype_nbytes(dt, n);
    const float scale = cols ? sqrtf(3.0f / (float)cols) : 0.5f;
    void *p = malloc(nb ? nb : 1);
    amk_t_rng r;
    int64_t i;
    r.s = seed;
    for (i = 0; p && i < n; i++) sw_store(p, nb, dt, i, (cols ? 0.0f : 1.0f) + amk_t_rng_sym(&r) * scale);
    return p;
}

/* Writes shape s's config.json and model.safetensors into its directory under g_root. */
static void *sw_write_model(void *arg) {
    sw_file *f = (sw_file *)arg;
    const int s = (int)(f - g_files), dt = SW_SHAPES[s].file_dtype;
    const amk_llama_config *c = &f->cfg;
    static const char *const names[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                         "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj",
                                         "mlp.up_proj", "mlp.down_proj"};
    const int64_t H = c->hidden, I = c->intermediate, Q = (int64_t)c->n_heads * c->head_dim;
    const int64_t KV = (int64_t)c->n_kv_heads * c->head_dim;
    const int64_t dims[9][2] = {{H, 0}, {Q, H}, {KV, H}, {KV, H}, {H, Q}, {H, 0}, {I, H}, {I, H}, {H, I}};
    const int n = 3 + 9 * c->n_layers - (c->tie_embeddings ? 1 : 0);
    amk_st_entry *e = (amk_st_entry *)calloc((size_t)n, sizeof *e);
    int64_t (*shapes)[2] = (int64_t(*)[2])calloc((size_t)n, sizeof *shapes);
    char(*tn)[80] = (char(*)[80])calloc((size_t)n, sizeof *tn);
    char path[700];
    amk_diag d;
    int k = 0, l, j, ok = e && shapes && tn;
    double t0 = now_ms();
    amk_diag_clear(&d);
    snprintf(f->dir, sizeof f->dir, "%s/%s", g_root, SW_SHAPES[s].name);
    mkdir(f->dir, 0700);
    snprintf(path, sizeof path, "%s/config.json", f->dir);
    ok = ok && sw_write_config_json(path, c);
    for (j = 0; ok && j < 3; j++) { /* the embedding, the final norm, an untied head */
        const char *nm = j == 0 ? "model.embed_tokens.weight" : j == 1 ? "model.norm.weight" : "lm_head.weight";
        if (j == 2 && c->tie_embeddings) break;
        snprintf(tn[k], sizeof tn[k], "%s", nm);
        shapes[k][0] = j == 1 ? H : c->vocab;
        shapes[k][1] = H;
        e[k].data = sw_tensor(g_seed * 31 + (uint64_t)s * 1000 + (uint64_t)j, dt, shapes[k][0], j == 1 ? 0 : H);
        e[k].rank = j == 1 ? 1 : 2;
        k++;
    }
    for (l = 0; ok && l < c->n_layers; l++)
        for (j = 0; j < 9; j++, k++) {
            snprintf(tn[k], sizeof tn[k], "model.layers.%d.%s.weight", l, names[j]);
            shapes[k][0] = dims[j][0];
            shapes[k][1] = dims[j][1];
            e[k].rank = dims[j][1] ? 2 : 1;
            e[k].data = sw_tensor(g_seed * 31 + (uint64_t)s * 1000 + 10 + (uint64_t)(l * 9 + j), dt, dims[j][0], dims[j][1]);
        }
    for (j = 0; ok && j < k; j++) {
        e[j].name = tn[j];
        e[j].dtype = dt;
        e[j].shape = shapes[j];
        ok = e[j].data != NULL;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", f->dir);
    f->rc = !ok ? AMK_ERR_OUT_OF_MEMORY : amk_safetensors_write(path, e, k, &d);
    snprintf(f->msg, sizeof f->msg, "%s", ok ? d.message : "out of memory or config.json not written");
    for (j = 0; e && j < k; j++) free((void *)e[j].data);
    free(e); free(shapes); free(tn);
    f->ms = now_ms() - t0;
    return NULL;
}

/* ---- one side of a configuration ------------------------------------------------------------------- */

/* What one backend did with a configuration. */
typedef struct sw_result {
    amk_result open_rc, run_rc;
    char msg[600];                 /* the failure's message */
    int n_steps, pos[SW_MAX_STEPS], tok[SW_MAX_STEPS], argmax[SW_MAX_STEPS];
    int n_chain, chain_pos, chain_in, chain_tok[SW_CHAIN];
    int vocab;
    float *logits;                 /* [n_steps + n_chain, vocab]: the steps', then (reference VM) the chain's */
    double open_ms, run_ms;
    /* the step as built and loaded (amk_llm_program; the device's side fills the rest) */
    int window, splits, folded, attn_o, spec_ops;
    int image_kind, can_chain, n_lean, n_ring, n_attn_lean, n_attn_mma;
    int64_t smem;
} sw_result;

/* The token at step i (i = -1: the chain's first) of configuration k: the same on both sides. */
static int sw_token(int k, int i, int vocab) {
    amk_t_rng r;
    r.s = g_seed ^ ((uint64_t)k << 32) ^ (uint64_t)(i + 7);
    return (int)(amk_t_rng_next(&r) % (uint64_t)vocab);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The positions a step visits in a cache of M rows, windows of W rows in S splits, ascending:
   the first three; the edges of the tensor-core attention's 16-key groups (16, 17 keys) and of
   the CUDA-core path's 32-row chunks; where that path's key scoring changes its threads a key
   (amk_attn_decode_cc: kpt 4 up to 128 keys in a chunk, 2 up to 256); a 512-row chunk's last row
   and the next two; the first split's last row and the second's first; the last split's first
   row and the one before; the cache's last two rows. */
static int sw_positions(int M, int W, int S, int *pos) {
    int cand[24], n = 0, k, out = 0;
    const int fixed[] = {0, 1, 2, 15, 16, 31, 32, 127, 128, 255, 256, 511, 512, 513};
    for (k = 0; k < (int)(sizeof fixed / sizeof fixed[0]); k++) cand[n++] = fixed[k];
    cand[n++] = W - 1; cand[n++] = W;
    cand[n++] = (S - 1) * W - 1; cand[n++] = (S - 1) * W;
    cand[n++] = M - 2; cand[n++] = M - 1;
    qsort(cand, (size_t)n, sizeof cand[0], cmp_int);
    for (k = 0; k < n; k++)
        if (cand[k] >= 0 && cand[k] < M && (out == 0 || pos[out - 1] != cand[k]) && out < SW_MAX_STEPS) pos[out++] = cand[k];
    return out;
}

/* Fills every KV cache of m with configuration k's random rows: keys uniform in +-5.2 (scores of
   standard deviation 3, a peaked softmax), values in +-sqrt(3), in the cache's dtype; the same
   bytes on either backend, a cache's by its name. why through the backend's storage (amk_refvm_buffer of the LLM's VM,
   an internal of amk_llm.h; amk_cuda_upload on the GPU): the generation API writes no cache rows. */
static amk_result sw_fill_kv(amk_llm *m, int k, amk_diag *d) {
    const amk_program *p = amk_llm_program(m);
    int b;
    for (b = 0; b < p->n_buffers; b++) {
        const amk_buffer *bb = &p->buffers[b];
        const int64_t n = amk_buffer_numel(bb);
        const size_t nb = (size_t)amk_dtype_nbytes(bb->dtype, n);
        const float scale = bb->name[0] == 'k' ? 5.2f : 1.7320508f;
        amk_cuda *cu = amk_llm_cuda(m);
        size_t have = 0;
        void *mem;
        amk_t_rng r;
        int64_t i;
        amk_result rc = AMK_OK;
        if (bb->kind != AMK_KIND_KV_CACHE) continue;
        mem = cu ? malloc(nb) : amk_refvm_buffer(amk__llm_vm(m), b, &have);
        if (!mem || (!cu && have != nb)) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "no storage for '%s'", bb->name);
        r.s = g_seed * 977 + (uint64_t)k * 131;
        for (i = 0; bb->name[i]; i++) r.s = r.s * 31 + (unsigned char)bb->name[i]; /* why by name: a folded
            and an unfolded step (SW_EXPECT_GPU_UNFOLDS) number their buffers apart */
        for (i = 0; i < n; i++) sw_store(mem, nb, bb->dtype, i, amk_t_rng_sym(&r) * scale);
        if (cu) {
            rc = amk_cuda_upload(cu, b, mem, nb, d);
            free(mem);
        }
        if (rc != AMK_OK) return rc;
    }
    return AMK_OK;
}

/* The step's shape (splits, window, fold, ATTENTION_O) into res; on the GPU also the image, the
   launch's shared memory and the tasks each form takes there (amk_plan_form over each task's
   context: what the runtime plans; without the tensor maps, which change no form's choice). */
static void sw_describe(amk_llm *m, sw_result *res) {
    const amk_program *p = amk_llm_program(m);
    char buf[32];
    int i;
    res->window = amk_program_meta_string(p, "kv_window", buf, sizeof buf) ? atoi(buf) : 0;
    res->splits = res->window > 0 ? (amk_llm_max_seq(m) + res->window - 1) / res->window : 0;
    res->folded = amk_program_meta_string(p, "qkv_fold", buf, sizeof buf) != NULL;
    res->attn_o = amk_program_meta_string(p, "o_proj", buf, sizeof buf) != NULL;
    res->spec_ops = amk_program_meta_string(p, "qk_rows", buf, sizeof buf) == NULL;
    if (amk_llm_cuda(m)) {
        amk_cuda_info info;
        amk_cuda_get_info(amk_llm_cuda(m), &info);
        res->image_kind = info.image_kind;
        res->can_chain = info.can_chain;
        res->smem = info.smem_bytes;
        for (i = 0; i < p->n_tasks; i++) {
            amk_vm_ctx_t x;
            uint32_t f;
            amk_task_context(p, i, &x);
            f = amk_plan_form(&x, info.threads, info.smem_bytes, AMK_IMAGE_FORMS(info.image_kind));
            res->n_lean += f == AMK_FORM_LEAN;
            res->n_ring += f == AMK_FORM_RING;
            res->n_attn_lean += f == AMK_FORM_ATTN_LEAN;
            res->n_attn_mma += (x.ins.op == AMK_OP_ATTENTION_DECODE || x.ins.op == AMK_OP_ATTENTION_O) && amk_plan_attn_mma(&x);
        }
    }
}

/* Opens configuration c on backend be from its shape's file (the weights file's tokenizer: a
   stand-in of four tokens, amk_llm_open_model's; the step never reads it). */
static amk_result sw_open(const sw_config *c, amk_backend be, amk_llm **m, amk_diag *d) {
    static const char *const toks[4] = {"a", "b", "c", "d"};
    amk_tokenizer_spec ts;
    amk_tokenizer *tok = NULL;
    amk_model *model = NULL;
    amk_llm_opts o;
    amk_result r;
    memset(&ts, 0, sizeof ts);
    ts.n_tokens = 4;
    ts.tokens = toks;
    ts.pretok = AMK_PRETOK_GPT2;
    ts.bos_id = ts.eos_id = -1;
    amk_llm_opts_default(&o);
    o.build = c->build;
    o.backend = be;
    o.device_image = amk_device_cubin.bytes;
    o.device_image_size = sizeof amk_device_cubin.bytes - 1;
    o.timeout_ms = 10000.0 * g_slow;
    if ((r = amk_model_open(g_files[c->shape].dir, &model, d)) != AMK_OK) return r;
    if ((r = amk_tokenizer_create(&ts, &tok, d)) != AMK_OK) {
        amk_model_close(model);
        return r;
    }
    return amk_llm_open_model(model, tok, &o, m, d);
}

/* The steps of configuration k on m (sw_positions, then the chain) into res; the first failure's
   result, its message in res->msg. */
static amk_result sw_steps(amk_llm *m, int k, sw_result *res, amk_diag *d) {
    const int M = amk_llm_max_seq(m), V = res->vocab, cpu = amk_llm_cuda(m) == NULL;
    amk_result r = AMK_OK;
    int i;
    res->n_steps = sw_positions(M, res->window, res->splits, res->pos);
    res->n_chain = M < SW_CHAIN ? M : SW_CHAIN;
    res->chain_pos = M - res->n_chain;
    res->chain_in = sw_token(k, -1, V);
    res->logits = (float *)calloc((size_t)(res->n_steps + res->n_chain) * (size_t)V, sizeof(float));
    if (!res->logits) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < res->n_steps && r == AMK_OK; i++) {
        const float *l = NULL;
        res->tok[i] = sw_token(k, i, V);
        r = amk_llm_seek(m, res->pos[i], d);
        if (r == AMK_OK) r = amk_llm_step(m, res->tok[i], res->pos[i], &l, &res->argmax[i], d);
        if (r == AMK_OK) memcpy(res->logits + (size_t)i * (size_t)V, l, (size_t)V * sizeof(float));
        else snprintf(res->msg, sizeof res->msg, "step at position %d: %s: %s", res->pos[i], amk_result_str(r), d->message);
    }
    if (r != AMK_OK) return r;
    r = amk_llm_seek(m, res->chain_pos, d);
    if (r == AMK_OK && !cpu) r = amk_llm_generate(m, res->chain_in, res->chain_pos, res->n_chain, res->chain_tok, d);
    for (i = 0; r == AMK_OK && cpu && i < res->n_chain; i++) { /* the reference VM: step by step, logits kept */
        const float *l = NULL;
        r = amk_llm_step(m, i ? res->chain_tok[i - 1] : res->chain_in, res->chain_pos + i, &l, &res->chain_tok[i], d);
        if (r == AMK_OK) memcpy(res->logits + (size_t)(res->n_steps + i) * (size_t)V, l, (size_t)V * sizeof(float));
    }
    if (r != AMK_OK)
        snprintf(res->msg, sizeof res->msg, "greedy steps from position %d: %s: %s", res->chain_pos, amk_result_str(r),
                 d->message);
    return r;
}

static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER; /* the device's steps (sw_run) */

/* Configuration k on backend be, start to end, into res (zeroed first). */
static void sw_run(int k, amk_backend be, sw_result *res) {
    const sw_config *c = &g_cfgs[k];
    amk_llm *m = NULL;
    amk_diag d;
    double t0 = now_ms();
    memset(res, 0, sizeof *res);
    amk_diag_clear(&d);
    res->vocab = g_files[c->shape].cfg.vocab;
    res->open_rc = sw_open(c, be, &m, &d);
    res->open_ms = now_ms() - t0;
    if (res->open_rc != AMK_OK) {
        snprintf(res->msg, sizeof res->msg, "open: %s: %s", amk_result_str(res->open_rc), d.message);
        return;
    }
    sw_describe(m, res);
    t0 = now_ms();
    res->run_rc = sw_fill_kv(m, k, &d);
    if (res->run_rc != AMK_OK) {
        snprintf(res->msg, sizeof res->msg, "KV fill: %s", d.message);
    } else {
        /* why one configuration's steps on the device at a time: two persistent kernels launched
           at once could each hold part of the SMs, spinning on blocks of theirs that the other's
           keep from starting (the opens, host work and copies, go on meanwhile) */
        if (be == AMK_BACKEND_CUDA) pthread_mutex_lock(&g_dev_mu);
        res->run_rc = sw_steps(m, k, res, &d);
        if (be == AMK_BACKEND_CUDA) pthread_mutex_unlock(&g_dev_mu);
    }
    res->run_ms = now_ms() - t0;
    amk_llm_close(m);
}

/* ---- the workers ------------------------------------------------------------------------------------ */

/* The selected configurations' jobs on one backend: workers take them in order; the main thread
   waits for a configuration's two results in order. */
typedef struct sw_pool {
    amk_backend be;
    sw_result res[SW_MAX_CONFIGS]; /* by position in g_sel */
    int done[SW_MAX_CONFIGS];
    int next;
} sw_pool;

static sw_pool g_ref, g_dev; /* the reference VM's side; the GPU's (--self: a second reference VM's) */
static int g_sel[SW_MAX_CONFIGS], g_n_sel; /* the selected configurations, in order */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static void *sw_worker(void *arg) {
    sw_pool *pool = (sw_pool *)arg;
    for (;;) {
        int j;
        pthread_mutex_lock(&g_mu);
        j = pool->next < g_n_sel ? pool->next++ : -1;
        pthread_mutex_unlock(&g_mu);
        if (j < 0) return NULL;
        sw_run(g_sel[j], pool->be, &pool->res[j]);
        pthread_mutex_lock(&g_mu);
        pool->done[j] = 1;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
}

static void sw_wait(sw_pool *pool, int j) {
    pthread_mutex_lock(&g_mu);
    while (!pool->done[j]) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
}

/* Starts n workers on pool into th (from *n_th on); none started: the pool's jobs run here. */
static void sw_start(sw_pool *pool, int n, pthread_t *th, int *n_th) {
    int i, started = 0;
    for (i = 0; i < n && *n_th < 64; i++)
        if (pthread_create(&th[*n_th], NULL, sw_worker, pool) == 0) { ++*n_th; started++; }
    if (started == 0) sw_worker(pool);
}

/* ---- comparing ---------------------------------------------------------------------------------------- */

/* The logits' tolerance, a fraction of the reference's largest logit, by the activation dtype.
   why these: with F32 activations the two differ by the order of fp32 sums and the tensor cores'
   split of x into two 16-bit terms (about 1e-5 of the scale); a value rounded to F16 or BF16 on the
   way differs by a step of that dtype wherever the two fp32 results fall on the two sides of a
   rounding boundary. Four times a dtype's two roundings, as test_gpu's random programs allow
   along a path of rounded buffers (dtype_tol, path_tol there): F16 8e-3, BF16 6.4e-2; F32 5e-4,
   fifty times what is expected, still far below what a wrong row, head or split makes (order 1).
   Each line prints the worst error as a fraction of it, so the margin shows. */
static double sw_dtype_tol(int dt) {
    return dt == AMK_DTYPE_BF16 ? 6.4e-2 : dt == AMK_DTYPE_F16 ? 8e-3 : 5e-4;
}
/* Configuration c's tolerance: its activation dtype's; for a folded reference against an unfolded
   GPU step (unfolded: SW_EXPECT_GPU_UNFOLDS, and on the portable image every step the reference
   folds, since that image has no lean forms) its weight dtype's too, the larger: the fold's derived
   weight W_cat is rounded to the weight dtype, so the two steps differ by a rounding of it. */
static double sw_tol(const sw_config *c, int unfolded) {
    const double a = sw_dtype_tol(c->adt), w = sw_dtype_tol(c->wdt);
    return unfolded && w > a ? w : a;
}
/* 1 when the reference's step is folded and the GPU's is not. */
static int sw_unfolded(const sw_result *ref, const sw_result *gpu) { return ref->folded && !gpu->folded; }

static int sw_host_argmax(const float *l, int n) {
    int i, best = 0;
    for (i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

/* Step i's logits (V of them) of the GPU against the reference's; *worst gets the largest error as
   a fraction of the tolerance; *near counts an allowed greedy-token difference. */
static void sw_compare_step(const sw_config *c, int unfolded, const float *ref, const float *gpu, int V, int ref_tok,
                            int gpu_tok, int pos, double *worst, int *near) {
    double scale = 0.0, err = 0.0, tol;
    int i, bad = 0, worst_i = 0, host_tok;
    for (i = 0; i < V; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > scale) scale = fabs(ref[i]);
    tol = sw_tol(c, unfolded) * (scale > 0.0 ? scale : 1.0);
    for (i = 0; i < V; i++) {
        const double e = fabs((double)gpu[i] - (double)ref[i]);
        if (isfinite(ref[i]) && !isfinite(gpu[i])) bad++;
        else if (e > err) { err = e; worst_i = i; }
    }
    if (err / tol > *worst) *worst = err / tol;
    CHECK_MSG(bad == 0 && err <= tol, "%s: position %d: %d non-finite logits, largest error %.3g at %d (gpu %.6g ref %.6g),"
              " tolerance %.3g", c->name, pos, bad, err, worst_i, (double)gpu[worst_i], (double)ref[worst_i], tol);
    host_tok = sw_host_argmax(gpu, V);
    CHECK_MSG(gpu_tok == host_tok, "%s: position %d: the device's greedy token %d is not the argmax %d of its logits",
              c->name, pos, gpu_tok, host_tok);
    if (gpu_tok != ref_tok) {
        const double gap = gpu_tok >= 0 && gpu_tok < V ? (double)ref[ref_tok] - (double)ref[gpu_tok] : INFINITY;
        CHECK_MSG(gap <= 2.0 * tol, "%s: position %d: greedy token %d, the reference's %d (its logits %.6g vs %.6g, "
                  "tolerance %.3g)", c->name, pos, gpu_tok, ref_tok, (double)ref[ref_tok],
                  gpu_tok >= 0 && gpu_tok < V ? (double)ref[gpu_tok] : 0.0, tol);
        if (gap <= 2.0 * tol) ++*near;
    }
}

/* The GPU's chained greedy tokens against the reference's: equal up to the first near tie (the
   two then feed different tokens). Returns the tokens compared equal. */
static int sw_compare_chain(const sw_config *c, const sw_result *ref, const sw_result *gpu) {
    const int V = ref->vocab;
    int i;
    for (i = 0; i < ref->n_chain; i++) {
        const float *l = ref->logits + (size_t)(ref->n_steps + i) * (size_t)V;
        const int g = gpu->chain_tok[i], r = ref->chain_tok[i];
        double scale = 0.0, gap;
        int j;
        if (g == r) continue;
        for (j = 0; j < V; j++)
            if (isfinite(l[j]) && fabs(l[j]) > scale) scale = fabs(l[j]);
        gap = g >= 0 && g < V ? (double)l[r] - (double)l[g] : INFINITY;
        CHECK_MSG(gap <= 2.0 * sw_tol(c, sw_unfolded(ref, gpu)) * scale, "%s: chained greedy step %d (position %d): token %d, the "
                  "reference's %d (its logits %.6g apart)", c->name, i, ref->chain_pos + i, g, r, gap);
        return i;
    }
    return i;
}

/* Configuration k's checks from both sides' results. why these as separate checks: each names
   what failed (the open, a step, the chain) in the line's messages. */
static void sw_check(int k, const sw_result *ref, const sw_result *gpu, double *worst, int *near, int *chain_same) {
    const sw_config *c = &g_cfgs[k];
    int i, failed = 0;
    *worst = 0.0;
    *near = *chain_same = 0;
    if (c->expect == SW_EXPECT_TOO_LONG) {
        CHECK_MSG(ref->open_rc == AMK_ERR_INVALID_ARG && strstr(ref->msg, "longer than the model's context"),
                  "%s: the reference VM: want INVALID_ARG for a context past the model's, got %s", c->name, ref->msg);
        CHECK_MSG(gpu->open_rc == AMK_ERR_INVALID_ARG && strstr(gpu->msg, "longer than the model's context"),
                  "%s: the GPU: want INVALID_ARG for a context past the model's, got %s", c->name, gpu->msg);
        return;
    }
    CHECK_MSG(ref->open_rc == AMK_OK && ref->run_rc == AMK_OK, "%s: the reference VM: %s", c->name, ref->msg);
    if (c->expect == SW_EXPECT_GPU_UNFOLDS && !g_self && gpu->open_rc == AMK_OK)
        CHECK_MSG(ref->folded && !gpu->folded, "%s: want the reference VM's step folded (%d) and the GPU's not (%d)",
                  c->name, ref->folded, gpu->folded);
    CHECK_MSG(gpu->open_rc == AMK_OK && gpu->run_rc == AMK_OK, "%s: the %s: %s", c->name, g_self ? "second reference VM" : "GPU",
              gpu->msg);
    if (ref->open_rc != AMK_OK || gpu->open_rc != AMK_OK || ref->run_rc != AMK_OK || gpu->run_rc != AMK_OK) return;
    CHECK_EQ_INT(gpu->n_steps, ref->n_steps);
    for (i = 0; i < ref->n_steps && i < gpu->n_steps; i++) {
        const int before = amk_t_cur_failed;
        sw_compare_step(c, sw_unfolded(ref, gpu), ref->logits + (size_t)i * (size_t)ref->vocab,
                        gpu->logits + (size_t)i * (size_t)ref->vocab, ref->vocab, ref->argmax[i], gpu->argmax[i], ref->pos[i], worst, near);
        if (amk_t_cur_failed > before && ++failed >= 3) { /* why: a broken form fails every step alike */
            fprintf(stderr, "  %s: the steps after position %d not compared\n", c->name, ref->pos[i]);
            return;
        }
    }
    *chain_same = sw_compare_chain(c, ref, gpu);
}

/* ---- coverage ------------------------------------------------------------------------------------------ */

/* What the configurations that ran met on the device: a full run must meet every form and split
   count the sweep is there for (test "coverage"). */
typedef struct sw_cover {
    int lean, ring, attn_lean, attn_mma, folded, attn_o, spec_ops, general, full, portable, chain, splits[9], stacked;
} sw_cover;

static void sw_cover_add(sw_cover *cv, const sw_result *g) {
    if (g->open_rc != AMK_OK) return;
    cv->lean += g->n_lean > 0;
    cv->ring += g->n_ring > 0;
    cv->attn_lean += g->n_attn_lean > 0;
    cv->attn_mma += g->n_attn_mma > 0;
    cv->folded += g->folded;
    cv->attn_o += g->attn_o;
    cv->spec_ops += g->spec_ops;
    cv->general += g->image_kind == AMK_IMAGE_GENERAL;
    cv->full += AMK_IMAGE_LEAN(g->image_kind);
    cv->portable += g->image_kind == AMK_IMAGE_PORTABLE;
    cv->chain += g->can_chain && g->n_chain > 1;
    if (g->splits >= 1 && g->splits <= 8) cv->splits[g->splits]++;
    cv->stacked += g->splits > 8;
}

/* portable: the GPU's side ran on the portable image (AMK_CUDA_IMAGE=portable, or a GPU other than
   sm_90), which has none of the lean forms and folds no step: every configuration there. */
static void test_coverage(const sw_cover *cv, int portable) {
    int s;
    printf("  coverage: configurations with lean tiles %d, ring tiles %d, lean ATTENTION_O %d, tensor-core attention %d,\n"
           "            folded %d, ATTENTION_O %d, spec ops %d, chained %d; image full %d, general %d, portable %d; KV splits",
           cv->lean, cv->ring, cv->attn_lean, cv->attn_mma, cv->folded, cv->attn_o, cv->spec_ops, cv->chain, cv->full,
           cv->general, cv->portable);
    for (s = 1; s <= 8; s++) printf(" %d:%d", s, cv->splits[s]);
    printf(", more (stacked partials) %d\n", cv->stacked);
    if (portable) {
        CHECK(cv->lean == 0 && cv->ring == 0 && cv->attn_lean == 0 && cv->folded == 0 && cv->full == 0 && cv->general == 0);
        CHECK(cv->portable > 0 && cv->attn_mma > 0 && cv->attn_o > 0 && cv->spec_ops > 0 && cv->chain > 0);
    } else {
        CHECK(cv->lean > 0 && cv->ring > 0 && cv->attn_lean > 0 && cv->attn_mma > 0 && cv->folded > 0 && cv->attn_o > 0);
        CHECK(cv->spec_ops > 0 && cv->chain > 0 && cv->full > 0 && cv->general > 0);
    }
    for (s = 1; s <= 8; s++) CHECK_MSG(cv->splits[s] > 0, "no configuration ran with %d KV splits", s);
    CHECK_MSG(cv->stacked > 0, "no configuration ran with more than 8 KV splits");
}

/* ---- main -------------------------------------------------------------------------------------------------- */

static char *g_filters[64];
static int g_n_filters;

static int sw_selected(const char *name) {
    int i;
    for (i = 0; i < g_n_filters; i++)
        if (!strstr(name, g_filters[i])) return 0;
    return 1;
}

/* The filters of argv (non-options) and AMK_SWEEP_ONLY; the flags. 0 on a bad option. */
static int sw_args(int argc, char **argv, int *list) {
    static char only[512];
    const char *env = getenv("AMK_SWEEP_ONLY");
    char *t;
    int i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) *list = 1;
        else if (strcmp(argv[i], "--ref-only") == 0) g_ref_only = 1;
        else if (strcmp(argv[i], "--self") == 0) g_self = 1;
        else if (argv[i][0] == '-') return 0;
        else if (g_n_filters < 64) g_filters[g_n_filters++] = argv[i];
    }
    if (env && *env) {
        snprintf(only, sizeof only, "%s", env);
        for (t = strtok(only, " ,"); t && g_n_filters < 64; t = strtok(NULL, " ,")) g_filters[g_n_filters++] = t;
    }
    return 1;
}

/* Makes g_root and writes the model file of every shape a selected configuration uses, one
   thread a shape. 0 when one could not be written (the line says why). */
static int sw_make_files(void) {
    const char *base = getenv("AMK_SWEEP_DIR");
    pthread_t th[SW_N_SHAPES];
    int s, ok = 1, j;
    if (!base || !*base) base = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/amk_sweep.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_root)) {
        printf("test_sweep: cannot make a directory %s\n", g_root);
        return 0;
    }
    for (j = 0; j < g_n_sel; j++) g_files[g_cfgs[g_sel[j]].shape].wanted = 1;
    for (s = 0; s < SW_N_SHAPES; s++) {
        sw_shape_config(s, &g_files[s].cfg);
        if (g_files[s].wanted && pthread_create(&th[s], NULL, sw_write_model, &g_files[s]) != 0) g_files[s].wanted = 0;
    }
    for (s = 0; s < SW_N_SHAPES; s++) {
        if (!g_files[s].wanted) continue;
        pthread_join(th[s], NULL);
        printf("  model %-8s %s (%.0f ms)%s%s\n", SW_SHAPES[s].name, g_files[s].dir, g_files[s].ms,
               g_files[s].rc == AMK_OK ? "" : ": ", g_files[s].rc == AMK_OK ? "" : g_files[s].msg);
        ok &= g_files[s].rc == AMK_OK;
    }
    return ok;
}

static void sw_remove_files(void) {
    char path[700];
    int s;
    if (getenv("AMK_SWEEP_KEEP") && atoi(getenv("AMK_SWEEP_KEEP"))) {
        printf("  the model files stay in %s (AMK_SWEEP_KEEP)\n", g_root);
        return;
    }
    for (s = 0; s < SW_N_SHAPES; s++) {
        if (!g_files[s].wanted) continue;
        snprintf(path, sizeof path, "%s/config.json", g_files[s].dir);
        remove(path);
        snprintf(path, sizeof path, "%s/model.safetensors", g_files[s].dir);
        remove(path);
        rmdir(g_files[s].dir);
    }
    rmdir(g_root);
}

/* The line of configuration k: its result, worst error as a fraction of the tolerance, greedy
   tokens equal, the step on the device, the times. */
static void sw_line(int k, const sw_result *ref, const sw_result *gpu, double worst, int near, int chain_same) {
    const sw_result *g = g_ref_only ? ref : gpu;
    printf("  %-36s %s", g_cfgs[k].name, amk_t_cur_failed ? "FAIL" : "ok  ");
    if (g->open_rc != AMK_OK && g_cfgs[k].expect != SW_EXPECT_RUNS) {
        printf(" refused as documented: %.90s", g->msg);
    } else if (g->open_rc == AMK_OK) {
        if (!g_ref_only)
            printf(" err %.2f tol %.1e tok %d/%d chain %d/%d", worst, sw_tol(&g_cfgs[k], sw_unfolded(ref, gpu)), ref->n_steps - near,
                   ref->n_steps, chain_same, ref->n_chain);
        printf(" | S%d w%d%s%s%s", g->splits, g->window, g->folded ? " fold" : "", g->attn_o ? " ao" : "",
               g->spec_ops ? " spec" : "");
        if (!g_ref_only && !g_self)
            printf(" L%d R%d A%d M%d %s%s", g->n_lean, g->n_ring, g->n_attn_lean, g->n_attn_mma,
                   g->image_kind == AMK_IMAGE_GENERAL ? "gen" : g->image_kind == AMK_IMAGE_PORTABLE ? "port" : "full",
                   g->can_chain ? "" : " nochain");
    }
    printf(" | cpu %.0f+%.0f", ref->open_ms, ref->run_ms);
    if (!g_ref_only) printf(" %s %.0f+%.0f ms", g_self ? "cpu2" : "gpu", gpu->open_ms, gpu->run_ms);
    else printf(" ms");
    printf("\n");
    fflush(stdout);
}

/* Runs the selected configurations: the reference VM's side in ref_threads threads, the GPU's in
   dev_threads (each its own amk_cuda, which the runtime allows a thread; their steps one
   configuration at a time: sw_run), each line here once both are done; then the coverage. */
static void sw_sweep(int ref_threads, int dev_threads) {
    pthread_t th[64];
    sw_cover cv;
    int j, n_th = 0;
    memset(&cv, 0, sizeof cv);
    g_ref.be = AMK_BACKEND_CPU;
    g_dev.be = g_self ? AMK_BACKEND_CPU : AMK_BACKEND_CUDA;
    sw_start(&g_ref, ref_threads, th, &n_th);
    if (!g_ref_only) sw_start(&g_dev, dev_threads, th, &n_th);
    for (j = 0; j < g_n_sel; j++) {
        const int k = g_sel[j];
        sw_result *ref = &g_ref.res[j], *dev = &g_dev.res[j];
        double worst = 0.0;
        int near = 0, chain_same = 0;
        sw_wait(&g_ref, j);
        if (!g_ref_only) sw_wait(&g_dev, j);
        amk_t_cur = g_cfgs[k].name;
        amk_t_cur_failed = 0;
        if (g_ref_only) {
            if (g_cfgs[k].expect == SW_EXPECT_TOO_LONG) CHECK_MSG(ref->open_rc == AMK_ERR_INVALID_ARG, "%s", ref->msg);
            else CHECK_MSG(ref->open_rc == AMK_OK && ref->run_rc == AMK_OK, "%s: %s", g_cfgs[k].name, ref->msg);
        } else {
            sw_check(k, ref, dev, &worst, &near, &chain_same);
        }
        sw_cover_add(&cv, g_ref_only ? ref : dev);
        if (amk_t_cur_failed) amk_t_failed++;
        else amk_t_passed++;
        sw_line(k, ref, dev, worst, near, chain_same);
        free(ref->logits);
        free(dev->logits);
        ref->logits = dev->logits = NULL;
    }
    for (j = 0; j < n_th; j++) pthread_join(th[j], NULL);
    if (g_n_filters == 0 && !g_ref_only && !g_self) { /* RUN_AS's steps: the test takes an argument */
        amk_t_cur = "coverage";
        amk_t_cur_failed = 0;
        test_coverage(&cv, amk_cuda_picks_portable() == 1);
        if (amk_t_cur_failed) amk_t_failed++;
        else amk_t_passed++;
        printf("  %-36s %s\n", "coverage", amk_t_cur_failed ? "FAIL" : "ok");
    }
}

int main(int argc, char **argv) {
    const char *s = getenv("AMK_TEST_SEED"), *slow = getenv("AMK_TEST_SLOW"), *th = getenv("AMK_SWEEP_THREADS");
    const char *gth = getenv("AMK_SWEEP_GPU_THREADS");
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int list = 0, threads, dev_threads, k;
    amk_cuda *keep = NULL;
    double t0 = now_ms();
    if (!sw_args(argc, argv, &list)) {
        printf("usage: test_sweep [--list] [--ref-only] [--self] [FILTER ...]\n");
        return 2;
    }
    sw_configs();
    for (k = 0; k < g_n_cfgs; k++)
        if (sw_selected(g_cfgs[k].name)) g_sel[g_n_sel++] = k;
    if (list) {
        for (k = 0; k < g_n_sel; k++) printf("%s\n", g_cfgs[g_sel[k]].name);
        printf("%d of %d configurations\n", g_n_sel, g_n_cfgs);
        return 0;
    }
    g_seed = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    if (slow && *slow) g_slow = atof(slow) > 1.0 ? atof(slow) : 1.0;
    /* why 3 for the GPU's side: its time is the host's (reading and converting the weights of the
       file), so a few open at once; the rest of the CPUs run the reference VM */
    dev_threads = gth && *gth ? atoi(gth) : 3;
    if (dev_threads < 1) dev_threads = 1;
    threads = th && *th ? atoi(th) : (int)(ncpu > dev_threads + 2 ? ncpu - dev_threads - 1 : 1);
    if (threads < 1) threads = 1;
    printf("test_sweep: seed %llu (AMK_TEST_SEED to repeat), %d of %d configurations, %d reference VM threads, %d %s "
           "threads%s\n", (unsigned long long)g_seed, g_n_sel, g_n_cfgs, threads, dev_threads, g_self ? "second VM" : "GPU",
           g_ref_only ? ", the reference VM alone" : g_self ? ", both sides on the reference VM" : "");
    if (!g_ref_only && !g_self) { /* why: holds the primary context, so each configuration does not rebuild it */
        amk_program *p = amk_program_create();
        amk_target t;
        amk_diag d;
        amk_result r;
        amk_target_builtin("h100", &t); /* as test_gpu's: one SM of the target */
        t.num_sms = 1;
        amk_program_set_target(p, &t);
        p->has_config = 1;
        amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, amk_program_add_counter(p, ""), "keep");
        p->tasks[0].sm = 0;
        amk_diag_clear(&d);
        r = amk_cuda_create(p, amk_device_cubin.bytes, sizeof amk_device_cubin.bytes - 1, &keep, &d);
        amk_program_free(p);
        if (r != AMK_OK) {
            printf("test_sweep: no usable GPU (%s: %s)\n", amk_result_str(r), d.message);
            printf("%s: 0 passed, 1 failed\n", __FILE__);
            return 1;
        }
    }
    if (!sw_make_files()) {
        sw_remove_files();
        amk_cuda_free(keep);
        printf("%s: 0 passed, 1 failed\n", __FILE__);
        return 1;
    }
    sw_sweep(threads, dev_threads);
    sw_remove_files();
    amk_cuda_free(keep);
    printf("test_sweep: %.1f s\n", (now_ms() - t0) / 1e3);
    TEST_SUMMARY();
}
