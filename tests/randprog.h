/* tests/randprog.h - random VALID programs for property tests (header-only, static functions).

   randprog_make(seed, opts) builds a program of roughly opts->n_tasks tasks: layers of ADD, MUL,
   SILU_MUL, COPY, RMSNORM, SOFTMAX and GEMV_TILE tasks over a pool of values, with fan-in (two
   operands from anywhere earlier), fan-out (a value read many times), GEMV tiles that write
   disjoint columns of one output and share one all-join counter, pairs of unrelated tasks that
   share a counter (all-join waits on it), IO_INPUT and WEIGHT inputs, IO_OUTPUT outputs, dtypes
   F32/BF16/F16, and optionally a KV section (K and V KV_APPENDs, then an ATTENTION_TILE waiting on
   both) and on-chip (SMEM) activations. The task list is built in topological order; sm is
   unassigned, est_bytes is set (weight bytes for GEMV tiles, some tasks 0).

   opts->ops says which opcodes it may use. RANDPROG_OPS_SPEC: the spec's 0-18 only, the mix
   above (for a seed, the program this generator made before it knew AMK's fused ops).
   RANDPROG_OPS_ALL (0, so also opts NULL): about a third of the steps are AMK's fused opcodes
   20-27 instead, each with valid shapes, dtypes and params:
   - RMSNORM_GEMV tiles (plain, or ROPE over an I32 position input), RMSNORM_SWIGLU tiles, a FILL
     constant;
   - RMSNORM_MLP tiles accumulating onto an F32 value a FILL starts (every tile waits on the FILL,
     readers on every tile; the first tile adds a resid, sometimes), with FOLD (1 in 3) a second
     accumulated output qkv [1, (n_heads + 2*n_kv_heads)*head_dim], an IO_OUTPUT;
   - ARGMAX_PARTIAL tiles, or RMSNORM_GEMV tiles with ARGMAX (their logits become a value), then
     ARGMAX_COMBINE into an index IO_OUTPUT; only over values no accumulation reaches, so the index
     does not depend on the order of the additions;
   - with the KV section (sometimes beside the old one): an I32 position input pos, caches of
     4-8 rows, then one of: RMSNORM_GEMV tiles for q (ROPE), k (ROPE | KV_ROW) and v (KV_ROW)
     storing cache row pos, then ATTENTION_DECODE tiles over kv heads (normalised, or PARTIAL over
     two windows and an ATTENTION_COMBINE) or ATTENTION_PREFILL tiles over kv heads of q's one row
     into an IO_OUTPUT; the same q/k/v tiles, then ATTENTION_O tasks over kv
     heads and row slices accumulating onto a FILLed F32 value; or ATTENTION_O PRENORM tasks over a
     qkv (the last FOLD's, or RMSNORM_GEMV tiles'), the first task of each kv-head tile (mostly)
     storing its heads' cache rows, the others reading the rows below pos beside it.
   RANDPROG_OPS_GPU: ALL without RMSNORM_MLP FOLD and ATTENTION_O PRENORM (the GPU VM runs them only
   in its lean tiles of a full build, amk__cuda_check_task) and without the argmax family (an index
   is exact: CPU and GPU roundings of near-equal values could pick different ones).
   randprog_fill(vm, p, seed) fills IO_INPUT, WEIGHT and CONST buffers, and KV caches (their
   prior-step state), with seeded random values; positions stay inside the caches they index
   (randprog_index_bound). Same seed, same program, same values.
   randprog_count_forms and randprog_check_fused_coverage count the fused opcodes and flag forms
   of a set of programs and fail a check for each one missing. */
#ifndef RANDPROG_H
#define RANDPROG_H

#include "../amk.h"
#include "amk_test.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* static, and no warning in a test that uses only part of this file */
#if defined(__GNUC__) || defined(__clang__)
#define RANDPROG_FN static __attribute__((unused))
#else
#define RANDPROG_FN static
#endif

/* randprog_opts.ops: which opcodes a program may use (the top of this file) */
#define RANDPROG_OPS_ALL 0  /* 0-18 and AMK's fused 20-27 in every form: the default */
#define RANDPROG_OPS_SPEC 1 /* 0-18 only: the programs from before the fused ops */
#define RANDPROG_OPS_GPU 2  /* ALL without FOLD, PRENORM and the argmax family */

typedef struct randprog_opts {
    int n_tasks; /* roughly how many tasks; <= 0 means 24 */
    int kv;      /* 1: add the KV section; 0: none; -1: on for about half the seeds */
    int onchip;  /* 1: about a quarter of the activations live in SMEM */
    int ops;     /* RANDPROG_OPS_ALL (0), RANDPROG_OPS_SPEC or RANDPROG_OPS_GPU */
} randprog_opts;

typedef amk_t_rng randprog_rng;

RANDPROG_FN int randprog_below(randprog_rng *r, int n) { return n > 0 ? (int)(amk_t_rng_next(r) % (uint64_t)n) : 0; }

/* A value a task can read: a buffer, the counter that says it is complete (-1 for inputs) and
   that counter's producer count (the all-join threshold). cls 0 is [1, H], cls 1 is
   [n_heads, head_dim] (the attention section). */
typedef struct randprog_val { int buf, counter, threshold, cls; } randprog_val;

typedef struct randprog_state {
    amk_program *p;
    randprog_rng rng;
    randprog_val *pool; int n_pool;
    int H, n_heads, head_dim, onchip, n_names;
    int ops;                   /* randprog_opts.ops */
    int nh, nkv;               /* the fused ops' head layout, fixed up front (a FOLD's qkv needs it) */
    double theta; int llama3;  /* the RoPE params of the section being built (randprog_rope_draw) */
    randprog_val fold, fold_x; /* the last FOLD's qkv and its out (PRENORM's x); fold.buf -1: none */
    unsigned char *inexact;    /* [cap_inexact] per buffer: 1 when an accumulation reaches it */
    int cap_inexact, oom;
} randprog_state;

RANDPROG_FN amk_dtype randprog_float_dtype(randprog_rng *r) {
    static const amk_dtype t[3] = {AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F16};
    return t[randprog_below(r, 3)];
}

RANDPROG_FN int randprog_is_inexact(const randprog_state *s, int b) {
    return b >= 0 && b < s->cap_inexact && s->inexact[b];
}

RANDPROG_FN int randprog_buffer(randprog_state *s, const char *prefix, amk_buffer_kind kind,
                           amk_dtype dtype, int rank, int64_t d0, int64_t d1, int64_t d2,
                           amk_memspace space) {
    char name[32], source[48];
    int64_t shape[3];
    int b;
    shape[0] = d0; shape[1] = d1; shape[2] = d2;
    snprintf(name, sizeof name, "%s%d", prefix, s->n_names++);
    snprintf(source, sizeof source, "%s.weight", name);
    b = amk_program_add_buffer(s->p, name, kind, dtype, rank, shape, space,
                               kind == AMK_KIND_WEIGHT ? source : NULL);
    if (b >= s->cap_inexact) { /* a buffer starts exact */
        int cap = 2 * b + 16;
        unsigned char *q = (unsigned char *)realloc(s->inexact, (size_t)cap);
        if (!q) { s->oom = 1; return b; }
        memset(q + s->cap_inexact, 0, (size_t)(cap - s->cap_inexact));
        s->inexact = q;
        s->cap_inexact = cap;
    }
    return b;
}

