/* amk_arch.h - AMK's model builders. Part of AMK (amk.h has the library's manual).

   WHAT IT DOES
     Builds a model's decode step as a program: amk_llama_build (Llama and the families that are
     Llamas with a difference: Mistral's sliding window in the fused step, Qwen2's q/k/v biases
     and Qwen3's q/k norms in the spec opcodes' step; RoPE scaling llama3, linear, YaRN; the fused
     step of AMK's opcodes, or --spec-ops's step of the spec's opcodes 0-18 only), amk_llama_build_lowered
     (built, lowered and placed on the SMs the way AMK runs it), amk_llama_build_step (either,
     with its typed weight plan: how the loader makes each weight buffer from the model's
     tensors), the prefill program of a chunk of prompt tokens (prefill_rows: the fused step's
     tiles over the chunk's rows, ATTENTION_PREFILL, the head on one row), the named shapes of
     the benchmarks (amk_llama_config_preset) and a config from config.json alone. Where a step
     would take a form only the device's specialised forms run (the folded Q/K/V), it asks the
     form planner (amk_plan.h) first.
   WHAT IT DOES NOT DO
     Other architectures (MoE, other attention or MLP shapes), the fused step for Qwen2/Qwen3 (their
     biases and norms take the spec opcodes' step) and so their prefill programs, a prefill
     program on the tensor cores (its Q/K/V, gate/up tiles run the M rows on the CUDA cores).
   CONTENTS
     declarations >>llama | implementation >>impl_llama */
#ifndef AMK_ARCH_H
#define AMK_ARCH_H

#include "amk_tok.h"
#include "amk_plan.h" /* the planner the builder asks (amk_plan_form, amk_plan_rows_stage_bytes), and the knobs (amk_tune.h) */

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>llama ======================================================================================= */
/* How the decode step is built. */
/* KV cache rows a decode step gets when the caller does not say (at most the model's context). */
#define AMK_LLAMA_DEFAULT_MAX_SEQ 4096
/* amk_llm's weight_dtype/act_dtype default (amk_llm_opts_default): the backend's choice, made when
   amk_llm opens the model (amk_llm_opts says which). amk_llama_build refuses it. */
#define AMK_DTYPE_AUTO (-1)

typedef struct amk_llama_build_opts {
    int max_seq;      /* KV cache rows (the longest context); 0 = min(config max_pos, AMK_LLAMA_DEFAULT_MAX_SEQ,
                         the sliding window); more than a sliding window fails (AMK_ERR_UNSUPPORTED) */
    int weight_dtype; /* dtype of the matrices and the embedding: F32 (default), BF16 or F16 (amk_llm
                         also takes AMK_DTYPE_AUTO, its default) */
    int act_dtype;    /* activations and KV cache: F32 (default), BF16 or F16 (amk_llm: AUTO too) */
    int num_sms;      /* tiles are sized so each of this many SMs moves the same weight bytes */
    int kv_splits;    /* attention tiles along the KV length (merged by ATTENTION_COMBINE): 1..8, or
                         a multiple of 8 up to AMK_LLAMA_MAX_SPLITS with AMK's opcodes (stacked
                         partials); 0 (default): one up to 512 rows, beyond that a task a kv head
                         a split on each of num_sms SMs, splits of at least AMK_LLAMA_SPLIT_ROWS */
    int prefill_rows; /* 0 (default): the decode step (one token). M >= 1: a prefill program for a
                         chunk of M prompt tokens (inputs token [M], pos [M] their positions, pos[0]
                         + m, and last [1] = the row whose logits to make, M - 1 for a prompt's
                         last chunk): each layer's Q/K/V tiles over the M rows (with 16-bit
                         activations in blocks of 128 rows: m_off, M_tile), K and V into the
                         caches' rows pos[m], ATTENTION_PREFILL tiles, O and down as GEMV tiles and
                         an ADD, the MLP as RMSNORM, gate/up GEMV tiles and SILU_MUL (ADD,
                         SILU_MUL and RMSNORM in tasks of a few rows each: m_off, M_tile), the
                         head on row `last` only. With 16-bit activations, matrices in a block
                         format (weight_dtype_of) are first copied a layer at a time into
                         act_dtype copies by COPY tasks (w_deq.<role>.<layer>) that those tiles
                         read on the tensor cores. AMK's opcodes; not with Qwen2's
                         biases or Qwen3's norms yet (AMK_ERR_UNSUPPORTED) */
    int spec_ops;     /* 1: only the spec's opcodes 0..18 (a program any implementation runs);
                         0 (default): AMK's opcodes 20..35, fewer dependent steps a layer. A config
                         with q/k/v biases (qkv_bias: Qwen2) or q/k norms (qk_norm: Qwen3) builds the
                         spec's step whatever this says: its Q/K/V GEMV tiles add the biases, RMSNORMs
                         of q's and k's heads precede RoPE; the fused tiles take neither yet */
    int mlp_accum;    /* with AMK's opcodes: 1 the MLP is one step (RMSNORM_MLP tiles adding their
                         share of down into an F32 residual that a FILL zeroes), 0 two (gate/up
                         tiles, then down tiles); -1 (default) AMK's choice (AMK_LLAMA_MLP_ACCUM) */
    int attn_o;       /* with AMK's opcodes and one KV split: 1 attention and the O projection are
                         one step (ATTENTION_O tasks, each a kv head's attention and a few rows of
                         O, adding into an F32 h that a FILL zeroes), 0 two (ATTENTION_DECODE, then
                         O tiles); -1 (default) AMK's choice (AMK_LLAMA_ATTN_O) */
    int qkv_fold;     /* with ATTENTION_O and the one-step MLP: 1 each layer's MLP tiles also add up
                         the next layer's raw Q/K/V projections (RMSNORM_MLP_FOLD: a derived weight
                         W_cat a layer, which amk_llm computes when it loads), so every layer after
                         the first is two dependent steps: ATTENTION_O_PRENORM tasks (norm scale,
                         RoPE, the cache row themselves), then the MLP tiles; 0 no; -1 (default)
                         AMK's choice (AMK_LLAMA_QKV_FOLD), which also does not fold where the
                         device's lean forms, the only ones that take folded tasks, would not take
                         one (amk_plan_form, amk_plan.h). Where the step cannot fold it does not;
                         1 folds even where the GPU would refuse the step (the reference VM runs
                         every fold; amk_llm, for a backend that may be the GPU, builds such a
                         step unfolded and says so in amk_llm_note) */
    /* Per-tensor weight dtypes; NULL (default): every matrix and the embedding in weight_dtype.
       Asked for each matrix and the embedding (the LM head too when untied) with its HF source
       name ("model.layers.3.mlp.up_proj.weight") and HF shape [rows = out features, cols = in
       features] (the embedding [vocab, hidden]). A block dtype (amk_dtype_is_block, a GGUF
       format) whose block divides cols makes that buffer the format where the step reads the
       buffer row-major as the tensor is stored (its weight plan entry AMK_WEIGHT_AS_STORED or
       AMK_WEIGHT_QK_INTERLEAVED); any other answer, or a transposed or derived buffer (o_proj of
       ATTENTION_O, W_cat, a float down_proj of the one-step MLP), gets weight_dtype. So with a
       block down_proj mlp_accum -1 builds the two-step MLP, with a block o_proj attn_o -1 the
       two-step attention, and with any block matrix qkv_fold -1 does not fold. An explicit 1
       builds the form: the one-step MLP keeps a block down_proj as stored ([H, I], its tiles'
       rows a multiple of the block) where hidden is a multiple of 32 and at least the block, and
       otherwise (or folded) the transposed matrix in weight_dtype, as ATTENTION_O its o_proj and
       the fold W_cat. The callback may be asked more than
       once for a tensor and must answer the same each time. amk_llm sets it for a model file
       (amk_llm_opts.weights_as_stored). */
    int (*weight_dtype_of)(void *user, const char *tensor, int64_t rows, int64_t cols);
    void *weight_dtype_user;
    int x_q8;         /* 1 (default): a tile whose matrices are in block formats with an integer dot,
                         K a multiple of 2048 (amk_plan_blk_x8), rounds x to 8 bits a 32-element
                         unit (param x_q8, amk_ir.h's AMK_X_Q8), which the GPU's block ring
                         multiplies by dp4a; 0: x stays f32 in every tile */
} amk_llama_build_opts;

/* What -1 (AMK's choice) means for mlp_accum, attn_o and qkv_fold, and the SM sets and task sizes
   the builder picks, are amk_tune.h's AMK_LLAMA_* knobs (with their whys and runs). */

/* Defaults: max_seq 0 (auto), F32 weights and activations, 132 SMs (H100), KV splits 0 (auto),
   fused, mlp_accum -1, attn_o -1 and qkv_fold -1 (auto), no weight_dtype_of (every matrix F32). */
AMK_API void amk_llama_build_opts_default(amk_llama_build_opts *o);

/* A named shape with its real hyper-parameters: "llama3-8b", "llama3.2-1b", "smollm2-135m". */
AMK_API amk_result amk_llama_config_preset(const char *name, amk_llama_config *cfg);
/* A config from an HF config.json alone (no weights needed): the random-weight mode uses it. */
AMK_API amk_result amk_llama_config_load_json(const char *path, amk_llama_config *cfg, amk_diag *d);

/* Builds the decode step of cfg (one token at position pos, KV cache persisted across steps).
   Fused (the default), six dependent steps a layer (five without COMBINE): RMSNORM_GEMV tiles
   for Q, K and V (norm, interleaved RoPE, K and V stored straight into the cache row pos);
   ATTENTION_DECODE per kv head and KV split; ATTENTION_COMBINE (with more than one split); O
   tiles (GEMV_TILE, the residual as bias); RMSNORM_SWIGLU tiles for gate/up; down tiles
   (residual as bias). With o->mlp_accum (see there; by default for SmolLM2-sized shapes) the
   last two are one step: RMSNORM_MLP tiles adding into the next residual (F32), which a FILL
   beside attention zeroes (the O tiles wait for it); down_proj is then a [I, H] buffer (meta
   down_proj "transposed": amk_llm transposes the HF weight). With o->attn_o (see there; by
   default with the one-step MLP at one KV split) attention and O are one step too: ATTENTION_O
   tasks, each its kv head's attention and a few rows of W_oT (o_proj as [q_rows, H], meta o_proj
   "transposed"), adding into h (F32), which a FILL beside the layer before's attention zeroes
   (layer 0's at the start). With o->qkv_fold as well (see there; meta qkv_fold "1") layers 1..L-1
   have no Q/K/V tiles: layer i's MLP tiles (RMSNORM_MLP_FOLD; not the last
   layer's) also add the next layer's raw projections into qkv.i (F32 [1, F], F = q_rows +
   2*kv_rows; a FILL beside the attention zeroes it) through W_cat.i (a WEIGHT [I + H, F] of the
   weight dtype, source "amk.qkv_fold.<i>", which amk_llm derives from the layer's down_proj and
   the next layer's q/k/v_proj and input_layernorm), and layer i+1's attention tasks are
   ATTENTION_O_PRENORM on qkv.i and x.(i+1), waiting for all of layer i's MLP tiles, the first
   of each kv head storing the cache row; the FILLs beside them wait for what they wait for. The
   head is RMSNORM_GEMV LM-head
   tiles, ARGMAX_PARTIAL tasks over slices of about 1024 logits (at most one an SM) and
   ARGMAX_COMBINE. Q and K rows are in interleaved pair
   order (meta["qk_rows"] = "interleaved"): amk_llm permutes the HF weights when it loads them.
   With o->spec_ops: EMBED; per layer RMSNORM, Q/K/V GEMV tiles, ROPE, KV_APPEND, split-KV
   ATTENTION_TILE and ATTENTION_COMBINE, O tiles, ADD, RMSNORM, gate/up tiles, SILU_MUL, down
   tiles, ADD; final RMSNORM, LM-head tiles, SAMPLE_ARGMAX
   (HF row order; amk_llama_set_pos updates the per-step params). Buffers: IO_INPUT "token" and
   "pos" (I32 [1]); WEIGHT buffers whose source is the HF tensor name (the LM head reads the
   embedding when tied), matrices in weight_dtype or, by o->weight_dtype_of, in their block
   formats (then meta["weights"] = "as stored"); KV_CACHE "k_cache.L"/"v_cache.L" [max_seq, n_kv_heads, head_dim];
   IO_OUTPUT "logits" (F32 [1, vocab]) and "next_token" (I32 [1], the argmax). The program is not
   lowered yet (no SMs, no pages): amk_program_lower does that. meta["kv_window"] holds the rows
   per KV split. */
AMK_API amk_result amk_llama_build(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                   amk_program **out, amk_diag *d);

/* amk_llama_build, then amk_program_lower onto o->num_sms SMs with the decode schedule AMK runs
   (load_balance, graph_color pages, 512 threads per block): the program amk_llm executes. */
AMK_API amk_result amk_llama_build_lowered(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                           amk_program **out, amk_diag *d);

/* ---- the step and its weight plan: what the loader does, typed --------------------------------
   amk_llama_build_step returns the program with what the steps after building need from the
   builder, typed (nothing after it parses the program's meta strings back): the weight plan, an
   entry per WEIGHT buffer saying how the loader makes it from the model's tensors, and the
   choices lowering and amk_llama_set_pos take. The meta strings stay, for people and tools
   reading the program's JSON. */

/* How a weight buffer of a built step is made (amk_weight_entry). */
typedef enum amk_weight_transform {
    AMK_WEIGHT_AS_STORED = 0,  /* the tensor the buffer's source names, cast to the buffer's dtype */
    AMK_WEIGHT_TRANSPOSED,     /* that tensor, [C, R] in the file, as the buffer's [R, C]: down_proj
                                  for RMSNORM_MLP ([I, H]), o_proj for ATTENTION_O ([q_rows, H]) */
    AMK_WEIGHT_QK_INTERLEAVED, /* that tensor's rows in interleaved pair order within each of heads
                                  heads (HF row i and i + hd/2 become 2i and 2i + 1): q_proj and
                                  k_proj of a fused step, whose RoPE pairs adjacent rows */
    AMK_WEIGHT_QKV_FOLD        /* no tensor of its own: layer's W_cat of a folded step, which amk_llm
                                  derives from that layer's down_proj and the next layer's
                                  input_layernorm and q/k/v_proj (qkv_fold) */
} amk_weight_transform;

typedef struct amk_weight_entry {
    int buffer;                     /* the WEIGHT buffer */
    amk_weight_transform transform;
    int heads;                      /* AMK_WEIGHT_QK_INTERLEAVED: the tensor's heads; else 0 */
    int layer;                      /* AMK_WEIGHT_QKV_FOLD: the layer; else -1 */
} amk_weight_entry;

typedef struct amk_llama_step {
    amk_program *program;
    amk_weight_entry *weights; /* one entry a WEIGHT buffer of program, in buffer order */
    int n_weights;
    int kv_window;             /* the KV cache rows of each split (amk_llama_set_pos) */
    int sm_sets[2];            /* the SM sets Y and Z lowering steers the layers onto; 0 0: none */
    int folded;                /* qkv_fold: layers after the first have no Q/K/V tiles */
} amk_llama_step;

/* The step amk_llama_build builds (lowered as amk_llama_build_lowered lowers it when lower), with
   its weight plan. *out is zeroed first; free it with amk_llama_step_free. */
AMK_API amk_result amk_llama_build_step(const amk_llama_config *cfg, const amk_llama_build_opts *o, int lower,
                                        amk_llama_step *out, amk_diag *d);
