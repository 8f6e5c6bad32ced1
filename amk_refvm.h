/* amk_refvm.h - AMK's IR layer, part 3: the reference VM. Part of AMK (amk.h has the library's
   manual).

   WHAT IT DOES
     Runs a validated program on the CPU with real numerics: every buffer in host memory (paged
     activations share their page), the ready tasks in list order or a seeded random order
     (amk_refvm_opts), each through its op's reference function from the op table (fp32
     arithmetic, cast to the output's dtype). It is the conformance oracle: a GPU result that
     differs beyond the per-dtype tolerance is a GPU bug. amk_ref_exec runs one task.
   WHAT IT DOES NOT DO
     Go fast: it is written to be read and checked against double-precision math (tests/).
   CONTENTS
     declarations >>refvm | implementation >>impl_refvm */
#ifndef AMK_REFVM_H
#define AMK_REFVM_H

#include "amk_validate.h"
#include "amk_plan.h" /* x_q8's rounding (amk_plan_x_q8), the device's */

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>refvm: the reference VM (the conformance oracle) ====================================== */

typedef struct amk_refvm amk_refvm;

/* Validates p (refusing a rejected program with AMK_ERR_REJECTED) and allocates host memory for
   every buffer (paged activations share their page). Every buffer starts zeroed. p must outlive
   the VM and must not change shape while it lives; params may change between runs. */
AMK_API amk_result amk_refvm_create(const amk_program *p, amk_refvm **out, amk_diag *d);
AMK_API void amk_refvm_free(amk_refvm *vm);
/* The VM's storage of a buffer (its dtype's bytes, row-major), or NULL for a bad id. */
AMK_API void *amk_refvm_buffer(amk_refvm *vm, int buffer_id, size_t *nbytes);
/* Makes a read-only buffer (WEIGHT, CONST, IO_INPUT) read from caller memory instead of a copy.
   data must hold the buffer's nbytes and outlive the VM (or a later bind). */
AMK_API amk_result amk_refvm_bind(amk_refvm *vm, int buffer_id, const void *data, size_t nbytes);
/* The same for a buffer of any kind the VM may write (a KV cache two programs share: amk_llm's
   prefill program and its decode step): the VM reads and writes data, which must hold the
   buffer's nbytes and outlive the VM (or a later bind). A buffer on a page cannot be bound
   (AMK_ERR_INVALID_ARG). */
AMK_API amk_result amk_refvm_bind_storage(amk_refvm *vm, int buffer_id, void *data, size_t nbytes);

typedef struct amk_refvm_opts {
    uint64_t seed;        /* 0: fire ready tasks in list order; else a seeded random order */
} amk_refvm_opts;

/* One forward pass: counters reset to 0, then the counter-driven walk. AMK_ERR_STUCK if no task
   is ready while some have not fired; AMK_ERR_RUNTIME for an out-of-range id or position. */
AMK_API amk_result amk_refvm_run(amk_refvm *vm, const amk_refvm_opts *opts, amk_diag *d);

/* Runs one task's numerics on explicit storage: ins[i] and outs[i] point at buffer memory of
   the task's inputs/outputs (in-place KV_APPEND: outs[0] == ins[1]). The building block of the
   VM, exposed for tests. */
AMK_API amk_result amk_ref_exec(const amk_program *p, const amk_task *t, void *const *ins,
                                void *const *outs, amk_diag *d);


#ifdef __cplusplus
}
#endif
#endif /* AMK_REFVM_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_REFVM_IMPLEMENTATION_DONE)
#define AMK_REFVM_IMPLEMENTATION_DONE
/* ==== >>impl_refvm: the reference VM, the conformance oracle ================================== */
/* (part of amk.h's implementation; included once from amk.h)

   Every opcode with real numerics on the CPU, following IR_SPEC_NOTES "What each opcode
   computes": inputs are read as fp32 (amk__load_f32), all arithmetic and accumulation is fp32,
   and each result is cast to the output dtype once (amk__store_f32). A task writes only what its
   opcode says (a GEMV tile its columns, KV_APPEND its row). The code is meant to be obviously
   right; only GEMV/GEMM is tuned (row conversion plus 8 independent accumulators), because the
   Llama path runs whole models through it. */

/* Fills d (cleared first) and returns r. check may be NULL; task/counter -1 when they do not apply. */
AMK__FN amk_result amk__refvm_fail(amk_diag *d, amk_result r, const char *check, int task,
                                   int counter, const char *fmt, ...) {
    va_list ap;
    if (!d) return r;
    amk_diag_clear(d);
    d->result = r;
    d->task = task;
    d->counter = counter;
    if (check) snprintf(d->check, sizeof d->check, "%s", check);
    va_start(ap, fmt);
    vsnprintf(d->message, sizeof d->message, fmt, ap);
    va_end(ap);
    return r;
}

/* The index of t in p's task list, or -1 when t is not one of p's tasks. */
AMK__FN int amk__refvm_task_index(const amk_program *p, const amk_task *t) {
    uintptr_t a = (uintptr_t)p->tasks, b = (uintptr_t)t;
    if (!p->tasks || b < a || (b - a) % sizeof(amk_task) ||
        (b - a) / sizeof(amk_task) >= (uintptr_t)p->n_tasks)
        return -1;
    return (int)((b - a) / sizeof(amk_task));
}

/* n floats of scratch, or NULL (also when n does not fit size_t). */
AMK__FN float *amk__refvm_floats(int64_t n) {
    if (n < 0 || (uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(float))) return NULL;
    return (float *)amk__malloc((size_t)n * sizeof(float));
}

/* amk_f16_to_f32 with the common case, a normal number, decoded inline. why: with the generic
   decode F16 weights run 5x slower than BF16 in GEMV. */
AMK__FN float amk__refvm_f16(uint16_t h) {
    uint32_t e = h & 0x7C00u;
    if (e == 0 || e == 0x7C00u) return amk_f16_to_f32(h); /* zero, subnormal, inf, NaN */
    /* rebias the exponent (15 -> 127): add (127-15) << 23 to the shifted exponent|mantissa */
    return amk__bits_f32(((uint32_t)(h & 0x8000u) << 16) |
                         ((((uint32_t)h & 0x7FFFu) << 13) + 0x38000000u));
}

/* dst[0..n) = elements [off, off+n) of a buffer of dtype t, as fp32. */
AMK__FN void amk__refvm_load_row(const void *base, int t, int64_t off, int64_t n, float *dst) {
    const uint8_t *b = (const uint8_t *)base;
    int64_t i;
    uint16_t h;
    if (n <= 0) return;
    switch (t) {
    case AMK_DTYPE_F32:
        memcpy(dst, b + 4 * off, (size_t)n * 4);
        break;
    case AMK_DTYPE_BF16:
        for (i = 0; i < n; i++) { memcpy(&h, b + 2 * (off + i), 2); dst[i] = amk_bf16_to_f32(h); }
        break;
    case AMK_DTYPE_F16:
        for (i = 0; i < n; i++) { memcpy(&h, b + 2 * (off + i), 2); dst[i] = amk__refvm_f16(h); }
        break;
    default:
        if (amk_dtype_is_block(t)) amk__blk_load(base, t, off, n, dst); /* a GGUF weight's blocks */
        else
            for (i = 0; i < n; i++) dst[i] = amk__load_f32(base, t, off + i);
        break;
    }
}

/* sum a[k]*b[k] in fp32 with 8 independent accumulators, combined pairwise. */
AMK__FN float amk__refvm_dot(const float *a, const float *b, int64_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        s0 += a[k] * b[k];         s1 += a[k + 1] * b[k + 1];
        s2 += a[k + 2] * b[k + 2]; s3 += a[k + 3] * b[k + 3];
        s4 += a[k + 4] * b[k + 4]; s5 += a[k + 5] * b[k + 5];
        s6 += a[k + 6] * b[k + 6]; s7 += a[k + 7] * b[k + 7];
    }
    for (; k < n; k++) s0 += a[k] * b[k];
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

/* x_q8 (AMK_X_Q8): xs[0 .. K) rounded to 8 bits a unit of 32 elements, in place, by
   amk_plan_x_q8 (the device's rule). */
AMK__FN void amk__ref_x_q8(float *xs, int64_t K) {
    int64_t u, k;
    for (u = 0; u < K; u += 32) {
        const int64_t e = K - u < 32 ? K : u + 32;
        uint32_t top = 0;
        float amax, d;
        for (k = u; k < e; k++) { /* the largest |y| by its bits, as the device's max over lanes */
            const uint32_t b = amk__f32_bits(xs[k]) & 0x7FFFFFFFu;
            if (b > top) top = b;
        }
        amax = amk__bits_f32(top);
        for (k = u; k < e; k++) {
            const float q = amk_plan_x_q8(xs[k], amax, &d);
            xs[k] = d * q;
        }
    }
}

/* Element e of 4-bit packed data (dtype I4, or U8 holding two per byte): low nibble first,
   stored q + 8 (IR_SPEC_NOTES). */
AMK__FN float amk__refvm_nibble(const void *base, int64_t e) {
    uint8_t byte = ((const uint8_t *)base)[e >> 1];
    return (float)((int)((e & 1) ? byte >> 4 : byte & 15) - 8);
}

/* dst elements [doff, doff+n) = src elements [soff, soff+n), cast. Equal byte-sized dtypes copy
   the bytes (exact, also for I32 beyond 2^24); anything else goes through fp32. */
