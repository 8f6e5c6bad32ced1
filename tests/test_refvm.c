/* Reference VM tests: every opcode against independent double-precision math, the op checks
   (one rejected case per rule, asserting the exact check id), and the counter-driven walk
   (list order, seeded random order, STUCK, pages, binding, 20k tasks).

   Tolerances: fp32 outputs within rel * mag, where mag is the sum of the absolute terms of the
   computation and rel is 1e-5*sqrt(K) for reductions of K terms (1e-6 for elementwise ops);
   F16/BF16 outputs get one rounding step of the output dtype on top. */
#include "../amk.h"
#include "amk_test.h"
#include <stdint.h>
#include <time.h>

/* ---- random numbers (splitmix64; the library's generator is internal) ------------------------ */
static amk_t_rng rng = {0x1234567u};
static uint64_t rnd_u64(void) { return amk_t_rng_next(&rng); }
static double rnd_in(double lo, double hi) {
    return lo + (hi - lo) * ((double)(rnd_u64() >> 11) / 9007199254740992.0);
}

/* ---- dtype encode/decode, written here (decoding F16/BF16 independently of the library) ------ */
static double f16_dec(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}
static double bf16_dec(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* One rounding step (relative) of a dtype; 0 for F32 (fp32 rounding is in the rel term). */
static double dt_step(int dt) {
    switch (dt) {
    case AMK_DTYPE_F16: return ldexp(1, -10);
    case AMK_DTYPE_BF16: return ldexp(1, -7);
    case AMK_DTYPE_F8E4M3: return ldexp(1, -3);
    case AMK_DTYPE_F8E5M2: return ldexp(1, -2);
    default: return 0;
    }
}

/* ---- a one-task test program: buffers with host storage and the exact values they hold ------- */
#define TC_MAXB 16
typedef struct tbuf {
    int dt;
    int64_t n;
    size_t nbytes;
    unsigned char *data;
    double *v; /* [n] the exact value of each element as stored */
} tbuf;
typedef struct tc {
    amk_program *p;
    tbuf b[TC_MAXB];
    int nb, task;
} tc;

static void tc_init(tc *c) {
    memset(c, 0, sizeof *c);
    c->p = amk_program_create();
    c->task = -1;
}
static void tc_free(tc *c) {
    int i;
    for (i = 0; i < c->nb; i++) { free(c->b[i].data); free(c->b[i].v); }
    amk_program_free(c->p);
}
static int tc_buf_shape(tc *c, int kind, int dt, int rank, const int64_t *shape) {
    char name[16];
    int id, i;
    tbuf *b;
    snprintf(name, sizeof name, "b%d", c->nb);
    id = amk_program_add_buffer(c->p, name, (amk_buffer_kind)kind, (amk_dtype)dt, rank, shape,
                                AMK_SPACE_HBM, kind == AMK_KIND_WEIGHT ? name : NULL);
    b = &c->b[id];
    b->dt = dt;
    b->n = 1;
    for (i = 0; i < rank; i++) b->n *= shape[i];
    b->nbytes = (size_t)amk_dtype_nbytes(dt, b->n);
    b->data = (unsigned char *)calloc(b->nbytes + 1, 1);
    b->v = (double *)calloc((size_t)b->n + 1, sizeof(double));
    c->nb++;
    return id;
}
static int tc_buf(tc *c, int kind, int dt, int rank, int64_t d0, int64_t d1, int64_t d2) {
    int64_t shape[3];
    shape[0] = d0; shape[1] = d1; shape[2] = d2;
    return tc_buf_shape(c, kind, dt, rank, shape);
}
/* An F32 buffer [d0, d1, d2, d3] (a batch of KV caches). */
static int tc_buf4(tc *c, int kind, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t shape[4];
    shape[0] = d0; shape[1] = d1; shape[2] = d2; shape[3] = d3;
    return tc_buf_shape(c, kind, AMK_DTYPE_F32, 4, shape);
}
/* Stores x (rounded to the dtype) as element i and returns the exact stored value. */
static double tset(tbuf *b, int64_t i, double x) {
    unsigned char *p = b->data;
    double r = 0;
    switch (b->dt) {
    case AMK_DTYPE_F32: { float f = (float)x; memcpy(p + 4 * i, &f, 4); r = f; break; }
    case AMK_DTYPE_F16: { uint16_t h = amk_f32_to_f16((float)x); memcpy(p + 2 * i, &h, 2); r = f16_dec(h); break; }
    case AMK_DTYPE_BF16: { uint16_t h = amk_f32_to_bf16((float)x); memcpy(p + 2 * i, &h, 2); r = bf16_dec(h); break; }
    case AMK_DTYPE_F8E4M3: p[i] = amk_f32_to_f8e4m3((float)x); r = amk_f8e4m3_to_f32(p[i]); break;
    case AMK_DTYPE_F8E5M2: p[i] = amk_f32_to_f8e5m2((float)x); r = amk_f8e5m2_to_f32(p[i]); break;
    case AMK_DTYPE_I32: { int32_t v = (int32_t)llround(x); memcpy(p + 4 * i, &v, 4); r = v; break; }
    case AMK_DTYPE_I8: { int v = (int)llround(x); v = v < -128 ? -128 : v > 127 ? 127 : v; p[i] = (unsigned char)(signed char)v; r = v; break; }
    case AMK_DTYPE_U8: { int v = (int)llround(x); v = v < 0 ? 0 : v > 255 ? 255 : v; p[i] = (unsigned char)v; r = v; break; }
    case AMK_DTYPE_I4: {
        int v = (int)llround(x);
        v = v < -8 ? -8 : v > 7 ? 7 : v;
        if (i & 1) p[i / 2] = (unsigned char)((p[i / 2] & 0x0F) | ((v + 8) << 4));
        else p[i / 2] = (unsigned char)((p[i / 2] & 0xF0) | (v + 8));
        r = v;
        break;
    }
    default: break;
    }
    b->v[i] = r;
    return r;
}
static void tfill(tbuf *b, double lo, double hi) {
    int64_t i;
    for (i = 0; i < b->n; i++) tset(b, i, rnd_in(lo, hi));
}
/* The value of element i as stored. */
static double tget(const tbuf *b, int64_t i) {
    const unsigned char *p = b->data;
    switch (b->dt) {
    case AMK_DTYPE_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case AMK_DTYPE_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return f16_dec(h); }
    case AMK_DTYPE_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return bf16_dec(h); }
    case AMK_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case AMK_DTYPE_I8: return (signed char)p[i];
    case AMK_DTYPE_U8: return p[i];
    default: return NAN;
    }
}
static void tpoison(tbuf *b) { memset(b->data, 0xFF, b->nbytes); }
/* Element i still holds the poison bytes (byte-sized dtypes only). */
static int tpoisoned(const tbuf *b, int64_t i) {
    size_t w = (size_t)amk_dtype_bits(b->dt) / 8, k;
    for (k = 0; k < w; k++)
        if (b->data[(size_t)i * w + k] != 0xFF) return 0;
    return 1;
}

static void tc_taskn(tc *c, int op, const int *ins, int n_in, const int *outs, int n_out) {
    c->task = amk_program_add_task(c->p, op, ins, n_in, outs, n_out, amk_program_add_counter(c->p, ""), "t");
}
static void tc_task2(tc *c, int op, const int *ins, int n_in, int out, int out2) { /* out2 < 0: none */
    int outs[2];
    outs[0] = out;
    outs[1] = out2;
    tc_taskn(c, op, ins, n_in, outs, out2 < 0 ? 1 : 2);
}
static void tc_task(tc *c, int op, const int *ins, int n_in, int out) { tc_task2(c, op, ins, n_in, out, -1); }
static void tc_int(tc *c, const char *k, int64_t v) { amk_task_set_int(c->p, c->task, k, v); }
static void tc_real(tc *c, const char *k, double v) { amk_task_set_real(c->p, c->task, k, v); }
static amk_result tc_exec(tc *c, amk_diag *d) {
    const amk_task *t = &c->p->tasks[c->task];
    void *ins[AMK_MAX_INPUTS], *outs[AMK_MAX_OUTPUTS];
    int i;
    for (i = 0; i < t->n_inputs; i++) ins[i] = c->b[t->inputs[i]].data;
    for (i = 0; i < t->n_outputs; i++) outs[i] = c->b[t->outputs[i]].data;
    amk_diag_clear(d);
    return amk_ref_exec(c->p, t, ins, outs, d);
}

/* got within rel*mag (fp32 computation) plus one rounding step of the output dtype of want. */
static int near_out(int dt, double got, double want, double mag, double rel) {
    double tol = rel * mag + fabs(want) * dt_step(dt) + (dt == AMK_DTYPE_F16 ? ldexp(1, -24) : 0);
    if (want != want) return got != got;
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol;
}
/* Compares out elements [0, n) with want/mag; prints the first mismatch; returns mismatches. */
static int cmp_out(const char *label, const tbuf *b, const double *want, const double *mag,
                   double rel, int64_t n) {
    int64_t i;
    int bad = 0;
    for (i = 0; i < n; i++) {
        double got = tget(b, i);
        if (near_out(b->dt, got, want[i], mag[i], rel)) continue;
        if (!bad)
            fprintf(stderr, "  %s: element %lld got %.9g want %.9g (mag %.3g, %s)\n", label,
                    (long long)i, got, want[i], mag[i], amk_dtype_name(b->dt));
        bad++;
    }
    return bad;
}

/* ==== op checks: one rejected case per rule, exact check id ================================== */

/* A one-task program from text: buffers "DT[d0,d1,..]" (inputs, then "|", then outputs; "=k" is
   input k again), params "key=value" (a value with '.', 'e' or 'n' is real). */
static amk_program *build_case(int op, const char *bufs, const char *params) {
    amk_program *p = amk_program_create();
    int ins[16], outs[4], n_in = 0, n_out = 0, side = 0, cnt;
    const char *s = bufs;
    char tok[64];
    int n;
    while (sscanf(s, "%63s%n", tok, &n) == 1) {
        s += n;
        if (strcmp(tok, "|") == 0) { side = 1; continue; }
        if (tok[0] == '=') {
            outs[n_out++] = ins[atoi(tok + 1)];
        } else {
            char *br = strchr(tok, '['), *q, name[16];
            int64_t shape[4];
            int rank = 0, id;
            *br = 0;
            q = br + 1;
            while (*q && *q != ']') {
                shape[rank++] = strtoll(q, &q, 10);
                if (*q == ',') q++;
            }
            snprintf(name, sizeof name, "b%d", p->n_buffers);
            id = amk_program_add_buffer(p, name, side ? AMK_KIND_ACTIVATION : AMK_KIND_IO_INPUT,
                                        (amk_dtype)amk_dtype_from_name(tok), rank, shape, AMK_SPACE_HBM,
                                        NULL);
            if (side) outs[n_out++] = id;
            else ins[n_in++] = id;
        }
    }
    cnt = amk_program_add_counter(p, "");
    amk_program_add_task(p, op, ins, n_in, outs, n_out, cnt, "t");
    s = params;
    while (sscanf(s, "%63s%n", tok, &n) == 1) {
        char *eq = strchr(tok, '=');
        s += n;
        *eq = 0;
        if (strpbrk(eq + 1, ".en")) amk_task_set_real(p, 0, tok, strtod(eq + 1, NULL));
        else amk_task_set_int(p, 0, tok, strtoll(eq + 1, NULL, 10));
    }
    return p;
}

typedef struct check_case { int op; const char *bufs, *params, *want; } check_case;