/* Frees the program and the plan (NULL or a zeroed step: nothing). */
AMK_API void amk_llama_step_free(amk_llama_step *s);

/* Sets the per-step params of a built step for position pos: KV_APPEND pos, and each
   ATTENTION_TILE's kv_len so the windows cover rows [0, pos] (the spec_ops step; the fused step
   has no per-step params). AMK_ERR_RUNTIME if pos is outside the KV cache. (The "pos" input
   buffer is the caller's to write.) */
AMK_API amk_result amk_llama_set_pos(amk_program *p, int pos, amk_diag *d);

#ifdef __cplusplus
}
#endif
#endif /* AMK_ARCH_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_ARCH_IMPLEMENTATION_DONE)
#define AMK_ARCH_IMPLEMENTATION_DONE
/* ==== >>impl_llama ================================================================================== */
AMK_API void amk_llama_build_opts_default(amk_llama_build_opts *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->weight_dtype = AMK_DTYPE_F32;
    o->act_dtype = AMK_DTYPE_F32;
    o->num_sms = 132; /* why: an H100 SXM has 132 SMs */
    o->kv_splits = 0;
    o->mlp_accum = -1;
    o->attn_o = -1;
    o->qkv_fold = -1;
    o->x_q8 = 1;
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
    if (!path || !cfg)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llama_config_load_json: %s is NULL", path ? "cfg" : "path");
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

/* The step's choices, resolved once from the options and the config (amk__lb_decide). Dims: L
   layers, H hidden, I intermediate, NH/NKV heads, HD head_dim, V vocab; wd, ad the weight and
   activation dtypes. */
typedef struct amk__lb_plan {
    int max_seq;             /* KV cache rows */
    int S, window;           /* KV splits and the rows of each (the last may be shorter) */
    int S_sets;              /* the partial sets a COMBINE input holds (S > 8: S / 8) */
    int fused;               /* AMK's opcodes (not spec_ops) */
    int accum;               /* the one-step MLP: RMSNORM_MLP tiles adding into an F32 x.(i+1) */
    int ao;                  /* the one-step attention: ATTENTION_O tasks adding into an F32 h */
    int fold;                /* the folded Q/K/V: layer i's MLP tiles build layer i+1's projections */
    int rd;                  /* the residual's dtype: F32 with accum (atomic adds), else ad */
    int qkv_rows;            /* a Q/K/V tile's rows (even when fused: RoPE pairs stay in one tile) */
    int ao_rows;             /* an ATTENTION_O task's rows of W_oT */
    int mlp_rows;            /* an RMSNORM_MLP tile's rows */
    int set_y, set_z;        /* the SM sets (meta "sm_sets", AMK_LLAMA_SM_SETS); 0 0 without */
    int64_t q_rows, kv_rows; /* NH * HD, NKV * HD */
    int64_t F;               /* a row of qkv: q_rows + 2 * kv_rows */
    int blk_any, blk_o;      /* weight_dtype_of gives a block format to some matrix, to an o_proj */
    int blk_down;            /* the largest block (elements) of a down_proj in a block format, 0 for none
                                (amk__lb_blocks) */
    int down_stored;         /* with accum: the block down_projs stay as stored ([H, I], RMSNORM_MLP's
                                block W_down), the tiles' rows a multiple of blk_down */
} amk__lb_plan;

typedef struct amk__lb {
    amk_program *p;
    const amk_llama_config *c;
    amk_llama_build_opts o;
    amk__lb_plan plan;
    char name[160];
    /* what one part hands the next */
    int64_t R;    /* the rows of x: 1 (decode), or prefill_rows */
    int pos;      /* IO_INPUT "pos" I32 [R] */
    int embed;    /* WEIGHT the embedding [V, H] wd (the LM head when tied) */
    int x;        /* the residual into the next layer (x.i) [R, H] rd */
    int cx, n_cx; /* x complete: its counter, that counter's producers */
    int h_next;   /* with ATTENTION_O, h.(i+1) [1, H] F32, which layer i makes and zeroes; else -1 */
    int qkv_prev; /* folded, qkv.(i-1) [1, F] F32: layer i-1's MLP tiles built it; else -1 */
    int64_t phase_cols; /* a prefill chunk's Q/K/V tiles: the columns of the phase's matrices
                           together (amk__lb_tiles' block width); 0 elsewhere */
    amk_weight_entry *wp; /* the weight plan so far (amk__lb_plan_weight) */
    int n_wp, cap_wp;
    /* a prefill chunk's matrices in a block format, dequantized for the tensor cores
       (amk__lb_dequant): per role, the layer's 16-bit copy its tiles read */
    struct {
        int buf;            /* w_deq.<role>.<layer> [N, K] in the activations' dtype; -1 none */
        int c_copy, n_copy; /* the COPY tasks into it: their counter and count */
    } deq[7];
} amk__lb;

/* Appends weight buffer id's entry to the plan (an id < 0, or no memory: the program's build error
   says so). */
AMK__FN void amk__lb_plan_weight(amk__lb *b, int id, amk_weight_transform t, int heads, int layer) {
    amk_weight_entry *e;
    if (id < 0) return;
    if (!amk__grow((void **)&b->wp, &b->cap_wp, b->n_wp + 1, sizeof *b->wp)) {
        if (b->p->build_error == AMK_OK) b->p->build_error = AMK_ERR_OUT_OF_MEMORY;
        return;
    }
    e = &b->wp[b->n_wp++];
    e->buffer = id;
    e->transform = t;
    e->heads = heads;
    e->layer = layer;
}

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

/* Task t gets buffer x as one more output (an LM-head tile's argmax partials, an RMSNORM_MLP_FOLD
   tile's qkv, an ATTENTION_O_PRENORM's caches); -1 when out of memory. */
AMK__FN int amk__lb_add_output(amk__lb *b, int t, int x) {
    amk_task *tk = &b->p->tasks[t];
    int *o = (int *)amk__realloc(tk->outputs, (size_t)(tk->n_outputs + 1) * sizeof(int));
    if (!o) return -1;
    o[tk->n_outputs++] = x;
    tk->outputs = o;
    return 0;
}

/* Rows per tile so that the rows of one phase (matrices read together, same K) spread over the
   SMs: ceil(total_rows / num_sms). */
AMK__FN int amk__lb_tile_rows(int64_t total_rows, int num_sms) {
    int64_t r = (total_rows + num_sms - 1) / num_sms;
    return r < 1 ? 1 : (int)r;
}

/* RMSNORM of x's rows of `hidden` by w [hidden] into out, after all producers (n_wait) of wait_c. */
AMK__FN int amk__lb_rmsnorm_rows(amk__lb *b, int x, int w, int out, int hidden, int counter, int wait_c, int n_wait,
                                const char *label) {
    int ins[2], t;
    ins[0] = x; ins[1] = w;
    t = amk__lb_task(b, AMK_OP_RMSNORM, ins, 2, out, counter, &wait_c, &n_wait, 1, (int64_t)hidden * 4, label);
    amk_task_set_real(b->p, t, "eps", b->c->rms_eps);
    amk_task_set_int(b->p, t, "hidden", hidden);
    return t;
}

/* ADD, SILU_MUL or RMSNORM (ins[0..n_in)) into out after the waits: one task over the whole of
   out in the decode step; over a prefill chunk's R rows, a task per slice of rows spread over the
   SMs (params m_off, M_tile; why: one task on one SM was half a chunk's time while the other SMs
   waited, bench/NOTES.md session "chunks"). RMSNORM tasks get eps and hidden (H). Each signals
   counter. Returns the task count, or -1. */
AMK__FN int amk__lb_rowwise(amk__lb *b, int op, const int *ins, int n_in, int out, int counter, const int *wait_c,
                           const int *wait_n, int n_wait, int64_t H, const char *label) {
    const int64_t R = b->R, per = R > 1 ? amk__lb_tile_rows(R, b->o.num_sms) : R;
    int64_t m;
    int n = 0;
    for (m = 0; m < R; m += per) {
        const int64_t mt = R - m < per ? R - m : per;
        /* its bytes (load_balance spreads a level's tasks by them; a decode step's ADD or SILU_MUL,
           the level's only task, counts none as before) */
        const int64_t bytes = op == AMK_OP_RMSNORM ? mt * H * 4 : R > 1 ? mt * H * 3 * amk_dtype_nbytes(b->o.act_dtype, 1) : 0;
        int t = amk__lb_task(b, op, ins, n_in, out, counter, wait_c, wait_n, n_wait, bytes, label);
        if (t < 0) return -1;
        if (op == AMK_OP_RMSNORM) {
            amk_task_set_real(b->p, t, "eps", b->c->rms_eps);
            amk_task_set_int(b->p, t, "hidden", H);
        }
        if (R > 1) {
            amk_task_set_int(b->p, t, "m_off", (int)m);
            amk_task_set_int(b->p, t, "M_tile", (int)mt);
        }
        n++;
    }
    return n;
}

/* RMSNORM of x [1, H] by w into out, after all producers (n_wait) of wait_c. */
AMK__FN int amk__lb_rmsnorm(amk__lb *b, int x, int w, int out, int counter, int wait_c, int n_wait,
                           const char *label) {
    return amk__lb_rmsnorm_rows(b, x, w, out, b->c->hidden, counter, wait_c, n_wait, label);
}

/* Task t's RoPE params: head_dim, the config's theta and its scaling (llama3, linear, yarn). */
AMK__FN void amk__lb_rope_params(amk__lb *b, int t) {
    const amk_llama_config *c = b->c;
    amk_task_set_int(b->p, t, "head_dim", c->head_dim);
    amk_task_set_real(b->p, t, "theta", c->rope_theta);
    if (c->rope_type != AMK_ROPE_DEFAULT) amk_task_set_int(b->p, t, "rope_type", c->rope_type);
    if (c->rope_llama3 || c->rope_type != AMK_ROPE_DEFAULT) {
        amk_task_set_real(b->p, t, "rope_factor", c->rope_factor);
        amk_task_set_real(b->p, t, "rope_low_freq_factor", c->rope_low_freq_factor);
        amk_task_set_real(b->p, t, "rope_high_freq_factor", c->rope_high_freq_factor);
        amk_task_set_int(b->p, t, "rope_orig_ctx", c->rope_orig_ctx);
    }
}

/* ROPE of x [1, heads*head_dim] at the position in buffer pos into out (the config's theta and
   llama3 scaling), after all producers (n_wait) of wait_c. */
AMK__FN int amk__lb_rope(amk__lb *b, int x, int pos, int out, int counter, int wait_c, int n_wait,
                        const char *label) {
    int ins[2], t;
    ins[0] = x; ins[1] = pos;
    t = amk__lb_task(b, AMK_OP_ROPE, ins, 2, out, counter, &wait_c, &n_wait, 1, 0, label);
    amk__lb_rope_params(b, t);
    return t;
}

/* The role of buffer id among a prefill chunk's dequantized copies (amk__lb.deq), or -1. */
AMK__FN int amk__lb_deq_role(const amk__lb *b, int id) {
    int r;
    for (r = 0; r < 7; r++)
        if (id >= 0 && b->deq[r].buf == id) return r;
    return -1;
}

/* 1 when a chunk's tile of op (base op GEMV_TILE, or RMSNORM_GEMV other than its ARGMAX form) over
   R rows of x (dtype xt), K columns, W of dtype wt (and RMSNORM_GEMV's norm weight of dtype nt) takes
   the tensor-copy GEMM (amk_gemm_tma, the prefill image; amk_plan_gemm_tma decides on the device
   side): R >= AMK_MMA_MIN_ROWS, 512 threads, K a multiple of 8, x and W of one 16-bit dtype;
   RMSNORM_GEMV with an F32 norm weight. */
AMK__FN int amk__lb_tma(int op, int xt, int nt, int wt, int64_t K, int64_t R) {
    if (!AMK_GEMM_TMA || R < AMK_MMA_MIN_ROWS || AMK_LLAMA_THREADS != 512 || K % 8) return 0;
    if (xt != wt || (wt != AMK_DTYPE_BF16 && wt != AMK_DTYPE_F16)) return 0;
    return op == AMK_OP_GEMV_TILE ||
           (amk_op_device(op, NULL) == AMK_OP_RMSNORM_GEMV && op != AMK_OP_RMSNORM_GEMV_ARGMAX && nt == AMK_DTYPE_F32);
}

/* The bytes of a row of K columns of each of the first n_mats matrices (rank-2 WEIGHT buffers, or
   their dequantized copies) among ins[0..n_in), summed: what a tile reads a row, in each matrix's
   own dtype. */
AMK__FN int64_t amk__lb_row_bytes(const amk__lb *b, const int *ins, int n_in, int n_mats, int64_t K) {
    int64_t sum = 0;
    int j;
    for (j = 0; j < n_in && n_mats > 0; j++) {
        const amk_buffer *w = ins[j] >= 0 && ins[j] < b->p->n_buffers ? &b->p->buffers[ins[j]] : NULL;
        if (!w || (w->kind != AMK_KIND_WEIGHT && amk__lb_deq_role(b, ins[j]) < 0) || w->rank != 2) continue;
        sum += amk_dtype_nbytes(w->dtype, K);
        n_mats--;
    }
    return sum;
}

/* The columns of a prefill chunk's GEMM_TILE blocks (amk__lb_tiles) over R rows, the caller's tiles
   being `rows` columns each: a chunk's matrix goes as blocks of AMK_TMA_BM rows x AMK_TMA_BN
   columns, so that the blocks spread over the SMs (a tile of N / num_sms columns would compute a
   whole block for a few); as narrow blocks of AMK_TMA_WBOX columns where the phase's wide ones
   (its columns: rows a tile over the SMs, as the caller sized them) would leave SMs idle (the
   8B's O and down at 512 rows: 64 blocks). */
AMK__FN int amk__lb_gemm_cols(const amk__lb *b, int64_t R, int rows) {
    return (R + AMK_TMA_BM - 1) / AMK_TMA_BM * (((int64_t)rows * b->o.num_sms + AMK_TMA_BN - 1) / AMK_TMA_BN) < b->o.num_sms
               ? AMK_TMA_WBOX : AMK_TMA_BN;
}

/* Tiles of opcode op over N weight rows of K columns: ins[0..n_in) are the task inputs (the first
   n_mats matrices among them count in est_bytes, by their bytes a row; RMSNORM_MLP's last, the residual, goes to
   the first tile only: it is added once), rows per tile; all signal counter after all wait_n[k]
   producers of each wait_c[k], k < n_wait, in that order. Tasks get K, N_tile, n_off (and eps for
   the fused RMSNORM_* ops and their variants; RoPE's params for the RoPE variants). A prefill
   chunk's tiles the tensor-copy GEMM takes (amk_gemm_tma, the prefill image) go by its blocks of
   rows as well (M_tile, m_off): GEMV tiles as GEMM_TILE tasks, rows first, RMSNORM_GEMV tiles
   (q, k and v) columns first. Returns the tile count, or -1. The tiles are the last tasks of the
   program. */
AMK__FN int amk__lb_tiles(amk__lb *b, int op, const int *ins, int n_in, int n_mats, int out, int counter,
                         int64_t N, int64_t K, int rows, const int *wait_c, const int *wait_n, int n_wait,
                         const char *what, int layer) {
    const int base = amk_op_device(op, NULL);
    const int64_t row_bytes = amk__lb_row_bytes(b, ins, n_in, n_mats, K); /* why by bytes: tiles of block formats balance too */
    const int xt = b->p->buffers[ins[0]].dtype, wt = b->p->buffers[ins[1]].dtype;
    /* the matrices' inputs: W (GEMV's 1, the RMSNORM_* ops' 2), the up's (3) or -1 */
    const int wi = base == AMK_OP_GEMV_TILE || base == AMK_OP_GEMM_TILE ? 1 : 2;
    const int wu = (base == AMK_OP_RMSNORM_SWIGLU || base == AMK_OP_RMSNORM_MLP) && n_in > 3 ? b->p->buffers[ins[3]].dtype : -1;
    /* x's rows: the chunk's, or the LM head's one row of a prefill program */
    const int64_t R = K > 0 ? amk_buffer_numel(&b->p->buffers[ins[0]]) / K : 0;
    int64_t mstep = R > 0 ? R : 1, nm, nn, i;
    int tile_op = op, rows_first = 0, n_tiles = 0, wc[4], wn[4], role = -1;
    /* a dequantized copy's tiles also wait for this layer's COPYs into it */
    for (i = 0; i < n_in && role < 0; i++) role = amk__lb_deq_role(b, ins[i]);
    if (role >= 0) {
        if (n_wait > 3) return -1; /* why never met: the callers pass at most 2 */
        for (i = 0; i < n_wait; i++) { wc[i] = wait_c[i]; wn[i] = wait_n[i]; }
        wc[n_wait] = b->deq[role].c_copy;
        wn[n_wait++] = b->deq[role].n_copy;
        wait_c = wc;
        wait_n = wn;
    }
    if (base == AMK_OP_RMSNORM_GEMV && amk__lb_tma(op, xt, wt, b->p->buffers[ins[2]].dtype, K, R)) {
        /* a chunk's q, k or v: a task a block of AMK_TMA_BM rows x AMK_TMA_BN columns (why rows
           too: by columns alone the 8B's 512-row chunk was 24 tasks of 4 blocks each, while the
           other SMs waited), or of AMK_TMA_WBOX columns where the phase's narrow blocks all fit
           one round on the SMs (the 8B's 128-row chunk: 48 tasks, not 24 on 24 SMs) and W is the
           model's own. why not narrow wherever the wide blocks leave SMs idle: a narrow block
           normalises the same x chunks as a wide one, so two rounds of them cost more than one of
           wide blocks. why not over a dequantized copy: the next layer's COPY tasks hold SMs
           then, and twice the tiles met them more often (8B Q4_K_M, 128 rows: 23.3 -> 24.5 ms,
           bench/RESULTS.md run 463) */
        const int64_t cols = b->phase_cols > 0 ? b->phase_cols : N;
        rows = role < 0 && 2 * ((R + AMK_TMA_BM - 1) / AMK_TMA_BM) * ((cols + AMK_TMA_BN - 1) / AMK_TMA_BN) <= b->o.num_sms
                   ? AMK_TMA_WBOX : AMK_TMA_BN;
        mstep = AMK_TMA_BM;
    }
    if (op == AMK_OP_GEMV_TILE && amk__lb_tma(op, xt, -1, wt, K, R)) {
        rows = amk__lb_gemm_cols(b, R, rows);
        mstep = AMK_TMA_BM;
        tile_op = AMK_OP_GEMM_TILE;
        rows_first = 1;
    }
    nm = R > mstep ? (R + mstep - 1) / mstep : 1;
    nn = (N + rows - 1) / rows;
    for (i = 0; i < nm * nn; i++) {
        const int64_t m0 = (rows_first ? i / nn : i % nm) * mstep, off = (rows_first ? i % nn : i / nm) * rows;
        const int64_t nt = N - off < rows ? N - off : rows, mt = R - m0 < mstep ? R - m0 : mstep;
        const int by_rows = tile_op == AMK_OP_GEMM_TILE || mstep < R; /* GEMM_TILE always takes its rows */
        int t;
        char label[96];
        if (by_rows)
            snprintf(label, sizeof label, "L%d %s[%lld:%lld, %lld:%lld]", layer, what, (long long)m0, (long long)(m0 + mt),
                     (long long)off, (long long)(off + nt));
        else
            snprintf(label, sizeof label, "L%d %s[%lld:%lld]", layer, what, (long long)off, (long long)(off + nt));
        t = amk__lb_task(b, tile_op, ins, base == AMK_OP_RMSNORM_MLP && off > 0 ? n_in - 1 : n_in, out, counter, wait_c,
                         wait_n, n_wait, nt * row_bytes, label);
        if (t < 0) return -1;
        amk_task_set_int(b->p, t, "K", K);
        amk_task_set_int(b->p, t, "N_tile", nt);
        amk_task_set_int(b->p, t, "n_off", off);
        if (by_rows) {
            amk_task_set_int(b->p, t, "M_tile", mt);
            amk_task_set_int(b->p, t, "m_off", m0);
        }
        if (base == AMK_OP_RMSNORM_GEMV || base == AMK_OP_RMSNORM_SWIGLU || base == AMK_OP_RMSNORM_MLP)
            amk_task_set_real(b->p, t, "eps", b->c->rms_eps);
        if (b->o.x_q8 && amk_plan_blk_x8(b->p->buffers[ins[wi]].dtype, wu, K))
            amk_task_set_int(b->p, t, "x_q8", 1);
        if (op == AMK_OP_RMSNORM_GEMV_ROPE || op == AMK_OP_RMSNORM_GEMV_ROPE_KV) amk__lb_rope_params(b, t);
        n_tiles++;
    }
    return n_tiles;
}

/* GEMV tiles of W [N, K] over x into out (+ bias [N], a buffer id, or -1 for none); all signal
   counter; returns the tile count. */
AMK__FN int amk__lb_gemv(amk__lb *b, int x, int w, int bias, int out, int counter, int64_t N, int64_t K,
                        int rows, int wait_c, int wait_n, const char *what, int layer) {
    int ins[3];
    ins[0] = x; ins[1] = w; ins[2] = bias;
    return amk__lb_tiles(b, AMK_OP_GEMV_TILE, ins, bias >= 0 ? 3 : 2, 1, out, counter, N, K, rows, &wait_c, &wait_n, 1,
                         what, layer);
}

/* The K splits of a prefill chunk's projection of a [R, K] by w [N, K] (amk__lb_proj_residual; rows
   the caller's columns a tile): 1, or S (a power of 2 up to AMK_LLAMA_PF_SPLIT_K) where the
   chunk's blocks (amk__lb_gemm_cols) take at most 1/S of the SMs, each split's K a multiple of
   AMK_TMA_BK and at least AMK_LLAMA_PF_SPLIT_K_MIN. why: a short chunk's O and down are a round
   of few blocks, each streaming a whole row of W at one SM's rate (the 8B's 128-row down: 32
   blocks of 111 us beside 100 idle SMs, bench/NOTES.md session "norm tiles"). Only for blocks the
   tensor-copy GEMM takes (prefill image; the portable one runs them by mma.sync). */
AMK__FN int amk__lb_k_splits(const amk__lb *b, int a, int w, int64_t N, int64_t K, int rows) {
    const int xt = b->p->buffers[a].dtype, wt = b->p->buffers[w].dtype;
    int64_t blocks;
    int S = 1;
    if (b->o.spec_ops || b->R <= 1 || !amk__lb_tma(AMK_OP_GEMV_TILE, xt, -1, wt, K, b->R)) return 1;
    blocks = (b->R + AMK_TMA_BM - 1) / AMK_TMA_BM * ((N + amk__lb_gemm_cols(b, b->R, rows) - 1) / amk__lb_gemm_cols(b, b->R, rows));
    while (2 * S <= AMK_LLAMA_PF_SPLIT_K && blocks * 2 * S <= b->o.num_sms && K % (2 * S * AMK_TMA_BK) == 0 &&
           K / (2 * S) >= AMK_LLAMA_PF_SPLIT_K_MIN)
        S *= 2;
    return S;
}

/* out = resid + a @ w.T ([N, K] tiles after the n_wait waits of wait_c/wait_n, as amk__lb_tiles):
   fused, the tiles add resid as their bias; spec_ops, GEMV tiles into a scratch buffer and an
   ADD; a prefill chunk's few blocks (amk__lb_k_splits) as S GEMM_TILEs of a K range each a block,
   into F32 partials that an ALLREDUCE_SHARD of rows adds to resid. Returns the counter that marks
   out complete (its producer count in *n_done), or -1. */
AMK__FN int amk__lb_proj_residual(amk__lb *b, int a, int w, int resid, int out, int64_t N, int64_t K,
                                  const int *wait_c, const int *wait_n, int n_wait, const char *what, int layer,
                                  int *n_done) {
    const int rows = amk__lb_tile_rows(N, b->o.num_sms);
    int c = amk_program_add_counter(b->p, b->o.spec_ops || b->R > 1 ? "projection tiles" : "projection + residual tiles");
    int ins[3], sum[2 + AMK_LLAMA_PF_SPLIT_K], n, tmp, c_add, S, s;
    char label[64];
    if (!b->o.spec_ops && b->R == 1) { /* (a bias is one row: over R rows the residual is an ADD) */
        ins[0] = a; ins[1] = w; ins[2] = resid;
        n = amk__lb_tiles(b, AMK_OP_GEMV_TILE, ins, 3, 1, out, c, N, K, rows, wait_c, wait_n, n_wait, what, layer);
        *n_done = n;
        return n < 0 ? -1 : c;
    }
    S = amk__lb_k_splits(b, a, w, N, K, rows);
    sum[0] = resid;
    for (s = 0, n = 0; s < S; s++) { /* split s: columns [s K / S, (s + 1) K / S) into its own partial */
        const int t0 = b->p->n_tasks;
        int j, ns;
        tmp = S > 1 ? amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, b->R, N, 0, 2, NULL, "%s.%d.k%d", what, layer, s)
                    : amk__lb_buf(b, AMK_KIND_ACTIVATION, b->o.act_dtype, b->R, N, 0, 2, NULL, "%s.%d", what, layer);
        ins[0] = a; ins[1] = w;
        ns = amk__lb_tiles(b, AMK_OP_GEMV_TILE, ins, 2, 1, tmp, c, N, K, rows, wait_c, wait_n, n_wait, what, layer);
        if (ns < 0) return -1;
        for (j = t0; S > 1 && j < b->p->n_tasks; j++) { /* (the tiles are the program's last tasks) */
            amk_task_set_int(b->p, j, "k_off", K / S * s);
            amk_task_set_int(b->p, j, "K_tile", K / S);
        }
        sum[1 + s] = tmp;
        n += ns;
    }
    c_add = amk_program_add_counter(b->p, "residual");
    snprintf(label, sizeof label, "L%d residual %s", layer, what);
    *n_done = amk__lb_rowwise(b, S > 1 ? AMK_OP_ALLREDUCE_SHARD : AMK_OP_ADD, sum, 1 + S, out, c_add, &c, &n, 1, N, label);
    return *n_done < 0 ? -1 : c_add;
}