AMK__FN void amk__refvm_cast(void *dst, int dt, int64_t doff, const void *src, int st, int64_t soff,
                             int64_t n) {
    int64_t i;
    int bits = amk_dtype_bits(dt);
    if (n <= 0) return;
    if (dt == st && bits % 8 == 0 && bits > 0) {
        size_t w = (size_t)(bits / 8);
        memmove((uint8_t *)dst + (size_t)doff * w, (const uint8_t *)src + (size_t)soff * w,
                (size_t)n * w);
        return;
    }
    if (amk_dtype_is_block(st)) { /* an embedding row of a GGUF table: its blocks, 256 elements at a time */
        float tmp[256];
        int64_t k;
        for (i = 0; i < n; i += k) {
            int64_t j;
            k = n - i < 256 ? n - i : 256;
            amk__blk_load(src, st, soff + i, k, tmp);
            for (j = 0; j < k; j++) amk__store_f32(dst, dt, doff + i + j, tmp[j]);
        }
        return;
    }
    for (i = 0; i < n; i++) amk__store_f32(dst, dt, doff + i, amk__load_f32(src, st, soff + i));
}

/* One task being executed: its buffers, their storage and its marshalled params. */
typedef struct amk__refop {
    const amk_task *t;
    int task_index;
    amk_params_t P;
    int ni;
    const amk_buffer *in[AMK_MAX_INPUTS];
    const void *x[AMK_MAX_INPUTS]; /* storage of input i */
    int64_t n_in[AMK_MAX_INPUTS];
    const amk_buffer *out;
    void *y;                       /* storage of the (first) output */
    int64_t n_out;
    const amk_buffer *outs[AMK_MAX_OUTPUTS]; /* every output (outs[0] = out): RMSNORM_GEMV_ARGMAX's
                                                partials, RMSNORM_MLP_FOLD's qkv, the caches of an
                                                ATTENTION_O_PRENORM that writes them */
    void *ys[AMK_MAX_OUTPUTS];
} amk__refop;

#define AMK__IN(o, i, e) amk__load_f32((o)->x[i], (o)->in[i]->dtype, (e))
#define AMK__OUT(o, e, v) amk__store_f32((o)->y, (o)->out->dtype, (e), (v))

AMK__FN amk_result amk__refvm_oom(const amk__refop *o, amk_diag *d) {
    return amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, o->task_index, -1,
                           "%s: out of memory for scratch", amk_op_name(o->t->op));
}

AMK__FN amk_result amk__ref_embed(const amk__refop *o, amk_diag *d) {
    /* a row: the table's numel / V elements (amk__check_embed); with M_tile ids [m_off, +M_tile) */
    int64_t i, V = o->in[1]->shape[0], H = o->n_in[1] / V;
    const int64_t i0 = o->P.M_tile > 0 ? o->P.m_off : 0, i1 = o->P.M_tile > 0 ? i0 + o->P.M_tile : o->n_in[0];
    for (i = i0; i < i1; i++) { /* why: check every id first, so an error writes nothing */
        int64_t id = amk__load_i64(o->x[0], o->in[0]->dtype, i);
        if (id < 0 || id >= V)
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "EMBED: token id %lld at index %lld is outside [0, %lld)",
                                   (long long)id, (long long)i, (long long)V);
    }
    for (i = i0; i < i1; i++) {
        int64_t id = amk__load_i64(o->x[0], o->in[0]->dtype, i);
        amk__refvm_cast(o->y, o->out->dtype, i * H, o->x[1], o->in[1]->dtype, id * H, H);
    }
    return AMK_OK;
}

/* 1/sqrt(mean(x^2) + eps) of elements [off, off+n) of input i, summed in fp32 in order: the
   scale of every rms norm (RMSNORM, the RMSNORM_* tiles, ATTENTION_O_PRENORM). */
AMK__FN float amk__ref_rms_inv(const amk__refop *o, int i, int64_t off, int64_t n) {
    float ss = 0.0f;
    int64_t k;
    for (k = 0; k < n; k++) { float v = AMK__IN(o, i, off + k); ss += v * v; }
    return 1.0f / sqrtf(ss / (float)n + o->P.eps);
}

/* [e0, e1): the elements ADD, SILU_MUL, ALLREDUCE_SHARD, RMSNORM and COPY write: with M_tile, rows [m_off, m_off+M_tile)
   of the output's first axis (amk__check_rows), else every element. */
AMK__FN void amk__ref_rows(const amk__refop *o, int64_t *e0, int64_t *e1) {
    const int64_t row = o->P.M_tile > 0 ? o->n_out / o->out->shape[0] : 0;
    *e0 = row ? (int64_t)o->P.m_off * row : 0;
    *e1 = row ? ((int64_t)o->P.m_off + o->P.M_tile) * row : o->n_out;
}

/* Rows of hidden: x's row r takes the weight's row r % k, k = the weight's rows (amk__check_norm);
   with M_tile the rows [m_off, m_off+M_tile) only. */
AMK__FN amk_result amk__ref_rmsnorm(const amk__refop *o, amk_diag *d) {
    AMK__UNUSED(d);
    int64_t r, h, H = o->P.hidden, k = o->n_in[1] / H, e0, e1;
    amk__ref_rows(o, &e0, &e1);
    for (r = e0 / H; r < e1 / H; r++) {
        const float inv = amk__ref_rms_inv(o, 0, r * H, H);
        const int64_t w0 = r % k * H;
        for (h = 0; h < H; h++) AMK__OUT(o, r * H + h, AMK__IN(o, 0, r * H + h) * inv * AMK__IN(o, 1, w0 + h));
    }
    return AMK_OK;
}

AMK__FN amk_result amk__ref_layernorm(const amk__refop *o, amk_diag *d) {
    AMK__UNUSED(d);
    int64_t r, h, H = o->P.hidden, kw = o->n_in[1] / H, kb = o->ni == 3 ? o->n_in[2] / H : 1;
    for (r = 0; r < o->n_in[0] / H; r++) {
        float sum = 0.0f, var = 0.0f, mean, den;
        for (h = 0; h < H; h++) sum += AMK__IN(o, 0, r * H + h);
        mean = sum / (float)H;
        for (h = 0; h < H; h++) { float c = AMK__IN(o, 0, r * H + h) - mean; var += c * c; }
        den = sqrtf(var / (float)H + o->P.eps); /* population variance */
        for (h = 0; h < H; h++) {
            float v = (AMK__IN(o, 0, r * H + h) - mean) / den * AMK__IN(o, 1, r % kw * H + h);
            if (o->ni == 3) v += AMK__IN(o, 2, r % kb * H + h);
            AMK__OUT(o, r * H + h, v);
        }
    }
    return AMK_OK;
}

/* Row n of the quantized weight, dequantized: (q - zero) * scale per group of `group` columns. */
AMK__FN void amk__ref_dequant_wrow(const amk__refop *o, int64_t n, float *dst) {
    int64_t K = o->P.K, group = o->P.group, G = K / group, g, k;
    int i8 = o->in[1]->dtype == AMK_DTYPE_I8;
    /* why: when the row and every group start on a byte, decode 4-bit pairs a byte at a time */
    int pairs = !i8 && (n * K) % 2 == 0 && group % 2 == 0;
    const int8_t *q8 = (const int8_t *)o->x[1];
    const uint8_t *q4 = (const uint8_t *)o->x[1] + (n * K) / 2; /* this row's bytes */
    for (g = 0; g < G; g++) {
        float s = AMK__IN(o, 2, n * G + g), z = o->ni == 4 ? AMK__IN(o, 3, n * G + g) : 0.0f;
        if (pairs) {
            for (k = g * group; k < (g + 1) * group; k += 2) {
                uint8_t b = q4[k / 2];
                dst[k] = ((float)((int)(b & 15) - 8) - z) * s;
                dst[k + 1] = ((float)((int)(b >> 4) - 8) - z) * s;
            }
            continue;
        }
        for (k = g * group; k < (g + 1) * group; k++) {
            float q = i8 ? (float)q8[n * K + k] : amk__refvm_nibble(o->x[1], n * K + k);
            dst[k] = (q - z) * s;
        }
    }
}

/* out[m, n] = sum_k x[m,k]*W[n,k] (+bias[n]) for n in the tile (GEMM: m in its rows too, and k in
   [k_off, k_off + K_tile) alone with K_tile). */
AMK__FN amk_result amk__ref_gemv(const amk__refop *o, amk_diag *d) {
    int64_t K = o->P.K, M = o->n_in[0] / K, n_out_last = o->n_out / M;
    const int64_t k0 = o->P.K_tile > 0 ? o->P.k_off : 0, kn = o->P.K_tile > 0 ? o->P.K_tile : K;
    int64_t m0 = 0, m1 = M, n, m;
    int quant = o->P.qdtype == AMK_DTYPE_I8 || o->P.qdtype == AMK_DTYPE_I4;
    float *xs, *w; /* xs [m1-m0, K] fp32 rows of x; w [K] one weight row */
    if (o->t->op == AMK_OP_GEMM_TILE) { m0 = o->P.m_off; m1 = m0 + o->P.M_tile; }
    xs = amk__refvm_floats((m1 - m0) * K);
    w = amk__refvm_floats(K);
    if (!xs || !w) { amk__free(xs); amk__free(w); return amk__refvm_oom(o, d); }
    amk__refvm_load_row(o->x[0], o->in[0]->dtype, m0 * K, (m1 - m0) * K, xs);
    if (o->P.x_q8)
        for (m = m0; m < m1; m++) amk__ref_x_q8(xs + (m - m0) * K, K);
    for (n = o->P.n_off; n < (int64_t)o->P.n_off + o->P.N_tile; n++) {
        if (quant) amk__ref_dequant_wrow(o, n, w);
        else amk__refvm_load_row(o->x[1], o->in[1]->dtype, n * K, K, w);
        for (m = m0; m < m1; m++) {
            float acc = amk__refvm_dot(xs + (m - m0) * K + k0, w + k0, kn);
            if (!quant && o->ni == 3) acc += AMK__IN(o, 2, n);
            AMK__OUT(o, m * n_out_last + n, acc);
        }
    }
    amk__free(xs);
    amk__free(w);
    return AMK_OK;
}