/* A fresh activation of class cls (in SMEM for about a quarter of them when onchip is set). */
RANDPROG_FN int randprog_activation(randprog_state *s, int cls) {
    amk_memspace space = randprog_below(&s->rng, 2) ? AMK_SPACE_GLOBAL_SCRATCH : AMK_SPACE_HBM;
    if (s->onchip && randprog_below(&s->rng, 4) == 0) space = AMK_SPACE_SMEM;
    if (cls == 1)
        return randprog_buffer(s, "h", AMK_KIND_ACTIVATION, randprog_float_dtype(&s->rng), 2,
                               s->n_heads, s->head_dim, 0, space);
    return randprog_buffer(s, "a", AMK_KIND_ACTIVATION, randprog_float_dtype(&s->rng), 2, 1, s->H, 0, space);
}

/* A fresh activation [d0, d1] of dtype dt in global memory (HBM or scratch). The fused sections
   keep their sums there (the device adds into them with red.global.add), and their argmax pairs,
   partials and q/qkv too: on-chip operands come from randprog_activation's values already. */
RANDPROG_FN int randprog_global(randprog_state *s, const char *prefix, amk_dtype dt, int64_t d0, int64_t d1) {
    amk_memspace space = randprog_below(&s->rng, 2) ? AMK_SPACE_GLOBAL_SCRATCH : AMK_SPACE_HBM;
    return randprog_buffer(s, prefix, AMK_KIND_ACTIVATION, dt, 2, d0, d1, 0, space);
}

/* A WEIGHT [rows, cols] (cols 0: [rows]) of a random float dtype. */
RANDPROG_FN int randprog_weight(randprog_state *s, int64_t rows, int64_t cols) {
    amk_dtype dt = randprog_float_dtype(&s->rng);
    return randprog_buffer(s, "w", AMK_KIND_WEIGHT, dt, cols ? 2 : 1, rows, cols, 0, AMK_SPACE_HBM);
}

/* The bytes of n elements of buffer b. */
RANDPROG_FN int64_t randprog_nbytes(const randprog_state *s, int b, int64_t n) {
    return b >= 0 && b < s->p->n_buffers ? amk_dtype_nbytes(s->p->buffers[b].dtype, n) : 0;
}

RANDPROG_FN void randprog_push(randprog_state *s, int buf, int counter, int threshold, int cls) {
    randprog_val *v = &s->pool[s->n_pool++];
    v->buf = buf; v->counter = counter; v->threshold = threshold; v->cls = cls;
}

/* A pool value of class cls (any class if cls < 0), usually a recent one so chains get deep,
   sometimes any earlier one so fan-out and long edges appear. -1 if there is none. */
RANDPROG_FN int randprog_pick(randprog_state *s, int cls) {
    int tries, i;
    for (tries = 0; tries < 16; tries++) {
        int span = randprog_below(&s->rng, 4) == 0 ? s->n_pool : (s->n_pool < 6 ? s->n_pool : 6);
        i = s->n_pool - 1 - randprog_below(&s->rng, span);
        if (cls < 0 || s->pool[i].cls == cls) return i;
    }
    for (i = s->n_pool - 1; i >= 0; i--)
        if (cls < 0 || s->pool[i].cls == cls) return i;
    return -1;
}

/* As randprog_pick, among the values no accumulation reaches (the inputs always qualify). */
RANDPROG_FN int randprog_pick_exact(randprog_state *s, int cls) {
    int tries, i;
    for (tries = 0; tries < 16; tries++) {
        i = randprog_pick(s, cls);
        if (i >= 0 && !randprog_is_inexact(s, s->pool[i].buf)) return i;
    }
    for (i = s->n_pool - 1; i >= 0; i--)
        if ((cls < 0 || s->pool[i].cls == cls) && !randprog_is_inexact(s, s->pool[i].buf)) return i;
    return -1;
}

/* A value with no producer (an input). */
RANDPROG_FN randprog_val randprog_input(int buf, int cls) {
    randprog_val v;
    v.buf = buf; v.counter = -1; v.threshold = 0; v.cls = cls;
    return v;
}

/* Adds a task reading ins[0..n_ins) and writing outs[0..n_outs), signalling counter; it waits on
   each distinct counter among vals[0..n_vals) (what it reads that has a producer) with its
   all-join threshold. Its outputs become inexact when it accumulates into them or reads an
   inexact buffer. Returns the task index, -1 on failure (the program's build_error says why). */
RANDPROG_FN int randprog_task_n(randprog_state *s, amk_opcode op, const int *ins, int n_ins,
                                const randprog_val *vals, int n_vals, const int *outs, int n_outs,
                                int counter, int64_t est) {
    int i, j, t, taint = 0;
    t = amk_program_add_task(s->p, op, ins, n_ins, outs, n_outs, counter, amk_op_name(op));
    if (t < 0) return -1;
    for (i = 0; i < n_vals; i++) {
        int dup = 0;
        if (vals[i].counter < 0) continue;
        for (j = 0; j < i; j++) dup |= vals[j].counter == vals[i].counter;
        if (!dup) amk_task_add_wait(s->p, t, vals[i].counter, vals[i].threshold);
    }
    s->p->tasks[t].est_bytes = est;
    for (i = 0; i < n_ins; i++) taint |= randprog_is_inexact(s, ins[i]);
    for (i = 0; i < n_outs; i++) /* an accumulating output's sum depends on the order of its adds */
        if ((taint || amk_op_accumulates(op, i)) &&
            outs[i] >= 0 && outs[i] < s->cap_inexact)
            s->inexact[outs[i]] = 1;
    return t;
}

/* randprog_task_n with one output, reading the buffers of vals[0..n_vals) and then extra. */
RANDPROG_FN int randprog_task(randprog_state *s, amk_opcode op, const randprog_val *vals, int n_vals,
                         const int *extra, int n_extra, int out, int counter, int64_t est) {
    int ins[8], n_ins = 0, i;
    for (i = 0; i < n_vals; i++) ins[n_ins++] = vals[i].buf;
    for (i = 0; i < n_extra; i++) ins[n_ins++] = extra[i];
    return randprog_task_n(s, op, ins, n_ins, vals, n_vals, &out, 1, counter, est);
}

/* One elementwise or normalising task on values of class cls, writing a fresh activation of that
   class and signalling counter. Returns the activation. */
