/* amk_plan.h - the device form planner, compiled into host and device. Part of AMK (see amk.h
   for the manual).

   An instruction's device form (the general form of its op, or one of the specialised forms:
   AMK_FORM_*) is decided here by amk_plan_form over the instruction's context (amk_vm_ctx_t: the
   instruction and its buffers' descriptors, what the device sees). The runtime (amk_cuda.h) plans
   every context it uploads and stores the form in the instruction (amk_instruction_t.form), sizes
   the launch's shared memory by amk_plan_want and checks it by amk_plan_least and amk_plan_form;
   the builder (amk_arch.h) asks amk_plan_form before it emits a task only a specialised form
   takes. So no host code restates a device condition. The device (amk_ops.cuh) lays out its
   shared memory by the sizing macros below; it reads the stored form for the prefill image's
   forms (GEMM_TMA, ATTN_MMA) only: the decode images' forms it still decides by its own checks,
   which these functions were written from, each naming its device twin. why: a device that switched on the stored form (its checks gone) made SmolLM2's
   folded step at context 128 12% slower on the H200, a code-placement effect, not work
   (bench/NOTES.md session "planner"). None of this is ABI (amk_ir.h): a rule may change whenever
   host and device change together. The knobs read here (AMK_LEAN_PPL, AMK_RING_SLOTS,
   AMK_ROWS_STAGE_MAX, AMK_MMA_KC, ...) are amk_tune.h's. Plain C99: macros over int64_t and the
   planner's functions (AMK_PLAN_FN); the device includes this file from amk_ops.cuh, the host
   from amk_arch.h and amk_cuda.h. */
#ifndef AMK_PLAN_H
#define AMK_PLAN_H

#include "amk_ir.h"
#include "amk_tune.h"
#if !defined(__CUDACC__)
#include <math.h>
#endif

/* ---- the lean decode tiles (amk_norm_gemv_lean) -------------------------------------------------
   Their shared memory, 16-byte aligned parts: [x: K floats | nt floats (RMSNORM_MLP's values, or
   RoPE's cos and sin) | K floats of norm_w | rows: the tile's rows of W (or of W_gate, W_up and
   W_downT)], this many bytes in all. (x first: its offset needs nothing read after the wait) */
#define AMK_LEAN_BYTES(nt, K, rows) \
    ((int64_t)(K) * 8 + (((int64_t)(nt) * 4 + 15) & ~(int64_t)15) + (int64_t)(rows))
/* An RMSNORM_MLP FOLD tile's lean form also stages r rows of W_cat (its tile's and its base rows,
   bf16, F columns) after those: this many bytes more. */
#define AMK_LEAN_FOLD_BYTES(r, F) ((int64_t)(r) * (int64_t)(F) * 2)

/* ---- the lean ATTENTION_O (amk_attn_o_lean) -----------------------------------------------------
   At most this many rows of W_oT a task (SmolLM2's with the SM sets); its tensor copies'
   destinations align to the 128-byte swizzle's period. */
#define AMK_ATTN_LEAN_DIMS 16
#define AMK_ATTN_TMA_ALIGN 1024

/* ---- the ring form of a decode tile with many short rows (amk_norm_gemv_ring) -------------------
   Its rows stream through AMK_RING_SLOTS shared-memory slots of one row a warp: the launch is
   sized with AMK_RING_BYTES, and the device uses as many slots as fit (at least 2). Its x lives in
   registers, AMK_RING_VPL vectors of 8 elements a lane: K <= 256 * AMK_RING_VPL. */
#define AMK_RING_BYTES(warps, K) ((int64_t)AMK_RING_SLOTS * (int64_t)(warps) * (int64_t)(K) * 2)
#define AMK_RING_VPL 3

/* ---- the accumulating ops' staged rows (RMSNORM_MLP's W_downT, ATTENTION_O's W_oT) --------------
   The bytes staged for nt rows of H elements of esz bytes (esz 0: a dtype the op does not stage),
   or 0 when they are not staged: 16-byte aligned rows, at most AMK_ROWS_STAGE_MAX bytes, one bulk
   copy before the op's wait. The host sizes the launch's shared memory with it, the device
   decides with it. why no division: the device evaluates it in an op's setup, on the path to its
   first poll (a 64-bit division is a subroutine of a few hundred cycles: bench/NOTES.md session
   "setup") */
#define AMK_ROWS_STAGE_BYTES(esz, H, nt) \
    ((esz) > 0 && (H) > 0 && (nt) > 0 && (H) < (1 << 30) && (nt) < (1 << 30) && ((int64_t)(H) * (esz)) % 16 == 0 && \
     (int64_t)(nt) * (H) * (esz) <= AMK_ROWS_STAGE_MAX ? (int64_t)(nt) * (H) * (esz) : (int64_t)0)

/* The planner's functions: plain C, compiled into the host and into the device image alike, so
   what the host plans is what the device does. */
#if defined(__CUDACC__)
#define AMK_PLAN_FN static __device__ __host__ __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define AMK_PLAN_FN static __inline__ __attribute__((unused))
#else
#define AMK_PLAN_FN static
#endif

/* The bytes of an accumulating op's nt rows of H elements of dtype dt (RMSNORM_MLP's W_downT,
   ATTENTION_O's W_oT) that stage in shared memory before its wait: F32, F16 or BF16 rows only
   (AMK_ROWS_STAGE_BYTES). The builder asks it where the one-step MLP and ATTENTION_O pay, the
   runtime sizes the launch with it, the device decides with it (and its rows' alignment). */
AMK_PLAN_FN int64_t amk_plan_rows_stage_bytes(int dt, int64_t H, int64_t nt) {
    const int esz = dt == AMK_DTYPE_F32 || dt == AMK_DTYPE_F16 || dt == AMK_DTYPE_BF16 ? (dt == AMK_DTYPE_F32 ? 4 : 2) : 0;
    return AMK_ROWS_STAGE_BYTES(esz, H, nt);
}

/* ---- ATTENTION_DECODE on the CUDA cores (amk_attn_decode_cc) ------------------------------------
   Chunks of C cache rows staged in shared memory: [q: GH*hd f32][m, l, alpha: 4*GH f32][scores:
   GH*C f32][p.V sums: KG*GH*hd f32][K, V: C rows each of AMK_ATTN_ROW_BYTES], KG =
   AMK_ATTN_KEY_GROUPS. The host checks that C = 32 fits, with row bytes at 4 an element (the
   widest the device stages): AMK_ATTN_DECODE_LEAST. */
#define AMK_ATTN_GH 4 /* query heads per pass */
#define AMK_ATTN_KEY_GROUPS(hd, threads) ((threads) / (((hd) + 1) / 2)) /* p.V: 2 dims a thread */
#define AMK_ATTN_ROW_BYTES(hd, esz) ((((int64_t)(hd) * (esz) + 15) / 16) * 16 + 16)
/* bytes for q, m/l/alpha and the sums; then bytes per chunk row (scores, K and V) */
#define AMK_ATTN_DECODE_FIXED(hd, kg) (4 * ((int64_t)AMK_ATTN_GH * (hd) * (1 + (int64_t)(kg)) + 4 * AMK_ATTN_GH))
#define AMK_ATTN_DECODE_PER_ROW(rowb) (4 * (int64_t)AMK_ATTN_GH + 2 * (int64_t)(rowb))
#define AMK_ATTN_DECODE_SMEM(hd, rowb, kg, C) \
    (AMK_ATTN_DECODE_FIXED(hd, kg) + (int64_t)(C) * AMK_ATTN_DECODE_PER_ROW(rowb))