#define AMK__TWO_PI 6.283185307179586476925 /* why: M_PI is not C99 */

/* RoPE inverse frequency of pair i of a head of P->head_dim: theta^(-2i/head_dim) in fp32 as HF
   computes it, with the optional llama3 frequency scaling of REFERENCE.md §3.4. */
AMK__FN float amk__rope_inv_freq(const amk_params_t *P, int64_t i) {
    float inv = 1.0f / powf(P->theta, (float)(2 * i) / (float)P->head_dim);
    if (P->rope_type != AMK_ROPE_DEFAULT) { /* linear, YaRN: the ramp amk_task_marshal_params set, in fp32 */
        float ramp = ((float)i - P->rope_low_freq_factor) / (P->rope_high_freq_factor - P->rope_low_freq_factor);
        float extra = 1.0f - (ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp);
        return inv / P->rope_factor * (1.0f - extra) + inv * extra;
    }
    if (P->rope_factor > 0.0f) {
        float orig = (float)P->rope_orig_ctx, lo = P->rope_low_freq_factor;
        float hi = P->rope_high_freq_factor, factor = P->rope_factor;
        float wavelen = (float)AMK__TWO_PI / inv, low_wl = orig / lo, high_wl = orig / hi;
        if (wavelen > low_wl) {
            inv = inv / factor;
        } else if (!(wavelen < high_wl)) {
            float smooth = (orig / wavelen - lo) / (hi - lo);
            inv = (1.0f - smooth) * inv / factor + smooth * inv;
        }
    }
    return inv;
}

/* RMSNORM_GEMV_ROPE's RoPE (and ATTENTION_O_PRENORM's): y[0..nt) are values n0.. of rows of heads of
   head_dim, in interleaved pair order; pair (n, n+1), n even, rotates by pos * inv_freq((n %
   head_dim) / 2). */
AMK__FN void amk__ref_rope_pairs(const amk_params_t *P, int64_t pos, int64_t n0, float *y, int64_t nt) {
    int64_t n;
    for (n = 0; n + 1 < nt; n += 2) {
        float angle = (float)pos * amk__rope_inv_freq(P, ((n0 + n) % P->head_dim) / 2);
        float c = cosf(angle), sn = sinf(angle), x1 = y[n], x2 = y[n + 1];
        y[n] = x1 * c - x2 * sn;
        y[n + 1] = x2 * c + x1 * sn;
    }
}

/* v as a buffer of dtype t holds it: stored and loaded back. */
AMK__FN float amk__refvm_round(float v, int t) {
    unsigned char b[8] = {0};
    amk__store_f32(b, t, 0, v);
    return amk__load_f32(b, t, 0);
}

/* ATTENTION_O_PRENORM's head_dim values at element off of qkv (input 0): dst = inv * qkv[off..],
   rotated (RoPE at pos) when rope, rounded to dtype dt. */
AMK__FN void amk__ref_prenorm(const amk__refop *o, float inv, int64_t pos, int64_t off, int rope, int dt, float *dst) {
    const int64_t hd = o->P.head_dim;
    int64_t e;
    for (e = 0; e < hd; e++) dst[e] = inv * AMK__IN(o, 0, off + e);
    if (rope) amk__ref_rope_pairs(&o->P, pos, 0, dst, hd);
    for (e = 0; e < hd; e++) dst[e] = amk__refvm_round(dst[e], dt);
}

/* softmax(q . k * scale) . v of q against kv head g over cache rows [r0, r0 + len) in fp32: the
   sum into acc [head_dim], the scores' max into *mx and their mass into *l (no rows: acc 0, -inf,
   0). s [len] and row [head_dim] are scratch. Row own (-1: none) takes own_k and own_v, not the
   caches' (ATTENTION_O_PRENORM's row at pos). */
AMK__FN void amk__ref_attn_head(const amk__refop *o, const float *q, int64_t g, int64_t r0, int64_t len, int64_t own,
                                const float *own_k, const float *own_v, float *s, float *row, float *acc, float *mx,
                                float *l) {
    const int64_t hd = o->P.head_dim, nkv = o->P.n_kv_heads;
    int64_t j, e;
    *mx = -INFINITY;
    *l = 0.0f;
    for (j = 0; j < len; j++) {
        if (r0 + j == own) memcpy(row, own_k, (size_t)hd * sizeof(float));
        else amk__refvm_load_row(o->x[1], o->in[1]->dtype, ((r0 + j) * nkv + g) * hd, hd, row);
        s[j] = o->P.scale * amk__refvm_dot(q, row, hd);
        if (s[j] > *mx) *mx = s[j];
    }
    for (e = 0; e < hd; e++) acc[e] = 0.0f;
    for (j = 0; j < len; j++) {
        float pj = expf(s[j] - *mx);
        *l += pj;
        if (r0 + j == own) memcpy(row, own_v, (size_t)hd * sizeof(float));
        else amk__refvm_load_row(o->x[2], o->in[2]->dtype, ((r0 + j) * nkv + g) * hd, hd, row);
        for (e = 0; e < hd; e++) acc[e] += pj * row[e];
    }
}

/* Head h uses kv head h / (n_heads/n_kv_heads); cache row j of kv head g starts at element
   (j*n_kv_heads + g)*head_dim. ATTENTION_DECODE/_O with sliding_window W > 0: only rows above
   pos - W (Mistral's window). ATTENTION_TILE over rank-4 caches [B, S, ...]: query b [n_heads,
   head_dim] of q [B, ...] over cache b, into row b of out (the spec's batched decode). Partial layout per head: [acc(head_dim) | m | l]. ATTENTION_O: the
   heads' results a (F32, not cast) then out[h'] += sum_j a[j] * W_oT[j, h'] over its rows j
   [m_off, m_off+M_tile) (+ resid[h']), added to what out holds. ATTENTION_O_PRENORM: q and the
   key and value of row pos of each of its kv heads from qkv and x's rms (amk__ref_prenorm), that
   row from them, never from the caches; with the caches as outputs 2 and 3 the task then stores
   them there. */