static const check_case CHECK_CASES[] = {
    /* preconditions, re-checked so a direct amk_ref_exec call is safe */
    {19, "F32[4] | F32[4]", "", "OP_UNKNOWN"},
    {AMK_OP_COPY, "F32[4] F32[4] | F32[4]", "", "OP_ARITY"},
    {AMK_OP_COPY, "F32[-1] | F32[1]", "", "BUFFER_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=8.0 N_tile=3 n_off=3", "PARAM_TYPE"},
    {AMK_OP_COPY, "F32[4] | F16[4]", "", "ok"},
    {AMK_OP_COPY, "F32[4] | F32[5]", "", "OP_SHAPE"},
    {AMK_OP_GELU, "F32[4] | F32[3]", "", "OP_SHAPE"},
    {AMK_OP_EMBED, "I32[3] F32[10,4] | F32[3,4]", "hidden=4", "ok"},
    {AMK_OP_EMBED, "U8[3] BF16[10,4] | F32[3,4]", "hidden=4", "ok"},
    {AMK_OP_EMBED, "BOOL[3] F32[10,4] | F32[3,4]", "hidden=4", "OP_DTYPE"},
    {AMK_OP_EMBED, "I4[4] F32[10,4] | F32[4,4]", "hidden=4", "OP_DTYPE"},
    {AMK_OP_EMBED, "I32[3] F32[40] | F32[3,4]", "hidden=4", "OP_SHAPE"},
    {AMK_OP_EMBED, "I32[1] F32[1,16] | F32[4,4]", "hidden=4", "ok"}, /* a row of the table is numel/V */
    {AMK_OP_EMBED, "I32[2] F32[2,3,4] | F32[2,3,4]", "hidden=4", "ok"},
    {AMK_OP_EMBED, "I32[3] F32[0,4] | F32[3,4]", "hidden=4", "OP_SHAPE"},
    {AMK_OP_EMBED, "I32[3] F32[10,4] | F32[3,5]", "hidden=5", "OP_SHAPE"},
    {AMK_OP_EMBED, "I32[3] F32[10,4] | F32[2,4]", "hidden=4", "OP_SHAPE"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[4] | F32[2,4]", "hidden=4 eps=1e-5", "ok"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[4] | F32[2,4]", "hidden=0 eps=1e-5", "PARAM_VALUE"},
    {AMK_OP_RMSNORM, "F32[10] F32[4] | F32[10]", "hidden=4 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[3] | F32[2,4]", "hidden=4 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[4] | F32[2,5]", "hidden=4 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[4] | F32[2,4]", "hidden=4 eps=-1.0", "PARAM_VALUE"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[4] | F32[2,4]", "hidden=4 eps=nan", "PARAM_VALUE"},
    {AMK_OP_RMSNORM, "F32[2,4] F32[4] | F32[2,4]", "hidden=4 eps=1e300", "PARAM_VALUE"},
    {AMK_OP_LAYERNORM, "F32[2,4] F32[4] F32[4] | F32[2,4]", "hidden=4 eps=1e-5", "ok"},
    {AMK_OP_LAYERNORM, "F32[2,4] F32[4] F32[3] | F32[2,4]", "hidden=4 eps=1e-5", "OP_SHAPE"},
    /* weights of k rows of hidden, k dividing x's rows: row r takes weight row r % k */
    {AMK_OP_RMSNORM, "F32[2,3,4] F32[3,4] | F32[2,3,4]", "hidden=4 eps=1e-5", "ok"},
    {AMK_OP_RMSNORM, "F32[2,3,4] F32[4,4] | F32[2,3,4]", "hidden=4 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_LAYERNORM, "F32[4,4] F32[2,4] F32[4,4] | F32[4,4]", "hidden=4 eps=1e-5", "ok"},
    {AMK_OP_LAYERNORM, "F32[4,4] F32[8,4] F32[4] | F32[4,4]", "hidden=4 eps=1e-5", "OP_SHAPE"},
    /* GEMV / GEMM, float weights */
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=8 N_tile=3 n_off=3", "ok"},
    /* GGUF block formats: a weight's rows where tiles read weights, nothing else */
    {AMK_OP_GEMV_TILE, "F32[2,256] Q4_K[6,256] | F32[2,6]", "K=256 N_tile=3 n_off=3", "ok"},
    {AMK_OP_GEMV_TILE, "F32[1,64] Q8_0[4,64] F32[4] | F32[1,4]", "K=64 N_tile=4 n_off=0", "ok"},
    {AMK_OP_GEMV_TILE, "F32[1,64] Q4_0[4,64] F32[4] | F32[1,4]", "K=64 N_tile=4 n_off=0 qdtype=7 group=32", "OP_DTYPE"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,256] F32[256] Q6_K[4,256] | F32[1,4]", "eps=1e-5 K=256 N_tile=4 n_off=0", "ok"},
    {AMK_OP_RMSNORM_SWIGLU, "F32[1,256] F32[256] Q5_K[4,256] Q3_K[4,256] | F32[1,4]", "eps=1e-5 K=256 N_tile=4 n_off=0", "ok"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,256] Q6_K[256] F32[4,256] | F32[1,4]", "eps=1e-5 K=256 N_tile=4 n_off=0", "OP_DTYPE"},
    /* x_q8: 0 or 1, and 1 only on a tile with a block-format matrix */
    {AMK_OP_GEMV_TILE, "F32[1,64] Q8_0[4,64] | F32[1,4]", "K=64 N_tile=4 n_off=0 x_q8=1", "ok"},
    {AMK_OP_GEMV_TILE, "F32[1,64] Q8_0[4,64] | F32[1,4]", "K=64 N_tile=4 n_off=0 x_q8=2", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[1,64] BF16[4,64] | F32[1,4]", "K=64 N_tile=4 n_off=0 x_q8=1", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_SWIGLU, "F32[1,256] F32[256] F32[4,256] Q4_K[4,256] | F32[1,4]", "eps=1e-5 K=256 N_tile=4 n_off=0 x_q8=1", "ok"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,256] F32[256] BF16[4,256] | F32[1,4]", "eps=1e-5 K=256 N_tile=4 n_off=0 x_q8=1", "PARAM_VALUE"},
    /* RMSNORM_MLP's down in a block format: W_down [H, N], the tile's K-slice whole blocks */
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] F32[64,8] F32[64,8] Q8_0[8,64] | F32[1,8]", "eps=1e-5 K=8 N_tile=32 n_off=32", "ok"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] F32[64,8] F32[64,8] Q8_0[8,64] | F32[1,8]", "eps=1e-5 K=8 N_tile=16 n_off=32", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] F32[256,8] F32[256,8] Q4_K[8,256] | F32[1,8]", "eps=1e-5 K=8 N_tile=128 n_off=0", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] F32[64,8] F32[64,8] Q8_0[64,32] | F32[1,32]", "eps=1e-5 K=8 N_tile=32 n_off=0", "OP_SHAPE"},
    {AMK_OP_EMBED, "I32[1] IQ4_NL[10,64] | F32[1,64]", "hidden=64", "ok"},
    {AMK_OP_EMBED, "I32[2] Q8_0[10,32] | F32[1,48]", "hidden=48", "OP_SHAPE"},
    {AMK_OP_EMBED, "I32[1] Q8_0[320] | F32[1,1]", "hidden=1", "OP_SHAPE"}, /* rank 1: rows of one element */
    {AMK_OP_ADD, "Q8_0[32] F32[32] | F32[32]", "", "OP_DTYPE"},
    {AMK_OP_COPY, "F32[32] | Q8_0[32]", "", "OP_DTYPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] F32[6] | F32[2,6]", "K=8 N_tile=3 n_off=3", "ok"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=0 N_tile=3 n_off=3", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[2,7] F32[6,8] | F32[2,6]", "K=8 N_tile=3 n_off=3", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[48] | F32[2,6]", "K=8 N_tile=3 n_off=3", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,4] | F32[2,6]", "K=8 N_tile=3 n_off=3", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=8 N_tile=3 n_off=-1", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=8 N_tile=0 n_off=3", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=8 N_tile=3 n_off=4", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,5]", "K=8 N_tile=3 n_off=3", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[3,6]", "K=8 N_tile=3 n_off=3", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] F32[5] | F32[2,6]", "K=8 N_tile=3 n_off=3", "OP_SHAPE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 m_off=1", "ok"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=0 m_off=1", "PARAM_VALUE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 m_off=-1", "PARAM_VALUE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 m_off=3", "PARAM_VALUE"},
    /* a K range (split K): GEMM_TILE's, inside [0, K), a float W, no bias */
    {AMK_OP_GEMM_TILE, "F32[4,8] BF16[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 m_off=1 k_off=2 K_tile=6", "ok"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 k_off=3 K_tile=6", "PARAM_VALUE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 k_off=0 K_tile=0", "PARAM_VALUE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 k_off=-1 K_tile=2", "PARAM_VALUE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 k_off=2", "PARAM_VALUE"},
    {AMK_OP_GEMM_TILE, "F32[4,8] F32[6,8] F32[6] | F32[4,6]", "K=8 N_tile=6 n_off=0 M_tile=2 k_off=0 K_tile=4", "OP_SHAPE"},
    {AMK_OP_GEMM_TILE, "F32[1,64] Q8_0[4,64] | F32[1,4]", "K=64 N_tile=4 n_off=0 M_tile=1 k_off=0 K_tile=32", "OP_DTYPE"},
    {AMK_OP_GEMV_TILE, "F32[2,8] F32[6,8] | F32[2,6]", "K=8 N_tile=3 n_off=3 k_off=0 K_tile=4", "PARAM_VALUE"},
    /* GEMV, weight-only quantized */
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "ok"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I4[4,16] BF16[4,2] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=7 group=8", "ok"},
    {AMK_OP_GEMV_TILE, "F32[1,16] U8[4,8] F32[4,1] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=7", "ok"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=5 group=8", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] F32[4,2] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_ARITY"},
    {AMK_OP_GEMV_TILE, "F32[1,16] F32[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_DTYPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=7 group=8", "OP_DTYPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] U8[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=7 group=8", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,12] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=0", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=5", "PARAM_VALUE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] I8[4,2] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_DTYPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,3] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_SHAPE"},
    {AMK_OP_GEMV_TILE, "F32[1,16] I8[4,16] F32[4,2] F32[4,1] | F32[1,4]", "K=16 N_tile=4 n_off=0 qdtype=6 group=8", "OP_SHAPE"},
    /* ATTENTION_TILE: q [n_heads=4, head_dim=2], k/v [max_seq=5, n_kv_heads=2, 2] */
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "ok"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,4]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7 flags=2", "ok"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=0 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=3 kv_start=1 kv_len=3 scale=0.7", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,3] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[19] F32[19] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[6,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=3 kv_len=3 scale=0.7", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=-1 scale=0.7", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=nan", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | I32[4,4]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7 flags=2", "OP_DTYPE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | BF16[4,4]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7 flags=2", "ok"},
    /* a batch of 2 queries over caches [B, max_seq, n_kv_heads, head_dim] */
    {AMK_OP_ATTENTION_TILE, "F32[2,4,2] F32[2,5,2,2] F32[2,5,2,2] | F32[2,8]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "ok"},
    {AMK_OP_ATTENTION_TILE, "F32[2,4,2] F32[2,5,2,2] F32[2,5,2,2] | F32[2,4,4]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7 flags=2", "OP_UNSUPPORTED"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[2,5,2,2] F32[2,5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[2,4,2] F32[2,10,1,2] F32[2,10,1,2] | F32[2,8]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[2,4,2] F32[2,5,2,2] F32[2,5,2,2] | F32[2,8]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=5 scale=0.7", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7 flags=2", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] | F32[4,3]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_SHAPE"},
    {AMK_OP_ATTENTION_TILE, "F32[4,2] F32[5,2,2] F32[5,2,2] I32[1] | F32[4,2]", "head_dim=2 n_heads=4 n_kv_heads=2 kv_start=1 kv_len=3 scale=0.7", "OP_UNSUPPORTED"},
    /* ROPE */
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=10000.0", "ok"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_factor=8.0 rope_orig_ctx=8192", "ok"},
    {AMK_OP_ROPE, "F32[2,3,4] BOOL[2] | F32[2,3,4]", "head_dim=4 theta=10000.0", "OP_DTYPE"},
    {AMK_OP_ROPE, "F32[2,3,4] F32[2] | F32[2,3,4]", "head_dim=4 theta=10000.0", "ok"}, /* truncated */
    {AMK_OP_ROPE, "F32[2,3,4] I32[0] | F32[2,3,4]", "head_dim=4 theta=10000.0", "OP_SHAPE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=3 theta=10000.0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=0 theta=10000.0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,5] I32[2] | F32[2,3,5]", "head_dim=4 theta=10000.0", "OP_SHAPE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,5]", "head_dim=4 theta=10000.0", "OP_SHAPE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=0.0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_factor=8.0 rope_orig_ctx=0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_factor=8.0 rope_orig_ctx=8192 rope_low_freq_factor=4.0 rope_high_freq_factor=1.0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_factor=8.0 rope_orig_ctx=8192 rope_low_freq_factor=0.0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_type=1 rope_factor=2.0", "ok"}, /* linear */
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_type=1", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_type=2 rope_factor=4.0 rope_orig_ctx=4096 rope_low_freq_factor=1.0 rope_high_freq_factor=32.0", "ok"}, /* yarn */
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_type=2 rope_factor=4.0 rope_orig_ctx=0", "PARAM_VALUE"},
    {AMK_OP_ROPE, "F32[2,3,4] I32[2] | F32[2,3,4]", "head_dim=4 theta=1e4 rope_type=3 rope_factor=4.0", "PARAM_VALUE"},
    /* elementwise */
    {AMK_OP_SILU_MUL, "F32[4] BF16[2,2] | F16[4]", "", "ok"},
    {AMK_OP_SILU_MUL, "F32[4] F32[5] | F32[4]", "", "OP_SHAPE"},
    {AMK_OP_ADD, "F32[4] F32[4] | F32[5]", "", "OP_SHAPE"},
    {AMK_OP_MUL, "F32[4] F32[1] | F32[4]", "", "ok"},
    {AMK_OP_MUL, "F32[4] | F32[4]", "scale=2.0", "ok"},
    {AMK_OP_MUL, "F32[4] F32[2] | F32[4]", "", "OP_SHAPE"},
    {AMK_OP_MUL, "F32[4] | F32[3]", "", "OP_SHAPE"},
    {AMK_OP_BIAS_ADD, "F32[3,4] BF16[4] | F16[3,4]", "", "ok"},
    {AMK_OP_BIAS_ADD, "F32[12] F32[4] | F32[12]", "", "ok"},
    {AMK_OP_BIAS_ADD, "F32[3,4] F32[5] | F32[3,4]", "", "OP_SHAPE"},
    {AMK_OP_BIAS_ADD, "F32[3,4] F32[0] | F32[3,4]", "", "OP_SHAPE"},
    {AMK_OP_BIAS_ADD, "F32[3,4] F32[4] | F32[4,4]", "", "OP_SHAPE"},
    {AMK_OP_BIAS_ADD, "F32[3,4] | F32[3,4]", "", "OP_ARITY"},
    /* DEQUANT */
    {AMK_OP_DEQUANT, "I8[2,8] F32[2,2] | F32[2,8]", "qdtype=6 group=4", "ok"},
    {AMK_OP_DEQUANT, "U8[2,4] F32[2,2] F32[2,2] | BF16[2,8]", "qdtype=7 group=4", "ok"},
    {AMK_OP_DEQUANT, "I4[2,8] F32[4] | F32[16]", "qdtype=7 group=4", "ok"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[2,2] | F32[2,8]", "qdtype=5 group=4", "PARAM_VALUE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[2,2] | F32[2,8]", "group=4", "PARAM_VALUE"},
    {AMK_OP_DEQUANT, "U8[2,8] F32[2,2] | F32[2,8]", "qdtype=6 group=4", "OP_DTYPE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[2,2] | F32[2,8]", "qdtype=7 group=4", "OP_DTYPE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[2,2] | F32[2,8]", "qdtype=6 group=0", "PARAM_VALUE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[2,2] | F32[2,8]", "qdtype=6 group=3", "PARAM_VALUE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[3] | F32[2,8]", "qdtype=6 group=4", "OP_SHAPE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[4] F32[3] | F32[2,8]", "qdtype=6 group=4", "OP_SHAPE"},
    {AMK_OP_DEQUANT, "I8[2,8] F32[4] | I8[2,8]", "qdtype=6 group=4", "OP_DTYPE"},
    {AMK_OP_DEQUANT, "U8[2,4] F32[4] | F32[2,4]", "qdtype=7 group=4", "OP_SHAPE"},
    /* SOFTMAX */
    {AMK_OP_SOFTMAX, "F32[2,3,4] | F32[24]", "dim=-3", "ok"},
    {AMK_OP_SOFTMAX, "F32[2,3,4] | F32[24]", "dim=3", "PARAM_VALUE"},
    {AMK_OP_SOFTMAX, "F32[2,3,4] | F32[24]", "dim=-4", "PARAM_VALUE"},
    {AMK_OP_SOFTMAX, "F32[] | F32[]", "", "PARAM_VALUE"},
    {AMK_OP_SOFTMAX, "F32[2,3,4] | F32[23]", "", "OP_SHAPE"},
    /* ALLREDUCE_SHARD */
    {AMK_OP_ALLREDUCE_SHARD, "F32[4] BF16[4] F32[2,2] | F32[4]", "", "ok"},
    {AMK_OP_ALLREDUCE_SHARD, "F32[4] F32[5] | F32[4]", "", "OP_SHAPE"},
    {AMK_OP_ALLREDUCE_SHARD, "BF16[3,4] F32[3,4] F32[3,4] | BF16[3,4]", "m_off=1 M_tile=2", "ok"},
    {AMK_OP_ALLREDUCE_SHARD, "BF16[3,4] F32[3,4] | BF16[3,4]", "m_off=2 M_tile=2", "PARAM_VALUE"},
    /* KV_APPEND: new [n_kv_heads, head_dim], cache [max_seq, n_kv_heads, head_dim] */
    {AMK_OP_KV_APPEND, "F32[2,4] F32[6,2,4] | =1", "pos=5", "ok"},
    {AMK_OP_KV_APPEND, "F32[2,4] F32[6,2,4] | =1", "pos=6", "PARAM_VALUE"},
    {AMK_OP_KV_APPEND, "F32[2,4] F32[6,2,4] | =1", "pos=-1", "PARAM_VALUE"},
    {AMK_OP_KV_APPEND, "F32[0] F32[6,2,4] | =1", "pos=0", "OP_SHAPE"},
    {AMK_OP_KV_APPEND, "F32[2,4] F32[7,7] | =1", "pos=0", "OP_SHAPE"},
    {AMK_OP_KV_APPEND, "F32[2,4] F32[6,2,4] | F32[6,2,4]", "pos=0", "OP_SHAPE"},
    /* a batch of 2 caches [B, max_seq, n_kv_heads, head_dim]: a row for each */
    {AMK_OP_KV_APPEND, "F32[2,2,4] F32[2,6,2,4] | =1", "pos=5", "ok"},
    {AMK_OP_KV_APPEND, "F32[2,8] F32[2,6,2,4] | =1", "pos=0", "ok"},
    {AMK_OP_KV_APPEND, "F32[2,2,4] F32[2,6,2,4] | =1", "pos=6", "PARAM_VALUE"},
    {AMK_OP_KV_APPEND, "F32[2,4] F32[2,6,2,4] | =1", "pos=0", "OP_SHAPE"},
    {AMK_OP_KV_APPEND, "F32[3,8] F32[2,6,2,4] | =1", "pos=0", "OP_SHAPE"},
    /* SAMPLE_ARGMAX */
    {AMK_OP_SAMPLE_ARGMAX, "F32[2,5] | I32[2]", "", "ok"},
    {AMK_OP_SAMPLE_ARGMAX, "BF16[2,5] | U8[2]", "", "ok"},
    {AMK_OP_SAMPLE_ARGMAX, "F32[] | I32[]", "", "OP_SHAPE"},
    {AMK_OP_SAMPLE_ARGMAX, "F32[2,0] | I32[2]", "", "OP_SHAPE"},
    {AMK_OP_SAMPLE_ARGMAX, "F32[2,5] | F32[2]", "", "OP_DTYPE"},
    {AMK_OP_SAMPLE_ARGMAX, "F32[2,5] | I4[2]", "", "OP_DTYPE"},
    {AMK_OP_SAMPLE_ARGMAX, "F32[2,5] | BOOL[2]", "", "OP_DTYPE"},
    {AMK_OP_SAMPLE_ARGMAX, "F32[2,5] | I32[3]", "", "OP_SHAPE"},
    /* ARGMAX_PARTIAL: logits [rows, L] -> pair `part` of partials [rows, 2P] (F32) */
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,8]", "n_off=3 N_tile=5 part=3", "ok"},
    {AMK_OP_ARGMAX_PARTIAL, "BF16[2,10] | F32[2,2]", "n_off=0 N_tile=10 part=0", "ok"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,8]", "n_off=6 N_tile=5 part=0", "PARAM_VALUE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,8]", "n_off=-1 N_tile=5 part=0", "PARAM_VALUE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,8]", "n_off=0 N_tile=0 part=0", "PARAM_VALUE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,8]", "n_off=0 N_tile=5 part=4", "PARAM_VALUE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,8]", "n_off=0 N_tile=5 part=-1", "PARAM_VALUE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[2,7]", "n_off=0 N_tile=5 part=0", "OP_SHAPE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | F32[3,8]", "n_off=0 N_tile=5 part=0", "OP_SHAPE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,0] | F32[2,8]", "n_off=0 N_tile=1 part=0", "OP_SHAPE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[1,16777217] | F32[1,2]", "n_off=0 N_tile=1 part=0", "OP_SHAPE"},
    {AMK_OP_ARGMAX_PARTIAL, "F32[2,10] | BF16[2,8]", "n_off=0 N_tile=5 part=0", "OP_DTYPE"},
    /* ARGMAX_COMBINE: partials [rows, 2P] -> index [rows] */
    {AMK_OP_ARGMAX_COMBINE, "F32[2,8] | I32[2]", "", "ok"},
    {AMK_OP_ARGMAX_COMBINE, "F32[2,2] | U8[2]", "", "ok"},
    {AMK_OP_ARGMAX_COMBINE, "F32[2,7] | I32[2]", "", "OP_SHAPE"},
    {AMK_OP_ARGMAX_COMBINE, "F32[2,8] | I32[3]", "", "OP_SHAPE"},
    {AMK_OP_ARGMAX_COMBINE, "BF16[2,8] | I32[2]", "", "OP_DTYPE"},
    {AMK_OP_ARGMAX_COMBINE, "F32[2,8] | F32[2]", "", "OP_DTYPE"},
    /* ATTENTION_COMBINE: partials [n_heads=2, head_dim+2 = 6] */
    {AMK_OP_ATTENTION_COMBINE, "F32[2,6] F32[2,6] | F32[2,4]", "head_dim=4", "ok"},
    {AMK_OP_ATTENTION_COMBINE, "F32[2,6] F32[2,6] | F32[2,4]", "head_dim=0", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_COMBINE, "F32[2,6] I32[2,6] | F32[2,4]", "head_dim=4", "OP_DTYPE"},
    {AMK_OP_ATTENTION_COMBINE, "F32[2,6] BF16[2,6] | F32[2,4]", "head_dim=4", "ok"}, /* F32 advised */
    {AMK_OP_ATTENTION_COMBINE, "F32[2,6] F32[3,6] | F32[2,4]", "head_dim=4", "OP_SHAPE"},
    {AMK_OP_ATTENTION_COMBINE, "F32[2,5] F32[2,5] | F32[2,4]", "head_dim=4", "OP_SHAPE"},
    {AMK_OP_ATTENTION_COMBINE, "F32[2,6] F32[2,6] | F32[2,3]", "head_dim=4", "OP_SHAPE"},
    /* AMK's fused ops */
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=8", "ok"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[7] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_SHAPE"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=10", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_GEMV_ROPE, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0 flags=8", "PARAM_VALUE"},
    /* a variant is its opcode: its bits as flags are refused, on its base op and on itself */
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0 flags=1 head_dim=4", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_GEMV_ROPE, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=4 flags=1 head_dim=4", "PARAM_VALUE"},
    /* ARGMAX: the pair `part` of the second output */
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[2,8] F32[8] BF16[12,8] | F32[2,12] F32[2,6]", "eps=1e-5 K=8 N_tile=4 n_off=8 part=2", "ok"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] | F32[1,12] F32[1,6]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12] F32[1,6]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_GEMV, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0 flags=5 head_dim=4 theta=1e4", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[1,8] F32[8] BF16[12,8] | F32[1,12] BF16[1,6]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_DTYPE"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[1,8] F32[8] BF16[12,8] | F32[1,12] F32[1,5]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[2,8] F32[8] BF16[12,8] | F32[2,12] F32[1,6]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[1,8] F32[8] BF16[12,8] | F32[1,12] F32[1,6]", "eps=1e-5 K=8 N_tile=4 n_off=0 part=3", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_GEMV_ARGMAX, "F32[1,8] F32[8] BF16[12,8] | F32[1,12] =0", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_GEMV_ROPE, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=4 head_dim=4 theta=1e4", "ok"},
    {AMK_OP_RMSNORM_GEMV_ROPE, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=3 n_off=4 head_dim=4 theta=1e4", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_GEMV_ROPE, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=4 head_dim=8 theta=1e4", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_GEMV_KV, "F32[1,8] F32[8] BF16[12,8] F32[1] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=4", "OP_SHAPE"},
    {AMK_OP_RMSNORM_GEMV_KV, "F32[1,8] F32[8] BF16[12,8] I32[2] | F32[5,12]", "eps=1e-5 K=8 N_tile=4 n_off=4", "OP_SHAPE"},
    {AMK_OP_RMSNORM_GEMV_KV, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[5,12]", "eps=1e-5 K=8 N_tile=4 n_off=4", "ok"},
    {AMK_OP_RMSNORM_GEMV_KV, "F32[1,8] F32[8] BF16[12,8] I32[1] | F32[5,11]", "eps=1e-5 K=8 N_tile=4 n_off=4", "OP_SHAPE"},
    {AMK_OP_RMSNORM_SWIGLU, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=8", "ok"},
    {AMK_OP_RMSNORM_SWIGLU, "F32[1,8] F32[8] BF16[12,8] BF16[10,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_SWIGLU, "F32[1,8] F32[8] BF16[12,8] | F32[1,12]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=8", "ok"},
    {AMK_OP_RMSNORM_MLP, "F32[2,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,6] F32[2,6] | F32[2,6]", "eps=1e-5 K=8 N_tile=4 n_off=0", "ok"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_ARITY"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[8,12] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] | BF16[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_DTYPE"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] | F32[1,9]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] F32[1,7] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=0", "OP_SHAPE"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=10", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "ok"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[5] | F32[5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=2 m_off=0 M_tile=24", "ok"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=8 M_tile=5", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=20 M_tile=5", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[5,24] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | BF16[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_DTYPE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,6]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[4] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_ARITY"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 flags=2", "PARAM_VALUE"},
    /* RMSNORM_MLP with FOLD (flags 1): W_cat [N + K, F] its 6th input, qkv [M, F] F32 its 2nd output */
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[20,7] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "ok"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[2,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,6] F32[20,7] F32[2,6] | F32[2,6] F32[2,7]", "eps=1e-5 K=8 N_tile=4 n_off=0", "ok"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[20,7] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_ARITY"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_ARITY"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_ARITY"},
    {AMK_OP_RMSNORM_MLP, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] F32[1,8] F32[1,8] | F32[1,8]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_ARITY"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[20,7] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8 flags=2", "PARAM_VALUE"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[19,7] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_SHAPE"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[140] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_SHAPE"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] F8E4M3[20,7] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_DTYPE"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[20,7] | F32[1,8] BF16[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_DTYPE"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[20,7] | F32[1,8] F32[1,6]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_SHAPE"},
    {AMK_OP_RMSNORM_MLP_FOLD, "F32[1,8] F32[8] BF16[12,8] BF16[12,8] BF16[12,8] BF16[20,7] F32[1,7] | F32[1,8] F32[1,7]", "eps=1e-5 K=8 N_tile=4 n_off=8", "OP_SHAPE"},
    /* ATTENTION_O with PRENORM (flags 4): qkv [1, (6 + 2*2)*4 = 40] F32, x [1, H] its 6th input */
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5 theta=1e4", "ok"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] BF16[1,5] F32[1,5] | F32[1,5] =1 =2", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=2 m_off=0 M_tile=24 eps=1e-5 theta=1e4 rope_factor=8.0 rope_orig_ctx=64", "ok"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,24] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O_PRENORM, "BF16[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_DTYPE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_ARITY"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[5] F32[5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_ARITY"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5] =1", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_ARITY"},
    {AMK_OP_ATTENTION_O, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] | F32[1,5] =1 =2", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5", "OP_ARITY"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5] =2 =1", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5] F32[8,2,4] F32[8,2,4]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,6] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] F32[4] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5", "OP_SHAPE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 flags=2 eps=1e-5", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=-1.0", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,40] F32[8,2,4] F32[8,2,4] I32[1] BF16[24,5] F32[1,5] | F32[1,5]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=12 M_tile=5 eps=1e-5 theta=0.0", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_O_PRENORM, "F32[1,30] F32[8,2,3] F32[8,2,3] I32[1] BF16[18,5] F32[1,5] | F32[1,5]", "head_dim=3 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=9 M_tile=5 eps=1e-5", "PARAM_VALUE"},
    {AMK_OP_FILL, " | BF16[3,5]", "scale=0", "ok"},
    {AMK_OP_FILL, " | I32[3]", "scale=0", "OP_DTYPE"},
    {AMK_OP_FILL, " | F32[3]", "scale=1e300", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_DECODE, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] | F32[6,4]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1", "ok"},
    /* ATTENTION_PREFILL: q and out [M, n_heads*head_dim], its query rows and kv heads inside them */
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] BF16[8,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=1 M_tile=2", "ok"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=1 m_off=2 M_tile=2", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=2 m_off=0 M_tile=1", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,6,4] F32[8,2,4] F32[8,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1", "OP_SHAPE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] I32[1] | F32[2,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1", "OP_SHAPE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[7,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1", "OP_SHAPE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] F32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1", "OP_SHAPE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] I32[1] | I32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1", "OP_DTYPE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1 sliding_window=-1", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_PREFILL, "F32[3,24] F32[8,2,4] F32[8,2,4] I32[1] | F32[3,24]", "head_dim=4 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 m_off=0 M_tile=1 flags=2", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_DECODE, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] | F32[6,4]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=1 N_tile=2", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_DECODE, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[2] | F32[6,4]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1", "OP_SHAPE"},
    {AMK_OP_ATTENTION_DECODE, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] | F32[6,4]", "head_dim=4 kv_start=4 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1", "PARAM_VALUE"},
    {AMK_OP_ATTENTION_DECODE, "F32[6,4] F32[8,2,4] F32[8,2,4] I32[1] | BF16[6,6]", "head_dim=4 kv_start=0 kv_len=8 scale=0.5 n_heads=6 n_kv_heads=2 n_off=0 N_tile=1 flags=2", "OP_DTYPE"},
};

static void test_op_check_rules(void) {
    size_t i;
    for (i = 0; i < sizeof CHECK_CASES / sizeof CHECK_CASES[0]; i++) {
        const check_case *k = &CHECK_CASES[i];
        amk_program *p = build_case(k->op, k->bufs, k->params);
        amk_diag d;
        amk_result r;
        amk_diag_clear(&d);
        /* NULL storage: a task that passes the check then fails for want of storage */
        r = amk_ref_exec(p, &p->tasks[0], NULL, NULL, &d);
        if (strcmp(k->want, "ok") == 0) {
            CHECK_MSG(r == AMK_ERR_INVALID_ARG && d.check[0] == 0, "case %d (%s %s | %s): got %s [%s] %s",
                      (int)i, amk_op_name(k->op), k->bufs, k->params, amk_result_str(r), d.check, d.message);
        } else {
            CHECK_MSG(r == AMK_ERR_REJECTED && strcmp(d.check, k->want) == 0,
                      "case %d (%s %s | %s): want %s, got %s [%s] %s", (int)i, amk_op_name(k->op),
                      k->bufs, k->params, k->want, amk_result_str(r), d.check, d.message);
            CHECK_MSG(d.task == 0, "case %d: diag task %d", (int)i, d.task);
        }
        amk_program_free(p);
    }
}

/* The message names the numbers; a bad buffer id is REF_BUFFER. */
static void test_op_check_messages(void) {
    amk_program *p = build_case(AMK_OP_GEMV_TILE, "F32[1,8] F32[256,8] | F32[1,300]",
                                "K=8 N_tile=100 n_off=200");
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_ref_exec(p, &p->tasks[0], NULL, NULL, &d), AMK_ERR_REJECTED);
    CHECK_STR(d.check, "PARAM_VALUE");
    CHECK_STR(d.message, "GEMV_TILE: n_off+N_tile = 300 exceeds W rows 256");
    p->tasks[0].inputs[1] = 99;
    CHECK_EQ_INT(amk_ref_exec(p, &p->tasks[0], NULL, NULL, &d), AMK_ERR_REJECTED);
    CHECK_STR(d.check, "REF_BUFFER");
    CHECK(strstr(d.message, "99") != NULL);
    amk_program_free(p);
}


/* ==== numerics, one opcode at a time (amk_ref_exec) ========================================== */

static const int ACT_DTS[3] = {AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_BF16};
static const int OUT_DTS[3] = {AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F16};

static void test_copy(void) {
    static const int in_dts[] = {AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_BF16, AMK_DTYPE_F8E4M3,
                                 AMK_DTYPE_F8E5M2, AMK_DTYPE_I8, AMK_DTYPE_I32};
    static const int64_t sizes[] = {1, 7, 64};
    int a, o, s;
    for (a = 0; a < 7; a++)
        for (o = 0; o < 3; o++)
            for (s = 0; s < 3; s++) {
                tc c;
                amk_diag d;
                int x, y;
                int64_t i, n = sizes[s];
                double want[64], mag[64];
                char label[64];
                tc_init(&c);
                x = tc_buf(&c, AMK_KIND_IO_INPUT, in_dts[a], 1, n, 0, 0);
                y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[o], 1, n, 0, 0);
                tfill(&c.b[x], in_dts[a] >= AMK_DTYPE_I32 ? -100 : -4, in_dts[a] >= AMK_DTYPE_I32 ? 100 : 4);
                tc_task(&c, AMK_OP_COPY, &x, 1, y);
                tpoison(&c.b[y]);
                CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
                for (i = 0; i < n; i++) { want[i] = c.b[x].v[i]; mag[i] = fabs(want[i]); }
                snprintf(label, sizeof label, "COPY %s->%s n=%d", amk_dtype_name(in_dts[a]),
                         amk_dtype_name(OUT_DTS[o]), (int)n);
                CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 0, n) == 0, "%s", label);
                tc_free(&c);
            }
    { /* same dtype copies the bytes: I32 beyond 2^24 survives */
        tc c;
        amk_diag d;
        int x, y;
        tc_init(&c);
        x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 2, 0, 0);
        y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_I32, 1, 2, 0, 0);
        tset(&c.b[x], 0, 16777217.0);
        tset(&c.b[x], 1, -2147483647.0);
        tc_task(&c, AMK_OP_COPY, &x, 1, y);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        CHECK_EQ_INT(tget(&c.b[y], 0), 16777217);
        CHECK_EQ_INT(tget(&c.b[y], 1), -2147483647);
        tc_free(&c);
    }
}