#define AMK_ATTN_DECODE_LEAST(hd, threads) \
    AMK_ATTN_DECODE_SMEM(hd, AMK_ATTN_ROW_BYTES(hd, 4), AMK_ATTN_KEY_GROUPS(hd, threads), 32)
/* ATTENTION_O adds to the end of that: the F32 results of its kv heads' query heads (ysb bytes),
   then its rows of W_oT when they stage (wsb bytes), each 16-byte aligned. The rows stage only
   when the attention still has AMK_ATTN_DECODE_LEAST below them. */
#define AMK_ATTN_O_YS_BYTES(hd, heads) ((((int64_t)(hd) * (heads) * 4) + 15) / 16 * 16)

/* ---- ATTENTION_DECODE on the tensor cores (amk_attn_decode_mma) ---------------------------------
   q, K and V BF16, head_dim a multiple of 16 up to 256: R = min(query heads a kv head,
   AMK_ATTN_MMA_ROWS) heads a pass. Shared memory: [q: 16 rows][K, V: C rows] of
   AMK_ATTN_ROW_BYTES(hd, 2), then F32 [running sums: R*hd][running m, l: 2 x R x 2][per 16-key
   group: sums G*R*hd][m, l: G*R*2], G = C / 16. */
#define AMK_ATTN_MMA_ROWS 16 /* the mma's M: query heads a pass */
#define AMK_ATTN_MMA_FIXED(hd) (16 * AMK_ATTN_ROW_BYTES(hd, 2) + 4 * (int64_t)AMK_ATTN_MMA_ROWS * ((hd) + 4))
#define AMK_ATTN_MMA_PER16(hd, R) (32 * AMK_ATTN_ROW_BYTES(hd, 2) + 4 * (int64_t)(R) * ((hd) + 2))
#define AMK_ATTN_MMA_SMEM(hd, R, C) (AMK_ATTN_MMA_FIXED(hd) + (int64_t)((C) / 16) * AMK_ATTN_MMA_PER16(hd, R))

/* ---- ATTENTION_PREFILL on the tensor cores (amk_attn_prefill_mma) ------------------------------
   q, K and V BF16, head_dim a multiple of 16 up to AMK_ATTN_PF_MAX_HD. A vector is a (query row,
   query head) pair of the task, 16 a group, a group a pair of warps (each half of head_dim): a
   pass takes AMK_ATTN_PF_GROUPS of them. Shared memory: [q: 16 rows a group][the warps' partial
   scores: 2 x AMK_ATTN_PF_KS x 16 floats a warp][K, V: two chunks of C rows each], rows of
   AMK_ATTN_ROW_BYTES(hd, 2), C 32..128 as it fits; the pairs' sums merge (when a group has more than
   one pair) and the results go out through the same memory, AMK_ATTN_PF_MERGE bytes. */
#define AMK_ATTN_PF_MAX_HD 128
#define AMK_ATTN_PF_GROUPS(nv, threads) \
    (((int64_t)(nv) + 15) / 16 < (threads) / 64 ? ((int64_t)(nv) + 15) / 16 : (int64_t)(threads) / 64)
#define AMK_ATTN_PF_SMEM(hd, groups, C, threads) \
    ((16 * (int64_t)(groups) + 4 * (int64_t)(C)) * AMK_ATTN_ROW_BYTES(hd, 2) + (int64_t)((threads) / 32) * 2 * AMK_ATTN_PF_KS * 64)
#define AMK_ATTN_PF_MERGE(hd, groups) ((int64_t)(groups) * 16 * ((hd) + 2) * 4)

/* ---- ATTENTION_PREFILL by warpgroup MMAs (amk_attn_pf_wg) ----------------------------------------
   512 threads, head_dim 64 or 128, no sliding window. A warpgroup owns a group of 64 vectors
   (wgmma's M); a pass takes up to four groups, and with two or fewer the spare warpgroups split
   the keys (S = 2 splits). A chunk holds AMK_ATTN_WG_KEYS keys a split, the next chunk in flight
   while the warpgroups work on this one, a warpgroup's keys in steps of AMK_ATTN_WG_STEP (why 32:
   the step's scores in half the registers of 64, beside head_dim / 2 sums a thread; the form ran
   so in bench/RESULTS.md run 511). Shared memory (1024-byte aligned, rows of 128 bytes with
   128-byte swizzle): q, 64 x head_dim 16-bit a group; two chunks of [K: 64 keys]
   [V: 64 keys] a split. At most 2 groups x 64 x hd x 2 + 2 x 2 x 2 x 64 x hd x 2 bytes = 1280 hd
   (4 groups, one split: 1024 hd), + 1024 for the alignment. */
#define AMK_ATTN_WG_KEYS 64
#define AMK_ATTN_WG_STEP 32
#define AMK_ATTN_WG_SMEM(hd) (1024 + 1280 * (int64_t)(hd))

/* ---- the tensor-core GEMM path (amk_gemm_mma) ---------------------------------------------------
   Tiles of AMK_MMA_MIN_ROWS rows and more, K in chunks of AMK_MMA_KC, a ring of AMK_MMA_STAGES;
   the host sizes the launch's shared memory from these (amk_plan_want). */
#define AMK_MMA_TILE (64 * AMK_MMA_KC * 2) /* bytes of one 64 x KC 16-bit operand tile */
/* bytes of the x rows of a chunk (xsz bytes an element), and of a ring stage: those plus one W
   tile per warpgroup (nwg of them) */
#define AMK_MMA_X_BYTES(xsz) ((int64_t)64 * AMK_MMA_KC * (xsz))
#define AMK_MMA_STAGE_BYTES(xsz, nwg) (AMK_MMA_X_BYTES(xsz) + (int64_t)(nwg) * AMK_MMA_TILE)

/* ---- the tensor-copy GEMM (amk_gemm_tma) ----------------------------------------------------------
   Blocks of AMK_TMA_BM x AMK_TMA_BN outputs, K in chunks of AMK_TMA_BK: a stage is x's 128 rows and
   W's 256 rows of a chunk, 16-bit, as tensor copies with 128-byte swizzle (W's in boxes of
   AMK_TMA_WBOX rows); the four warpgroups each own 64 x 128 of the block. A GEMV/GEMM tile of at
   most AMK_TMA_WBOX columns runs narrow blocks of AMK_TMA_BM x AMK_TMA_WBOX, 64 x 64 a warpgroup. Shared memory: the stages' mbarriers, then (1024-byte aligned)
   the ring of 3..AMK_TMA_STAGES stages; the epilogue's staging (4 x 64 x AMK_TMA_EPI_LD floats)
   reuses the ring. */
