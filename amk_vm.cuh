/* amk_vm.cuh - the AMK persistent megakernel (the device VM).

   One block per SM walks its own queue of instructions (amk_program_t.sm_queue_offset; the
   host resolves each queue entry into a context, amk_program_t.contexts: the instruction, its
   buffers' descriptors and its index, in queue order). The block's last thread brings entry
   q + 1's context into shared memory with one bulk copy while entry q runs, and hands each
   instruction to its op (amk_ops.cuh), which does its setup (parameters, pointers, loop bounds:
   nothing that reads an input) and then calls amk_op_go: thread 0 waits for each of the
   instruction's counters to reach its threshold times the launch's epoch (amk_program_t.epoch:
   the counters run on across launches, so the host does not zero them before each; relaxed polls
   with exponential nanosleep back-off, then ONE acquire load of the met counter; the abort flag is
   read in every spin) and the block meets at a barrier before the op reads its inputs. Then the
   last thread adds 1 to the instruction's out_counter with one device-scope release add: spec
   IR_SPEC.md §8.1. Before the setup, thread 32 (AMK_AUX_TID) asks L2 for the start of a GEMV/GEMM
   tile's (read-only) weights (the ranges the host put in the instruction).

   This is the simple path: every warp computes, thread 0 waits. The ops stage their own weights
   by bulk copies before their waits (the lean tiles, ATTENTION_O's rows); a tile of many short
   rows streams them through a ring of shared-memory slots (amk_norm_gemv_ring: the op mbarriers
   [1 + s]). A loader warp streaming the next tasks' weights ahead of the counters is not built;
   bench/NOTES.md says where the time goes. The build-time knobs (-D: AMK_VM_MAX_THREADS,
   AMK_VM_EARLY_SETUP, AMK_LEAN, AMK_RING, ...) are amk_tune.h's table, one for host and device;
   AMK_VM_CHAIN (below) selects the kernel an image holds.

   Build: this header is the whole device translation unit:
       nvcc -x cu -cubin -gencode arch=compute_90a,code=sm_90a -o amk_vm.cubin amk_vm.cuh
   (gpu.mk does that, plus PTX and an embeddable C array). The host loads it with
   cuModuleLoadDataEx and launches amk_vm_main cooperatively, grid = the program's SM count.

   The status words (at amk_program_t.abort_flag, AMK_VM_STATUS_* in amk_ir.h) extend the spec's
   abort flag with what the host needs to explain a failed launch: the abort reason, the failed
   instruction, its AMK_VM_ERR_* code and bad value, and per block the queue entries finished
   (the host's stuck-SM report). Timing (amk_program_t.timing != 0): one amk_vm_timing_t
   (amk_ir.h) per instruction index: when the block reached it (t_wait), when its waits were met
   (t_start), when the op finished before the signal (t_end), the program SM (block) and the
   hardware SM (smid); done = 1 once written. Both layouts are amk_ir.h's, shared with the host.

   The same image holds small service kernels the runtime launches normally (not cooperatively):
   amk_bw_read and amk_bw_copy (the device's streaming bandwidth, measured in the process that runs
   the VM), amk_fill (seeded random or constant buffer contents on the device, for benchmarks with
   random weights) and, in the prefill image, amk_tc_peak (the tensor cores' rate as the prompt's
   GEMM issues its MMAs). */
#ifndef AMK_VM_CUH
#define AMK_VM_CUH

#include "amk_ops.cuh"

/* The prefetcher (one thread, not thread 0), after the context arrived (before the op's setup
   and its waits): the L2 prefetches the host computed for the instruction (amk__cuda_prefetches: a
   GEMV-family tile's first AMK_VM_PREFETCH_BYTES of weight rows, and a fused tile's norm weight).
   why from the host: worked out on the device from the instruction and the buffer table, they
   cost three dependent L2 round trips on a thread the block's barrier waits for, and a block
   whose wait is met at once (the SM that finishes a phase last) starts late by that much. why
   not thread 0: it polls in amk_op_go, and the prefetch goes out earlier beside it
   (bench/RESULTS.md run 32). */
static __device__ __forceinline__ void amk_vm_prefetch(const uint64_t *addr, const uint32_t *bytes) {
#pragma unroll
    for (int f = 0; f < AMK_VM_PREFETCHES; f++) {
        if (!bytes[f]) continue;
        amk_ptx_prefetch_l2_bulk((const void *)addr[f], bytes[f]);
    }
}