RANDPROG_FN int randprog_unary(randprog_state *s, int cls, int counter) {
    randprog_val v[2];
    int w, t, out, last = cls == 1 ? s->head_dim : s->H;
    int64_t est = (int64_t)last * 4;
    v[0] = s->pool[randprog_pick(s, cls)];
    v[1] = s->pool[randprog_pick(s, cls)]; /* fan-in; may be the same value (ADD(a, a)) */
    out = randprog_activation(s, cls);
    switch (randprog_below(&s->rng, 7)) {
    case 0: randprog_task(s, AMK_OP_ADD, v, 2, NULL, 0, out, counter, est); break;
    case 1: randprog_task(s, AMK_OP_MUL, v, 2, NULL, 0, out, counter, 0); break;
    case 2: /* MUL by a scale */
        t = randprog_task(s, AMK_OP_MUL, v, 1, NULL, 0, out, counter, 0);
        if (t >= 0) amk_task_set_real(s->p, t, "scale", 0.5 + randprog_below(&s->rng, 4) * 0.25);
        break;
    case 3: randprog_task(s, AMK_OP_SILU_MUL, v, 2, NULL, 0, out, counter, est); break;
    case 4: randprog_task(s, AMK_OP_COPY, v, 1, NULL, 0, out, counter, 0); break;
    case 5: /* RMSNORM over the last axis with its own weight */
        w = randprog_buffer(s, "w", AMK_KIND_WEIGHT, randprog_float_dtype(&s->rng), 1, last, 0, 0, AMK_SPACE_HBM);
        t = randprog_task(s, AMK_OP_RMSNORM, v, 1, &w, 1, out, counter, est);
        if (t >= 0) {
            amk_task_set_real(s->p, t, "eps", 1e-5);
            amk_task_set_int(s->p, t, "hidden", last);
        }
        break;
    default: randprog_task(s, AMK_OP_SOFTMAX, v, 1, NULL, 0, out, counter, est); break;
    }
    return out;
}

/* GEMV_TILE tiles: out[1, H] = x[1, H] @ W[H, H].T in 1, 2 or 4 tiles of disjoint columns, all
   signalling counter (so readers wait for all of them). Returns the tile count. */
RANDPROG_FN int randprog_gemv(randprog_state *s, int out, int counter) {
    randprog_val x = s->pool[randprog_pick(s, 0)];
    int n_tiles = 1 << randprog_below(&s->rng, 3), n_tile = s->H / n_tiles, j;
    amk_dtype wt = randprog_float_dtype(&s->rng);
    int w = randprog_buffer(s, "w", AMK_KIND_WEIGHT, wt, 2, s->H, s->H, 0, AMK_SPACE_HBM);
    for (j = 0; j < n_tiles; j++) {
        int t = randprog_task(s, AMK_OP_GEMV_TILE, &x, 1, &w, 1, out, counter,
                              amk_dtype_nbytes(wt, (int64_t)n_tile * s->H));
        if (t < 0) break;
        amk_task_set_int(s->p, t, "K", s->H);
        amk_task_set_int(s->p, t, "N_tile", n_tile);
        amk_task_set_int(s->p, t, "n_off", (int64_t)j * n_tile);
    }
    return n_tiles;
}

/* The KV section: k = knew * 0.75 appended to the K cache and vnew appended to the V cache at a
   random row pos, then an attention tile over rows [0, pos] waiting on both appends. Its output
   becomes the first class-1 value. With the fused ops it takes their head layout. */
RANDPROG_FN void randprog_kv(randprog_state *s) {
    int n_kv = 1 + randprog_below(&s->rng, 2), max_seq = 4 + randprog_below(&s->rng, 5);
    int pos = randprog_below(&s->rng, max_seq), hd = s->head_dim, t, kc, vc, kr, out, ck, ca, cv, cq;
    randprog_val v[3];
    s->n_heads = n_kv * (1 + randprog_below(&s->rng, 2)); /* GQA groups of 1 or 2 */
    if (s->nh > 0) { n_kv = s->nkv; s->n_heads = s->nh; }
    kc = randprog_buffer(s, "kc", AMK_KIND_KV_CACHE, randprog_float_dtype(&s->rng), 3, max_seq, n_kv, hd, AMK_SPACE_HBM);
    vc = randprog_buffer(s, "vc", AMK_KIND_KV_CACHE, randprog_float_dtype(&s->rng), 3, max_seq, n_kv, hd, AMK_SPACE_HBM);
    v[0] = randprog_input(randprog_buffer(s, "knew", AMK_KIND_IO_INPUT, randprog_float_dtype(&s->rng), 2, n_kv, hd, 0, AMK_SPACE_HBM), 2);
    kr = randprog_buffer(s, "kr", AMK_KIND_ACTIVATION, randprog_float_dtype(&s->rng), 2, n_kv, hd, 0, AMK_SPACE_HBM);
    ck = amk_program_add_counter(s->p, "k scaled");
    t = randprog_task(s, AMK_OP_MUL, v, 1, NULL, 0, kr, ck, 0);
    if (t >= 0) amk_task_set_real(s->p, t, "scale", 0.75);
    v[0].buf = kr; v[0].counter = ck; v[0].threshold = 1;
    ca = amk_program_add_counter(s->p, "k appended");
    t = randprog_task(s, AMK_OP_KV_APPEND, v, 1, &kc, 1, kc, ca, 0);
    if (t >= 0) amk_task_set_int(s->p, t, "pos", pos);
    v[0] = randprog_input(randprog_buffer(s, "vnew", AMK_KIND_IO_INPUT, randprog_float_dtype(&s->rng), 2, n_kv, hd, 0, AMK_SPACE_HBM), 2);
    cv = amk_program_add_counter(s->p, "v appended");
    t = randprog_task(s, AMK_OP_KV_APPEND, v, 1, &vc, 1, vc, cv, 0);
    if (t >= 0) amk_task_set_int(s->p, t, "pos", pos);
    v[0] = randprog_input(randprog_buffer(s, "q", AMK_KIND_IO_INPUT, randprog_float_dtype(&s->rng), 2, s->n_heads, hd, 0, AMK_SPACE_HBM), 1);
    v[1].buf = kc; v[1].counter = ca; v[1].threshold = 1; v[1].cls = 3;
    v[2].buf = vc; v[2].counter = cv; v[2].threshold = 1; v[2].cls = 3;
    out = randprog_activation(s, 1);
    cq = amk_program_add_counter(s->p, "attention");
    t = randprog_task(s, AMK_OP_ATTENTION_TILE, v, 3, NULL, 0, out, cq,
                      amk_dtype_nbytes(AMK_DTYPE_F32, 2 * (int64_t)(pos + 1) * n_kv * hd));
    if (t >= 0) {
        amk_task_set_int(s->p, t, "head_dim", hd);
        amk_task_set_int(s->p, t, "kv_start", 0);
        amk_task_set_int(s->p, t, "kv_len", pos + 1);
        amk_task_set_real(s->p, t, "scale", 1.0 / sqrt((double)hd));
        amk_task_set_int(s->p, t, "n_heads", s->n_heads);
        amk_task_set_int(s->p, t, "n_kv_heads", n_kv);
    }
    randprog_push(s, out, cq, 1, 1);
}

/* ---- the fused ops (RANDPROG_OPS_ALL, RANDPROG_OPS_GPU) ------------------------------------------ */

/* 1, 2 or 4 (at most max) tiles that split N rows evenly, into tiles of an even size when even. */
RANDPROG_FN int randprog_tiles(randprog_state *s, int64_t N, int even, int max) {
    int n = 1 << randprog_below(&s->rng, 3);
    while (n > 1 && (n > max || N % n || (even && (N / n) % 2))) n >>= 1;
    return n;
}

/* An I32 position input [1]: randprog_fill keeps it inside the caches it indexes. */
RANDPROG_FN int randprog_position(randprog_state *s) {
    return randprog_buffer(s, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0, AMK_SPACE_HBM);
}