static void test_embed(void) {
    static const int id_dts[] = {AMK_DTYPE_I32, AMK_DTYPE_I8, AMK_DTYPE_U8};
    int a, b, o;
    for (a = 0; a < 3; a++)
        for (b = 0; b < 3; b++)
            for (o = 0; o < 2; o++) {
                tc c;
                amk_diag d;
                int ids, table, y, ins[2];
                int64_t i, h, V = 10, H = 6, n = 5;
                double want[30], mag[30];
                tc_init(&c);
                ids = tc_buf(&c, AMK_KIND_IO_INPUT, id_dts[a], 1, n, 0, 0);
                table = tc_buf(&c, AMK_KIND_WEIGHT, ACT_DTS[b], 2, V, H, 0);
                y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[o], 2, n, H, 0);
                for (i = 0; i < n; i++) tset(&c.b[ids], i, (double)((i * 7 + 3) % V));
                tfill(&c.b[table], -2, 2);
                ins[0] = ids; ins[1] = table;
                tc_task(&c, AMK_OP_EMBED, ins, 2, y);
                tc_int(&c, "hidden", H);
                tpoison(&c.b[y]);
                CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
                for (i = 0; i < n; i++)
                    for (h = 0; h < H; h++) {
                        want[i * H + h] = c.b[table].v[(int64_t)c.b[ids].v[i] * H + h];
                        mag[i * H + h] = fabs(want[i * H + h]);
                    }
                CHECK(cmp_out("EMBED", &c.b[y], want, mag, 0, n * H) == 0);
                /* an id outside [0, V): RUNTIME, and nothing written */
                if (id_dts[a] != AMK_DTYPE_I8) {
                    tset(&c.b[ids], 2, (double)V);
                    tpoison(&c.b[y]);
                    CHECK_EQ_INT(tc_exec(&c, &d), AMK_ERR_RUNTIME);
                    CHECK(strstr(d.message, "10") != NULL);
                    CHECK(tpoisoned(&c.b[y], 0));
                }
                if (id_dts[a] != AMK_DTYPE_U8) {
                    tset(&c.b[ids], 2, -1.0);
                    CHECK_EQ_INT(tc_exec(&c, &d), AMK_ERR_RUNTIME);
                    CHECK(strstr(d.message, "-1") != NULL);
                }
                tc_free(&c);
            }
    { /* the reshape idiom: row 1 of a [2, 12] table viewed as out [3, 4]; `hidden` is not read */
        tc c;
        amk_diag d;
        int ids, table, y, ins[2];
        int64_t i;
        double want[12], mag[12];
        tc_init(&c);
        ids = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
        table = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 2, 12, 0);
        y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 3, 4, 0);
        tset(&c.b[ids], 0, 1.0);
        tfill(&c.b[table], -2, 2);
        ins[0] = ids; ins[1] = table;
        tc_task(&c, AMK_OP_EMBED, ins, 2, y);
        tc_int(&c, "hidden", 4);
        tpoison(&c.b[y]);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        for (i = 0; i < 12; i++) { want[i] = c.b[table].v[12 + i]; mag[i] = fabs(want[i]); }
        CHECK(cmp_out("EMBED reshape", &c.b[y], want, mag, 0, 12) == 0);
        tc_free(&c);
    }
}

/* RMSNORM and LAYERNORM over hidden in {1, 8, 33}, 1 or 3 rows, every activation/weight/output
   dtype pairing; weights (and bias) of wrows rows, row r of x taking row r % wrows. */
static void norm_case(int layer, int xdt, int wdt, int odt, int64_t H, int64_t rows, int bias, int64_t wrows) {
    tc c;
    amk_diag d;
    int x, w, b = -1, y, ins[3];
    int64_t r, h;
    double eps = 1e-5, *want, *mag;
    char label[96];
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, rows, H, 0);
    w = wrows > 1 ? tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, wrows, H, 0) : tc_buf(&c, AMK_KIND_WEIGHT, wdt, 1, H, 0, 0);
    if (bias) b = wrows > 1 ? tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, wrows, H, 0) : tc_buf(&c, AMK_KIND_WEIGHT, wdt, 1, H, 0, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, odt, 2, rows, H, 0);
    tfill(&c.b[x], -3, 3);
    tfill(&c.b[w], -2, 2);
    if (bias) tfill(&c.b[b], -1, 1);
    ins[0] = x; ins[1] = w; ins[2] = b;
    tc_task(&c, layer ? AMK_OP_LAYERNORM : AMK_OP_RMSNORM, ins, bias ? 3 : 2, y);
    tc_int(&c, "hidden", H);
    tc_real(&c, "eps", eps);
    tpoison(&c.b[y]);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    want = (double *)calloc((size_t)(rows * H), sizeof(double));
    mag = (double *)calloc((size_t)(rows * H), sizeof(double));
    for (r = 0; r < rows; r++) {
        const double *xv = c.b[x].v + r * H, *wv = c.b[w].v + r % wrows * H, *bv = bias ? c.b[b].v + r % wrows * H : NULL;
        double mean = 0, var = 0, ss = 0;
        for (h = 0; h < H; h++) { mean += xv[h]; ss += xv[h] * xv[h]; }
        mean /= (double)H;
        for (h = 0; h < H; h++) var += (xv[h] - mean) * (xv[h] - mean);
        var /= (double)H;
        for (h = 0; h < H; h++) {
            if (layer) {
                double sd = sqrt(var + eps);
                want[r * H + h] = (xv[h] - mean) / sd * wv[h] + (bias ? bv[h] : 0);
                mag[r * H + h] = (fabs(xv[h]) + fabs(mean)) / sd * fabs(wv[h]) + (bias ? fabs(bv[h]) : 0);
            } else {
                want[r * H + h] = xv[h] / sqrt(ss / (double)H + eps) * wv[h];
                mag[r * H + h] = fabs(want[r * H + h]);
            }
        }
    }
    snprintf(label, sizeof label, "%s x=%s w=%s out=%s H=%d rows=%d wrows=%d", layer ? "LAYERNORM" : "RMSNORM",
             amk_dtype_name(xdt), amk_dtype_name(wdt), amk_dtype_name(odt), (int)H, (int)rows, (int)wrows);
    CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-5 * sqrt((double)H), rows * H) == 0, "%s", label);
    free(want);
    free(mag);
    tc_free(&c);
}

static void test_norms(void) {
    static const int64_t Hs[] = {1, 8, 33};
    int a, b, o, k = 0;
    for (a = 0; a < 3; a++)
        for (b = 0; b < 2; b++)
            for (o = 0; o < 3; o++, k++) {
                norm_case(0, ACT_DTS[a], ACT_DTS[b * 2], OUT_DTS[o], Hs[k % 3], 1 + 2 * (k % 2), 0, 1);
                norm_case(1, ACT_DTS[a], ACT_DTS[b * 2], OUT_DTS[o], Hs[(k + 1) % 3], 1 + 2 * (k % 2), k % 2, 1);
            }
    norm_case(0, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 8, 6, 0, 3);
    norm_case(1, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F16, 8, 6, 1, 2);
}

/* GEMV/GEMM tile on float weights: out [M, N+2] is poisoned first; only the tile may change. */
/* gemv_case's GEMM_TILE K range (k_off, K_tile; K_tile 0: none) */
static int64_t g_k_off, g_k_tile;

static void gemv_case(int op, int xdt, int wdt, int bdt, int odt, int64_t M, int64_t K, int64_t N,
                      int n_off, int n_tile, int m_off, int m_tile) {
    tc c;
    amk_diag d;
    int x, W, bias = -1, y, ins[3];
    int64_t Nout = N + 2, m, n, k, bad = 0;
    const int64_t k0 = g_k_tile > 0 ? g_k_off : 0, k1 = g_k_tile > 0 ? g_k_off + g_k_tile : K;
    char label[160];
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, K, 0);
    W = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    if (bdt >= 0) bias = tc_buf(&c, AMK_KIND_WEIGHT, bdt, 1, N, 0, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, odt, 2, M, Nout, 0);
    tfill(&c.b[x], -1, 1);
    tfill(&c.b[W], -1, 1);
    if (bias >= 0) tfill(&c.b[bias], -1, 1);
    ins[0] = x; ins[1] = W; ins[2] = bias;
    tc_task(&c, op, ins, bias >= 0 ? 3 : 2, y);
    tc_int(&c, "K", K);
    tc_int(&c, "N_tile", n_tile);
    tc_int(&c, "n_off", n_off);
    if (op == AMK_OP_GEMM_TILE) { tc_int(&c, "M_tile", m_tile); tc_int(&c, "m_off", m_off); }
    else { m_off = 0; m_tile = (int)M; }
    if (g_k_tile > 0) { tc_int(&c, "k_off", g_k_off); tc_int(&c, "K_tile", g_k_tile); }
    tpoison(&c.b[y]);
    snprintf(label, sizeof label, "%s x=%s W=%s bias=%s out=%s M=%d K=%d [%d,%d) N=%d tile=[%d,+%d) rows=[%d,+%d)",
             amk_op_name(op), amk_dtype_name(xdt), amk_dtype_name(wdt), bdt >= 0 ? amk_dtype_name(bdt) : "-",
             amk_dtype_name(odt), (int)M, (int)K, (int)k0, (int)k1, (int)N, n_off, n_tile, m_off, m_tile);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    for (m = 0; m < M; m++)
        for (n = 0; n < Nout; n++) {
            int in_tile = n >= n_off && n < n_off + n_tile && m >= m_off && m < m_off + m_tile;
            if (!in_tile) {
                if (!tpoisoned(&c.b[y], m * Nout + n)) bad++;
            } else {
                double want = 0, mag = 0;
                for (k = k0; k < k1; k++) {
                    want += c.b[x].v[m * K + k] * c.b[W].v[n * K + k];
                    mag += fabs(c.b[x].v[m * K + k] * c.b[W].v[n * K + k]);
                }
                if (bias >= 0) { want += c.b[bias].v[n]; mag += fabs(c.b[bias].v[n]); }
                if (!near_out(odt, tget(&c.b[y], m * Nout + n), want, mag, 1e-5 * sqrt((double)K))) {
                    if (!bad) fprintf(stderr, "  %s: [%d,%d] got %.9g want %.9g\n", label, (int)m, (int)n,
                                      tget(&c.b[y], m * Nout + n), want);
                    bad++;
                }
            }
        }
    CHECK_MSG(bad == 0, "%s: %d bad elements", label, (int)bad);
    tc_free(&c);
}

static void test_gemv_float(void) {
    static const int xdts[] = {AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_BF16, AMK_DTYPE_F8E4M3, AMK_DTYPE_F8E5M2};
    /* M, K, N, n_off, N_tile */
    static const int shapes[5][5] = {{1, 1, 5, 0, 5}, {1, 7, 5, 1, 2}, {3, 64, 16, 13, 3}, {2, 96, 16, 4, 8}, {1, 576, 8, 0, 8}};
    int a, w, o, s, k = 0;
    for (a = 0; a < 5; a++)
        for (w = 0; w < 3; w++)
            for (o = 0; o < 2; o++, k++) {
                const int *sh = shapes[k % 5];
                int bdt = k % 3 == 0 ? -1 : k % 3 == 1 ? AMK_DTYPE_F32 : AMK_DTYPE_BF16;
                gemv_case(AMK_OP_GEMV_TILE, xdts[a], ACT_DTS[w], bdt, OUT_DTS[o], sh[0], sh[1], sh[2], sh[3], sh[4], 0, 0);
            }
    for (s = 0; s < 5; s++)
        gemv_case(AMK_OP_GEMV_TILE, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, shapes[s][0],
                  shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4], 0, 0);
}

/* Every F16 bit pattern as a weight, through a K=1 GEMV with x = 1: out = the weight exactly
   (the GEMV path decodes F16 rows with its own fast decoder). */
/* A buffer of GGUF block format dt (amk_dtype_is_block): random quant bytes, finite small f16
   scales where the format keeps them; v[] the values as amk_dtype_load_f32 decodes them (the
   decoders themselves are checked in test_gguf.c against an independent one and gguf-py's). */
static void tfill_blocks(tbuf *b) {
    int bytes, E = amk_dtype_block(b->dt, &bytes), off[2];
    int64_t nb = b->n / E, k, i;
    amk_t_block_scales(b->dt, off);
    for (i = 0; i < (int64_t)b->nbytes; i++) b->data[i] = (unsigned char)rnd_u64();
    for (k = 0; k < nb; k++)
        for (i = 0; i < 2; i++)
            if (off[i] >= 0) {
                uint16_t h = amk_f32_to_f16((float)rnd_in(-0.05, 0.05));
                memcpy(b->data + k * bytes + off[i], &h, 2);
            }
    for (i = 0; i < b->n; i++) b->v[i] = amk_dtype_load_f32(b->data, b->nbytes, b->dt, i);
}

/* Weights in GGUF's block formats on the reference VM: a GEMV tile (x F32 [2, K], W [5, K], out
   poisoned past the tile) against double math on the decoded values, and EMBED's rows exactly the
   decoded ones. */
static void test_gemv_blocks(void) {
    int dt;
    for (dt = AMK_DTYPE_Q8_0; dt < AMK_DTYPE_COUNT; dt++) {
        const int64_t K = 512, N = 5, M = 2, Nout = N + 2;
        tc c;
        amk_diag d;
        int x, W, y, ids, tab, e, ins[2];
        int64_t m, n, k, bad = 0;
        tc_init(&c);
        x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, M, K, 0);
        W = tc_buf(&c, AMK_KIND_WEIGHT, dt, 2, N, K, 0);
        y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, Nout, 0);
        tfill(&c.b[x], -1, 1);
        tfill_blocks(&c.b[W]);
        ins[0] = x; ins[1] = W;
        tc_task(&c, AMK_OP_GEMV_TILE, ins, 2, y);
        tc_int(&c, "K", K); tc_int(&c, "N_tile", 4); tc_int(&c, "n_off", 1);
        tpoison(&c.b[y]);
        CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "GEMV W=%s: %s", amk_dtype_name(dt), d.message);
        for (m = 0; m < M; m++)
            for (n = 0; n < Nout; n++) {
                double want = 0, mag = 0;
                if (n < 1 || n >= 5) { bad += !tpoisoned(&c.b[y], m * Nout + n); continue; }
                for (k = 0; k < K; k++) {
                    want += c.b[x].v[m * K + k] * c.b[W].v[n * K + k];
                    mag += fabs(c.b[x].v[m * K + k] * c.b[W].v[n * K + k]);
                }
                bad += !near_out(AMK_DTYPE_F32, tget(&c.b[y], m * Nout + n), want, mag, 1e-5 * sqrt((double)K));
            }
        CHECK_MSG(bad == 0, "GEMV W=%s: %d bad elements", amk_dtype_name(dt), (int)bad);
        /* EMBED of rows 3 and 0 of a [4, K] table */
        ids = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 2, 0, 0);
        tab = tc_buf(&c, AMK_KIND_WEIGHT, dt, 2, 4, K, 0);
        e = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 2, K, 0);
        tset(&c.b[ids], 0, 3);
        tset(&c.b[ids], 1, 0);
        tfill_blocks(&c.b[tab]);
        ins[0] = ids; ins[1] = tab;
        tc_task(&c, AMK_OP_EMBED, ins, 2, e);
        tc_int(&c, "hidden", K);
        CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "EMBED table=%s: %s", amk_dtype_name(dt), d.message);
        for (k = 0, bad = 0; k < K; k++)
            bad += tget(&c.b[e], k) != c.b[tab].v[3 * K + k] || tget(&c.b[e], K + k) != c.b[tab].v[k];
        CHECK_MSG(bad == 0, "EMBED table=%s: %d elements differ from the decoded rows", amk_dtype_name(dt), (int)bad);
        tc_free(&c);
    }
}

/* x_q8 (amk_ir.h's AMK_X_Q8) against a twin of its rule written here from the IR's words: each
   32-element unit of x (RMSNORM_GEMV: of x * norm_w) becomes d q, d = amax * (1/127), q =
   rint(y * (127 / amax)); the dots of the rounded x with the decoded W in double (RMSNORM_GEMV: times
   1/rms). Every block format; K with a short last unit for the float W beside a block one. The
   rounding must move the result (the test would pass unrounded otherwise): the same tile without
   x_q8 differs from it by more than f32 sums differ, somewhere. */
static void twin_x_q8(double *xr, const float *y, int64_t K) {
    int64_t u, k;
    for (u = 0; u < K; u += 32) {
        const int64_t e = u + 32 < K ? u + 32 : K;
        float amax = 0.0f, d, id;
        for (k = u; k < e; k++) amax = fabsf(y[k]) > amax ? fabsf(y[k]) : amax;
        d = amax * (1.0f / 127.0f);
        id = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (k = u; k < e; k++) {
            double q = nearbyint((double)(y[k] * id));
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            xr[k] = (double)(d * (float)q);
        }
    }
}
static void test_gemv_x_q8(void) {
    int dt, norm;
    for (norm = 0; norm < 2; norm++)
        for (dt = AMK_DTYPE_Q8_0; dt < AMK_DTYPE_COUNT; dt++) {
            const int64_t K = 512, N = 6;
            tc c;
            amk_diag d;
            int x, nw, W, y, ins[3], pass;
            int64_t n, k, bad = 0, moved = 0;
            double inv = 1.0, xr[512], got[6];
            float yv[512];
            tc_init(&c);
            x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, K, 0);
            nw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
            W = tc_buf(&c, AMK_KIND_WEIGHT, dt, 2, N, K, 0);
            y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, N, 0);
            tfill(&c.b[x], -2, 2);
            tfill(&c.b[nw], 0.5, 1.5);
            tfill_blocks(&c.b[W]);
            for (k = 0; k < K; k++) yv[k] = norm ? (float)c.b[x].v[k] * (float)c.b[nw].v[k] : (float)c.b[x].v[k];
            if (norm) {
                double ss = 0;
                for (k = 0; k < K; k++) ss += c.b[x].v[k] * c.b[x].v[k];
                inv = 1.0 / sqrt(ss / (double)K + 1e-5);
            }
            twin_x_q8(xr, yv, K);
            for (pass = 0; pass < 2; pass++) {
                if (norm) { ins[0] = x; ins[1] = nw; ins[2] = W; }
                else { ins[0] = x; ins[1] = W; }
                tc_task(&c, norm ? AMK_OP_RMSNORM_GEMV : AMK_OP_GEMV_TILE, ins, norm ? 3 : 2, y);
                tc_int(&c, "K", K); tc_int(&c, "N_tile", N); tc_int(&c, "n_off", 0);
                if (norm) tc_real(&c, "eps", 1e-5);
                if (pass == 0) tc_int(&c, "x_q8", 1);
                tpoison(&c.b[y]);
                CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "x_q8 %s W=%s: %s", norm ? "RMSNORM_GEMV" : "GEMV", amk_dtype_name(dt),
                          d.message);
                for (n = 0; n < N; n++) {
                    double want = 0, mag = 0;
                    for (k = 0; k < K; k++) {
                        want += xr[k] * c.b[W].v[n * K + k];
                        mag += fabs(xr[k] * c.b[W].v[n * K + k]);
                    }
                    if (pass == 0) {
                        got[n] = tget(&c.b[y], n);
                        bad += !near_out(AMK_DTYPE_F32, got[n], want * inv, mag * inv, 1e-5 * sqrt((double)K));
                    } else { /* the rounding's effect: far above the f32 sums' differences */
                        moved += fabs(tget(&c.b[y], n) - got[n]) > 1e-5 * mag * inv;
                    }
                }
            }
            CHECK_MSG(bad == 0, "x_q8 %s W=%s: %d bad elements", norm ? "RMSNORM_GEMV" : "GEMV", amk_dtype_name(dt), (int)bad);
            CHECK_MSG(moved > 0, "x_q8 %s W=%s: the unrounded tile equals the rounded twin", norm ? "RMSNORM_GEMV" : "GEMV",
                      amk_dtype_name(dt));
            tc_free(&c);
        }
}

/* RMSNORM_MLP with a block-format W_down [H, N] (its tile's K-slices) gives out exactly what the
   same tile gives with W_downT = the decoded W_down transposed, F32 [N, H]: the same products in
   the same order. Every block format; a tile in the middle of N. */
static void test_mlp_block_down(void) {
    int dt;
    for (dt = AMK_DTYPE_Q8_0; dt < AMK_DTYPE_COUNT; dt++) {
        const int64_t K = 16, N = 768, H = 6, M = 2, n0 = 256, nt = 256;
        tc c;
        amk_diag d;
        int x, nw, Wg, Wu, Wd, WdT, y0, y1, ins[5];
        int64_t i, h, n, bad = 0;
        tc_init(&c);
        x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, M, K, 0);
        nw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
        Wg = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, N, K, 0);
        Wu = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, N, K, 0);
        Wd = tc_buf(&c, AMK_KIND_WEIGHT, dt, 2, H, N, 0);
        WdT = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, N, H, 0);
        y0 = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, H, 0);
        y1 = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, H, 0);
        tfill(&c.b[x], -1, 1);
        tfill(&c.b[nw], 0.5, 1.5);
        tfill(&c.b[Wg], -0.5, 0.5);
        tfill(&c.b[Wu], -0.5, 0.5);
        tfill_blocks(&c.b[Wd]);
        for (h = 0; h < H; h++)
            for (n = 0; n < N; n++) tset(&c.b[WdT], n * H + h, c.b[Wd].v[h * N + n]);
        for (i = 0; i < M * H; i++) { tset(&c.b[y0], i, 0.25 * (double)i); tset(&c.b[y1], i, 0.25 * (double)i); }
        ins[0] = x; ins[1] = nw; ins[2] = Wg; ins[3] = Wu; ins[4] = Wd;
        tc_task(&c, AMK_OP_RMSNORM_MLP, ins, 5, y0);
        tc_real(&c, "eps", 1e-5); tc_int(&c, "K", K); tc_int(&c, "N_tile", nt); tc_int(&c, "n_off", n0);
        CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "MLP W_down=%s: %s", amk_dtype_name(dt), d.message);
        ins[4] = WdT;
        tc_task(&c, AMK_OP_RMSNORM_MLP, ins, 5, y1);
        tc_real(&c, "eps", 1e-5); tc_int(&c, "K", K); tc_int(&c, "N_tile", nt); tc_int(&c, "n_off", n0);
        CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "MLP W_downT=%s: %s", amk_dtype_name(dt), d.message);
        for (i = 0; i < M * H; i++) bad += tget(&c.b[y0], i) != tget(&c.b[y1], i) || tget(&c.b[y1], i) == 0.25 * (double)i;
        CHECK_MSG(bad == 0, "MLP W_down=%s: %d of %d outputs differ from W_downT's (or were not added to)", amk_dtype_name(dt),
                  (int)bad, (int)(M * H));
        tc_free(&c);
    }
}

/* RMSNORM_GEMV_ROPE_KV in tiles of rows (M_tile): rows [0, 2) and [2, 5) write the same cache rows
   as one tile over all five, bit for bit, and no other row; a tile whose positions are not pos[0] + m
   fails naming the rule, having written nothing. */