#define AMK_TMA_BM 128
#define AMK_TMA_BN 256
#define AMK_TMA_BK 64
#define AMK_TMA_WBOX 128 /* W's tensor-map box rows: two a block, one a narrow block (a tile of at most 128 columns) */
#define AMK_TMA_STAGE ((int64_t)(AMK_TMA_BM + AMK_TMA_BN) * AMK_TMA_BK * 2) /* 48 KB */
#define AMK_TMA_EPI_LD 136 /* a staged row's floats: 128 + 8, so that a warp's pairs spread over the banks */
/* bytes for s stages: 2048 hold the 2 x AMK_TMA_STAGES mbarriers and the alignment pad */
#define AMK_TMA_SMEM(s) (2048 + (int64_t)(s) * AMK_TMA_STAGE)

/* ==== the form planner ===========================================================================
   Over an instruction's context x (amk_vm_ctx_t: the device's view; a host builds one from a task
   with amk_task_context, buffer addresses 0 before the arena exists), threads a block and the
   launch's dynamic shared memory. */

/* The device forms (amk_instruction_t.form). GENERAL: the op's general path, which takes every
   valid task but RMSNORM_MLP_FOLD's and ATTENTION_O_PRENORM's. The others are the full image's
   specialised forms (amk_ops.cuh): LEAN the lean decode tile (amk_norm_gemv_lean: RMSNORM_GEMV,
   RMSNORM_MLP), RING the ring of short rows (amk_norm_gemv_ring: RMSNORM_GEMV), ATTN_LEAN the lean
   ATTENTION_O (amk_attn_o_lean). The prefill image's: GEMM_TMA the tensor-copy GEMM of a GEMV/GEMM
   tile (amk_gemm_tma), ATTN_MMA ATTENTION_PREFILL on the tensor cores (amk_attn_prefill_mma; the
   portable image's too), ATTN_WG ATTENTION_PREFILL by warpgroup MMAs (amk_attn_pf_wg). */
#define AMK_FORM_GENERAL 0u
#define AMK_FORM_LEAN 1u
#define AMK_FORM_RING 2u
#define AMK_FORM_ATTN_LEAN 3u
#define AMK_FORM_GEMM_TMA 4u
#define AMK_FORM_ATTN_MMA 5u
#define AMK_FORM_ATTN_WG 6u
/* The forms an image has (amk_plan_form's forms): the full image's lean forms, the prefill and
   portable images' ATTN_MMA, the sm_90a prefill image's ATTN_WG (GEMM_TMA needs the tensor maps,
   which only the prefill image's runtime assigns). */
#define AMK_PLAN_FORMS_LEAN 1
#define AMK_PLAN_FORMS_PREFILL 2
#define AMK_PLAN_FORMS_WG 4

/* 1 for a task only a specialised form takes (RMSNORM_MLP_FOLD, ATTENTION_O_PRENORM: their form
   bits in the instruction). */
AMK_PLAN_FN int amk_plan_folded(const amk_vm_ctx_t *x) {
    const uint32_t f = (uint32_t)x->ins.params.flags;
    return (x->ins.op == AMK_OP_RMSNORM_MLP && (f & AMK_MLP_FLAG_FOLD)) ||
           (x->ins.op == AMK_OP_ATTENTION_O && (f & AMK_ATTN_FLAG_PRENORM));
}

/* The bytes of an accumulating op's staged rows n0 .. n0 + nt of input 4 (RMSNORM_MLP's W_downT,
   ATTENTION_O's W_oT; amk_plan_rows_stage_bytes, 16-byte aligned in memory), or 0. */
AMK_PLAN_FN int64_t amk_plan_rows_bytes(const amk_vm_ctx_t *x, int64_t nt) {
    const amk_buffer_t *Wd = &x->in[4];
    return Wd->ptr % 16 == 0 ? amk_plan_rows_stage_bytes(Wd->dtype, Wd->shape[1], nt) : 0; /* (a rank-1 W: H 0, no rows) */
}

/* The conditions the lean and ring forms share: one row of F32 x, K a multiple of 8 up to kmax,
   F32 norm_w, bf16 W, all 16-byte aligned, and an RMSNORM_GEMV's output F32 or BF16. */
AMK_PLAN_FN int amk_plan_short_rows(const amk_vm_ctx_t *x, int64_t kmax) {
    const amk_buffer_t *xb = &x->in[0], *nw = &x->in[1], *W = &x->in[2];
    const int64_t K = x->ins.params.K;
    const int od = x->out[0].dtype;
    return x->ins.n_inputs >= 3 && x->ins.n_outputs >= 1 && K >= 8 && K % 8 == 0 && K <= kmax && xb->numel == K &&
           xb->dtype == AMK_DTYPE_F32 && nw->dtype == AMK_DTYPE_F32 && W->dtype == AMK_DTYPE_BF16 && xb->ptr % 16 == 0 &&
           nw->ptr % 16 == 0 && W->ptr % 16 == 0 &&
           (x->ins.op == AMK_OP_RMSNORM_MLP || od == AMK_DTYPE_F32 || od == AMK_DTYPE_BF16);
}

/* The lean tile's layout (amk_norm_gemv_lean): its flags, sizes and the offsets of its parts in
   shared memory (AMK_LEAN_BYTES: x, the values or cos and sin, norm_w, the rows, W_downT's rows,
   FOLD's W_cat rows), bytes in all. */
typedef struct amk_plan_lean_t {
    int mlp, rope, kv_row, K, nrw, fold, F, b0, nb;
    int64_t nt, n_begin, N, rb, wsb, yso, nso, gso, wso, fso, bytes;
} amk_plan_lean_t;
/* The lean tile's warps with rows: RMSNORM_MLP one a row (gate and up), RMSNORM_GEMV one a pair. */
AMK_PLAN_FN int amk_plan_lean_row_warps(const amk_vm_ctx_t *x) {
    return x->ins.op == AMK_OP_RMSNORM_MLP ? x->ins.params.N_tile : (x->ins.params.N_tile + 1) / 2;
}
AMK_PLAN_FN amk_plan_lean_t amk_plan_lean_layout(const amk_vm_ctx_t *x) {
    const amk_params_t *P = &x->ins.params;
    amk_plan_lean_t L;
    L.mlp = x->ins.op == AMK_OP_RMSNORM_MLP;
    L.rope = !L.mlp && ((uint32_t)P->flags & AMK_GEMV_FLAG_ROPE) != 0;
    L.kv_row = !L.mlp && ((uint32_t)P->flags & AMK_GEMV_FLAG_KV_ROW) != 0;
    L.K = P->K;
    L.nt = P->N_tile;
    L.n_begin = P->n_off;
    L.N = x->in[2].shape[0];
    L.rb = L.nt * L.K * 2; /* a matrix's rows' bytes */
    L.wsb = L.mlp ? amk_plan_rows_bytes(x, L.nt) : 0;
    /* FOLD: W_cat's rows n_begin .. + nt and its base rows N + b0 .. N + b0 + nb (AMK_LEAN_FOLD_BYTES).
       why 32-bit division: these are small (amk_plan_lean_bytes checks (n_off + nt) * K < 2^31),
       and a 64-bit one is a subroutine on the device's path to its first poll */
    L.fold = L.mlp && ((uint32_t)P->flags & AMK_MLP_FLAG_FOLD) != 0;
    L.F = L.fold ? (int)x->in[5].shape[1] : 0;
    L.b0 = L.fold ? (int)((uint32_t)P->n_off * (uint32_t)L.K / (uint32_t)L.N) : 0;
    L.nb = L.fold ? (int)((uint32_t)(P->n_off + P->N_tile) * (uint32_t)L.K / (uint32_t)L.N) - L.b0 : 0;
    L.yso = L.K * 4; /* x at 0 (K a multiple of 8: every part stays 16-byte aligned; K is small) */
    L.nso = L.yso + ((L.nt * 4 + 15) & ~(int64_t)15);
    L.gso = L.nso + L.K * 4;
    L.wso = L.gso + (L.mlp ? 2 : 1) * L.rb;
    L.fso = L.wso + L.wsb;
    L.bytes = AMK_LEAN_BYTES(L.nt, L.K, (L.mlp ? 2 : 1) * L.rb + L.wsb) +
              (L.fold ? AMK_LEAN_FOLD_BYTES(L.nt + L.nb, L.F) : 0); /* = fso + W_cat's rows */
    L.nrw = amk_plan_lean_row_warps(x); /* the warps with rows; with RoPE warp nrw does the trig */
    return L;
}