/* Decode attention task t's params: the config's heads, the window [start, start + len), scale
   1/sqrt(head_dim); with g >= 0 (ATTENTION_DECODE, ATTENTION_O) kv head g alone, and the model's
   sliding window (Mistral) when it has one. */
AMK__FN void amk__lb_attn_params(amk__lb *b, int t, int64_t start, int64_t len, int g) {
    const amk_llama_config *c = b->c;
    amk_task_set_int(b->p, t, "head_dim", c->head_dim);
    amk_task_set_int(b->p, t, "kv_start", start);
    amk_task_set_int(b->p, t, "kv_len", len);
    /* YaRN's attention factor m on q's and k's cos and sin (HF) is m^2 on q . k: folded in here, so
       RoPE's epilogues on the step's path do not scale */
    const double m = c->rope_type == AMK_ROPE_YARN && c->rope_factor > 1.0f ? 0.1 * log((double)c->rope_factor) + 1.0 : 1.0;
    amk_task_set_real(b->p, t, "scale", m * m / sqrt((double)c->head_dim));
    amk_task_set_int(b->p, t, "n_heads", c->n_heads);
    amk_task_set_int(b->p, t, "n_kv_heads", c->n_kv_heads);
    if (g >= 0) { amk_task_set_int(b->p, t, "n_off", g); amk_task_set_int(b->p, t, "N_tile", 1); }
    if (g >= 0 && c->sliding_window > 0) amk_task_set_int(b->p, t, "sliding_window", c->sliding_window);
}

/* A FILL of out with 0 (the start of a sum) after the n_wait waits of wait_c/wait_n, signalling
   counter. Returns the task, or -1. */
AMK__FN int amk__lb_zero(amk__lb *b, int out, int counter, const int *wait_c, const int *wait_n, int n_wait,
                        const char *label) {
    const int t = amk__lb_task(b, AMK_OP_FILL, NULL, 0, out, counter, wait_c, wait_n, n_wait, 0, label);
    if (t >= 0) amk_task_set_real(b->p, t, "scale", 0.0);
    return t;
}

/* The attention tasks of one layer (S KV splits of window rows) reading q and the caches; each
   signals c_att after wc/wn. Fused: ATTENTION_DECODE per kv head and split (kv_len the full
   window, cut at pos on the device); else ATTENTION_TILE per split (kv_len set per step by
   amk_llama_set_pos). With S > 1 they write partials into parts[0..nb) (made here): nb = S / S_sets
   buffers of S_sets stacked sets, split j into set j / nb of buffer j % nb; else into attn. */
AMK__FN int amk__lb_attention(amk__lb *b, int layer, int q, int kc, int vc, int pos, int attn, int S,
                             int window, int max_seq, int c_att, const int *wc, const int *wn, int nwait,
                             int *parts) {
    const amk_llama_config *c = b->c;
    const int fused = !b->o.spec_ops, ad = b->o.act_dtype;
    const int64_t kv_rows = (int64_t)c->n_kv_heads * c->head_dim;
    int j, g, t, ins[4];
    char label[64];
    const int sets = b->plan.S_sets, nb = S / sets; /* partial buffers, each of `sets` stacked sets */
    for (j = 0; j < S; j++) {
        const int64_t start = (int64_t)j * window, len = max_seq - start < window ? max_seq - start : window;
        if (j < nb)
            parts[j] = S > 1 ? amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, (int64_t)sets * c->n_heads,
                                           c->head_dim + 2, 0, 2, NULL, "attn_part.%d.%d", layer, j)
                             : attn;
        ins[0] = q; ins[1] = kc; ins[2] = vc; ins[3] = pos;
        for (g = 0; g < (fused ? c->n_kv_heads : 1); g++) {
            if (fused) snprintf(label, sizeof label, "L%d attention[%d] kv%d", layer, j, g);
            else snprintf(label, sizeof label, "L%d attention[%d]", layer, j);
            /* split j: set j / nb of buffer j % nb (COMBINE's partial order) */
            t = amk__lb_task(b, fused ? AMK_OP_ATTENTION_DECODE : AMK_OP_ATTENTION_TILE, ins, fused ? 4 : 3,
                             parts[j % nb], c_att, wc, wn, nwait,
                             2LL * len * (fused ? c->head_dim : kv_rows) * (amk_dtype_bits(ad) / 8), label);
            if (t < 0) return -1;
            amk__lb_attn_params(b, t, start, fused ? len : 0, fused ? g : -1);
            if (S > 1) amk_task_set_int(b->p, t, "flags", AMK_ATTN_FLAG_PARTIAL);
            if (sets > 1) amk_task_set_int(b->p, t, "part", j / nb);
        }
    }
    return fused ? S * c->n_kv_heads : S;
}