static void test_norm_gemv_rows(void) {
    const int64_t M = 5, K = 16, N = 8, S = 12;
    tc c;
    amk_diag d;
    int x, nw, W, pos, A, B, ins[4], k;
    int64_t i, bad = 0;
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, M, K, 0);
    nw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
    W = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    pos = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, M, 0, 0);
    A = tc_buf(&c, AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 2, S, N, 0);
    B = tc_buf(&c, AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 2, S, N, 0);
    tfill(&c.b[x], -1, 1);
    tfill(&c.b[nw], 0.5, 1.5);
    tfill(&c.b[W], -0.5, 0.5);
    for (i = 0; i < M; i++) tset(&c.b[pos], i, (double)(3 + i));
    for (i = 0; i < S * N; i++) { tset(&c.b[A], i, 9.0); tset(&c.b[B], i, 9.0); }
    ins[0] = x; ins[1] = nw; ins[2] = W; ins[3] = pos;
    for (k = 0; k < 3; k++) { /* all rows into A; rows [0, 2), then [2, 5) into B */
        tc_task(&c, AMK_OP_RMSNORM_GEMV_ROPE_KV, ins, 4, k ? B : A);
        tc_real(&c, "eps", 1e-5); tc_int(&c, "K", K); tc_int(&c, "N_tile", N); tc_int(&c, "n_off", 0);
        tc_int(&c, "head_dim", 4); tc_real(&c, "theta", 10000.0);
        if (k) { tc_int(&c, "m_off", k == 1 ? 0 : 2); tc_int(&c, "M_tile", k == 1 ? 2 : 3); }
        CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "rows tile %d: %s", k, d.message);
    }
    for (i = 0; i < S * N; i++)
        bad += tget(&c.b[A], i) != tget(&c.b[B], i) || ((i / N < 3 || i / N >= 3 + M) != (tget(&c.b[A], i) == 9.0));
    CHECK_MSG(bad == 0, "%d cache elements differ between the row tiles and the whole tile", (int)bad);
    tset(&c.b[pos], 3, 11.0); /* row 3 at position 11, not 3 + 3 */
    for (i = 0; i < S * N; i++) tset(&c.b[B], i, 9.0);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_ERR_RUNTIME);
    CHECK_MSG(strstr(d.message, "not pos[0] + 3") != NULL, "message: %s", d.message);
    for (i = 0; i < S * N; i++) bad += tget(&c.b[B], i) != 9.0;
    CHECK_MSG(bad == 0, "the refused tile wrote %d cache elements", (int)bad);
    tc_free(&c);
}

static void test_gemv_f16_every_value(void) {
    tc c;
    amk_diag d;
    int x, W, y, ins[2], bad = 0;
    int64_t n;
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, 1, 0);
    W = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F16, 2, 65536, 1, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, 65536, 0);
    tset(&c.b[x], 0, 1.0);
    for (n = 0; n < 65536; n++) { uint16_t h = (uint16_t)n; memcpy(c.b[W].data + 2 * n, &h, 2); }
    ins[0] = x; ins[1] = W;
    tc_task(&c, AMK_OP_GEMV_TILE, ins, 2, y);
    tc_int(&c, "K", 1);
    tc_int(&c, "N_tile", 65536);
    tc_int(&c, "n_off", 0);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    for (n = 0; n < 65536; n++) {
        double want = f16_dec((uint16_t)n), got = tget(&c.b[y], n);
        if (want != want ? got == got : got != want) {
            if (!bad) fprintf(stderr, "  F16 0x%04x: got %.9g want %.9g\n", (unsigned)n, got, want);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    tc_free(&c);
}

static void test_gemm_tile(void) {
    gemv_case(AMK_OP_GEMM_TILE, AMK_DTYPE_F32, AMK_DTYPE_F32, -1, AMK_DTYPE_F32, 5, 24, 6, 2, 3, 1, 3);
    gemv_case(AMK_OP_GEMM_TILE, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_BF16, 4, 40, 9, 0, 9, 0, 4);
    gemv_case(AMK_OP_GEMM_TILE, AMK_DTYPE_F16, AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_F32, 6, 17, 5, 4, 1, 5, 1);
    /* K ranges: the sum over [k_off, k_off + K_tile) alone (a range inside, at each end) */
    g_k_off = 7; g_k_tile = 20;
    gemv_case(AMK_OP_GEMM_TILE, AMK_DTYPE_F32, AMK_DTYPE_BF16, -1, AMK_DTYPE_F32, 5, 40, 6, 1, 4, 1, 3);
    g_k_off = 0; g_k_tile = 8;
    gemv_case(AMK_OP_GEMM_TILE, AMK_DTYPE_BF16, AMK_DTYPE_BF16, -1, AMK_DTYPE_BF16, 4, 40, 9, 0, 9, 0, 4);
    g_k_off = 32; g_k_tile = 8;
    gemv_case(AMK_OP_GEMM_TILE, AMK_DTYPE_F16, AMK_DTYPE_F16, -1, AMK_DTYPE_F32, 3, 40, 5, 0, 5, 0, 3);
    g_k_off = g_k_tile = 0;
}

/* ALLREDUCE_SHARD over rows (a split-K projection's partials and its residual): rows [1, 3) of
   out [4, 6] get the sum in input order, rounded once to bf16; rows 0 and 3 keep their poison. */
static void test_allreduce_rows(void) {
    tc c;
    amk_diag d;
    int in[3], y, k;
    int64_t i, bad = 0;
    tc_init(&c);
    in[0] = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, 4, 6, 0);
    in[1] = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 4, 6, 0);
    in[2] = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 4, 6, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 2, 4, 6, 0);
    for (k = 0; k < 3; k++) tfill(&c.b[in[k]], -2, 2);
    tc_task(&c, AMK_OP_ALLREDUCE_SHARD, in, 3, y);
    tc_int(&c, "m_off", 1);
    tc_int(&c, "M_tile", 2);
    tpoison(&c.b[y]);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "ALLREDUCE_SHARD rows: %s", d.message);
    for (i = 0; i < 24; i++) {
        const float want = ((float)c.b[in[0]].v[i] + (float)c.b[in[1]].v[i]) + (float)c.b[in[2]].v[i];
        if (i < 6 || i >= 18) bad += !tpoisoned(&c.b[y], i);
        else bad += tget(&c.b[y], i) != (double)amk_bf16_to_f32(amk_f32_to_bf16(want));
    }
    CHECK_MSG(bad == 0, "ALLREDUCE_SHARD rows: %d elements wrong", (int)bad);
    tc_free(&c);
}

/* Weight-only quantized GEMV: form 0 = I8 [N,K], 1 = I4 [N,K], 2 = U8 [N,K/2] (same bytes as 1).
   Returns the output bytes (caller frees) so the two I4 layouts can be compared. */
static unsigned char *qgemv_case(int form, int xdt, int sdt, int zdt, int odt, int64_t M, int64_t K,
                                 int64_t group, uint64_t seed) {
    tc c;
    amk_diag d;
    int x, qw, sc, z = -1, y, ins[4], n_in = 3;
    int64_t N = 6, n_off = 1, n_tile = 4, G = K / group, Nout = N, m, n, k, bad = 0;
    unsigned char *res;
    char label[128];
    rng.s = seed;
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, K, 0);
    if (form == 2) {
        /* the U8 form holds the I4 form's bytes: fill an I4 twin and copy them over */
        tbuf twin;
        int64_t i;
        memset(&twin, 0, sizeof twin);
        twin.dt = AMK_DTYPE_I4;
        twin.n = N * K;
        twin.data = (unsigned char *)calloc((size_t)(N * K / 2 + 1), 1);
        twin.v = (double *)calloc((size_t)(N * K), sizeof(double));
        tfill(&twin, -8.4, 7.4);
        qw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_U8, 2, N, K / 2, 0);
        memcpy(c.b[qw].data, twin.data, (size_t)(N * K / 2));
        free(c.b[qw].v);
        c.b[qw].v = twin.v; /* the logical q values */
        for (i = 0; i < N * K / 2; i++) CHECK(c.b[qw].data[i] == twin.data[i]);
        free(twin.data);
    } else {
        qw = tc_buf(&c, AMK_KIND_WEIGHT, form == 0 ? AMK_DTYPE_I8 : AMK_DTYPE_I4, 2, N, K, 0);
        if (form == 0) tfill(&c.b[qw], -128.4, 127.4);
        else tfill(&c.b[qw], -8.4, 7.4);
    }
    sc = tc_buf(&c, AMK_KIND_WEIGHT, sdt, 2, N, G, 0);
    if (zdt >= 0) { z = tc_buf(&c, AMK_KIND_WEIGHT, zdt, 2, N, G, 0); n_in = 4; }
    y = tc_buf(&c, AMK_KIND_ACTIVATION, odt, 2, M, Nout, 0);
    tfill(&c.b[x], -1, 1);
    tfill(&c.b[sc], -0.1, 0.1);
    if (z >= 0) tfill(&c.b[z], -3, 3);
    ins[0] = x; ins[1] = qw; ins[2] = sc; ins[3] = z;
    tc_task(&c, AMK_OP_GEMV_TILE, ins, n_in, y);
    tc_int(&c, "K", K);
    tc_int(&c, "N_tile", n_tile);
    tc_int(&c, "n_off", n_off);
    tc_int(&c, "qdtype", form == 0 ? AMK_DTYPE_I8 : AMK_DTYPE_I4);
    if (group != K || form == 1) tc_int(&c, "group", group); /* else: group defaults to K */
    tpoison(&c.b[y]);
    snprintf(label, sizeof label, "quant GEMV form=%d x=%s scales=%s zeros=%s out=%s M=%d K=%d group=%d",
             form, amk_dtype_name(xdt), amk_dtype_name(sdt), zdt >= 0 ? amk_dtype_name(zdt) : "-",
             amk_dtype_name(odt), (int)M, (int)K, (int)group);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    for (m = 0; m < M; m++)
        for (n = 0; n < Nout; n++) {
            double want = 0, mag = 0;
            if (n < n_off || n >= n_off + n_tile) {
                if (!tpoisoned(&c.b[y], m * Nout + n)) bad++;
                continue;
            }
            for (k = 0; k < K; k++) {
                double zero = z >= 0 ? c.b[z].v[n * G + k / group] : 0;
                double w = (c.b[qw].v[n * K + k] - zero) * c.b[sc].v[n * G + k / group];
                want += c.b[x].v[m * K + k] * w;
                mag += fabs(c.b[x].v[m * K + k]) * (fabs(c.b[qw].v[n * K + k]) + fabs(zero)) * fabs(c.b[sc].v[n * G + k / group]);
            }
            if (!near_out(odt, tget(&c.b[y], m * Nout + n), want, mag, 1e-5 * sqrt((double)K))) {
                if (!bad) fprintf(stderr, "  %s: [%d,%d] got %.9g want %.9g\n", label, (int)m, (int)n,
                                  tget(&c.b[y], m * Nout + n), want);
                bad++;
            }
        }
    CHECK_MSG(bad == 0, "%s: %d bad elements", label, (int)bad);
    res = (unsigned char *)malloc(c.b[y].nbytes);
    memcpy(res, c.b[y].data, c.b[y].nbytes);
    tc_free(&c);
    return res;
}

static void test_gemv_quant(void) {
    int k;
    for (k = 0; k < 12; k++) {
        int64_t K = k % 2 ? 64 : 16, group = k % 3 == 0 ? K : 8;
        int xdt = ACT_DTS[k % 3], sdt = ACT_DTS[(k + 1) % 3], odt = OUT_DTS[k % 2];
        int zdt = k % 4 == 0 ? -1 : k % 4 == 1 ? AMK_DTYPE_F32 : k % 4 == 2 ? AMK_DTYPE_BF16 : AMK_DTYPE_I8;
        int64_t M = 1 + k % 2;
        unsigned char *a, *b;
        free(qgemv_case(0, xdt, sdt, zdt, odt, M, K, group, 100 + k));
        /* the I4 and packed-U8 layouts hold the same bytes: identical results */
        a = qgemv_case(1, xdt, sdt, zdt, odt, M, K, group, 200 + k);
        b = qgemv_case(2, xdt, sdt, zdt, odt, M, K, group, 200 + k);
        CHECK_MSG(memcmp(a, b, (size_t)amk_dtype_nbytes(odt, M * 6)) == 0, "I4 vs U8 layout, case %d", k);
        free(a);
        free(b);
    }
}

/* Attention in double: per head [acc(head_dim) | m | l] (un-normalised), and the scores' mag. */
static void attn_ref(const double *q, const double *kc, const double *vc, int nh, int nkv, int hd,
                     int start, int len, double scale, double *part, double *acc_mag, double *s_mag) {
    int h, j, e, rep = nh / nkv;
    for (h = 0; h < nh; h++) {
        int g = h / rep;
        double m = -INFINITY, l = 0, s[64], sm[64];
        for (j = 0; j < len; j++) {
            const double *kr = kc + ((int64_t)(start + j) * nkv + g) * hd;
            s[j] = 0;
            sm[j] = 0;
            for (e = 0; e < hd; e++) { s[j] += q[h * hd + e] * kr[e]; sm[j] += fabs(q[h * hd + e] * kr[e]); }
            s[j] *= scale;
            sm[j] *= fabs(scale);
            if (s[j] > m) m = s[j];
        }
        s_mag[h] = 0;
        for (e = 0; e < hd; e++) { part[h * (hd + 2) + e] = 0; acc_mag[h * hd + e] = 0; }
        for (j = 0; j < len; j++) {
            const double *vr = vc + ((int64_t)(start + j) * nkv + g) * hd;
            double p = exp(s[j] - m);
            l += p;
            if (sm[j] > s_mag[h]) s_mag[h] = sm[j];
            for (e = 0; e < hd; e++) { part[h * (hd + 2) + e] += p * vr[e]; acc_mag[h * hd + e] += p * fabs(vr[e]); }
        }
        part[h * (hd + 2) + hd] = m;
        part[h * (hd + 2) + hd + 1] = l;
    }
}

/* The params ATTENTION_TILE and ATTENTION_DECODE share, on the current task of c. */
static void tc_attn_params(tc *c, int hd, int nh, int nkv, int start, int len, double scale, int partial) {
    tc_int(c, "head_dim", hd);
    tc_int(c, "n_heads", nh);
    tc_int(c, "n_kv_heads", nkv);
    tc_int(c, "kv_start", start);
    tc_int(c, "kv_len", len);
    tc_real(c, "scale", scale);
    if (partial) tc_int(c, "flags", AMK_ATTN_FLAG_PARTIAL);
}

/* One ATTENTION_TILE over [start, start+len) of a cache of max_seq rows, normalised or partial. */
static void attn_case(int qdt, int kdt, int odt, int nh, int nkv, int hd, int max_seq, int start,
                      int len, int partial) {
    tc c;
    amk_diag d;
    int q, k, v, y, ins[3], h, e, bad = 0;
    double scale = 1.0 / sqrt((double)hd), part[16 * 18], acc_mag[16 * 16], s_mag[16];
    double rel = 1e-5 * sqrt((double)(hd + len + 1));
    char label[128];
    tc_init(&c);
    q = tc_buf(&c, AMK_KIND_IO_INPUT, qdt, 2, nh, hd, 0);
    k = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    v = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, odt, 2, nh, partial ? hd + 2 : hd, 0);
    tfill(&c.b[q], -1.5, 1.5);
    tfill(&c.b[k], -1.5, 1.5);
    tfill(&c.b[v], -2, 2);
    ins[0] = q; ins[1] = k; ins[2] = v;
    tc_task(&c, AMK_OP_ATTENTION_TILE, ins, 3, y);
    tc_attn_params(&c, hd, nh, nkv, start, len, scale, partial);
    tpoison(&c.b[y]);
    snprintf(label, sizeof label, "ATTENTION q=%s kv=%s out=%s heads=%d/%d hd=%d window=[%d,+%d) partial=%d",
             amk_dtype_name(qdt), amk_dtype_name(kdt), amk_dtype_name(odt), nh, nkv, hd, start, len, partial);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    attn_ref(c.b[q].v, c.b[k].v, c.b[v].v, nh, nkv, hd, start, len, scale, part, acc_mag, s_mag);
    for (h = 0; h < nh; h++) {
        double l = part[h * (hd + 2) + hd + 1];
        for (e = 0; e < hd; e++) {
            double want = partial ? part[h * (hd + 2) + e] : len ? part[h * (hd + 2) + e] / l : 0;
            double mag = partial ? acc_mag[h * hd + e] : len ? acc_mag[h * hd + e] / l : 0;
            double got = tget(&c.b[y], partial ? h * (hd + 2) + e : h * hd + e);
            if (!near_out(odt, got, want, mag + 1e-30, rel * (1 + s_mag[h]))) {
                if (!bad) fprintf(stderr, "  %s: head %d elem %d got %.9g want %.9g\n", label, h, e, got, want);
                bad++;
            }
        }
        if (partial) {
            double m = part[h * (hd + 2) + hd], gm = tget(&c.b[y], h * (hd + 2) + hd);
            double gl = tget(&c.b[y], h * (hd + 2) + hd + 1);
            if (len == 0) {
                if (!(isinf(gm) && gm < 0 && gl == 0)) bad++;
            } else {
                if (!near_out(odt, gm, m, s_mag[h], rel)) bad++;
                if (!near_out(odt, gl, l, l, rel * (1 + s_mag[h]))) bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d bad", label, bad);
    tc_free(&c);
}

static void test_attention(void) {
    /* window (start, len) on max_seq 10 */
    static const int windows[4][2] = {{0, 10}, {3, 4}, {9, 1}, {2, 0}};
    int a, w, o, hd, k = 0;
    for (a = 0; a < 3; a++)
        for (w = 0; w < 4; w++)
            for (o = 0; o < 2; o++, k++) {
                hd = k % 2 ? 8 : 4;
                /* GQA 6 query heads on 2 kv heads: head h reads kv head h / 3 */
                attn_case(ACT_DTS[a], ACT_DTS[(a + w) % 3], OUT_DTS[o], 6, 2, hd, 10, windows[w][0], windows[w][1], 0);
                attn_case(ACT_DTS[a], ACT_DTS[(a + o) % 3], AMK_DTYPE_F32, 6, 2, hd, 10, windows[w][0], windows[w][1], 1);
            }
    attn_case(AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 4, 16, 7, 0, 7, 0); /* MHA */
    attn_case(AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 1, 5, 6, 1, 5, 0);  /* MQA, odd head_dim */
}

/* ATTENTION_TILE and KV_APPEND over a batch of 2 caches [2, S, n_kv_heads, head_dim] (the spec's
   batched decode): each sequence's result equals the single-sequence op on its own slices, bit for
   bit, and KV_APPEND writes row pos of each cache and nothing else. */
static void test_attention_batched(void) {
    enum { B = 2, NH = 4, NKV = 2, HD = 4, S = 5, QN = NH * HD, CN = S * NKV * HD };
    tc c, one;
    amk_diag d;
    int q, k, v, y, ins[3], b, i, bad = 0;
    tc_init(&c);
    q = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 3, B, NH, HD);
    k = tc_buf4(&c, AMK_KIND_KV_CACHE, B, S, NKV, HD);
    v = tc_buf4(&c, AMK_KIND_KV_CACHE, B, S, NKV, HD);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, B, QN, 0);
    tfill(&c.b[q], -1.5, 1.5);
    tfill(&c.b[k], -1.5, 1.5);
    tfill(&c.b[v], -2, 2);
    ins[0] = q; ins[1] = k; ins[2] = v;
    tc_task(&c, AMK_OP_ATTENTION_TILE, ins, 3, y);
    tc_attn_params(&c, HD, NH, NKV, 1, 3, 0.5, 0);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    for (b = 0; b < B; b++) {
        int q1, k1, v1, y1;
        tc_init(&one);
        q1 = tc_buf(&one, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, NH, HD, 0);
        k1 = tc_buf(&one, AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, S, NKV, HD);
        v1 = tc_buf(&one, AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, S, NKV, HD);
        y1 = tc_buf(&one, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, NH, HD, 0);
        memcpy(one.b[q1].data, (float *)c.b[q].data + b * QN, QN * sizeof(float));
        memcpy(one.b[k1].data, (float *)c.b[k].data + b * CN, CN * sizeof(float));
        memcpy(one.b[v1].data, (float *)c.b[v].data + b * CN, CN * sizeof(float));
        ins[0] = q1; ins[1] = k1; ins[2] = v1;
        tc_task(&one, AMK_OP_ATTENTION_TILE, ins, 3, y1);
        tc_attn_params(&one, HD, NH, NKV, 1, 3, 0.5, 0);
        CHECK_EQ_INT(tc_exec(&one, &d), AMK_OK);
        bad += memcmp(one.b[y1].data, (float *)c.b[y].data + b * QN, QN * sizeof(float)) != 0;
        tc_free(&one);
    }
    CHECK_MSG(bad == 0, "batched ATTENTION_TILE differs from the single one in %d of %d sequences", bad, B);
    /* KV_APPEND of k_new [B, n_kv_heads*head_dim] at pos 3 into k */
    {
        int kn = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, B, NKV * HD, 0), t;
        float before[B * CN];
        void *in_ptrs[2], *out_ptrs[1];
        tfill(&c.b[kn], -3, 3);
        memcpy(before, c.b[k].data, sizeof before);
        ins[0] = kn; ins[1] = k;
        tc_task(&c, AMK_OP_KV_APPEND, ins, 2, k);
        tc_int(&c, "pos", 3);
        t = c.task;
        in_ptrs[0] = c.b[kn].data;
        in_ptrs[1] = out_ptrs[0] = c.b[k].data; /* in place */
        CHECK_EQ_INT(amk_ref_exec(c.p, &c.p->tasks[t], in_ptrs, out_ptrs, &d), AMK_OK);
        for (bad = 0, i = 0; i < B * CN; i++) {
            const int bt = i / CN, row = i % CN / (NKV * HD), e = i % (NKV * HD);
            const float want = row == 3 ? ((float *)c.b[kn].data)[bt * NKV * HD + e] : before[i];
            bad += ((float *)c.b[k].data)[i] != want;
        }
        CHECK_MSG(bad == 0, "batched KV_APPEND: %d of %d cache elements wrong", bad, B * CN);
    }
    tc_free(&c);
}

/* Partials over 3 windows (one empty) combined equal full attention over their union. */
static void test_attention_combine(void) {
    static const int cuts[3][2] = {{0, 4}, {4, 0}, {4, 6}};
    const int nh = 6, nkv = 2, hd = 8, S = 10;
    tc c;
    amk_diag d;
    int q, k, v, parts[3], full, comb, ins[3], i, e, h, bad = 0;
    double part[6 * 10], acc_mag[6 * 8], s_mag[6], scale = 1.0 / sqrt(8.0);
    tc_init(&c);
    q = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, nh, hd, 0);
    k = tc_buf(&c, AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, S, nkv, hd);
    v = tc_buf(&c, AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, S, nkv, hd);
    for (i = 0; i < 3; i++) parts[i] = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, nh, hd + 2, 0);
    full = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, nh, hd, 0);
    comb = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, nh, hd, 0);
    tfill(&c.b[q], -2, 2);
    tfill(&c.b[k], -2, 2);
    tfill(&c.b[v], -2, 2);
    ins[0] = q; ins[1] = k; ins[2] = v;
    for (i = 0; i < 4; i++) {
        tc_task(&c, AMK_OP_ATTENTION_TILE, ins, 3, i < 3 ? parts[i] : full);
        tc_int(&c, "head_dim", hd);
        tc_int(&c, "n_heads", nh);
        tc_int(&c, "n_kv_heads", nkv);
        tc_int(&c, "kv_start", i < 3 ? cuts[i][0] : 0);
        tc_int(&c, "kv_len", i < 3 ? cuts[i][1] : S);
        tc_real(&c, "scale", scale);
        if (i < 3) tc_int(&c, "flags", AMK_ATTN_FLAG_PARTIAL);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    }
    tc_task(&c, AMK_OP_ATTENTION_COMBINE, parts, 3, comb);
    tc_int(&c, "head_dim", hd);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    attn_ref(c.b[q].v, c.b[k].v, c.b[v].v, nh, nkv, hd, 0, S, scale, part, acc_mag, s_mag);
    for (h = 0; h < nh; h++)
        for (e = 0; e < hd; e++) {
            double l = part[h * (hd + 2) + hd + 1], want = part[h * (hd + 2) + e] / l;
            double got = tget(&c.b[comb], h * hd + e), ref = tget(&c.b[full], h * hd + e);
            double mag = acc_mag[h * hd + e] / l, rel = 1e-5 * sqrt(20.0) * (1 + s_mag[h]);
            if (!near_out(AMK_DTYPE_F32, got, want, mag, rel) || !near_out(AMK_DTYPE_F32, got, ref, mag, rel)) {
                if (!bad) fprintf(stderr, "  COMBINE head %d elem %d: got %.9g, full %.9g, double %.9g\n", h, e, got, ref, want);
                bad++;
            }
        }
    CHECK_EQ_INT(bad, 0);
    /* every partial empty: zeros */
    for (i = 0; i < 3; i++) {
        tc_task(&c, AMK_OP_ATTENTION_TILE, ins, 3, parts[i]);
        tc_int(&c, "head_dim", hd);
        tc_int(&c, "n_heads", nh);
        tc_int(&c, "n_kv_heads", nkv);
        tc_int(&c, "kv_start", 5);
        tc_int(&c, "kv_len", 0);
        tc_real(&c, "scale", scale);
        tc_int(&c, "flags", AMK_ATTN_FLAG_PARTIAL);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    }
    tc_task(&c, AMK_OP_ATTENTION_COMBINE, parts, 3, comb);
    tc_int(&c, "head_dim", hd);
    tpoison(&c.b[comb]);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    for (i = 0; i < nh * hd; i++) bad += tget(&c.b[comb], i) != 0.0;
    CHECK_EQ_INT(bad, 0);
    tc_free(&c);
}