/* The shared memory of x's lean form, or 0 when the form does not take x (whatever the launch's
   shared memory). */
AMK_PLAN_FN int64_t amk_plan_lean_bytes(const amk_vm_ctx_t *x, int threads) {
    const amk_params_t *P = &x->ins.params;
    const amk_buffer_t *Wu = &x->in[3], *Wc = &x->in[5];
    amk_plan_lean_t L;
    if ((x->ins.op != AMK_OP_RMSNORM_GEMV && x->ins.op != AMK_OP_RMSNORM_MLP) || !amk_plan_short_rows(x, 128 * AMK_LEAN_PPL) ||
        P->N_tile < 1 || P->n_off < 0 || x->in[2].shape[0] < 1) /* why N first: the layout divides by it */
        return 0;
    L = amk_plan_lean_layout(x);
    if (L.nrw > threads / 32 - L.rope || L.n_begin + L.nt > L.N) return 0;
    if (L.mlp && (x->ins.n_inputs < 5 || Wu->dtype != AMK_DTYPE_BF16 || Wu->ptr % 16 != 0 || L.wsb == 0)) return 0;
    if (L.fold && (x->ins.n_inputs < 6 || x->ins.n_outputs != 2 || Wc->dtype != AMK_DTYPE_BF16 || Wc->ptr % 16 != 0 ||
                   Wc->rank != 2 || L.F < 8 || L.F % 8 != 0 || Wc->shape[0] != L.N + L.K || x->out[1].dtype != AMK_DTYPE_F32 ||
                   x->out[1].ptr % 16 != 0 || x->out[1].numel != L.F || (L.n_begin + L.nt) * L.K > 2147483647))
        return 0;
    if (!L.mlp && (((uint32_t)P->flags & AMK_GEMV_FLAG_ARGMAX) || (P->flags && x->ins.n_inputs < 4) ||
                   (L.rope && (L.nt % 2 != 0 || L.n_begin % 2 != 0))))
        return 0;
    return L.bytes;
}

/* The ring form (amk_norm_gemv_ring; the lean form comes first): RMSNORM_GEMV without flags but
   ARGMAX, short rows of K <= 256 * AMK_RING_VPL, more than two rows a warp. The least shared
   memory it runs with (two slots of a row a warp), or 0 when it does not take x. */
AMK_PLAN_FN int64_t amk_plan_ring_least(const amk_vm_ctx_t *x, int threads) {
    const amk_params_t *P = &x->ins.params;
    const int nw = threads / 32;
    if (x->ins.op != AMK_OP_RMSNORM_GEMV || ((uint32_t)P->flags & ~AMK_GEMV_FLAG_ARGMAX) != 0 ||
        !amk_plan_short_rows(x, 256 * AMK_RING_VPL) || P->N_tile <= 2 * nw || P->n_off < 0 ||
        (int64_t)P->n_off + P->N_tile > x->in[2].shape[0])
        return 0;
    return 2 * (int64_t)nw * P->K * 2;
}

/* 1 when the lean ATTENTION_O copies its cache rows by tensor copies (AMK_ATTN_KV_TMA): x carries
   its caches' maps for its window (the runtime sets them, amk__cuda_kv_pairs), bf16 caches of
   head_dim 64. */
AMK_PLAN_FN int amk_plan_attn_tma(const amk_vm_ctx_t *x) {
#if AMK_ATTN_KV_TMA
    return (x->maps != 0) & (x->kv_rows == x->ins.params.kv_len) & (x->in[1].dtype == AMK_DTYPE_BF16) &
           (x->ins.params.head_dim == 64);
#else
    (void)x;
    return 0;
#endif
}
/* The lean ATTENTION_O's query heads (one or two) and its cache rows' layout: rows of rowb bytes,
   nr of them a cache (tensor copies: 128-byte rows, n rounded up to 8). */
AMK_PLAN_FN int amk_plan_attn_heads(const amk_params_t *P) {
    const int hd = P->head_dim, h0 = hd > 0 ? P->m_off / hd : 0;
    return hd > 0 ? (P->m_off + P->M_tile - 1) / hd - h0 + 1 : 0;
}
AMK_PLAN_FN int64_t amk_plan_attn_row_bytes(int tma, int hd, int esz) { return tma ? 128 : AMK_ATTN_ROW_BYTES(hd, esz); }
AMK_PLAN_FN int64_t amk_plan_attn_rows(int tma, int64_t n) { return tma ? (n + 7) & ~(int64_t)7 : n; }
/* The lean ATTENTION_O's shared memory below W_oT's rows: the K and V rows (from kso, the tensor
   copies' alignment pad), q, the warps' maxima, p, a, PRENORM's words and its cos and sin. */
#define AMK_ATTN_LEAN_FIXED(kso, nr, rowb, nh, hd, n) \
    ((kso) + 2 * (int64_t)(nr) * (rowb) + ((int64_t)(nh) * (hd) + 32 + (int64_t)(nh) * (n) + AMK_ATTN_LEAN_DIMS + 4 + 64) * 4)

/* The shared memory of x's lean ATTENTION_O (tensor copies or not: tma), for the worst alignment
   of the launch's shared memory (the tensor copies' pad up to AMK_ATTN_TMA_ALIGN - 16), with W_oT's
   rows; or 0 when the form does not take x. */