/* A prefill program's attention of one layer: ATTENTION_PREFILL tiles of q's R rows (their
   positions pos[0] + m) over the caches, a kv head and a slice of rows each, about a tile an SM;
   with AMK_LLAMA_PF_ATTN_ROWS rows a tile or more at two tiles an SM, two (or four, below), emitted from the last
   rows to the first. All wait for the n_wait producers of each wc/wn. why two: row m attends
   pos[0] + m + 1 keys, so at a prompt's first chunk the last rows' tiles have twice the mean's
   work; load_balance places a level's tasks greedily on the least-loaded SM in order, which in
   descending order of their bytes (the keys up to their last row) pairs a heavy tile with a light
   one on each SM (8B 2048-token prompt +3.4%, 1B +3.0%, their 512-token prompts +0.6% and +1.0%;
   tiles of 4 rows at 128 lost 4%: bench/RESULTS.md run 429). With AMK_LLAMA_PF_ATTN_ROWS4 rows a tile
   or more at four tiles an SM, four (a 2048-row chunk: tiles of 31 rows, 124 vectors of the 8B's
   GQA, one pass of the block's 8 warp pairs where 61 rows took two; its 4096-token prompt +4.3%,
   run 456). Returns the tile count, or -1. */
AMK__FN int amk__lb_attention_prefill(amk__lb *b, int layer, int q, int kc, int vc, int attn, int c_att, const int *wc,
                                     const int *wn, int nwait) {
    const amk_llama_config *c = b->c;
    const int64_t per1 = ((int64_t)b->o.num_sms + c->n_kv_heads - 1) / c->n_kv_heads;
    const int two = (b->R + 2 * per1 - 1) / (2 * per1) >= AMK_LLAMA_PF_ATTN_ROWS;
    const int four = (b->R + 4 * per1 - 1) / (4 * per1) >= AMK_LLAMA_PF_ATTN_ROWS4;
    const int per = four ? 4 * per1 : two ? 2 * per1 : per1;
    const int64_t rows = (b->R + per - 1) / per, last = (b->R - 1) / rows * rows;
    int g, t, n = 0, ins[4];
    int64_t i, m;
    char label[64];
    ins[0] = q; ins[1] = kc; ins[2] = vc; ins[3] = b->pos;
    for (i = 0; i <= last; i += rows)
        for (g = 0; g < c->n_kv_heads; g++) {
            m = two ? last - i : i;
            const int64_t mt = b->R - m < rows ? b->R - m : rows;
            snprintf(label, sizeof label, "L%d attention kv%d rows[%lld:%lld]", layer, g, (long long)m, (long long)(m + mt));
            /* its bytes: the caches' rows up to its last query, a kv head's columns */
            t = amk__lb_task(b, AMK_OP_ATTENTION_PREFILL, ins, 4, attn, c_att, wc, wn, nwait,
                             2LL * (m + mt) * c->head_dim * (amk_dtype_bits(b->o.act_dtype) / 8), label);
            if (t < 0) return -1;
            amk__lb_attn_params(b, t, 0, 0, g);
            amk_task_set_int(b->p, t, "m_off", (int)m);
            amk_task_set_int(b->p, t, "M_tile", (int)mt);
            n++;
        }
    return n;
}

/* The ATTENTION_O tasks of one layer (one KV split: the whole cache): per kv head, tasks of `rows`
   rows of W_oT (the last of a head shorter), each the head's attention and its rows' share of O,
   adding into h; the first also adds the residual x. All wait for the n_wait producers of wait_c
   and signal c_att. With prenorm (a folded layer) q is the raw projections qkv and the tasks are
   ATTENTION_O_PRENORM: they scale by x's rms and rotate themselves, and a head's first task stores its k and v
   into the caches' row pos. Returns the task count, or -1. */
AMK__FN int amk__lb_attention_o(amk__lb *b, int layer, int q, int kc, int vc, int pos, int w_o, int x, int h,
                               int rows, int max_seq, int c_att, int wait_c, int n_wait, int prenorm) {
    const amk_llama_config *c = b->c;
    const int64_t per_head = (int64_t)(c->n_heads / c->n_kv_heads) * c->head_dim; /* W_oT rows a kv head */
    const int64_t kv_bytes = 2LL * max_seq * c->head_dim * (amk_dtype_bits(b->o.act_dtype) / 8);
    int g, t, n = 0, ins[7];
    int64_t off;
    char label[96]; /* why 96: four numbers of up to 20 digits each fit */
    ins[0] = q; ins[1] = kc; ins[2] = vc; ins[3] = pos; ins[4] = w_o; ins[5] = x; ins[6] = x; /* PRENORM: x, resid */
    for (g = 0; g < c->n_kv_heads; g++)
        for (off = g * per_head; off < (g + 1) * per_head; off += rows) {
            const int64_t nt = (g + 1) * per_head - off < rows ? (g + 1) * per_head - off : rows;
            snprintf(label, sizeof label, "L%d attention_o[%lld:%lld] kv%d", layer, (long long)off,
                     (long long)(off + nt), g);
            t = amk__lb_task(b, prenorm ? AMK_OP_ATTENTION_O_PRENORM : AMK_OP_ATTENTION_O, ins, (n == 0 ? 6 : 5) + prenorm,
                             h, c_att, &wait_c, &n_wait, 1,
                             kv_bytes + nt * amk_dtype_nbytes(b->p->buffers[w_o].dtype, c->hidden), label);
            if (t < 0) return -1;
            amk__lb_attn_params(b, t, 0, max_seq, g);
            amk_task_set_int(b->p, t, "m_off", off);
            amk_task_set_int(b->p, t, "M_tile", nt);
            if (prenorm) {
                amk_task_set_real(b->p, t, "eps", c->rms_eps);
                amk__lb_rope_params(b, t);
                if (off == g * per_head && (amk__lb_add_output(b, t, kc) < 0 || amk__lb_add_output(b, t, vc) < 0))
                    return -1;
            }
            n++;
        }
    return n;
}

/* ---- the decode step, part by part ------------------------------------------------------------ */

/* The dtype of the buffer that holds tensor (HF shape [rows, cols]) row-major as stored:
   weight_dtype_of's answer where it is a block format whose block divides cols, else
   weight_dtype (amk_llama_build_opts). */
AMK__FN int amk__lb_matrix_dtype(const amk__lb *b, const char *tensor, int64_t rows, int64_t cols) {
    int t, E;
    if (!b->o.weight_dtype_of) return b->o.weight_dtype;
    t = b->o.weight_dtype_of(b->o.weight_dtype_user, tensor, rows, cols);
    E = amk_dtype_block(t, NULL); /* 0 for a dtype that is not a block format */
    return E > 0 && cols % E == 0 ? t : b->o.weight_dtype;
}

/* b->plan.blk_*: which matrices weight_dtype_of would store in a block format, asked before the
   forms are chosen (amk__lb_decide turns off the forms that would need them transposed). */
AMK__FN void amk__lb_blocks(amk__lb *b) {
    /* a layer's matrices with their HF [rows, cols]: 'q' q_rows, 'k' kv_rows, 'h' hidden, 'i' ffn */
    static const struct { const char *name; char rows, cols; } mats[7] = {
        {"self_attn.q_proj", 'q', 'h'}, {"self_attn.k_proj", 'k', 'h'}, {"self_attn.v_proj", 'k', 'h'},
        {"self_attn.o_proj", 'h', 'q'}, {"mlp.gate_proj", 'i', 'h'},    {"mlp.up_proj", 'i', 'h'},
        {"mlp.down_proj", 'h', 'i'}};
    const amk_llama_config *c = b->c;
    amk__lb_plan *pl = &b->plan;
    const int64_t q = (int64_t)c->n_heads * c->head_dim, k = (int64_t)c->n_kv_heads * c->head_dim;
    char src[128];
    int i, j;
    pl->blk_any = pl->blk_down = pl->blk_o = 0;
    if (!b->o.weight_dtype_of) return;
    pl->blk_any = amk_dtype_is_block(amk__lb_matrix_dtype(b, "model.embed_tokens.weight", c->vocab, c->hidden)) ||
                  (!c->tie_embeddings && amk_dtype_is_block(amk__lb_matrix_dtype(b, "lm_head.weight", c->vocab, c->hidden)));
    for (i = 0; i < c->n_layers; i++)
        for (j = 0; j < 7; j++) {
            const int64_t r = mats[j].rows == 'q' ? q : mats[j].rows == 'k' ? k : mats[j].rows == 'h' ? c->hidden : c->intermediate;
            const int64_t cl = mats[j].cols == 'q' ? q : mats[j].cols == 'h' ? c->hidden : c->intermediate;
            int dt, E;
            snprintf(src, sizeof src, "model.layers.%d.%s.weight", i, mats[j].name);
            if (!amk_dtype_is_block(dt = amk__lb_matrix_dtype(b, src, r, cl))) continue;
            pl->blk_any = 1;
            if (j == 6 && (E = amk_dtype_block(dt, NULL)) > pl->blk_down) pl->blk_down = E;
            pl->blk_o |= j == 3;
        }
}

/* With ATTENTION_O: the SM sets (AMK_LLAMA_SM_SETS) where the SMs allow them, their sizes and the
   rows they give an ATTENTION_O task, a Q/K/V tile and an MLP tile; else nothing. Set Y: one SM
   an ATTENTION_O task, also the Q/K/V tiles; set Z: the MLP tiles. */
AMK__FN void amk__lb_sm_sets(amk__lb *b) {
    const amk_llama_config *c = b->c;
    amk__lb_plan *pl = &b->plan;
    const int64_t per_head = (int64_t)(c->n_heads / c->n_kv_heads) * c->head_dim, ar = AMK_LLAMA_SETS_ATTN_ROWS;
    const int64_t ny = (int64_t)c->n_kv_heads * ((per_head + ar - 1) / ar), nz = b->o.num_sms - ny;
    int r;
    /* why these bounds: the tasks keep their fast forms at 512 threads (amk_llama_build_lowered's):
       an MLP tile a row a warp, a Q/K/V tile a RoPE pair a warp beside the trig warp (30 rows),
       an attention task's rows of W_oT staged */
    if (!(ny < b->o.num_sms && nz >= 1 && (c->intermediate + nz - 1) / nz <= AMK_LLAMA_MLP_MAX_ROWS &&
          amk_plan_rows_stage_bytes(b->o.weight_dtype, c->hidden, ar) > 0))
        return;
    r = amk__lb_tile_rows(pl->q_rows + 2 * pl->kv_rows, (int)ny);
    r += r % 2;
    if (r <= 30 && 2 * ((pl->kv_rows + r - 1) / r) + (pl->q_rows + r - 1) / r <= ny) {
        pl->set_y = (int)ny;
        pl->set_z = (int)nz;
        pl->ao_rows = (int)ar;
        pl->mlp_rows = amk__lb_tile_rows(c->intermediate, pl->set_z);
        pl->qkv_rows = r;
    }
}

/* The KV splits AMK picks for a cache of max_seq rows. why: a split's task streams its kv head's
   rows at about one SM's rate (~17 GB/s on the H200: 8B 256 rows 10.2 us, 512 17.8, 1024 33.6;
   bench/RESULTS.md run 420), so a long cache is spread over the SMs: a task a kv head a split, as
   many splits as the SMs hold, windows of at least AMK_LLAMA_SPLIT_ROWS rows. A cache of up to 512
   rows keeps one split (the one-step attention, ATTENTION_O, takes only that). The spec's
   ATTENTION_TILE has no stacked partials: 8 at most there. */
AMK__FN int amk__lb_auto_splits(const amk_llama_build_opts *o, const amk_llama_config *c, int max_seq, int fused) {
    int S = (max_seq + 511) / 512, fill, by_rows;
    if (S <= 1) return 1;
    fill = c->n_kv_heads > 0 && o->num_sms > c->n_kv_heads ? o->num_sms / c->n_kv_heads : 1;
    by_rows = (max_seq + AMK_LLAMA_SPLIT_ROWS - 1) / AMK_LLAMA_SPLIT_ROWS;
    if (fill > by_rows) fill = by_rows;
    if (fill > S) S = fill;
    if (!fused || S <= 8) return S > 8 ? 8 : S;
    S = S > AMK_LLAMA_MAX_SPLITS ? AMK_LLAMA_MAX_SPLITS : S;
    return S - S % 8;
}

/* A window of w rows a split for splits of max_seq rows: in whole 16-row groups (the tensor-core
   attention's grain) where that keeps the split count. */
AMK__FN int amk__lb_window(int max_seq, int s) {
    const int w = (max_seq + s - 1) / s, w16 = (w + 15) / 16 * 16;
    return s > 1 && (int64_t)w16 * (s - 1) < max_seq ? w16 : w;
}

/* *S splits of *window rows for a cache of max_seq rows from `want` of them (the last split may be
   shorter; none starts past the cache; above 8 a multiple of 8: a COMBINE input's stacked sets). */
AMK__FN void amk__lb_splits(int max_seq, int want, int *S, int *window) {
    int s = want < 1 ? 1 : want > max_seq ? max_seq : want, w, n;
    for (;;) {
        w = amk__lb_window(max_seq, s);
        n = (max_seq + w - 1) / w;
        if (n <= 8 || n % 8 == 0) break;
        s = n - n % 8;
    }
    *S = n;
    *window = w;
}

/* Checks the config and the options and resolves b->plan from them (the -1s into AMK's choices);
   AMK_ERR_INVALID_ARG for a bad shape or dtype. */