/* Draws the RoPE params of a section: theta, and (1 in 4) llama3 frequency scaling. */
RANDPROG_FN void randprog_rope_draw(randprog_state *s) {
    s->theta = randprog_below(&s->rng, 2) ? 10000.0 : 500000.0;
    s->llama3 = randprog_below(&s->rng, 4) == 0;
}

RANDPROG_FN void randprog_rope_set(randprog_state *s, int t) {
    if (t < 0) return;
    amk_task_set_real(s->p, t, "theta", s->theta);
    if (!s->llama3) return;
    amk_task_set_real(s->p, t, "rope_factor", 8.0); /* why: Llama-3's values */
    amk_task_set_real(s->p, t, "rope_low_freq_factor", 1.0);
    amk_task_set_real(s->p, t, "rope_high_freq_factor", 4.0);
    amk_task_set_int(s->p, t, "rope_orig_ctx", 8192);
}

/* A FILL of out (scale 0, 0.5, -0.25 or the default 1) signalling counter. */
RANDPROG_FN int randprog_fill_task(randprog_state *s, int out, int counter) {
    static const double value[3] = {0.0, 0.5, -0.25};
    int k = randprog_below(&s->rng, 4);
    int t = randprog_task_n(s, AMK_OP_FILL, NULL, 0, NULL, 0, &out, 1, counter, 0);
    if (t >= 0 && k < 3) amk_task_set_real(s->p, t, "scale", value[k]);
    return t;
}

/* RMSNORM_GEMV tiles: out = rmsnorm(x[1, H]) @ W[N, H].T in 1, 2 or 4 (at most max) tiles of
   disjoint columns, all signalling counter. flags (AMK_GEMV_FLAG_ROPE, _KV_ROW) pick the variant
   (amk_op_variant), which reads positions pos (RoPE with the section's params and head_dim; with
   KV_ROW out is the cache of rows of N). Returns the tile count. */
RANDPROG_FN int randprog_norm_tiles(randprog_state *s, randprog_val x, int64_t N, int out, int flags, int pos,
                                    int counter, int max) {
    int nw = randprog_weight(s, s->H, 0), w = randprog_weight(s, N, s->H), ins[4], j;
    int n_tiles = randprog_tiles(s, N, flags & AMK_GEMV_FLAG_ROPE, max);
    int64_t n_tile = N / n_tiles;
    ins[0] = x.buf; ins[1] = nw; ins[2] = w; ins[3] = pos;
    for (j = 0; j < n_tiles; j++) {
        int t = randprog_task_n(s, amk_op_variant(AMK_OP_RMSNORM_GEMV, (uint32_t)flags), ins, flags ? 4 : 3, &x, 1, &out, 1, counter,
                                randprog_nbytes(s, w, n_tile * s->H));
        if (t < 0) break;
        amk_task_set_real(s->p, t, "eps", 1e-5);
        amk_task_set_int(s->p, t, "K", s->H);
        amk_task_set_int(s->p, t, "N_tile", n_tile);
        amk_task_set_int(s->p, t, "n_off", j * n_tile);
        if (flags & AMK_GEMV_FLAG_ROPE) {
            amk_task_set_int(s->p, t, "head_dim", s->head_dim);
            randprog_rope_set(s, t);
        }
    }
    return n_tiles;
}

/* RMSNORM_SWIGLU tiles: out[1, H] = silu(xn @ Wg.T) * (xn @ Wu.T), W [H, H]. Returns the tile count. */
RANDPROG_FN int randprog_swiglu(randprog_state *s, int out, int counter) {
    randprog_val x = s->pool[randprog_pick(s, 0)];
    int ins[4], j, n_tiles = randprog_tiles(s, s->H, 0, 4), n_tile = s->H / n_tiles;
    ins[0] = x.buf;
    ins[1] = randprog_weight(s, s->H, 0);
    ins[2] = randprog_weight(s, s->H, s->H);
    ins[3] = randprog_weight(s, s->H, s->H);
    for (j = 0; j < n_tiles; j++) {
        int t = randprog_task_n(s, AMK_OP_RMSNORM_SWIGLU, ins, 4, &x, 1, &out, 1, counter,
                                randprog_nbytes(s, ins[2], 2 * (int64_t)n_tile * s->H));
        if (t < 0) break;
        amk_task_set_real(s->p, t, "eps", 1e-5);
        amk_task_set_int(s->p, t, "K", s->H);
        amk_task_set_int(s->p, t, "N_tile", n_tile);
        amk_task_set_int(s->p, t, "n_off", (int64_t)j * n_tile);
    }
    return n_tiles;
}

/* The one-step MLP: a FILL starts an F32 [1, H], then RMSNORM_MLP tiles over an intermediate of
   H or 2H rows add into it (all signalling counter, each waiting on the FILL; the first adds a
   resid half the time). With FOLD (1 in 3, RANDPROG_OPS_ALL) a second FILL starts qkv [1, F], F =
   (nh + 2*nkv)*head_dim, an IO_OUTPUT the tiles add into too, remembered for a PRENORM section.
   The sum becomes a class-0 value. */
RANDPROG_FN void randprog_mlp(randprog_state *s, int counter) {
    const int64_t H = s->H, I = H << randprog_below(&s->rng, 2), F = (int64_t)(s->nh + 2 * s->nkv) * s->head_dim;
    const int fold = s->ops == RANDPROG_OPS_ALL && randprog_below(&s->rng, 3) == 0;
    randprog_val v[3]; /* x, the FILLs, resid */
    int ins[7], outs[2], n_in, j, n_tiles = randprog_tiles(s, I, 0, 4), resid = randprog_below(&s->rng, 2);
    int64_t n_tile = I / n_tiles;
    v[0] = s->pool[randprog_pick(s, 0)];
    v[2] = s->pool[randprog_pick(s, 0)];
    ins[0] = v[0].buf;
    ins[1] = randprog_weight(s, H, 0);
    ins[2] = randprog_weight(s, I, H); /* W_gate */
    ins[3] = randprog_weight(s, I, H); /* W_up */
    ins[4] = randprog_weight(s, I, H); /* W_downT */
    outs[0] = randprog_global(s, "acc", AMK_DTYPE_F32, 1, H);
    v[1].buf = outs[0]; v[1].counter = amk_program_add_counter(s->p, "fill"); v[1].threshold = 1 + fold; v[1].cls = -1;
    randprog_fill_task(s, outs[0], v[1].counter);
    if (fold) {
        ins[5] = randprog_buffer(s, "w", AMK_KIND_WEIGHT, randprog_float_dtype(&s->rng), 2, I + H, F, 0, AMK_SPACE_HBM);
        outs[1] = randprog_buffer(s, "qkv", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, F, 0, AMK_SPACE_HBM);
        randprog_fill_task(s, outs[1], v[1].counter);
    }
    for (j = 0; j < n_tiles; j++) {
        int first = j == 0 && resid, t;
        n_in = 5 + fold;
        if (first) ins[n_in++] = v[2].buf;
        t = randprog_task_n(s, fold ? AMK_OP_RMSNORM_MLP_FOLD : AMK_OP_RMSNORM_MLP, ins, n_in, v, first ? 3 : 2, outs, 1 + fold, counter,
                            randprog_nbytes(s, ins[2], 3 * n_tile * H) + (fold ? randprog_nbytes(s, ins[5], n_tile * F) : 0));
        if (t < 0) break;
        amk_task_set_real(s->p, t, "eps", 1e-5);
        amk_task_set_int(s->p, t, "K", H);
        amk_task_set_int(s->p, t, "N_tile", n_tile);
        amk_task_set_int(s->p, t, "n_off", j * n_tile);
    }
    randprog_push(s, outs[0], counter, n_tiles, 0);
    if (fold) {
        s->fold.buf = outs[1]; s->fold.counter = counter; s->fold.threshold = n_tiles; s->fold.cls = -1;
        s->fold_x = s->pool[s->n_pool - 1];
    }
}