AMK_PLAN_FN int64_t amk_plan_attn_lean_bytes(const amk_vm_ctx_t *x, int threads, int tma) {
    const amk_params_t *P = &x->ins.params;
    const amk_buffer_t *q = &x->in[0], *kc = &x->in[1], *vc = &x->in[2], *xr = &x->in[5];
    const int hd = P->head_dim, nkv = P->n_kv_heads, M = P->M_tile, dt = kc->dtype, esz = dt == AMK_DTYPE_F32 ? 4 : 2;
    const int grp = nkv > 0 ? P->n_heads / nkv : 0, h0 = hd > 0 ? P->m_off / hd : 0, nh = amk_plan_attn_heads(P);
    const int pre = ((uint32_t)P->flags & AMK_ATTN_FLAG_PRENORM) != 0;
    const int64_t n = P->kv_len, want = amk_plan_rows_bytes(x, M);
    if (x->ins.op != AMK_OP_ATTENTION_O || x->ins.n_inputs < 5 || (dt != AMK_DTYPE_F32 && dt != AMK_DTYPE_BF16) ||
        vc->dtype != dt || (q->dtype != AMK_DTYPE_F32 && q->dtype != AMK_DTYPE_BF16) || hd < 8 || hd > 256 ||
        (hd * esz) % 16 != 0 || nkv < 1 || P->n_heads % nkv != 0 || P->N_tile != 1 || M < 1 || M > AMK_ATTN_LEAN_DIMS ||
        P->m_off < 0 || nh > 2 || h0 < P->n_off * grp || h0 + nh > (P->n_off + 1) * grp || n < 1 || n > AMK_ATTN_SPEC_ROWS ||
        n > threads / nh || (threads / nh) % 32 != 0 || ((uint32_t)P->flags & AMK_ATTN_FLAG_PARTIAL) != 0 ||
        kc->ptr % 16 != 0 || vc->ptr % 16 != 0 || want == 0 || (tma && (dt != AMK_DTYPE_BF16 || hd != 64)))
        return 0;
    if (pre && (x->ins.n_inputs < 6 || q->dtype != AMK_DTYPE_F32 || q->numel != (int64_t)(P->n_heads + 2 * nkv) * hd ||
                xr->dtype != AMK_DTYPE_F32 || xr->ptr % 16 != 0 || xr->numel % 4 != 0 || xr->numel != x->in[4].shape[1] ||
                xr->numel > 128 * AMK_LEAN_PPL || (x->ins.n_outputs != 1 && x->ins.n_outputs != 3) || hd > 64 ||
                threads < 32 + nh * hd / 2 || q->ptr % 8 != 0))
        return 0;
    return AMK_ATTN_LEAN_FIXED(tma ? AMK_ATTN_TMA_ALIGN - 16 : 0, amk_plan_attn_rows(tma, n), amk_plan_attn_row_bytes(tma, hd, esz),
                               nh, hd, n) + want + 16; /* + the rows' 16-byte alignment */
}

/* 1 when ATTENTION_DECODE (or ATTENTION_O) x runs on the tensor cores (amk_attn_decode_mma): q, K
   and V BF16, head_dim a multiple of 16 up to 256 (it also falls back to the CUDA cores when
   shared memory holds fewer than 16 rows). */
AMK_PLAN_FN int amk_plan_attn_mma(const amk_vm_ctx_t *x) {
    const int hd = x->ins.params.head_dim;
    return x->in[0].dtype == AMK_DTYPE_BF16 && x->in[1].dtype == AMK_DTYPE_BF16 && x->in[2].dtype == AMK_DTYPE_BF16 &&
           hd > 0 && hd % 16 == 0 && hd <= 256 && x->ins.params.n_kv_heads > 0 && x->ins.params.n_heads >= x->ins.params.n_kv_heads;
}

/* The bytes of ATTENTION_O x's results in shared memory (its kv heads' query heads, F32). */
AMK_PLAN_FN int64_t amk_plan_attn_o_ys_bytes(const amk_params_t *P) {
    return AMK_ATTN_O_YS_BYTES(P->head_dim, (int64_t)P->N_tile * (P->n_kv_heads > 0 ? P->n_heads / P->n_kv_heads : 0));
}

/* A tile whose W (or gate or up) is in a GGUF block format stages its row of x by units of 32
   elements (amk_ops.cuh's amk_blk_stage_x): 32 columns of AMK_BLK_UP(K) units (their count
   rounded up to odd), then a sum a unit; and its dots, a float a row of each block matrix. */
#define AMK_BLK_UP(K) (((K) / 32) | 1)
#define AMK_BLK_X_FLOATS(K) (33 * (int64_t)AMK_BLK_UP(K))

/* ---- x rounded to 8 bits (param x_q8: amk_ir.h's AMK_X_Q8) --------------------------------------
   Element y of a unit whose largest |y| is amax (largest by its bits: a NaN beats every number)
   becomes d * q, d = amax / 127 as amax * (1 / 127) and q = rint(y * (127 / amax)) within
   [-127, 127] (0 when amax is 0). The reference VM and the device both compute it here, so their q
   are the same integers. The device's staging of such an x adds AMK_BLK_X8_BYTES: the units' q
   (32 bytes each), then from byte 32 UP each unit's d (F32) and its halves' sums of q (two int16
   in an I32, low half first); amk_ops.cuh's amk_blk_stage_x8 has the layout. */
AMK_PLAN_FN float amk_plan_x_q8(float y, float amax, float *d) {
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    *d = amax * (1.0f / 127.0f);
    return fminf(fmaxf(rintf(y * id), -127.0f), 127.0f);
}
#define AMK_BLK_X8_BYTES(K) (40 * (int64_t)AMK_BLK_UP(K))
/* A block tile's staging in floats: x by units, then the dots of its mats matrices' nt rows, then
   (q8: x_q8) the byte staging from the next 16-byte boundary (AMK_BLK_X8_OFF floats in). */
#define AMK_BLK_X8_OFF(K, mats, nt) ((AMK_BLK_X_FLOATS(K) + (int64_t)(mats) * (int64_t)(nt) + 3) & ~(int64_t)3)
#define AMK_BLK_STAGE_FLOATS(K, mats, nt, q8) \
    ((q8) ? AMK_BLK_X8_OFF(K, mats, nt) + AMK_BLK_X8_BYTES(K) / 4 : AMK_BLK_X_FLOATS(K) + (int64_t)(mats) * (int64_t)(nt))

/* ---- the block ring (amk_ops.cuh's amk_blk_ring): a tile of x_q8 whose W (and up) hold blocks of
   a format with an integer dot streams its rows through shared memory, a ring of up to
   AMK_BLK_RING_SLOTS slots a warp, each slot a chunk of m * AMK_BLK_RING_UNITS units (of 32
   elements; m: amk_plan_blk_ring_m) of one row: a bulk copy a chunk. So rows must be whole chunks
   (K a multiple of 32 * AMK_BLK_RING_UNITS), and a chunk's bytes are 16-byte multiples for every
   such format. Its shared memory: 8 bytes a slot's mbarrier, then the slots. */
#ifndef AMK_BLK_RING_UNITS
#define AMK_BLK_RING_UNITS 64
#endif
/* 1 for a block format the ring decodes by integer dots: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. */
AMK_PLAN_FN int amk_plan_blk_int(int t) {
    return t == AMK_DTYPE_Q8_0 || t == AMK_DTYPE_Q4_0 || t == AMK_DTYPE_Q4_1 || t == AMK_DTYPE_Q5_0 ||
           t == AMK_DTYPE_Q5_1 || t == AMK_DTYPE_Q4_K || t == AMK_DTYPE_Q5_K || t == AMK_DTYPE_Q6_K;
}
/* A ring chunk's bytes for format t. */
AMK_PLAN_FN int64_t amk_plan_blk_chunk(int t) {
    return AMK_BLOCK_ELEMS(t) > 0 ? (int64_t)AMK_BLK_RING_UNITS * 32 / AMK_BLOCK_ELEMS(t) * AMK_BLOCK_BYTES(t) : 0;
}
/* 1 when the builder sets x_q8 on a tile of K whose matrices have dtypes w and wu (-1: none): both
   (every one given) in a format with the integer dot, and K whole chunks. why only there: elsewhere
   the device's tiles decode floats and x's rounding would cost accuracy for nothing. */