/* The context of walk position q, queue entry e, into slot q & 1 (one bulk copy, completing on
   bar[q & 1]), and the wait for it: the k-th copy into a slot completes the slot barrier's phase
   k, parity k & 1, and the positions q_begin + 2k and q_begin + 2k + 1 are the k-th of their
   slots. One step a launch: e = q. Chained steps (AMK_VM_CHAIN): the walk passes the queue
   n_steps times, so e runs from q_begin again at each step. */
static __device__ __forceinline__ void amk_vm_fetch_ctx(amk_op_ctx *ctx, uint64_t *bar, const amk_vm_ctx_t *ctxs, int q,
                                                        int e) {
    amk_ptx_bulk_copy(&ctx[q & 1], &ctxs[e], sizeof(amk_vm_ctx_t), &bar[q & 1]);
}
#if AMK_VM_CHAIN
/* Thread 0 (or the feeder): waits until the status word *word reaches target; 0 if aborted. */
static __device__ __forceinline__ int amk_vm_wait_word(const uint32_t *word, uint32_t target, const uint32_t *status) {
    const int32_t id = 0;
    return amk_vm_wait(1, &id, &target, word, status, 1u);
}

/* Between chained steps s and s + 1, in the feeder block's last thread (amk_vm_chain_t):
   once every block with a queue has arrived (target arrivals in all), the step's next token
   becomes the token input and chain_tokens[s], the position input grows by 1, and the go word is
   released. Returns without feeding if the launch is being aborted (the blocks' waits for the go
   word then give up too). */
static __device__ void amk_vm_chain_feed(uint32_t *status, int num_sms, uint32_t target, uint32_t s, uint64_t next,
                                         uint64_t token, uint64_t pos, uint64_t tokens) {
    if (!amk_vm_wait_word(status + AMK_VM_STATUS_CHAIN_ARRIVE(num_sms), target, status)) return;
    const int32_t v = *(volatile const int32_t *)next;
    *(volatile int32_t *)token = v;
    *(volatile int32_t *)pos = *(volatile const int32_t *)pos + 1;
    ((volatile int32_t *)tokens)[s] = v;
    amk_ptx_red_release_gpu_add(status + AMK_VM_STATUS_CHAIN_GO(num_sms), 1u); /* the stores before the add */
}
#endif
static __device__ __forceinline__ void amk_vm_wait_ctx(uint64_t *bar, int q, int q_begin) {
    amk_ptx_mbar_wait(&bar[q & 1], (uint32_t)((q - q_begin) >> 1) & 1u);
}

/* The persistent kernel. grid = prog.num_sms blocks (cooperative: all co-resident), blockDim a
   multiple of 32 in [32, AMK_VM_MAX_THREADS], dynamic shared memory for the ops' staging.

   Queue entry q runs in context slot q & 1. Its context (amk_vm_ctx_t, resolved by the host in
   queue order) arrives by one bulk copy that the block's last thread issued when entry q - 1
   began, so an SM that finishes a phase last starts its next task from shared memory. why: copied
   after its signal, the next instruction and its descriptors are two dependent L2 round trips, and
   such an SM starts after the others, a start spread every phase pays (bench/NOTES.md session
   "context"). The last thread also signals: it read the out counter of entry q before it
   issues the copy that overwrites slot q & 1 (entry q + 2), and thread 0 starts polling for the
   next entry while the signal's release waits for the stores.

   Built with AMK_VM_CHAIN 1 the kernel is amk_vm_chain instead: it runs chain.n_steps steps
   (amk_vm_chain_t, amk_ir.h), walking the queue n_steps times (the walk state in shared memory,
   below). AMK_VM_CHAIN selects the kernel an image holds (the host finds it by name), so it is
   not one of amk_tune.h's knobs. why a build of its own (gpu.mk: two more images): the chained
   walk in amk_vm_main slows the single step (the VM is one function at the register cap, and any
   change to its loop re-rolls the ops' inlined code; bench/RESULTS.md run 271). Built with
   AMK_VM_CHAIN 0, amk_vm_main is the code of an image without the chained walk. */