AMK__FN amk_result amk__lb_decide(amk__lb *b, amk_diag *d) {
    const amk_llama_config *c = b->c;
    const amk_llama_build_opts *o = &b->o;
    amk__lb_plan *pl = &b->plan;
    const int L = c->n_layers, H = c->hidden, I = c->intermediate, NH = c->n_heads, NKV = c->n_kv_heads;
    const int HD = c->head_dim, V = c->vocab, wd = o->weight_dtype;
    pl->mlp_rows = amk__lb_tile_rows(I, o->num_sms > 0 ? o->num_sms : 1); /* an RMSNORM_MLP tile's */
    if (o->mlp_accum >= 0) pl->accum = o->mlp_accum != 0;
    else /* do one tile's rows of W_downT stage on the device? */
        pl->accum = AMK_LLAMA_MLP_ACCUM == 2 ||
                    (AMK_LLAMA_MLP_ACCUM == 1 && amk_plan_rows_stage_bytes(wd, H, pl->mlp_rows) > 0);
    /* why not by default with a block down_proj: slower than the two-step MLP (SmolLM2 Q4_1 1.13
       against 0.98 ms/token, Q4_K_M 3.9 against 1.0 in 6 tiles of 256 rows; bench/RESULTS.md run
       345); asked for, it reads the block down_proj as stored (plan.down_stored, below) */
    pl->accum = pl->accum && !o->spec_ops && !(o->mlp_accum < 0 && pl->blk_down);
    pl->rd = pl->accum ? AMK_DTYPE_F32 : o->act_dtype; /* why: atomic adds need F32; the residual is 2-16 KB */
    if (L < 1 || H < 1 || I < 1 || NH < 1 || NKV < 1 || HD < 2 || HD % 2 || V < 1 || NH % NKV)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "llama build: bad shape (layers %d hidden %d ffn %d heads %d/%d head_dim %d vocab %d)",
                         L, H, I, NH, NKV, HD, V);
    pl->max_seq = o->max_seq > 0 ? o->max_seq
                : (c->max_pos > 0 && c->max_pos < AMK_LLAMA_DEFAULT_MAX_SEQ ? c->max_pos : AMK_LLAMA_DEFAULT_MAX_SEQ);
    /* a sliding window (Mistral): the fused step's attention tasks take it (sliding_window); the
       spec opcodes' ATTENTION_TILE does not, and within the window a query sees every key, so
       there the context is kept to the window */
    if (c->sliding_window > 0 && pl->max_seq > c->sliding_window && o->spec_ops) {
        if (o->max_seq > 0)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama build: a context of %d tokens is longer than the model's "
                             "sliding window of %d, which the step of the spec's opcodes does not take (the "
                             "fused step does)", o->max_seq, c->sliding_window);
        pl->max_seq = c->sliding_window;
    }
    pl->fused = !o->spec_ops;
    if (o->kv_splits < 0 || o->kv_splits > (pl->fused ? AMK_LLAMA_MAX_SPLITS : 8) ||
        (o->kv_splits > 8 && o->kv_splits % 8))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: kv_splits = %d (0: AMK's choice; 1..8, or with AMK's "
                         "opcodes a multiple of 8 up to %d: the spec's ATTENTION_TILE has no stacked partial sets)",
                         o->kv_splits, AMK_LLAMA_MAX_SPLITS);
    amk__lb_splits(pl->max_seq, o->kv_splits > 0 ? o->kv_splits : amk__lb_auto_splits(o, c, pl->max_seq, pl->fused),
                   &pl->S, &pl->window);
    pl->S_sets = pl->S > 8 ? pl->S / 8 : 1;
    if (o->prefill_rows < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: prefill_rows = %d (0: the decode step)", o->prefill_rows);
    if (o->prefill_rows > 0) { /* the prefill program: one split, the two-step attention and MLP, no fold */
        if (!pl->fused)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama build: a prefill program takes AMK's opcodes, and not yet "
                             "a model with q/k/v biases or q/k norms (Qwen2, Qwen3)");
        if (o->prefill_rows > pl->max_seq)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: a prefill chunk of %d rows is longer than the cache "
                             "(%d rows)", o->prefill_rows, pl->max_seq);
        pl->window = pl->max_seq;
        pl->S = 1;
        pl->S_sets = 1;
        pl->accum = 0;
        pl->rd = o->act_dtype;
    }
    if (!amk_dtype_is_float(o->act_dtype) || !amk_dtype_is_float(wd) || o->num_sms < 1)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: dtypes must be float, num_sms >= 1");
    pl->ao_rows = amk__lb_tile_rows((int64_t)NH * HD, o->num_sms); /* an ATTENTION_O task's rows of W_oT */
    if (pl->ao_rows < AMK_LLAMA_ATTN_O_MIN_ROWS) pl->ao_rows = AMK_LLAMA_ATTN_O_MIN_ROWS;
    if (o->attn_o >= 0) pl->ao = o->attn_o != 0;
    else /* do a task's rows of W_oT stage on the device? */
        pl->ao = AMK_LLAMA_ATTN_O == 2 ||
                 (AMK_LLAMA_ATTN_O == 1 && pl->accum && amk_plan_rows_stage_bytes(wd, H, pl->ao_rows) > 0);
    pl->ao = pl->ao && pl->fused && pl->S == 1 && !(o->attn_o < 0 && pl->blk_o) && o->prefill_rows <= 0; /* block o_proj: as accum */
    pl->q_rows = (int64_t)NH * HD;
    pl->kv_rows = (int64_t)NKV * HD;
    pl->set_y = pl->set_z = 0;
    if (pl->ao && AMK_LLAMA_SM_SETS) amk__lb_sm_sets(b);
    /* a Q/K/V tile's rows, with the sets one a set-Y SM (above). why two thirds of the SMs with
       ATTENTION_O (a tiny model's step): fewer, larger tiles (SmolLM2: 80 of 12 rows) start closer
       together, and the attention tasks find more SMs idle (bench/RESULTS.md run 205). With AMK's
       opcodes even: RoPE pairs (2i, 2i+1) stay inside one tile */
    if (!pl->set_y) {
        pl->qkv_rows = amk__lb_tile_rows(pl->q_rows + 2 * pl->kv_rows, pl->ao ? (o->num_sms * 2 + 2) / 3 : o->num_sms);
        if (pl->fused) pl->qkv_rows += pl->qkv_rows % 2;
    }
    /* the folded Q/K/V: the MLP tiles build the next layer's projections and its ATTENTION_O tasks
       take them, so it needs both one-step forms, and a next layer */
    if (o->qkv_fold >= 0) pl->fold = o->qkv_fold != 0;
    else pl->fold = AMK_LLAMA_QKV_FOLD == 2 || (AMK_LLAMA_QKV_FOLD == 1 && wd == AMK_DTYPE_BF16 && pl->set_y);
    /* why not with block matrices unless asked: W_cat is derived in weight_dtype from the matrices it
       folds, so the step would read floats where it could read the stored blocks */
    pl->fold = pl->fold && pl->ao && pl->accum && L > 1 && !(o->qkv_fold < 0 && pl->blk_any) && o->prefill_rows <= 0;
    pl->F = pl->q_rows + 2 * pl->kv_rows;
    /* the one-step MLP reads a block down_proj as stored, each output row's K-slice of whole blocks
       (RMSNORM_MLP's block W_down): tiles of a multiple of the largest block, at most H rows (the
       device restages a tile's values where x was) and x by 32-element units (H a multiple of 32);
       elsewhere it keeps it transposed in weight_dtype. why not folded: W_cat derives from
       down_proj in the step's layout as [I, H] (amk__llm_fold) */
    pl->down_stored = pl->blk_down > 0 && H % 32 == 0 && pl->blk_down <= H && pl->accum && !pl->fold;
    if (pl->down_stored) { /* the tiles' rows (the SM sets' too): whole blocks, at most H */
        const int E = pl->blk_down, r = (pl->mlp_rows + E - 1) / E * E, cap = H / E * E;
        pl->mlp_rows = r < cap ? r : cap;
    }
    return AMK_OK;
}

/* The program's meta: what the step is and what the loader must do to the weights it reads. */
AMK__FN void amk__lb_meta(amk__lb *b) {
    const amk__lb_plan *pl = &b->plan;
    char meta[32];
    amk_program_set_meta_string(b->p, "model", b->c->name[0] ? b->c->name : "llama");
    amk_program_set_meta_string(b->p, "regime", b->o.prefill_rows > 0 ? "prefill" : "decode");
    amk_program_set_meta_string(b->p, "dtype", amk_dtype_name(b->o.weight_dtype));
    snprintf(meta, sizeof meta, "%d", pl->window);
    amk_program_set_meta_string(b->p, "kv_window", meta);
    if (pl->fused) amk_program_set_meta_string(b->p, "qk_rows", "interleaved");
    if (pl->accum) /* (where a down_proj is in a block format it stays as stored) */
        amk_program_set_meta_string(b->p, "down_proj", pl->down_stored ? "transposed, blocks as stored" : "transposed");
    if (pl->ao) amk_program_set_meta_string(b->p, "o_proj", "transposed");
    if (pl->fold) amk_program_set_meta_string(b->p, "qkv_fold", "1");
    if (pl->set_y) {
        snprintf(meta, sizeof meta, "%d %d", pl->set_y, pl->set_z);
        amk_program_set_meta_string(b->p, "sm_sets", meta);
    }
}

/* The embedding: x.0 [R, H] rd = embed [V, H] (wd, or its block format: amk__lb_matrix_dtype) at
   the rows token (IO_INPUT I32 [R]); also makes the input pos. A prefill chunk's rows go as tasks
   of rows spread over the SMs (amk__lb_rowwise). why: as one task, on one SM, the 8B's 512 rows
   took 294 us in BF16 and 1.9 ms from Q4_K blocks while every other SM waited (bench/RESULTS.md
   run 505). */
AMK__FN int amk__lb_embed(amk__lb *b) {
    const int H = b->c->hidden, wd = amk__lb_matrix_dtype(b, "model.embed_tokens.weight", b->c->vocab, H);
    int ins[2], t;
    ins[0] = amk__lb_buf(b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, b->R, 0, 0, 1, NULL, "token");
    b->pos = amk__lb_buf(b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, b->R, 0, 0, 1, NULL, "pos");
    b->embed = amk__lb_buf(b, AMK_KIND_WEIGHT, wd, b->c->vocab, H, 0, 2, "model.embed_tokens.weight",
                           "model.embed_tokens.weight");
    amk__lb_plan_weight(b, b->embed, AMK_WEIGHT_AS_STORED, 0, -1);
    b->x = amk__lb_buf(b, AMK_KIND_ACTIVATION, b->plan.rd, b->R, H, 0, 2, NULL, "x.0");
    b->cx = amk_program_add_counter(b->p, "embed done");
    ins[1] = b->embed;
    if (b->R > 1) {
        const int t0 = b->p->n_tasks;
        b->n_cx = amk__lb_rowwise(b, AMK_OP_EMBED, ins, 2, b->x, b->cx, NULL, NULL, 0, H, "embed");
        for (t = t0; t < b->p->n_tasks; t++) amk_task_set_int(b->p, t, "hidden", H);
        return b->n_cx < 0 ? -1 : 0;
    }
    b->n_cx = 1;
    t = amk__lb_task(b, AMK_OP_EMBED, ins, 2, b->x, b->cx, NULL, NULL, 0, b->R * amk_dtype_nbytes(wd, H), "embed");
    if (t < 0) return -1;
    amk_task_set_int(b->p, t, "hidden", H);
    return 0;
}

/* One layer's buffers, and what its attention half hands its MLP half. */
typedef struct amk__lb_layer {
    int i;
    int prenorm;       /* folded, i > 0: the ATTENTION_O tasks take qkv.(i-1); no Q/K/V tiles */
    int w_an, w_fn;    /* input_layernorm, post_attention_layernorm [H] F32 */
    int w_q;           /* [q_rows, H] wd */
    int w_k, w_v;      /* [kv_rows, H] wd */
    int b_q, b_k, b_v; /* with the config's qkv_bias their biases [q_rows], [kv_rows] F32; else -1 */
    int w_qn, w_kn;    /* with the config's qk_norm q_norm, k_norm [head_dim] F32; else -1 */
    int w_o;           /* [H, q_rows] wd; with ATTENTION_O [q_rows, H] (meta o_proj "transposed") */
    int w_g, w_u;      /* gate_proj, up_proj [I, H] wd */
    int w_dn;          /* [H, I] wd; with the one-step MLP [I, H] (meta down_proj "transposed") unless
                          in a block format (plan.down_stored) */
    int w_cat;         /* folded, not the last layer: W_cat.i [I + H, F] wd (amk_llm derives it); else -1 */
    int qkv;           /* with w_cat: qkv.i [1, F] F32, the next layer's raw Q/K/V projections; else -1 */
    int kc, vc;        /* k_cache.i, v_cache.i [max_seq, NKV, HD] ad */
    int attn;          /* attention's output attn.i [1, q_rows] ad; -1 with ATTENTION_O */
    int h;             /* h.i = x.i + O [1, H] rd (F32 with ATTENTION_O: its tasks add into it) */
    int xo;            /* x.(i+1) = h.i + MLP [1, H] rd */
    int c_f;           /* the counter of the FILL of x.(i+1) (the one-step MLP), else -1 */
    int n_fill;        /* the FILLs that count with the attention tasks (with ATTENTION_O) */
    int c_o, n_o;      /* h complete: its counter, that counter's producers */
} amk__lb_layer;

/* Layer i's WEIGHT buffer whose name and source are fmt with i: [r0, r1] wd (a matrix read row-major
   as stored, transform AS_STORED or QK_INTERLEAVED: the dtype amk__lb_matrix_dtype gives), or rank 1
   [r0] F32 (a norm's scale). */
AMK__FN int amk__lb_weight(amk__lb *b, int64_t r0, int64_t r1, int rank, amk_weight_transform t, int heads,
                           const char *fmt, int i) {
    char src[128];
    int id, dt = rank == 1 ? AMK_DTYPE_F32 : b->o.weight_dtype;
    snprintf(src, sizeof src, fmt, i);
    if (rank == 2 && (t == AMK_WEIGHT_AS_STORED || t == AMK_WEIGHT_QK_INTERLEAVED)) dt = amk__lb_matrix_dtype(b, src, r0, r1);
    id = amk__lb_buf(b, AMK_KIND_WEIGHT, dt, r0, r1, 0, rank, src, "%s", src);
    amk__lb_plan_weight(b, id, t, heads, t == AMK_WEIGHT_QKV_FOLD ? i : -1);
    return id;
}

/* 1 when layer i's down_proj stays as stored in the one-step MLP: a block format (plan.down_stored). */
AMK__FN int amk__lb_down_stored(const amk__lb *b, int i) {
    char src[64];
    snprintf(src, sizeof src, "model.layers.%d.mlp.down_proj.weight", i);
    return b->plan.down_stored && amk_dtype_is_block(amk__lb_matrix_dtype(b, src, b->c->hidden, b->c->intermediate));
}