AMK_PLAN_FN int amk_plan_blk_x8(int w, int wu, int64_t K) {
    return amk_plan_blk_int(w) && (wu < 0 || amk_plan_blk_int(wu)) && K > 0 && K % (32 * AMK_BLK_RING_UNITS) == 0;
}
/* Chunks of m times AMK_BLK_RING_UNITS units, for a tile of K whose larger chunk of one is cb bytes:
   2 where rows hold whole ones and cb is under 2 KB, else 1. why: a chunk's copy and the decode's
   setup are per chunk, and the 8B's Q4_K and Q4_0 steps were 2-5% faster with chunks of 128 units
   (2.3 KB), its Q8_0 step 5% slower (4.3 KB; bench/NOTES.md session "dp4a"). The device takes 1
   where two slots of 2 do not fit. */
AMK_PLAN_FN int amk_plan_blk_ring_m(int64_t K, int64_t cb) {
    return K % (2 * 32 * AMK_BLK_RING_UNITS) == 0 && cb < AMK_BLK_RING_M2_BYTES ? 2 : 1;
}
/* The ring's bytes for warps warps of S slots, the tile's larger chunk cb. */
#define AMK_BLK_RING_BYTES(warps, S, cb) ((int64_t)(warps) * (S) * (8 + (int64_t)(cb)))

/* The matrices of x's tile that its block-format staging holds dots for (GEMV/GEMM tiles without
   I8/I4 scales 1, RMSNORM_GEMV 1, RMSNORM_SWIGLU and RMSNORM_MLP 2); 0 when no W of the tile is in
   a block format (RMSNORM_MLP: W_down included). */
AMK_PLAN_FN int amk_plan_blk_mats(const amk_vm_ctx_t *x) {
    const int q = x->ins.params.qdtype;
    switch (x->ins.op) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE:
        return x->ins.n_inputs >= 2 && !((q == AMK_DTYPE_I8 || q == AMK_DTYPE_I4) && x->ins.n_inputs >= 3) &&
               AMK_DTYPE_IS_BLOCK(x->in[1].dtype);
    case AMK_OP_RMSNORM_GEMV: return x->ins.n_inputs >= 3 && AMK_DTYPE_IS_BLOCK(x->in[2].dtype);
    case AMK_OP_RMSNORM_SWIGLU: case AMK_OP_RMSNORM_MLP: /* (RMSNORM_MLP's W_down too: the same staging) */
        return x->ins.n_inputs >= 4 && (AMK_DTYPE_IS_BLOCK(x->in[2].dtype) || AMK_DTYPE_IS_BLOCK(x->in[3].dtype) ||
                                        (x->ins.op == AMK_OP_RMSNORM_MLP && x->ins.n_inputs >= 5 &&
                                         AMK_DTYPE_IS_BLOCK(x->in[4].dtype)))
                   ? 2 : 0;
    default: return 0;
    }
}

/* The least dynamic shared memory x runs with in its general form (0: it stages nothing): a
   GEMV-family tile one staged row of x, + the tile and its RoPE cos/sin (amk_op_norm_gemv), or
   with a block-format W the block staging and the dots; decode
   attention one chunk of 32 rows at 4 bytes an element (ATTENTION_O: + its results); ATTENTION_TILE
   a head of q a warp. */
/* The rows of x a GEMV/GEMM tile multiplies (GEMM_TILE, and RMSNORM_GEMV with M_tile: M_tile). */
AMK_PLAN_FN int64_t amk_plan_gemm_rows(const amk_vm_ctx_t *x) {
    const int64_t K = x->ins.params.K;
    return x->ins.op == AMK_OP_GEMM_TILE || (x->ins.op == AMK_OP_RMSNORM_GEMV && x->ins.params.M_tile > 0)
               ? x->ins.params.M_tile : K > 0 ? x->in[0].numel / K : 0;
}
/* 1 when only the prefill image runs the task: an RMSNORM_GEMV tile (or its RoPE or KV form) of
   rows [m_off, m_off + M_tile), a prefill chunk's q, k or v (the other images' fused body takes
   every row, amk_norm_gemv_body); a COPY of rows, or of a block-format x (a prefill chunk's
   matrix dequantized for its tensor-core tiles); a GEMM_TILE of a K range (K_tile) and an
   ALLREDUCE_SHARD of rows (a short chunk's split-K projection and the sum of its partials); an
   EMBED of rows (a chunk's embedding spread over the SMs). why
   not in the other images: their op code is what the decode steps were measured with (the VM's
   registers, bench/NOTES.md session "rows"). */
AMK_PLAN_FN int amk_plan_prefill_only(const amk_vm_ctx_t *x) {
    return (x->ins.op == AMK_OP_RMSNORM_GEMV && x->ins.params.M_tile > 0) ||
           (x->ins.op == AMK_OP_COPY && (x->ins.params.M_tile > 0 || AMK_DTYPE_IS_BLOCK(x->in[0].dtype))) ||
           (x->ins.op == AMK_OP_GEMM_TILE && x->ins.params.K_tile > 0) ||
           (x->ins.op == AMK_OP_ALLREDUCE_SHARD && x->ins.params.M_tile > 0) ||
           (x->ins.op == AMK_OP_EMBED && x->ins.params.M_tile > 0);
}
/* W's input of a tile amk_gemm_tma may take: 1 (GEMV_TILE, GEMM_TILE), 2 (RMSNORM_GEMV: x, its
   norm weight, W, the positions), else 0. */
AMK_PLAN_FN int amk_plan_gemm_w(int op) {
    return op == AMK_OP_GEMV_TILE || op == AMK_OP_GEMM_TILE ? 1 : op == AMK_OP_RMSNORM_GEMV ? 2 : 0;
}
/* 1 when a tile's operands suit the tensor-copy GEMM (amk_gemm_tma), its maps aside: at least
   AMK_MMA_MIN_ROWS rows, x and W of one 16-bit float dtype (not the I8/I4 form), K a multiple of 8
   (a map's rows are 16-byte multiples) and so a K range's start (its maps start there), and 512
   threads (four warpgroups). An RMSNORM_GEMV tile
   (the prefill chunk's q, k and v: its ROPE and KV_ROW forms, not ARGMAX) also needs an F32 norm
   weight and, with ROPE, its pairs inside the tile (n_off and N_tile even). */