AMK__FN amk_result amk__ref_attention(const amk__refop *o, amk_diag *d) {
    int64_t hd = o->P.head_dim, nh = o->P.n_heads, nkv = o->P.n_kv_heads, rep = nh / nkv, g0 = o->P.n_off;
    int64_t start = o->P.kv_start, len = o->P.kv_len, h0 = 0, h1 = nh, bh, j, e, pos = 0;
    /* a batch of B queries over B caches [B, S, n_kv_heads, head_dim] (ATTENTION_TILE only) */
    const int64_t B = amk__opshape_batch(o->in[1]), S = o->n_in[1] / (B * nkv * hd);
    int partial = ((uint32_t)o->P.flags & AMK_ATTN_FLAG_PARTIAL) != 0;
    const int prenorm = o->t->op == AMK_OP_ATTENTION_O_PRENORM, fo = o->t->op == AMK_OP_ATTENTION_O || prenorm;
    const int writer = prenorm && o->t->n_outputs == 3;
    float *q, *row, *acc, *s, *a = NULL, *kv = NULL; /* kv: PRENORM's [2, N_tile, head_dim] keys, values at pos */
    float inv = 0.0f;
    if (o->t->op == AMK_OP_ATTENTION_DECODE || fo) { /* its kv heads, and rows up to the position */
        pos = amk__load_i64(o->x[3], o->in[3]->dtype, 0);
        if (pos < 0)
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "%s: position %lld is negative", amk_op_name(o->t->op), (long long)pos);
        if (writer && pos >= o->n_in[1] / (nkv * hd))
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "%s: position %lld is outside the cache (%lld rows)", amk_op_name(o->t->op),
                                   (long long)pos, (long long)(o->n_in[1] / (nkv * hd)));
        if (pos + 1 - start < len) len = pos + 1 - start < 0 ? 0 : pos + 1 - start;
        if (o->P.sliding_window > 0 && pos + 1 - o->P.sliding_window > start) { /* rows (pos - window, pos] */
            const int64_t skip = pos + 1 - o->P.sliding_window - start;
            start += skip;
            len = len > skip ? len - skip : 0;
        }
        h0 = g0 * rep;
        h1 = (g0 + o->P.N_tile) * rep;
    }
    q = amk__refvm_floats(hd); row = amk__refvm_floats(hd); acc = amk__refvm_floats(hd);
    s = amk__refvm_floats(len ? len : 1); /* [len] scores */
    if (fo) a = amk__refvm_floats((h1 - h0) * hd); /* [heads h0..h1, head_dim] */
    if (prenorm) kv = amk__refvm_floats(2 * o->P.N_tile * hd);
    if (!q || !row || !acc || !s || (fo && !a) || (prenorm && !kv)) {
        amk__free(q); amk__free(row); amk__free(acc); amk__free(s); amk__free(a); amk__free(kv);
        return amk__refvm_oom(o, d);
    }
    if (prenorm) {
        inv = amk__ref_rms_inv(o, 5, 0, o->n_in[5]);
        for (e = 0; e < o->P.N_tile; e++) {
            amk__ref_prenorm(o, inv, pos, (nh + g0 + e) * hd, 1, o->in[1]->dtype, kv + e * hd);
            amk__ref_prenorm(o, inv, pos, (nh + nkv + g0 + e) * hd, 0, o->in[2]->dtype, kv + (o->P.N_tile + e) * hd);
        }
    }
    for (bh = 0; bh < B * (h1 - h0); bh++) { /* batch bt (a rank-4 cache), head h */
        int64_t bt = bh / (h1 - h0), h = h0 + bh % (h1 - h0), g = h / rep, r0 = bt * S + start;
        float m, l;
        if (prenorm) amk__ref_prenorm(o, inv, pos, h * hd, 1, AMK_DTYPE_F32, q);
        else amk__refvm_load_row(o->x[0], o->in[0]->dtype, (bt * nh + h) * hd, hd, q);
        /* (PRENORM: one batch, r0 = start; its row pos from kv) */
        amk__ref_attn_head(o, q, g, r0, len, prenorm ? pos : -1, prenorm ? kv + (g - g0) * hd : NULL,
                           prenorm ? kv + (o->P.N_tile + g - g0) * hd : NULL, s, row, acc, &m, &l);
        if (partial) { /* an empty window leaves acc 0, m -inf, l 0; into set part */
            const int64_t ph = (int64_t)o->P.part * nh + h;
            for (e = 0; e < hd; e++) AMK__OUT(o, ph * (hd + 2) + e, acc[e]);
            AMK__OUT(o, ph * (hd + 2) + hd, m);
            AMK__OUT(o, ph * (hd + 2) + hd + 1, l);
        } else if (fo) {
            for (e = 0; e < hd; e++) a[(h - h0) * hd + e] = len ? acc[e] / l : 0.0f;
        } else {
            for (e = 0; e < hd; e++) AMK__OUT(o, (bt * nh + h) * hd + e, len ? acc[e] / l : 0.0f);
        }
    }
    if (fo) { /* out[h'] += a[m_off..] . W_oT[m_off.., h'] (+ resid[h']) */
        const int64_t H = o->in[4]->shape[1], m0 = o->P.m_off, mt = o->P.M_tile;
        const int r = 5 + prenorm; /* the resid's input */
        int64_t c;
        for (c = 0; c < H; c++) {
            float sum = 0.0f;
            for (j = 0; j < mt; j++) sum += a[m0 + j - h0 * hd] * AMK__IN(o, 4, (m0 + j) * H + c);
            if (o->ni > r) sum += AMK__IN(o, r, c);
            AMK__OUT(o, c, amk__load_f32(o->y, AMK_DTYPE_F32, c) + sum);
        }
    }
    if (writer) /* row pos of its kv heads; the values already hold the caches' rounding */
        for (j = 0; j < 2; j++)
            for (e = 0; e < o->P.N_tile * hd; e++)
                amk__store_f32(o->ys[1 + j], o->outs[1 + j]->dtype, (pos * nkv + g0) * hd + e, kv[(j * o->P.N_tile) * hd + e]);
    amk__free(q); amk__free(row); amk__free(acc); amk__free(s); amk__free(a); amk__free(kv);
    return AMK_OK;
}

/* ATTENTION_PREFILL: query row m of [m_off, m_off+M_tile), at position p = pos + m, attends the
   cache rows [max(0, p + 1 - sliding_window), p] (every row up to p without a window) for the query
   heads of kv heads [n_off, n_off+N_tile): ATTENTION_DECODE's arithmetic at position p. */
AMK__FN amk_result amk__ref_attention_prefill(const amk__refop *o, amk_diag *d) {
    const int64_t hd = o->P.head_dim, nh = o->P.n_heads, nkv = o->P.n_kv_heads, rep = nh / nkv;
    const int64_t rows = o->n_in[1] / (nkv * hd), pos = amk__load_i64(o->x[3], o->in[3]->dtype, 0);
    const int64_t m1 = (int64_t)o->P.m_off + o->P.M_tile, W = o->P.sliding_window;
    int64_t m, h, e;
    float *q, *row, *acc, *s;
    if (pos < 0 || pos + m1 > rows)
        return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1, "%s: positions %lld .. %lld are outside "
                               "the cache (%lld rows)", amk_op_name(o->t->op), (long long)pos, (long long)(pos + m1 - 1),
                               (long long)rows);
    q = amk__refvm_floats(hd); row = amk__refvm_floats(hd); acc = amk__refvm_floats(hd);
    s = amk__refvm_floats(pos + m1);
    if (!q || !row || !acc || !s) {
        amk__free(q); amk__free(row); amk__free(acc); amk__free(s);
        return amk__refvm_oom(o, d);
    }
    for (m = o->P.m_off; m < m1; m++) {
        const int64_t p = pos + m, lo = W > 0 && p + 1 - W > 0 ? p + 1 - W : 0, len = p + 1 - lo;
        for (h = (int64_t)o->P.n_off * rep; h < ((int64_t)o->P.n_off + o->P.N_tile) * rep; h++) {
            float mx, l;
            amk__refvm_load_row(o->x[0], o->in[0]->dtype, (m * nh + h) * hd, hd, q);
            amk__ref_attn_head(o, q, h / rep, lo, len, -1, NULL, NULL, s, row, acc, &mx, &l);
            for (e = 0; e < hd; e++) AMK__OUT(o, (m * nh + h) * hd + e, acc[e] / l);
        }
    }
    amk__free(q); amk__free(row); amk__free(acc); amk__free(s);
    return AMK_OK;
}

/* Rotate-half RoPE as HF transformers computes it in fp32, with the optional llama3 frequency
   scaling of REFERENCE.md §3.4. x is [S, n_heads, head_dim]: row r has position r / n_heads. */
AMK__FN amk_result amk__ref_rope(const amk__refop *o, amk_diag *d) {
    int64_t hd = o->P.head_dim, half = hd / 2, S = o->n_in[1], rows = o->n_in[0] / hd;
    int64_t per_pos = rows / S, r, i;
    float *inv = amk__refvm_floats(half); /* [head_dim/2] inverse frequencies */
    if (!inv) return amk__refvm_oom(o, d);
    for (i = 0; i < S; i++) {
        int64_t pos = amk__load_i64(o->x[1], o->in[1]->dtype, i);
        if (pos < 0) {
            amk__free(inv);
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "ROPE: position %lld at index %lld is negative", (long long)pos,
                                   (long long)i);
        }
    }
    for (i = 0; i < half; i++) inv[i] = amk__rope_inv_freq(&o->P, i);
    for (r = 0; r < rows; r++) {
        float pos = (float)amk__load_i64(o->x[1], o->in[1]->dtype, r / per_pos);
        for (i = 0; i < half; i++) {
            float angle = pos * inv[i], c = cosf(angle), sn = sinf(angle);
            float x1 = AMK__IN(o, 0, r * hd + i), x2 = AMK__IN(o, 0, r * hd + i + half);
            AMK__OUT(o, r * hd + i, x1 * c - x2 * sn);
            AMK__OUT(o, r * hd + i + half, x2 * c + x1 * sn);
        }
    }
    amk__free(inv);
    return AMK_OK;
}

/* The argmax rule of SAMPLE_ARGMAX and the ARGMAX_* pair: candidate (v, i) replaces (*bv, *bi)
   when it is a candidate (i >= 0, v not NaN) and there is none yet, or v is larger, or equal
   with a smaller index (the first maximum wins). */
AMK__FN void amk__argmax_merge(float *bv, int64_t *bi, float v, int64_t i) {
    if (i < 0 || v != v) return;
    if (*bi < 0 || v > *bv || (v == *bv && i < *bi)) { *bv = v; *bi = i; }
}

/* The first index j in [j0, j1) of the max of x[base + j] (dtype t), the max in *bv; -1 when none
   is a candidate (all NaN). */
AMK__FN int64_t amk__ref_best(const void *x, int t, int64_t base, int64_t j0, int64_t j1, float *bv) {
    int64_t best = -1, j;
    *bv = 0.0f;
    for (j = j0; j < j1; j++) amk__argmax_merge(bv, &best, amk__load_f32(x, t, base + j), j);
    return best;
}

/* The pair of columns [j0, j1) of row base of x (dtype t): at y[at], y[at + 1] (F32) the max and
   its first index as F32 (NaN, -1 when none is a candidate): ARGMAX_PARTIAL's pair, and
   RMSNORM_GEMV_ARGMAX's. */
AMK__FN void amk__ref_pair(const void *x, int t, int64_t base, int64_t j0, int64_t j1, void *y, int64_t at) {
    float bv;
    const int64_t best = amk__ref_best(x, t, base, j0, j1, &bv);
    amk__store_f32(y, AMK_DTYPE_F32, at, best < 0 ? NAN : bv);
    amk__store_f32(y, AMK_DTYPE_F32, at + 1, (float)best);
}

