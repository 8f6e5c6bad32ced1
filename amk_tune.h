/* amk_tune.h - AMK's tuning knobs: every compile-time choice of a form, a size or a default, for
   the host and the device, in one table. Part of AMK (see amk.h for the manual).

   Set a knob with -D (or #define it before the first AMK header). Where the table says "H+D" the
   host and the device both read it: the host sizes the shared memory that the device lays out,
   so set it alike for the host build and for the device image (gpu.mk's NVCC_FLAGS), or the two
   disagree. The device includes this file through amk_ops.cuh, the host through amk_plan.h
   (from amk_arch.h and amk_cuda.h); amk_ir.h, the ABI, includes neither. The "run" column names the
   bench/RESULTS.md run that measured the default (NOTES "cuda": bench/NOTES.md's first session,
   before RESULTS numbered its runs). The values and forms that lost on the way are in
   bench/NOTES.md, "Knob history".

   | knob                      | default | what it chooses                  | why this default                   | run          |
   |---------------------------|---------|----------------------------------|------------------------------------|--------------|
   | device VM (amk_vm.cuh; amk_ops.cuh >>go)                                                                                   |
   | AMK_VM_MAX_THREADS        | 512     | the VM kernel's launch bound;    | 128 registers a thread; at 1024    | NOTES "cuda" |
   |                           |         | the host caps a launch at it     | (64) the ops spill                 |              |
   |                           |         | (H+D)                            |                                    |              |
   | AMK_VM_EARLY_SETUP        | 1       | an op's setup before its waits   | the setup runs while the block     | 133          |
   |                           |         | (amk_op_go); 0: the waits before | waits anyway                       |              |
   |                           |         | every op                         |                                    |              |
   | AMK_VM_BACKOFF_MIN_NS     | 32u     | a counter poll's first sleep     | about one L2 round trip            | not measured |
   |                           |         | (ns)                             |                                    |              |
   | AMK_VM_BACKOFF_MAX_NS     | 64u     | the polls' back-off cap (ns)     | a waiter oversleeps by half a      | 137          |
   |                           |         |                                  | sleep; 64 beat 128 by 0.9% on      |              |
   |                           |         |                                  | SmolLM2                            |              |
   | AMK_VM_MARKS              | 0       | 1: an image that records points  | a diagnostic: the shipped image    | not measured |
   |                           |         | inside the ops (amk_vm_marks_t,  | stays the one measured             |              |
   |                           |         | amk_ir.h)                        |                                    |              |
   | device ops (amk_ops.cuh)                                                                                                   |
   | AMK_L2_HINTS              | 1       | weights' bulk copies and L2      | streamed once, the weights would   | 255          |
   |                           |         | prefetches evict-first           | evict the code, K/V rows and       |              |
   |                           |         |                                  | activations: SmolLM2 -4%           |              |
   | AMK_GEMV_ROWS             | 1       | x rows a GEMV pass over a weight | decode tiles have one row; with 4  | 20           |
   |                           |         | row                              | the VM's code was 1.19 MB, not     |              |
   |                           |         |                                  | 0.79, and steps 6-17% slower       |              |
   | AMK_GEMV_INFLIGHT         | 8       | 16-byte weight loads in flight a | 4 were latency-bound (1.85 -> 2.24 | NOTES        |
   |                           |         | lane (the GEMV path)             | TB/s at 256 threads); 12 no faster | "cuda"; 12:  |
   |                           |         |                                  |                                    | 53           |
   | AMK_MMA_MIN_ROWS          | 4       | rows from which GEMV/GEMM tiles  | 2-3 rows are memory-bound on       | 38           |
   |                           |         | take the tensor cores (H+D)      | either path                        |              |
   | AMK_MMA_KC                | 64      | K elements a tensor-core chunk,  | 128 leaves no ring of f32 x at 512 | 38           |
   |                           |         | a power of two >= 64 (H+D)       | threads; under 64 the epilogue's   |              |
   |                           |         |                                  | staging overruns                   |              |
   | AMK_MMA_STAGES            | 4       | the tensor-core ring's stages,   | 8 measured no faster               | 38           |
   |                           |         | 2..8 (H+D)                       |                                    |              |
   | AMK_GEMM_TMA              | 1       | the prefill image's GEMV/GEMM    | the prefill chunk's matrices at    | 370, 371     |
   |                           |         | tiles of 16-bit x and W by       | the tensor cores' rate             |              |
   |                           |         | tensor copies and wgmma          |                                    |              |
   |                           |         | (amk_gemm_tma; H+D)              |                                    |              |
   | AMK_GEMM_TMA_STAGES       | 4       | its ring's stages of 48 KB, 3..4 | the most that fit                  | 370          |
   |                           |         | (H+D)                            |                                    |              |
   | AMK_COPY_SLOT             | 32768   | bytes a slot of the prefill      | 4 slots of 32 KB: 8B Q4_K_M 512-   | 409, 411     |
   |                           |         | image's dequantizing COPY ring   | token prompt 12,137 -> 13,541      |              |
   |                           |         | (4 slots; device only)           | tok/s against a thread's own loads |              |
   | AMK_ATTN_PREFILL_MMA      | 1       | the prefill image's              | 8B's 2048-token prompt 1,844 ->    | 373, 378     |
   |                           |         | ATTENTION_PREFILL on the tensor  | 5,652 tok/s (chunks of 128 rows)   |              |
   |                           |         | cores (amk_attn_prefill_mma; H+D)|                                    |              |
   | AMK_ATTN_PF_PTERMS        | 1       | its p in this many bf16 terms    | one, as flash attention and SDPA:  | -            |
   |                           |         | (1..3) times V                   | each term costs p . V's mma again  |              |
   | AMK_ATTN_PF_KS            | 16      | its keys a step, 16 or 32 (H+D)  | 8B prompts +1.1% (512 tokens) and  | 376, 453     |
   |                           |         |                                  | +1.5% (2048), attention -7% of SM  |              |
   |                           |         |                                  | time: 32 halved the steps' fixed   |              |
   |                           |         |                                  | work but its scores spilled more   |              |
   | AMK_ATTN_PF_WG            | 0       | its form by warpgroup MMAs       | off: inlined, ptxas serialises     | -            |
   |                           |         | (amk_attn_pf_wg; H+D)            | the VM's every wgmma (GEMM too)    |              |
   | AMK_ATTN_SPEC_ROWS        | 256     | windows of up to this many rows  | 1B -0.4% at context 128; 512-row   | 108          |
   |                           |         | request their rows before the    | windows read rows past the         |              |
   |                           |         | position (H+D)                   | position for nothing               |              |
   | AMK_ATTN_LEAN             | 1       | ATTENTION_O's lean form          | SmolLM2's task 5.8 -> 4.2 us, the  | 191, 203     |
   |                           |         | (amk_attn_o_lean)                | step 0.584 -> 0.524 ms             |              |
   | AMK_ATTN_KV_TMA           | 1       | the lean attention's cache rows  | the rows after the wait were ~0.8  | 282, 284     |
   |                           |         | by two tensor copies before the  | of ~3.9 us; SmolLM2's task 3.9 ->  |              |
   |                           |         | wait                             | 3.3 us                             |              |
   | AMK_LEAN                  | 1       | the lean decode tiles            | SmolLM2 0.644 -> 0.578 ms, 1B      | 182          |
   |                           |         | (amk_norm_gemv_lean)             | unchanged                          |              |
   | AMK_LEAN_PPL              | 6       | x pieces of 4 a lane in a lean   | SmolLM2's K = 576 fits; larger     | not measured |
   |                           |         | tile: K <= 128 * AMK_LEAN_PPL    | models' tiles are not lean         |              |
   |                           |         | (H+D)                            |                                    |              |
   | AMK_ROWS_STAGE_MAX        | 49152   | the most bytes of rows an        | SmolLM2's shares (14 KB) stage,    | not measured |
   |                           |         | accumulating op stages before    | Llama-3.2-1B's (256 KB) do not     |              |
   |                           |         | its wait (H+D)                   |                                    |              |
   | AMK_RING                  | 1       | the ring form of a tile of many  | SmolLM2's LM head 33.5 -> 23 us,   | 220          |
   |                           |         | short rows (amk_norm_gemv_ring)  | the step 3.1% faster               |              |
   | AMK_RING_SLOTS            | 3       | the ring's shared-memory slots,  | 4 speed the head, yet the step was | 220, 237,    |
   |                           |         | 2..8 (H+D)                       | slower each time (its layers: code | 298          |
   |                           |         |                                  | placement)                         |              |
   | AMK_BLK_RING              | 1       | the block ring of an x_q8 tile   | 8B Q4_K_M 4.85 -> 3.56 ms (x_q8    | 441-446      |
   |                           |         | (amk_blk_ring)                   | off, on; the lanes' path when off) |              |
   | AMK_BLK_RING_SLOTS        | 2       | its slots a warp, 2..8 (H+D)     | 4 and 8 no faster; with chunks of  | 441-444,     |
   |                           |         |                                  | 128 units 4 was 3-5% slower; with  | 469          |
   |                           |         |                                  | the pair decode 3 +1.3%, 4 +3.5%   |              |
   | AMK_BLK_RING_M2_BYTES     | 2048    | chunks of two parts (128 units)  | Q8_0's 4.3 KB chunks: 8B Q8_0      | 445, 469     |
   |                           |         | where a part is fewer bytes (H+D)| +5%, again +9.5% (run 469)         |              |
   | AMK_BLK_PAIR_UNROLL       | 1       | the ring's pairs of units a lane | 2: 8B Q4_K_M +1%, spills 4 bytes   | 469          |
   |                           |         | unrolled (amk_blk_ring_mat)      |                                    |              |
   | AMK_NAMED_BARRIERS        | 1       | the lean tile's named barriers;  | racecheck misreports correct code  | 278          |
   |                           |         | 0: one block barrier (racecheck  | after named barriers; 0 is never   |              |
   |                           |         | builds)                          | shipped                            |              |
   | host runtime (amk_cuda.h)                                                                                                  |
   | AMK_VM_PREFETCH_BYTES     | 65536u  | a GEMV-family tile's first       | the first round of a tile's loads  | 72           |
   |                           |         | weight bytes prefetched to L2    | (16 warps x 4 KB); 8.4 MB of L2    |              |
   |                           |         | while it waits                   | over 132 SMs                       |              |
   | AMK_VM_PREFETCH_MIN_ELEMS | 16384u  | no prefetch for a tile of fewer  | such a tile is one round of loads: | 87-89        |
   |                           |         | weight elements                  | SmolLM2's prefetches cost 2.2%     |              |
   | Llama builder (amk_arch.h): what amk_llama_build_opts' -1 (AMK's choice) means, and the sizes it picks                     |
   | AMK_LLAMA_THREADS         | 512     | the step's threads a block       | GEMV tiles 26% faster than at 256  | NOTES "cuda" |
   |                           |         | (amk_llama_build_lowered); the   | on the H100                        |              |
   |                           |         | forms are planned for it         |                                    |              |
   | AMK_LLAMA_SMEM            | 224256  | the shared memory the builder    | Hopper's opt-in 227 KB less 8 KB   | not measured |
   |                           |         | plans the folded tasks' forms    | for the VM's static shared memory  |              |
   |                           |         | for (amk_plan_form)              | (~3 KB)                            |              |
   | AMK_LLAMA_MLP_ACCUM       | 1       | mlp_accum: the one-step MLP      | larger shares read W_down at a     | 146, 153     |
   |                           |         | where a tile's rows of W_downT   | fraction of the GEMV's pace (1B    |              |
   |                           |         | stage (1), never (0), always (2) | +17%, 8B +22%); SmolLM2 -3.6%      |              |
   | AMK_LLAMA_ATTN_O          | 1       | attn_o: with one KV split,       | each task recomputes its kv head's | 165, 168     |
   |                           |         | attention and O in one step      | attention, whose reads grow with   |              |
   |                           |         | where the MLP is one step and a  | the context                        |              |
   |                           |         | task's rows of W_oT stage (1),   |                                    |              |
   |                           |         | never (0), always (2)            |                                    |              |
   | AMK_LLAMA_QKV_FOLD        | 1       | qkv_fold: with BF16 weights and  | SmolLM2 bf16 0.390 -> 0.372 ms;    | 291          |
   |                           |         | the SM sets (1), never (0),      | only the lean bf16 MLP tile folds  |              |
   |                           |         | wherever ATTENTION_O (2)         |                                    |              |
   | AMK_LLAMA_SM_SETS         | 1       | with ATTENTION_O, each layer on  | an SM that has just accumulated    | 223-225      |
   |                           |         | two SM sets (meta sm_sets: Q/K/V | starts its next task ~0.7 us late: |              |
   |                           |         | tiles, then attention on set Y,  | SmolLM2 -3.6%                      |              |
   |                           |         | the MLP on set Z); 0: the        |                                    |              |
   |                           |         | lowering places the tasks        |                                    |              |
   | AMK_LLAMA_SETS_ALTERNATE  | 1       | the attention alternates between | every attention task starts on an  | 287          |
   |                           |         | two sets of SMs from layer to    | idle SM: SmolLM2 0.409 -> 0.394 ms |              |
   |                           |         | layer                            |                                    |              |
   | AMK_LLAMA_SETS_ATTN_ROWS  | 16      | with the sets: an ATTENTION_O    | SmolLM2: 36 tasks, one an SM, each | 225          |
   |                           |         | task's rows of W_oT              | within the lean form               |              |
   | AMK_LLAMA_MLP_MAX_ROWS    | 16      | with the sets: the most rows an  | the lean form's limit at 512       | 225          |
   |                           |         | MLP tile may have                | threads, a row a warp              |              |
   | AMK_LLAMA_ATTN_O_MIN_ROWS | 8       | without the sets: the fewest     | SmolLM2: 72 tasks of 8 beat 117 of | 204; 16: 166 |
   |                           |         | rows of W_oT an ATTENTION_O task | 5 by 1.5%; 16 rows were 3% slower  |              |
   |                           |         | takes                            |                                    |              |
   | AMK_LLAMA_HEAD_ARGMAX     | 1       | the LM-head tiles write their    | the head's tail 7.7 -> 4.4 us on   | 235-236, 244 |
   |                           |         | argmax pairs, one ARGMAX_COMBINE | SmolLM2; 0 is 0.1-0.9% slower      |              |
   |                           |         | after them; 0: an ARGMAX_PARTIAL |                                    |              |
   |                           |         | phase between                    |                                    |              |
   | AMK_LLAMA_SPLIT_ROWS      | 128     | a cache of more than 512 rows:   | a split's task streams its rows at | 420          |
   |                           |         | KV splits of at least this many  | one SM's rate (~17 GB/s): 8B at    |              |
   |                           |         | rows, up to a task a kv head a   | 4096 rows in 16 splits, not 8      |              |
   |                           |         | split on each SM (amk_arch.h)    |                                    |              |
   | AMK_LLAMA_MAX_SPLITS      | 64      | the most KV splits (above 8 in   | COMBINE's 8 inputs of 8 stacked    | -            |
   |                           |         | multiples of 8)                  | partial sets                       |              |
   | AMK_LLAMA_PF_ATTN_ROWS    | 16      | a prefill chunk's attention: two | 8B 2048-token prompt +3.4%, 1B     | 429          |
   |                           |         | tiles an SM, heavy (last rows)   | +3.0%, at 512 +0.6% / +1.0%; tiles |              |
   |                           |         | first, from this many rows a     | of 4 rows (128-token prompts) lost |              |
   |                           |         | tile (amk__lb_attention_prefill) | 4%                                 |              |
   | AMK_LLAMA_PF_ATTN_ROWS4   | 24      | four tiles an SM from this many  | 2048-row chunks (31 rows a tile):  | 456          |
   |                           |         | rows a tile (a tile's vectors in | 8B 4096-token prompt +4.3%, 1B     |              |
   |                           |         | one pass of the block's pairs)   | +3.5%, 2048 tokens +0.4% / 0;      |              |
   |                           |         |                                  | three tiles (41 rows) lost 5-9%    |              |
   | AMK_LLAMA_PF_SPLIT_K      | 4       | a prefill chunk's O and down in  | 8B 128-token prompt 10.5 ms        | 500, 504     |
   |                           |         | up to this many K splits where   | against 12.5-13.0 unsplit, 1B 3.1  |              |
   |                           |         | their blocks leave SMs idle      | against 3.7                        |              |
   | AMK_LLAMA_PF_SPLIT_K_MIN  | 512     | ... each split this many columns | -                                  | -            |
   |                           |         | at least                         |                                    |              |
   | amk_llm (amk_llm.h)                                                                                                        |
   | AMK_LLM_PREFILL_ROWS      | 2048    | amk_llm's longest prefill chunk  | 8B 2048-token prompt 19,027 tok/s  | 376, 449     |
   |                           |         | rows (prefill_rows 0)            | in chunks of 512, 23,036 in 1024,  |              |
   |                           |         |                                  | 24,576 in one of 2048 (run 449;    |              |
   |                           |         |                                  | 512 against 128: run 376)          |              |
   | AMK_LLM_PREFILL_SHORT_DIV | 4       | each smaller prefill program's   | a 128-token 8B prompt: 20.6 ms in  | 376          |
   |                           |         | rows (short prompts, a prompt's  | a chunk of 128, a 512-row chunk    |              |
   |                           |         | end): the one above's / this     | ~48                                |              |
   | AMK_LLM_PREFILL_SUBS      | 2       | the smaller prefill programs     | 2048, 512 and 128 rows: each       | 449          |
   |                           |         | beside the longest (at most)     | prompt length its chunk            |              |
   | AMK_LLM_PREFILL_SHORT_MIN | 8       | no smaller program below this    | a chunk of fewer rows gains little | -            |
   |                           |         |                                  | over steps                         |              |
   | AMK_LLM_PREFILL_TOP_PCT   | 75      | with two smaller programs: the   | a chunk of 2048 rows takes the     | 449          |
   |                           |         | least share (%) a padded chunk   | time of 3.8 of 512 (8B): three     |              |
   |                           |         | of the longest fills             | 512-row chunks beat it below 3/4   |              |
   | AMK_LLM_PREFILL_ROWS_CPU  | 32      | the reference VM's chunk rows    | SmolLM2 F32 on 2 cores: chunks of  | NOTES        |
   |                           |         | (prefill_rows 0)                 | 8-64 rows 32-51 tok/s, a token at  | "chunks"     |
   |                           |         |                                  | a time 10-14; progress a chunk     |              |
   | AMK_LLM_PREFILL_LONG_PCT  | 50      | the least share (%) a padded     | a chunk of 512 rows takes the time | 380          |
   |                           |         | chunk of the program just above  | of 2.1-2.3 of 128 (8B, 1B): under  |              |
   |                           |         | the shortest fills (less: the    | half, two short chunks are faster  |              |
   |                           |         | shortest's chunks)               |                                    |              |
   | AMK_LLM_PREFILL_PAD_PCT   | 25      | the least share (%) of a chunk's | a chunk of 128 rows takes the time | 365, 366,    |
   |                           |         | rows a padded last chunk fills   | of 4.7 steps on 8B BF16, 6.5 on 1B | 376          |
   |                           |         | (less: the short program, else a | (run 376); 61 on SmolLM2 Q4_1 (run |              |
   |                           |         | step a token)                    | 366, its chunk's GEMMs not on the  |              |
   |                           |         |                                  | tensor-copy path)                  |              |

   Not here: AMK_VM_CHAIN (amk_vm.cuh) selects which kernel an image holds (amk_vm_main or
   amk_vm_chain; gpu.mk builds both, the host finds them by name): it names an image, it tunes
   nothing. The library's configuration (allocator, AMK_API, AMK_JSON_MAX_DEPTH) is amk.h's
   CONFIG table. Fixed constants of the code (AMK_EW_ILP, AMK_STAGE_ILP, AMK_BW_INFLIGHT, ...)
   are #defines where they are used, each with its why. */