AMK_PLAN_FN int amk_plan_gemm_tma_ops(const amk_vm_ctx_t *x, int threads) {
    const amk_params_t *P = &x->ins.params;
    const int wi = amk_plan_gemm_w(x->ins.op), wt = x->in[wi].dtype;
    const uint32_t fl = (uint32_t)P->flags;
#if AMK_GEMM_TMA
    if (wi == 2 && ((fl & ~(uint32_t)(AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW)) != 0 || x->in[1].dtype != AMK_DTYPE_F32 ||
                    ((fl & AMK_GEMV_FLAG_ROPE) && (P->n_off % 2 != 0 || P->N_tile % 2 != 0))))
        return 0;
    return wi > 0 && threads == 512 && amk_plan_gemm_rows(x) >= AMK_MMA_MIN_ROWS && (wt == AMK_DTYPE_BF16 || wt == AMK_DTYPE_F16) &&
           x->in[0].dtype == wt && !(wi == 1 && (P->qdtype == AMK_DTYPE_I8 || P->qdtype == AMK_DTYPE_I4)) && P->K > 0 &&
           P->K % 8 == 0 && P->N_tile > 0 && P->k_off % 8 == 0;
#else
    (void)P; (void)wt; (void)fl; (void)threads;
    return 0;
#endif
}
/* 1 when the tile runs amk_gemm_tma: its operands suit, the runtime gave it its maps (x's, then
   W's; amk__cuda_kv_pairs, only with the prefill build loaded) and three stages fit. */
AMK_PLAN_FN int amk_plan_gemm_tma(const amk_vm_ctx_t *x, int threads, int64_t smem) {
    return x->maps != 0 && amk_plan_gemm_tma_ops(x, threads) && smem >= AMK_TMA_SMEM(3);
}

/* 1 when an ATTENTION_PREFILL task runs amk_attn_prefill_mma (prefill image): q, K and V all BF16 or all F16,
   a BF16, F16 or F32 output, head_dim a multiple of 16 up to AMK_ATTN_PF_MAX_HD, and chunks of 32 rows (and the merge) fit. */
AMK_PLAN_FN int amk_plan_attn_prefill_mma(const amk_vm_ctx_t *x, int threads, int64_t smem) {
#if AMK_ATTN_PREFILL_MMA
    const amk_params_t *P = &x->ins.params;
    const int64_t hd = P->head_dim;
    int64_t groups, need;
    if (x->ins.op != AMK_OP_ATTENTION_PREFILL || (x->in[0].dtype != AMK_DTYPE_BF16 && x->in[0].dtype != AMK_DTYPE_F16) ||
        x->in[1].dtype != x->in[0].dtype || x->in[2].dtype != x->in[0].dtype || (x->out[0].dtype != AMK_DTYPE_BF16 && x->out[0].dtype != AMK_DTYPE_F16 &&
        x->out[0].dtype != AMK_DTYPE_F32) || hd <= 0 || hd % 16 != 0 || hd > AMK_ATTN_PF_MAX_HD || P->n_kv_heads <= 0 ||
        P->M_tile <= 0 || threads < 64)
        return 0;
    groups = AMK_ATTN_PF_GROUPS((int64_t)P->M_tile * (P->n_heads / P->n_kv_heads), threads);
    need = AMK_ATTN_PF_SMEM(hd, groups, 32, threads);
    if (AMK_ATTN_PF_MERGE(hd, groups) > need) need = AMK_ATTN_PF_MERGE(hd, groups);
    return smem >= need;
#else
    (void)x; (void)threads; (void)smem;
    return 0;
#endif
}

/* The dynamic shared memory the form ATTN_WG (amk_attn_pf_wg) needs for x, or 0 when it does not
   take x: an ATTENTION_PREFILL task amk_plan_attn_prefill_mma takes, at 512 threads, head_dim 64 or
   128, no sliding window. */
AMK_PLAN_FN int64_t amk_plan_attn_pf_wg_bytes(const amk_vm_ctx_t *x, int threads) {
    const int64_t hd = x->ins.params.head_dim;
    if (!AMK_ATTN_PF_WG || threads != 512 || (hd != 64 && hd != 128) || x->ins.params.sliding_window > 0 ||
        !amk_plan_attn_prefill_mma(x, threads, INT64_MAX))
        return 0;
    return AMK_ATTN_WG_SMEM(hd);
}

/* The bytes the block ring (amk_blk_ring) adds to a tile's shared memory with AMK_BLK_RING_SLOTS
   slots a warp, or 0 when the tile does not take it: an x_q8 GEMV/GEMM, RMSNORM_GEMV or
   RMSNORM_SWIGLU tile whose matrices amk_plan_blk_x8 takes (the device also needs one row of x). */
AMK_PLAN_FN int64_t amk_plan_blk_ring_bytes(const amk_vm_ctx_t *x, int threads) {
    const int op = x->ins.op;
    int w = -1, u = -1;
    int64_t a, b;
    if (!AMK_BLK_RING || !x->ins.params.x_q8) return 0;
    if (op == AMK_OP_GEMV_TILE || op == AMK_OP_GEMM_TILE) w = x->in[1].dtype;
    else if (op == AMK_OP_RMSNORM_GEMV) w = x->in[2].dtype;
    else if (op == AMK_OP_RMSNORM_SWIGLU) { w = x->in[2].dtype; u = x->in[3].dtype; }
    if (w < 0 || !amk_plan_blk_x8(w, u, x->ins.params.K)) return 0;
    a = amk_plan_blk_chunk(w);
    b = u >= 0 ? amk_plan_blk_chunk(u) : 0;
    a = a > b ? a : b;
    return 16 + AMK_BLK_RING_BYTES(threads / 32, AMK_BLK_RING_SLOTS, a * amk_plan_blk_ring_m(x->ins.params.K, a));
}

AMK_PLAN_FN int64_t amk_plan_least(const amk_vm_ctx_t *x, int threads) {
    const amk_params_t *P = &x->ins.params;
    const int64_t K = P->K, hd = P->head_dim, blk = amk_plan_blk_mats(x);
    /* the float path's row of x, or the block staging and dots (and x_q8's bytes) */
    const int64_t xf = blk ? AMK_BLK_STAGE_FLOATS(K, blk, P->N_tile, P->x_q8) : K;
    switch (x->ins.op) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE: case AMK_OP_RMSNORM_SWIGLU: return 4 * xf;
    case AMK_OP_RMSNORM_MLP: return 4 * (xf + P->N_tile); /* + the tile's values */
    case AMK_OP_RMSNORM_GEMV: return 4 * (xf + ((uint32_t)P->flags & AMK_GEMV_FLAG_ROPE ? 2 * (int64_t)P->N_tile : 0));
    case AMK_OP_ATTENTION_DECODE: return AMK_ATTN_DECODE_LEAST(hd, threads);
    case AMK_OP_ATTENTION_O: return AMK_ATTN_DECODE_LEAST(hd, threads) + amk_plan_attn_o_ys_bytes(P) + 16;
    case AMK_OP_ATTENTION_TILE: case AMK_OP_ATTENTION_PREFILL: return (int64_t)(threads / 32) * hd * 4;
    default: return 0;
    }
}

/* The form x runs in, in an image with the specialised forms `forms` (AMK_PLAN_FORMS_*: the
   general image has none) and a launch of threads a block and smem bytes of dynamic shared memory:
   the first of its op's forms that takes it, else AMK_FORM_GENERAL. */