/* RMSNORM_GEMV and RMSNORM_SWIGLU: each row m of x is normalised in fp32 (rmsnorm as RMSNORM, no
   cast in between), then the tile's rows n: y = xn . W[n] (SWIGLU: silu(xn . Wg[n]) * (xn . Wu[n])).
   RMSNORM_GEMV's variants: _ROPE rotates pairs (n, n+1), n even, by pos[m] *
   inv_freq((n % head_dim)/2) (the interleaved pair order, like GGUF's Q/K rows); _KV stores y at
   pos[m] * N + n of a cache of rows of N, instead of out[m, n]; _ROPE_KV both. Positions are
   checked before anything is written. With M_tile, the rows [m_off, m_off + M_tile) of x only, and
   a KV form's positions must be pos[0] + m. _ARGMAX: then, per row m, the max of the tile's values as
   out holds them (rounded to its dtype) and its first index, as ARGMAX_PARTIAL's pair `part` of
   the second output.
   RMSNORM_MLP: the SWIGLU values y (not cast) times the tile's rows of W_downT (of a block-format
   W_down [H, N], each row's K-slice: the same products), plus resid when given, added to what
   out[m] holds; RMSNORM_MLP_FOLD also y times its rows of W_cat plus its
   share of the raw x times W_cat's base rows (AMK_MLP_FLAG_FOLD), added to what qkv[m] holds. */
AMK__FN amk_result amk__ref_norm_gemv(const amk__refop *o, amk_diag *d) {
    const int op = amk_op_device(o->t->op, NULL); /* P.flags has the variant's form bits */
    const int mlp = op == AMK_OP_RMSNORM_MLP, swiglu = op == AMK_OP_RMSNORM_SWIGLU || mlp;
    /* flags: the bits that take the positions; argmax: the pairs into the second output */
    const uint32_t flags = swiglu ? 0u : (uint32_t)o->P.flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW);
    const int argmax = !swiglu && ((uint32_t)o->P.flags & AMK_GEMV_FLAG_ARGMAX) != 0;
    const int64_t K = o->P.K, M = o->n_in[0] / K, N = o->in[2]->shape[0], n0 = o->P.n_off, nt = o->P.N_tile;
    const int64_t last = (flags & AMK_GEMV_FLAG_KV_ROW) ? N : o->n_out / M;
    const int64_t m_begin = o->P.M_tile > 0 ? o->P.m_off : 0, m_end = o->P.M_tile > 0 ? m_begin + o->P.M_tile : M;
    const int fold = mlp && ((uint32_t)o->P.flags & AMK_MLP_FLAG_FOLD) != 0;
    const int64_t F = fold ? o->in[5]->shape[1] : 0;
    const int64_t b0 = n0 * K / N, b1 = (n0 + nt) * K / N; /* FOLD: the tile's base rows of W_cat, N + [b0, b1) */
    int64_t m, n, k;
    const int down_blk = mlp && amk_dtype_is_block(o->in[4]->dtype); /* W_down [H, N] by K-slices */
    float *xs = amk__refvm_floats(K), *w = amk__refvm_floats(K > F ? (K > nt ? K : nt) : (F > nt ? F : nt));
    float *y = amk__refvm_floats(nt);
    float *qs = fold ? amk__refvm_floats(F) : NULL; /* [F] FOLD: the tile's share of a row of qkv */
    amk_result r = AMK_OK;
    if (!xs || !w || !y || (fold && !qs)) { r = amk__refvm_oom(o, d); goto done; }
    for (m = m_begin; m < m_end && flags; m++) {
        int64_t pos = amk__load_i64(o->x[3], o->in[3]->dtype, m);
        if (pos < 0 || ((flags & AMK_GEMV_FLAG_KV_ROW) && pos >= o->n_out / N)) {
            r = amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1, "%s: position %lld of row %lld "
                                "is outside %s", amk_op_name(o->t->op), (long long)pos, (long long)m,
                                (flags & AMK_GEMV_FLAG_KV_ROW) ? "the cache" : "[0, inf)");
            goto done;
        }
        if ((flags & AMK_GEMV_FLAG_KV_ROW) && o->P.M_tile > 0 && pos != amk__load_i64(o->x[3], o->in[3]->dtype, 0) + m) {
            r = amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1, "%s: position %lld of row %lld is not "
                                "pos[0] + %lld (a tile of rows, M_tile, takes consecutive positions)",
                                amk_op_name(o->t->op), (long long)pos, (long long)m, (long long)m);
            goto done;
        }
    }
    for (m = m_begin; m < m_end; m++) {
        const float inv = amk__ref_rms_inv(o, 0, m * K, K);
        int64_t pos = flags ? amk__load_i64(o->x[3], o->in[3]->dtype, m) : 0;
        /* x_q8: x * norm_w rounded, its dots then scaled by inv (the device's order) */
        const float sc = o->P.x_q8 ? inv : 1.0f;
        for (k = 0; k < K; k++) xs[k] = o->P.x_q8 ? AMK__IN(o, 0, m * K + k) * AMK__IN(o, 1, k)
                                                  : AMK__IN(o, 0, m * K + k) * inv * AMK__IN(o, 1, k);
        if (o->P.x_q8) amk__ref_x_q8(xs, K);
        for (n = 0; n < nt; n++) {
            amk__refvm_load_row(o->x[2], o->in[2]->dtype, (n0 + n) * K, K, w);
            y[n] = amk__refvm_dot(xs, w, K) * sc;
            if (swiglu) {
                amk__refvm_load_row(o->x[3], o->in[3]->dtype, (n0 + n) * K, K, w);
                y[n] = y[n] / (1.0f + expf(-y[n])) * (amk__refvm_dot(xs, w, K) * sc);
            }
        }
        if (flags & AMK_GEMV_FLAG_ROPE) amk__ref_rope_pairs(&o->P, pos, n0, y, nt);
        if (mlp) { /* out[m, h] += sum_n y[n] * W_downT[n0 + n, h] (or W_down[h, n0 + n]) (+ resid[m, h]) */
            const int64_t H = o->in[4]->shape[down_blk ? 0 : 1];
            int64_t h, f;
            for (h = 0; h < H; h++) {
                float acc = 0.0f;
                if (down_blk) {
                    amk__refvm_load_row(o->x[4], o->in[4]->dtype, h * N + n0, nt, w);
                    for (n = 0; n < nt; n++) acc += w[n] * y[n];
                } else {
                    for (n = 0; n < nt; n++) acc += AMK__IN(o, 4, (n0 + n) * H + h) * y[n];
                }
                if (o->ni == 6 + fold) acc += AMK__IN(o, 5 + fold, m * H + h);
                AMK__OUT(o, m * H + h, amk__load_f32(o->y, AMK_DTYPE_F32, m * H + h) + acc);
            }
            if (fold) { /* qkv[m, f] += sum_n y[n] W_cat[n0 + n, f] + sum_k x[m, k] W_cat[N + k, f], k in [b0, b1) */
                for (f = 0; f < F; f++) qs[f] = 0.0f;
                for (k = 0; k < nt + b1 - b0; k++) {
                    const float c = k < nt ? y[k] : AMK__IN(o, 0, m * K + b0 + k - nt);
                    amk__refvm_load_row(o->x[5], o->in[5]->dtype, (k < nt ? n0 + k : N + b0 + k - nt) * F, F, w);
                    for (f = 0; f < F; f++) qs[f] += c * w[f];
                }
                for (f = 0; f < F; f++)
                    amk__store_f32(o->ys[1], AMK_DTYPE_F32, m * F + f, amk__load_f32(o->ys[1], AMK_DTYPE_F32, m * F + f) + qs[f]);
            }
            continue;
        }
        for (n = 0; n < nt; n++)
            AMK__OUT(o, (flags & AMK_GEMV_FLAG_KV_ROW) ? pos * N + n0 + n : m * last + n0 + n, y[n]);
        if (argmax) /* over the values as stored */
            amk__ref_pair(o->y, o->out->dtype, m * last, n0, n0 + nt, o->ys[1],
                          m * amk__opshape_last(o->outs[1]) + 2 * o->P.part);
    }
done:
    amk__free(xs); amk__free(w); amk__free(y); amk__free(qs);
    return r;
}

/* Logical element e of a quantized q: (q - zero) * scale, group e / group. */
AMK__FN amk_result amk__ref_dequant(const amk__refop *o, amk_diag *d) {
    AMK__UNUSED(d);
    int64_t e, group = o->P.group;
    for (e = 0; e < o->n_out; e++) {
        float q = o->in[0]->dtype == AMK_DTYPE_U8 ? amk__refvm_nibble(o->x[0], e) : AMK__IN(o, 0, e);
        float z = o->ni == 3 ? AMK__IN(o, 2, e / group) : 0.0f;
        AMK__OUT(o, e, (q - z) * AMK__IN(o, 1, e / group));
    }
    return AMK_OK;
}

AMK__FN amk_result amk__ref_softmax(const amk__refop *o, amk_diag *d) {
    const amk_buffer *b = o->in[0];
    int dim = o->P.dim < 0 ? o->P.dim + b->rank : o->P.dim, k;
    int64_t outer = 1, len = b->shape[dim], inner = 1, a, i, j;
    float *e; /* [len] exponentials of one slice */
    if (o->n_out == 0) return AMK_OK; /* why: with a zero dim, the other dims' product may not fit */
    for (k = 0; k < dim; k++) outer *= b->shape[k];
    for (k = dim + 1; k < b->rank; k++) inner *= b->shape[k];
    e = amk__refvm_floats(len);
    if (!e) return amk__refvm_oom(o, d);
    for (a = 0; a < outer; a++)
        for (i = 0; i < inner; i++) {
            int64_t base = a * len * inner + i;
            float m = -INFINITY, sum = 0.0f;
            for (j = 0; j < len; j++) {
                e[j] = AMK__IN(o, 0, base + j * inner);
                if (e[j] > m) m = e[j];
            }
            for (j = 0; j < len; j++) { e[j] = expf(e[j] - m); sum += e[j]; }
            for (j = 0; j < len; j++) AMK__OUT(o, base + j * inner, e[j] / sum);
        }
    amk__free(e);
    return AMK_OK;
}