#ifndef AMK_TUNE_H
#define AMK_TUNE_H

/* ---- device VM ------------------------------------------------------------------------------ */
#ifndef AMK_VM_MAX_THREADS
#define AMK_VM_MAX_THREADS 512 /* why: 128 registers a thread; at 1024 the ops spill (NOTES "cuda") */
#endif
#ifndef AMK_VM_EARLY_SETUP
#define AMK_VM_EARLY_SETUP 1 /* why: an op's setup overlaps its waits (run 133) */
#endif
#ifndef AMK_VM_BACKOFF_MIN_NS
#define AMK_VM_BACKOFF_MIN_NS 32u /* why: ~ one L2 round trip; the first poll does not sleep */
#endif
#ifndef AMK_VM_BACKOFF_MAX_NS
#define AMK_VM_BACKOFF_MAX_NS 64u /* why: a waiter oversleeps by half a sleep; 64 beat 128 (run 137) */
#endif
#ifndef AMK_VM_MARKS
#define AMK_VM_MARKS 0 /* 1: a diagnostic image with marks inside the ops (AMK_OP_MARK); never shipped */
#endif

/* ---- device ops ----------------------------------------------------------------------------- */
#ifndef AMK_L2_HINTS
#define AMK_L2_HINTS 1 /* why: weights evict-first keep the code, K/V rows and activations in L2 (run 255) */
#endif
#ifndef AMK_GEMV_ROWS
#define AMK_GEMV_ROWS 1 /* why: decode tiles have one row; more rows' unrolled code slowed them (run 20) */
#endif
#ifndef AMK_GEMV_INFLIGHT
#define AMK_GEMV_INFLIGHT 8 /* why: 4 loads in flight a lane were latency-bound (NOTES "cuda") */
#endif
#ifndef AMK_MMA_MIN_ROWS
#define AMK_MMA_MIN_ROWS 4 /* why: 2-3 rows are memory-bound on either path (run 38) */
#endif
#ifndef AMK_MMA_KC
#define AMK_MMA_KC 64 /* why: 128 leaves no ring of f32 x at 512 threads; KC/8 core matrices along K (run 38) */
#endif
#ifndef AMK_MMA_STAGES
#define AMK_MMA_STAGES 4 /* chunks in flight + 1, 2..8 (amk_ptx_cp_async_wait_pending); why: 8 no faster (run 38) */
#endif
#ifndef AMK_GEMM_TMA
#define AMK_GEMM_TMA 1 /* the prefill image's GEMV/GEMM tiles of 16-bit x and W by tensor copies and wgmma */
#endif
#ifndef AMK_GEMM_TMA_STAGES
#define AMK_GEMM_TMA_STAGES 4 /* the tensor-copy GEMM's ring, 3..4 stages of 48 KB */
#endif
#ifndef AMK_COPY_SLOT
#define AMK_COPY_SLOT 32768 /* the prefill image's dequantizing COPY: bytes a slot of its ring of bulk copies */
#endif
#ifndef AMK_ATTN_PREFILL_MMA
#define AMK_ATTN_PREFILL_MMA 1 /* the prefill image's ATTENTION_PREFILL on the tensor cores (amk_attn_prefill_mma) */
#endif
#ifndef AMK_ATTN_PF_PTERMS
#define AMK_ATTN_PF_PTERMS 1 /* its p as this many bf16 terms, 1..3; why 1: as flash attention and SDPA */
#endif
#ifndef AMK_ATTN_PF_KS
#define AMK_ATTN_PF_KS 16 /* its keys a step, 16 or 32 (a warp's scores: KS / 2 registers a thread; run 453) */
#endif
#ifndef AMK_ATTN_PF_WG
#define AMK_ATTN_PF_WG 0 /* the prefill image's ATTENTION_PREFILL by warpgroup MMAs where it takes the task (amk_attn_pf_wg);
                            why 0: inlined into the VM it makes ptxas serialise every wgmma of the prefill image (bench/NOTES.md
                            session "wg") */