AMK_PLAN_FN uint32_t amk_plan_form(const amk_vm_ctx_t *x, int threads, int64_t smem, int forms) {
    int64_t b;
    if (amk_plan_gemm_tma(x, threads, smem)) return AMK_FORM_GEMM_TMA;
    if ((forms & AMK_PLAN_FORMS_WG) && (b = amk_plan_attn_pf_wg_bytes(x, threads)) > 0 && b <= smem) return AMK_FORM_ATTN_WG;
    if ((forms & AMK_PLAN_FORMS_PREFILL) && amk_plan_attn_prefill_mma(x, threads, smem)) return AMK_FORM_ATTN_MMA;
    if (!(forms & AMK_PLAN_FORMS_LEAN)) return AMK_FORM_GENERAL;
    switch (x->ins.op) {
    case AMK_OP_RMSNORM_GEMV: case AMK_OP_RMSNORM_MLP:
        if (AMK_LEAN && (b = amk_plan_lean_bytes(x, threads)) > 0 && b <= smem) return AMK_FORM_LEAN;
        if (AMK_RING && (b = amk_plan_ring_least(x, threads)) > 0 && b <= smem) return AMK_FORM_RING;
        return AMK_FORM_GENERAL;
    case AMK_OP_ATTENTION_O:
        if (AMK_ATTN_LEAN && (b = amk_plan_attn_lean_bytes(x, threads, amk_plan_attn_tma(x))) > 0 && b <= smem)
            return AMK_FORM_ATTN_LEAN;
        return AMK_FORM_GENERAL;
    default: return AMK_FORM_GENERAL;
    }
}

/* The dynamic shared memory x would like: its fastest form's, never less than amk_plan_least (the
   device ops adapt to anything in between). why not always the opt-in maximum: shared memory and
   L1 share one 256 KB array a SM, so every byte asked for leaves less L1 (the driver picks the
   configuration); this rule makes the decode step faster than the maximum does (bench/RESULTS.md
   runs 81-82). */
AMK_PLAN_FN int64_t amk_plan_want(const amk_vm_ctx_t *x, int threads) {
    const amk_params_t *P = &x->ins.params;
    const int64_t K = P->K, hd = P->head_dim, least = amk_plan_least(x, threads);
    int64_t w = least + amk_plan_blk_ring_bytes(x, threads); /* the block ring's slots, if it takes the tile */
    switch (x->ins.op) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE: {
        /* the tensor-core path (tiles of AMK_MMA_MIN_ROWS rows and more) wants its full ring, + an
           x split in two when x and W differ (amk_mma_stages) */
        const int64_t M = amk_plan_gemm_rows(x);
        if (x->maps != 0 && amk_plan_gemm_tma_ops(x, threads)) /* the tensor-copy GEMM's full ring */
            w = AMK_TMA_SMEM(AMK_GEMM_TMA_STAGES);
        else if (M >= AMK_MMA_MIN_ROWS)
            w = (x->in[0].dtype == x->in[1].dtype ? 0 : 2 * AMK_MMA_TILE) +
                AMK_MMA_STAGES * AMK_MMA_STAGE_BYTES(x->in[0].dtype == AMK_DTYPE_F32 ? 4 : 2, threads / 128);
        break;
    }
    case AMK_OP_ATTENTION_DECODE: case AMK_OP_ATTENTION_O: { /* one chunk for the task's whole key range, up to 512 rows */
        const int dt = x->in[1].dtype;
        const int64_t e = dt == AMK_DTYPE_F32 ? 4 : dt == AMK_DTYPE_F16 || dt == AMK_DTYPE_BF16 ? 2 : 0;
        const int64_t esz = e && x->in[2].dtype == dt && (hd * e) % 16 == 0 ? e : 4; /* the device's staging format */
        const int mma = amk_plan_attn_mma(x);
        const int64_t step = mma ? 16 : 32; /* a chunk's rows come in 16s (tensor cores) or 32s */
        int64_t C = ((int64_t)P->kv_len + step - 1) / step * step;
        if (C > 512) C = 512;
        if (C < step) C = step;
        if (mma) { /* amk_attn_decode_mma's layout */
            const int64_t grp = P->n_heads / P->n_kv_heads;
            w = AMK_ATTN_MMA_SMEM(hd, grp < AMK_ATTN_MMA_ROWS ? grp : AMK_ATTN_MMA_ROWS, C);
        } else {
            w = AMK_ATTN_DECODE_SMEM(hd, AMK_ATTN_ROW_BYTES(hd, esz), AMK_ATTN_KEY_GROUPS(hd, threads), C);
        }
        if (x->ins.op == AMK_OP_ATTENTION_O) { /* + its results, + its rows of W_oT when they stage */
            const int64_t b = amk_plan_rows_bytes(x, P->M_tile);
            if (w < AMK_ATTN_DECODE_LEAST(hd, threads)) w = AMK_ATTN_DECODE_LEAST(hd, threads); /* why: the rows stage only above it */
            w += amk_plan_attn_o_ys_bytes(P) + 16 + (b ? b + 16 : 0); /* + each part's 16-byte alignment */
            if ((uint32_t)P->flags & AMK_ATTN_FLAG_PRENORM) { /* its lean form's, either layout */
                const int64_t t0 = amk_plan_attn_lean_bytes(x, threads, 0), t1 = amk_plan_attn_lean_bytes(x, threads, 1);
                if (t0 > w) w = t0;
                if (t1 > w) w = t1;
            }
        }
        break;
    }
    case AMK_OP_RMSNORM_MLP: { /* + its rows of W_downT, when they stage; its lean form's */
        const int64_t b = amk_plan_rows_bytes(x, P->N_tile), lean = amk_plan_lean_bytes(x, threads);
        w = least + (b ? b + 16 : 0); /* + the rows' 16-byte alignment */
        if (lean > w) w = lean;
        break;
    }
    case AMK_OP_RMSNORM_GEMV: { /* its lean form's, else its ring form's */
        int64_t form = amk_plan_lean_bytes(x, threads);
        if (!form && amk_plan_ring_least(x, threads)) form = AMK_RING_BYTES(threads / 32, K);
        if (x->maps != 0 && amk_plan_gemm_tma_ops(x, threads)) form = AMK_TMA_SMEM(AMK_GEMM_TMA_STAGES);
        if (form > w) w = form;
        break;
    }
    case AMK_OP_ATTENTION_PREFILL: /* the tensor-core form's chunks of 64 rows (and its merge); the warpgroup form's */
        if (amk_plan_attn_prefill_mma(x, threads, INT64_MAX)) {
            const int64_t groups = AMK_ATTN_PF_GROUPS((int64_t)P->M_tile * (P->n_heads / P->n_kv_heads), threads);
            w = AMK_ATTN_PF_SMEM(hd, groups, 64, threads);
            if (AMK_ATTN_PF_MERGE(hd, groups) > w) w = AMK_ATTN_PF_MERGE(hd, groups);
            const int64_t wg = amk_plan_attn_pf_wg_bytes(x, threads);
            if (wg > w) w = wg;
        }
        break;
    default: break;
    }
    return w > least ? w : least;
}

#endif /* AMK_PLAN_H */