/* inv_freq in double, with the llama3 rule (REFERENCE.md §3.4); band: 0 high, 1 medium, 2 low. */
static double rope_inv(int i, int hd, double theta, double factor, double lo, double hi, double orig,
                       int *band) {
    double inv = pow(theta, -2.0 * i / hd), wl;
    *band = 0;
    if (factor <= 0) return inv;
    wl = 2 * 3.14159265358979323846 / inv;
    if (wl < orig / hi) return inv;
    if (wl > orig / lo) { *band = 2; return inv / factor; }
    *band = 1;
    {
        double smooth = (orig / wl - lo) / (hi - lo);
        return (1 - smooth) * inv / factor + smooth * inv;
    }
}

static void rope_case(int xdt, int odt, int S, int nh, int hd, const int *pos, double theta,
                      double factor, int *bands) {
    tc c;
    amk_diag d;
    int x, ps, y, ins[2], s, h, i, bad = 0, band;
    double lo = 1, hi = 4, orig = 8192;
    char label[96];
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 3, S, nh, hd);
    ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, S, 0, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, odt, 3, S, nh, hd);
    tfill(&c.b[x], -2, 2);
    for (s = 0; s < S; s++) tset(&c.b[ps], s, pos[s]);
    ins[0] = x; ins[1] = ps;
    tc_task(&c, AMK_OP_ROPE, ins, 2, y);
    tc_int(&c, "head_dim", hd);
    tc_real(&c, "theta", theta);
    if (factor > 0) {
        tc_real(&c, "rope_factor", factor);
        tc_int(&c, "rope_orig_ctx", (int64_t)orig);
        tc_real(&c, "rope_low_freq_factor", lo);
        tc_real(&c, "rope_high_freq_factor", hi);
    }
    tpoison(&c.b[y]);
    snprintf(label, sizeof label, "ROPE x=%s out=%s S=%d heads=%d hd=%d theta=%g factor=%g",
             amk_dtype_name(xdt), amk_dtype_name(odt), S, nh, hd, theta, factor);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    for (s = 0; s < S; s++)
        for (h = 0; h < nh; h++)
            for (i = 0; i < hd / 2; i++) {
                int64_t base = ((int64_t)s * nh + h) * hd;
                double inv = rope_inv(i, hd, theta, factor, lo, hi, orig, &band), ang = pos[s] * inv;
                double x1 = c.b[x].v[base + i], x2 = c.b[x].v[base + i + hd / 2];
                double w1 = x1 * cos(ang) - x2 * sin(ang), w2 = x2 * cos(ang) + x1 * sin(ang);
                /* why: fp32 angle = pos*inv_freq carries ~(ln(theta)+2) ulp of relative error */
                double mag = fabs(x1) + fabs(x2), rel = fabs(ang) * (log(theta) + 2) * 1.2e-7 + 2e-6;
                bands[band]++;
                if (!near_out(odt, tget(&c.b[y], base + i), w1, mag, rel) ||
                    !near_out(odt, tget(&c.b[y], base + i + hd / 2), w2, mag, rel)) {
                    if (!bad) fprintf(stderr, "  %s: pos %d head %d i %d got %.9g,%.9g want %.9g,%.9g\n",
                                      label, pos[s], h, i, tget(&c.b[y], base + i),
                                      tget(&c.b[y], base + i + hd / 2), w1, w2);
                    bad++;
                }
            }
    CHECK_MSG(bad == 0, "%s: %d bad", label, bad);
    tc_free(&c);
}

static void test_rope(void) {
    static const int one[4][1] = {{0}, {1}, {17}, {5000}};
    static const int three[3] = {0, 7, 300}, far[3] = {1, 100, 4000};
    static const int hds[3] = {2, 8, 64};
    int bands[3] = {0, 0, 0}, a, p, h;
    for (a = 0; a < 3; a++)
        for (p = 0; p < 4; p++)
            for (h = 0; h < 3; h++)
                rope_case(ACT_DTS[a], OUT_DTS[(p + h) % 3], 1, 2, hds[h], one[p], 10000.0, 0, bands);
    rope_case(AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 3, 8, three, 10000.0, 0, bands);
    rope_case(AMK_DTYPE_BF16, AMK_DTYPE_BF16, 3, 2, 16, three, 10000.0, 0, bands);
    memset(bands, 0, sizeof bands);
    /* llama3 scaling as in Llama-3.1 (factor 8, low 1, high 4, orig 8192, theta 500000) */
    rope_case(AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 2, 64, far, 500000.0, 8.0, bands);
    rope_case(AMK_DTYPE_BF16, AMK_DTYPE_F32, 3, 1, 128, far, 500000.0, 32.0, bands);
    CHECK(bands[0] > 0 && bands[1] > 0 && bands[2] > 0); /* every branch of the rule was used */
    { /* a negative position: RUNTIME */
        tc c;
        amk_diag d;
        int x, ps, y, ins[2];
        tc_init(&c);
        x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 2, 4, 0);
        ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
        y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 2, 4, 0);
        tset(&c.b[ps], 0, -3);
        ins[0] = x; ins[1] = ps;
        tc_task(&c, AMK_OP_ROPE, ins, 2, y);
        tc_int(&c, "head_dim", 4);
        tc_real(&c, "theta", 10000.0);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_ERR_RUNTIME);
        CHECK(strstr(d.message, "-3") != NULL);
        tc_free(&c);
    }
}

/* SILU_MUL, GELU, ADD, MUL (same shape, broadcast scalar, param scale). */
/* ---- AMK's fused opcodes (20..22) ---------------------------------------------------------- */

/* RMSNORM_GEMV / RMSNORM_SWIGLU against double math: rows of x normalised, the tile's rows,
   SiLU*up, interleaved RoPE at pos[m], or the cache row pos[m]; with ARGMAX (flags 4) the pair 1
   of a partials buffer of 3 pairs a row is the max of the tile's values as stored and its first
   index. Everything outside the tile (and outside the rows picked, and the other pairs) must keep
   its poison. */
/* The fused tiles' values for row m of x in double, with their magnitudes for the tolerance:
   yv[n] = xn . W[n] (Wu < 0), or silu(xn . W[n]) * (xn . Wu[n]), xn = rmsnorm(x[m]) * norm_w,
   for the tile's rows n_off .. n_off+n_tile. */
static void want_norm_tile(const tc *c, int x, int nw, int W, int Wu, int m, int K, int n_off, int n_tile,
                           double eps, double *yv, double *ym) {
    double ss = 0, inv;
    int n, k;
    for (k = 0; k < K; k++) ss += c->b[x].v[m * K + k] * c->b[x].v[m * K + k];
    inv = 1.0 / sqrt(ss / K + eps);
    for (n = 0; n < n_tile; n++) {
        double g = 0, gm = 0, u = 0, um = 0;
        for (k = 0; k < K; k++) {
            const double xn = c->b[x].v[m * K + k] * inv * c->b[nw].v[k];
            g += xn * c->b[W].v[(int64_t)(n_off + n) * K + k];
            gm += fabs(xn * c->b[W].v[(int64_t)(n_off + n) * K + k]);
            if (Wu >= 0) { u += xn * c->b[Wu].v[(int64_t)(n_off + n) * K + k]; um += fabs(xn * c->b[Wu].v[(int64_t)(n_off + n) * K + k]); }
        }
        yv[n] = Wu >= 0 ? g / (1 + exp(-g)) * u : g;
        ym[n] = Wu >= 0 ? gm * fabs(u) + um * fabs(g) + 1e-3 : gm;
    }
}

static void fused_gemv_case(int op, int flags, int xdt, int wdt, int odt, int M, int K, int N, int n_off,
                            int n_tile, int hd, const int *pos, int cache_rows) {
    tc c;
    amk_diag d;
    const double eps = 1e-5, theta = 10000.0;
    int x, nw, W, Wu = -1, ps = -1, y, pp = -1, ins[4], n_in = 3, m, n, k, bad = 0, band;
    const int kv = (flags & 2) != 0, rope = (flags & 1) != 0, argmax = (flags & 4) != 0;
    const int64_t rows_out = kv ? cache_rows : M, last = kv ? N : N + 2;
    double *want = (double *)calloc((size_t)(rows_out * last), sizeof(double));
    double *mag = (double *)calloc((size_t)(rows_out * last), sizeof(double));
    char *set = (char *)calloc((size_t)(rows_out * last), 1);
    char label[160];
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, K, 0);
    nw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
    W = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    if (op == AMK_OP_RMSNORM_SWIGLU) Wu = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    if (flags & 3) ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, M, 0, 0);
    y = kv ? tc_buf(&c, AMK_KIND_KV_CACHE, odt, 2, cache_rows, N, 0) : tc_buf(&c, AMK_KIND_ACTIVATION, odt, 2, M, N + 2, 0);
    if (argmax) pp = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, 6, 0);
    tfill(&c.b[x], -2, 2);
    tfill(&c.b[nw], 0.5, 1.5);
    tfill(&c.b[W], -1, 1);
    if (Wu >= 0) tfill(&c.b[Wu], -1, 1);
    for (m = 0; m < M && ps >= 0; m++) tset(&c.b[ps], m, pos[m]);
    ins[0] = x; ins[1] = nw; ins[2] = W;
    if (Wu >= 0) { ins[3] = Wu; n_in = 4; }
    if (ps >= 0) { ins[3] = ps; n_in = 4; }
    tc_task2(&c, amk_op_variant(op, (uint32_t)flags), ins, n_in, y, pp);
    if (argmax) tc_int(&c, "part", 1);
    tc_real(&c, "eps", eps);
    tc_int(&c, "K", K);
    tc_int(&c, "N_tile", n_tile);
    tc_int(&c, "n_off", n_off);
    if (rope) { tc_int(&c, "head_dim", hd); tc_real(&c, "theta", theta); }
    tpoison(&c.b[y]);
    if (argmax) tpoison(&c.b[pp]);
    snprintf(label, sizeof label, "%s flags=%d x=%s W=%s out=%s M=%d K=%d N=%d tile=[%d,+%d) hd=%d",
             amk_op_name(op), flags, amk_dtype_name(xdt), amk_dtype_name(wdt), amk_dtype_name(odt), M, K, N,
             n_off, n_tile, hd);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    for (m = 0; m < M; m++) {
        double yv[64], ym[64];
        const int64_t row = kv ? pos[m] : m;
        want_norm_tile(&c, x, nw, W, Wu, m, K, n_off, n_tile, eps, yv, ym);
        for (n = 0; rope && n < n_tile; n += 2) {
            const double ang = pos[m] * rope_inv(((n_off + n) % hd) / 2, hd, theta, 0, 1, 4, 8192, &band);
            const double x1 = yv[n], x2 = yv[n + 1], mg = ym[n] + ym[n + 1] + fabs(ang) * 1e-2 * (fabs(x1) + fabs(x2));
            yv[n] = x1 * cos(ang) - x2 * sin(ang);
            yv[n + 1] = x2 * cos(ang) + x1 * sin(ang);
            ym[n] = ym[n + 1] = mg;
        }
        for (n = 0; n < n_tile; n++) {
            want[row * last + n_off + n] = yv[n];
            mag[row * last + n_off + n] = ym[n];
            set[row * last + n_off + n] = 1;
        }
    }
    for (k = 0; k < rows_out * last; k++) {
        if (!set[k]) { bad += !tpoisoned(&c.b[y], k); continue; }
        if (!near_out(odt, tget(&c.b[y], k), want[k], mag[k], 1e-5 * sqrt((double)K))) {
            if (!bad) fprintf(stderr, "  %s: element %d got %.9g want %.9g\n", label, k, tget(&c.b[y], k), want[k]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %d bad", label, bad);
    for (m = 0, bad = 0; m < M && argmax; m++) { /* the pair over the values as stored, exactly */
        int best = n_off;
        for (n = n_off + 1; n < n_off + n_tile; n++)
            if (tget(&c.b[y], m * last + n) > tget(&c.b[y], m * last + best)) best = n;
        bad += tget(&c.b[pp], m * 6 + 2) != tget(&c.b[y], m * last + best) || tget(&c.b[pp], m * 6 + 3) != (double)best;
        for (k = 0; k < 6; k++) bad += k / 2 != 1 && !tpoisoned(&c.b[pp], m * 6 + k);
    }
    CHECK_MSG(bad == 0, "%s: %d bad argmax pairs", label, bad);
    if (flags & 3) { /* a position outside the cache (or negative) is a run-time error that writes nothing */
        tset(&c.b[ps], M - 1, kv ? cache_rows : -1);
        tpoison(&c.b[y]);
        CHECK_MSG(tc_exec(&c, &d) == AMK_ERR_RUNTIME, "%s: bad position accepted", label);
        for (k = 0, bad = 0; k < rows_out * last; k++) bad += !tpoisoned(&c.b[y], k);
        CHECK_MSG(bad == 0, "%s: a failed task wrote %d elements", label, bad);
    }
    free(want); free(mag); free(set);
    tc_free(&c);
}

static void test_fused_gemv(void) {
    static const int pos1[1] = {37}, pos3[3] = {0, 5, 2};
    int a, o;
    for (a = 0; a < 3; a++)
        for (o = 0; o < 3; o++) {
            fused_gemv_case(AMK_OP_RMSNORM_GEMV, 0, ACT_DTS[a], ACT_DTS[o], OUT_DTS[o], 1 + 2 * (o % 2), 24, 10, 3, 5, 0, NULL, 0);
            fused_gemv_case(AMK_OP_RMSNORM_SWIGLU, 0, ACT_DTS[a], ACT_DTS[(a + o) % 3], OUT_DTS[o], 1 + (a % 2), 64, 12, 4, 8, 0, NULL, 0);
            fused_gemv_case(AMK_OP_RMSNORM_GEMV, 1, ACT_DTS[a], ACT_DTS[o], OUT_DTS[o], 1, 32, 16, 6, 6, 8, pos1, 0);
            fused_gemv_case(AMK_OP_RMSNORM_GEMV, 3, ACT_DTS[a], ACT_DTS[o], OUT_DTS[o], 3, 16, 24, 10, 12, 8, pos3, 7);
            fused_gemv_case(AMK_OP_RMSNORM_GEMV, 2, ACT_DTS[a], ACT_DTS[o], OUT_DTS[o], 1, 48, 8, 0, 8, 0, pos1, 40);
            fused_gemv_case(AMK_OP_RMSNORM_GEMV, 4, ACT_DTS[a], ACT_DTS[o], OUT_DTS[o], 1 + 2 * (a % 2), 24, 10, 3, 5, 0, NULL, 0);
        }
}

/* RMSNORM_MLP adds (silu(g) * u) @ W_downT[tile] of its tile (and resid, when given) to what out
   held: the start values survive under the sum. */
static void mlp_case(int xdt, int wdt, int M, int K, int N, int H, int n_off, int n_tile, int with_resid) {
    tc c;
    amk_diag d;
    const double eps = 1e-5;
    int x, nw, Wg, Wu, Wd, r = -1, y, ins[6], m, n, h;
    double *want = (double *)calloc((size_t)(M * H), sizeof(double));
    double *mag = (double *)calloc((size_t)(M * H), sizeof(double));
    double a[64], am[64];
    char label[160];
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, K, 0);
    nw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
    Wg = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    Wu = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    Wd = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, H, 0);
    if (with_resid) r = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, H, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, H, 0);
    tfill(&c.b[x], -2, 2);
    tfill(&c.b[nw], 0.5, 1.5);
    tfill(&c.b[Wg], -1, 1);
    tfill(&c.b[Wu], -1, 1);
    tfill(&c.b[Wd], -1, 1);
    if (r >= 0) tfill(&c.b[r], -3, 3);
    tfill(&c.b[y], -1, 1); /* the sum's start */
    ins[0] = x; ins[1] = nw; ins[2] = Wg; ins[3] = Wu; ins[4] = Wd; ins[5] = r;
    tc_task(&c, AMK_OP_RMSNORM_MLP, ins, with_resid ? 6 : 5, y);
    tc_real(&c, "eps", eps);
    tc_int(&c, "K", K);
    tc_int(&c, "N_tile", n_tile);
    tc_int(&c, "n_off", n_off);
    for (m = 0; m < M; m++) {
        want_norm_tile(&c, x, nw, Wg, Wu, m, K, n_off, n_tile, eps, a, am);
        for (h = 0; h < H; h++) {
            double s = c.b[y].v[m * H + h], sm = fabs(s);
            for (n = 0; n < n_tile; n++) {
                s += c.b[Wd].v[(int64_t)(n_off + n) * H + h] * a[n];
                sm += fabs(c.b[Wd].v[(int64_t)(n_off + n) * H + h]) * am[n];
            }
            if (r >= 0) { s += c.b[r].v[m * H + h]; sm += fabs(c.b[r].v[m * H + h]); }
            want[m * H + h] = s;
            mag[m * H + h] = sm;
        }
    }
    snprintf(label, sizeof label, "RMSNORM_MLP x=%s W=%s M=%d K=%d N=%d H=%d tile=[%d,+%d) resid=%d",
             amk_dtype_name(xdt), amk_dtype_name(wdt), M, K, N, H, n_off, n_tile, with_resid);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-5 * sqrt((double)(K + n_tile)), (int64_t)M * H) == 0,
              "%s", label);
    free(want); free(mag);
    tc_free(&c);
}

static void test_mlp_fill(void) {
    int a, o;
    tc c;
    amk_diag d;
    int y, k;
    for (a = 0; a < 3; a++)
        for (o = 0; o < 3; o++) {
            mlp_case(ACT_DTS[a], ACT_DTS[o], 1 + (a % 2), 24, 12, 10, 4, 8, o != 1);
            mlp_case(ACT_DTS[a], ACT_DTS[o], 1, 16, 7, 5, 0, 7, 1);
        }
    /* FILL writes scale (cast) everywhere */
    tc_init(&c);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 2, 3, 5, 0);
    tpoison(&c.b[y]);
    tc_task(&c, AMK_OP_FILL, NULL, 0, y);
    tc_real(&c, "scale", -2.5);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    for (k = 0; k < 15; k++) CHECK(tget(&c.b[y], k) == -2.5);
    tc_free(&c);
}

/* RMSNORM_MLP with FOLD, the tiles [cuts[i], cuts[i+1]) of [0, N) run in turn on one out and one
   qkv: out as mlp_case; each tile adds y[n] W_cat[n] over its n and x[m, k] W_cat[N + k] over its
   base rows k in [n_off*K/N, (n_off+N_tile)*K/N), so the tiles of a partition add every base row
   once: qkv = start + y @ W_fold + x @ W_base, whatever the cuts (uneven ones included). */
static void mlp_fold_case(int xdt, int wdt, int M, int K, int N, int H, int F, const int *cuts, int n_cuts, int with_resid) {
    tc c;
    amk_diag d;
    const double eps = 1e-5;
    int x, nw, Wg, Wu, Wd, Wc, r = -1, y, qk, ins[7], outs[2], m, n, h, f, i, k, ok = 1;
    double *want = (double *)calloc((size_t)(M * H), sizeof(double)), *mag = (double *)calloc((size_t)(M * H), sizeof(double));
    double *qw = (double *)calloc((size_t)(M * F), sizeof(double)), *qm = (double *)calloc((size_t)(M * F), sizeof(double));
    double a[64], am[64];
    char label[160];
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, K, 0);
    nw = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
    Wg = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    Wu = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, K, 0);
    Wd = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N, H, 0);
    Wc = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, N + K, F, 0);
    if (with_resid) r = tc_buf(&c, AMK_KIND_IO_INPUT, xdt, 2, M, H, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, H, 0);
    qk = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, M, F, 0);
    tfill(&c.b[x], -2, 2);
    tfill(&c.b[nw], 0.5, 1.5);
    tfill(&c.b[Wg], -1, 1);
    tfill(&c.b[Wu], -1, 1);
    tfill(&c.b[Wd], -1, 1);
    tfill(&c.b[Wc], -1, 1);
    if (r >= 0) tfill(&c.b[r], -3, 3);
    tfill(&c.b[y], -1, 1); /* the sums' starts */
    tfill(&c.b[qk], -1, 1);
    for (i = 0; i < M * H; i++) { want[i] = c.b[y].v[i]; mag[i] = fabs(want[i]); }
    for (i = 0; i < M * F; i++) { qw[i] = c.b[qk].v[i]; qm[i] = fabs(qw[i]); }
    outs[0] = y; outs[1] = qk;
    for (i = 0; i + 1 < n_cuts; i++) {
        const int n_off = cuts[i], n_tile = cuts[i + 1] - cuts[i];
        ins[0] = x; ins[1] = nw; ins[2] = Wg; ins[3] = Wu; ins[4] = Wd; ins[5] = Wc; ins[6] = r;
        tc_taskn(&c, AMK_OP_RMSNORM_MLP_FOLD, ins, r >= 0 && i == 0 ? 7 : 6, outs, 2);
        tc_real(&c, "eps", eps);
        tc_int(&c, "K", K);
        tc_int(&c, "N_tile", n_tile);
        tc_int(&c, "n_off", n_off);
        ok = ok && tc_exec(&c, &d) == AMK_OK;
        for (m = 0; m < M; m++) {
            want_norm_tile(&c, x, nw, Wg, Wu, m, K, n_off, n_tile, eps, a, am);
            for (h = 0; h < H; h++) {
                for (n = 0; n < n_tile; n++) {
                    want[m * H + h] += c.b[Wd].v[(int64_t)(n_off + n) * H + h] * a[n];
                    mag[m * H + h] += fabs(c.b[Wd].v[(int64_t)(n_off + n) * H + h]) * am[n];
                }
                if (r >= 0 && i == 0) { want[m * H + h] += c.b[r].v[m * H + h]; mag[m * H + h] += fabs(c.b[r].v[m * H + h]); }
            }
            for (f = 0; f < F; f++)
                for (n = 0; n < n_tile; n++) {
                    qw[m * F + f] += c.b[Wc].v[(int64_t)(n_off + n) * F + f] * a[n];
                    qm[m * F + f] += fabs(c.b[Wc].v[(int64_t)(n_off + n) * F + f]) * am[n];
                }
        }
    }
    for (m = 0; m < M; m++) /* every base row once: x @ W_base */
        for (f = 0; f < F; f++)
            for (k = 0; k < K; k++) {
                qw[m * F + f] += c.b[x].v[m * K + k] * c.b[Wc].v[(int64_t)(N + k) * F + f];
                qm[m * F + f] += fabs(c.b[x].v[m * K + k] * c.b[Wc].v[(int64_t)(N + k) * F + f]);
            }
    snprintf(label, sizeof label, "RMSNORM_MLP FOLD x=%s W=%s M=%d K=%d N=%d H=%d F=%d tiles=%d resid=%d",
             amk_dtype_name(xdt), amk_dtype_name(wdt), M, K, N, H, F, n_cuts - 1, with_resid);
    CHECK_MSG(ok, "%s: %s", label, d.message);
    CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-5 * sqrt((double)(K + N)), (int64_t)M * H) == 0, "%s", label);
    CHECK_MSG(cmp_out(label, &c.b[qk], qw, qm, 1e-5 * sqrt((double)(K + N)), (int64_t)M * F) == 0, "%s: qkv", label);
    free(want); free(mag); free(qw); free(qm);
    tc_free(&c);
}