/* The argmax of a value no accumulation reaches: ARGMAX_PARTIAL tiles over it, or RMSNORM_GEMV
   tiles with ARGMAX that store logits [1, H] (a new class-0 value) and their pairs, into
   partials [1, 2P] (one pair a tile, all signalling counter); then ARGMAX_COMBINE writes the
   index into an I32, I8 or U8 IO_OUTPUT. */
RANDPROG_FN void randprog_argmax(randprog_state *s, int counter) {
    static const amk_dtype index_dtype[3] = {AMK_DTYPE_I32, AMK_DTYPE_I8, AMK_DTYPE_U8};
    randprog_val x = s->pool[randprog_pick_exact(s, 0)], pv;
    const int n_parts = randprog_tiles(s, s->H, 0, 4), n_tile = s->H / n_parts, fused = randprog_below(&s->rng, 2);
    int ins[3], outs[2], j, idx;
    ins[0] = x.buf;
    outs[0] = outs[1] = randprog_global(s, "part", AMK_DTYPE_F32, 1, 2 * (int64_t)n_parts);
    if (fused) {
        ins[1] = randprog_weight(s, s->H, 0);
        ins[2] = randprog_weight(s, s->H, s->H);
        outs[0] = randprog_activation(s, 0);
    }
    for (j = 0; j < n_parts; j++) {
        int t = fused ? randprog_task_n(s, AMK_OP_RMSNORM_GEMV_ARGMAX, ins, 3, &x, 1, outs, 2, counter,
                                        randprog_nbytes(s, ins[2], (int64_t)n_tile * s->H))
                      : randprog_task_n(s, AMK_OP_ARGMAX_PARTIAL, ins, 1, &x, 1, outs, 1, counter, 0);
        if (t < 0) break;
        amk_task_set_int(s->p, t, "N_tile", n_tile);
        amk_task_set_int(s->p, t, "n_off", (int64_t)j * n_tile);
        amk_task_set_int(s->p, t, "part", j);
        if (fused) {
            amk_task_set_real(s->p, t, "eps", 1e-5);
            amk_task_set_int(s->p, t, "K", s->H);
        }
    }
    pv.buf = outs[1]; pv.counter = counter; pv.threshold = n_parts; pv.cls = -1;
    idx = randprog_buffer(s, "idx", AMK_KIND_IO_OUTPUT, index_dtype[randprog_below(&s->rng, 3)], 1, 1, 0, 0, AMK_SPACE_HBM);
    randprog_task_n(s, AMK_OP_ARGMAX_COMBINE, &outs[1], 1, &pv, 1, &idx, 1,
                    amk_program_add_counter(s->p, "argmax"), 0);
    if (fused) randprog_push(s, outs[0], counter, n_parts, 0);
}

/* One fused step in place of a step of the main loop: RMSNORM_GEMV tiles (plain or ROPE),
   RMSNORM_SWIGLU tiles, the one-step MLP, a FILL constant, a BIAS_ADD or (not RANDPROG_OPS_GPU)
   an argmax. */
RANDPROG_FN void randprog_fused(randprog_state *s) {
    int c = amk_program_add_counter(s->p, "fused"), out, n, pos;
    randprog_val x;
    switch (randprog_below(&s->rng, s->ops == RANDPROG_OPS_GPU ? 5 : 6)) {
    case 0:
        x = s->pool[randprog_pick(s, 0)];
        out = randprog_activation(s, 0);
        pos = randprog_below(&s->rng, 3) == 0 ? randprog_position(s) : -1;
        if (pos >= 0) randprog_rope_draw(s);
        n = randprog_norm_tiles(s, x, s->H, out, pos >= 0 ? (int)AMK_GEMV_FLAG_ROPE : 0, pos, c, 4);
        randprog_push(s, out, c, n, 0);
        break;
    case 1:
        out = randprog_activation(s, 0);
        n = randprog_swiglu(s, out, c);
        randprog_push(s, out, c, n, 0);
        break;
    case 2: randprog_mlp(s, c); break;
    case 3:
        out = randprog_activation(s, 0);
        randprog_fill_task(s, out, c);
        randprog_push(s, out, c, 1, 0);
        break;
    case 4: { /* BIAS_ADD: a value plus a bias of its own over its last axis */
        randprog_val v = s->pool[randprog_pick(s, 0)];
        int b = randprog_buffer(s, "bias", AMK_KIND_WEIGHT, randprog_float_dtype(&s->rng), 1, s->H, 0, 0, AMK_SPACE_HBM);
        out = randprog_activation(s, 0);
        randprog_task(s, AMK_OP_BIAS_ADD, &v, 1, &b, 1, out, c, (int64_t)s->H * 4);
        randprog_push(s, out, c, 1, 0);
        break;
    }
    default: randprog_argmax(s, c); break;
    }
}

/* Attention task t's heads (the section's), scale, and its kv heads [g0, g0 + ng). */
RANDPROG_FN void randprog_attn_heads(randprog_state *s, int t, double scale, int g0, int ng) {
    amk_task_set_int(s->p, t, "head_dim", s->head_dim);
    amk_task_set_int(s->p, t, "n_heads", s->nh);
    amk_task_set_int(s->p, t, "n_kv_heads", s->nkv);
    amk_task_set_real(s->p, t, "scale", scale);
    amk_task_set_int(s->p, t, "n_off", g0);
    amk_task_set_int(s->p, t, "N_tile", ng);
}

/* The fused attention section over caches kc, vc [max_seq, nkv, head_dim] and an I32 position
   pos (one of three forms, the top of this file). Attention outputs are a class-1 value
   (ATTENTION_DECODE) or a class-0 F32 sum (ATTENTION_O). Rows the kv-head tiles cover: kv heads
   [g*g_tile, (g+1)*g_tile) of g_tiles, each task of ATTENTION_O a slice of their rows of W_oT. */
