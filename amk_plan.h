/* amk_plan.h - the device form planner's shared sizing rules, compiled into host and device.
   Part of AMK (see amk.h for the manual).

   An instruction's device form lays out its dynamic shared memory by these rules (amk_ops.cuh),
   and the host sizes the launch's shared memory by the same rules (amk_cuda.h: amk__cuda_smem_want
   and the form checks beside it), so the two agree by construction. They are not ABI (amk_ir.h):
   a rule may change whenever host and device change together. The knobs they read (AMK_LEAN_PPL,
   AMK_RING_SLOTS, AMK_ROWS_STAGE_MAX, AMK_MMA_KC, ...) are amk_tune.h's. Plain C99 macros over
   int64_t, and the planner's functions (AMK_PLAN_FN): the device includes this file from
   amk_ops.cuh, the host from amk_arch.h (the builder asks it) and amk_cuda.h. */
#ifndef AMK_PLAN_H
#define AMK_PLAN_H

#include "amk_ir.h"
#include "amk_tune.h"

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

/* ---- the tensor-core GEMM path (amk_gemm_mma) ---------------------------------------------------
   Tiles of AMK_MMA_MIN_ROWS rows and more, K in chunks of AMK_MMA_KC, a ring of AMK_MMA_STAGES;
   the host sizes the launch's shared memory from these (amk__cuda_smem_want). */
#define AMK_MMA_TILE (64 * AMK_MMA_KC * 2) /* bytes of one 64 x KC 16-bit operand tile */
/* bytes of the x rows of a chunk (xsz bytes an element), and of a ring stage: those plus one W
   tile per warpgroup (nwg of them) */
#define AMK_MMA_X_BYTES(xsz) ((int64_t)64 * AMK_MMA_KC * (xsz))
#define AMK_MMA_STAGE_BYTES(xsz, nwg) (AMK_MMA_X_BYTES(xsz) + (int64_t)(nwg) * AMK_MMA_TILE)

#endif /* AMK_PLAN_H */