static void test_mlp_fold(void) {
    static const int even[4] = {0, 4, 8, 12}, uneven[4] = {0, 5, 7, 12}, one[2] = {0, 7};
    int a, o;
    for (a = 0; a < 3; a++)
        for (o = 0; o < 3; o++) {
            mlp_fold_case(ACT_DTS[a], ACT_DTS[o], 1 + (a % 2), 8, 12, 10, 9, even, 4, o != 1);
            mlp_fold_case(ACT_DTS[a], ACT_DTS[o], 1, 8, 12, 6, 5, uneven, 4, 1); /* base rows [0,3) [3,4) [4,8) */
        }
    mlp_fold_case(AMK_DTYPE_F32, AMK_DTYPE_F32, 1, 16, 7, 5, 11, one, 2, 0); /* N < K: one tile, all base rows */
}

/* The value x as a buffer of dtype dt holds it (F32, F16 or BF16). */
static double round_dt(int dt, double x) {
    if (dt == AMK_DTYPE_BF16) return bf16_dec(amk_f32_to_bf16((float)x));
    if (dt == AMK_DTYPE_F16) return f16_dec(amk_f32_to_f16((float)x));
    return (float)x;
}

/* ATTENTION_O's expected out (and its magnitude for the tolerance) over H: what buffer y held plus
   a[m_off:+mt] @ W_oT[m_off:+mt] (+ buffer r when r >= 0), a from attn_ref's part (nothing when the
   window cut is empty). */
static void attn_o_want(const tc *c, int y, int Wo, int r, int hd, int H, int m_off, int mt, int cut, const double *part,
                        const double *acc_mag, const double *s_mag, double *want, double *mag) {
    int h, j;
    for (h = 0; h < H; h++) {
        double sum = c->b[y].v[h], sm = fabs(sum);
        for (j = m_off; j < m_off + mt && cut; j++) {
            const int hq = j / hd, e = j % hd;
            const double l = part[hq * (hd + 2) + hd + 1], w = c->b[Wo].v[(int64_t)j * H + h];
            sum += part[hq * (hd + 2) + e] / l * w;
            sm += (acc_mag[hq * hd + e] / l) * fabs(w) * (1 + s_mag[hq]);
        }
        if (r >= 0) { sum += c->b[r].v[h]; sm += fabs(c->b[r].v[h]); }
        want[h] = sum;
        mag[h] = sm;
    }
}

/* ATTENTION_O with PRENORM: inv = 1/sqrt(mean(x^2) + eps); q = RoPE(inv * qkv's Q rows) (pairs (2i,
   2i+1) of a head at angle pos * theta^(-2i/head_dim)), the key and value of row pos of each of its
   kv heads RoPE(inv * K rows) and inv * V rows rounded to the caches' dtype; every other row of the
   window from the caches (whose row pos holds poison the task must not read). A writer (outputs
   [out, k, v]) stores its kv heads' row pos and changes nothing else of the caches. */
static void prenorm_case(int kdt, int xdt, int nh, int nkv, int hd, int max_seq, int start, int len, int pos, int g0,
                         int ng, int m_off, int mt, int H, int with_resid, int writer) {
    tc c;
    amk_diag d;
    const double eps = 1e-5, theta = 10000.0, scale = 1.0 / sqrt((double)hd);
    const int F = (nh + 2 * nkv) * hd;
    int qk, k, v, ps, Wo, x, r = -1, y, ins[7], outs[3], h, j, e, g, bad = 0, cut = pos + 1 - start < len ? pos + 1 - start : len;
    double q[16 * 16], kd[16 * 4 * 16], vd[16 * 4 * 16], part[16 * 18], acc_mag[16 * 16], s_mag[16], want[64], mag[64];
    double ss = 0, inv;
    char label[200];
    if (cut < 0) cut = 0;
    tc_init(&c);
    qk = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, F, 0);
    k = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    v = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    Wo = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, nh * hd, H, 0);
    x = tc_buf(&c, AMK_KIND_ACTIVATION, xdt, 2, 1, H, 0);
    if (with_resid) r = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, H, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, H, 0);
    tfill(&c.b[qk], -2, 2);
    tfill(&c.b[k], -1.5, 1.5);
    tfill(&c.b[v], -2, 2);
    tfill(&c.b[Wo], -1, 1);
    tfill(&c.b[x], -2, 2);
    if (r >= 0) tfill(&c.b[r], -3, 3);
    tfill(&c.b[y], -1, 1); /* the sum's start */
    tset(&c.b[ps], 0, pos);
    for (g = 0; g < nkv && pos < max_seq; g++) /* poison: row pos of the caches is never read */
        for (e = 0; e < hd; e++) { tset(&c.b[k], ((int64_t)pos * nkv + g) * hd + e, 50); tset(&c.b[v], ((int64_t)pos * nkv + g) * hd + e, 50); }
    ins[0] = qk; ins[1] = k; ins[2] = v; ins[3] = ps; ins[4] = Wo; ins[5] = x; ins[6] = r;
    outs[0] = y; outs[1] = k; outs[2] = v;
    tc_taskn(&c, AMK_OP_ATTENTION_O_PRENORM, ins, with_resid ? 7 : 6, outs, writer ? 3 : 1);
    tc_attn_params(&c, hd, nh, nkv, start, len, scale, 0);
    tc_int(&c, "n_off", g0);
    tc_int(&c, "N_tile", ng);
    tc_int(&c, "m_off", m_off);
    tc_int(&c, "M_tile", mt);
    tc_real(&c, "eps", eps);
    tc_real(&c, "theta", theta);
    for (e = 0; e < H; e++) ss += c.b[x].v[e] * c.b[x].v[e];
    inv = 1.0 / sqrt(ss / H + eps);
    memcpy(kd, c.b[k].v, sizeof(double) * (size_t)(max_seq * nkv * hd));
    memcpy(vd, c.b[v].v, sizeof(double) * (size_t)(max_seq * nkv * hd));
    for (h = 0; h < nh + nkv; h++) { /* q of every head, then each kv head's key: rotated */
        double *dst = h < nh ? q + h * hd : kd + ((int64_t)pos * nkv + h - nh) * hd;
        for (e = 0; e < hd; e += 2) {
            const double ang = pos * pow(theta, -(double)e / hd), x1 = inv * c.b[qk].v[h * hd + e], x2 = inv * c.b[qk].v[h * hd + e + 1];
            dst[e] = x1 * cos(ang) - x2 * sin(ang);
            dst[e + 1] = x2 * cos(ang) + x1 * sin(ang);
        }
        if (h >= nh && pos < max_seq)
            for (e = 0; e < hd; e++) {
                dst[e] = round_dt(kdt, dst[e]);
                vd[((int64_t)pos * nkv + h - nh) * hd + e] = round_dt(kdt, inv * c.b[qk].v[(nh + nkv + h - nh) * hd + e]);
            }
    }
    attn_ref(q, kd, vd, nh, nkv, hd, start, cut, scale, part, acc_mag, s_mag);
    attn_o_want(&c, y, Wo, r, hd, H, m_off, mt, cut, part, acc_mag, s_mag, want, mag);
    snprintf(label, sizeof label, "ATTENTION_O PRENORM kv=%s x=%s heads=%d/%d hd=%d window=[%d,+%d) pos=%d kv heads [%d,+%d) rows [%d,+%d) resid=%d writer=%d",
             amk_dtype_name(kdt), amk_dtype_name(xdt), nh, nkv, hd, start, len, pos, g0, ng, m_off, mt, with_resid, writer);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-5 * sqrt((double)(hd + max_seq + mt + H)), H) == 0, "%s", label);
    for (j = 0; j < max_seq * nkv * hd; j++) { /* the caches: row pos of its kv heads when it writes, else as they were */
        const int mine = writer && j / (nkv * hd) == pos && (j / hd) % nkv >= g0 && (j / hd) % nkv < g0 + ng;
        if (mine ? !near_out(kdt, tget(&c.b[k], j), kd[j], fabs(kd[j]), 1e-5) || !near_out(kdt, tget(&c.b[v], j), vd[j], fabs(vd[j]), 1e-5)
                 : tget(&c.b[k], j) != c.b[k].v[j] || tget(&c.b[v], j) != c.b[v].v[j]) {
            if (!bad) fprintf(stderr, "  %s: cache element %d: k %g (want %g) v %g (want %g)\n", label, j, tget(&c.b[k], j),
                              mine ? kd[j] : c.b[k].v[j], tget(&c.b[v], j), mine ? vd[j] : c.b[v].v[j]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %d cache elements wrong", label, bad);
    tset(&c.b[ps], 0, -1); /* a negative position is a run-time error */
    CHECK_MSG(tc_exec(&c, &d) == AMK_ERR_RUNTIME, "%s: negative position accepted", label);
    tset(&c.b[ps], 0, max_seq); /* past the cache: an error for a writer only (the reader's window ends first) */
    CHECK_MSG(tc_exec(&c, &d) == (writer ? AMK_ERR_RUNTIME : AMK_OK), "%s: position past the cache: %s", label, d.message);
    tc_free(&c);
}

static void test_attention_prenorm(void) {
    int a, w;
    for (a = 0; a < 3; a++)
        for (w = 0; w < 2; w++) {
            prenorm_case(ACT_DTS[a], ACT_DTS[(a + w) % 3], 6, 2, 8, 12, 0, 12, 6, 1, 1, 24, 24, 10, w, w);  /* pos mid-cache */
            prenorm_case(ACT_DTS[a], AMK_DTYPE_F32, 6, 2, 4, 12, 0, 12, 11, 0, 2, 5, 7, 9, 1, w);          /* pos the last row */
            prenorm_case(ACT_DTS[a], AMK_DTYPE_F32, 6, 3, 4, 10, 0, 10, 0, 2, 1, 16, 8, 7, 0, w);           /* pos 0: its own key alone */
            prenorm_case(ACT_DTS[a], AMK_DTYPE_F32, 4, 2, 4, 12, 4, 6, 7, 0, 1, 0, 8, 5, 1, w);              /* a window not from row 0 */
        }
}

/* ATTENTION_DECODE: the query heads of kv heads [n_off, n_off+N_tile) over [start, min(start+len,
   pos+1)); the other heads keep their poison. */
static void attn_decode_case(int qdt, int kdt, int odt, int nh, int nkv, int hd, int max_seq, int start, int len,
                             int pos, int g0, int ng, int partial) {
    tc c;
    amk_diag d;
    int q, k, v, ps, y, ins[4], h, e, bad = 0, rep = nh / nkv, cut = pos + 1 - start < len ? pos + 1 - start : len;
    const int rw = partial ? hd + 2 : hd;
    double scale = 1.0 / sqrt((double)hd), part[16 * 18], acc_mag[16 * 16], s_mag[16];
    double rel = 1e-5 * sqrt((double)(hd + len + 1));
    char label[160];
    if (cut < 0) cut = 0;
    tc_init(&c);
    q = tc_buf(&c, AMK_KIND_IO_INPUT, qdt, 2, nh, hd, 0);
    k = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    v = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, partial ? AMK_DTYPE_F32 : odt, 2, nh, rw, 0);
    tfill(&c.b[q], -1.5, 1.5);
    tfill(&c.b[k], -1.5, 1.5);
    tfill(&c.b[v], -2, 2);
    tset(&c.b[ps], 0, pos);
    ins[0] = q; ins[1] = k; ins[2] = v; ins[3] = ps;
    tc_task(&c, AMK_OP_ATTENTION_DECODE, ins, 4, y);
    tc_attn_params(&c, hd, nh, nkv, start, len, scale, partial);
    tc_int(&c, "n_off", g0);
    tc_int(&c, "N_tile", ng);
    tpoison(&c.b[y]);
    snprintf(label, sizeof label, "ATTENTION_DECODE q=%s kv=%s out=%s heads=%d/%d hd=%d window=[%d,+%d) pos=%d kv heads [%d,+%d) partial=%d",
             amk_dtype_name(qdt), amk_dtype_name(kdt), amk_dtype_name(odt), nh, nkv, hd, start, len, pos, g0, ng, partial);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    attn_ref(c.b[q].v, c.b[k].v, c.b[v].v, nh, nkv, hd, start, cut, scale, part, acc_mag, s_mag);
    for (h = 0; h < nh; h++) {
        const int mine = h / rep >= g0 && h / rep < g0 + ng;
        double l = part[h * (hd + 2) + hd + 1];
        for (e = 0; e < rw; e++) {
            double got = tget(&c.b[y], h * rw + e), want, mag;
            if (!mine) { bad += !tpoisoned(&c.b[y], h * rw + e); continue; }
            if (e == hd) { /* m */
                if (cut == 0 ? !(isinf(got) && got < 0) : !near_out(AMK_DTYPE_F32, got, part[h * (hd + 2) + hd], s_mag[h], rel)) bad++;
                continue;
            }
            if (e == hd + 1) { if (!near_out(AMK_DTYPE_F32, got, l, l, rel * (1 + s_mag[h]))) bad++; continue; }
            want = partial ? part[h * (hd + 2) + e] : cut ? part[h * (hd + 2) + e] / l : 0;
            mag = partial ? acc_mag[h * hd + e] : cut ? acc_mag[h * hd + e] / l : 0;
            if (!near_out(partial ? AMK_DTYPE_F32 : odt, got, want, mag + 1e-30, rel * (1 + s_mag[h]))) {
                if (!bad) fprintf(stderr, "  %s: head %d elem %d got %.9g want %.9g\n", label, h, e, got, want);
                bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d bad", label, bad);
    tset(&c.b[ps], 0, -1); /* a negative position is a run-time error */
    CHECK_MSG(tc_exec(&c, &d) == AMK_ERR_RUNTIME, "%s: negative position accepted", label);
    tc_free(&c);
}

static void test_attention_decode(void) {
    int a, o;
    for (a = 0; a < 3; a++)
        for (o = 0; o < 2; o++) {
            attn_decode_case(ACT_DTS[a], ACT_DTS[(a + o) % 3], OUT_DTS[o], 6, 2, 8, 12, 0, 12, 6, 1, 1, o); /* cut at pos */
            attn_decode_case(ACT_DTS[a], ACT_DTS[a], OUT_DTS[o], 6, 2, 4, 12, 4, 8, 20, 0, 2, o);           /* whole window */
            attn_decode_case(ACT_DTS[a], ACT_DTS[a], OUT_DTS[o], 6, 3, 8, 12, 6, 6, 3, 2, 1, o);            /* pos before it: empty */
        }
    attn_decode_case(AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 4, 16, 7, 0, 7, 6, 1, 2, 0); /* MHA */
}

/* ATTENTION_PREFILL: q [M, nh*hd] at positions pos.., its query rows [m0, +mt) and kv heads [g0, +ng)
   against the double reference row by row (rows [max(0, p + 1 - window), p] of the cache at p =
   pos + m); the other rows and heads stay poisoned; positions past the cache are a run-time error. */
static void attn_prefill_case(int qdt, int kdt, int odt, int nh, int nkv, int hd, int max_seq, int M, int pos, int m0,
                              int mt, int g0, int ng, int window) {
    tc c;
    amk_diag d;
    int q, k, v, ps, y, ins[4], m, h, e, bad = 0, rep = nh / nkv;
    double scale = 1.0 / sqrt((double)hd), part[16 * 18], acc_mag[16 * 16], s_mag[16];
    double rel = 1e-5 * sqrt((double)(hd + max_seq + 1));
    char label[200];
    tc_init(&c);
    q = tc_buf(&c, AMK_KIND_IO_INPUT, qdt, 2, M, nh * hd, 0);
    k = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    v = tc_buf(&c, AMK_KIND_KV_CACHE, kdt, 3, max_seq, nkv, hd);
    ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, odt, 2, M, nh * hd, 0);
    tfill(&c.b[q], -1.5, 1.5);
    tfill(&c.b[k], -1.5, 1.5);
    tfill(&c.b[v], -2, 2);
    tset(&c.b[ps], 0, pos);
    ins[0] = q; ins[1] = k; ins[2] = v; ins[3] = ps;
    tc_task(&c, AMK_OP_ATTENTION_PREFILL, ins, 4, y);
    tc_int(&c, "head_dim", hd);
    tc_int(&c, "n_heads", nh);
    tc_int(&c, "n_kv_heads", nkv);
    tc_real(&c, "scale", scale);
    tc_int(&c, "n_off", g0);
    tc_int(&c, "N_tile", ng);
    tc_int(&c, "m_off", m0);
    tc_int(&c, "M_tile", mt);
    if (window) tc_int(&c, "sliding_window", window);
    tpoison(&c.b[y]);
    snprintf(label, sizeof label, "ATTENTION_PREFILL q=%s kv=%s out=%s heads=%d/%d hd=%d M=%d pos=%d rows [%d,+%d) kv heads [%d,+%d) window=%d",
             amk_dtype_name(qdt), amk_dtype_name(kdt), amk_dtype_name(odt), nh, nkv, hd, M, pos, m0, mt, g0, ng, window);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    for (m = 0; m < M; m++) {
        const int p = pos + m, lo = window > 0 && p + 1 - window > 0 ? p + 1 - window : 0;
        attn_ref(c.b[q].v + (int64_t)m * nh * hd, c.b[k].v, c.b[v].v, nh, nkv, hd, lo, p + 1 - lo, scale, part, acc_mag, s_mag);
        for (h = 0; h < nh; h++)
            for (e = 0; e < hd; e++) {
                const int64_t i = ((int64_t)m * nh + h) * hd + e;
                const int mine = m >= m0 && m < m0 + mt && h / rep >= g0 && h / rep < g0 + ng;
                const double l = part[h * (hd + 2) + hd + 1], got = tget(&c.b[y], i);
                if (!mine) { bad += !tpoisoned(&c.b[y], i); continue; }
                if (!near_out(odt, got, part[h * (hd + 2) + e] / l, acc_mag[h * hd + e] / l + 1e-30, rel * (1 + s_mag[h]))) {
                    if (!bad) fprintf(stderr, "  %s: row %d head %d elem %d got %.9g want %.9g\n", label, m, h, e, got,
                                      part[h * (hd + 2) + e] / l);
                    bad++;
                }
            }
    }
    CHECK_MSG(bad == 0, "%s: %d elements wrong", label, bad);
    tset(&c.b[ps], 0, max_seq - m0 - mt + 1); /* the tile's last row past the cache */
    CHECK_MSG(tc_exec(&c, &d) == AMK_ERR_RUNTIME, "%s: a position past the cache accepted", label);
    tset(&c.b[ps], 0, -1);
    CHECK_MSG(tc_exec(&c, &d) == AMK_ERR_RUNTIME, "%s: a negative position accepted", label);
    tc_free(&c);
}

static void test_attention_prefill(void) {
    int a, o;
    for (a = 0; a < 3; a++)
        for (o = 0; o < 3; o++) {
            attn_prefill_case(ACT_DTS[a], ACT_DTS[(a + o) % 3], OUT_DTS[o % 2], 6, 2, 8, 12, 5, 3, 0, 5, 0, 2, 0); /* every row and head */
            attn_prefill_case(ACT_DTS[a], ACT_DTS[a], OUT_DTS[o % 2], 6, 3, 4, 16, 7, 0, 2, 4, 1, 1, 0);          /* a tile from pos 0 */
        }
    attn_prefill_case(AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 1, 16, 20, 9, 6, 0, 9, 0, 1, 4); /* MQA, a window of 4 */
    attn_prefill_case(AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 4, 4, 8, 10, 3, 7, 1, 2, 2, 2, 0); /* MHA, the cache's end */
}

/* ATTENTION_O adds a[m_off:+M_tile] @ W_oT[m_off:+M_tile] (+ resid) to what out held, a the
   attention of kv heads [g0, g0+ng) (F32, not cast). */
static void attn_o_case(int qdt, int wdt, int nh, int nkv, int hd, int max_seq, int pos, int g0, int ng, int m_off,
                        int mt, int H, int with_resid) {
    tc c;
    amk_diag d;
    int q, k, v, ps, Wo, r = -1, y, ins[6], cut = pos + 1 < max_seq ? pos + 1 : max_seq;
    double scale = 1.0 / sqrt((double)hd), part[16 * 18], acc_mag[16 * 16], s_mag[16], want[64], mag[64];
    char label[160];
    tc_init(&c);
    q = tc_buf(&c, AMK_KIND_IO_INPUT, qdt, 2, nh, hd, 0);
    k = tc_buf(&c, AMK_KIND_KV_CACHE, qdt, 3, max_seq, nkv, hd);
    v = tc_buf(&c, AMK_KIND_KV_CACHE, qdt, 3, max_seq, nkv, hd);
    ps = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    Wo = tc_buf(&c, AMK_KIND_WEIGHT, wdt, 2, nh * hd, H, 0);
    if (with_resid) r = tc_buf(&c, AMK_KIND_IO_INPUT, qdt, 2, 1, H, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, H, 0);
    tfill(&c.b[q], -1.5, 1.5);
    tfill(&c.b[k], -1.5, 1.5);
    tfill(&c.b[v], -2, 2);
    tfill(&c.b[Wo], -1, 1);
    if (r >= 0) tfill(&c.b[r], -3, 3);
    tfill(&c.b[y], -1, 1); /* the sum's start */
    tset(&c.b[ps], 0, pos);
    ins[0] = q; ins[1] = k; ins[2] = v; ins[3] = ps; ins[4] = Wo; ins[5] = r;
    tc_task(&c, AMK_OP_ATTENTION_O, ins, with_resid ? 6 : 5, y);
    tc_attn_params(&c, hd, nh, nkv, 0, max_seq, scale, 0);
    tc_int(&c, "n_off", g0);
    tc_int(&c, "N_tile", ng);
    tc_int(&c, "m_off", m_off);
    tc_int(&c, "M_tile", mt);
    attn_ref(c.b[q].v, c.b[k].v, c.b[v].v, nh, nkv, hd, 0, cut, scale, part, acc_mag, s_mag);
    attn_o_want(&c, y, Wo, r, hd, H, m_off, mt, cut, part, acc_mag, s_mag, want, mag);
    snprintf(label, sizeof label, "ATTENTION_O q=%s W=%s heads=%d/%d hd=%d pos=%d kv heads [%d,+%d) rows [%d,+%d) H=%d resid=%d",
             amk_dtype_name(qdt), amk_dtype_name(wdt), nh, nkv, hd, pos, g0, ng, m_off, mt, H, with_resid);
    CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s: %s", label, d.message);
    CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-5 * sqrt((double)(hd + max_seq + mt)), H) == 0, "%s", label);
    tset(&c.b[ps], 0, -1); /* a negative position is a run-time error */
    CHECK_MSG(tc_exec(&c, &d) == AMK_ERR_RUNTIME, "%s: negative position accepted", label);
    tc_free(&c);
}

static void test_attention_o(void) {
    int a, o;
    for (a = 0; a < 3; a++)
        for (o = 0; o < 3; o++) {
            attn_o_case(ACT_DTS[a], ACT_DTS[o], 6, 2, 8, 12, 6, 1, 1, 24, 24, 10, o != 1); /* a whole kv head, cut at pos */
            attn_o_case(ACT_DTS[a], ACT_DTS[o], 6, 2, 4, 12, 20, 0, 2, 5, 7, 9, 1);        /* rows across two heads */
        }
    attn_o_case(AMK_DTYPE_F32, AMK_DTYPE_BF16, 4, 4, 16, 7, 0, 3, 1, 50, 3, 16, 0);      /* MHA, one key */
}

static void test_elementwise(void) {
    static const int64_t sizes[3] = {1, 13, 64};
    int op, a, o, k = 0;
    for (op = 0; op < 6; op++)
        for (a = 0; a < 3; a++)
            for (o = 0; o < 3; o++, k++) {
                tc c;
                amk_diag d;
                int64_t n = sizes[k % 3], i;
                int x0, x1 = -1, y, ins[2], ni = 2;
                double want[64], mag[64], sc = -1.75;
                char label[64];
                static const int ops[6] = {AMK_OP_SILU_MUL, AMK_OP_GELU, AMK_OP_ADD, AMK_OP_MUL, AMK_OP_MUL, AMK_OP_MUL};
                tc_init(&c);
                x0 = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[a], 1, n, 0, 0);
                if (op != 1 && op != 5) x1 = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[(a + o) % 3], 1, op == 4 ? 1 : n, 0, 0);
                if (op == 1 || op == 5) ni = 1;
                y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[o], 1, n, 0, 0);
                tfill(&c.b[x0], -4, 4);
                if (x1 >= 0) tfill(&c.b[x1], -3, 3);
                ins[0] = x0; ins[1] = x1;
                tc_task(&c, ops[op], ins, ni, y);
                if (op == 5) tc_real(&c, "scale", sc);
                tpoison(&c.b[y]);
                CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
                for (i = 0; i < n; i++) {
                    double a0 = c.b[x0].v[i], b0 = x1 >= 0 ? c.b[x1].v[op == 4 ? 0 : i] : sc;
                    switch (op) {
                    case 0: want[i] = a0 / (1 + exp(-a0)) * b0; mag[i] = fabs(want[i]); break;
                    case 1: want[i] = 0.5 * a0 * (1 + erf(a0 / sqrt(2.0))); mag[i] = fabs(a0); break;
                    case 2: want[i] = a0 + b0; mag[i] = fabs(want[i]); break;
                    default: want[i] = a0 * b0; mag[i] = fabs(want[i]); break;
                    }
                }
                snprintf(label, sizeof label, "%s#%d in=%s out=%s n=%d", amk_op_name(ops[op]), op,
                         amk_dtype_name(ACT_DTS[a]), amk_dtype_name(OUT_DTS[o]), (int)n);
                CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-6, n) == 0, "%s", label);
                tc_free(&c);
            }
}