#ifndef AMK_VM_CHAIN
#define AMK_VM_CHAIN 0
#endif
#if AMK_VM_CHAIN
extern "C" __global__ void __launch_bounds__(AMK_VM_MAX_THREADS, 1) amk_vm_chain(amk_program_t prog, amk_vm_chain_t chain) {
#else
extern "C" __global__ void __launch_bounds__(AMK_VM_MAX_THREADS, 1) amk_vm_main(amk_program_t prog) {
#endif
    __shared__ amk_op_ctx ctx[2];
    __shared__ __align__(8) uint64_t ctx_bar[2]; /* slot s's copy completes on ctx_bar[s] */
    /* an op's own bulk copies (amk_op_ctx.mbar): [0] its staging, [1 + s] slot s of a ring */
    __shared__ __align__(8) uint64_t op_bar[1 + AMK_RING_SLOTS];
    __shared__ uint32_t op_bar_uses[1 + AMK_RING_SLOTS];
    __shared__ uint64_t t_wait[2]; /* why shared: in a register it lives across every op (128-register cap) */
#if AMK_VM_CHAIN
    /* the walk (why shared: the same): the queue entry and epoch of the last context fetched, the
       queue's end, the walk position where the next step starts, and each slot's epoch (thread 0
       copies it into the slot's context when the entry starts. why not at the fetch: racecheck
       flagged that write against the block's reads of go and error of the slot's previous entry,
       which follow its last barrier; bench/RESULTS.md run 273) */
    __shared__ int fetch_e, fetch_end, step_end;
    __shared__ uint32_t fetch_epoch, slot_epoch[2];
    __shared__ int step_go; /* the wait between steps: 1 met, 0 aborted. why not c->go: the block may
                               still be reading c->go after the op's last barrier */
#endif
    const amk_vm_ctx_t *ctxs = (const amk_vm_ctx_t *)prog.contexts; /* [n_instructions], queue order */
    uint32_t *counters = (uint32_t *)prog.counters;                /* [n_counters] */
    uint32_t *status = (uint32_t *)prog.abort_flag;                /* [4 + num_sms] */
    amk_vm_timing_t *timing = (amk_vm_timing_t *)prog.timing;      /* [n_instructions] or 0 */
    const int block = (int)blockIdx.x, last = amk_ntid() - 1;
    int q, q_begin, q_end;
    if (block >= prog.num_sms) return;
    q_begin = ((const int32_t *)prog.sm_queue_offset)[block];
    q_end = ((const int32_t *)prog.sm_queue_offset)[block + 1];
#if AMK_VM_CHAIN
    if (amk_tid() == last) {
        fetch_e = q_begin;
        fetch_end = q_end;
        step_end = q_end;
        fetch_epoch = slot_epoch[0] = slot_epoch[1] = prog.epoch;
    }
    if (chain.n_steps > 1) q_end = q_begin + (q_end - q_begin) * chain.n_steps; /* the host keeps it in range */
#endif
    if (amk_tid() == last) {
        for (q = 0; q < 2; q++) { /* the same for every task: set once */
            ctx[q].counters = counters;
            ctx[q].status = status;
            ctx[q].timing = timing != 0;
            ctx[q].error = 0; /* why once: a task that sets it ends the walk */
            ctx[q].epoch = prog.epoch;
            ctx[q].mbar = op_bar;
            ctx[q].mbar_uses = op_bar_uses;
            amk_ptx_mbar_init(&ctx_bar[q], 1);
        }
        for (q = 0; q < 1 + AMK_RING_SLOTS; q++) {
            op_bar_uses[q] = 0;
            amk_ptx_mbar_init(&op_bar[q], 1);
        }
        if (q_begin < q_end) amk_vm_fetch_ctx(ctx, ctx_bar, ctxs, q_begin, q_begin);
        /* the previous launch's count (the host reads it after this launch; no one reads it during) */
        ((volatile uint32_t *)status)[AMK_VM_STATUS_PROGRESS + block] = 0u;
    }
    __syncthreads(); /* the barriers and the words above are set */
    for (q = q_begin; q < q_end; q++) {
        amk_op_ctx *c = &ctx[q & 1];
        const int tid = amk_tid();
#if AMK_VM_CHAIN
        if (tid == last && q + 1 < q_end) { /* slot (q + 1) & 1 held entry q - 1, whose readers are done */
            int e = fetch_e + 1;
            if (e == fetch_end) { /* the next step's first entry: its waits count on the next epoch */
                e = q_begin;
                fetch_epoch++;
            }
            fetch_e = e;
            slot_epoch[(q + 1) & 1] = fetch_epoch;
            amk_vm_fetch_ctx(ctx, ctx_bar, ctxs, q + 1, e);
        }
#else
        if (tid == last && q + 1 < q_end) /* slot (q + 1) & 1 held entry q - 1, whose readers are done */
            amk_vm_fetch_ctx(ctx, ctx_bar, ctxs, q + 1, q + 1);
#endif
        amk_vm_wait_ctx(ctx_bar, q, q_begin);
        if (tid == 0) {
            if (timing) t_wait[q & 1] = amk_ptx_globaltimer();
            c->go = 0;
#if AMK_VM_CHAIN
            c->epoch = slot_epoch[q & 1];
#endif
        } else if (tid == AMK_AUX_TID_OF(last + 1)) {
            amk_vm_prefetch(c->ins.prefetch_addr, c->ins.prefetch_bytes);
        }
        amk_op_dispatch(c, (float *)amk_vm_smem); /* waits (amk_op_go: its barrier), then computes */
        __syncthreads(); /* all of the op's stores are done (and c->error and c->go are final) */
        if (c->error || !c->go) { /* an error or an abort: no signal; every block leaves promptly */
            if (q + 1 < q_end) amk_vm_wait_ctx(ctx_bar, q + 1, q_begin);
            break; /* why the wait: no bulk copy may still be writing the block's shared memory */
        }
        if (tid == last) {
            if (timing) {
                amk_vm_timing_t r;
                r.t_wait = t_wait[q & 1];
                r.t_start = c->t_start;
                r.t_end = amk_ptx_globaltimer();
                r.block = (uint32_t)block;
                r.smid = amk_ptx_smid();
                r.op = c->ins.op;
                r.done = 1u;
                timing[c->index] = r;
#if AMK_VM_MARKS /* the marks' records follow the timing records (amk_ir.h) */
                for (int k = 0; k < AMK_VM_MARKS_N; k++) {
                    ((amk_vm_marks_t *)(timing + prog.n_instructions))[c->index].ns[k] = c->mark[k];
                    c->mark[k] = 0u; /* why here: thread 0 writes them only after the next wait */
                }
#endif
            }
            /* release: the block's output stores (ordered by the barrier) before the add */
            amk_ptx_red_release_gpu_add(&counters[c->ins.out_counter], 1u);
            ((volatile uint32_t *)status)[AMK_VM_STATUS_PROGRESS + block] = (uint32_t)(q - q_begin + 1);
        }
#if AMK_VM_CHAIN
        if (q + 1 == step_end && q + 1 < q_end) { /* a chained step ends (uniform: step_end is shared) */
            /* s + 1, from the walk position. why not fetch_epoch - prog.epoch: racecheck reported
               every block's read of fetch_epoch here against the last thread's increment at the
               top of the loop (bench/RESULTS.md run 279), although the op's and the VM's barriers
               lie between them in program order; with this, fetch_epoch and fetch_e are the last
               thread's alone, and fetch_end is written once before the walk */
            const uint32_t next = (uint32_t)((q + 1 - q_begin) / (fetch_end - q_begin));
            const uint32_t target = chain.base + next;
            if (tid == last) {
                amk_ptx_red_release_gpu_add(status + AMK_VM_STATUS_CHAIN_ARRIVE(prog.num_sms), 1u);
                if (block == chain.feeder)
                    amk_vm_chain_feed(status, prog.num_sms, (uint32_t)chain.blocks * target, next - 1u, chain.next, chain.token,
                                      chain.pos, chain.tokens);
            }
            if (tid == 0) step_go = amk_vm_wait_word(status + AMK_VM_STATUS_CHAIN_GO(prog.num_sms), target, status);
            __syncthreads(); /* every thread read step_end; step_go is final */
            if (!step_go) {
                amk_vm_wait_ctx(ctx_bar, q + 1, q_begin);
                break;
            }
            if (tid == last) step_end = q + 1 + (fetch_end - q_begin);
        }
#endif
    }
}

/* ==== >>service: kernels the runtime launches normally, outside a program ==================== */

#define AMK_BW_THREADS 1024 /* why: the bandwidth kernels' launch bound; the host picks the grid */
#define AMK_BW_INFLIGHT 8   /* why: 16-byte loads in flight per thread: 128 B x 2048 threads = 256 KB
                               per SM, several times what Little's law asks at ~25 GB/s per SM */
#define AMK_FILL_THREADS 256 /* why: the fill kernels' launch bound (few registers, many blocks) */

/* Streams n 16-byte vectors of src (read-only for the whole launch) with no-allocate loads,
   AMK_BW_INFLIGHT in flight per thread, grid-strided; XORs them so no load is dead, and stores
   to sink only when a warp's XOR hits one value (practically never: no atomics in the timing). */
extern "C" __global__ void __launch_bounds__(AMK_BW_THREADS) amk_bw_read(uint64_t src_addr, uint64_t n,
                                                                          uint64_t sink_addr) {
    const uint4 *src = (const uint4 *)src_addr; /* [n] 16-byte vectors */
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (; i + (AMK_BW_INFLIGHT - 1) * stride < n; i += AMK_BW_INFLIGHT * stride) {
        uint4 v[AMK_BW_INFLIGHT];
#pragma unroll
        for (int u = 0; u < AMK_BW_INFLIGHT; u++) v[u] = amk_ptx_ld_nc_na_v4(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < AMK_BW_INFLIGHT; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride) {
        const uint4 v = amk_ptx_ld_nc_na_v4(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, o);
    if ((threadIdx.x & 31) == 0 && acc == 0x9E3779B9u) *(uint32_t *)sink_addr = acc; /* why: any rare value */
}

/* dst[i] = src[i] for n 16-byte vectors: no-allocate loads, streaming (evict-first) stores. */
extern "C" __global__ void __launch_bounds__(AMK_BW_THREADS) amk_bw_copy(uint64_t dst_addr, uint64_t src_addr,
                                                                          uint64_t n) {
    const uint4 *src = (const uint4 *)src_addr; /* [n] */
    uint4 *dst = (uint4 *)dst_addr;             /* [n], disjoint from src */
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (AMK_BW_INFLIGHT - 1) * stride < n; i += AMK_BW_INFLIGHT * stride) {
        uint4 v[AMK_BW_INFLIGHT];
#pragma unroll
        for (int u = 0; u < AMK_BW_INFLIGHT; u++) v[u] = amk_ptx_ld_nc_na_v4(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < AMK_BW_INFLIGHT; u++) __stcs(dst + i + u * stride, v[u]);
    }
    for (; i < n; i += stride) __stcs(dst + i, amk_ptx_ld_nc_na_v4(src + i));
}

#if AMK_GEMM_TMA && AMK_VM_PREFILL
#define AMK_TC_PEAK_THREADS 512 /* the tensor-copy GEMM's four warpgroups */
/* The tensor cores' dense rate as the prompt's GEMM issues them (amk_cuda_tensor_peak: the
   ceiling of `amk bench --prefill`): a block an SM, each warpgroup issuing `rounds` times a K
   chunk's MMAs of amk_tma_block (AMK_TMA_BK / 16 bf16 m64n128k16, its quarter of a 128 x 256
   block) with one group in flight, on one stage of shared memory laid out as the GEMM's. The
   threads fill it first with pseudo-random bf16 below 1 in magnitude (zeros would draw less power
   than real operands). The sums reach sink only when they hit a rare value, so no MMA is dead. */
extern "C" __global__ void __launch_bounds__(AMK_TC_PEAK_THREADS, 1) amk_tc_peak(int rounds, uint64_t sink_addr) {
    __shared__ __align__(1024) uint32_t st[AMK_TMA_STAGE / 4];
    const int tid = (int)threadIdx.x, wg = tid >> 7;
    uint32_t h = 0x9E3779B9u * (uint32_t)(tid + 1), base;
    uint64_t da, db;
    float d[64], sum = 0.0f;
    for (int i = tid; i < (int)(AMK_TMA_STAGE / 4); i += AMK_TC_PEAK_THREADS) {
        h ^= h << 13;
        h ^= h >> 17;
        h ^= h << 5;
        st[i] = h & 0xBF7FBF7Fu; /* two bf16 of either sign, exponents below 127 */
    }
    amk_ptx_fence_proxy_async_smem(); /* the MMAs read what the threads wrote */
    __syncthreads();
    base = (uint32_t)__cvta_generic_to_shared(st);
    da = amk_tma_desc(base + (uint32_t)(wg & 1) * 64 * 128);
    db = amk_tma_desc(base + AMK_TMA_BM * 128 + (uint32_t)(wg >> 1) * 128 * 128);
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.0f;
    for (int r = 0; r < rounds; r++) {
        amk_ptx_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < AMK_TMA_BK / 16; kk++) amk_ptx_wgmma_m64n128k16(d, da + 2 * kk, db + 2 * kk, 1, 0);
        amk_ptx_wgmma_commit();
        amk_ptx_wgmma_wait_1();
    }
    amk_ptx_wgmma_wait_all();
#pragma unroll
    for (int i = 0; i < 64; i++) sum += d[i];
    if (sum == 1234.5f) *(float *)sink_addr = sum; /* why: any rare value */
}
#endif

/* The 64 random bits of element i: splitmix64 of seed + i * golden (the host's amk__splitmix64
   on that state), so a value depends only on (seed, i), never on the grid. */
static __device__ __forceinline__ uint64_t amk_fill_hash(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element i of a random fill, as the bits amk_encode gives. Float dtypes: u uniform in [0, 1) on
   24 bits, x = (2u - 1) * scale in [-scale, scale), rounded toward zero into the dtype so no value
   reaches +scale. Integer dtypes: uniform in [0, count) (the host caps count to the dtype). */
static __device__ __forceinline__ uint32_t amk_fill_random_bits(int t, uint64_t seed, float scale, uint32_t count,
                                                                int64_t i) {
    const uint64_t h = amk_fill_hash(seed, (uint64_t)i);
    float x;
    uint32_t code;
    if (t == AMK_DTYPE_I32 || t == AMK_DTYPE_I8 || t == AMK_DTYPE_I4 || t == AMK_DTYPE_U8 || t == AMK_DTYPE_BOOL) {
        const uint32_t q = (uint32_t)(((h >> 32) * (uint64_t)count) >> 32);
        return t == AMK_DTYPE_I4 ? q + 8u : q; /* I4 stores q + 8 */
    }
    x = ((float)(uint32_t)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale; /* why: 2^24 */
    switch (t) {
    case AMK_DTYPE_F16: return __half_as_ushort(__float2half_rz(x));
    case AMK_DTYPE_BF16: return __bfloat16_as_ushort(__float2bfloat16_rz(x));
    case AMK_DTYPE_F8E4M3: case AMK_DTYPE_F8E5M2: /* round to nearest, then one code toward zero if it grew */
        code = amk_encode(t, x);
        if ((code & 0x7Fu) != 0u &&
            fabsf(t == AMK_DTYPE_F8E4M3 ? amk_f8e4m3_to_float(code) : amk_f8e5m2_to_float(code)) > fabsf(x))
            code -= 1u;
        return code;
    default: return __float_as_uint(x);
    }
}

/* A block format's random fill (timing weights): random bytes, except each block's f16 scales (d,
   and Q4_1/Q5_1's m or the K formats' dmin), set so the decoded values stay within a few times
   scale: no NaN or Inf, whatever the random bytes. 16 bytes a thread per step, 8 random bytes a
   hash. */
static __device__ __forceinline__ void amk_fill_blocks(uint64_t ptr, uint64_t nbytes, int t, uint64_t seed, float scale) {
    const uint64_t B = (uint64_t)amk_blk_bytes(t), chunks = (nbytes + 15) / 16, stride = (uint64_t)gridDim.x * blockDim.x;
    const int f0 = AMK_BLOCK_D_OFF(t), f1 = AMK_BLOCK_M_OFF(t); /* the scale fields' offsets (f1 < 0: none) */
    float d0, d1 = 0.0f;
    switch (t) {
    case AMK_DTYPE_Q8_0: d0 = scale / 127.0f; break;
    case AMK_DTYPE_Q4_0: d0 = scale / 8.0f; break;
    case AMK_DTYPE_IQ4_NL: d0 = scale / 127.0f; break;
    case AMK_DTYPE_Q4_1: d0 = 2.0f * scale / 15.0f; d1 = -scale; break;
    case AMK_DTYPE_Q5_0: d0 = scale / 16.0f; break;
    case AMK_DTYPE_Q5_1: d0 = 2.0f * scale / 31.0f; d1 = -scale; break;
    case AMK_DTYPE_Q2_K: d0 = 2.0f * scale / 45.0f; d1 = scale / 15.0f; break;
    case AMK_DTYPE_Q3_K: d0 = scale / 128.0f; break;
    case AMK_DTYPE_Q4_K: d0 = 2.0f * scale / 945.0f; d1 = scale / 63.0f; break;
    case AMK_DTYPE_Q5_K: d0 = 2.0f * scale / 1953.0f; d1 = scale / 63.0f; break;
    case AMK_DTYPE_Q6_K: d0 = scale / 4096.0f; break;
    default: return;
    }
    const uint32_t h0 = __half_as_ushort(__float2half_rn(d0)), h1 = __half_as_ushort(__float2half_rn(d1));
    for (uint64_t ch = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; ch < chunks; ch += stride) {
        const uint64_t r[2] = {amk_fill_hash(seed, 2 * ch), amk_fill_hash(seed, 2 * ch + 1)};
        for (int k = 0; k < 16 && ch * 16 + (uint64_t)k < nbytes; k++) {
            const uint64_t b = ch * 16 + (uint64_t)k;
            const int o = (int)(b % B);
            uint32_t v = (uint32_t)(r[k >> 3] >> (8 * (k & 7))) & 0xFFu;
            if (o >= f0 && o < f0 + 2) v = (h0 >> (8 * (o - f0))) & 0xFFu;
            if (f1 >= 0 && o >= f1 && o < f1 + 2) v = (h1 >> (8 * (o - f1))) & 0xFFu;
            ((uint8_t *)ptr)[b] = (uint8_t)v;
        }
    }
}

/* Writes bytes [0, nbytes) of a buffer of numel elements of dtype t, 16 bytes a thread per step:
   each element's bits come from the random stream or the constant value. Bits past numel in the
   last byte (an odd I4 count) are 0; nothing past nbytes is written. */
static __device__ __forceinline__ void amk_fill_body(uint64_t ptr, uint64_t nbytes, int64_t numel, int t,
                                                     int random, uint64_t seed, float v, uint32_t count) {
    const int bits = amk_dtype_width(t), per_word = bits ? 32 / bits : 0;
    const uint32_t mask = bits == 32 ? 0xFFFFFFFFu : (1u << bits) - 1u;
    const uint32_t konst = random ? 0u : amk_encode(t, v) & mask;
    const uint64_t chunks = (nbytes + 15) / 16, stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t ch;
    if (random && amk_dtype_blk(t)) {
        amk_fill_blocks(ptr, nbytes, t, seed, v);
        return;
    }
    if (!bits) return; /* the host refuses unknown dtypes and a block format's value fill */
    for (ch = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; ch < chunks; ch += stride) {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int64_t e0 = (int64_t)(ch * 4 + (uint64_t)k) * per_word; /* first element of word k */
            uint32_t word = 0;
            for (int j = 0; j < per_word && e0 + j < numel; j++)
                word |= (random ? amk_fill_random_bits(t, seed, v, count, e0 + j) & mask : konst) << (j * bits);
            w[k] = word;
        }
        if ((ch + 1) * 16 <= nbytes) {
            ((uint4 *)ptr)[ch] = make_uint4(w[0], w[1], w[2], w[3]); /* ptr is 256-byte aligned */
        } else {
            for (uint64_t b = ch * 16; b < nbytes; b++)
                ((uint8_t *)ptr)[b] = (uint8_t)(w[(b >> 2) & 3] >> ((b & 3) * 8));
        }
    }
}

/* A buffer filled with seeded uniform values (amk_fill_random_bits), grid-strided. */
extern "C" __global__ void __launch_bounds__(AMK_FILL_THREADS) amk_fill_random(uint64_t ptr, uint64_t nbytes,
                                                                               int64_t numel, int32_t dtype,
                                                                               uint64_t seed, float scale,
                                                                               uint32_t count) {
    amk_fill_body(ptr, nbytes, numel, dtype, 1, seed, scale, count);
}

/* A buffer filled with one value, encoded as amk_store would. */
extern "C" __global__ void __launch_bounds__(AMK_FILL_THREADS) amk_fill_value(uint64_t ptr, uint64_t nbytes,
                                                                              int64_t numel, int32_t dtype,
                                                                              float value) {
    amk_fill_body(ptr, nbytes, numel, dtype, 0, 0, value, 0);
}

#endif /* AMK_VM_CUH */