/* Layer i's weights, caches and activations (shapes in amk__lb_layer). */
AMK__FN void amk__lb_layer_buffers(amk__lb *b, amk__lb_layer *ly, int i) {
    const amk__lb_plan *pl = &b->plan;
    const int H = b->c->hidden, I = b->c->intermediate, NKV = b->c->n_kv_heads, HD = b->c->head_dim;
    const int ad = b->o.act_dtype;
    memset(ly, 0, sizeof *ly);
    ly->i = i;
    ly->prenorm = pl->fold && i > 0;
    ly->c_f = ly->w_cat = ly->qkv = -1;
    /* the fused step's RoPE pairs adjacent rows: Q and K in interleaved pair order */
    const amk_weight_transform qk = pl->fused ? AMK_WEIGHT_QK_INTERLEAVED : AMK_WEIGHT_AS_STORED;
    ly->w_an = amk__lb_weight(b, H, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.input_layernorm.weight", i);
    ly->w_q = amk__lb_weight(b, pl->q_rows, H, 2, qk, pl->fused ? b->c->n_heads : 0, "model.layers.%d.self_attn.q_proj.weight", i);
    ly->w_k = amk__lb_weight(b, pl->kv_rows, H, 2, qk, pl->fused ? NKV : 0, "model.layers.%d.self_attn.k_proj.weight", i);
    ly->w_v = amk__lb_weight(b, pl->kv_rows, H, 2, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.v_proj.weight", i);
    ly->b_q = ly->b_k = ly->b_v = ly->w_qn = ly->w_kn = -1;
    if (b->c->qk_norm) {
        ly->w_qn = amk__lb_weight(b, HD, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.q_norm.weight", i);
        ly->w_kn = amk__lb_weight(b, HD, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.k_norm.weight", i);
    }
    if (b->c->qkv_bias) { /* (the spec's step: q_proj and k_proj as stored, so their biases too) */
        ly->b_q = amk__lb_weight(b, pl->q_rows, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.q_proj.bias", i);
        ly->b_k = amk__lb_weight(b, pl->kv_rows, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.k_proj.bias", i);
        ly->b_v = amk__lb_weight(b, pl->kv_rows, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.v_proj.bias", i);
    }
    ly->w_o = pl->ao ? amk__lb_weight(b, pl->q_rows, H, 2, AMK_WEIGHT_TRANSPOSED, 0, "model.layers.%d.self_attn.o_proj.weight", i)
                     : amk__lb_weight(b, H, pl->q_rows, 2, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.self_attn.o_proj.weight", i);
    ly->w_fn = amk__lb_weight(b, H, 0, 1, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.post_attention_layernorm.weight", i);
    ly->w_g = amk__lb_weight(b, I, H, 2, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.mlp.gate_proj.weight", i);
    ly->w_u = amk__lb_weight(b, I, H, 2, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.mlp.up_proj.weight", i);
    ly->w_dn = pl->accum && !amk__lb_down_stored(b, i)
                   ? amk__lb_weight(b, I, H, 2, AMK_WEIGHT_TRANSPOSED, 0, "model.layers.%d.mlp.down_proj.weight", i)
                   : amk__lb_weight(b, H, I, 2, AMK_WEIGHT_AS_STORED, 0, "model.layers.%d.mlp.down_proj.weight", i);
    if (pl->fold && i + 1 < b->c->n_layers) { /* W_cat.i = [W_fold ; W_base] */
        ly->w_cat = amk__lb_weight(b, I + H, pl->F, 2, AMK_WEIGHT_QKV_FOLD, 0, "amk.qkv_fold.%d", i);
        ly->qkv = amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, pl->F, 0, 2, NULL, "qkv.%d", i);
    }
    ly->kc = amk__lb_buf(b, AMK_KIND_KV_CACHE, ad, pl->max_seq, NKV, HD, 3, NULL, "k_cache.%d", i);
    ly->vc = amk__lb_buf(b, AMK_KIND_KV_CACHE, ad, pl->max_seq, NKV, HD, 3, NULL, "v_cache.%d", i);
    ly->attn = pl->ao ? -1 : amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, b->R, pl->q_rows, 0, 2, NULL, "attn.%d", i);
    ly->h = b->h_next >= 0 ? b->h_next
          : amk__lb_buf(b, AMK_KIND_ACTIVATION, pl->ao ? AMK_DTYPE_F32 : pl->rd, b->R, H, 0, 2, NULL, "h.%d", i);
    ly->xo = amk__lb_buf(b, AMK_KIND_ACTIVATION, pl->rd, b->R, H, 0, 2, NULL, "x.%d", i + 1);
}

/* A prefill chunk's layer ly: its matrices in a block format whose tiles would take the
   tensor-copy GEMM as 16-bit matrices (amk__lb_tma) are dequantized, each into a copy
   (w_deq.<role>.<layer> [N, K] in the activations' dtype) by COPY tasks of whole rows that together
   spread over the SMs, after the n_wait waits of wc/wn (the layer's input x: so all of the layer
   before has read its copies, and the lowering's pages, graph_color, put this layer's where those
   were: the chunk holds a layer's matrices in 16 bits, not the model's); ly's field is replaced by
   the copy, and the tiles that read it wait for its COPYs (amk__lb_tiles). why: the tensor cores
   take 16-bit operands; a block tile decodes its rows of W once a row of x, so a chunk of R rows
   costs ~R decode steps' work (bench/RESULTS.md run 365). why all at the layer's start: beside the
   layer before's attention (on the SMs it leaves idle) was 3-6% slower (runs 409, 411), each just
   before the phase that reads it no faster (run 412).
   Returns the COPY tasks (0: none), or -1. */
AMK__FN int amk__lb_dequant(amk__lb *b, amk__lb_layer *ly, const int *wc, const int *wn, int n_wait) {
    static const char *const name[7] = {"k", "v", "q", "o", "gate", "up", "down"};
    int *const field[7] = {&ly->w_k, &ly->w_v, &ly->w_q, &ly->w_o, &ly->w_g, &ly->w_u, &ly->w_dn};
    const int ad = b->o.act_dtype;
    int64_t all[7];
    int r, take[7], tasks[7], n = 0, sum = 0;
    for (r = 0; r < 7; r++) { /* which roles, and their bytes (read and written) */
        const amk_buffer *w = &b->p->buffers[*field[r]];
        take[r] = amk_dtype_is_block(w->dtype) && w->rank == 2 &&
                  amk__lb_tma(r < 3 ? AMK_OP_RMSNORM_GEMV : AMK_OP_GEMV_TILE, ad, AMK_DTYPE_F32, ad, w->shape[1], b->R);
        all[r] = take[r] ? amk_dtype_nbytes(w->dtype, w->shape[0] * w->shape[1]) + amk_dtype_nbytes(ad, w->shape[0] * w->shape[1]) : 0;
        tasks[r] = take[r];
        sum += take[r];
    }
    /* the roles' task counts: one each, then one more at a time to the role whose tasks are the
       largest, until the tasks are one an SM. why: the phase lasts as long as its largest task,
       and a task past the SMs' count is a second round (rounding each role's share up gave the
       8B's 136 tasks on 132 SMs: the phase took 420 us, where one round of 132 took 232,
       bench/RESULTS.md runs 505-506) */
    while (sum < b->o.num_sms) {
        int best = -1;
        for (r = 0; r < 7; r++)
            if (take[r] && tasks[r] < b->p->buffers[*field[r]].shape[0] &&
                (best < 0 || all[r] * tasks[best] > all[best] * tasks[r]))
                best = r;
        if (best < 0) break;
        tasks[best]++;
        sum++;
    }
    for (r = 0; r < 7; r++) {
        const amk_buffer *w;
        int64_t N, K, bytes, rows, m;
        int t, *d = &b->deq[r].buf;
        char label[64];
        *d = -1;
        if (!take[r]) continue;
        w = &b->p->buffers[*field[r]];
        N = w->shape[0];
        K = w->shape[1];
        if ((*d = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, N, K, 0, 2, NULL, "w_deq.%s.%d", name[r], ly->i)) < 0) return -1;
        b->deq[r].c_copy = amk_program_add_counter(b->p, "dequantized");
        b->deq[r].n_copy = 0;
        bytes = amk_dtype_nbytes(w->dtype, K) + amk_dtype_nbytes(ad, K);
        rows = (N + tasks[r] - 1) / tasks[r];
        for (m = 0; m < N; m += rows) {
            const int64_t mt = N - m < rows ? N - m : rows;
            snprintf(label, sizeof label, "L%d dequant %s[%lld:%lld]", ly->i, name[r], (long long)m, (long long)(m + mt));
            t = amk__lb_task(b, AMK_OP_COPY, field[r], 1, *d, b->deq[r].c_copy, wc, wn, n_wait, mt * bytes,
                             label);
            if (t < 0) return -1;
            amk_task_set_int(b->p, t, "m_off", (int)m);
            amk_task_set_int(b->p, t, "M_tile", (int)mt);
            b->deq[r].n_copy++;
            n++;
        }
        *field[r] = *d;
    }
    return n;
}

/* The fused Q/K/V: RMSNORM_GEMV tiles over x (norm, interleaved RoPE) into q_rot.i [1, q_rows] ad
   (*q), K and V straight into the caches' row pos; with ATTENTION_O layer 0's FILL of h.0 counts
   with them. A folded layer has none: *q is qkv.(i-1). *wc, *wn: what the attention and the FILLs
   beside it wait for (the tiles, or the MLP tiles before, which built qkv). Returns 0, or -1. */
AMK__FN int amk__lb_qkv_tiles(amk__lb *b, amk__lb_layer *ly, int *q, int *wc, int *wn) {
    const amk__lb_plan *pl = &b->plan;
    const int H = b->c->hidden, i = ly->i, rows = pl->qkv_rows;
    int c_qkv, n_qkv = 0, n, ins[4];
    *q = b->qkv_prev;
    *wc = b->cx;
    *wn = b->n_cx;
    if (ly->prenorm) return 0;
    c_qkv = amk_program_add_counter(b->p, "qkv tiles");
    *q = amk__lb_buf(b, AMK_KIND_ACTIVATION, b->o.act_dtype, b->R, pl->q_rows, 0, 2, NULL, "q_rot.%d", i);
    if (pl->ao && i == 0) { /* h.0 starts at 0, before the step's first attention (it waits like a tile) */
        if (amk__lb_zero(b, ly->h, c_qkv, NULL, NULL, 0, "L0 attention start") < 0) return -1;
        n_qkv++;
    }
    /* why: K and V rows need fewer tiles than Q; their tiles and tasks come first in list
       order, so an SM that also holds Q work does not block them behind it */
    ins[0] = b->x; ins[1] = ly->w_an; ins[3] = b->pos;
    b->phase_cols = pl->q_rows + 2 * pl->kv_rows;
    ins[2] = ly->w_k;
    n = amk__lb_tiles(b, AMK_OP_RMSNORM_GEMV_ROPE_KV, ins, 4, 1, ly->kc, c_qkv, pl->kv_rows, H, rows, &b->cx, &b->n_cx,
                      1, "k", i);
    if (n < 0) return -1;
    n_qkv += n;
    ins[2] = ly->w_v;
    n = amk__lb_tiles(b, AMK_OP_RMSNORM_GEMV_KV, ins, 4, 1, ly->vc, c_qkv, pl->kv_rows, H, rows, &b->cx, &b->n_cx, 1,
                      "v", i);
    if (n < 0) return -1;
    n_qkv += n;
    ins[2] = ly->w_q;
    n = amk__lb_tiles(b, AMK_OP_RMSNORM_GEMV_ROPE, ins, 4, 1, *q, c_qkv, pl->q_rows, H, rows, &b->cx, &b->n_cx, 1,
                      "q", i);
    b->phase_cols = 0;
    if (n < 0) return -1;
    *wc = c_qkv;
    *wn = n_qkv + n;
    return 0;
}

/* The spec's Q/K/V: xn.i [1, H] = RMSNORM(x); q.i [1, q_rows], k.i and v.i [1, kv_rows] GEMV
   tiles (+ the config's q/k/v biases); with its q/k norms qn.i and kn.i, RMSNORMs of q's and k's
   heads; q_rot.i (*q) and k_rot.i ROPE; KV_APPEND of k_rot and v into the caches (pos set per step
   by amk_llama_set_pos); all ad. wc/wn[0..3): the ROPE of q and the two appends. Returns 0, or -1. */
AMK__FN int amk__lb_qkv_spec(amk__lb *b, amk__lb_layer *ly, int *q, int *wc, int *wn) {
    const amk__lb_plan *pl = &b->plan;
    const int H = b->c->hidden, i = ly->i, ad = b->o.act_dtype, rows = pl->qkv_rows;
    int xn, qp, k, v, kr, n_q, n_k, n_v, j, one = 1, ins[2];
    int c_n1 = amk_program_add_counter(b->p, "attn norm"), c_q, c_k, c_v, c_qr, c_kr, c_ka, c_va;
    char label[64];
    c_q = amk_program_add_counter(b->p, "q tiles"); c_k = amk_program_add_counter(b->p, "k tiles");
    c_v = amk_program_add_counter(b->p, "v tiles");
    c_qr = amk_program_add_counter(b->p, "rope q"); c_kr = amk_program_add_counter(b->p, "rope k");
    c_ka = amk_program_add_counter(b->p, "k append"); c_va = amk_program_add_counter(b->p, "v append");
    xn = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "xn.%d", i);
    qp = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->q_rows, 0, 2, NULL, "q.%d", i);
    k = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->kv_rows, 0, 2, NULL, "k.%d", i);
    v = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->kv_rows, 0, 2, NULL, "v.%d", i);
    *q = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->q_rows, 0, 2, NULL, "q_rot.%d", i);
    kr = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->kv_rows, 0, 2, NULL, "k_rot.%d", i);
    snprintf(label, sizeof label, "L%d attn_norm", i);
    amk__lb_rmsnorm(b, b->x, ly->w_an, xn, c_n1, b->cx, b->n_cx, label);
    n_q = amk__lb_gemv(b, xn, ly->w_q, ly->b_q, qp, c_q, pl->q_rows, H, rows, c_n1, 1, "q", i);
    n_k = amk__lb_gemv(b, xn, ly->w_k, ly->b_k, k, c_k, pl->kv_rows, H, rows, c_n1, 1, "k", i);
    n_v = amk__lb_gemv(b, xn, ly->w_v, ly->b_v, v, c_v, pl->kv_rows, H, rows, c_n1, 1, "v", i);
    if (n_q < 0 || n_k < 0 || n_v < 0) return -1;
    if (b->c->qk_norm) { /* each head's RMSNORM over head_dim, before RoPE: RoPE then waits on it */
        const int qn = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->q_rows, 0, 2, NULL, "qn.%d", i);
        const int kn = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, 1, pl->kv_rows, 0, 2, NULL, "kn.%d", i);
        const int c_qn = amk_program_add_counter(b->p, "q norm"), c_kn = amk_program_add_counter(b->p, "k norm");
        snprintf(label, sizeof label, "L%d q norm", i);
        amk__lb_rmsnorm_rows(b, qp, ly->w_qn, qn, b->c->head_dim, c_qn, c_q, n_q, label);
        snprintf(label, sizeof label, "L%d k norm", i);
        amk__lb_rmsnorm_rows(b, k, ly->w_kn, kn, b->c->head_dim, c_kn, c_k, n_k, label);
        qp = qn; k = kn; c_q = c_qn; c_k = c_kn; n_q = n_k = 1;
    }
    snprintf(label, sizeof label, "L%d rope k", i);
    amk__lb_rope(b, k, b->pos, kr, c_kr, c_k, n_k, label);
    ins[0] = kr; ins[1] = ly->kc;
    snprintf(label, sizeof label, "L%d k append", i);
    j = amk__lb_task(b, AMK_OP_KV_APPEND, ins, 2, ly->kc, c_ka, &c_kr, &one, 1, 0, label);
    amk_task_set_int(b->p, j, "pos", 0);
    ins[0] = v; ins[1] = ly->vc;
    snprintf(label, sizeof label, "L%d v append", i);
    j = amk__lb_task(b, AMK_OP_KV_APPEND, ins, 2, ly->vc, c_va, &c_v, &n_v, 1, 0, label);
    amk_task_set_int(b->p, j, "pos", 0);
    snprintf(label, sizeof label, "L%d rope q", i);
    amk__lb_rope(b, qp, b->pos, *q, c_qr, c_q, n_q, label);
    wc[0] = c_qr; wc[1] = c_ka; wc[2] = c_va; wn[0] = wn[1] = wn[2] = 1;
    return 0;
}

/* The FILLs beside a fused layer's attention tasks (c_att), each after what those wait for
   (wc/wn): x.(i+1) for the one-step MLP; with ATTENTION_O h.(i+1) (made here: b->h_next); folded,
   qkv.i. With ATTENTION_O they count with the attention tasks (ly->n_fill). Returns 0, or -1. */
AMK__FN int amk__lb_fills(amk__lb *b, amk__lb_layer *ly, int c_att, int wc, int wn) {
    const amk__lb_plan *pl = &b->plan;
    const int i = ly->i;
    char label[64];
    if (pl->accum) {
        /* x.(i+1) starts at 0. why beside attention: its few tasks leave most SMs idle, and
           an SM runs its queue in list order, so the FILL also precedes any O tile there
           (queued behind one, it delays the MLP: bench/RESULTS.md run 147). With
           ATTENTION_O it counts with those tasks, so the MLP tiles wait on one counter */
        ly->c_f = pl->ao ? c_att : amk_program_add_counter(b->p, "residual start");
        snprintf(label, sizeof label, "L%d residual start", i);
        if (amk__lb_zero(b, ly->xo, ly->c_f, &wc, &wn, 1, label) < 0) return -1;
        ly->n_fill += pl->ao;
    }
    b->h_next = -1;
    if (pl->ao && i + 1 < b->c->n_layers) { /* the next layer's h starts at 0 here, off its path */
        b->h_next = amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, b->c->hidden, 0, 2, NULL, "h.%d", i + 1);
        snprintf(label, sizeof label, "L%d attention start", i + 1);
        if (amk__lb_zero(b, b->h_next, c_att, &wc, &wn, 1, label) < 0) return -1;
        ly->n_fill++;
    }
    if (ly->qkv >= 0) { /* so does the sum the MLP tiles fold the next Q/K/V into */
        snprintf(label, sizeof label, "L%d qkv start", i);
        if (amk__lb_zero(b, ly->qkv, c_att, &wc, &wn, 1, label) < 0) return -1;
        ly->n_fill++;
    }
    return 0;
}