#endif
#ifndef AMK_ATTN_SPEC_ROWS
#define AMK_ATTN_SPEC_ROWS 256 /* why: longer windows read rows past the position for nothing (run 108) */
#endif
#ifndef AMK_ATTN_LEAN
#define AMK_ATTN_LEAN 1 /* ATTENTION_O's lean form (runs 191, 203) */
#endif
#ifndef AMK_ATTN_KV_TMA
#define AMK_ATTN_KV_TMA 1 /* the lean attention's cache rows by tensor copies before the wait (runs 282, 284) */
#endif
#ifndef AMK_LEAN
#define AMK_LEAN 1 /* the lean decode tiles (run 182) */
#endif
#ifndef AMK_LEAN_PPL
#define AMK_LEAN_PPL 6 /* a lean tile's x pieces of 4 a lane: K <= 128 * AMK_LEAN_PPL (SmolLM2's 576) */
#endif
#ifndef AMK_ROWS_STAGE_MAX
#define AMK_ROWS_STAGE_MAX 49152 /* why: SmolLM2's 14 KB of rows stage, Llama-3.2-1B's 256 KB do not */
#endif
#ifndef AMK_RING
#define AMK_RING 1 /* the ring form of a tile of many short rows (run 220) */
#endif
#ifndef AMK_RING_SLOTS
#define AMK_RING_SLOTS 3 /* why: 4 speed the LM head but slow the step (runs 220, 237, 298) */
#endif
#ifndef AMK_BLK_RING
#define AMK_BLK_RING 1 /* the block ring of an x_q8 tile (amk_blk_ring) */
#endif
#ifndef AMK_BLK_PAIR_UNROLL
#define AMK_BLK_PAIR_UNROLL 1 /* the block ring's pairs of units a lane, unrolled: 2 was slower (run 469) */
#endif
#ifndef AMK_BLK_RING_M2_BYTES
#define AMK_BLK_RING_M2_BYTES 2048 /* the block ring's chunks are two parts where one part is fewer bytes (amk_plan_blk_ring_m) */
#endif
#ifndef AMK_BLK_RING_SLOTS
#define AMK_BLK_RING_SLOTS 2 /* slots a warp in the block ring: 3, 4 and 8 were no faster (bench/NOTES.md sessions "dp4a", "pairs") */
#endif
#ifndef AMK_NAMED_BARRIERS
#define AMK_NAMED_BARRIERS 1 /* 0: block barriers, for compute-sanitizer racecheck only (run 278) */
#endif