/* ADD, SILU_MUL and RMSNORM over rows [m_off, m_off+M_tile) of out [5, 8]: those rows as the
   whole op computes them (RMSNORM: a norm a row, weight [8]), the others left poisoned. */
static void test_elementwise_rows(void) {
    static const int ops[3] = {AMK_OP_ADD, AMK_OP_SILU_MUL, AMK_OP_RMSNORM};
    int k;
    for (k = 0; k < 3; k++) {
        tc c;
        amk_diag d;
        int x0, x1, y, ins[2], bad = 0;
        int64_t r, h;
        tc_init(&c);
        x0 = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 5, 8, 0);
        x1 = ops[k] == AMK_OP_RMSNORM ? tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, 8, 0, 0)
                                      : tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 5, 8, 0);
        y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 5, 8, 0);
        tfill(&c.b[x0], -2, 2);
        tfill(&c.b[x1], -2, 2);
        ins[0] = x0; ins[1] = x1;
        tc_task(&c, ops[k], ins, 2, y);
        if (ops[k] == AMK_OP_RMSNORM) { tc_real(&c, "eps", 1e-5); tc_int(&c, "hidden", 8); }
        tc_int(&c, "m_off", 1);
        tc_int(&c, "M_tile", 3);
        tpoison(&c.b[y]);
        CHECK_MSG(tc_exec(&c, &d) == AMK_OK, "%s rows: %s", amk_op_name(ops[k]), d.message);
        for (r = 0; r < 5; r++) {
            double ss = 0;
            for (h = 0; h < 8; h++) ss += c.b[x0].v[r * 8 + h] * c.b[x0].v[r * 8 + h];
            for (h = 0; h < 8; h++) {
                const double a = c.b[x0].v[r * 8 + h], b = ops[k] == AMK_OP_RMSNORM ? c.b[x1].v[h] : c.b[x1].v[r * 8 + h];
                const double want = ops[k] == AMK_OP_ADD ? a + b : ops[k] == AMK_OP_SILU_MUL ? a / (1 + exp(-a)) * b
                                  : a / sqrt(ss / 8 + 1e-5) * b;
                if (r < 1 || r > 3) bad += !tpoisoned(&c.b[y], r * 8 + h);
                else bad += !near_out(AMK_DTYPE_F32, tget(&c.b[y], r * 8 + h), want, fabs(want) + 1, 1e-6);
            }
        }
        CHECK_MSG(bad == 0, "%s rows [1, 4): %d bad elements", amk_op_name(ops[k]), bad);
        tc_free(&c);
    }
}

/* BIAS_ADD: out[m, n] = x[m, n] + b[n], every pair of activation dtypes, rows of 1 to 64. */
static void test_bias_add(void) {
    static const int64_t shapes[3][2] = {{1, 1}, {5, 13}, {3, 64}}; /* [M, N] */
    int s, a, o;
    for (s = 0; s < 3; s++)
        for (a = 0; a < 3; a++)
            for (o = 0; o < 3; o++) {
                const int64_t M = shapes[s][0], N = shapes[s][1];
                tc c;
                amk_diag d;
                int x, b, y, ins[2];
                int64_t m, n;
                double want[3 * 64], mag[3 * 64];
                char label[64];
                tc_init(&c);
                x = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[a], 2, M, N, 0);
                b = tc_buf(&c, AMK_KIND_WEIGHT, ACT_DTS[(a + o) % 3], 1, N, 0, 0);
                y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[o], 2, M, N, 0);
                tfill(&c.b[x], -4, 4);
                tfill(&c.b[b], -2, 2);
                ins[0] = x; ins[1] = b;
                tc_task(&c, AMK_OP_BIAS_ADD, ins, 2, y);
                tpoison(&c.b[y]);
                CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
                for (m = 0; m < M; m++)
                    for (n = 0; n < N; n++) {
                        want[m * N + n] = c.b[x].v[m * N + n] + c.b[b].v[n];
                        mag[m * N + n] = fabs(want[m * N + n]);
                    }
                snprintf(label, sizeof label, "BIAS_ADD [%d, %d] x=%s b=%s out=%s", (int)M, (int)N,
                         amk_dtype_name(ACT_DTS[a]), amk_dtype_name(ACT_DTS[(a + o) % 3]), amk_dtype_name(OUT_DTS[o]));
                CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-6, M * N) == 0, "%s", label);
                tc_free(&c);
            }
}

/* DEQUANT: I8, I4, and U8-packed I4, with and without zeros. */
static void test_dequant(void) {
    int k;
    for (k = 0; k < 12; k++) {
        tc c;
        amk_diag d;
        int form = k % 3, q, sc, z = -1, y, ins[3], ni = 2;
        int64_t rows = 2, L = 16, group = k % 2 ? 4 : 16, n = rows * L, e;
        double want[32], mag[32];
        char label[64];
        tc_init(&c);
        if (form == 0) q = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_I8, 2, rows, L, 0);
        else if (form == 1) q = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_I4, 2, rows, L, 0);
        else q = tc_buf(&c, AMK_KIND_WEIGHT, AMK_DTYPE_U8, 2, rows, L / 2, 0);
        sc = tc_buf(&c, AMK_KIND_WEIGHT, ACT_DTS[k % 3], 1, n / group, 0, 0);
        if (k % 4 >= 2) { z = tc_buf(&c, AMK_KIND_WEIGHT, ACT_DTS[(k + 1) % 3], 1, n / group, 0, 0); ni = 3; }
        y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[k % 3], 2, rows, L, 0);
        tfill(&c.b[sc], -0.5, 0.5);
        if (z >= 0) tfill(&c.b[z], -4, 4);
        if (form == 2) { /* bytes with a known nibble pair: low = element 2b, high = 2b+1, each q+8 */
            for (e = 0; e < n; e += 2) {
                int lo = (int)(rnd_u64() % 16), hi = (int)(rnd_u64() % 16);
                c.b[q].data[e / 2] = (unsigned char)(lo | (hi << 4));
                want[e] = lo - 8;
                want[e + 1] = hi - 8;
            }
        } else {
            tfill(&c.b[q], form == 0 ? -128.4 : -8.4, form == 0 ? 127.4 : 7.4);
            for (e = 0; e < n; e++) want[e] = c.b[q].v[e];
        }
        for (e = 0; e < n; e++) { /* want holds q here */
            double zero = z >= 0 ? c.b[z].v[e / group] : 0, s = c.b[sc].v[e / group];
            mag[e] = (fabs(want[e]) + fabs(zero)) * fabs(s);
            want[e] = (want[e] - zero) * s;
        }
        ins[0] = q; ins[1] = sc; ins[2] = z;
        tc_task(&c, AMK_OP_DEQUANT, ins, ni, y);
        tc_int(&c, "qdtype", form == 0 ? AMK_DTYPE_I8 : AMK_DTYPE_I4);
        tc_int(&c, "group", group);
        tpoison(&c.b[y]);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        snprintf(label, sizeof label, "DEQUANT form=%d group=%d zeros=%d out=%s", form, (int)group, z >= 0,
                 amk_dtype_name(OUT_DTS[k % 3]));
        CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-6, n) == 0, "%s", label);
        tc_free(&c);
    }
}

static void test_softmax(void) {
    static const int dims[5] = {-1, 0, 1, -2, 2};
    int k, a, o;
    for (k = 0; k < 5; k++)
        for (a = 0; a < 2; a++)
            for (o = 0; o < 2; o++) {
                tc c;
                amk_diag d;
                int x, y, dim = dims[k], ax, i0, i1, i2, j;
                int64_t sh[3] = {3, 4, 5}, st[3] = {20, 5, 1};
                double want[60], mag[60];
                char label[64];
                tc_init(&c);
                x = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[a * 2], 3, 3, 4, 5);
                y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[o], 1, 60, 0, 0);
                tfill(&c.b[x], -5, 5);
                tc_task(&c, AMK_OP_SOFTMAX, &x, 1, y);
                if (dim != -1) tc_int(&c, "dim", dim);
                tpoison(&c.b[y]);
                CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
                ax = dim < 0 ? dim + 3 : dim;
                for (i0 = 0; i0 < 3; i0++)
                    for (i1 = 0; i1 < 4; i1++)
                        for (i2 = 0; i2 < 5; i2++) {
                            int64_t e = i0 * 20 + i1 * 5 + i2, base = e - (ax == 0 ? i0 : ax == 1 ? i1 : i2) * st[ax];
                            double m = -INFINITY, sum = 0;
                            for (j = 0; j < sh[ax]; j++) m = fmax(m, c.b[x].v[base + j * st[ax]]);
                            for (j = 0; j < sh[ax]; j++) sum += exp(c.b[x].v[base + j * st[ax]] - m);
                            want[e] = exp(c.b[x].v[e] - m) / sum;
                            mag[e] = want[e];
                        }
                snprintf(label, sizeof label, "SOFTMAX dim=%d x=%s out=%s", dim, amk_dtype_name(ACT_DTS[a * 2]),
                         amk_dtype_name(OUT_DTS[o]));
                CHECK_MSG(cmp_out(label, &c.b[y], want, mag, 1e-5 * sqrt(5.0), 60) == 0, "%s", label);
                tc_free(&c);
            }
}

static void test_allreduce(void) {
    static const int counts[3] = {1, 3, 8};
    int k, p, i;
    for (k = 0; k < 3; k++) {
        tc c;
        amk_diag d;
        int ins[8], y;
        double want[10], mag[10];
        tc_init(&c);
        for (p = 0; p < counts[k]; p++) {
            ins[p] = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[(p + k) % 3], 1, 10, 0, 0);
            tfill(&c.b[ins[p]], -3, 3);
        }
        y = tc_buf(&c, AMK_KIND_ACTIVATION, OUT_DTS[k], 1, 10, 0, 0);
        tc_task(&c, AMK_OP_ALLREDUCE_SHARD, ins, counts[k], y);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        for (i = 0; i < 10; i++) {
            want[i] = mag[i] = 0;
            for (p = 0; p < counts[k]; p++) { want[i] += c.b[ins[p]].v[i]; mag[i] += fabs(c.b[ins[p]].v[i]); }
        }
        CHECK(cmp_out("ALLREDUCE_SHARD", &c.b[y], want, mag, 1e-6 * counts[k], 10) == 0);
        tc_free(&c);
    }
    { /* the sum runs in input order in fp32: (1e8 + 1) - 1e8 == 0, any other order gives 1 */
        tc c;
        amk_diag d;
        int ins[3], y;
        tc_init(&c);
        for (p = 0; p < 3; p++) ins[p] = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, 1, 0, 0);
        y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 1, 0, 0);
        tset(&c.b[ins[0]], 0, 1e8);
        tset(&c.b[ins[1]], 0, 1);
        tset(&c.b[ins[2]], 0, -1e8);
        tc_task(&c, AMK_OP_ALLREDUCE_SHARD, ins, 3, y);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        CHECK(tget(&c.b[y], 0) == 0.0);
        tc_free(&c);
    }
}

static void test_kv_append(void) {
    static const int cdts[3] = {AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F16};
    static const int poss[3] = {0, 3, 5};
    int a, b, p;
    for (a = 0; a < 3; a++)
        for (b = 0; b < 2; b++)
            for (p = 0; p < 3; p++) {
                tc c;
                amk_diag d;
                int nw, cache, ins[2], bad = 0;
                int64_t R = 8, i;
                unsigned char *before;
                const amk_task *t;
                void *in_ptrs[2], *out_ptrs[1];
                tc_init(&c);
                nw = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[b * 2], 2, 2, 4, 0);
                cache = tc_buf(&c, AMK_KIND_KV_CACHE, cdts[a], 3, 6, 2, 4);
                tfill(&c.b[nw], -3, 3);
                tfill(&c.b[cache], -3, 3);
                before = (unsigned char *)malloc(c.b[cache].nbytes);
                memcpy(before, c.b[cache].data, c.b[cache].nbytes);
                ins[0] = nw; ins[1] = cache;
                tc_task(&c, AMK_OP_KV_APPEND, ins, 2, cache);
                tc_int(&c, "pos", poss[p]);
                t = &c.p->tasks[c.task];
                in_ptrs[0] = c.b[nw].data;
                in_ptrs[1] = out_ptrs[0] = c.b[cache].data; /* in place */
                CHECK_EQ_INT(amk_ref_exec(c.p, t, in_ptrs, out_ptrs, &d), AMK_OK);
                for (i = 0; i < 6 * R; i++) {
                    size_t w = (size_t)amk_dtype_bits(cdts[a]) / 8;
                    if (i / R == poss[p]) {
                        if (!near_out(cdts[a], tget(&c.b[cache], i), c.b[nw].v[i % R], fabs(c.b[nw].v[i % R]), 0)) bad++;
                    } else if (memcmp(before + i * w, c.b[cache].data + i * w, w) != 0) {
                        bad++;
                    }
                }
                CHECK_MSG(bad == 0, "KV_APPEND cache=%s new=%s pos=%d: %d bad", amk_dtype_name(cdts[a]),
                          amk_dtype_name(ACT_DTS[b * 2]), poss[p], bad);
                free(before);
                tc_free(&c);
            }
}

static void test_argmax(void) {
    static const int odts[3] = {AMK_DTYPE_I32, AMK_DTYPE_I8, AMK_DTYPE_U8};
    /* rows: a tie (first wins), NaNs never win, all NaN -> 0, all -inf -> 0 */
    static const double rows[4][5] = {{1, 3, 3, 2, 0}, {NAN, -1, NAN, -0.5, -0.5},
                                      {NAN, NAN, NAN, NAN, NAN}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    static const int want[4] = {1, 3, 0, 0};
    int a, o, r, j;
    for (a = 0; a < 2; a++)
        for (o = 0; o < 3; o++) {
            tc c;
            amk_diag d;
            int x, y;
            tc_init(&c);
            x = tc_buf(&c, AMK_KIND_IO_INPUT, ACT_DTS[a * 2], 3, 2, 2, 5);
            y = tc_buf(&c, AMK_KIND_IO_OUTPUT, odts[o], 2, 2, 2, 0);
            for (r = 0; r < 4; r++)
                for (j = 0; j < 5; j++) tset(&c.b[x], r * 5 + j, rows[r][j]);
            tc_task(&c, AMK_OP_SAMPLE_ARGMAX, &x, 1, y);
            tpoison(&c.b[y]);
            CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
            for (r = 0; r < 4; r++) CHECK_EQ_INT(tget(&c.b[y], r), want[r]);
            tc_free(&c);
        }
    { /* random rows against a plain argmax */
        tc c;
        amk_diag d;
        int x, y, r2, best;
        tc_init(&c);
        x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 7, 300, 0);
        y = tc_buf(&c, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 7, 0, 0);
        tfill(&c.b[x], -10, 10);
        tc_task(&c, AMK_OP_SAMPLE_ARGMAX, &x, 1, y);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        for (r2 = 0; r2 < 7; r2++) {
            best = 0;
            for (j = 1; j < 300; j++)
                if (c.b[x].v[r2 * 300 + j] > c.b[x].v[r2 * 300 + best]) best = j;
            CHECK_EQ_INT(tget(&c.b[y], r2), best);
        }
        tc_free(&c);
    }
}


/* ARGMAX_PARTIAL over column ranges, then ARGMAX_COMBINE: the pairs themselves (an all-NaN range
   gives (NaN, -1)), SAMPLE_ARGMAX's answer on the rows of test_argmax and on random rows, and
   pairs whose index is no index (NaN, negative, 2^31) never win. */
/* ARGMAX_PARTIAL tasks of x into pr, part k over columns [cut[k], cut[k+1]) for k < n; run. */
static void argmax_parts(tc *c, int x, int pr, const int *cut, int n) {
    amk_diag d;
    int k;
    for (k = 0; k < n; k++) {
        tc_task(c, AMK_OP_ARGMAX_PARTIAL, &x, 1, pr);
        tc_int(c, "n_off", cut[k]); tc_int(c, "N_tile", cut[k + 1] - cut[k]); tc_int(c, "part", k);
        CHECK_EQ_INT(tc_exec(c, &d), AMK_OK);
    }
}

static void test_argmax_pairs(void) {
    static const double rows[4][5] = {{1, 3, 3, 2, 0}, {NAN, -1, NAN, -0.5, -0.5},
                                      {NAN, NAN, NAN, NAN, NAN}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    static const int want[4] = {1, 3, 0, 0}, cut3[4] = {0, 2, 3, 5};
    /* the pairs (value, index) per row and part; NaN value with index -1: no candidate */
    static const double pairs[4][6] = {{3, 1, 3, 2, 2, 3}, {-1, 1, NAN, -1, -0.5, 3}, {NAN, -1, NAN, -1, NAN, -1},
                                       {-INFINITY, 0, -INFINITY, 2, -INFINITY, 3}};
    tc c;
    amk_diag d;
    int x, pr, y, r, j, seed;
    tc_init(&c);
    x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, 4, 5, 0);
    pr = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 4, 6, 0);
    y = tc_buf(&c, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 4, 0, 0);
    for (r = 0; r < 4; r++)
        for (j = 0; j < 5; j++) tset(&c.b[x], r * 5 + j, rows[r][j]);
    tpoison(&c.b[pr]);
    argmax_parts(&c, x, pr, cut3, 3);
    for (r = 0; r < 4; r++)
        for (j = 0; j < 6; j++) {
            double g = tget(&c.b[pr], r * 6 + j), w = pairs[r][j];
            CHECK_MSG(g == w || (g != g && w != w), "pair row %d [%d]: %g, want %g", r, j, g, w);
        }
    tc_task(&c, AMK_OP_ARGMAX_COMBINE, &pr, 1, y);
    tpoison(&c.b[y]);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    for (r = 0; r < 4; r++) CHECK_EQ_INT(tget(&c.b[y], r), want[r]);
    tc_free(&c);
    for (seed = 0; seed < 3; seed++) { /* random rows, 300 columns in 4 uneven parts */
        static const int cut[5] = {0, 77, 78, 200, 300};
        int ya;
        tc_init(&c);
        x = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 7, 300, 0);
        pr = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 7, 8, 0);
        y = tc_buf(&c, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 7, 0, 0);
        ya = tc_buf(&c, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 7, 0, 0);
        tfill(&c.b[x], -10, 10);
        if (seed == 1) /* a tie across two parts: the first index wins */
            for (r = 0; r < 7; r++) { tset(&c.b[x], r * 300 + 76, 11); tset(&c.b[x], r * 300 + 250, 11); }
        argmax_parts(&c, x, pr, cut, 4);
        tc_task(&c, AMK_OP_ARGMAX_COMBINE, &pr, 1, y);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        tc_task(&c, AMK_OP_SAMPLE_ARGMAX, &x, 1, ya);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        for (r = 0; r < 7; r++) {
            CHECK_EQ_INT(tget(&c.b[y], r), tget(&c.b[ya], r));
            if (seed == 1) CHECK_EQ_INT(tget(&c.b[y], r), 76);
        }
        tc_free(&c);
    }
    { /* indices that are no index */
        static const double bad[10] = {9, NAN, 8, -3, 7, 2147483648.0, 4, 2, 4, 1};
        tc_init(&c);
        pr = tc_buf(&c, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, 10, 0);
        y = tc_buf(&c, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
        for (j = 0; j < 10; j++) tset(&c.b[pr], j, bad[j]);
        tc_task(&c, AMK_OP_ARGMAX_COMBINE, &pr, 1, y);
        CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
        CHECK_EQ_INT(tget(&c.b[y], 0), 1);
        tc_free(&c);
    }
}

/* A partial with l = 0 weighs nothing, even when its m is the largest. */
static void test_combine_zero_l(void) {
    tc c;
    amk_diag d;
    int a, b, y, ins[2], e;
    tc_init(&c);
    a = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, 4, 0);
    b = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, 4, 0);
    y = tc_buf(&c, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, 2, 0);
    tset(&c.b[a], 0, 3); tset(&c.b[a], 1, -1); tset(&c.b[a], 2, 0.5); tset(&c.b[a], 3, 2);
    tset(&c.b[b], 0, 100); tset(&c.b[b], 1, 100); tset(&c.b[b], 2, 5); tset(&c.b[b], 3, 0);
    ins[0] = a; ins[1] = b;
    tc_task(&c, AMK_OP_ATTENTION_COMBINE, ins, 2, y);
    tc_int(&c, "head_dim", 2);
    CHECK_EQ_INT(tc_exec(&c, &d), AMK_OK);
    for (e = 0; e < 2; e++) CHECK_NEAR(tget(&c.b[y], e), c.b[a].v[e] / 2.0, 1e-6);
    tc_free(&c);
}