RANDPROG_FN void randprog_attn(randprog_state *s) {
    const int nh = s->nh, nkv = s->nkv, hd = s->head_dim, grp = nh / nkv;
    const int max_seq = 4 + randprog_below(&s->rng, 5), form = randprog_below(&s->rng, s->ops == RANDPROG_OPS_GPU ? 2 : 3);
    const int g_tiles = nkv > 1 && randprog_below(&s->rng, 2) ? nkv : 1, g_tile = nkv / g_tiles;
    const int kv_start = randprog_below(&s->rng, 4) == 0 ? randprog_below(&s->rng, max_seq) : 0;
    const int pos = randprog_position(s);
    const double scale = 1.0 / sqrt((double)hd);
    randprog_val v[6]; /* q (or qkv), k cache, v cache, the FILL, resid, x (PRENORM) */
    int kc = randprog_buffer(s, "kc", AMK_KIND_KV_CACHE, randprog_float_dtype(&s->rng), 3, max_seq, nkv, hd, AMK_SPACE_HBM);
    int vc = randprog_buffer(s, "vc", AMK_KIND_KV_CACHE, randprog_float_dtype(&s->rng), 3, max_seq, nkv, hd, AMK_SPACE_HBM);
    int ins[7], outs[3], g, m, k, n, out, c;
    randprog_rope_draw(s);
    if (form < 2) { /* q, k and v from RMSNORM_GEMV tiles; k and v into cache row pos */
        int ck = amk_program_add_counter(s->p, "k row"), cv = randprog_below(&s->rng, 2) ? ck : amk_program_add_counter(s->p, "v row");
        int nk, nv;
        v[5] = s->pool[randprog_pick(s, 0)];
        v[0].buf = randprog_global(s, "q", randprog_float_dtype(&s->rng), 1, (int64_t)nh * hd);
        v[0].counter = amk_program_add_counter(s->p, "q");
        v[0].threshold = randprog_norm_tiles(s, v[5], (int64_t)nh * hd, v[0].buf, AMK_GEMV_FLAG_ROPE, pos, v[0].counter, 2);
        nk = randprog_norm_tiles(s, v[5], (int64_t)nkv * hd, kc, AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW, pos, ck, 2);
        nv = randprog_norm_tiles(s, v[5], (int64_t)nkv * hd, vc, AMK_GEMV_FLAG_KV_ROW, pos, cv, 2);
        v[1].buf = kc; v[1].counter = ck; v[1].threshold = nk + (cv == ck ? nv : 0); v[1].cls = -1;
        v[2].buf = vc; v[2].counter = cv; v[2].threshold = nv + (cv == ck ? nk : 0); v[2].cls = -1;
    } else { /* PRENORM: the last FOLD's qkv and x, or RMSNORM_GEMV tiles' qkv */
        if (s->fold.buf >= 0) {
            v[0] = s->fold;
            v[5] = s->fold_x;
        } else {
            v[5] = s->pool[randprog_pick(s, 0)];
            v[0].buf = randprog_global(s, "qkv", AMK_DTYPE_F32, 1, (int64_t)(nh + 2 * nkv) * hd);
            v[0].counter = amk_program_add_counter(s->p, "qkv");
            v[0].threshold = randprog_norm_tiles(s, v[5], (int64_t)(nh + 2 * nkv) * hd, v[0].buf, 0, -1, v[0].counter, 2);
        }
        v[1] = randprog_input(kc, -1); /* the caches' rows below pos, which no task here writes */
        v[2] = randprog_input(vc, -1);
    }
    ins[0] = v[0].buf; ins[1] = kc; ins[2] = vc; ins[3] = pos;
    if (form == 0 && randprog_below(&s->rng, 3) == 0) { /* ATTENTION_PREFILL tiles of q's one row at pos, into an output */
        out = randprog_buffer(s, "rows", AMK_KIND_IO_OUTPUT, randprog_float_dtype(&s->rng), 2, 1, (int64_t)nh * hd, 0,
                              AMK_SPACE_HBM);
        c = amk_program_add_counter(s->p, "prefill");
        for (g = 0; g < g_tiles; g++) {
            int t = randprog_task_n(s, AMK_OP_ATTENTION_PREFILL, ins, 4, v, 3, &out, 1, c,
                                    randprog_nbytes(s, kc, 2 * (int64_t)max_seq * g_tile * hd));
            if (t < 0) break;
            randprog_attn_heads(s, t, scale, g * g_tile, g_tile);
            amk_task_set_int(s->p, t, "m_off", 0);
            amk_task_set_int(s->p, t, "M_tile", 1);
        }
        return;
    }
    if (form == 0) { /* ATTENTION_DECODE tiles, normalised or PARTIAL over two windows + COMBINE */
        const int partial = randprog_below(&s->rng, 2), split = 1 + randprog_below(&s->rng, max_seq - 1);
        int parts[2];
        s->n_heads = nh;
        out = randprog_activation(s, 1);
        c = amk_program_add_counter(s->p, "attention");
        parts[0] = parts[1] = out;
        if (partial) {
            parts[0] = randprog_global(s, "part", AMK_DTYPE_F32, nh, hd + 2);
            parts[1] = randprog_global(s, "part", AMK_DTYPE_F32, nh, hd + 2);
        }
        for (k = 0; k < 1 + partial; k++)
            for (g = 0; g < g_tiles; g++) {
                const int start = partial ? (k ? split : 0) : kv_start, len = partial ? (k ? max_seq - split : split) : max_seq - kv_start;
                int t = randprog_task_n(s, AMK_OP_ATTENTION_DECODE, ins, 4, v, 3, &parts[k], 1, c,
                                        randprog_nbytes(s, kc, 2 * (int64_t)len * g_tile * hd));
                if (t < 0) break;
                randprog_attn_heads(s, t, scale, g * g_tile, g_tile);
                amk_task_set_int(s->p, t, "kv_start", start);
                amk_task_set_int(s->p, t, "kv_len", len);
                if (partial) amk_task_set_int(s->p, t, "flags", AMK_ATTN_FLAG_PARTIAL);
            }
        if (partial) {
            randprog_val pv[2];
            int t, cc = amk_program_add_counter(s->p, "combine");
            for (k = 0; k < 2; k++) { pv[k].buf = parts[k]; pv[k].counter = c; pv[k].threshold = 2 * g_tiles; pv[k].cls = -1; }
            t = randprog_task_n(s, AMK_OP_ATTENTION_COMBINE, parts, 2, pv, 2, &out, 1, cc, 0);
            if (t >= 0) amk_task_set_int(s->p, t, "head_dim", hd);
            c = cc;
        }
        randprog_push(s, out, c, partial ? 1 : g_tiles, 1);
        return;
    }
    /* ATTENTION_O: a FILL starts h [1, H], then tasks over kv-head tiles and row slices add into
       it, each waiting on the FILL; the first adds a resid half the time. PRENORM: the first
       slice of each tile stores its heads' cache rows, unless the caches are only read (1 in 4). */
    {
        const int n_slices = 1 + randprog_below(&s->rng, 2), resid = randprog_below(&s->rng, 2);
        const int writers = form == 2 && randprog_below(&s->rng, 4) != 0, rows = g_tile * grp * hd;
        const int wo = randprog_weight(s, (int64_t)nh * hd, s->H);
        randprog_val w[6];
        v[4] = s->pool[randprog_pick(s, 0)];
        outs[0] = randprog_global(s, "acc", AMK_DTYPE_F32, 1, s->H);
        outs[1] = kc; outs[2] = vc;
        v[3].buf = outs[0]; v[3].counter = amk_program_add_counter(s->p, "fill"); v[3].threshold = 1; v[3].cls = -1;
        randprog_fill_task(s, outs[0], v[3].counter);
        c = amk_program_add_counter(s->p, "attention o");
        ins[4] = wo;
        n = 0;
        for (g = 0; g < g_tiles; g++)
            for (m = 0; m < n_slices; m++) {
                int n_in = 5, n_w = 4, t;
                w[0] = v[0]; w[1] = v[1]; w[2] = v[2]; w[3] = v[3];
                if (form == 2) { ins[n_in++] = v[5].buf; w[n_w++] = v[5]; }
                if (n == 0 && resid) { ins[n_in++] = v[4].buf; w[n_w++] = v[4]; }
                t = randprog_task_n(s, form == 2 ? AMK_OP_ATTENTION_O_PRENORM : AMK_OP_ATTENTION_O, ins, n_in, w, n_w, outs,
                                    writers && m == 0 ? 3 : 1, c,
                                    randprog_nbytes(s, kc, 2 * (int64_t)(max_seq - kv_start) * g_tile * hd) +
                                        randprog_nbytes(s, wo, (int64_t)rows / n_slices * s->H));
                n++;
                if (t < 0) break;
                randprog_attn_heads(s, t, scale, g * g_tile, g_tile);
                amk_task_set_int(s->p, t, "kv_start", kv_start);
                amk_task_set_int(s->p, t, "kv_len", max_seq - kv_start);
                amk_task_set_int(s->p, t, "m_off", g * rows + m * (rows / n_slices));
                amk_task_set_int(s->p, t, "M_tile", rows / n_slices);
                if (form == 2) {
                    amk_task_set_real(s->p, t, "eps", 1e-5);
                    randprog_rope_set(s, t);
                }
            }
        randprog_push(s, outs[0], c, n, 0);
    }
}