/* A partial's index as stored (an F32): -1 (no candidate) unless it is in [0, 2^31); truncated. */
AMK__FN int64_t amk__argmax_index(float f) {
    return f >= 0.0f && f < 2147483648.0f ? (int64_t)f : -1;
}

/* SAMPLE_ARGMAX per row: the first index of the maximum; NaN never wins; an all-NaN row gives 0.
   ARGMAX_PARTIAL per row: (max, its first index) over columns [n_off, n_off + N_tile) into the
   pair `part` of out (NaN, -1 when all are NaN). ARGMAX_COMBINE per row: the index of the best
   pair by the same rule (0 when none is a candidate): the argmax of the columns the partials
   cover, as SAMPLE_ARGMAX over them. */
AMK__FN amk_result amk__ref_argmax(const amk__refop *o, amk_diag *d) {
    AMK__UNUSED(d);
    const int64_t L = amk__opshape_last(o->in[0]), rows = o->n_in[0] / L;
    const int partial = o->t->op == AMK_OP_ARGMAX_PARTIAL, combine = o->t->op == AMK_OP_ARGMAX_COMBINE;
    const int64_t j0 = partial ? o->P.n_off : 0, j1 = partial ? j0 + o->P.N_tile : combine ? L / 2 : L;
    int64_t r, j;
    for (r = 0; r < rows; r++) {
        int64_t best = -1;
        float bv = 0.0f;
        if (partial) { /* out is F32 (the op check) */
            amk__ref_pair(o->x[0], o->in[0]->dtype, r * L, j0, j1, o->y, r * amk__opshape_last(o->out) + 2 * o->P.part);
            continue;
        }
        if (combine)
            for (j = j0; j < j1; j++)
                amk__argmax_merge(&bv, &best, AMK__IN(o, 0, r * L + 2 * j), amk__argmax_index(AMK__IN(o, 0, r * L + 2 * j + 1)));
        else
            best = amk__ref_best(o->x[0], o->in[0]->dtype, r * L, j0, j1, &bv);
        amk__store_i64(o->y, o->out->dtype, r, best < 0 ? 0 : best);
    }
    return AMK_OK;
}

/* Heads [h0, h1) (N_tile >= 1: [n_off, n_off+N_tile), else all n_heads = out's / head_dim), over
   the partials p = s*ni + i (set s of input i; AMK_ATTN_FLAG_PARTIAL's stacked sets) in that order:
   m = max m_p; w_p = l_p > 0 ? exp(m_p - m) : 0; out = sum acc_p*w_p / sum l_p*w_p (0 if empty). */
AMK__FN amk_result amk__ref_attention_combine(const amk__refop *o, amk_diag *d) {
    const int64_t hd = o->P.head_dim, nh = o->n_out / hd, k = o->n_in[0] / (nh * (hd + 2));
    const int64_t h0 = o->P.N_tile > 0 ? o->P.n_off : 0, h1 = o->P.N_tile > 0 ? h0 + o->P.N_tile : nh;
    const int64_t np = k * o->ni;
    float *w = amk__refvm_floats(np);
    int64_t h, e, p;
    if (!w) return amk__refvm_oom(o, d);
#define AMK__COMBINE_IN(p, j) AMK__IN(o, (int)((p) % o->ni), ((p) / o->ni * nh + h) * (hd + 2) + (j))
    for (h = h0; h < h1; h++) {
        float m = -INFINITY, l = 0.0f;
        for (p = 0; p < np; p++) {
            float mp = AMK__COMBINE_IN(p, hd);
            if (mp > m) m = mp;
        }
        for (p = 0; p < np; p++) {
            float mp = AMK__COMBINE_IN(p, hd), lp = AMK__COMBINE_IN(p, hd + 1);
            w[p] = lp > 0.0f ? expf(mp - m) : 0.0f;
            l += lp * w[p];
        }
        for (e = 0; e < hd; e++) {
            float num = 0.0f;
            for (p = 0; p < np; p++) num += AMK__COMBINE_IN(p, e) * w[p];
            AMK__OUT(o, h * hd + e, l > 0.0f ? num / l : 0.0f);
        }
    }
#undef AMK__COMBINE_IN
    amk__free(w);
    return AMK_OK;
}

/* The reference functions of the ops whose numerics fit in a few lines. */
AMK__FN amk_result amk__ref_nop(const amk__refop *o, amk_diag *d) {
    AMK__UNUSED(o);
    AMK__UNUSED(d);
    return AMK_OK;
}
AMK__FN amk_result amk__ref_copy(const amk__refop *o, amk_diag *d) {
    int64_t e0, e1;
    AMK__UNUSED(d);
    amk__ref_rows(o, &e0, &e1);
    amk__refvm_cast(o->y, o->out->dtype, e0, o->x[0], o->in[0]->dtype, e0, e1 - e0);
    return AMK_OK;
}
AMK__FN amk_result amk__ref_fill(const amk__refop *o, amk_diag *d) {
    int64_t e;
    AMK__UNUSED(d);
    for (e = 0; e < o->n_out; e++) AMK__OUT(o, e, o->P.scale);
    return AMK_OK;
}
AMK__FN amk_result amk__ref_silu_mul(const amk__refop *o, amk_diag *d) {
    int64_t i, e0, e1;
    AMK__UNUSED(d);
    amk__ref_rows(o, &e0, &e1);
    for (i = e0; i < e1; i++) {
        float g = AMK__IN(o, 0, i);
        AMK__OUT(o, i, g / (1.0f + expf(-g)) * AMK__IN(o, 1, i));
    }
    return AMK_OK;
}
AMK__FN amk_result amk__ref_gelu(const amk__refop *o, amk_diag *d) {
    int64_t i;
    AMK__UNUSED(d);
    for (i = 0; i < o->n_out; i++) {
        float v = AMK__IN(o, 0, i);
        AMK__OUT(o, i, 0.5f * v * (1.0f + erff(v / sqrtf(2.0f))));
    }
    return AMK_OK;
}
AMK__FN amk_result amk__ref_add(const amk__refop *o, amk_diag *d) {
    int64_t i, e0, e1;
    AMK__UNUSED(d);
    amk__ref_rows(o, &e0, &e1);
    for (i = e0; i < e1; i++) AMK__OUT(o, i, AMK__IN(o, 0, i) + AMK__IN(o, 1, i));
    return AMK_OK;
}
AMK__FN amk_result amk__ref_mul(const amk__refop *o, amk_diag *d) {
    int64_t i;
    AMK__UNUSED(d);
    for (i = 0; i < o->n_out; i++) {
        float b = o->ni == 1 ? o->P.scale : AMK__IN(o, 1, o->n_in[1] == 1 ? 0 : i);
        AMK__OUT(o, i, AMK__IN(o, 0, i) * b);
    }
    return AMK_OK;
}
AMK__FN amk_result amk__ref_allreduce_shard(const amk__refop *o, amk_diag *d) {
    int64_t i, e0, e1;
    int p;
    AMK__UNUSED(d);
    amk__ref_rows(o, &e0, &e1);
    for (i = e0; i < e1; i++) {
        float s = AMK__IN(o, 0, i);
        for (p = 1; p < o->ni; p++) s += AMK__IN(o, p, i);
        AMK__OUT(o, i, s);
    }
    return AMK_OK;
}
/* The output is the cache itself; only row pos changes. */
/* Row pos of the cache = new; a rank-4 cache [B, max_seq, ...]: row pos of each of the B. */
AMK__FN amk_result amk__ref_kv_append(const amk__refop *o, amk_diag *d) {
    const int64_t B = amk__opshape_batch(o->out), R = o->n_in[0] / B, S = o->n_out / (R * B);
    int64_t b;
    AMK__UNUSED(d);
    for (b = 0; b < B; b++)
        amk__refvm_cast(o->y, o->out->dtype, (b * S + o->P.pos) * R, o->x[0], o->in[0]->dtype, b * R, R);
    return AMK_OK;
}

/* BIAS_ADD: out[m, n] = x[m, n] + b[n]. */
AMK__FN amk_result amk__ref_bias_add(const amk__refop *o, amk_diag *d) {
    const int64_t N = o->n_in[1];
    int64_t i;
    AMK__UNUSED(d);
    for (i = 0; i < o->n_out; i++) AMK__OUT(o, i, AMK__IN(o, 0, i) + AMK__IN(o, 1, i % N));
    return AMK_OK;
}

/* The numerics of one task whose check already passed: its reference function in the op table. */
AMK__FN amk_result amk__refvm_exec(const amk__refop *o, amk_diag *d) {
    switch (o->t->op) {
#define AMK__OP_REF_CASE(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) case code: return rf(o, d);
        AMK_OPS(AMK__OP_REF_CASE)
#undef AMK__OP_REF_CASE
    default:
        return amk__refvm_fail(d, AMK_ERR_UNSUPPORTED, NULL, o->task_index, -1,
                               "opcode %d has no reference implementation", o->t->op);
    }
}

/* amk__op_check as a result: AMK_ERR_REJECTED with the check id and message in d. */
AMK__FN amk_result amk__refvm_check(const amk_program *p, const amk_task *t, int task_index,
                                    amk_diag *d) {
    amk_check which;
    char msg[256];
    if (amk__op_check(p, t, &which, msg, sizeof msg)) return AMK_OK;
    return amk__refvm_fail(d, AMK_ERR_REJECTED, amk_check_id(which), task_index, -1, "%s", msg);
}