/* ---- host runtime --------------------------------------------------------------------------- */
#ifndef AMK_VM_PREFETCH_BYTES
#define AMK_VM_PREFETCH_BYTES 65536u /* why: the first round of a tile's loads, 16 warps x 4 KB (run 72) */
#endif
#ifndef AMK_VM_PREFETCH_MIN_ELEMS
#define AMK_VM_PREFETCH_MIN_ELEMS 16384u /* why: a smaller tile is one round of loads (runs 87-89) */
#endif

/* ---- Llama builder -------------------------------------------------------------------------- */
#ifndef AMK_LLAMA_THREADS
#define AMK_LLAMA_THREADS 512 /* the step's threads a block; why: GEMV tiles 26% faster than at 256 (NOTES "cuda") */
#endif
#ifndef AMK_LLAMA_SMEM
#define AMK_LLAMA_SMEM (227 * 1024 - 8192) /* the shared memory the builder plans forms for: Hopper's opt-in less a reserve for the VM's static */
#endif
#ifndef AMK_LLAMA_MLP_ACCUM
#define AMK_LLAMA_MLP_ACCUM 1 /* mlp_accum -1: one-step MLP where W_downT's rows stage (runs 146, 153) */
#endif
#ifndef AMK_LLAMA_ATTN_O
#define AMK_LLAMA_ATTN_O 1 /* attn_o -1: attention and O in one step where W_oT's rows stage (run 165) */
#endif
#ifndef AMK_LLAMA_QKV_FOLD
#define AMK_LLAMA_QKV_FOLD 1 /* qkv_fold -1: fold with BF16 weights and the SM sets (run 291) */
#endif
#ifndef AMK_LLAMA_SM_SETS
#define AMK_LLAMA_SM_SETS 1 /* each layer on two SM sets (runs 223-225) */
#endif
#ifndef AMK_LLAMA_SETS_ALTERNATE
#define AMK_LLAMA_SETS_ALTERNATE 1 /* the attention on two alternating SM sets (run 287) */
#endif
#ifndef AMK_LLAMA_SETS_ATTN_ROWS
#define AMK_LLAMA_SETS_ATTN_ROWS 16 /* with the sets: an ATTENTION_O task's rows of W_oT (SmolLM2: 36 tasks) */
#endif
#ifndef AMK_LLAMA_MLP_MAX_ROWS
#define AMK_LLAMA_MLP_MAX_ROWS 16 /* with the sets: the most rows of an MLP tile (the lean form's, a row a warp) */
#endif
#ifndef AMK_LLAMA_ATTN_O_MIN_ROWS
#define AMK_LLAMA_ATTN_O_MIN_ROWS 8 /* without the sets: the fewest rows of W_oT a task (run 204) */
#endif
#ifndef AMK_LLAMA_SPLIT_ROWS
#define AMK_LLAMA_SPLIT_ROWS 128 /* a KV split's fewest rows when the splits spread a long cache (run 420) */
#endif
#ifndef AMK_LLAMA_MAX_SPLITS
#define AMK_LLAMA_MAX_SPLITS 64 /* the most KV splits: 8 COMBINE inputs of 8 stacked sets */
#endif
#ifndef AMK_LLAMA_PF_ATTN_ROWS
#define AMK_LLAMA_PF_ATTN_ROWS 16 /* a prefill chunk's attention in two tiles an SM from this many rows a tile (run 429) */
#endif
#ifndef AMK_LLAMA_PF_ATTN_ROWS4
#define AMK_LLAMA_PF_ATTN_ROWS4 24 /* ... in four tiles an SM from this many rows a tile (run 456) */
#endif
#ifndef AMK_LLAMA_PF_SPLIT_K
#define AMK_LLAMA_PF_SPLIT_K 4 /* a short prefill chunk's O and down in up to this many K splits (1: none) */
#endif
#if AMK_LLAMA_PF_SPLIT_K > 7
#error "AMK_LLAMA_PF_SPLIT_K: at most 7 (the partials and the residual are an ALLREDUCE_SHARD's 8 inputs)"
#endif
#ifndef AMK_LLAMA_PF_SPLIT_K_MIN
#define AMK_LLAMA_PF_SPLIT_K_MIN 512 /* ... each of this many columns at least */
#endif
#ifndef AMK_LLM_PREFILL_ROWS
#define AMK_LLM_PREFILL_ROWS 2048 /* amk_llm's longest prefill chunk (prefill_rows 0) */
#endif
#ifndef AMK_LLM_PREFILL_ROWS_CPU
#define AMK_LLM_PREFILL_ROWS_CPU 32 /* the reference VM's: as fast a token as 64, and progress twice as often */
#endif
#ifndef AMK_LLM_PREFILL_SHORT_DIV
#define AMK_LLM_PREFILL_SHORT_DIV 4 /* each smaller prefill program's rows: the one above's / this */
#endif
#ifndef AMK_LLM_PREFILL_SUBS
#define AMK_LLM_PREFILL_SUBS 2 /* the smaller prefill programs beside the longest, at most */
#endif
#ifndef AMK_LLM_PREFILL_SHORT_MIN
#define AMK_LLM_PREFILL_SHORT_MIN 8 /* no smaller program of fewer rows */
#endif
#ifndef AMK_LLM_PREFILL_TOP_PCT
#define AMK_LLM_PREFILL_TOP_PCT 75 /* with two smaller programs, a padded chunk of the longest fills this share at least */
#endif
#ifndef AMK_LLM_PREFILL_LONG_PCT
#define AMK_LLM_PREFILL_LONG_PCT 50 /* a padded chunk of the program just above the shortest fills this share at least */
#endif
#ifndef AMK_LLM_PREFILL_PAD_PCT
#define AMK_LLM_PREFILL_PAD_PCT 25 /* a padded last chunk fills this share of its rows at least; less goes a step a token */
#endif
#ifndef AMK_LLAMA_HEAD_ARGMAX
#define AMK_LLAMA_HEAD_ARGMAX 1 /* the LM-head tiles write their argmax pairs (runs 235-236, 244) */
#endif

#endif /* AMK_TUNE_H */