/* The KV part of a program: the KV section; with the fused ops, half the time, and the fused
   attention section. */
RANDPROG_FN void randprog_kv_part(randprog_state *s) {
    if (s->ops == RANDPROG_OPS_SPEC || randprog_below(&s->rng, 2)) randprog_kv(s);
    if (s->ops != RANDPROG_OPS_SPEC) randprog_attn(s);
}

/* ---- the program ----------------------------------------------------------------------------- */

/* An IO_OUTPUT written from a value of class cls: a COPY, or (class 0) GEMV tiles. */
RANDPROG_FN void randprog_output(randprog_state *s, int cls) {
    int c = amk_program_add_counter(s->p, "output");
    int out = cls == 1
        ? randprog_buffer(s, "out", AMK_KIND_IO_OUTPUT, randprog_float_dtype(&s->rng), 2, s->n_heads, s->head_dim, 0, AMK_SPACE_HBM)
        : randprog_buffer(s, "out", AMK_KIND_IO_OUTPUT, randprog_float_dtype(&s->rng), 2, 1, s->H, 0, AMK_SPACE_HBM);
    if (cls == 0 && randprog_below(&s->rng, 2)) {
        randprog_gemv(s, out, c);
    } else {
        randprog_val v = s->pool[randprog_pick(s, cls)];
        randprog_task(s, AMK_OP_COPY, &v, 1, NULL, 0, out, c, 0);
    }
}

/* A random valid program (see the top of this file); NULL on out of memory. opts may be NULL. */
RANDPROG_FN amk_program *randprog_make(uint64_t seed, const randprog_opts *opts) {
    randprog_state s;
    int target = opts && opts->n_tasks > 0 ? opts->n_tasks : 24, i, n_in, kv_at = -1;
    memset(&s, 0, sizeof s);
    s.rng.s = seed * 0x2545F4914F6CDD1Dull + 1;
    s.p = amk_program_create();
    s.ops = opts ? opts->ops : RANDPROG_OPS_ALL;
    s.fold.buf = -1;
    /* why: the loop below stops once the pool holds target + 8 values, a step adds at most 2 and
       the KV part 2 (the KV section and the fused attention section), so target + 16 always
       suffices */
    s.pool = (randprog_val *)malloc((size_t)(target + 16) * sizeof(randprog_val));
    if (!s.p || !s.pool) { amk_program_free(s.p); free(s.pool); return NULL; }
    s.H = 8 << randprog_below(&s.rng, 3);
    s.head_dim = 4 << randprog_below(&s.rng, 2);
    s.n_heads = 0;
    s.onchip = opts ? opts->onchip : 0;
    if (opts ? opts->kv > 0 || (opts->kv < 0 && randprog_below(&s.rng, 2)) : 0)
        kv_at = randprog_below(&s.rng, target / 2 + 1);
    if (s.ops != RANDPROG_OPS_SPEC) { /* GQA groups of 1 or 2 */
        s.nkv = 1 + randprog_below(&s.rng, 2);
        s.nh = s.nkv * (1 + randprog_below(&s.rng, 2));
    }
    n_in = 1 + randprog_below(&s.rng, 2);
    for (i = 0; i < n_in; i++) {
        int b = randprog_buffer(&s, "x", AMK_KIND_IO_INPUT, randprog_float_dtype(&s.rng), 2, 1, s.H, 0, AMK_SPACE_HBM);
        s.pool[s.n_pool++] = randprog_input(b, 0);
    }
    while (s.p->n_tasks < target - 2 && s.n_pool < target + 8) {
        int kind = randprog_below(&s.rng, 10), c;
        if (kv_at >= 0 && s.p->n_tasks >= kv_at) { randprog_kv_part(&s); kv_at = -1; continue; }
        if (s.ops != RANDPROG_OPS_SPEC && randprog_below(&s.rng, 3) == 0) { randprog_fused(&s); continue; }
        c = amk_program_add_counter(s.p, "");
        if (kind < 2) { /* GEMV tiles under one shared all-join counter */
            int out = randprog_activation(&s, 0), n_tiles = randprog_gemv(&s, out, c);
            randprog_push(&s, out, c, n_tiles, 0);
        } else if (kind < 3) { /* two unrelated tasks sharing one counter: readers join both */
            int a = randprog_unary(&s, 0, c), b = randprog_unary(&s, 0, c);
            randprog_push(&s, a, c, 2, 0);
            randprog_push(&s, b, c, 2, 0);
        } else {
            int cls = s.n_heads > 0 && randprog_below(&s.rng, 3) == 0 ? 1 : 0;
            int a = randprog_unary(&s, cls, c);
            randprog_push(&s, a, c, 1, cls);
        }
    }
    if (kv_at >= 0) randprog_kv_part(&s);
    randprog_output(&s, 0);
    if (s.n_heads > 0) randprog_output(&s, 1);
    else if (randprog_below(&s.rng, 2)) randprog_output(&s, 0);
    free(s.pool);
    free(s.inexact);
    if (s.oom || s.p->build_error != AMK_OK) { amk_program_free(s.p); return NULL; }
    return s.p;
}

/* The values index buffer b may hold: [0, bound). A position that picks cache rows (RMSNORM_GEMV
   with KV_ROW stores row pos; ATTENTION_DECODE and ATTENTION_O attend up to it, and a PRENORM
   writer stores it) stays inside every cache it indexes, an EMBED id inside its table; 4 when
   nothing bounds it (ROPE alone takes any position). */