/* Fills o for a task that passed amk__refvm_check, from the storage pointers of its buffers. */
AMK__FN amk_result amk__refvm_fill(const amk_program *p, const amk_task *t, int task_index,
                                   void *const *ins, void *const *outs, amk__refop *o, amk_diag *d) {
    int i;
    memset(o, 0, sizeof *o);
    o->t = t;
    o->task_index = task_index;
    o->ni = t->n_inputs;
    amk_task_marshal_params(t, &o->P);
    for (i = 0; i < t->n_inputs + t->n_outputs; i++) {
        int is_in = i < t->n_inputs;
        const amk_buffer *b = &p->buffers[is_in ? t->inputs[i] : t->outputs[i - t->n_inputs]];
        void *ptr = is_in ? (ins ? ins[i] : NULL) : (outs ? outs[i - t->n_inputs] : NULL);
        if (!ptr && amk__buffer_nbytes(b) > 0)
            return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, task_index, -1,
                                   "%s: no storage given for buffer %d '%s'", amk_op_name(t->op),
                                   b->id, b->name ? b->name : "?");
        if (is_in) {
            o->in[i] = b; o->x[i] = ptr; o->n_in[i] = amk_buffer_numel(b);
        } else {
            o->outs[i - t->n_inputs] = b;
            o->ys[i - t->n_inputs] = ptr;
            if (i == t->n_inputs) { o->out = b; o->y = ptr; o->n_out = amk_buffer_numel(b); }
        }
    }
    return AMK_OK;
}

AMK_API amk_result amk_ref_exec(const amk_program *p, const amk_task *t, void *const *ins,
                                void *const *outs, amk_diag *d) {
    amk__refop o;
    amk_result r;
    int ti;
    if (!p || !t) return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1, "amk_ref_exec: NULL program or task");
    ti = amk__refvm_task_index(p, t);
    r = amk__refvm_check(p, t, ti, d);
    if (r == AMK_OK) r = amk__refvm_fill(p, t, ti, ins, outs, &o, d);
    return r != AMK_OK ? r : amk__refvm_exec(&o, d);
}

/* ---- the VM: storage for every buffer and the counter-driven walk ---------------------------- */

struct amk_refvm {
    const amk_program *p;
    int n_buffers;
    void **data;     /* [n_buffers] where each buffer lives: its own block, its page, or bound */
    void **own;      /* [n_buffers] the VM's own block of a buffer (NULL when paged or bound) */
    size_t *nbytes;  /* [n_buffers] */
    void **page;     /* [n_pages] storage shared by the buffers of a page */
    int n_pages;
};

AMK_API void amk_refvm_free(amk_refvm *vm) {
    int i;
    if (!vm) return;
    for (i = 0; vm->own && i < vm->n_buffers; i++) amk__free(vm->own[i]);
    for (i = 0; vm->page && i < vm->n_pages; i++) amk__free(vm->page[i]);
    amk__free(vm->data);
    amk__free(vm->own);
    amk__free(vm->nbytes);
    amk__free(vm->page);
    amk__free(vm);
}

/* Allocates zeroed storage for every buffer; paged buffers share their page's block, sized
   max(page nbytes, largest buffer on it). */
AMK__FN amk_result amk__refvm_alloc(amk_refvm *vm, amk_diag *d) {
    const amk_program *p = vm->p;
    int i, paged = p->has_pages && p->buffer_page;
    int64_t *need = NULL; /* [n_pages] largest buffer on each page, -1 for an unused page */
    size_t nb = (size_t)(p->n_buffers ? p->n_buffers : 1);
    vm->n_buffers = p->n_buffers;
    vm->data = (void **)amk__calloc(nb, sizeof(void *));
    vm->own = (void **)amk__calloc(nb, sizeof(void *));
    vm->nbytes = (size_t *)amk__calloc(nb, sizeof(size_t));
    if (!vm->data || !vm->own || !vm->nbytes) goto oom;
    if (paged) {
        if (p->n_pages < 0 || (p->n_pages > 0 && !p->pages))
            return amk__refvm_fail(d, AMK_ERR_REJECTED, "PAGE_REF", -1, -1, "the page table is malformed");
        vm->n_pages = p->n_pages;
        vm->page = (void **)amk__calloc((size_t)(p->n_pages ? p->n_pages : 1), sizeof(void *));
        need = (int64_t *)amk__calloc((size_t)(p->n_pages ? p->n_pages : 1), sizeof(int64_t));
        if (!vm->page || !need) goto oom;
        for (i = 0; i < p->n_pages; i++) need[i] = -1;
    }
    for (i = 0; i < p->n_buffers; i++) {
        int64_t n = amk__buffer_nbytes(&p->buffers[i]);
        int pg = paged ? p->buffer_page[i] : -1;
        if (n < 0 || (uint64_t)n > (uint64_t)SIZE_MAX) {
            amk__free(need);
            amk__refvm_fail(d, AMK_ERR_REJECTED, "BUFFER_SHAPE", -1, -1,
                            "buffer %d '%s' has a bad shape or too many bytes", i,
                            p->buffers[i].name ? p->buffers[i].name : "?");
            if (d) d->buffer = i;
            return AMK_ERR_REJECTED;
        }
        vm->nbytes[i] = (size_t)n;
        if (pg >= p->n_pages) {
            amk__free(need);
            amk__refvm_fail(d, AMK_ERR_REJECTED, "PAGE_REF", -1, -1,
                            "buffer %d is mapped to page %d of %d", i, pg, p->n_pages);
            if (d) d->buffer = i;
            return AMK_ERR_REJECTED;
        }
        if (pg >= 0) {
            if (n > need[pg]) need[pg] = n;
        } else if (!(vm->data[i] = vm->own[i] = amk__calloc(1, (size_t)n))) {
            goto oom;
        }
    }
    for (i = 0; paged && i < p->n_pages; i++) {
        int64_t n = p->pages[i].nbytes > need[i] ? p->pages[i].nbytes : need[i];
        if (need[i] < 0) continue; /* no buffer lives there */
        if ((uint64_t)n > (uint64_t)SIZE_MAX || !(vm->page[i] = amk__calloc(1, (size_t)n))) goto oom;
    }
    for (i = 0; paged && i < p->n_buffers; i++)
        if (p->buffer_page[i] >= 0) vm->data[i] = vm->page[p->buffer_page[i]];
    amk__free(need);
    return AMK_OK;
oom:
    amk__free(need);
    return amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, -1, -1, "out of memory for buffer storage");
}

/* amk_refvm_create for a program p the caller validated and has not changed since (amk_llm: the
   step amk_program_lower validated last). */
AMK__FN amk_result amk__refvm_create_validated(const amk_program *p, amk_refvm **out, amk_diag *d) {
    amk_refvm *vm;
    amk_result r;
    *out = NULL;
    vm = (amk_refvm *)amk__calloc(1, sizeof(amk_refvm));
    if (!vm) return amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, -1, -1, "out of memory");
    vm->p = p;
    r = amk__refvm_alloc(vm, d);
    if (r != AMK_OK) { amk_refvm_free(vm); return r; }
    *out = vm;
    return AMK_OK;
}

AMK_API amk_result amk_refvm_create(const amk_program *p, amk_refvm **out, amk_diag *d) {
    amk_report rep;
    amk_result r;
    int i;
    if (out) *out = NULL;
    if (!p || !out) return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1, "amk_refvm_create: NULL argument");
    if (p->build_error != AMK_OK)
        return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1,
                               "the program is incomplete: a builder call failed (%s)",
                               amk_result_str(p->build_error));
    memset(&rep, 0, sizeof rep);
    r = amk_program_validate(p, &rep);
    if (r == AMK_ERR_REJECTED) {
        for (i = 0; i < rep.n_items && !rep.items[i].is_error; i++) {}
        if (i < rep.n_items) {
            const amk_issue *is = &rep.items[i];
            amk__refvm_fail(d, r, amk_check_id(is->check), is->task, is->counter, "%s", is->message);
            if (d) d->buffer = is->buffer;
        } else {
            amk__refvm_fail(d, r, NULL, -1, -1, "the program was rejected by validation");
        }
        amk_report_free(&rep);
        return r;
    }
    amk_report_free(&rep);
    if (r != AMK_OK) return amk__refvm_fail(d, r, NULL, -1, -1, "validation failed: %s", amk_result_str(r));
    return amk__refvm_create_validated(p, out, d);
}

AMK_API void *amk_refvm_buffer(amk_refvm *vm, int buffer_id, size_t *nbytes) {
    if (nbytes) *nbytes = 0;
    if (!vm || buffer_id < 0 || buffer_id >= vm->n_buffers) return NULL;
    if (nbytes) *nbytes = vm->nbytes[buffer_id];
    return vm->data[buffer_id];
}

/* amk_refvm_bind (writable 0: a read-only kind) and amk_refvm_bind_storage (1: any kind). */
AMK__FN amk_result amk__refvm_bind(amk_refvm *vm, int buffer_id, void *data, size_t nbytes, int writable) {
    int kind;
    if (!vm || buffer_id < 0 || buffer_id >= vm->n_buffers || (!data && nbytes)) return AMK_ERR_INVALID_ARG;
    kind = vm->p->buffers[buffer_id].kind;
    if (!writable && kind != AMK_KIND_WEIGHT && kind != AMK_KIND_CONST && kind != AMK_KIND_IO_INPUT)
        return AMK_ERR_INVALID_ARG;
    if (vm->p->has_pages && vm->p->buffer_page && vm->p->buffer_page[buffer_id] >= 0)
        return AMK_ERR_INVALID_ARG; /* its storage is its page's */
    if (nbytes != vm->nbytes[buffer_id]) return AMK_ERR_MISMATCH;
    if (!data) return AMK_OK; /* an empty buffer keeps its own (empty) block */
    amk__free(vm->own[buffer_id]); /* why: a bound buffer needs no copy; calloc'd pages were never touched */
    vm->own[buffer_id] = NULL;
    vm->data[buffer_id] = data;
    return AMK_OK;
}

