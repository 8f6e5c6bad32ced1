/* amk_ir.h - the AMK IR and on-device ABI as plain C99 PODs (spec IR_SPEC.md §1, §7, §8).

   Shared by the host (amk.h) and the device (amk_vm.cuh): it includes nothing from CUDA and
   only <stdint.h>. Every numeric code and cap below is CANONICAL: it is the spec's, programs
   written by other implementations depend on it, and tests/test_abi.c fails the build on drift.
   Extend enums by appending; never renumber. Opcode 19 is taken by another implementation of the
   spec (FUSED) and stays unused here; AMK's own opcodes start at 20. */
#ifndef AMK_IR_H
#define AMK_IR_H

#include <stdint.h>

/* The ABI alone, and the op table whose codes it fixes (the table's other columns name the host's
   and the device's functions of each op; the device reads only its own). The tuning knobs are
   amk_tune.h's, and the rules by which host and device size an instruction's shared memory are
   amk_plan.h's. */

/* ---- versions (spec §6, §8) ---------------------------------------------------------------- */
#define AMK_IR_VERSION        "0.2.0" /* on-disk JSON format; a major mismatch is rejected */
#define AMK_IR_VERSION_MAJOR  0
#define AMK_IR_VERSION_MINOR  2
#define AMK_IR_VERSION_PATCH  0
#define AMK_ABI_VERSION       "0.2"   /* on-device ABI */
#define AMK_ABI_VERSION_MAJOR 0
#define AMK_ABI_VERSION_MINOR 2

/* ---- ABI caps (spec §8) -------------------------------------------------------------------- */
#define AMK_MAX_INPUTS  8
#define AMK_MAX_OUTPUTS 4
#define AMK_MAX_WAITS   8
#define AMK_MAX_RANK    4

/* ---- enums (spec §1.1); codes are canonical -------------------------------------------------- */
typedef enum amk_dtype {
    AMK_DTYPE_F32 = 0,
    AMK_DTYPE_F16 = 1,
    AMK_DTYPE_BF16 = 2,
    AMK_DTYPE_F8E4M3 = 3,
    AMK_DTYPE_F8E5M2 = 4,
    AMK_DTYPE_I32 = 5,
    AMK_DTYPE_I8 = 6,
    AMK_DTYPE_I4 = 7, /* packed 4-bit, two per byte, element 2b in the low nibble of byte b */
    AMK_DTYPE_U8 = 8,
    AMK_DTYPE_BOOL = 9,
    /* AMK's own: GGUF's block formats (ggml's layouts, REFERENCE.md §1.4), weights only. A block of
       32 or 256 consecutive elements of a row is its bytes as ggml stores them (Q8_0: 34 bytes a
       32; Q2_K ... Q6_K: 84, 110, 144, 176, 210 a 256; IQ4_NL: 18 a 32); a row's length is a
       multiple of the block. Read as float wherever a weight is read (the reference VM decodes the
       block, the device's tiles a quad of elements at a time); nothing writes them. */
    AMK_DTYPE_Q8_0 = 10,
    AMK_DTYPE_Q4_0 = 11,
    AMK_DTYPE_Q4_1 = 12,
    AMK_DTYPE_Q5_0 = 13,
    AMK_DTYPE_Q5_1 = 14,
    AMK_DTYPE_Q2_K = 15,
    AMK_DTYPE_Q3_K = 16,
    AMK_DTYPE_Q4_K = 17,
    AMK_DTYPE_Q5_K = 18,
    AMK_DTYPE_Q6_K = 19,
    AMK_DTYPE_IQ4_NL = 20,
    AMK_DTYPE_COUNT = 21
} amk_dtype;

/* Elements and bytes a block of block dtype t (ggml's sizes; 0 for any other dtype), and the byte
   offsets in a block of its f16 scale d and of its f16 min (m, dmin; -1: none): one table for the
   host (amk_core.h's amk__blk_formats, amk_dtype_block) and the device. AMK_DTYPE_IS_BLOCK: 1 for
   a block dtype (amk_dtype_is_block). */
#define AMK_DTYPE_IS_BLOCK(t) ((t) >= AMK_DTYPE_Q8_0 && (t) < AMK_DTYPE_COUNT)
#define AMK_BLOCK_ELEMS(t) ((t) >= AMK_DTYPE_Q2_K && (t) <= AMK_DTYPE_Q6_K ? 256 : AMK_DTYPE_IS_BLOCK(t) ? 32 : 0)
#define AMK_BLOCK_BYTES(t) \
    ((t) == AMK_DTYPE_Q8_0 ? 34 : (t) == AMK_DTYPE_Q4_0 || (t) == AMK_DTYPE_IQ4_NL ? 18 : (t) == AMK_DTYPE_Q4_1 ? 20 \
     : (t) == AMK_DTYPE_Q5_0 ? 22 : (t) == AMK_DTYPE_Q5_1 ? 24 : (t) == AMK_DTYPE_Q2_K ? 84 : (t) == AMK_DTYPE_Q3_K ? 110 \
     : (t) == AMK_DTYPE_Q4_K ? 144 : (t) == AMK_DTYPE_Q5_K ? 176 : (t) == AMK_DTYPE_Q6_K ? 210 : 0)
#define AMK_BLOCK_D_OFF(t) ((t) == AMK_DTYPE_Q2_K ? 80 : (t) == AMK_DTYPE_Q3_K ? 108 : (t) == AMK_DTYPE_Q6_K ? 208 : 0)
#define AMK_BLOCK_M_OFF(t) \
    ((t) == AMK_DTYPE_Q4_1 || (t) == AMK_DTYPE_Q5_1 || (t) == AMK_DTYPE_Q4_K || (t) == AMK_DTYPE_Q5_K ? 2 \
     : (t) == AMK_DTYPE_Q2_K ? 82 : -1)

typedef enum amk_memspace {
    AMK_SPACE_HBM = 0,            /* weights, KV cache, IO */
    AMK_SPACE_GLOBAL_SCRATCH = 1, /* large activations */
    AMK_SPACE_SMEM = 2,           /* hot activations: on-chip, never crosses SMs */
    AMK_SPACE_REGISTER = 3,       /* lowering hint: on-chip, never crosses SMs */
    AMK_SPACE_COUNT = 4
} amk_memspace;

typedef enum amk_buffer_kind {
    AMK_KIND_WEIGHT = 0,     /* read-only, bound by source */
    AMK_KIND_ACTIVATION = 1, /* transient, may live in a page */
    AMK_KIND_KV_CACHE = 2,   /* persistent read/write across launches */
    AMK_KIND_IO_INPUT = 3,   /* read-only model input */
    AMK_KIND_IO_OUTPUT = 4,  /* model output */
    AMK_KIND_CONST = 5,      /* read-only, bound by source */
    AMK_KIND_COUNT = 6
} amk_buffer_kind;

/* ---- the op table: every opcode once ---------------------------------------------------------
   One row an opcode, in code order. Everything else about an op comes from its row: the enum
   (AMK_OP_<NAME> = code), its JSON name, the arity and required-param checks, its write
   semantics, the validator's region of its writes, and the host's and the device's dispatch. So an
   op lives in its row, its check and reference functions (amk_validate.h, amk_refvm.h), its device
   function (amk_ops.cuh) and its test.

   X(NAME, code, min_in, max_in, n_out, required, write, region, check, ref, dev, dev_first, go, note)
     min_in, max_in  input count (max -1: up to AMK_MAX_INPUTS)
     n_out           output count (-1: at least 1, the check function says how many)
     required        the params the op needs, as ("key", ...,) (trailing comma; () for none)
     write           AMK_WRITE_*: how the op writes its outputs (amk_write_kind below)
     region          the validator's function for the part of an output a task writes
                     (amk__region_*, amk_validate.h): disjoint tiles of one output may share it
     check           its shape, dtype and param-value check (amk__check_*, amk_validate.h)
     ref             its reference implementation (amk__ref_*, amk_refvm.h)
     dev             its device function (amk_op_*, amk_ops.cuh), called as dev(ctx, smem); or, in
                     an AS row, AMK__AS(BASE, bits): the device runs the op as BASE's function with
                     these bits in params.flags (below)
     dev_first       1 in the first row that names dev, 0 in the others: the dispatch calls each
                     device function at one place (why: the VM is one function at the register
                     cap, and a second call site of an op's code made it spill); AS: the row of an
                     op the device runs as another's form (it has no row in the device dispatch)
     go              1: the device function does its setup first and waits itself (amk_op_go);
                     0: the VM waits before calling it (0 in AS rows: BASE's row decides)
     note            one line for amk_op_spec_get and the tools
   Codes are the spec's (0..18) and AMK's own from 20 (19 is another implementation's FUSED and
   stays a hole); append new ops with the next code, never renumber.

   Every variant of an op whose inputs or outputs differ is an op of its own (RMSNORM_GEMV_ROPE, ...,
   ATTENTION_O_PRENORM): its row says its arity and params, and its check and reference functions
   see which it is. The device runs such a variant as a form of its base op: the host's
   instruction (amk_task_instruction) carries the base op's code and the form's bits in
   params.flags (AMK_GEMV_FLAG_*, AMK_MLP_FLAG_FOLD, AMK_ATTN_FLAG_PRENORM: the device ABI's form
   bits, never an IR param: a task's flags holds only ATTENTION_TILE/DECODE's PARTIAL). Why: the
   forms share one device function each, whose code the VM's register budget shapes; the device's
   code is the same whichever way the host names the op. */
#define AMK_OPS(X) \
    X(NOP, 0, 0, 0, 0, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_nop, amk__ref_nop, amk_op_nop, 1, 0, \
      "no-op") \
    X(COPY, 1, 1, 1, 1, (), AMK_WRITE_PLAIN, amk__region_rows, amk__check_copy, amk__ref_copy, amk_op_copy, 1, 0, \
      "out = x (cast; a block-format x dequantized; M_tile >= 1: rows [m_off, +M_tile))") \
    X(EMBED, 2, 2, 2, 1, ("hidden",), AMK_WRITE_PLAIN, amk__region_rows, amk__check_embed, amk__ref_embed, \
      amk_op_embed, 1, 0, "[ids, table[V,...]] -> gathered rows, viewed as out (M_tile >= 1: ids [m_off, +M_tile))") \
    X(RMSNORM, 3, 2, 2, 1, ("eps", "hidden",), AMK_WRITE_PLAIN, amk__region_rows, amk__check_norm, \
      amk__ref_rmsnorm, amk_op_rmsnorm, 1, 0, "x*rsqrt(mean(x^2)+eps)*w (M_tile >= 1: rows [m_off, +M_tile))") \
    X(LAYERNORM, 4, 2, 3, 1, ("eps", "hidden",), AMK_WRITE_PLAIN, amk__region_all, amk__check_norm, \
      amk__ref_layernorm, amk_op_layernorm, 1, 0, "LayerNorm(x, w[, b])") \
    X(GEMV_TILE, 5, 2, 3, 1, ("K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, amk__check_gemv, \
      amk__ref_gemv, amk_op_gemv_tile, 1, 1, "out[..,n_off:n_off+N_tile] = x @ W[n_off:..].T") \
    X(GEMM_TILE, 6, 2, 3, 1, ("M_tile", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_gemv, amk__ref_gemv, amk_op_gemm_tile, 1, 1, \
      "tiled GEMM (prefill/batch; K_tile >= 1: the sum over k in [k_off, +K_tile) alone)") \
    X(ATTENTION_TILE, 7, 3, 4, 1, ("head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads",), \
      AMK_WRITE_PLAIN, amk__region_all, amk__check_attention, amk__ref_attention, amk_op_attention_tile, 1, 0, \
      "GQA attention over a KV window") \
    X(ROPE, 8, 2, 2, 1, ("head_dim", "theta",), AMK_WRITE_PLAIN, amk__region_all, amk__check_rope, \
      amk__ref_rope, amk_op_rope, 1, 0, "rotate-half rotary embedding") \
    X(SILU_MUL, 9, 2, 2, 1, (), AMK_WRITE_PLAIN, amk__region_rows, amk__check_elementwise, amk__ref_silu_mul, \
      amk_op_silu_mul, 1, 0, "silu(gate)*up (M_tile >= 1: rows [m_off, +M_tile))") \
    X(GELU, 10, 1, 1, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_same, amk__ref_gelu, amk_op_gelu, 1, 0, \
      "exact GELU") \
    X(ADD, 11, 2, 2, 1, (), AMK_WRITE_PLAIN, amk__region_rows, amk__check_elementwise, amk__ref_add, \
      amk_op_add, 1, 0, "a + b (M_tile >= 1: rows [m_off, +M_tile))") \
    X(MUL, 12, 1, 2, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_mul, amk__ref_mul, amk_op_mul, 1, 0, \
      "a * b, or a * scale") \
    X(DEQUANT, 13, 2, 3, 1, ("qdtype", "group",), AMK_WRITE_PLAIN, amk__region_all, amk__check_dequant, \
      amk__ref_dequant, amk_op_dequant, 1, 0, "int4/int8 + scales -> fp") \
    X(SOFTMAX, 14, 1, 1, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_softmax, amk__ref_softmax, \
      amk_op_softmax, 1, 0, "softmax over dim") \
    X(ALLREDUCE_SHARD, 15, 1, 8, 1, (), AMK_WRITE_PLAIN, amk__region_rows, amk__check_elementwise, \
      amk__ref_allreduce_shard, amk_op_allreduce_shard, 1, 0, "sum of shards (M_tile >= 1: rows [m_off, +M_tile))") \
    X(KV_APPEND, 16, 2, 2, 1, ("pos",), AMK_WRITE_INPLACE, amk__region_all, amk__check_kv_append, \
      amk__ref_kv_append, amk_op_kv_append, 1, 0, "write row pos of the KV cache") \
    X(SAMPLE_ARGMAX, 17, 1, 1, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_argmax, amk__ref_argmax, \
      amk_op_sample_argmax, 1, 0, "greedy argmax over the last axis") \
    X(ATTENTION_COMBINE, 18, 2, 8, 1, ("head_dim",), AMK_WRITE_PLAIN, amk__region_head_rows, \
      amk__check_attention_combine, amk__ref_attention_combine, amk_op_attention_combine, 1, 0, \
      "merge flash partials (acc, m, l); an input may stack sets, N_tile >= 1: heads [n_off, +N_tile)") \
    X(RMSNORM_GEMV, 20, 3, 3, 1, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_norm_gemv, amk__ref_norm_gemv, amk_op_norm_gemv, 1, 1, \
      "tile of rmsnorm(x) @ W.T (M_tile >= 1: rows [m_off, +M_tile))") \
    X(RMSNORM_SWIGLU, 21, 4, 4, 1, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_norm_gemv, amk__ref_norm_gemv, amk_op_norm_gemv, 0, 1, "tile of silu(xn @ Wg.T) * (xn @ Wu.T)") \
    X(ATTENTION_DECODE, 22, 4, 4, 1, \
      ("head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", "n_off", "N_tile",), \
      AMK_WRITE_PLAIN, amk__region_heads, amk__check_attention, amk__ref_attention, amk_op_attention_decode, 1, 1, \
      "attention of kv heads [n_off, n_off+N_tile) over rows up to pos (partials: into set part)") \
    X(ARGMAX_PARTIAL, 23, 1, 1, 1, ("N_tile", "n_off", "part",), AMK_WRITE_PLAIN, amk__region_pair, \
      amk__check_argmax, amk__ref_argmax, amk_op_argmax_pair, 1, 0, "(max, first index) of a column range, per row") \
    X(ARGMAX_COMBINE, 24, 1, 1, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_argmax, amk__ref_argmax, \
      amk_op_argmax_pair, 0, 0, "index of the best (max, index) partial, per row") \
    X(RMSNORM_MLP, 25, 5, 6, 1, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_ACCUM, amk__region_all, \
      amk__check_norm_gemv, amk__ref_norm_gemv, amk_op_norm_gemv, 0, 1, \
      "out += (silu(xn @ Wg[tile].T) * (xn @ Wu[tile].T)) @ W_downT[tile] (a block W_down [H, N]: W_down[:, tile].T) (+ resid); accumulates") \
    X(FILL, 26, 0, 0, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_fill, amk__ref_fill, amk_op_fill, 1, 0, \
      "out = scale everywhere") \
    X(ATTENTION_O, 27, 5, 6, 1, \
      ("head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", "n_off", "N_tile", "m_off", "M_tile",), \
      AMK_WRITE_ACCUM_FIRST, amk__region_all, amk__check_attention, amk__ref_attention, \
      amk_op_attention_decode, 0, 1, \
      "out += attention(kv heads [n_off, n_off+N_tile))[m_off:+M_tile] @ W_oT[m_off:+M_tile] (+ resid); " \
      "accumulates") \
    X(BIAS_ADD, 28, 2, 2, 1, (), AMK_WRITE_PLAIN, amk__region_all, amk__check_bias_add, amk__ref_bias_add, \
      amk_op_bias_add, 1, 0, "out[m, n] = x[m, n] + b[n]: a bias over x's rows") \
    X(RMSNORM_GEMV_ROPE, 29, 4, 4, 1, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_norm_gemv, amk__ref_norm_gemv, AMK__AS(RMSNORM_GEMV, AMK_GEMV_FLAG_ROPE), AS, 0, \
      "RMSNORM_GEMV's tile, RoPE on its pairs at pos[m] (input 3, a position a row of x)") \
    X(RMSNORM_GEMV_KV, 30, 4, 4, 1, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_norm_gemv, amk__ref_norm_gemv, AMK__AS(RMSNORM_GEMV, AMK_GEMV_FLAG_KV_ROW), AS, 0, \
      "RMSNORM_GEMV's tile into row pos[m] (input 3) of out, a cache of rows of W's N (M_tile: pos[m] = pos[0] + m)") \
    X(RMSNORM_GEMV_ROPE_KV, 31, 4, 4, 1, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_norm_gemv, amk__ref_norm_gemv, AMK__AS(RMSNORM_GEMV, AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW), \
      AS, 0, "RMSNORM_GEMV_ROPE's tile into row pos[m] of a cache (a layer's K; M_tile: pos[m] = pos[0] + m)") \
    X(RMSNORM_GEMV_ARGMAX, 32, 3, 3, 2, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_PLAIN, amk__region_cols, \
      amk__check_norm_gemv, amk__ref_norm_gemv, AMK__AS(RMSNORM_GEMV, AMK_GEMV_FLAG_ARGMAX), AS, 0, \
      "RMSNORM_GEMV's tile, and its (max, first index) per row as the pair `part` of output 1") \
    X(RMSNORM_MLP_FOLD, 33, 6, 7, 2, ("eps", "K", "N_tile", "n_off",), AMK_WRITE_ACCUM, amk__region_all, \
      amk__check_norm_gemv, amk__ref_norm_gemv, AMK__AS(RMSNORM_MLP, AMK_MLP_FLAG_FOLD), AS, 0, \
      "RMSNORM_MLP's tile, and output 1 qkv += its share of the next layer's folded projections (W_cat, input 5)") \
    X(ATTENTION_O_PRENORM, 34, 6, 7, -1, \
      ("head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", "n_off", "N_tile", "m_off", "M_tile", \
       "eps",), AMK_WRITE_ACCUM_FIRST, amk__region_kv_heads, amk__check_attention, amk__ref_attention, \
      AMK__AS(ATTENTION_O, AMK_ATTN_FLAG_PRENORM), AS, 0, \
      "ATTENTION_O on raw projections qkv (input 0) and x's rms (input 5); with outputs 2 and 3, the caches, " \
      "k/v into row pos") \
    X(ATTENTION_PREFILL, 35, 4, 4, 1, \
      ("head_dim", "scale", "n_heads", "n_kv_heads", "n_off", "N_tile", "m_off", "M_tile",), AMK_WRITE_PLAIN, \
      amk__region_query_rows, amk__check_attention_prefill, amk__ref_attention_prefill, amk_op_attention_prefill, 1, 0, \
      "causal attention of query rows [m_off, m_off+M_tile) at positions pos + m over the cache rows up to each")

/* How an op writes its outputs (the op table's write column). The validator's race rules read it. */
typedef enum amk_write_kind {
    AMK_WRITE_PLAIN = 0,       /* overwrites what it writes */
    AMK_WRITE_ACCUM = 1,       /* adds into every output: such writers of one buffer commute */
    AMK_WRITE_ACCUM_FIRST = 2, /* adds into its first output; its other outputs are plain writes */
    AMK_WRITE_INPLACE = 3      /* its output is its input 1, of which it writes one row and reads
                                  nothing (KV_APPEND's cache) */
} amk_write_kind;

/* The opcodes (spec §1.1, §7; AMK's own from 20: README "Opcodes"). */
typedef enum amk_opcode {
#define AMK__OP_ENUM(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) AMK_OP_##name = code,
    AMK_OPS(AMK__OP_ENUM)
#undef AMK__OP_ENUM
    AMK_OP_COUNT,               /* one past the largest code (the codes in use are dense, but for 19) */
    AMK_OP_RESERVED_FUSED = 19  /* why: taken by another implementation of the spec; never used here */
} amk_opcode;

/* The table's rows in order (AMK__OP_ROW_<NAME>), and their count. */
enum amk__op_row {
#define AMK__OP_ROW(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) AMK__OP_ROW_##name,
    AMK_OPS(AMK__OP_ROW)
#undef AMK__OP_ROW
    AMK__OP_ROWS
};
/* why: the rows must be the codes 0..AMK_OP_COUNT-1 but for the hole at 19, each once; the
   array size is negative (a compile error) otherwise, since the enum's count then disagrees. */
typedef char amk__op_table_dense[AMK__OP_ROWS == AMK_OP_COUNT - 1 ? 1 : -1];

/* ATTENTION_TILE / ATTENTION_DECODE params.flags bit (IR_SPEC_NOTES conventions table): the op's
   output is the flash partials, not the attention. */
#define AMK_ATTN_FLAG_PARTIAL (1u << 1) /* write [n_heads, head_dim+2] = [acc | m | l] */
/* Stacked partials (AMK's extension of the spec's COMBINE): ATTENTION_DECODE's partial output may
   hold several sets of [n_heads, head_dim+2], the task writing set `part` (0 by default), so that
   more KV splits than COMBINE's 8 inputs meet in one merge. ATTENTION_COMBINE then takes n_heads
   from its output ([n_heads*head_dim]), and each of its ni inputs holds k sets: partial p = s*ni + i
   is set s of input i, the splits' order. With N_tile >= 1 a COMBINE task merges only the heads
   [n_off, n_off+N_tile) (several tasks share the heads). */

/* The device ABI's form bits (amk_instruction_t.params.flags; the op table's AS rows set them):
   which variant of its base op the device runs. Not IR params: a task names its variant by its
   opcode. */
/* ATTENTION_O_PRENORM (ATTENTION_O's form; amk_llama_build's qkv_fold). Input 0 is qkv [1, F]
   (F32, F = (n_heads + 2*n_kv_heads)*head_dim): the raw projections Wqkv diag(norm_w) x, Q rows,
   then K, then V, Q and K in interleaved pair order; input 5 is x [1, H] itself, 6 the optional
   resid. With inv = 1/sqrt(mean(x^2) + eps): q = RoPE(inv * q part) (F32), k = RoPE(inv * k
   part), v = inv * v part, k and v rounded to the caches' dtypes; RoPE as RMSNORM_GEMV_ROPE's
   (theta, the llama3 params) at the position. Key row pos is k, v (never the caches' row pos);
   the rows below it come from the caches. With 3 outputs [out, k cache, v cache] (the buffers of
   inputs 1 and 2) the task also stores its kv heads' k and v into cache row pos (a position
   outside the cache is a run-time error): one such writer a kv head. Params also eps and RoPE's. */
#define AMK_ATTN_FLAG_PRENORM (1u << 2)
/* RMSNORM_MLP_FOLD (RMSNORM_MLP's form): the fold of the next layer's Q/K/V projections. Input 5
   is W_cat [N + K, F] (F32, BF16 or F16), the resid moves to input 6; output 1 qkv [M, F] (F32)
   accumulates qkv[m, :] += sum over the tile's n of y[n] W_cat[n, :] + sum over k in [b0, b1) of
   x[m, k] W_cat[N + k, :], y the tile's SwiGLU values, x the raw input 0, b0 = n_off*K/N and b1 =
   (n_off+N_tile)*K/N (floored; tiles that partition [0, N) partition the K base rows). */
#define AMK_MLP_FLAG_FOLD (1u << 0)
/* RMSNORM_GEMV's forms. RMSNORM_GEMV_ROPE, _KV and _ROPE_KV take the positions as a 4th input (one
   per row of x); RMSNORM_GEMV_ARGMAX takes a second output. RMSNORM_GEMV and its RoPE and KV forms
   take the rows [m_off, m_off + M_tile) of x alone when M_tile is given (a prefill chunk's tiles
   split by rows as well as columns); a KV form's task with M_tile then needs consecutive
   positions, pos[m] = pos[0] + m for each of its rows (a position error at run time otherwise), so
   that tiles of disjoint rows write disjoint cache rows. */
/* AMK_X_Q8: param x_q8 = 1 on a GEMV_TILE, GEMM_TILE or RMSNORM_* tile (any form) whose W (or gate
   or up) is in a GGUF block format rounds the vector its matrices multiply to 8 bits, as llama.cpp's
   q8_1 does: each row of x (RMSNORM_*: x * norm_w, before the 1/rms scale, which then scales the
   dots) in units of 32 elements, element y of a unit becoming d * q with d = amax / 127 and q =
   rint(y * 127 / amax) in [-127, 127] (amk_plan.h's amk_plan_x_q8: its exact float steps). Every
   matrix of the tile (a float one beside a block one too) multiplies the rounded x; RMSNORM_MLP's
   W_down multiplies its values unrounded. So a block unit's dot is d_w d sum(q_w q) plus its min's
   term, integer sums the GPU's block ring computes by dp4a. The validator takes x_q8 = 1 only on
   a tile with a block-format matrix. */
#define AMK_X_Q8 1
#define AMK_GEMV_FLAG_ROPE (1u << 0)   /* RoPE on the tile's output, pairs (2i, 2i+1) of each head */
#define AMK_GEMV_FLAG_KV_ROW (1u << 1) /* out is a cache of rows of W's N: write row pos[m] */
#define AMK_GEMV_FLAG_ARGMAX (1u << 2) /* output 1 [M, 2P] (F32) gets, per row, the max of the tile's
                                          values as stored in out and its first index, as the pair
                                          `part` (ARGMAX_PARTIAL's) */

/* ---- the device ABI (spec §8) ---------------------------------------------------------------
   The host resolves a validated program into these tables before launch. Every field is a fixed
   width integer or float so host and device agree on the layout without CUDA headers. */

/* Every scalar param of every opcode, marshalled from Task.params (keys in AMK_PARAM_FIELDS of
   amk.h). The host fills defaults (group = K, scale = 1, dim = -1, m_off = 0, ...) so the device
   never needs to know which keys were present. */
typedef struct amk_params_t {
    int32_t hidden, K, N_tile, n_off, M_tile, m_off;
    int32_t head_dim, kv_start, kv_len, n_heads, n_kv_heads;
    int32_t qdtype, group, pos, flags, dim, rope_orig_ctx, part;
    float eps, scale, theta, rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int32_t sliding_window; /* ATTENTION_DECODE/_O: a query at pos sees rows (pos - it, pos]; 0 all */
    int32_t rope_type;      /* AMK_ROPE_*: how rope_factor scales RoPE's frequencies */
    int32_t x_q8;           /* GEMV-family tiles with a block-format W: 1 rounds x to 8 bits a unit (AMK_X_Q8) */
    int32_t k_off, K_tile;  /* GEMM_TILE: K_tile >= 1 sums k in [k_off, k_off + K_tile) alone (split K); 0 all of K */
    int32_t reserved[1];    /* 0. why: amk_vm_ctx_t stays a multiple of 16 bytes (the VM's one bulk copy) */
} amk_params_t;

/* RoPE's frequency scaling (param rope_type; RoPE's ops and forms). DEFAULT: llama3's when
   rope_factor > 0 (with rope_low_freq_factor, rope_high_freq_factor, rope_orig_ctx), else none.
   LINEAR: every inverse frequency divided by rope_factor. YARN (HF transformers'): the inverse
   frequencies ramp from extrapolated (the plain ones) to interpolated (divided by rope_factor)
   between the dimensions where a wave turns rope_high_freq_factor (beta_fast) and
   rope_low_freq_factor (beta_slow) times within rope_orig_ctx positions (floored and ceiled).
   YaRN's attention factor (HF scales cos and sin by 0.1 ln(factor) + 1) is not RoPE's here: the
   builder folds its square into the attention's scale (q . k carries it twice).
   In amk_params_t (not in the task's params), LINEAR and YARN hold the ramp instead: pair i's
   frequency blends from plain to divided by rope_factor as i goes from rope_low_freq_factor to
   rope_high_freq_factor, which amk_task_marshal_params derives (YaRN's range as HF computes it;
   for LINEAR a ramp below pair 0, so every pair is divided). */
enum { AMK_ROPE_DEFAULT = 0, AMK_ROPE_LINEAR = 1, AMK_ROPE_YARN = 2 };

/* One tensor as the device sees it. ptr is a device address (or a host address in the reference
   VM), already offset for paged activations. Strides are in elements, row-major. */
typedef struct amk_buffer_t {
    uint64_t ptr;
    int64_t numel;
    int32_t rank, dtype, space, kind;
    int64_t shape[AMK_MAX_RANK];
    int64_t stride[AMK_MAX_RANK];
} amk_buffer_t;

/* Monotonic across launches (the epoch scheme, amk_program_t.epoch): launch e since the host last
   zeroed them waits for threshold * e. */
typedef uint32_t amk_counter_t;

/* The VM's L2 prefetch of a tile's weights while it waits (amk__cuda_prefetches computes the
   ranges; amk_vm.cuh issues them). */
#define AMK_VM_PREFETCHES 3 /* ranges an instruction carries: a norm weight, gate rows, up rows */

/* amk_instruction_t.hints. KV_EARLY (an ATTENTION_O task): its position input is written by no
   task, and every task that writes its K or V cache writes only the row at that position (an
   RMSNORM_GEMV_KV or _ROPE_KV of one row of x, or an ATTENTION_O_PRENORM, with the same position
   buffer), so the rows below the position are final before the task's wait. */
#define AMK_VM_HINT_KV_EARLY (1u << 0)

/* One Task == one instruction, a fixed-size POD. */
typedef struct amk_instruction_t {
    int32_t op, sm, out_counter, id;
    int32_t n_inputs, n_outputs, n_waits;
    uint32_t hints; /* AMK_VM_HINT_* bits the runtime derives from the whole program (the spec's
                       reserved0; 0 in a table built by anything else) */
    int32_t inputs[AMK_MAX_INPUTS];
    int32_t outputs[AMK_MAX_OUTPUTS];
    int32_t wait_counter[AMK_MAX_WAITS];
    uint32_t wait_threshold[AMK_MAX_WAITS];
    amk_params_t params;
    /* L2 prefetches the VM issues while the instruction waits (computed by the host, runtime only:
       the first weight bytes of a GEMV-family tile, its norm weight); bytes 0 = none */
    uint64_t prefetch_addr[AMK_VM_PREFETCHES];
    uint32_t prefetch_bytes[AMK_VM_PREFETCHES];
    uint32_t form; /* the device form the runtime planned (amk_plan_form, amk_plan.h: AMK_FORM_*); 0 in a
                      table built by anything else. The device does not read it yet (amk_plan.h) */
} amk_instruction_t;

/* The whole program on the device. sm_queue_offset has num_sms+1 entries; the queue of SM s is
   entries [sm_queue_offset[s] .. sm_queue_offset[s+1]) in walk order: of sm_queue (instruction
   indices) in the spec's layout, of contexts in AMK's (which leaves instructions and sm_queue 0). */
typedef struct amk_program_t {
    uint64_t buffers;         /* amk_buffer_t[n_buffers] */
    uint64_t counters;        /* amk_counter_t[n_counters] */
    uint64_t instructions;    /* amk_instruction_t[n_instructions]; 0 in AMK: see contexts */
    uint64_t sm_queue_offset; /* int32_t[num_sms + 1] */
    uint64_t sm_queue;        /* int32_t[n_instructions]; 0 in AMK: see contexts */
    uint64_t scratch;         /* base of the page arena */
    uint64_t abort_flag;      /* uint32_t*: nonzero makes every wait give up */
    uint64_t timing;          /* optional per-instruction records, 0 = off */
    int32_t n_buffers, n_counters, n_instructions, num_sms;
    int32_t abi_major, abi_minor;
    /* AMK's epoch scheme (instead of zeroing the counters before every launch): the launches since
       the host last zeroed the counters and status words, this one included (>= 1). A valid
       program's every wait is an all-join (threshold == its counter's producer count, IR_SPEC
       §3.2) and a completed launch runs every task once, so after launch e each counter holds
       e * threshold: launch e waits for threshold * epoch (mod 2^32, compared by signed
       difference). The host zeroes them again (epoch 1) after a launch it did not see complete
       cleanly, and before the epoch could wrap. */
    uint32_t epoch;
    int32_t reserved1;
    uint64_t contexts;        /* amk_vm_ctx_t[n_instructions], in sm_queue order (AMK's addition) */
} amk_program_t;

/* The chained steps' kernel (amk_vm.cuh built with AMK_VM_CHAIN 1: amk_vm_chain, whose second
   parameter this is; amk_cuda_set_chain): it walks its queue n_steps times in one launch, step s
   on epoch + s. Between steps every block with a queue (blocks of them) adds 1 to the status word
   AMK_VM_STATUS_CHAIN_ARRIVE with release; block feeder waits for blocks * (base + s + 1)
   arrivals, then copies the step's next token (next, I32) to the token input (token, I32) and to
   tokens[s] (I32 [n_steps - 1]), adds 1 to the position input (pos, I32), and adds 1 to
   AMK_VM_STATUS_CHAIN_GO with release; every block waits for GO to reach base + s + 1 before step
   s + 1. base: the steps joined since the status words were zeroed (both words count on across
   launches, like the counters). why a parameter of its own, not fields of amk_program_t: a
   larger amk_program_t changed amk_vm_main's code (871 KB against 953), and any change there
   moves the single step's time (bench/RESULTS.md run 271). */
typedef struct amk_vm_chain_t {
    int32_t n_steps, blocks, feeder;
    uint32_t base;
    uint64_t next, token, pos, tokens;
} amk_vm_chain_t;

/* What the VM copies into shared memory for one queue entry: the instruction, the descriptors of
   its inputs and outputs (slots past n_inputs / n_outputs zero) and its index in the instruction
   table. The host resolves them once, in queue order, so the VM fetches a whole context with one
   bulk copy from an address it computes from the entry alone, a task ahead (amk_vm.cuh). */
typedef struct amk_vm_ctx_t {
    amk_instruction_t ins;
    amk_buffer_t in[AMK_MAX_INPUTS];
    amk_buffer_t out[AMK_MAX_OUTPUTS];
    int32_t index;
    /* A task's pair of tensor maps (two CUtensorMaps, the second 128 bytes after the first), or 0:
       - the lean ATTENTION_O's cache rows (AMK_ATTN_KV_TMA): K's and V's maps, each a box of
         head_dim x kv_rows elements of the cache (set with AMK_VM_HINT_KV_EARLY only; without
         them the task stages its rows by cp.async);
       - a GEMV/GEMM tile's operands (amk_gemm_tma, AMK_GEMM_TMA): x's and W's maps.
       The runtime encodes them (amk__cuda_kv_pairs, amk__cuda_kv_maps); kv_rows is ATTENTION_O's. */
    int32_t kv_rows;
    uint64_t maps;
} amk_vm_ctx_t;

/* VM status words at amk_program_t.abort_flag: uint32_t[4 + num_sms + 2], zeroed with the
   counters (only a failed launch writes [0..3]; each block zeroes its [4 + b] as it starts).
   [0] abort (0 run, 1 host watchdog, 2 device error) [1] error task [2] error code [3] value
   [4 + b] queue entries block b finished in this launch (over all its chained steps)
   [4 + num_sms] the chained steps' arrivals, [5 + num_sms] their go word (amk_vm_chain_t). */
#define AMK_VM_STATUS_ABORT 0
#define AMK_VM_STATUS_ERR_TASK 1
#define AMK_VM_STATUS_ERR_CODE 2
#define AMK_VM_STATUS_ERR_VALUE 3
#define AMK_VM_STATUS_PROGRESS 4
#define AMK_VM_STATUS_CHAIN_ARRIVE(num_sms) (AMK_VM_STATUS_PROGRESS + (num_sms))
#define AMK_VM_STATUS_CHAIN_GO(num_sms) (AMK_VM_STATUS_PROGRESS + (num_sms) + 1)
#define AMK_VM_STATUS_WORDS(num_sms) (AMK_VM_STATUS_PROGRESS + (num_sms) + 2)
#define AMK_VM_ABORT_HOST 1u
#define AMK_VM_ABORT_ERROR 2u
#define AMK_VM_ERR_EMBED_ID 1
#define AMK_VM_ERR_ROPE_POS 2
#define AMK_VM_ERR_BAD_OP 3
#define AMK_VM_ERR_SMEM 4
#define AMK_VM_ERR_KV_POS 5 /* a KV-cache row position outside the cache (or, M_tile, not pos[0] + m) */

/* One per instruction when amk_program_t.timing != 0 (globaltimer ns). */
typedef struct amk_vm_timing_t {
    uint64_t t_wait, t_start, t_end;
    uint32_t block, smid;
    int32_t op;
    uint32_t done;
} amk_vm_timing_t;

/* Marks: up to AMK_VM_MARKS_N points inside an op, each the ns from the op's t_start to when its
   thread 0 passed the point (0: not passed, or the image has no marks). One record per
   instruction, right after the timing records ([n_instructions] of them, at amk_program_t.timing
   + n_instructions * sizeof(amk_vm_timing_t)); the host reserves and zeroes both. Only an image
   built with AMK_VM_MARKS 1 (amk_tune.h; a diagnostic, never shipped) writes them: where an op's
   time goes, e.g. the lean attention's staging, softmax, p * V and O rows (bench/phases.py
   prints their medians a phase). */
#define AMK_VM_MARKS_N 4
typedef struct amk_vm_marks_t {
    uint32_t ns[AMK_VM_MARKS_N];
} amk_vm_marks_t;

#endif /* AMK_IR_H */
