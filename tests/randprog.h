/* tests/randprog.h - random VALID programs for property tests (header-only, static functions).

   randprog_make(seed, opts) builds a program of roughly opts->n_tasks tasks: layers of ADD, MUL,
   SILU_MUL, COPY, RMSNORM, SOFTMAX and GEMV_TILE tasks over a pool of values, with fan-in (two
   operands from anywhere earlier), fan-out (a value read many times), GEMV tiles that write
   disjoint columns of one output and share one all-join counter, pairs of unrelated tasks that
   share a counter (all-join waits on it), IO_INPUT and WEIGHT inputs, IO_OUTPUT outputs, dtypes
   F32/BF16/F16, and optionally a KV section (K and V KV_APPENDs, then an ATTENTION_TILE waiting on
   both) and on-chip (SMEM) activations. The task list is built in topological order; sm is
   unassigned, est_bytes is set (weight bytes for GEMV tiles, some tasks 0).
   randprog_fill(vm, p, seed) fills IO_INPUT, WEIGHT and CONST buffers, and KV caches (their
   prior-step state), with seeded random values. Same seed, same program, same values. */
#ifndef RANDPROG_H
#define RANDPROG_H

#include "../amk.h"
#include "amk_test.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* static, and no warning in a test that uses only part of this file */
#if defined(__GNUC__) || defined(__clang__)
#define RANDPROG_FN static __attribute__((unused))
#else
#define RANDPROG_FN static
#endif

typedef struct randprog_opts {
    int n_tasks; /* roughly how many tasks; <= 0 means 24 */
    int kv;      /* 1: add the KV section; 0: none; -1: on for about half the seeds */
    int onchip;  /* 1: about a quarter of the activations live in SMEM */
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
} randprog_state;

RANDPROG_FN amk_dtype randprog_float_dtype(randprog_rng *r) {
    static const amk_dtype t[3] = {AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F16};
    return t[randprog_below(r, 3)];
}