AMK_API amk_result amk_refvm_bind(amk_refvm *vm, int buffer_id, const void *data, size_t nbytes) {
    /* why the cast: the VM never writes read-only kinds (amk_refvm_run refuses a task that would) */
    return amk__refvm_bind(vm, buffer_id, (void *)(uintptr_t)data, nbytes, 0);
}

AMK_API amk_result amk_refvm_bind_storage(amk_refvm *vm, int buffer_id, void *data, size_t nbytes) {
    return amk__refvm_bind(vm, buffer_id, data, nbytes, 1);
}

/* A wait of one task, in the per-counter lists the walk releases as counters rise. */
typedef struct amk__refvm_waiter { int counter; int task; int64_t threshold; } amk__refvm_waiter;

AMK__FN int amk__refvm_waiter_cmp(const void *a, const void *b) {
    const amk__refvm_waiter *x = (const amk__refvm_waiter *)a, *y = (const amk__refvm_waiter *)b;
    if (x->counter != y->counter) return x->counter < y->counter ? -1 : 1;
    if (x->threshold != y->threshold) return x->threshold < y->threshold ? -1 : 1;
    return x->task < y->task ? -1 : x->task > y->task;
}

/* Min-heap of task indices (the ready tasks when firing in list order). */
AMK__FN void amk__refvm_heap_push(int *h, int *n, int v) {
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = v;
}
AMK__FN int amk__refvm_heap_pop(int *h, int *n) {
    int top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = v;
    return top;
}

/* The message of a stuck walk: up to 8 unfired tasks, each with its first unmet wait. */
AMK__FN amk_result amk__refvm_stuck(const amk_program *p, const int64_t *counters, const int *pending,
                                    int n_fired, amk_diag *d) {
    amk__sb sb;
    int i, j, shown = 0, first = -1, first_counter = -1;
    amk_result r;
    memset(&sb, 0, sizeof sb);
    amk__sb_printf(&sb, "no task is ready but %d of %d never fired:", p->n_tasks - n_fired, p->n_tasks);
    for (i = 0; i < p->n_tasks && shown < 8; i++) {
        const amk_task *t = &p->tasks[i];
        if (pending[i] <= 0) continue; /* fired (or ready, which cannot happen when stuck) */
        for (j = 0; j < t->n_waits; j++) {
            const amk_wait *w = &t->waits[j];
            if (counters[w->counter] >= w->threshold) continue;
            amk__sb_printf(&sb, " task %d waits counter %d >= %lld (at %lld);", i, w->counter,
                           (long long)w->threshold, (long long)counters[w->counter]);
            if (first < 0) { first = i; first_counter = w->counter; }
            break;
        }
        shown++;
    }
    r = amk__refvm_fail(d, AMK_ERR_STUCK, NULL, first, first_counter, "%s",
                        sb.oom || !sb.p ? "no task is ready but some never fired" : sb.p);
    amk__sb_free(&sb);
    return r;
}

AMK_API amk_result amk_refvm_run(amk_refvm *vm, const amk_refvm_opts *opts, amk_diag *d) {
    const amk_program *p;
    int64_t *counters = NULL;       /* [n_counters] */
    int *pending = NULL;            /* [n_tasks] unmet waits; -1 once fired */
    int *off = NULL, *next = NULL;  /* [n_counters+1] waiter offsets, [n_counters] next to release */
    int *ready = NULL, n_ready = 0; /* a min-heap (list order) or a bag (seeded random order) */
    amk__refvm_waiter *ws = NULL;   /* [n_waits] sorted by (counter, threshold) */
    int i, j, n_ws = 0, n_fired = 0, nc, nt;
    uint64_t seed = opts ? opts->seed : 0;
    amk__rng rng;
    amk_result r = AMK_OK;
    if (!vm) return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1, "amk_refvm_run: NULL VM");
    p = vm->p;
    if (p->n_buffers != vm->n_buffers)
        return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1,
                               "the program has %d buffers, the VM was created for %d", p->n_buffers,
                               vm->n_buffers);
    nc = p->n_counters;
    nt = p->n_tasks;
    for (i = 0; i < nt; i++) { /* why: validate checks ids; the walk indexes by them, so be sure */
        const amk_task *t = &p->tasks[i];
        if (t->out_counter < 0 || t->out_counter >= nc)
            return amk__refvm_fail(d, AMK_ERR_REJECTED, "REF_COUNTER", i, t->out_counter,
                                   "task %d signals counter %d of %d", i, t->out_counter, nc);
        if (t->n_waits < 0 || (t->n_waits && !t->waits) || t->n_waits > INT_MAX - n_ws)
            return amk__refvm_fail(d, AMK_ERR_REJECTED, "ABI_CAP", i, -1, "task %d has a bad wait list", i);
        for (j = 0; j < t->n_waits; j++)
            if (t->waits[j].counter < 0 || t->waits[j].counter >= nc)
                return amk__refvm_fail(d, AMK_ERR_REJECTED, "REF_COUNTER", i, t->waits[j].counter,
                                       "task %d waits on counter %d of %d", i, t->waits[j].counter, nc);
        n_ws += t->n_waits;
    }
    counters = (int64_t *)amk__calloc((size_t)nc + 1, sizeof(int64_t));
    off = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    next = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    pending = (int *)amk__calloc((size_t)nt + 1, sizeof(int));
    ready = (int *)amk__calloc((size_t)nt + 1, sizeof(int));
    ws = (amk__refvm_waiter *)amk__calloc((size_t)n_ws + 1, sizeof(amk__refvm_waiter));
    if (!counters || !off || !next || !pending || !ready || !ws) {
        r = amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, -1, -1, "out of memory for the walk");
        goto done;
    }
    n_ws = 0;
    for (i = 0; i < nt; i++)
        for (j = 0; j < p->tasks[i].n_waits; j++) {
            const amk_wait *w = &p->tasks[i].waits[j];
            if (w->threshold <= 0) continue; /* met before anything fires */
            ws[n_ws].counter = w->counter;
            ws[n_ws].task = i;
            ws[n_ws].threshold = w->threshold;
            n_ws++;
            pending[i]++;
        }
    qsort(ws, (size_t)n_ws, sizeof *ws, amk__refvm_waiter_cmp);
    for (i = 0; i < n_ws; i++) off[ws[i].counter + 1]++;
    for (i = 0; i < nc; i++) { off[i + 1] += off[i]; next[i] = off[i]; }
    if (seed) amk__rng_seed(&rng, seed);
    for (i = 0; i < nt; i++)
        if (pending[i] == 0) {
            if (seed) ready[n_ready++] = i;
            else amk__refvm_heap_push(ready, &n_ready, i);
        }
    while (n_ready > 0) {
        const amk_task *t;
        void *ins[AMK_MAX_INPUTS], *outs[AMK_MAX_OUTPUTS];
        amk__refop o;
        int c;
        if (seed) { /* a uniformly random ready task: swap it out of the bag */
            int k = (int)amk__rng_below(&rng, (uint64_t)n_ready);
            i = ready[k];
            ready[k] = ready[--n_ready];
        } else {
            i = amk__refvm_heap_pop(ready, &n_ready);
        }
        t = &p->tasks[i];
        /* params may have changed since create: check the task again before touching memory */
        r = amk__refvm_check(p, t, i, d);
        if (r != AMK_OK) goto done;
        for (j = 0; j < t->n_inputs; j++) ins[j] = vm->data[t->inputs[j]];
        for (j = 0; j < t->n_outputs; j++) {
            const amk_buffer *b = &p->buffers[t->outputs[j]];
            if (b->kind == AMK_KIND_WEIGHT || b->kind == AMK_KIND_CONST || b->kind == AMK_KIND_IO_INPUT) {
                r = amk__refvm_fail(d, AMK_ERR_REJECTED, "WRITE_READONLY", i, -1,
                                    "task %d writes read-only buffer %d '%s' (%s)", i, b->id,
                                    b->name ? b->name : "?", amk_kind_name(b->kind));
                goto done;
            }
            outs[j] = vm->data[t->outputs[j]];
        }
        r = amk__refvm_fill(p, t, i, ins, outs, &o, d);
        if (r == AMK_OK) r = amk__refvm_exec(&o, d);
        if (r != AMK_OK) goto done;
        pending[i] = -1;
        n_fired++;
        c = t->out_counter;
        counters[c]++;
        while (next[c] < off[c + 1] && ws[next[c]].threshold <= counters[c]) {
            int w = ws[next[c]++].task;
            if (--pending[w] == 0) {
                if (seed) ready[n_ready++] = w;
                else amk__refvm_heap_push(ready, &n_ready, w);
            }
        }
    }
    if (n_fired < nt) r = amk__refvm_stuck(p, counters, pending, n_fired, d);
done:
    amk__free(counters);
    amk__free(off);
    amk__free(next);
    amk__free(pending);
    amk__free(ready);
    amk__free(ws);
    return r;
}

#undef AMK__IN
#undef AMK__OUT

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */
