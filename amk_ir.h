/* amk_ir.h - the AMK IR and on-device ABI as plain C99 PODs (spec IR_SPEC.md §1, §7, §8).

   Shared by the host (amk.h) and the device (amk_vm.cuh): it includes nothing from CUDA and
   only <stdint.h>. Every numeric code and cap below is CANONICAL: it is the spec's, programs
   written by other implementations depend on it, and tests/test_abi.c fails the build on drift.
   Extend enums by appending; never renumber. Opcode 19 is taken by another implementation of the
   spec (FUSED) and stays unused here; AMK's own opcodes start at 20. */
#ifndef AMK_IR_H
#define AMK_IR_H

#include <stdint.h>

/* The ABI alone: the tuning knobs are amk_tune.h's, and the rules by which host and device size
   an instruction's shared memory are amk_plan.h's. */

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
    AMK_DTYPE_COUNT = 10
} amk_dtype;

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

typedef enum amk_opcode {
    AMK_OP_NOP = 0,
    AMK_OP_COPY = 1,
    AMK_OP_EMBED = 2,
    AMK_OP_RMSNORM = 3,
    AMK_OP_LAYERNORM = 4,
    AMK_OP_GEMV_TILE = 5,
    AMK_OP_GEMM_TILE = 6,
    AMK_OP_ATTENTION_TILE = 7,
    AMK_OP_ROPE = 8,
    AMK_OP_SILU_MUL = 9,
    AMK_OP_GELU = 10,
    AMK_OP_ADD = 11,
    AMK_OP_MUL = 12,
    AMK_OP_DEQUANT = 13,
    AMK_OP_SOFTMAX = 14,
    AMK_OP_ALLREDUCE_SHARD = 15,
    AMK_OP_KV_APPEND = 16,
    AMK_OP_SAMPLE_ARGMAX = 17,
    AMK_OP_ATTENTION_COMBINE = 18,
    AMK_OP_RESERVED_FUSED = 19, /* why: taken by another implementation of the spec; never used */
    /* AMK's own opcodes (IR_SPEC_NOTES conventions table style, documented in README "Opcodes"):
       fused forms of the decode step, so one task does what a chain of 0..18 tasks did */
    AMK_OP_RMSNORM_GEMV = 20,     /* [x, norm_w, W(, pos)]: tile of rmsnorm(x) @ W.T, optional
                                     interleaved RoPE and KV-cache row store (AMK_GEMV_FLAG_*) */
    AMK_OP_RMSNORM_SWIGLU = 21,   /* [x, norm_w, W_gate, W_up]: tile of silu(xn@Wg.T) * (xn@Wu.T) */
    AMK_OP_ATTENTION_DECODE = 22, /* [q, k cache, v cache, pos]: ATTENTION_TILE over kv heads
                                     [n_off, n_off+N_tile), rows [kv_start, min(kv_start+kv_len, pos+1)) */
    AMK_OP_ARGMAX_PARTIAL = 23,   /* [logits]: per row, (max, first index of it) over columns
                                     [n_off, n_off+N_tile) into columns 2*part, 2*part+1 of out */
    AMK_OP_ARGMAX_COMBINE = 24,   /* [partials]: per row, the index of the best (max, index) pair */
    AMK_OP_RMSNORM_MLP = 25,      /* [x, norm_w, W_gate, W_up, W_downT [N, H](, resid)]: ACCUMULATES
                                     out[m, :] += (the tile's silu(xn@Wg.T) * (xn@Wu.T)) @
                                     W_downT[n_off:n_off+N_tile] (+ resid[m, :] when given); out F32.
                                     W_downT is down_proj transposed: the tile's rows are contiguous.
                                     With AMK_MLP_FLAG_FOLD: [x, norm_w, W_gate, W_up, W_downT, W_cat
                                     [N + K, F](, resid)] and a second output qkv [M, F] (F32) that
                                     accumulates too (the flag's comment) */
    AMK_OP_FILL = 26,             /* []: every element of out = scale (an accumulation's start) */
    AMK_OP_ATTENTION_O = 27,      /* [q, k cache, v cache, pos, W_oT [n_heads*head_dim, H](, resid)]:
                                     ACCUMULATES out[0, :] += a[m_off:m_off+M_tile] @
                                     W_oT[m_off:m_off+M_tile] (+ resid), a = ATTENTION_DECODE's
                                     result for kv heads [n_off, n_off+N_tile) in F32; out F32.
                                     With AMK_ATTN_FLAG_PRENORM: [qkv [1, F], k cache, v cache, pos,
                                     W_oT, x [1, H](, resid)], q/k/v from the raw projections qkv
                                     and x's rms; outputs [out] or [out, k cache, v cache] (the
                                     flag's comment) */
    AMK_OP_COUNT = 28             /* the registry has this many rows; row 19 is undefined */
} amk_opcode;

/* ATTENTION_TILE params.flags bits (IR_SPEC_NOTES conventions table). */
#define AMK_ATTN_FLAG_PARTIAL (1u << 1) /* write [n_heads, head_dim+2] = [acc | m | l] */
/* ATTENTION_O params.flags bit (alone): the folded Q/K/V (amk_llama_build's qkv_fold). Input 0 is
   qkv [1, F] (F32, F = (n_heads + 2*n_kv_heads)*head_dim): the raw projections Wqkv diag(norm_w)
   x, Q rows, then K, then V, Q and K in interleaved pair order; input 5 is x [1, H] itself, 6 the
   optional resid. With inv = 1/sqrt(mean(x^2) + eps): q = RoPE(inv * q part) (F32), k =
   RoPE(inv * k part), v = inv * v part, k and v rounded to the caches' dtypes; RoPE as
   RMSNORM_GEMV's ROPE (theta, the llama3 params) at the position. Key row pos is k, v (never the
   caches' row pos); the rows below it come from the caches. With 3 outputs [out, k cache, v cache]
   (the buffers of inputs 1 and 2) the task also stores its kv heads' k and v into cache row pos
   (a position outside the cache is a run-time error): one such writer a kv head. Params also eps
   and RoPE's. */
#define AMK_ATTN_FLAG_PRENORM (1u << 2)
/* RMSNORM_MLP params.flags bit: the fold of the next layer's Q/K/V projections. Input 5 is W_cat
   [N + K, F] (F32, BF16 or F16), the resid moves to input 6; output 1 qkv [M, F] (F32) accumulates
   qkv[m, :] += sum over the tile's n of y[n] W_cat[n, :] + sum over k in [b0, b1) of x[m, k]
   W_cat[N + k, :], y the tile's SwiGLU values, x the raw input 0, b0 = n_off*K/N and b1 =
   (n_off+N_tile)*K/N (floored; tiles that partition [0, N) partition the K base rows). */
#define AMK_MLP_FLAG_FOLD (1u << 0)
/* RMSNORM_GEMV params.flags bits. ROPE and KV_ROW take the positions as a 4th input (one per row
   of x); ARGMAX takes a second output. */
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
    float reserved1, reserved2;
} amk_params_t;

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
   RMSNORM_GEMV with KV_ROW of one row of x, or an ATTENTION_O PRENORM, with the same position
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
    uint32_t reserved_keep; /* 0; reserved */
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
    /* The lean attention's cache rows by tensor copies (amk_ops.cuh, AMK_ATTN_KV_TMA): kv_maps the
       device address of two tensor maps (K's, then V's 128 bytes later; amk__cuda_kv_maps), each
       a box of head_dim x kv_rows elements of the cache; 0 = none (the task stages its rows by
       cp.async). The runtime sets them for ATTENTION_O tasks with AMK_VM_HINT_KV_EARLY only. */
    int32_t kv_rows;
    uint64_t kv_maps;
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
#define AMK_VM_ERR_KV_POS 5 /* a KV-cache row position outside the cache */

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