RANDPROG_FN int64_t randprog_index_bound(const amk_program *p, int b) {
    int64_t bound = INT64_MAX;
    int k, j;
    for (k = 0; k < p->n_tasks; k++) {
        const amk_task *t = &p->tasks[k];
        const amk_param *nkv = amk_task_param(t, "n_kv_heads");
        const amk_param *hd = amk_task_param(t, "head_dim");
        for (j = 0; j < t->n_inputs; j++) {
            int64_t rows = -1;
            if (t->inputs[j] != b) continue;
            if ((t->op == AMK_OP_RMSNORM_GEMV_KV || t->op == AMK_OP_RMSNORM_GEMV_ROPE_KV) && j == 3 &&
                t->n_outputs >= 1 && p->buffers[t->inputs[2]].shape[0] > 0)
                rows = amk_buffer_numel(&p->buffers[t->outputs[0]]) / p->buffers[t->inputs[2]].shape[0];
            else if ((t->op == AMK_OP_ATTENTION_DECODE || amk_op_device(t->op, NULL) == AMK_OP_ATTENTION_O) && j == 3 && nkv && hd &&
                     nkv->i > 0 && hd->i > 0)
                rows = amk_buffer_numel(&p->buffers[t->inputs[1]]) / (nkv->i * hd->i);
            else if (t->op == AMK_OP_ATTENTION_PREFILL && j == 3 && nkv && hd && nkv->i > 0 && hd->i > 0) /* pos + q's rows */
                rows = amk_buffer_numel(&p->buffers[t->inputs[1]]) / (nkv->i * hd->i) - p->buffers[t->inputs[0]].shape[0] + 1;
            else if (t->op == AMK_OP_EMBED && j == 0)
                rows = p->buffers[t->inputs[1]].shape[0];
            if (rows >= 1 && rows < bound) bound = rows;
        }
    }
    return bound == INT64_MAX ? 4 : bound;
}

/* Fills every IO_INPUT, WEIGHT, CONST and KV_CACHE buffer of vm with seeded values in [-1, 1)
   (weights [N, K] scaled by 1/sqrt(K) so GEMV chains stay in range; integer buffers get small
   non-negative values, index buffers inside randprog_index_bound). Returns 0 if a buffer is
   missing or mis-sized in the VM. */
RANDPROG_FN int randprog_fill(amk_refvm *vm, const amk_program *p, uint64_t seed) {
    randprog_rng rng;
    int b;
    rng.s = seed ^ 0xA5A5A5A5DEADBEEFull;
    for (b = 0; b < p->n_buffers; b++) {
        const amk_buffer *buf = &p->buffers[b];
        size_t nbytes = 0;
        unsigned char *data;
        int64_t n = amk_buffer_numel(buf), i, bound = 4;
        float scale = 1.0f;
        if (buf->kind != AMK_KIND_IO_INPUT && buf->kind != AMK_KIND_WEIGHT &&
            buf->kind != AMK_KIND_CONST && buf->kind != AMK_KIND_KV_CACHE)
            continue;
        data = (unsigned char *)amk_refvm_buffer(vm, b, &nbytes);
        if (n < 0 || (!data && n > 0) || (int64_t)nbytes != amk_dtype_nbytes(buf->dtype, n)) return 0;
        if (buf->kind == AMK_KIND_WEIGHT && buf->rank == 2 && buf->shape[1] > 0)
            scale = 1.0f / sqrtf((float)buf->shape[1]);
        if (buf->dtype == AMK_DTYPE_I32 || buf->dtype == AMK_DTYPE_I8 || buf->dtype == AMK_DTYPE_U8) {
            const int64_t most = buf->dtype == AMK_DTYPE_I32 ? INT32_MAX : buf->dtype == AMK_DTYPE_I8 ? 128 : 256;
            bound = randprog_index_bound(p, b);
            if (bound > most) bound = most;
        }
        for (i = 0; i < n; i++) {
            float v = amk_t_rng_sym(&rng) * scale;
            uint16_t h;
            switch (buf->dtype) {
            case AMK_DTYPE_F32: memcpy(data + 4 * i, &v, 4); break;
            case AMK_DTYPE_F16: h = amk_f32_to_f16(v); memcpy(data + 2 * i, &h, 2); break;
            case AMK_DTYPE_BF16: h = amk_f32_to_bf16(v); memcpy(data + 2 * i, &h, 2); break;
            case AMK_DTYPE_F8E4M3: data[i] = amk_f32_to_f8e4m3(v); break;
            case AMK_DTYPE_F8E5M2: data[i] = amk_f32_to_f8e5m2(v); break;
            case AMK_DTYPE_I32: { int32_t x = (int32_t)randprog_below(&rng, (int)bound); memcpy(data + 4 * i, &x, 4); break; }
            case AMK_DTYPE_I4: if (i % 2 == 0) data[i / 2] = (unsigned char)randprog_below(&rng, 256); break;
            default: data[i] = (unsigned char)randprog_below(&rng, (int)bound); break;
            }
        }
    }
    return 1;
}

/* ---- coverage: which fused forms programs hold ------------------------------------------------ */

/* What randprog_count_forms counts: every opcode under its code, then these forms of an opcode. */
enum {
    RANDPROG_FORM_DECODE_PARTIAL = AMK_OP_COUNT, /* ATTENTION_DECODE with PARTIAL */
    RANDPROG_FORM_O_KV_WRITER,                   /* ATTENTION_O_PRENORM storing the cache rows */
    RANDPROG_FORM_COUNT
};

RANDPROG_FN const char *randprog_form_name(int f) {
    static const char *const names[RANDPROG_FORM_COUNT - AMK_OP_COUNT] = {
        "ATTENTION_DECODE PARTIAL", "ATTENTION_O_PRENORM writer"};
    return f < AMK_OP_COUNT ? amk_op_name(f) : names[f - AMK_OP_COUNT];
}

/* Adds p's tasks to counts[RANDPROG_FORM_COUNT], each under its opcode and its flag forms. */
RANDPROG_FN void randprog_count_forms(const amk_program *p, int *counts) {
    int k;
    for (k = 0; k < p->n_tasks; k++) {
        const amk_task *t = &p->tasks[k];
        const amk_param *fp = amk_task_param(t, "flags");
        const int64_t f = fp ? fp->i : 0;
        if (t->op < 0 || t->op >= AMK_OP_COUNT) continue;
        counts[t->op]++;
        counts[RANDPROG_FORM_DECODE_PARTIAL] += t->op == AMK_OP_ATTENTION_DECODE && (f & AMK_ATTN_FLAG_PARTIAL);
        counts[RANDPROG_FORM_O_KV_WRITER] += t->op == AMK_OP_ATTENTION_O_PRENORM && t->n_outputs == 3;
    }
}

/* Prints the fused counts of n_programs programs (what names them) and fails a check for each
   of AMK's opcodes from 20 and the forms above that none of them holds. */
RANDPROG_FN void randprog_check_fused_coverage(const int *counts, int n_programs, const char *what) {
    int f;
    printf("%s: %d programs; tasks of each fused form:", what, n_programs);
    for (f = AMK_OP_RMSNORM_GEMV; f < RANDPROG_FORM_COUNT; f++) {
        printf("%s %s %d", f == AMK_OP_RMSNORM_GEMV ? "" : ",", randprog_form_name(f), counts[f]);
        CHECK_MSG(counts[f] > 0, "%s: no task of %s in %d programs", what, randprog_form_name(f), n_programs);
    }
    printf("\n");
}

#endif /* RANDPROG_H */