/* ==== the VM: create, bind, run ============================================================== */

/* Adds a task with waits (counter, threshold pairs, -1 terminated) and returns its index. */
static int vm_task(amk_program *p, int op, const int *ins, int n_in, int out, int signal, const int *waits) {
    int outs[1], t, i;
    outs[0] = out;
    t = amk_program_add_task(p, op, ins, n_in, outs, out >= 0 ? 1 : 0, signal, amk_op_name(op));
    for (i = 0; waits && waits[i] >= 0; i += 2) amk_task_add_wait(p, t, waits[i], waits[i + 1]);
    return t;
}

/* A small multi-branch program:
     h = RMSNORM(x, wn); y[:, 0:4], y[:, 4:8], y[:, 8:12] = three GEMV tiles of h (one counter);
     g = GELU(x); g2 = GEMV(g) (one tile); s = y + g2; sm = SOFTMAX(s); tok = ARGMAX(sm);
     probs = COPY(sm). The task list is deliberately not in dependency order. */
enum { VX, VWN, VW, VH, VY, VG, VG2, VS, VSM, VTOK, VPROBS };
static amk_program *vm_program(void) {
    amk_program *p = amk_program_create();
    int64_t s2x16[2] = {2, 16}, s16[1] = {16}, s12x16[2] = {12, 16}, s2x12[2] = {2, 12}, s2[1] = {2};
    int c[8], i, ins[2], w[5];
    amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s2x16, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "wn", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, s16, AMK_SPACE_HBM, "wn");
    amk_program_add_buffer(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, s12x16, AMK_SPACE_HBM, "W");
    amk_program_add_buffer(p, "h", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2x16, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "y", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2x12, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "g", AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 2, s2x16, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "g2", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2x12, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "s", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2x12, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "sm", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2x12, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "tok", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, s2, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "probs", AMK_KIND_IO_OUTPUT, AMK_DTYPE_BF16, 2, s2x12, AMK_SPACE_HBM, NULL);
    for (i = 0; i < 8; i++) c[i] = amk_program_add_counter(p, "");
    /* ADD s = y + g2 (waits all three tiles and g2) */
    ins[0] = VY; ins[1] = VG2;
    w[0] = c[1]; w[1] = 3; w[2] = c[3]; w[3] = 1; w[4] = -1;
    vm_task(p, AMK_OP_ADD, ins, 2, VS, c[4], w);
    for (i = 0; i < 3; i++) { /* GEMV tiles of h */
        int t;
        ins[0] = VH; ins[1] = VW;
        w[0] = c[0]; w[1] = 1; w[2] = -1;
        t = vm_task(p, AMK_OP_GEMV_TILE, ins, 2, VY, c[1], w);
        amk_task_set_int(p, t, "K", 16);
        amk_task_set_int(p, t, "N_tile", 4);
        amk_task_set_int(p, t, "n_off", 4 * i);
    }
    ins[0] = VSM;
    w[0] = c[5]; w[1] = 1; w[2] = -1;
    vm_task(p, AMK_OP_SAMPLE_ARGMAX, ins, 1, VTOK, c[6], w);
    vm_task(p, AMK_OP_COPY, ins, 1, VPROBS, c[7], w);
    ins[0] = VX;
    i = vm_task(p, AMK_OP_GELU, ins, 1, VG, c[2], NULL);
    ins[0] = VG; ins[1] = VW;
    w[0] = c[2]; w[1] = 1; w[2] = -1;
    i = vm_task(p, AMK_OP_GEMV_TILE, ins, 2, VG2, c[3], w);
    amk_task_set_int(p, i, "K", 16);
    amk_task_set_int(p, i, "N_tile", 12);
    amk_task_set_int(p, i, "n_off", 0);
    ins[0] = VS;
    w[0] = c[4]; w[1] = 1; w[2] = -1;
    vm_task(p, AMK_OP_SOFTMAX, ins, 1, VSM, c[5], w);
    ins[0] = VX; ins[1] = VWN;
    i = vm_task(p, AMK_OP_RMSNORM, ins, 2, VH, c[0], NULL);
    amk_task_set_int(p, i, "hidden", 16);
    amk_task_set_real(p, i, "eps", 1e-6);
    return p;
}

static void test_vm_run_orders(void) {
    amk_program *p = vm_program();
    amk_refvm *vm = NULL;
    amk_diag d;
    float x[32], wn[16];
    uint16_t W[192];
    double xd[32], wnd[16], Wd[192], h[32], g[32], s[24], sm[24];
    unsigned char *snap[11];
    size_t nb[11];
    int i, k, r, seed, bad = 0;
    for (i = 0; i < 32; i++) { x[i] = (float)rnd_in(-2, 2); xd[i] = x[i]; }
    for (i = 0; i < 16; i++) { wn[i] = (float)rnd_in(0.5, 1.5); wnd[i] = wn[i]; }
    for (i = 0; i < 192; i++) { W[i] = amk_f32_to_bf16((float)rnd_in(-1, 1)); Wd[i] = bf16_dec(W[i]); }
    amk_diag_clear(&d);
    CHECK_MSG(amk_refvm_create(p, &vm, &d) == AMK_OK, "create: [%s] %s", d.check, d.message);
    if (!vm) { amk_program_free(p); return; }
    CHECK_EQ_INT(amk_refvm_bind(vm, VWN, wn, sizeof wn), AMK_OK);
    CHECK_EQ_INT(amk_refvm_bind(vm, VW, W, sizeof W), AMK_OK);
    CHECK(amk_refvm_buffer(vm, VW, &nb[0]) == (void *)W && nb[0] == sizeof W);
    memcpy(amk_refvm_buffer(vm, VX, NULL), x, sizeof x);
    CHECK_MSG(amk_refvm_run(vm, NULL, &d) == AMK_OK, "run: %s", d.message);
    /* against double math: rmsnorm, three tiles + gelu/gemv branch, add, softmax */
    for (r = 0; r < 2; r++) {
        double ss = 0;
        for (k = 0; k < 16; k++) ss += xd[r * 16 + k] * xd[r * 16 + k];
        for (k = 0; k < 16; k++) {
            h[r * 16 + k] = xd[r * 16 + k] / sqrt(ss / 16 + 1e-6) * wnd[k];
            g[r * 16 + k] = bf16_dec(amk_f32_to_bf16((float)(0.5 * xd[r * 16 + k] * (1 + erf(xd[r * 16 + k] / sqrt(2.0))))));
        }
        for (i = 0; i < 12; i++) {
            double y = 0, g2 = 0;
            for (k = 0; k < 16; k++) { y += h[r * 16 + k] * Wd[i * 16 + k]; g2 += g[r * 16 + k] * Wd[i * 16 + k]; }
            s[r * 12 + i] = y + g2;
        }
        {
            double m = -INFINITY, sum = 0;
            for (i = 0; i < 12; i++) m = fmax(m, s[r * 12 + i]);
            for (i = 0; i < 12; i++) sum += exp(s[r * 12 + i] - m);
            for (i = 0; i < 12; i++) sm[r * 12 + i] = exp(s[r * 12 + i] - m) / sum;
        }
    }
    {
        const float *got = (const float *)amk_refvm_buffer(vm, VSM, NULL);
        const int32_t *tok = (const int32_t *)amk_refvm_buffer(vm, VTOK, NULL);
        for (i = 0; i < 24; i++) bad += !(fabs(got[i] - sm[i]) <= 1e-4 * (sm[i] + 1e-3));
        CHECK_EQ_INT(bad, 0);
        for (r = 0; r < 2; r++) {
            int best = 0;
            for (i = 1; i < 12; i++) if (got[r * 12 + i] > got[r * 12 + best]) best = i;
            CHECK_EQ_INT(tok[r], best);
        }
    }
    for (i = 0; i < 11; i++) {
        const void *src = amk_refvm_buffer(vm, i, &nb[i]);
        snap[i] = (unsigned char *)malloc(nb[i]);
        memcpy(snap[i], src, nb[i]);
    }
    /* seeded random orders: bitwise the same as list order */
    for (seed = 1; seed <= 20; seed++) {
        amk_refvm_opts o;
        o.seed = (uint64_t)seed;
        for (i = VH; i < 11; i++) memset(amk_refvm_buffer(vm, i, NULL), 0xAB, nb[i]);
        CHECK_MSG(amk_refvm_run(vm, &o, &d) == AMK_OK, "seed %d: %s", seed, d.message);
        for (i = 0; i < 11; i++) CHECK_MSG(memcmp(snap[i], amk_refvm_buffer(vm, i, NULL), nb[i]) == 0,
                                           "seed %d: buffer %d differs from list order", seed, i);
    }
    for (i = 0; i < 11; i++) free(snap[i]);
    amk_refvm_free(vm);
    amk_program_free(p);
}

static void test_vm_bind_and_buffers(void) {
    amk_program *p = vm_program();
    amk_refvm *vm = NULL;
    amk_diag d;
    float wn[16], small[4], ys[24];
    size_t n = 123;
    CHECK_EQ_INT(amk_refvm_create(p, &vm, &d), AMK_OK);
    if (!vm) { amk_program_free(p); return; }
    memset(wn, 0, sizeof wn);
    CHECK_EQ_INT(amk_refvm_bind(vm, VH, wn, sizeof(float) * 32), AMK_ERR_INVALID_ARG); /* activation */
    CHECK_EQ_INT(amk_refvm_bind(vm, VTOK, wn, 8), AMK_ERR_INVALID_ARG);                /* output */
    CHECK_EQ_INT(amk_refvm_bind(vm, VWN, small, sizeof small), AMK_ERR_MISMATCH);
    CHECK_EQ_INT(amk_refvm_bind(vm, 99, wn, sizeof wn), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_refvm_bind(vm, -1, wn, sizeof wn), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_refvm_bind(NULL, VWN, wn, sizeof wn), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_refvm_bind(vm, VWN, NULL, sizeof wn), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_refvm_bind(vm, VX, wn, 128), AMK_OK); /* IO_INPUT binds too */
    {   /* bind_storage takes a buffer the VM writes: its storage becomes the caller's (ys) */
        CHECK_EQ_INT(amk_refvm_bind_storage(vm, VY, ys, sizeof ys), AMK_OK);
        CHECK(amk_refvm_buffer(vm, VY, NULL) == (void *)ys);
        CHECK_EQ_INT(amk_refvm_bind_storage(vm, VY, ys, 8), AMK_ERR_MISMATCH);
        CHECK_EQ_INT(amk_refvm_bind_storage(vm, 99, ys, sizeof ys), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_refvm_bind_storage(vm, VY, NULL, sizeof ys), AMK_ERR_INVALID_ARG);
        memset(ys, 0, sizeof ys);
    }
    CHECK(amk_refvm_buffer(vm, 99, &n) == NULL && n == 0);
    CHECK(amk_refvm_buffer(vm, VY, &n) != NULL && n == 2 * 12 * 4);
    {   /* fresh storage is zeroed */
        const unsigned char *y = (const unsigned char *)amk_refvm_buffer(vm, VS, NULL);
        size_t i, nz = 0;
        for (i = 0; i < 96; i++) nz += y[i] != 0;
        CHECK_EQ_INT(nz, 0);
    }
    amk_refvm_free(vm);
    vm = (amk_refvm *)&n; /* create clears *out even when it fails */
    CHECK_EQ_INT(amk_refvm_create(NULL, &vm, &d), AMK_ERR_INVALID_ARG);
    CHECK(vm == NULL);
    CHECK_EQ_INT(amk_refvm_run(NULL, NULL, &d), AMK_ERR_INVALID_ARG);
    amk_refvm_free(NULL);
    amk_program_free(p);
}

/* A reference VM of p with one task of op on buffers 0 and 1, out its output, its param key = v
   (its index in *t); NULL (a failed check) if it does not create. */
static amk_refvm *vm_one_task(amk_program *p, int op, int out, const char *key, int64_t v, int *t) {
    int ins[2] = {0, 1};
    amk_refvm *vm = NULL;
    amk_diag d;
    *t = vm_task(p, op, ins, 2, out, amk_program_add_counter(p, ""), NULL);
    amk_task_set_int(p, *t, key, v);
    CHECK_EQ_INT(amk_refvm_create(p, &vm, &d), AMK_OK);
    return vm;
}

/* Params can change between runs; the run re-checks them. A bad id at run time is RUNTIME. */
static void test_vm_errors_at_run(void) {
    amk_program *p = amk_program_create();
    int64_t s3[1] = {3}, s5x4[2] = {5, 4}, s3x4[2] = {3, 4};
    int t;
    amk_refvm *vm = NULL;
    amk_diag d;
    int32_t *ids;
    amk_program_add_buffer(p, "ids", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, s3, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "table", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, s5x4, AMK_SPACE_HBM, "table");
    amk_program_add_buffer(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, s3x4, AMK_SPACE_HBM, NULL);
    vm = vm_one_task(p, AMK_OP_EMBED, 2, "hidden", 4, &t);
    if (!vm) { amk_program_free(p); return; }
    ids = (int32_t *)amk_refvm_buffer(vm, 0, NULL);
    ids[0] = 1; ids[1] = 4; ids[2] = 0;
    CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_OK);
    ids[1] = 5;
    CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_ERR_RUNTIME);
    CHECK_EQ_INT(d.task, 0);
    CHECK(strstr(d.message, "5") != NULL);
    amk_refvm_free(vm);
    amk_program_free(p);
    { /* a KV_APPEND whose pos moves past the cache */
        int64_t s4[1] = {4}, s8x4[2] = {8, 4};
        p = amk_program_create();
        amk_program_add_buffer(p, "k", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, s4, AMK_SPACE_HBM, NULL);
        amk_program_add_buffer(p, "cache", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 2, s8x4, AMK_SPACE_HBM, NULL);
        vm = vm_one_task(p, AMK_OP_KV_APPEND, 1, "pos", 7, &t);
        if (!vm) { amk_program_free(p); return; }
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_OK);
        amk_task_set_int(p, t, "pos", 8); /* no longer inside the cache */
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_ERR_REJECTED);
        CHECK_STR(d.check, "PARAM_VALUE");
        CHECK_EQ_INT(d.task, 0);
        amk_refvm_free(vm);
        amk_program_free(p);
    }
}

/* Two tasks waiting on each other: rejected at create (CYCLE), or STUCK at run. */
static void test_vm_stuck(void) {
    amk_program *p = amk_program_create();
    amk_refvm *vm = NULL;
    amk_diag d;
    amk_result r;
    int c0 = amk_program_add_counter(p, ""), c1 = amk_program_add_counter(p, "");
    int c2 = amk_program_add_counter(p, ""), w[3];
    w[0] = c1; w[1] = 1; w[2] = -1;
    vm_task(p, AMK_OP_NOP, NULL, 0, -1, c0, w);
    w[0] = c0;
    vm_task(p, AMK_OP_NOP, NULL, 0, -1, c1, w);
    vm_task(p, AMK_OP_NOP, NULL, 0, -1, c2, NULL); /* this one can fire */
    amk_diag_clear(&d);
    r = amk_refvm_create(p, &vm, &d);
    CHECK(r == AMK_OK || r == AMK_ERR_REJECTED);
    if (r == AMK_OK) {
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_ERR_STUCK);
        CHECK_EQ_INT(d.task, 0);
        CHECK_EQ_INT(d.counter, c1);
        CHECK(strstr(d.message, "2 of 3") != NULL);
        CHECK(strstr(d.message, "task 1 waits counter 0 >= 1") != NULL);
    } else {
        CHECK(d.check[0] != 0);
    }
    amk_refvm_free(vm);
    amk_program_free(p);
    /* a valid chain whose wait is raised after create (waits are re-read every run): STUCK */
    p = amk_program_create();
    vm = NULL;
    c0 = amk_program_add_counter(p, "");
    c1 = amk_program_add_counter(p, "");
    vm_task(p, AMK_OP_NOP, NULL, 0, -1, c0, NULL);
    w[0] = c0; w[1] = 1; w[2] = -1;
    vm_task(p, AMK_OP_NOP, NULL, 0, -1, c1, w);
    CHECK_MSG(amk_refvm_create(p, &vm, &d) == AMK_OK, "[%s] %s", d.check, d.message);
    if (vm) {
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_OK);
        p->tasks[1].waits[0].threshold = 2;
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_ERR_STUCK);
        CHECK_EQ_INT(d.task, 1);
        CHECK_EQ_INT(d.counter, c0);
        CHECK_STR(d.message, "no task is ready but 1 of 2 never fired: task 1 waits counter 0 >= 2 (at 1);");
    }
    amk_refvm_free(vm);
    amk_program_free(p);
}

/* 20000 tasks in a chain listed in reverse: the walk stays fast (ready heap, per-counter lists). */
static void test_vm_many_tasks(void) {
    enum { N = 20000 };
    amk_program *p = amk_program_create();
    amk_refvm *vm = NULL;
    amk_diag d;
    amk_refvm_opts o;
    int i, w[3];
    clock_t t0 = clock();
    for (i = 0; i < N; i++) amk_program_add_counter(p, NULL);
    for (i = 0; i < N; i++) { /* task i signals counter i and waits for counter i+1 */
        w[0] = i + 1; w[1] = 1; w[2] = -1;
        vm_task(p, AMK_OP_NOP, NULL, 0, -1, i, i + 1 < N ? w : NULL);
    }
    CHECK_MSG(amk_refvm_create(p, &vm, &d) == AMK_OK, "[%s] %s", d.check, d.message);
    if (vm) {
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_OK);
        o.seed = 99;
        CHECK_EQ_INT(amk_refvm_run(vm, &o, &d), AMK_OK);
    }
    CHECK_MSG((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0, "%.2f s", (double)(clock() - t0) / CLOCKS_PER_SEC);
    amk_refvm_free(vm);
    amk_program_free(p);
}

/* Buffers on one page share its storage; the page is sized for the largest of them. */
static void test_vm_pages(void) {
    amk_program *p = amk_program_create();
    int64_t s8[1] = {8}, s2x4[2] = {2, 4};
    amk_refvm *vm = NULL;
    amk_diag d;
    int c[4], ins[1], w[3], i;
    size_t na, nb;
    float *x;
    amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, s8, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "a", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, s8, AMK_SPACE_GLOBAL_SCRATCH, NULL);
    amk_program_add_buffer(p, "c", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, s8, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "b", AMK_KIND_ACTIVATION, AMK_DTYPE_F16, 2, s2x4, AMK_SPACE_GLOBAL_SCRATCH, NULL);
    amk_program_add_buffer(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, s8, AMK_SPACE_HBM, NULL);
    for (i = 0; i < 4; i++) c[i] = amk_program_add_counter(p, "");
    ins[0] = 0;
    vm_task(p, AMK_OP_COPY, ins, 1, 1, c[0], NULL);        /* a = x */
    ins[0] = 1; w[0] = c[0]; w[1] = 1; w[2] = -1;
    vm_task(p, AMK_OP_COPY, ins, 1, 2, c[1], w);           /* c = a (a's last use) */
    ins[0] = 2; w[0] = c[1];
    vm_task(p, AMK_OP_COPY, ins, 1, 3, c[2], w);           /* b = c, reusing a's page */
    ins[0] = 3; w[0] = c[2];
    vm_task(p, AMK_OP_COPY, ins, 1, 4, c[3], w);           /* out = b */
    p->has_pages = 1;
    p->n_pages = 1;
    p->pages = (amk_page *)calloc(1, sizeof(amk_page));
    p->pages[0].space = AMK_SPACE_GLOBAL_SCRATCH;
    p->pages[0].nbytes = 32;
    p->pages[0].live_start = p->pages[0].live_end = -1;
    p->buffer_page = (int *)malloc(5 * sizeof(int));
    for (i = 0; i < 5; i++) p->buffer_page[i] = i == 1 || i == 3 ? 0 : -1;
    CHECK_MSG(amk_refvm_create(p, &vm, &d) == AMK_OK, "[%s] %s", d.check, d.message);
    if (vm) {
        CHECK(amk_refvm_buffer(vm, 1, &na) == amk_refvm_buffer(vm, 3, &nb));
        CHECK(na == 32 && nb == 16);
        x = (float *)amk_refvm_buffer(vm, 0, NULL);
        for (i = 0; i < 8; i++) x[i] = 0.25f * (float)i - 1.0f; /* exact in F16 */
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_OK);
        for (i = 0; i < 8; i++) CHECK(((float *)amk_refvm_buffer(vm, 4, NULL))[i] == x[i]);
    }
    amk_refvm_free(vm);
    amk_program_free(p);
}

/* The KV cache persists across runs; KV_APPEND with a new pos each run fills successive rows. */
static void test_vm_kv_persists(void) {
    amk_program *p = amk_program_create();
    int64_t s2x4[2] = {2, 4}, s5x2x4[3] = {5, 2, 4};
    amk_refvm *vm = NULL;
    amk_diag d;
    int ins[2], t, run, i, c;
    float *nw, *cache;
    amk_program_add_buffer(p, "new", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s2x4, AMK_SPACE_HBM, NULL);
    amk_program_add_buffer(p, "k", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, s5x2x4, AMK_SPACE_HBM, NULL);
    c = amk_program_add_counter(p, "");
    ins[0] = 0; ins[1] = 1;
    t = vm_task(p, AMK_OP_KV_APPEND, ins, 2, 1, c, NULL);
    amk_task_set_int(p, t, "pos", 0);
    CHECK_MSG(amk_refvm_create(p, &vm, &d) == AMK_OK, "[%s] %s", d.check, d.message);
    if (!vm) { amk_program_free(p); return; }
    nw = (float *)amk_refvm_buffer(vm, 0, NULL);
    cache = (float *)amk_refvm_buffer(vm, 1, NULL);
    for (run = 0; run < 3; run++) {
        amk_task_set_int(p, t, "pos", run);
        for (i = 0; i < 8; i++) nw[i] = (float)(run * 10 + i);
        CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_OK);
    }
    for (i = 0; i < 40; i++) CHECK_EQ_INT((int)cache[i], i < 24 ? (i / 8) * 10 + i % 8 : 0);
    amk_refvm_free(vm);
    amk_program_free(p);
}

int main(void) {
    RUN(test_op_check_rules);
    RUN(test_op_check_messages);
    RUN(test_copy);
    RUN(test_embed);
    RUN(test_norms);
    RUN(test_gemv_float);
    RUN(test_gemv_blocks);
    RUN(test_gemv_x_q8);
    RUN(test_mlp_block_down);
    RUN(test_norm_gemv_rows);
    RUN(test_gemv_f16_every_value);
    RUN(test_gemm_tile);
    RUN(test_allreduce_rows);
    RUN(test_gemv_quant);
    RUN(test_attention);
    RUN(test_attention_combine);
    RUN(test_attention_batched);
    RUN(test_rope);
    RUN(test_fused_gemv);
    RUN(test_mlp_fill);
    RUN(test_attention_decode);
    RUN(test_attention_o);
    RUN(test_attention_prefill);
    RUN(test_mlp_fold);
    RUN(test_attention_prenorm);
    RUN(test_elementwise);
    RUN(test_elementwise_rows);
    RUN(test_bias_add);
    RUN(test_dequant);
    RUN(test_softmax);
    RUN(test_allreduce);
    RUN(test_kv_append);
    RUN(test_argmax);
    RUN(test_argmax_pairs);
    RUN(test_combine_zero_l);
    RUN(test_vm_run_orders);
    RUN(test_vm_bind_and_buffers);
    RUN(test_vm_errors_at_run);
    RUN(test_vm_stuck);
    RUN(test_vm_many_tasks);
    RUN(test_vm_pages);
    RUN(test_vm_kv_persists);
    TEST_SUMMARY();
}