/* A layer's attention half, h.i = x.i + O(attention(Q/K/V of norm(x.i))): the Q/K/V (fused tiles,
   the spec's steps, or folded nothing), the attention (ATTENTION_O tasks, with O; else attention
   tasks, a COMBINE over more than one KV split, and O tiles adding x) and the FILLs beside it.
   Sets ly->c_o/n_o. Returns 0, or -1. */
AMK__FN int amk__lb_attention_half(amk__lb *b, amk__lb_layer *ly) {
    const amk__lb_plan *pl = &b->plan;
    const int i = ly->i, S = pl->S;
    int q, wc[3], wn[3], n_wait = pl->fused ? 1 : 3, c_att, n_att, c_comb, parts[8], t;
    char label[64];
    if ((pl->fused ? amk__lb_qkv_tiles(b, ly, &q, wc, wn) : amk__lb_qkv_spec(b, ly, &q, wc, wn)) < 0) return -1;
    c_att = amk_program_add_counter(b->p, pl->ao ? "attention + o tasks" : "attention tiles");
    n_att = pl->ao      ? amk__lb_attention_o(b, i, q, ly->kc, ly->vc, b->pos, ly->w_o, b->x, ly->h, pl->ao_rows,
                                              pl->max_seq, c_att, wc[0], wn[0], ly->prenorm)
          : b->o.prefill_rows > 0 ? amk__lb_attention_prefill(b, i, q, ly->kc, ly->vc, ly->attn, c_att, wc, wn, n_wait)
                        : amk__lb_attention(b, i, q, ly->kc, ly->vc, b->pos, ly->attn, S, pl->window, pl->max_seq,
                                            c_att, wc, wn, n_wait, parts);
    if (n_att < 0 || (pl->fused && amk__lb_fills(b, ly, c_att, wc[0], wn[0]) < 0)) return -1;
    c_comb = c_att;
    if (S > 1) { /* why a task a kv head's query heads: one task merging every head was a whole
                    phase of one SM's loads (8B at context 4096 6.8 us, 1B 4.1: run 420) */
        const int nb = S / pl->S_sets, grp = b->c->n_heads / b->c->n_kv_heads, tiles = pl->fused ? b->c->n_kv_heads : 1;
        int g;
        c_comb = amk_program_add_counter(b->p, "attention combine");
        for (g = 0; g < tiles; g++) {
            if (tiles > 1) snprintf(label, sizeof label, "L%d attention combine[%d]", i, g);
            else snprintf(label, sizeof label, "L%d attention combine", i);
            t = amk__lb_task(b, AMK_OP_ATTENTION_COMBINE, parts, nb, ly->attn, c_comb, &c_att, &n_att, 1,
                             4LL * S * grp * (b->c->head_dim + 2) * (tiles > 1 ? 1 : b->c->n_kv_heads), label);
            if (t < 0) return -1;
            amk_task_set_int(b->p, t, "head_dim", b->c->head_dim);
            if (tiles > 1) { amk_task_set_int(b->p, t, "n_off", g * grp); amk_task_set_int(b->p, t, "N_tile", grp); }
        }
        n_att = tiles;
    }
    if (pl->ao) { /* h is complete when the ATTENTION_O tasks and the FILLs beside them are */
        ly->c_o = c_att;
        ly->n_o = n_att + ly->n_fill;
    } else { /* with the one-step MLP the O tiles also wait for the FILL, first, so the MLP tiles
         need only theirs. why: the MLP's extra counter costs its start two L2 round trips after
         the O tiles' end (bench/RESULTS.md run 152); the O tiles pass it while attention runs */
        int owc[2], own[2], nwt = 0;
        if (pl->accum) { owc[nwt] = ly->c_f; own[nwt++] = 1; }
        owc[nwt] = c_comb; own[nwt++] = n_att;
        ly->c_o = amk__lb_proj_residual(b, ly->attn, ly->w_o, b->x, ly->h, b->c->hidden, pl->q_rows, owc, own, nwt,
                                        "o", i, &ly->n_o);
    }
    return ly->c_o < 0 ? -1 : 0;
}

/* The one-step MLP: RMSNORM_MLP tiles, x.(i+1) = 0 (the FILL beside attention) + h (by the first
   tile) + the tiles' shares of down; folded, they also add the next layer's raw Q/K/V into qkv.i
   through W_cat.i. Returns the tiles' counter (their count in *n_d), or -1. */
AMK__FN int amk__lb_mlp_one_step(amk__lb *b, amk__lb_layer *ly, int *n_d) {
    const amk__lb_plan *pl = &b->plan;
    const int H = b->c->hidden, I = b->c->intermediate, fi = ly->qkv >= 0; /* FOLD: W_cat input 5 */
    amk_program *p = b->p;
    int c_d = amk_program_add_counter(p, "mlp tiles"), t, ins[7];
    ins[0] = ly->h; ins[1] = ly->w_fn; ins[2] = ly->w_g; ins[3] = ly->w_u; ins[4] = ly->w_dn;
    ins[5] = fi ? ly->w_cat : ly->h; ins[6] = ly->h;
    /* the FILL is ordered before through the O tiles (c_o) */
    *n_d = amk__lb_tiles(b, fi ? AMK_OP_RMSNORM_MLP_FOLD : AMK_OP_RMSNORM_MLP, ins, 6 + fi, 3, ly->xo, c_d, I, H,
                         pl->mlp_rows, &ly->c_o, &ly->n_o, 1, "mlp", ly->i);
    if (*n_d < 0) return -1;
    for (t = p->n_tasks - *n_d; fi && t < p->n_tasks; t++) { /* the tiles are the last tasks */
        const int64_t off = amk__param_i(&p->tasks[t], "n_off", 0), nt = amk__param_i(&p->tasks[t], "N_tile", 0);
        if (amk__lb_add_output(b, t, ly->qkv) < 0) return -1;
        /* its rows of W_cat: its own and its share of the base rows (RMSNORM_MLP_FOLD's) */
        p->tasks[t].est_bytes +=
            (nt + (off + nt) * H / I - off * H / I) * pl->F * (amk_dtype_bits(b->o.weight_dtype) / 8);
    }
    return c_d;
}

/* The two-step MLP into act.i [R, I] ad: fused decode, RMSNORM_SWIGLU tiles (norm, gate/up, SiLU *
   up); spec and prefill, hn.i [R, H] = RMSNORM(h), gate.i and up.i [R, I] GEMV tiles, SILU_MUL
   (why for a prefill chunk: GEMV tiles of several rows run on the tensor cores, the fused tiles a
   row a pass over W on the CUDA cores). Then x.(i+1) = h + down tiles. Returns the counter that
   marks x.(i+1) complete (its producers in *n_d), or -1. */
AMK__FN int amk__lb_mlp_two_steps(amk__lb *b, amk__lb_layer *ly, int *n_d) {
    const int H = b->c->hidden, I = b->c->intermediate, i = ly->i, ad = b->o.act_dtype;
    int a = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, b->R, I, 0, 2, NULL, "act.%d", i), c_a, n_a, ins[4];
    if (b->plan.fused && b->R == 1) {
        c_a = amk_program_add_counter(b->p, "gate/up tiles");
        ins[0] = ly->h; ins[1] = ly->w_fn; ins[2] = ly->w_g; ins[3] = ly->w_u;
        n_a = amk__lb_tiles(b, AMK_OP_RMSNORM_SWIGLU, ins, 4, 2, a, c_a, I, H, amk__lb_tile_rows(I, b->o.num_sms),
                            &ly->c_o, &ly->n_o, 1, "gate/up", i);
        if (n_a < 0) return -1;
    } else {
        int hn = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, b->R, H, 0, 2, NULL, "hn.%d", i);
        int g = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, b->R, I, 0, 2, NULL, "gate.%d", i);
        int u = amk__lb_buf(b, AMK_KIND_ACTIVATION, ad, b->R, I, 0, 2, NULL, "up.%d", i);
        int c_n2 = amk_program_add_counter(b->p, "ffn norm"), c_g, c_u, n_g, n_u, n_n, wc[2], wn[2], rows;
        char label[64];
        c_g = amk_program_add_counter(b->p, "gate tiles"); c_u = amk_program_add_counter(b->p, "up tiles");
        c_a = amk_program_add_counter(b->p, "silu mul");
        snprintf(label, sizeof label, "L%d ffn_norm", i);
        ins[0] = ly->h; ins[1] = ly->w_fn;
        n_n = amk__lb_rowwise(b, AMK_OP_RMSNORM, ins, 2, hn, c_n2, &ly->c_o, &ly->n_o, 1, H, label);
        rows = amk__lb_tile_rows(2LL * I, b->o.num_sms);
        n_g = amk__lb_gemv(b, hn, ly->w_g, -1, g, c_g, I, H, rows, c_n2, n_n, "gate", i);
        n_u = amk__lb_gemv(b, hn, ly->w_u, -1, u, c_u, I, H, rows, c_n2, n_n, "up", i);
        if (n_n < 0 || n_g < 0 || n_u < 0) return -1;
        wc[0] = c_g; wc[1] = c_u; wn[0] = n_g; wn[1] = n_u;
        ins[0] = g; ins[1] = u;
        snprintf(label, sizeof label, "L%d silu_mul", i);
        n_a = amk__lb_rowwise(b, AMK_OP_SILU_MUL, ins, 2, a, c_a, wc, wn, 2, I, label);
        if (n_a < 0) return -1;
    }
    return amk__lb_proj_residual(b, a, ly->w_dn, ly->h, ly->xo, H, I, &c_a, &n_a, 1, "down", i, n_d);
}

/* A layer's MLP half, x.(i+1) = h.i + MLP(norm(h.i)), in one step or two; x.(i+1) is then the
   next layer's input (b->x, b->cx/n_cx). Returns 0, or -1. */
AMK__FN int amk__lb_mlp_half(amk__lb *b, amk__lb_layer *ly) {
    int n_d, c_d = b->plan.accum ? amk__lb_mlp_one_step(b, ly, &n_d) : amk__lb_mlp_two_steps(b, ly, &n_d);
    if (c_d < 0) return -1;
    b->x = ly->xo;
    b->cx = c_d;
    b->n_cx = n_d;
    b->qkv_prev = ly->qkv;
    return 0;
}

/* The argmax of logits [1, V] F32 into next (I32 [1], signalling c_s) after the n_lm LM-head tiles
   of c_lm, the program's last tasks: with AMK's opcodes each tile's (max, index) pair into
   argmax.partials and one ARGMAX_COMBINE (AMK_LLAMA_HEAD_ARGMAX), or ARGMAX_PARTIAL tasks over
   slices of the logits first; spec, SAMPLE_ARGMAX. Returns 0, or -1. */
AMK__FN int amk__lb_argmax(amk__lb *b, int logits, int next, int c_s, int c_lm, int n_lm) {
    amk_program *p = b->p;
    const int V = b->c->vocab;
    if (b->plan.fused && AMK_LLAMA_HEAD_ARGMAX) {
        int parts = amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 2 * (int64_t)n_lm, 0, 2, NULL,
                                "argmax.partials");
        int k, t0 = p->n_tasks - n_lm;
        for (k = 0; k < n_lm; k++) {
            if (amk__lb_add_output(b, t0 + k, parts) < 0) return -1;
            p->tasks[t0 + k].op = AMK_OP_RMSNORM_GEMV_ARGMAX; /* the head's tile, with its pair */
            amk_task_set_int(p, t0 + k, "part", k);
        }
        amk__lb_task(b, AMK_OP_ARGMAX_COMBINE, &parts, 1, next, c_s, &c_lm, &n_lm, 1, 0, "argmax");
    } else if (b->plan.fused) { /* why: one SM reads Llama-3's 0.5 MB of logits at ~22 GB/s (23 us); spread, 4 + 2 us
                                   and one more hop (bench/RESULTS.md run 42) */
        const int64_t np0 = (V + 1023) / 1024 < b->o.num_sms ? (V + 1023) / 1024 : b->o.num_sms;
        const int64_t chunk = (V + np0 - 1) / np0, np = (V + chunk - 1) / chunk;
        int parts = amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 2 * np, 0, 2, NULL, "argmax.partials");
        int c_p = amk_program_add_counter(p, "argmax partials"), n_p = (int)np, t;
        int64_t k;
        for (k = 0; k < np; k++) {
            const int64_t off = k * chunk, nt = V - off < chunk ? V - off : chunk;
            char label[64];
            snprintf(label, sizeof label, "argmax[%lld:%lld]", (long long)off, (long long)(off + nt));
            t = amk__lb_task(b, AMK_OP_ARGMAX_PARTIAL, &logits, 1, parts, c_p, &c_lm, &n_lm, 1, nt * 4, label);
            if (t < 0) return -1;
            amk_task_set_int(p, t, "n_off", off);
            amk_task_set_int(p, t, "N_tile", nt);
            amk_task_set_int(p, t, "part", k);
        }
        amk__lb_task(b, AMK_OP_ARGMAX_COMBINE, &parts, 1, next, c_s, &c_p, &n_p, 1, 0, "argmax");
    } else {
        amk__lb_task(b, AMK_OP_SAMPLE_ARGMAX, &logits, 1, next, c_s, &c_lm, &n_lm, 1, 0, "argmax");
    }
    return 0;
}

/* The head: logits [1, V] F32 = lm_head [V, H] wd (the embedding when tied) @ RMSNORM(x.L) (fused:
   RMSNORM_GEMV tiles; spec: x.final [1, H] ad, then GEMV tiles), then next_token = argmax.
   Returns 0, or -1. */