RANDPROG_FN int randprog_buffer(randprog_state *s, const char *prefix, amk_buffer_kind kind,
                           amk_dtype dtype, int rank, int64_t d0, int64_t d1, int64_t d2,
                           amk_memspace space) {
    char name[32], source[48];
    int64_t shape[3];
    shape[0] = d0; shape[1] = d1; shape[2] = d2;
    snprintf(name, sizeof name, "%s%d", prefix, s->n_names++);
    snprintf(source, sizeof source, "%s.weight", name);
    return amk_program_add_buffer(s->p, name, kind, dtype, rank, shape, space,
                                  kind == AMK_KIND_WEIGHT ? source : NULL);
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

/* A value with no producer (an input). */
RANDPROG_FN randprog_val randprog_input(int buf, int cls) {
    randprog_val v;
    v.buf = buf; v.counter = -1; v.threshold = 0; v.cls = cls;
    return v;
}

/* Adds a task reading vals[0..n_vals) (their buffers first, then the extra inputs), writing out
   and signalling counter; it waits on each distinct counter among vals with its all-join
   threshold. Returns the task index, -1 on failure (the program's build_error says why). */
RANDPROG_FN int randprog_task(randprog_state *s, amk_opcode op, const randprog_val *vals, int n_vals,
                         const int *extra, int n_extra, int out, int counter, int64_t est) {
    int ins[8], n_ins = 0, i, j, t;
    for (i = 0; i < n_vals; i++) ins[n_ins++] = vals[i].buf;
    for (i = 0; i < n_extra; i++) ins[n_ins++] = extra[i];
    t = amk_program_add_task(s->p, op, ins, n_ins, &out, 1, counter, amk_op_name(op));
    if (t < 0) return -1;
    for (i = 0; i < n_vals; i++) {
        int dup = 0;
        if (vals[i].counter < 0) continue;
        for (j = 0; j < i; j++) dup |= vals[j].counter == vals[i].counter;
        if (!dup) amk_task_add_wait(s->p, t, vals[i].counter, vals[i].threshold);
    }
    s->p->tasks[t].est_bytes = est;
    return t;
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
   becomes the first class-1 value. */
RANDPROG_FN void randprog_kv(randprog_state *s) {
    int n_kv = 1 + randprog_below(&s->rng, 2), max_seq = 4 + randprog_below(&s->rng, 5);
    int pos = randprog_below(&s->rng, max_seq), hd = s->head_dim, t, kc, vc, kr, out, ck, ca, cv, cq;
    randprog_val v[3];
    s->n_heads = n_kv * (1 + randprog_below(&s->rng, 2)); /* GQA groups of 1 or 2 */
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
    /* why: the loop below stops once the pool holds target + 8 values, a step adds at most 2 and
       the KV part 1, so target + 16 always suffices */
    s.pool = (randprog_val *)malloc((size_t)(target + 16) * sizeof(randprog_val));
    if (!s.p || !s.pool) { amk_program_free(s.p); free(s.pool); return NULL; }
    s.H = 8 << randprog_below(&s.rng, 3);
    s.head_dim = 4 << randprog_below(&s.rng, 2);
    s.n_heads = 0;
    s.onchip = opts ? opts->onchip : 0;
    if (opts ? opts->kv > 0 || (opts->kv < 0 && randprog_below(&s.rng, 2)) : 0)
        kv_at = randprog_below(&s.rng, target / 2 + 1);
    n_in = 1 + randprog_below(&s.rng, 2);
    for (i = 0; i < n_in; i++) {
        int b = randprog_buffer(&s, "x", AMK_KIND_IO_INPUT, randprog_float_dtype(&s.rng), 2, 1, s.H, 0, AMK_SPACE_HBM);
        s.pool[s.n_pool++] = randprog_input(b, 0);
    }
    while (s.p->n_tasks < target - 2 && s.n_pool < target + 8) {
        int kind = randprog_below(&s.rng, 10), c;
        if (kv_at >= 0 && s.p->n_tasks >= kv_at) { randprog_kv(&s); kv_at = -1; continue; }
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
    if (kv_at >= 0) randprog_kv(&s);
    randprog_output(&s, 0);
    if (s.n_heads > 0) randprog_output(&s, 1);
    else if (randprog_below(&s.rng, 2)) randprog_output(&s, 0);
    free(s.pool);
    if (s.p->build_error != AMK_OK) { amk_program_free(s.p); return NULL; }
    return s.p;
}

/* Fills every IO_INPUT, WEIGHT, CONST and KV_CACHE buffer of vm with seeded values in [-1, 1)
   (weights [N, K] scaled by 1/sqrt(K) so GEMV chains stay in range; integer buffers get small
   non-negative values). Returns 0 if a buffer is missing or mis-sized in the VM. */
RANDPROG_FN int randprog_fill(amk_refvm *vm, const amk_program *p, uint64_t seed) {
    randprog_rng rng;
    int b;
    rng.s = seed ^ 0xA5A5A5A5DEADBEEFull;
    for (b = 0; b < p->n_buffers; b++) {
        const amk_buffer *buf = &p->buffers[b];
        size_t nbytes = 0;
        unsigned char *data;
        int64_t n = amk_buffer_numel(buf), i;
        float scale = 1.0f;
        if (buf->kind != AMK_KIND_IO_INPUT && buf->kind != AMK_KIND_WEIGHT &&
            buf->kind != AMK_KIND_CONST && buf->kind != AMK_KIND_KV_CACHE)
            continue;
        data = (unsigned char *)amk_refvm_buffer(vm, b, &nbytes);
        if (n < 0 || (!data && n > 0) || (int64_t)nbytes != amk_dtype_nbytes(buf->dtype, n)) return 0;
        if (buf->kind == AMK_KIND_WEIGHT && buf->rank == 2 && buf->shape[1] > 0)
            scale = 1.0f / sqrtf((float)buf->shape[1]);
        for (i = 0; i < n; i++) {
            float v = amk_t_rng_sym(&rng) * scale;
            uint16_t h;
            switch (buf->dtype) {
            case AMK_DTYPE_F32: memcpy(data + 4 * i, &v, 4); break;
            case AMK_DTYPE_F16: h = amk_f32_to_f16(v); memcpy(data + 2 * i, &h, 2); break;
            case AMK_DTYPE_BF16: h = amk_f32_to_bf16(v); memcpy(data + 2 * i, &h, 2); break;
            case AMK_DTYPE_F8E4M3: data[i] = amk_f32_to_f8e4m3(v); break;
            case AMK_DTYPE_F8E5M2: data[i] = amk_f32_to_f8e5m2(v); break;
            case AMK_DTYPE_I32: { int32_t x = (int32_t)randprog_below(&rng, 4); memcpy(data + 4 * i, &x, 4); break; }
            case AMK_DTYPE_I4: if (i % 2 == 0) data[i / 2] = (unsigned char)randprog_below(&rng, 256); break;
            default: data[i] = (unsigned char)randprog_below(&rng, 4); break;
            }
        }
    }
    return 1;
}

#endif /* RANDPROG_H */