AMK__FN int amk__lb_head(amk__lb *b) {
    const int H = b->c->hidden, V = b->c->vocab, L = b->c->n_layers;
    int w_norm = amk__lb_buf(b, AMK_KIND_WEIGHT, AMK_DTYPE_F32, H, 0, 0, 1, "model.norm.weight", "model.norm.weight");
    int logits = amk__lb_buf(b, AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, V, 0, 2, NULL, "logits");
    int next = amk__lb_buf(b, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "next_token");
    int c_lm = amk_program_add_counter(b->p, "lm head tiles");
    int c_s = amk_program_add_counter(b->p, "argmax"), n_lm, rows = amk__lb_tile_rows(V, b->o.num_sms);
    int lm_w = b->c->tie_embeddings ? b->embed
             : amk__lb_buf(b, AMK_KIND_WEIGHT, amk__lb_matrix_dtype(b, "lm_head.weight", V, H), V, H, 0, 2,
                           "lm_head.weight", "lm_head.weight");
    amk__lb_plan_weight(b, w_norm, AMK_WEIGHT_AS_STORED, 0, -1);
    if (!b->c->tie_embeddings) amk__lb_plan_weight(b, lm_w, AMK_WEIGHT_AS_STORED, 0, -1);
    if (b->o.prefill_rows > 0) { /* the head reads row `last` of x.L alone: an EMBED of that row */
        int ins[2], c_last = amk_program_add_counter(b->p, "last row"), t;
        ins[0] = amk__lb_buf(b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "last");
        ins[1] = b->x;
        b->x = amk__lb_buf(b, AMK_KIND_ACTIVATION, b->plan.rd, 1, H, 0, 2, NULL, "x.last");
        t = amk__lb_task(b, AMK_OP_EMBED, ins, 2, b->x, c_last, &b->cx, &b->n_cx, 1, amk_dtype_nbytes(b->plan.rd, H),
                         "last row");
        if (t < 0) return -1;
        amk_task_set_int(b->p, t, "hidden", H);
        b->cx = c_last;
        b->n_cx = 1;
    }
    if (b->plan.fused) {
        int ins[3];
        ins[0] = b->x; ins[1] = w_norm; ins[2] = lm_w;
        n_lm = amk__lb_tiles(b, AMK_OP_RMSNORM_GEMV, ins, 3, 1, logits, c_lm, V, H, rows, &b->cx, &b->n_cx, 1,
                             "lm_head", L);
    } else {
        int xf = amk__lb_buf(b, AMK_KIND_ACTIVATION, b->o.act_dtype, 1, H, 0, 2, NULL, "x.final");
        int c_fn = amk_program_add_counter(b->p, "final norm");
        amk__lb_rmsnorm(b, b->x, w_norm, xf, c_fn, b->cx, b->n_cx, "final norm");
        n_lm = amk__lb_gemv(b, xf, lm_w, -1, logits, c_lm, V, H, rows, c_fn, 1, "lm_head", L);
    }
    if (n_lm < 0) return -1;
    return amk__lb_argmax(b, logits, next, c_s, c_lm, n_lm);
}

/* 1 when every task of p that only a specialised device form takes (RMSNORM_MLP_FOLD,
   ATTENTION_O_PRENORM) takes it (amk_plan_form) in the launch the builder plans for: AMK_LLAMA_THREADS threads
   a block, AMK_LLAMA_SMEM bytes of shared memory. */
AMK__FN int amk__lb_forms_ok(const amk_program *p, int forms) {
    amk_vm_ctx_t x;
    int i;
    for (i = 0; i < p->n_tasks; i++) {
        amk_task_context(p, i, &x);
        if (amk_plan_folded(&x) && amk_plan_form(&x, AMK_LLAMA_THREADS, AMK_LLAMA_SMEM, forms) == AMK_FORM_GENERAL) return 0;
    }
    return 1;
}

/* The step as o asks (amk_llama_build_step without the form check and lowering). */
AMK__FN amk_result amk__lb_build(const amk_llama_config *c, const amk_llama_build_opts *opts, amk_llama_step *out,
                                 amk_diag *d) {
    amk__lb b;
    amk__lb_layer ly;
    amk_result r;
    int i;
    memset(out, 0, sizeof *out);
    memset(&b, 0, sizeof b);
    if (opts) b.o = *opts; else amk_llama_build_opts_default(&b.o);
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: no config");
    b.c = c;
    b.R = b.o.prefill_rows > 0 ? b.o.prefill_rows : 1;
    /* q/k/v biases (Qwen2), q/k norms (Qwen3): the spec's step, whose Q/K/V GEMV tiles add the
       biases and whose RoPE follows RMSNORMs of q's and k's heads; the fused Q/K/V tiles
       (RMSNORM_GEMV with RoPE) take neither yet */
    if (c->qkv_bias || c->qk_norm) b.o.spec_ops = 1;
    amk__lb_blocks(&b);
    r = amk__lb_decide(&b, d);
    if (r != AMK_OK) return r;
    b.p = amk_program_create();
    if (!b.p) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    b.h_next = b.qkv_prev = -1;
    for (i = 0; i < 7; i++) b.deq[i].buf = -1;
    amk__lb_meta(&b);
    if (amk__lb_embed(&b) < 0) goto fail; /* x.0 = embed[token] */
    for (i = 0; i < c->n_layers; i++) {
        amk__lb_layer_buffers(&b, &ly, i);
        if (b.R > 1 && amk__lb_dequant(&b, &ly, &b.cx, &b.n_cx, 1) < 0) goto fail;
        if (amk__lb_attention_half(&b, &ly) < 0) goto fail; /* h.i = x.i + O(attention(x.i)) */
        if (amk__lb_mlp_half(&b, &ly) < 0) goto fail;       /* x.(i+1) = h.i + MLP(h.i) */
    }
    if (amk__lb_head(&b) < 0) goto fail; /* next_token = argmax(lm_head(norm(x.L))) */
    for (i = 0; i < b.p->n_buffers; i++)
        if (b.p->buffers[i].kind == AMK_KIND_WEIGHT && amk_dtype_is_block(b.p->buffers[i].dtype)) {
            amk_program_set_meta_string(b.p, "weights", "as stored"); /* some matrices in their block formats */
            break;
        }
    if (b.p->build_error != AMK_OK) {
        r = b.p->build_error;
        amk_program_free(b.p);
        amk__free(b.wp);
        return amk__fail(d, r, "llama build: %s", amk_result_str(r));
    }
    out->program = b.p;
    out->weights = b.wp;
    out->n_weights = b.n_wp;
    out->kv_window = b.plan.window;
    out->sm_sets[0] = b.plan.set_y;
    out->sm_sets[1] = b.plan.set_z;
    out->folded = b.plan.fold;
    return AMK_OK;
fail:
    amk_program_free(b.p);
    amk__free(b.wp);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "llama build: out of memory");
}

AMK_API void amk_llama_step_free(amk_llama_step *s) {
    if (!s) return;
    amk_program_free(s->program);
    amk__free(s->weights);
    memset(s, 0, sizeof *s);
}

/* The SMs a step with SM sets Y and Z (s->sm_sets, AMK_LLAMA_SM_SETS) pins its layers' tasks to, for
   amk_program_lower_pinned (the others stay where the load balancer puts them): in each layer the
   Q/K/V tiles and then the ATTENTION_O tasks on SMs 0 .. Y-1 (one each, in list order), the MLP
   tiles and the FILLs (which run beside the Q/K/V tiles or attention) on Y .. Y+Z-1 (the FILLs
   from the last SM down). With AMK_LLAMA_SETS_ALTERNATE layer l's attention runs on A(l % 2) (A0
   = 0 .. Y-1, A1 = Y .. 2Y-1), its Q/K/V tiles on the other, its MLP tiles on the SMs outside A(l %
   2) and the FILLs on SMs 2Y and up. A folded step (s->folded) has Q/K/V tiles in layer 0 alone:
   every layer's attention runs on A0, layer 0's Q/K/V tiles on A1 (on A0 without the
   alternation), the MLP tiles on Y .. Y+Z-1. The rule behind both: no task follows another on its
   SM without an idle phase between. The list order is the builder's, which lowering keeps (a
   stable topological order of a list built in dependency order). *n 0 without the sets. */
AMK__FN amk_result amk__llama_pins(const amk_llama_step *s, int num_sms, int *n, int **task, int **smv, amk_diag *d) {
    const amk_program *p = s->program;
    const int ny = s->sm_sets[0], nz = s->sm_sets[1], folded = s->folded;
    int k, jq = 0, ja = 0, jm = 0, jf = 0;
    int last = 0; /* the step of the last layer task: 0 none yet, 1 a Q/K/V tile, 2 attention, 3 an MLP tile */
    int layer = -1, alt; /* alt: AMK_LLAMA_SETS_ALTERNATE where the SMs allow it */
    *n = 0;
    *task = *smv = NULL;
    if (ny == 0 && nz == 0) return AMK_OK;
    if (ny < 1 || nz < 1 || ny > num_sms - nz)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: SM sets %d and %d for %d SMs", ny, nz, num_sms);
    alt = AMK_LLAMA_SETS_ALTERNATE && 2 * ny < ny + nz;
    /* why calloc: GCC -O2 warns (maybe-uninitialized) of the entries past *n the callee never reads */
    *task = (int *)amk__calloc((size_t)(p->n_tasks > 0 ? p->n_tasks : 1), sizeof(int));
    *smv = (int *)amk__calloc((size_t)(p->n_tasks > 0 ? p->n_tasks : 1), sizeof(int));
    if (!*task || !*smv) {
        amk__free(*task);
        amk__free(*smv);
        *task = *smv = NULL;
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (k = 0; k < p->n_tasks; k++) { /* list order: each layer's Q/K/V tiles, attention, MLP tiles */
        const amk_task *t = &p->tasks[k];
        int sm = -1;
        const int qkv = t->op == AMK_OP_RMSNORM_GEMV_ROPE || t->op == AMK_OP_RMSNORM_GEMV_KV ||
                        t->op == AMK_OP_RMSNORM_GEMV_ROPE_KV, op = amk_op_device(t->op, NULL); /* not the head */
        /* a new layer: its first Q/K/V tile, or (folded) its first attention task after the MLP */
        if ((qkv && last != 1) || (op == AMK_OP_ATTENTION_O && (last == 0 || last == 3))) {
            jq = ja = jm = 0;
            layer++;
        }
        if (qkv) {
            sm = jq++ % ny + (alt && (folded || layer % 2 == 0) ? ny : 0); /* alt: on the set of the attention before */
            last = 1;
        } else if (op == AMK_OP_ATTENTION_O) {
            sm = ja++ % ny + (alt && !folded && layer % 2 == 1 ? ny : 0);
            last = 2;
        } else if (op == AMK_OP_RMSNORM_MLP) {
            sm = ny + jm++ % nz; /* alt: the SMs outside this layer's attention set */
            if (alt && !folded && layer % 2 == 1 && sm < 2 * ny) sm -= ny;
            last = 3;
        } else if (t->op == AMK_OP_FILL) {
            sm = ny + nz - 1 - jf++ % (alt ? nz - ny : nz);
        }
        if (sm < 0) continue; /* the load balancer's */
        (*task)[*n] = t->id;
        (*smv)[*n] = sm;
        (*n)++;
    }
    return AMK_OK;
}

/* amk_llama_build_step; forms >= 0: the step is for a backend that may be the GPU, whose image has
   the specialised forms forms (AMK_PLAN_FORMS_*: the full image's lean ones, the portable image's
   none of them), so an explicit qkv_fold 1 those forms do not take is dropped too (*dropped set
   then); -1: any backend, the folded step checked against the full image's forms. */
AMK__FN amk_result amk__llama_build_step(const amk_llama_config *cfg, const amk_llama_build_opts *o, int lower, int forms,
                                         amk_llama_step *out, int *dropped, amk_diag *d) {
    amk_llama_build_opts bo;
    amk_config sc;
    amk_target tgt;
    amk_result r;
    if (dropped) *dropped = 0;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: no output");
    if (o) bo = *o; else amk_llama_build_opts_default(&bo);
    if (bo.weight_dtype == AMK_DTYPE_AUTO || bo.act_dtype == AMK_DTYPE_AUTO) { /* why here: amk_llm resolves it first */
        memset(out, 0, sizeof *out);
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: AMK_DTYPE_AUTO is amk_llm's choice by backend; "
                         "the builder takes F32, BF16 or F16");
    }
    r = amk__lb_build(cfg, &bo, out, d);
    if (r == AMK_OK && (bo.qkv_fold != 1 || forms >= 0) && !amk__lb_forms_ok(out->program, forms >= 0 ? forms : AMK_PLAN_FORMS_LEAN)) {
        /* a folded task the device's lean forms do not take (a window longer than the lean
           attention's, F32 weights; the portable image has none): the step without the fold,
           whose tasks the general forms take */
        amk_llama_step_free(out);
        if (dropped) *dropped = bo.qkv_fold == 1;
        bo.qkv_fold = 0;
        r = amk__lb_build(cfg, &bo, out, d);
    }
    if (r != AMK_OK || !lower) return r;
    amk_config_default(&sc);
    sc.threads_per_block = AMK_LLAMA_THREADS;
    amk_target_builtin("h100", &tgt);
    tgt.num_sms = bo.num_sms;
    {
        int n_pins = 0, *pin_task = NULL, *pin_sm = NULL;
        r = amk__llama_pins(out, tgt.num_sms, &n_pins, &pin_task, &pin_sm, d);
        if (r == AMK_OK) r = amk_program_lower_pinned(out->program, &sc, &tgt, n_pins, pin_task, pin_sm, d);
        amk__free(pin_task);
        amk__free(pin_sm);
    }
    if (r != AMK_OK) amk_llama_step_free(out);
    return r;
}

AMK_API amk_result amk_llama_build_step(const amk_llama_config *cfg, const amk_llama_build_opts *o, int lower,
                                        amk_llama_step *out, amk_diag *d) {
    return amk__llama_build_step(cfg, o, lower, -1, out, NULL, d);
}

/* amk_llama_build and amk_llama_build_lowered: the step's program alone. */
AMK__FN amk_result amk__llama_build_program(const amk_llama_config *cfg, const amk_llama_build_opts *o, int lower,
                                            amk_program **out, amk_diag *d) {
    amk_llama_step s;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: no output");
    *out = NULL;
    r = amk_llama_build_step(cfg, o, lower, &s, d);
    if (r != AMK_OK) return r;
    *out = s.program;
    amk__free(s.weights);
    return AMK_OK;
}
AMK_API amk_result amk_llama_build(const amk_llama_config *cfg, const amk_llama_build_opts *o, amk_program **out,
                                   amk_diag *d) {
    return amk__llama_build_program(cfg, o, 0, out, d);
}
AMK_API amk_result amk_llama_build_lowered(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                           amk_program **out, amk_diag *d) {
    return amk__llama_build_program(cfg, o, 1, out, d);
}

/* amk_llama_set_pos with the step's KV window (amk_llama_step.kv_window). */
AMK__FN amk_result amk__llama_set_pos(amk_program *p, int pos, int window, amk_diag *d) {
    int64_t rows = -1;
    int i;
    for (i = 0; i < p->n_buffers && rows < 0; i++)
        if (p->buffers[i].kind == AMK_KIND_KV_CACHE && p->buffers[i].rank >= 1) rows = p->buffers[i].shape[0];
    if (pos < 0 || pos >= rows)
        return amk__fail(d, AMK_ERR_RUNTIME, "position %d is outside the KV cache (%lld rows)", pos,
                         (long long)(rows < 0 ? 0 : rows));
    for (i = 0; i < p->n_tasks; i++) { /* the fused step has none: its tasks read pos on the device */
        amk_task *t = &p->tasks[i];
        if (t->op == AMK_OP_KV_APPEND) {
            amk_task_set_int(p, i, "pos", pos);
        } else if (t->op == AMK_OP_ATTENTION_TILE) {
            int64_t start = amk__param_i(t, "kv_start", 0), len = (int64_t)pos + 1 - start;
            amk_task_set_int(p, i, "kv_len", len < 0 ? 0 : len > window ? window : len);
        }
    }
    return AMK_OK;
}

AMK_API amk_result amk_llama_set_pos(amk_program *p, int pos, amk_diag *d) {
    char buf[32];
    long window;
    if (!p) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llama_set_pos: NULL program");
    /* a program read back from its JSON has only its meta (amk_llm keeps the step's window) */
    if (!amk_program_meta_string(p, "kv_window", buf, sizeof buf) || (window = strtol(buf, NULL, 10)) < 1 ||
        window > INT_MAX)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "program has no meta kv_window (not built by amk_llama_build)");
    return amk__llama_set_pos(p, pos, (int)window, d);
}

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */
