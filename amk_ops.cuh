/* amk_ops.cuh - the AMK instructions: one pure-compute device function per opcode (0..18, AMK's 20..27).

   Spec IR_SPEC.md §8.1 (instruction contract): an instruction runs on all threads of one block,
   reads only its declared inputs, writes only its declared outputs, never touches a counter and
   never launches work. The persistent kernel that schedules them is amk_vm.cuh (which includes
   this file); the CPU twin of every function here is amk_ref_<name> in amk.h (>>refvm), and the
   numerics follow IR_SPEC_NOTES.md "What each opcode computes": fp32 arithmetic and accumulation,
   the result cast to the output dtype.

   Layout of this file (STYLE.md): PTX wrappers, dtype helpers, block reductions, then the
   instructions in opcode order.

   Assumptions the host runtime (amk.h >>cuda) guarantees before launch: every buffer id, shape
   and param of every instruction passed amk__op_check (so no index below can leave its buffer),
   every buffer is contiguous row-major and starts 256-byte aligned with its size rounded up to
   16 bytes, blockDim.x is a multiple of 32 in [32, 1024], and the dynamic shared memory holds
   what amk__cuda_check_task asks for (x of a GEMV row block, q of an attention head per warp). */
#ifndef AMK_OPS_CUH
#define AMK_OPS_CUH

#include <stddef.h>
#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "amk_ir.h"
#include "amk_tune.h" /* the knobs (AMK_L2_HINTS, AMK_LEAN, ...): one table for host and device */
#include "amk_plan.h" /* the sizing rules the host shares (AMK_LEAN_BYTES, AMK_RING_BYTES, ...) */

/* ==== >>ptx: tiny wrappers, one per PTX instruction ========================================== */

/* AMK_PORTABLE (the portable image, gpu.mk: sm_80 and newer): the wrappers below that need sm_90
   have an sm_80 body there. A bulk copy becomes the issuing thread's 16-byte cp.async copies, and
   its mbarrier phase completes when they have landed (amk_ptx_bulk_commit after a phase's last
   copy: cp.async.mbarrier.arrive.noinc, one arrival); arming a phase for bytes is then nothing,
   the async-proxy fences are nothing (cp.async writes through the generic proxy), an L2 bulk
   prefetch is skipped, a vector reduction is four. The forms that need wgmma or tensor maps are
   not in that build (AMK_GEMM_TMA 0, AMK_ATTN_KV_TMA 0); its GEMM tiles of 16-bit x and W run
   amk_gemm_sync (mma.sync) where the others run amk_gemm_mma. */
#ifndef AMK_PORTABLE
#define AMK_PORTABLE 0
#endif
#if AMK_PORTABLE && (AMK_LEAN || AMK_RING || AMK_ATTN_LEAN || AMK_GEMM_TMA || AMK_ATTN_KV_TMA)
#error "AMK_PORTABLE: the lean, ring and tensor-map forms need sm_90 (gpu.mk's DEVICE_PORTABLE turns them off)"
#endif

/* why: weights are read once per token and never written during a launch, so they take the
   non-coherent path and skip L1 allocation (keeps L1 for activations). ONLY for WEIGHT/CONST/
   IO_INPUT buffers: data another SM writes during the launch must never be read through .nc.
   sm_70+ (L1::no_allocate needs PTX 7.4). Not volatile: a pure read of read-only memory. */
static __device__ __forceinline__ uint4 amk_ptx_ld_nc_na_v4(const void *p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

/* L2 eviction priority of the weights (AMK_L2_HINTS 1; 0 turns it off). why: a step streams its
   weights through L2 once (SmolLM2's 0.27 GB is five times the H100's L2), and at the default
   priority they evict everything a step reads again: the VM's code and instruction table, the K/V
   cache rows, the activations. A task's first run of an op's code, and its K/V rows, then come
   from DRAM, where they queue behind the weight copies in flight. With the weights' bulk copies
   and L2 prefetches evict-first, SmolLM2's step is 4% faster, 1B and 8B unchanged
   (bench/RESULTS.md run 255). */
/* An L2 policy (createpolicy, sm_80+): not volatile, so one serves a function's copies. */
static __device__ __forceinline__ uint64_t amk_ptx_policy_evict_first(void) {
    uint64_t p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

/* why: a GEMV tile's weights are read-only, so they can be pulled into L2 while the SM still
   waits for its inputs (the megakernel's central win); a hint, never a fault for valid addresses.
   Evict-first with AMK_L2_HINTS. sm_90 (PTX 8.0). addr 16-byte aligned, bytes a multiple of 16. */
static __device__ __forceinline__ void amk_ptx_prefetch_l2_bulk(const void *addr, uint32_t bytes) {
#if AMK_PORTABLE
    (void)addr; (void)bytes;
#elif AMK_L2_HINTS
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;"
                 :: "l"(addr), "r"(bytes), "l"(amk_ptx_policy_evict_first()) : "memory");
#else
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(addr), "r"(bytes) : "memory");
#endif
}

/* why: counter polls must not hoist and must not invalidate L1 on every iteration (an acquire
   load does: LDG.STRONG.GPU + CCTL.IVALL); relaxed at gpu scope reads L2. sm_70+. */
static __device__ __forceinline__ uint32_t amk_ptx_ld_relaxed_gpu(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* why: the one acquire after a successful poll, a load of the counter again: it compiles to a
   strong load and an L1 invalidate, where fence.acq_rel.gpu after the poll compiles to MEMBAR.ALL.GPU
   as well (bench/RESULTS.md run 69). Orders every later load of the block's thread 0 (and, through
   the following bar.sync, of the block) after the producers' release. sm_70+. */
static __device__ __forceinline__ uint32_t amk_ptx_ld_acquire_gpu(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* why: a task's signal as one release add: it orders the block's output stores (made visible to
   thread 0 by the barrier before it) before the increment, as __threadfence() + atomicAdd would,
   but without the fence's L1 invalidate (CCTL.IVALL after MEMBAR.SC.GPU; bench/RESULTS.md run 75).
   sm_70+. */
static __device__ __forceinline__ void amk_ptx_red_release_gpu_add(uint32_t *p, uint32_t v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

/* why: back-off in counter spins so a waiting SM does not hammer L2. sm_70+; sleeps ~[0, 2ns]. */
static __device__ __forceinline__ void amk_ptx_nanosleep(uint32_t ns) {
    asm volatile("nanosleep.u32 %0;" :: "r"(ns));
}

/* why: timing records must be comparable across SMs; %globaltimer is a global ns clock (32 ns
   steps on H100). sm_30+. volatile: every read is a new sample. */
static __device__ __forceinline__ uint64_t amk_ptx_globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* why: the hardware SM a block landed on, recorded in timing for the timeline. sm_20+. */
static __device__ __forceinline__ uint32_t amk_ptx_smid(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

/* why: decode attention stages a chunk of cache rows in shared memory with every thread's
   copies in flight at once and no registers held; .cg reads L2 only (the rows may have been
   written by other SMs this launch). 16 bytes, both addresses 16-byte aligned. sm_80+. */
static __device__ __forceinline__ void amk_ptx_cp_async_16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
}

/* why: RMSNORM_MLP adds four consecutive outputs with one reduction at L2 (a quarter of the
   atomics at the same address). 16-byte aligned. sm_90. */
static __device__ __forceinline__ void amk_ptx_red_add_v4_f32(float *p, float a, float b, float c, float d) {
#if AMK_PORTABLE
    atomicAdd(p, a); atomicAdd(p + 1, b); atomicAdd(p + 2, c); atomicAdd(p + 3, d);
#else
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#endif
}

/* why: waits for all of the calling thread's cp.async copies (a barrier then publishes them to
   the block). sm_80+. */
static __device__ __forceinline__ void amk_ptx_cp_async_wait_all(void) {
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/* why: GEMM_TILE's weight chunks (and x chunks) go straight from global to shared memory with
   out-of-range 16-byte units zero-filled (src_bytes = 0 reads nothing), so a ring of chunks is
   in flight with no registers held. .cg: L2 only. sm_80+. */
static __device__ __forceinline__ void amk_ptx_cp_async_16_zfill(void *dst, const void *src, uint32_t src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(src_bytes) : "memory");
}

/* why: one group per GEMM chunk, so a thread can wait for the oldest chunk while newer ones
   stay in flight. sm_80+. */
static __device__ __forceinline__ void amk_ptx_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* Waits until at most n of the calling thread's cp.async groups are pending (n a constant in
   practice; the switch keeps the immediate the instruction needs). sm_80+. */
static __device__ __forceinline__ void amk_ptx_cp_async_wait_pending(int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    }
}

/* why: shared memory written through the generic proxy (st.shared, cp.async) is read by wgmma
   through the async proxy: the writers fence, then the block syncs (REFERENCE.md §5.2). sm_90. */
static __device__ __forceinline__ void amk_ptx_fence_proxy_async_smem(void) {
#if !AMK_PORTABLE
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* Orders the thread's mbarrier inits before the async proxy's arrivals on them (sm_90; nothing in
   the portable image, where the block barrier after the inits publishes them). */
static __device__ __forceinline__ void amk_ptx_fence_mbar_init(void) {
#if !AMK_PORTABLE
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/* An mbarrier in shared memory (8-byte aligned) and a bulk copy completing on it (REFERENCE.md
   §5.1, 5.3; sm_90): init by one thread (then the init fence and a block barrier before use), the
   copy's issuer arms it with the byte count, every reader waits on the phase's parity. */
static __device__ __forceinline__ void amk_ptx_mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(count)
                 : "memory");
    amk_ptx_fence_mbar_init();
}
static __device__ __forceinline__ void amk_ptx_mbar_arrive_expect(uint64_t *bar, uint32_t bytes) {
#if AMK_PORTABLE
    (void)bar; (void)bytes; /* the phase's arrival is amk_ptx_bulk_commit's */
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(bytes) : "memory");
#endif
}
/* A copy into a phase already armed for its bytes (amk_ptx_mbar_arrive_expect: one arrival for
   the phase's copies together). */
static __device__ __forceinline__ void amk_ptx_bulk_copy_armed(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#if AMK_PORTABLE
    (void)bar;
    for (uint32_t i = 0; i < bytes; i += 16) amk_ptx_cp_async_16((char *)dst + i, (const char *)src + i);
#else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes),
                    "r"((uint32_t)__cvta_generic_to_shared(bar)) : "memory");
#endif
}
/* After the last copy of a phase (every phase that copies has one; the issuer's thread): nothing
   on sm_90, where the armed byte count completes the phase; the phase's one arrival, once the
   thread's copies have landed, in the portable image. */
static __device__ __forceinline__ void amk_ptx_bulk_commit(uint64_t *bar) {
#if AMK_PORTABLE
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"((uint32_t)__cvta_generic_to_shared(bar)) : "memory");
#else
    (void)bar;
#endif
}
/* The same for weights: evict-first in L2 with AMK_L2_HINTS. */
static __device__ __forceinline__ void amk_ptx_bulk_copy_weights(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#if AMK_L2_HINTS && !AMK_PORTABLE
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes),
                    "r"((uint32_t)__cvta_generic_to_shared(bar)), "l"(amk_ptx_policy_evict_first()) : "memory");
#else
    amk_ptx_bulk_copy_armed(dst, src, bytes, bar);
#endif
}
/* A box of a 2-D tensor map (cuTensorMapEncodeTiled; map: its generic address in global memory)
   at element coordinates (x, y) into dst, completing on bar (armed by the caller). */
static __device__ __forceinline__ void amk_ptx_tensor_copy_2d(void *dst, uint64_t map, int32_t x, int32_t y, uint64_t *bar) {
#if AMK_PORTABLE
    (void)dst; (void)map; (void)x; (void)y; (void)bar;
    __trap(); /* no tensor maps there: the forms that copy by them are not built (AMK_ATTN_KV_TMA 0) */
#else
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(map), "r"(x), "r"(y),
                    "r"((uint32_t)__cvta_generic_to_shared(bar)) : "memory");
#endif
}
/* why: global memory another SM wrote through the generic proxy (acquired through a counter or a
   chain join) is read next by this thread's bulk copies, through the async proxy */
static __device__ __forceinline__ void amk_ptx_fence_proxy_async_global(void) {
#if !AMK_PORTABLE
    asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}
static __device__ __forceinline__ void amk_ptx_bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    amk_ptx_mbar_arrive_expect(bar, bytes);
    amk_ptx_bulk_copy_armed(dst, src, bytes, bar);
    amk_ptx_bulk_commit(bar);
}
static __device__ __forceinline__ void amk_ptx_mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done;
    do {
#if AMK_PORTABLE /* why test_wait: try_wait is sm_90 */
        asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(parity) : "memory");
#else
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(parity) : "memory");
#endif
    } while (!done);
}

/* wgmma's fence (before the first MMA of a batch: orders the accumulator registers' earlier
   accesses), commit and wait-for-all. sm_90a. */
static __device__ __forceinline__ void amk_ptx_wgmma_fence(void) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
static __device__ __forceinline__ void amk_ptx_wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
static __device__ __forceinline__ void amk_ptx_wgmma_wait_all(void) {
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
/* All but the most recent committed group done. */
static __device__ __forceinline__ void amk_ptx_wgmma_wait_1(void) {
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}

/* d[64 x N tile, N/2 f32 a thread] (+)= A[64 x 16] . B[N x 16]^T, both K-major in shared memory
   (descriptors da, db); accumulate != 0 adds to d. One warpgroup (4 aligned warps) issues it
   together. F16 != 0: f16 operands, else bf16. sm_90a (PTX 8.0). N = 32, 64 or 128
   (amk_ptx_wgmma_m64n<N>k16: columns 8j.. in d[4j..4j+3], the same fragment layout). */
#define AMK__WGMMA_D "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define AMK__WGMMA_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, " \
    "%58, %59, %60, %61, %62, %63}"
#define AMK__WGMMA_OUT(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),   \
    "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), \
    "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
    "+f"(d[31])
#define AMK__WGMMA_OUT64(d) AMK__WGMMA_OUT(d), AMK__WGMMA_OUT((d + 32))
/* one wrapper: NAME, the shape's PTX, its d list and outputs, and the operands' first index */
#define AMK__WGMMA_FN(name, shape, dlist, outs, a, b, p)                                                       \
    static __device__ __forceinline__ void name(float *d, uint64_t da, uint64_t db, int accumulate, int f16) {     \
        if (f16)                                                                                                \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" p ", 0;\n"                                        \
                         "wgmma.mma_async.sync.aligned." shape ".f32.f16.f16 " dlist ", %" a ", %" b ", p, 1, 1, 0, 0;\n}" \
                         : outs(d) : "l"(da), "l"(db), "r"(accumulate) : "memory");                            \
        else                                                                                                    \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" p ", 0;\n"                                        \
                         "wgmma.mma_async.sync.aligned." shape ".f32.bf16.bf16 " dlist ", %" a ", %" b ", p, 1, 1, 0, 0;\n}" \
                         : outs(d) : "l"(da), "l"(db), "r"(accumulate) : "memory");                            \
    }
#define AMK__WGMMA_D16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define AMK__WGMMA_OUT16(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
AMK__WGMMA_FN(amk_ptx_wgmma_m64n32k16, "m64n32k16", AMK__WGMMA_D16, AMK__WGMMA_OUT16, "16", "17", "18")
AMK__WGMMA_FN(amk_ptx_wgmma_m64n64k16, "m64n64k16", AMK__WGMMA_D, AMK__WGMMA_OUT, "32", "33", "34")
AMK__WGMMA_FN(amk_ptx_wgmma_m64n128k16, "m64n128k16", AMK__WGMMA_D64, AMK__WGMMA_OUT64, "64", "65", "66")

/* d[64 x N tile] += A[64 x 16] . B[16 x N] with A in registers (a[0..3]: wgmma's A fragment, the
   mma.sync m16n8k16 layout a warp a 16-row slice) and B N-major in shared memory (descriptor db, V
   rows of a head as they lie in the cache). Always accumulates. F16 as above. sm_90a. */
#define AMK__WGMMA_RS_FN(name, shape, dlist, outs, a, b)                                                        \
    static __device__ __forceinline__ void name(float *d, const uint32_t *r, uint64_t db, int f16) {             \
        if (f16)                                                                                                \
            asm volatile("wgmma.mma_async.sync.aligned." shape ".f32.f16.f16 " dlist ", {%" a ", %" b "}, %" AMK__WGMMA_DB_##name ", 1, 1, 1, 1;" \
                         : outs(d) : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(db) : "memory");        \
        else                                                                                                    \
            asm volatile("wgmma.mma_async.sync.aligned." shape ".f32.bf16.bf16 " dlist ", {%" a ", %" b "}, %" AMK__WGMMA_DB_##name ", 1, 1, 1, 1;" \
                         : outs(d) : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(db) : "memory");        \
    }
#define AMK__WGMMA_DB_amk_ptx_wgmma_rs_m64n64k16 "36"
#define AMK__WGMMA_DB_amk_ptx_wgmma_rs_m64n128k16 "68"
AMK__WGMMA_RS_FN(amk_ptx_wgmma_rs_m64n64k16, "m64n64k16", AMK__WGMMA_D, AMK__WGMMA_OUT, "32, %33, %34", "35")
AMK__WGMMA_RS_FN(amk_ptx_wgmma_rs_m64n128k16, "m64n128k16", AMK__WGMMA_D64, AMK__WGMMA_OUT64, "64, %65, %66", "67")

/* Descriptor of a 16-bit operand tile in shared memory with 128-byte swizzle (8-row atoms of 128-byte
   rows, 1024 bytes, 1024-byte aligned; REFERENCE.md section 5.4): start address >> 4, the leading
   byte offset lbo (K-major: unused, 16; N-major: from one 64-element column block to the next), the
   stride byte offset 1024 (from one 8-row atom to the next), layout type 1 (128-byte swizzle) in
   bits 62-63. */
static __device__ __forceinline__ uint64_t amk_wg_desc(uint32_t saddr, uint32_t lbo) {
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

/* why: the VM runs every op inside one persistent loop; values derived from threadIdx.x (the
   lane, lane + 32t, divisions by blockDim.x) are hoisted out of that loop by the compiler and
   held in registers across every op, at the VM's 128-register cap. A volatile read cannot be
   hoisted, so an op's thread-derived values live only in that op. Each call is one S2R; the big
   ops read them once into locals, AMK_OPS_TID/NT re-read them per use (a loop step). sm_20+. */
static __device__ __forceinline__ int amk_tid(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(r));
    return (int)r;
}
static __device__ __forceinline__ int amk_ntid(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%ntid.x;" : "=r"(r));
    return (int)r;
}

/* why: decode attention's scores and p.V on the tensor cores (warp-level, so a warp works on its
   keys with no block barrier): four 8x8 b16 matrices from shared memory, thread i giving the
   address of row i % 8 of matrix i / 8; .trans hands out the transposes. 16-byte aligned rows.
   sm_75+. */
static __device__ __forceinline__ void amk_ptx_ldmatrix_x4(uint32_t *r, const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((uint32_t)__cvta_generic_to_shared(row)) : "memory");
}
static __device__ __forceinline__ void amk_ptx_ldmatrix_x4_trans(uint32_t *r, const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((uint32_t)__cvta_generic_to_shared(row)) : "memory");
}

/* The same from a shared-memory address (a loop that holds 32-bit addresses, not pointers). */
static __device__ __forceinline__ void amk_ptx_ldmatrix_x4_at(uint32_t *r, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
static __device__ __forceinline__ void amk_ptx_ldmatrix_x4_trans_at(uint32_t *r, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

/* d[16 x 8] += A[16 x 16] . B[16 x 8], bf16 operands, f32 accumulators (PTX ISA "matrix fragments
   for mma.m16n8k16"): with g = lane / 4, t = lane % 4, a[0] holds A(g, 2t..2t+1), a[1] A(g+8, ..),
   a[2] A(g, 2t+8..), a[3] A(g+8, 2t+8..); b0 B(2t..2t+1, g), b1 B(2t+8.., g); d[0..1] D(g,
   2t..2t+1), d[2..3] D(g+8, ..). The lower half of a register is the lower column (row of B).
   sm_80+. */
static __device__ __forceinline__ void amk_ptx_mma_bf16_16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* The same with f16 operands. */
static __device__ __forceinline__ void amk_ptx_mma_f16_16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* Two m16n8k16 MMAs sharing A: d0 += a . (b[0], b[1]), d1 += a . (b[2], b[3]) (an ldmatrix x4's
   two 8-column fragments), f16 or bf16 operands. */
static __device__ __forceinline__ void amk_ptx_mma_16816_x2(float *d0, float *d1, const uint32_t *a, const uint32_t *b,
                                                            int f16) {
    if (f16) {
        amk_ptx_mma_f16_16816(d0, a, b[0], b[1]);
        amk_ptx_mma_f16_16816(d1, a, b[2], b[3]);
    } else {
        amk_ptx_mma_bf16_16816(d0, a, b[0], b[1]);
        amk_ptx_mma_bf16_16816(d1, a, b[2], b[3]);
    }
}

/* why: ops size their shared-memory staging by what the launch actually gave. sm_20+ (PTX 4.1). */
static __device__ __forceinline__ uint32_t amk_ptx_dynamic_smem_size(void) {
    uint32_t r;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

/* ==== >>dtype: element loads and stores for every amk dtype =================================== */

#define AMK_OPS_WARP 32

/* E4M3FN (no infinity, 0x7F/0xFF are NaN), as amk_f8e4m3_to_f32 on the host. why __noinline__
   (and for amk_float_to_minifloat): amk_load and amk_store are inlined at every call, and
   inlined FP8 cases would lay ~150 KB of code between the instructions of the VM's hot paths
   (bench/RESULTS.md run 21). FP8 elements are rare here. */
static __device__ __noinline__ float amk_f8e4m3_to_float(uint32_t v) {
    uint32_t e = (v >> 3) & 15u, m = v & 7u;
    float r;
    if ((v & 0x7Fu) == 0x7Fu) return __int_as_float((int)(0x7FC00000u | ((v & 0x80u) << 24)));
    r = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(m | 8u), (int)e - 10); /* why: bias 7, 3 mantissa bits */
    return (v & 0x80u) ? -r : r;
}

/* E5M2 is the top byte of an IEEE half: exact through the f16 path. */
static __device__ __forceinline__ float amk_f8e5m2_to_float(uint32_t v) {
    return __half2float(__ushort_as_half((unsigned short)(v << 8)));
}

/* Round-to-nearest-even into a minifloat with ebits/mbits/bias; |f| >= overflow_at gives
   overflow_code (E4M3: saturate to 448; E5M2: infinity), NaN gives 0x7F: the host's rules. */
static __device__ __noinline__ uint32_t amk_float_to_minifloat(float f, int mbits, int bias, float overflow_at,
                                                               uint32_t overflow_code) {
    uint32_t sign = signbit(f) ? 0x80u : 0u, code;
    float a = fabsf(f);
    int e;
    if (f != f) return 0x7Fu;
    if (a >= overflow_at) return sign | overflow_code;
    if (a == 0.0f) return sign;
    frexpf(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < 1 - bias) { /* subnormal: units of 2^(1-bias-mbits); may round up into the first normal */
        code = (uint32_t)rintf(ldexpf(a, bias - 1 + mbits));
    } else {
        uint32_t q = (uint32_t)rintf(ldexpf(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
        if (q == (2u << mbits)) { q >>= 1; e += 1; }
        code = ((uint32_t)(e + bias) << mbits) | (q - (1u << mbits));
    }
    return sign | code;
}

/* Element i of a buffer of dtype t as float (integers exact up to 2^24): amk__load_f32's twin. */
static __device__ __forceinline__ float amk_load(const void *base, int t, int64_t i) {
    const uint8_t *b = (const uint8_t *)base;
    switch (t) {
    case AMK_DTYPE_F32: return ((const float *)base)[i];
    case AMK_DTYPE_F16: return __half2float(((const __half *)base)[i]);
    case AMK_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)base)[i]);
    case AMK_DTYPE_F8E4M3: return amk_f8e4m3_to_float(b[i]);
    case AMK_DTYPE_F8E5M2: return amk_f8e5m2_to_float(b[i]);
    case AMK_DTYPE_I32: return (float)((const int32_t *)base)[i];
    case AMK_DTYPE_I8: return (float)(int8_t)b[i];
    case AMK_DTYPE_I4: { /* stored q + 8, element 2k in the low nibble (IR_SPEC_NOTES) */
        uint32_t byte = b[i >> 1];
        return (float)((int)((i & 1) ? (byte >> 4) : (byte & 15u)) - 8);
    }
    case AMK_DTYPE_U8: return (float)b[i];
    case AMK_DTYPE_BOOL: return b[i] ? 1.0f : 0.0f;
    default: return 0.0f;
    }
}

/* Element i as an integer (ids, positions): floats truncate, NaN reads 0 (amk__load_i64). */
static __device__ __forceinline__ int64_t amk_load_int(const void *base, int t, int64_t i) {
    const uint8_t *b = (const uint8_t *)base;
    float f;
    if (t == AMK_DTYPE_I32) return ((const int32_t *)base)[i];
    if (t == AMK_DTYPE_I8) return (int8_t)b[i];
    if (t == AMK_DTYPE_U8 || t == AMK_DTYPE_BOOL) return b[i];
    f = amk_load(base, t, i);
    if (f != f) return 0;
    if (f >= 9.2e18f) return INT64_MAX;
    if (f <= -9.2e18f) return INT64_MIN;
    return (int64_t)f;
}

/* Round to nearest even and saturate into [lo, hi]; NaN -> 0 (amk__sat_i32). */
static __device__ __forceinline__ int amk_sat_int(float v, float lo, float hi) {
    if (v != v) return 0;
    return __float2int_rn(fminf(fmaxf(v, lo), hi));
}

/* v as one element of dtype t: the element's bits in the low amk_dtype_width(t) bits (I4: the
   nibble q + 8), with amk__store_f32's rounding and saturation. */
static __device__ __forceinline__ uint32_t amk_encode(int t, float v) {
    switch (t) {
    case AMK_DTYPE_F32: return __float_as_uint(v);
    case AMK_DTYPE_F16: return __half_as_ushort(__float2half_rn(v));
    case AMK_DTYPE_BF16: return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    case AMK_DTYPE_F8E4M3: return amk_float_to_minifloat(v, 3, 7, 464.0f, 0x7Eu); /* why: 448 + half its ulp */
    case AMK_DTYPE_F8E5M2: return amk_float_to_minifloat(v, 2, 15, 61440.0f, 0x7Cu); /* why: 57344 + half ulp -> inf */
    case AMK_DTYPE_I32: return (uint32_t)(v != v ? 0 : __float2int_rn(v)); /* cvt.rni saturates to int32 */
    case AMK_DTYPE_I8: return (uint32_t)(uint8_t)(int8_t)amk_sat_int(v, -128.0f, 127.0f);
    case AMK_DTYPE_I4: return (uint32_t)(amk_sat_int(v, -8.0f, 7.0f) + 8);
    case AMK_DTYPE_U8: return (uint32_t)amk_sat_int(v, 0.0f, 255.0f);
    case AMK_DTYPE_BOOL: return v != 0.0f;
    default: return 0u;
    }
}

/* Bits of one element of dtype t (4 for I4; 0 if unknown): amk_dtype_bits' twin. */
static __device__ __forceinline__ int amk_dtype_width(int t) {
    switch (t) {
    case AMK_DTYPE_F32: case AMK_DTYPE_I32: return 32;
    case AMK_DTYPE_F16: case AMK_DTYPE_BF16: return 16;
    case AMK_DTYPE_F8E4M3: case AMK_DTYPE_F8E5M2: case AMK_DTYPE_I8: case AMK_DTYPE_U8: case AMK_DTYPE_BOOL: return 8;
    case AMK_DTYPE_I4: return 4;
    default: return 0;
    }
}

/* Writes v as element i of dtype t (amk__store_f32's twin). I4 elements share a byte with a
   neighbour another thread (or SM) may write at the same time, so they go through word atomics
   (each nibble has one writer: clear then set is race-free). */
static __device__ __forceinline__ void amk_store(void *base, int t, int64_t i, float v) {
    const uint32_t e = amk_encode(t, v);
    switch (amk_dtype_width(t)) {
    case 32: ((uint32_t *)base)[i] = e; break;
    case 16: ((uint16_t *)base)[i] = (uint16_t)e; break;
    case 8: ((uint8_t *)base)[i] = (uint8_t)e; break;
    case 4: {
        const int64_t byte = i >> 1;
        unsigned int *word = (unsigned int *)((uint8_t *)base + (byte & ~(int64_t)3));
        const unsigned int shift = (unsigned int)((byte & 3) * 8 + (i & 1) * 4);
        atomicAnd(word, ~(0xFu << shift));
        atomicOr(word, e << shift);
        break;
    }
    default: break;
    }
}

/* Writes an integer exactly where the dtype can (argmax results): amk__store_i64's twin. */
static __device__ __forceinline__ void amk_store_int(void *base, int t, int64_t i, int64_t v) {
    if (t == AMK_DTYPE_I32) ((int32_t *)base)[i] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
    else amk_store(base, t, i, (float)v);
}

/* Two floats as a bf16x2 word (round to nearest even), a in the low half. */
static __device__ __forceinline__ uint32_t amk_pack_bf16x2(float a, float b) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
}
/* The same as f16. */
static __device__ __forceinline__ uint32_t amk_pack_f16x2(float a, float b) {
    return (uint32_t)__half_as_ushort(__float2half_rn(a)) | ((uint32_t)__half_as_ushort(__float2half_rn(b)) << 16);
}

/* 8 consecutive 16-bit floats of a 16-byte vector as floats. */
static __device__ __forceinline__ void amk_unpack_bf16x8(uint4 r, float *w) {
    uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        w[2 * j] = __uint_as_float(u[j] << 16);
        w[2 * j + 1] = __uint_as_float(u[j] & 0xFFFF0000u);
    }
}
static __device__ __forceinline__ void amk_unpack_f16x8(uint4 r, float *w) {
    uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        w[2 * j] = __half2float(__ushort_as_half((unsigned short)(u[j] & 0xFFFFu)));
        w[2 * j + 1] = __half2float(__ushort_as_half((unsigned short)(u[j] >> 16)));
    }
}

/* ==== >>reduce: warp and block reductions ====================================================== */

static __device__ __forceinline__ float amk_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
static __device__ __forceinline__ float amk_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

/* The instruction being executed, as the VM hands it to an op: the shared-memory copy of its
   context (amk_vm_ctx_t: the instruction, its buffers' descriptors, its index; the fields up to
   `index` are laid out as there, one bulk copy fills them), plus the VM's words and scratch. */
typedef struct __align__(16) amk_op_ctx {
    amk_instruction_t ins;
    amk_buffer_t in[AMK_MAX_INPUTS];
    amk_buffer_t out[AMK_MAX_OUTPUTS];
    int32_t index;      /* instruction index */
    int32_t kv_rows;    /* amk_vm_ctx_t's: the task's tensor maps */
    uint64_t maps;
    uint32_t *status;   /* the VM status words (amk_vm.cuh): an op reports a run-time error here */
    const uint32_t *counters;  /* the program's counters */
    uint64_t t_start;   /* when the waits were met (globaltimer; 0 unless the VM times tasks) */
    int timing;         /* nonzero: amk_op_go records t_start */
    int error;          /* nonzero: an op hit a run-time error; the VM will not signal */
    int go;             /* amk_op_go's result: 1 the waits were met, 0 not yet or aborted */
    uint32_t epoch;     /* amk_program_t.epoch: a wait's target is threshold * epoch */
    uint64_t *mbar;     /* mbarriers the VM initialised once, for an op's own bulk copies: [0] its
                           staging, [1 + s] slot s of a ring (amk_norm_gemv_ring) */
    uint32_t *mbar_uses; /* each one's completed phases (its parity is the low bit); the issuer counts */
    float red[AMK_OPS_WARP];   /* block reduction scratch */
    int redi[AMK_OPS_WARP];
#if AMK_VM_MARKS
    uint32_t mark[AMK_VM_MARKS_N]; /* AMK_OP_MARK's (thread 0's); the VM copies and zeroes them */
#endif
} amk_op_ctx;
static_assert(offsetof(amk_op_ctx, in) == offsetof(amk_vm_ctx_t, in) &&
                  offsetof(amk_op_ctx, index) == offsetof(amk_vm_ctx_t, index) &&
                  offsetof(amk_op_ctx, status) == sizeof(amk_vm_ctx_t) && sizeof(amk_vm_ctx_t) % 16 == 0,
              "amk_op_ctx starts with amk_vm_ctx_t's layout");

/* AMK_VM_MARKS 1 (amk_tune.h; a diagnostic, never shipped): AMK_OP_MARK(c, k) records when thread
   0 passed point k (0 .. AMK_VM_MARKS_N - 1) of a timed task, in ns after its t_start, and the VM
   writes them beside the timing records (amk_vm_marks_t, amk_ir.h). why a build of its own: a
   timer read in an op changes its code, and the shipped image stays the one measured (with 0 the
   image is byte-identical to one without marks). Marked: the lean attention, the lean tiles and the
   tensor-core ATTENTION_DECODE (position read, K/V staged, key groups done, outputs stored), the
   block ring's op (x staged, warp 0's rows, every warp's, the outputs stored), the tensor-copy
   GEMM (inputs complete, the first block's K loop, its epilogue, every block). */
#if AMK_VM_MARKS
#define AMK_OP_MARK(c, k)                                                                                    \
    do {                                                                                                     \
        if (amk_tid() == 0 && (c)->timing) (c)->mark[k] = (uint32_t)(amk_ptx_globaltimer() - (c)->t_start); \
    } while (0)
#else
#define AMK_OP_MARK(c, k) ((void)0)
#endif

/* ==== >>go: where an op's own setup ends and its inputs may be read ============================
   The VM hands an instruction to its op before the instruction's waits are met. The op first does
   what needs no input data (its parameters, pointers and loop bounds from the shared-memory copy
   of the instruction), then calls amk_op_go, which waits for the counters; only then does it read
   its inputs. why: a GEMV tile's setup is ~1 us of dependent scalar instructions on SmolLM2
   (bench/NOTES.md session "setup"), on the critical path after every hop; before the wait it
   runs while the block waits anyway. Ops that do not split call nothing: the dispatcher calls
   amk_op_go before them (with AMK_VM_EARLY_SETUP 0, before every op). Every path of an
   op that returns without an error calls amk_op_go exactly once, all threads alike (a path that
   missed it would leave the task unsignalled, and the host's watchdog would report it). */

/* Thread 0: waits until each of the nw counters ctr[w] reaches th[w] * epoch (amk_program_t.epoch:
   the counters run on across launches; the signed difference, so a target past 2^32 works),
   polling with a sleep from AMK_VM_BACKOFF_MIN_NS doubling up to AMK_VM_BACKOFF_MAX_NS.
   Returns 0 if the abort flag was raised meanwhile. */
static __device__ int amk_vm_wait(int nw, const int32_t *ctr_ids, const uint32_t *ths, const uint32_t *counters,
                                  const uint32_t *status, uint32_t epoch) {
    for (int w = 0; w < nw; w++) {
        const uint32_t *ctr = counters + ctr_ids[w];
        const uint32_t th = ths[w] * epoch;
        uint32_t ns = 0;
        while ((int32_t)(amk_ptx_ld_relaxed_gpu(ctr) - th) < 0) {
            if (amk_ptx_ld_relaxed_gpu(status + AMK_VM_STATUS_ABORT) != 0u) return 0;
            if (ns) amk_ptx_nanosleep(ns);
            ns = ns == 0 ? AMK_VM_BACKOFF_MIN_NS : ns < AMK_VM_BACKOFF_MAX_NS ? 2 * ns : ns;
        }
        /* acquire: the counter (monotonic, so still >= th) read once more with acquire semantics;
           the producers' writes are visible from here (to the block through the barrier after) */
        (void)amk_ptx_ld_acquire_gpu(ctr);
    }
    return 1;
}

/* All threads: returns 1 once the instruction's waits are met (thread 0 polls, the block meets at
   a barrier), 0 if the launch is being aborted (the caller then returns at once). */
static __device__ int amk_op_wait_go(amk_op_ctx *c) {
    if (amk_tid() == 0) {
        c->go = amk_vm_wait(c->ins.n_waits, c->ins.wait_counter, c->ins.wait_threshold, c->counters, c->status, c->epoch);
        if (c->timing) c->t_start = amk_ptx_globaltimer();
    }
    __syncthreads();
    return c->go;
}

/* What a splitting op calls between its setup and its first read of an input (see above). */
static __device__ __forceinline__ int amk_op_go(amk_op_ctx *c) {
#if AMK_VM_EARLY_SETUP
    return amk_op_wait_go(c);
#else
    (void)c;
    return 1; /* the dispatcher waited before the op */
#endif
}

/* The block's helper thread, for work beside thread 0's polling (the VM's L2 prefetch, an op's
   bulk copy before its wait): 32, outside warp 0, or 1 in a block of one warp. why a macro, not a
   variable: a variable is held across an op, in registers the VM (at its 128 cap) lacks */
#define AMK_AUX_TID_OF(nt) ((nt) > 32 ? 32 : 1) /* in a block of nt threads */
#define AMK_AUX_TID AMK_AUX_TID_OF(amk_ntid())

/* Sum over the block; every thread gets the result. Uses c->red; all threads must call it. */
static __device__ float amk_block_sum(amk_op_ctx *c, float v) {
    int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    v = amk_warp_sum(v);
    if (lane == 0) c->red[warp] = v;
    __syncthreads();
    v = lane < nw ? c->red[lane] : 0.0f;
    v = amk_warp_sum(v);
    __syncthreads(); /* why: c->red is reused by the next call */
    return v;
}
static __device__ float amk_block_max(amk_op_ctx *c, float v) {
    int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    v = amk_warp_max(v);
    if (lane == 0) c->red[warp] = v;
    __syncthreads();
    v = lane < nw ? c->red[lane] : -INFINITY;
    v = amk_warp_max(v);
    __syncthreads();
    return v;
}

/* Device-side run-time errors (a token id or position out of range): the first one wins the
   status words (AMK_VM_STATUS_*, amk_ir.h) and raises the abort flag so every block stops; the
   host reports it. */
static __device__ void amk_op_fail(amk_op_ctx *c, int code, int64_t value) {
    if (atomicCAS(&c->status[AMK_VM_STATUS_ABORT], 0u, AMK_VM_ABORT_ERROR) == 0u) {
        c->status[AMK_VM_STATUS_ERR_TASK] = (uint32_t)c->index;
        c->status[AMK_VM_STATUS_ERR_CODE] = (uint32_t)code;
        c->status[AMK_VM_STATUS_ERR_VALUE] = (uint32_t)(value > INT32_MAX ? INT32_MAX : value < INT32_MIN ? INT32_MIN : value);
    }
    c->error = 1;
}

/* why inlined into the VM's switch: out of line, the call ABI's saved registers spill in every op
   at the 1024-thread cap (64 registers); the VM caps blocks at 512. */
/* ---- block formats (AMK_DTYPE_Q8_0 ... IQ4_NL): GGUF's quantized blocks -----------------------
   Four consecutive elements e .. e + 3 (e a multiple of 4) of a block at x, by the element rules of
   amk_core.h's amk__blk_deq_* (ggml's dequantize_row_*): the products and sums round as the host's
   do (__fmul_rn and __fadd_rn, never contracted into an fma), so a decoded weight equals the
   reference VM's bit for bit. Every block size is even and buffers start 256-aligned, and a
   quad's bytes sit at an even offset of its block: 16-bit loads, on the read-only path (only
   WEIGHT and CONST buffers hold block formats: the validator's rule). */
/* sh (a constant at each call): the block sits in shared memory (a dequantizing COPY's ring), read
   through a generic pointer; 0: in global memory, read on the read-only path. */
static __device__ __forceinline__ uint32_t amk_blk_ld16(const uint8_t *p, const int sh) {
    return sh ? (uint32_t)*(const unsigned short *)p : (uint32_t)__ldg((const unsigned short *)p);
}
static __device__ __forceinline__ uint32_t amk_blk_ld8(const uint8_t *p, const int sh) {
    return sh ? (uint32_t)*p : (uint32_t)__ldg((const unsigned char *)p);
}
static __device__ __forceinline__ uint32_t amk_blk_ld32(const uint8_t *p, const int sh) {
    return amk_blk_ld16(p, sh) | amk_blk_ld16(p + 2, sh) << 16;
}
static __device__ __forceinline__ float amk_blk_ldf16(const uint8_t *p, const int sh) {
    return __half2float(__ushort_as_half((unsigned short)amk_blk_ld16(p, sh)));
}
static __device__ __forceinline__ uint32_t amk_blk_u16(const uint8_t *p) { return amk_blk_ld16(p, 0); }
static __device__ __forceinline__ uint32_t amk_blk_u32(const uint8_t *p) { return amk_blk_ld32(p, 0); }
static __device__ __forceinline__ uint32_t amk_blk_u8(const uint8_t *p) { return amk_blk_ld8(p, 0); }
static __device__ __forceinline__ float amk_blk_f16(const uint8_t *p) { return amk_blk_ldf16(p, 0); }

/* Elements and bytes a block of block dtype t. */
static __device__ __forceinline__ int amk_blk_elems(int t) { return AMK_BLOCK_ELEMS(t); }
static __device__ __forceinline__ int amk_blk_bytes(int t) { return AMK_BLOCK_BYTES(t); }

/* IQ4_NL's level of nibble v: the 16 int8 levels packed in two words (no table in memory). */
static __device__ __forceinline__ float amk_blk_iq4_level(uint32_t v) {
    const unsigned long long lo = 0xF6EADDCFBFAD9881ull, hi = 0x7159453526190D01ull; /* -127 .. -10, 1 .. 113 */
    return (float)(int8_t)(uint8_t)((v < 8 ? lo : hi) >> (8 * (v & 7)));
}

/* The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block's scales at sc. */
static __device__ __forceinline__ void amk_blk_k4_scale_min_at(const uint8_t *sc, int s, float *scale, float *min, const int sh) {
    if (s < 4) {
        *scale = (float)(amk_blk_ld8(sc + s, sh) & 63u);
        *min = (float)(amk_blk_ld8(sc + s + 4, sh) & 63u);
    } else {
        const uint32_t a = amk_blk_ld8(sc + s + 4, sh);
        *scale = (float)((a & 0xFu) | (amk_blk_ld8(sc + s - 4, sh) >> 6) << 4);
        *min = (float)((a >> 4) | (amk_blk_ld8(sc + s, sh) >> 6) << 4);
    }
}
static __device__ __forceinline__ void amk_blk_k4_scale_min(const uint8_t *sc, int s, float *scale, float *min) {
    amk_blk_k4_scale_min_at(sc, s, scale, min, 0);
}

static __device__ __forceinline__ void amk_blk_quad_at(const uint8_t *x, int t, int e, float *w, const int sh) {
    switch (t) {
    case AMK_DTYPE_Q8_0: {
        const float d = amk_blk_ldf16(x, sh);
        const uint32_t u = amk_blk_ld32(x + 2 + e, sh);
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = __fmul_rn((float)(int8_t)(uint8_t)(u >> (8 * i)), d);
        break;
    }
    case AMK_DTYPE_Q4_0: case AMK_DTYPE_IQ4_NL: { /* low nibbles are elements 0..15, high 16..31 */
        const float d = amk_blk_ldf16(x, sh);
        const uint32_t u = amk_blk_ld32(x + 2 + (e & 15), sh) >> (4 * (e >> 4));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t v = (u >> (8 * i)) & 0xFu;
            w[i] = t == AMK_DTYPE_Q4_0 ? __fmul_rn((float)((int)v - 8), d) : __fmul_rn(d, amk_blk_iq4_level(v));
        }
        break;
    }
    case AMK_DTYPE_Q4_1: {
        const float d = amk_blk_ldf16(x, sh), m = amk_blk_ldf16(x + 2, sh);
        const uint32_t u = amk_blk_ld32(x + 4 + (e & 15), sh) >> (4 * (e >> 4));
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = __fadd_rn(__fmul_rn((float)((u >> (8 * i)) & 0xFu), d), m);
        break;
    }
    case AMK_DTYPE_Q5_0: case AMK_DTYPE_Q5_1: { /* bit e of qh is element e's fifth bit */
        const int m1 = t == AMK_DTYPE_Q5_1, ho = m1 ? 4 : 2;
        const float d = amk_blk_ldf16(x, sh), m = m1 ? amk_blk_ldf16(x + 2, sh) : 0.0f;
        const uint32_t qh = amk_blk_ld32(x + ho, sh) >> e, u = amk_blk_ld32(x + ho + 4 + (e & 15), sh) >> (4 * (e >> 4));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = (int)(((u >> (8 * i)) & 0xFu) | ((qh >> i) & 1u) << 4);
            w[i] = m1 ? __fadd_rn(__fmul_rn((float)q, d), m) : __fmul_rn((float)(q - 16), d);
        }
        break;
    }
    case AMK_DTYPE_Q4_K: case AMK_DTYPE_Q5_K: { /* chunk c of 64: low nibbles sub-block 2c, high 2c + 1 */
        const int five = t == AMK_DTYPE_Q5_K, c = e >> 6, h = (e >> 5) & 1, l = e & 31, s = 2 * c + h;
        float sc, mn;
        amk_blk_k4_scale_min_at(x + 4, s, &sc, &mn, sh);
        const float dd = __fmul_rn(amk_blk_ldf16(x, sh), sc), mm = __fmul_rn(amk_blk_ldf16(x + 2, sh), mn);
        const uint32_t u = amk_blk_ld32(x + (five ? 48 : 16) + 32 * c + l, sh) >> (4 * h);
        const uint32_t qh = five ? amk_blk_ld32(x + 16 + l, sh) >> s : 0u;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t q = ((u >> (8 * i)) & 0xFu) | ((qh >> (8 * i)) & 1u) << 4;
            w[i] = __fsub_rn(__fmul_rn(dd, (float)q), mm);
        }
        break;
    }
    case AMK_DTYPE_Q2_K: case AMK_DTYPE_Q3_K: { /* e = 128n + 32j + 16h + l: bits 2j of qs[32n + 16h + l] */
        const int n = e >> 7, j = (e >> 5) & 3, h = (e >> 4) & 1, l = e & 15;
        if (t == AMK_DTYPE_Q2_K) {
            const float d = amk_blk_ldf16(x + 80, sh), dmin = amk_blk_ldf16(x + 82, sh);
            const uint32_t s = amk_blk_ld8(x + 8 * n + 2 * j + h, sh);
            const float dl = __fmul_rn(d, (float)(s & 0xFu)), ml = __fmul_rn(dmin, (float)(s >> 4));
            const uint32_t u = amk_blk_ld32(x + 16 + 32 * n + 16 * h + l, sh) >> (2 * j);
#pragma unroll
            for (int i = 0; i < 4; i++) w[i] = __fsub_rn(__fmul_rn(dl, (float)((u >> (8 * i)) & 3u)), ml);
        } else { /* the 2-bit value is q - 4 where the element's bit 4n + j of hmask[16h + l] is clear */
            const int si = 8 * n + 2 * j + h;
            const uint32_t lo = si < 8 ? amk_blk_ld8(x + 96 + si, sh) & 0xFu : amk_blk_ld8(x + 96 + si - 8, sh) >> 4;
            const uint32_t hi = (amk_blk_ld8(x + 96 + 8 + si % 4, sh) >> (2 * (si / 4))) & 3u;
            const float dl = __fmul_rn(amk_blk_ldf16(x + 108, sh), (float)((int)(lo | hi << 4) - 32));
            const uint32_t u = amk_blk_ld32(x + 32 + 32 * n + 16 * h + l, sh) >> (2 * j);
            const uint32_t m = amk_blk_ld32(x + 16 * h + l, sh) >> (4 * n + j);
#pragma unroll
            for (int i = 0; i < 4; i++)
                w[i] = __fmul_rn(dl, (float)((int)((u >> (8 * i)) & 3u) - ((m >> (8 * i)) & 1u ? 0 : 4)));
        }
        break;
    }
    case AMK_DTYPE_Q6_K: { /* e = 128n + 32k + l: nibble k / 2 of ql[64n + 32(k % 2) + l], bits 2k of qh[32n + l] */
        const int n = e >> 7, k = (e >> 5) & 3, l = e & 31;
        const float ds = __fmul_rn(amk_blk_ldf16(x + 208, sh), (float)(int8_t)(uint8_t)amk_blk_ld8(x + 192 + 8 * n + l / 16 + 2 * k, sh));
        const uint32_t u = amk_blk_ld32(x + 64 * n + 32 * (k & 1) + l, sh) >> (4 * (k >> 1));
        const uint32_t qh = amk_blk_ld32(x + 128 + 32 * n + l, sh) >> (2 * k);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = (int)(((u >> (8 * i)) & 0xFu) | ((qh >> (8 * i)) & 3u) << 4) - 32;
            w[i] = __fmul_rn(ds, (float)q);
        }
        break;
    }
    default:
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = 0.0f;
        break;
    }
}
static __device__ __forceinline__ void amk_blk_quad(const uint8_t *x, int t, int e, float *w) {
    amk_blk_quad_at(x, t, e, w, 0);
}

/* Row r of a block-format matrix of K-element rows: its first byte. */
static __device__ __forceinline__ const uint8_t *amk_blk_row(const amk_buffer_t *W, int64_t r, int K) {
    return (const uint8_t *)W->ptr + r * (int64_t)(K / amk_blk_elems(W->dtype)) * amk_blk_bytes(W->dtype);
}

/* 1 for a block dtype. */
static __device__ __forceinline__ int amk_dtype_blk(int t) { return AMK_DTYPE_IS_BLOCK(t); }

/* ---- block-format tiles: x staged by units, a unit of 32 elements a lane ----------------------
   A tile whose W is in a block format stages its row of x (times the norm weight for the RMSNORM_*
   ops) by units of 32 elements: xq[(g * UP + u) * 4 + i] = x[32u + 4g + i] for the K / 32 units u
   (UP: their count rounded up to odd) and g = 0..7, then each unit's sum, sx[u] = xq[32 UP + u].
   Each warp takes a row of W, each lane its units lane, lane + 32, ...: the lane decodes a unit
   (its scales once) and takes its eight float4 pieces of x, the warp's reading 512 contiguous
   bytes (no bank conflict; staging's stores neither, UP being odd). The dot of a unit with a
   scale d and a min m (w = d q + m) is d * sum(q x) + m * sx[u]: the same sum as the reference's
   in another order of its roundings. The eight formats GGUF files mostly hold decode a unit with
   aligned 32-bit or 16-byte loads (funnel-shifted where a block sits at an even offset) and their
   bytes as floats by a permute and an exact subtraction; Q2_K, Q3_K and IQ4_NL through
   amk_blk_quad. A lane has one unit's loads in flight (two for Q8_0). The tiles stream ~1 TB/s
   on the H200 whatever their format's bytes a unit, and none of these moved that by more than
   8%: a warp's rows through shared memory (a block-wide ring of bulk copies, runs 329-330; a ring
   a warp, runs 333-337), rows prefetched into L2 ahead of the warp (run 340), two units a lane in
   flight (run 342: Q8_0 -8%, Q4_0 +3%, the K-quants spill), dp4a on int8 x (runs 339, 342), loads
   coalesced as a repacked layout would allow (run 343). bench/NOTES.md session "bound". */

/* why: the single-task elementwise ops sit on the critical path between the GEMV phases. With
   the dtype switch inside amk_load, each element's load is behind a branch and waits a full load
   latency; amk_load_ilp switches once and issues AMK_EW_ILP loads (elements i0 + k*step) back to
   back, so they are in flight together (what made ATTENTION_TILE 2.6x faster). Out-of-range
   elements read as 0. */
#define AMK_EW_ILP 4
static __device__ __forceinline__ void amk_load_ilp(const void *base, int t, int64_t i0, int64_t step,
                                                    int64_t n, float *v) {
    int k;
    if (t == AMK_DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)base;
#pragma unroll
        for (k = 0; k < AMK_EW_ILP; k++) {
            const int64_t e = i0 + k * step;
            v[k] = e < n ? __uint_as_float((uint32_t)p[e] << 16) : 0.0f;
        }
    } else if (t == AMK_DTYPE_F32) {
        const float *p = (const float *)base;
#pragma unroll
        for (k = 0; k < AMK_EW_ILP; k++) {
            const int64_t e = i0 + k * step;
            v[k] = e < n ? p[e] : 0.0f;
        }
    } else {
#pragma unroll
        for (k = 0; k < AMK_EW_ILP; k++) {
            const int64_t e = i0 + k * step;
            v[k] = e < n ? amk_load(base, t, e) : 0.0f;
        }
    }
}

/* Element k of the vector staged into xq (UP: AMK_BLK_UP of its length): its place, and by the
   unit's first lane the unit's sum. A warp's 32 lanes hold one unit's 32 elements (k's lanes a
   unit, in order), so every lane of the warp calls it. */
static __device__ __forceinline__ void amk_blk_put(float *xq, int UP, int k, float y) {
    const float s = amk_warp_sum(y);
    xq[(((k & 31) >> 2) * UP + (k >> 5)) * 4 + (k & 3)] = y;
    if ((k & 31) == 0) xq[32 * UP + (k >> 5)] = s;
}

/* The same with x_q8 (amk_ir.h's AMK_X_Q8): y rounded to d q by its unit's largest |y| (a warp's
   max of the bits), the rounded value placed and summed as above. */
static __device__ __forceinline__ void amk_blk_put8(float *xq, int UP, int k, float y) {
    const uint32_t top = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(y) & 0x7FFFFFFFu);
    float d;
    const float q = amk_plan_x_q8(y, __uint_as_float(top), &d);
    amk_blk_put(xq, UP, k, d * q);
}

/* x[base .. base + K) (times w[0 .. K), an F32 norm weight, when w) into xq as above (with q8,
   rounded to 8 bits first: amk_blk_put8); returns the thread's sum of x^2. K a multiple of 32
   (a block's), the block's threads a multiple of 32; the caller syncs before reading xq. */
#define AMK_BLK_STAGE_ILP AMK_EW_ILP
static __device__ __forceinline__ float amk_blk_stage_x(float *xq, const amk_buffer_t *x, int64_t base, int K,
                                                        const amk_buffer_t *w, const int q8) {
    const int tid = amk_tid(), nt = amk_ntid(), UP = AMK_BLK_UP(K);
    float ss = 0.0f;
    for (int k0 = tid; k0 < K; k0 += AMK_BLK_STAGE_ILP * nt) {
        float v[AMK_BLK_STAGE_ILP], f[AMK_BLK_STAGE_ILP];
        /* why amk_load_ilp: its dtype switch once, then the loads back to back; amk_load's switch
           an element left them one at a time, each waiting out its latency (~8% of the 8B Q4_K_M
           step's stall samples, bench/NOTES.md session "pairs") */
        amk_load_ilp((const void *)x->ptr, x->dtype, base + k0, nt, base + K, v);
        if (w) amk_load_ilp((const void *)w->ptr, w->dtype, k0, nt, K, f);
        else
#pragma unroll
            for (int i = 0; i < AMK_BLK_STAGE_ILP; i++) f[i] = 1.0f;
#pragma unroll
        for (int i = 0; i < AMK_BLK_STAGE_ILP; i++) {
            const int k = k0 + i * nt; /* why uniform in a warp: K and nt are multiples of 32 */
            if (k < K) {
                ss = fmaf(v[i], v[i], ss);
                if (q8) amk_blk_put8(xq, UP, k, v[i] * f[i]);
                else amk_blk_put(xq, UP, k, v[i] * f[i]);
            }
        }
    }
    return ss;
}

/* The units' loads, on the read-only path: 16 bits at an even offset (amk_blk_u16), 32 at a
   multiple of 4, 16 bytes at a multiple of 16 (a K-quant's header and quants: its 144- and
   176-byte blocks keep rows 16-byte aligned). */
static __device__ __forceinline__ uint32_t amk_blk_w32(const uint8_t *p) { return __ldg((const unsigned int *)p); }

/* w[0 .. n) = the n 32-bit words at the even address p (n a constant): aligned loads of the words
   that hold them, funnel-shifted; the last only when p is not aligned, so no byte past the n words'
   aligned cover is read. why: half the loads of 16-bit pairs (Q8_0, Q4_0, Q5_0 and Q6_K blocks
   sit at even offsets), and half their registers in flight. */
static __device__ __forceinline__ void amk_blk_w32n(const uint8_t *p, uint32_t *w, const int n) {
    const uint8_t *a = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)3);
    const uint32_t s = 8u * (uint32_t)((uintptr_t)p & 3u);
    uint32_t lo = amk_blk_w32(a);
#pragma unroll
    for (int i = 0; i < n; i++) {
        const uint32_t hi = i + 1 < n || s ? amk_blk_w32(a + 4 * (i + 1)) : 0u;
        w[i] = __funnelshift_r(lo, hi, s);
        lo = hi;
    }
}

/* Sum of word w's four bytes, each minus off, times x. A byte becomes a float as the low mantissa
   of 2^23 (a byte permute) less 2^23 + off, exact. why not an integer conversion an element: it
   issues at 16 a clock a SM, an eighth of the float rate. */
static __device__ __forceinline__ float amk_blk_dot4(uint32_t w, float off, float4 x) {
    const float b = 8388608.0f + off;
#define AMK__BLK_B(i) (__int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7440u + (i))) - b)
    return fmaf(AMK__BLK_B(0), x.x, fmaf(AMK__BLK_B(1), x.y, fmaf(AMK__BLK_B(2), x.z, AMK__BLK_B(3) * x.w)));
#undef AMK__BLK_B
}

/* The lane's dot of unit u of a row of block format t with x; fam, a constant at each call, the
   code that decodes t: Q8_0; Q4_0 for Q4_0, Q4_1, Q5_0 and Q5_1; Q4_K for Q4_K and Q5_K; Q6_K;
   Q2_K (amk_blk_quad) for Q2_K, Q3_K and IQ4_NL. why families: a case a format took the RMSNORM_*
   ops past their registers. */
static __device__ __forceinline__ float amk_blk_unit(const uint8_t *row, const int fam, const int t, int u, const float *xq,
                                                     int UP) {
#define AMK__BLK_X(g) (*(const float4 *)(xq + ((g) * UP + u) * 4))
    const float sx = xq[32 * UP + u];
    float a = 0.0f;
    switch (fam) {
    case AMK_DTYPE_Q8_0: { /* int8 quants: each byte + 128 (its top bit flipped), less 128 */
        const uint8_t *b = row + (int64_t)u * 34;
        uint32_t q[8];
        amk_blk_w32n(b + 2, q, 8);
#pragma unroll
        for (int g = 0; g < 8; g++) a += amk_blk_dot4(q[g] ^ 0x80808080u, 128.0f, AMK__BLK_X(g));
        return amk_blk_f16(b) * a;
    }
    case AMK_DTYPE_Q4_0: {
        /* [d]([m])([qh u32])[qs 16]: elements j < 16 the low nibbles of qs[j], the rest the high */
        const int m1 = t == AMK_DTYPE_Q4_1 || t == AMK_DTYPE_Q5_1, five = t == AMK_DTYPE_Q5_0 || t == AMK_DTYPE_Q5_1;
        const int B = t == AMK_DTYPE_Q4_0 ? 18 : t == AMK_DTYPE_Q4_1 ? 20 : t == AMK_DTYPE_Q5_0 ? 22 : 24;
        const uint8_t *b = row + (int64_t)u * B, *qw = b + (m1 ? 4 : 2) - (five ? 0 : 4); /* qh's word, or where it would be */
        const float d = amk_blk_f16(b), m = m1 ? amk_blk_f16(b + 2) : 0.0f;
        uint32_t q[5]; /* qh (0 without), then the quants' four words: Q4_1/Q5_1 4-byte aligned, Q4_0/Q5_0 even */
        q[0] = 0u;
        if (m1) {
#pragma unroll
            for (int i = 0; i < 5; i++)
                if (i > 0 || five) q[i] = amk_blk_w32(qw + 4 * i);
        } else {
            if (five) amk_blk_w32n(qw, q, 5);
            else amk_blk_w32n(qw + 4, q + 1, 4);
        }
        const uint32_t qh = q[0];
#pragma unroll
        for (int g = 0; g < 8; g++) {
            uint32_t w = (q[1 + (g & 3)] >> (g < 4 ? 0 : 4)) & 0x0F0F0F0Fu;
            if (five) { /* bit j of qh is element j's fifth: spread the four bits of this piece into the bytes */
                const uint32_t h = qh >> (4 * g);
                w |= ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
            }
            a += amk_blk_dot4(w, 0.0f, AMK__BLK_X(g));
        }
        return m1 ? fmaf(d, a, m * sx) : d * (a - (five ? 16.0f : 8.0f) * sx);
    }
    case AMK_DTYPE_Q4_K: { /* sub-block s of block u / 8: nibble h of q[32c ..], c = s / 2 */
        const int five = t == AMK_DTYPE_Q5_K, s = u & 7, c = s >> 1, h = s & 1;
        const uint8_t *b = row + (int64_t)(u >> 3) * (five ? 176 : 144);
        const uint4 hd = amk_ptx_ld_nc_na_v4(b); /* d, dmin; the scales' 12 bytes */
        const uint4 q0 = amk_ptx_ld_nc_na_v4(b + (five ? 48 : 16) + 32 * c), q1 = amk_ptx_ld_nc_na_v4(b + (five ? 64 : 32) + 32 * c);
        uint4 h0 = make_uint4(0u, 0u, 0u, 0u), h1 = h0;
        if (five) { h0 = amk_ptx_ld_nc_na_v4(b + 16); h1 = amk_ptx_ld_nc_na_v4(b + 32); }
#define AMK__BLK_SC(k) ((((k) < 4 ? hd.y : (k) < 8 ? hd.z : hd.w) >> (8 * ((k) & 3))) & 0xFFu)
        uint32_t sc, mn;
        if (s < 4) {
            sc = AMK__BLK_SC(s) & 63u;
            mn = AMK__BLK_SC(s + 4) & 63u;
        } else {
            sc = (AMK__BLK_SC(s + 4) & 0xFu) | (AMK__BLK_SC(s - 4) >> 6) << 4;
            mn = (AMK__BLK_SC(s + 4) >> 4) | (AMK__BLK_SC(s) >> 6) << 4;
        }
#undef AMK__BLK_SC
        const float d = __half2float(__ushort_as_half((unsigned short)(hd.x & 0xFFFFu)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(hd.x >> 16)));
        const uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
        uint32_t qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
        for (int g = 0; g < 8; g++) /* the unit's values first (Q5_K: its bits merged, qh's words dead) */
            qw[g] = ((qw[g] >> (4 * h)) & 0x0F0F0F0Fu) | (five ? ((hw[g] >> s) & 0x01010101u) << 4 : 0u);
#pragma unroll
        for (int g = 0; g < 8; g++) a += amk_blk_dot4(qw[g], 0.0f, AMK__BLK_X(g));
        return fmaf(d * (float)sc, a, -(dmin * (float)mn) * sx);
    }
    case AMK_DTYPE_Q6_K: { /* elements 128n + 32k + l: nibble k / 2 of ql[64n + 32(k % 2) + l], bits 2k of qh[32n + l] */
        const int s = u & 7, n = s >> 2, k = s & 3;
        const uint8_t *b = row + (int64_t)(u >> 3) * 210, *ql = b + 64 * n + 32 * (k & 1), *qh = b + 128 + 32 * n;
        const uint32_t scs = amk_blk_u16(b + 192 + 8 * n + 2 * k); /* the scales of elements l < 16 and l >= 16 */
        float a1 = 0.0f;
        uint32_t wl[8], wh[8];
        amk_blk_w32n(ql, wl, 8);
        amk_blk_w32n(qh, wh, 8);
#pragma unroll
        for (int g = 0; g < 8; g++) {
            const uint32_t w = ((wl[g] >> (4 * (k >> 1))) & 0x0F0F0F0Fu) | (((wh[g] >> (2 * k)) & 0x03030303u) << 4);
            const float p = amk_blk_dot4(w, 32.0f, AMK__BLK_X(g));
            if (g < 4) a += p;
            else a1 += p;
        }
        return amk_blk_f16(b + 208) * fmaf((float)(int8_t)(uint8_t)scs, a, (float)(int8_t)(uint8_t)(scs >> 8) * a1);
    }
    default: { /* a quad at a time (why not unrolled: eight quads' loads took the op past its registers) */
        const int E = amk_blk_elems(t), B = amk_blk_bytes(t);
#pragma unroll 1
        for (int g = 0; g < 8; g++) {
            const int e = 32 * u + 4 * g;
            float w[4];
            amk_blk_quad(row + (int64_t)(e / E) * B, t, e % E, w);
            const float4 x = AMK__BLK_X(g);
            a = fmaf(w[0], x.x, fmaf(w[1], x.y, fmaf(w[2], x.z, fmaf(w[3], x.w, a))));
        }
        return a;
    }
    }
#undef AMK__BLK_X
}

/* yb[r] = row n0 + r of W . x for the nt rows of a tile, x staged in xq (amk_blk_stage_x); a warp a
   row; fam: W's family (amk_blk_unit). The block syncs before reading yb. */
static __device__ __forceinline__ void amk_blk_rows_t(const amk_buffer_t *W, const int fam, int K, int64_t n0, int64_t nt,
                                                      const float *xq, float *yb) {
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5, U = K / 32, UP = AMK_BLK_UP(K);
    const int t = W->dtype;
    for (int64_t r = warp; r < nt; r += nw) {
        const uint8_t *row = amk_blk_row(W, n0 + r, K);
        float a = 0.0f;
        if (fam == AMK_DTYPE_Q8_0) { /* two units' loads in flight: 8B Q8_0 -8% (bench/RESULTS.md run 344) */
#pragma unroll 2
            for (int u = lane; u < U; u += 32) a += amk_blk_unit(row, fam, t, u, xq, UP);
        } else { /* why not the other families: Q4_0's was 3% slower, the K-quants' spilled */
#pragma unroll 1
            for (int u = lane; u < U; u += 32) a += amk_blk_unit(row, fam, t, u, xq, UP);
        }
        a = amk_warp_sum(a);
        if (lane == 0) yb[r] = a;
    }
}
static __device__ __forceinline__ void amk_blk_rows(const amk_buffer_t *W, int K, int64_t n0, int64_t nt, const float *xq,
                                                    float *yb) {
    switch (W->dtype) {
    case AMK_DTYPE_Q8_0: amk_blk_rows_t(W, AMK_DTYPE_Q8_0, K, n0, nt, xq, yb); break;
    case AMK_DTYPE_Q4_0: case AMK_DTYPE_Q4_1: case AMK_DTYPE_Q5_0: case AMK_DTYPE_Q5_1:
        amk_blk_rows_t(W, AMK_DTYPE_Q4_0, K, n0, nt, xq, yb);
        break;
    case AMK_DTYPE_Q4_K: case AMK_DTYPE_Q5_K: amk_blk_rows_t(W, AMK_DTYPE_Q4_K, K, n0, nt, xq, yb); break;
    case AMK_DTYPE_Q6_K: amk_blk_rows_t(W, AMK_DTYPE_Q6_K, K, n0, nt, xq, yb); break;
    case AMK_DTYPE_Q2_K: case AMK_DTYPE_Q3_K: case AMK_DTYPE_IQ4_NL: amk_blk_rows_t(W, AMK_DTYPE_Q2_K, K, n0, nt, xq, yb); break;
    default: { /* a float W beside a block-format one (RMSNORM_SWIGLU's gate and up): element loads */
        const int lane = amk_tid() & 31, UP = AMK_BLK_UP(K);
        for (int64_t r = amk_tid() >> 5; r < nt; r += amk_ntid() >> 5) {
            float a = 0.0f;
            for (int k = lane; k < K; k += 32)
                a = fmaf(amk_load((const void *)W->ptr, W->dtype, (n0 + r) * K + k),
                         xq[(((k & 31) >> 2) * UP + (k >> 5)) * 4 + (k & 3)], a);
            a = amk_warp_sum(a);
            if (lane == 0) yb[r] = a;
        }
        break;
    }
    }
}

/* ---- the block ring: an x_q8 tile's rows through shared memory, integer dots ------------------
   A tile of one row of x whose matrices hold blocks of a format with an integer dot
   (amk_plan_blk_x8) streams its rows through a ring a warp: warp w takes the tile's rows [r0, r1)
   (ceil(nt / warps) each; a SWIGLU tile's gate rows, then its up rows), chunks of m *
   AMK_BLK_RING_UNITS units of a row a slot (m: amk_plan_blk_ring_m), one bulk copy a chunk, S
   slots of the larger matrix's chunk a warp at the end of shared memory (amk_plan.h's
   AMK_BLK_RING_BYTES: the warps' mbarriers, then their slots). Each lane decodes pairs of units
   (2p, 2p + 1 for p = lane, lane + 32, ... of a chunk: amk_blk_pair8) against x's q (the byte
   staging of amk_blk_stage_x8) by dp4a: a unit of a block with scale d_w and x's d is
   d_w d sum(q_w q) plus its offset's or min's term from the unit's sums of q. The first S chunks
   go out before the op's wait (the weights are constant), so the staging of x overlaps them.
   why: the lane loads of amk_blk_rows hold one unit a lane in flight and decode floats (~1 TB/s
   on the H200, bench/NOTES.md sessions "bound" and "x8": bytes in flight and instructions an
   element, both); the ring holds its bytes in shared memory, not registers, and dp4a takes four
   elements an instruction (bench/NOTES.md sessions "dp4a" and "pairs"). Its decoders
   (amk_blk_pair8, amk_blk_unit8, amk_s32n) restate the lane path's block layouts (amk_blk_unit,
   amk_blk_w32n) for shared memory and integer dots. why not
   shared helpers: factored, they changed the VM's register allocation and the chain image spilled
   (12 bytes; session "dp4a"), and the lane path's code is the one measured. */
#if AMK_BLK_RING
static const int amk_blk_pair_unroll = AMK_BLK_PAIR_UNROLL; /* why: a pragma's argument is not macro-expanded */
/* The ring's slots for a tile (0: the tile does not take it): W and Wu (NULL: none) the matrices,
   avail the bytes of shared memory the op leaves it. */
static __device__ __forceinline__ int64_t amk_blk_ring_cb(const amk_buffer_t *W, const amk_buffer_t *Wu, int m);
static __device__ __forceinline__ int amk_blk_ring_slots(const amk_op_ctx *c, const amk_buffer_t *W, const amk_buffer_t *Wu,
                                                         int64_t avail, int *m) {
    const amk_params_t *P = &c->ins.params;
    if (!P->x_q8 || !amk_plan_blk_x8(W->dtype, Wu ? Wu->dtype : -1, P->K)) return 0;
    for (*m = amk_plan_blk_ring_m(P->K, amk_blk_ring_cb(W, Wu, 1)); *m >= 1; *m >>= 1) { /* two slots of m, or of 1 */
        const int64_t per = AMK_BLK_RING_BYTES(amk_ntid() >> 5, 1, amk_blk_ring_cb(W, Wu, *m));
        const int64_t S = per > 0 ? avail / per : 0;
        if (S >= 2) return S > AMK_BLK_RING_SLOTS ? AMK_BLK_RING_SLOTS : (int)S;
    }
    return 0;
}
/* Where the ring starts: the last AMK_BLK_RING_BYTES of shared memory, 16-byte aligned. */
static __device__ __forceinline__ char *amk_blk_ring_base(float *smem, int S, int64_t cb) {
    return (char *)smem + (((int64_t)amk_ptx_dynamic_smem_size() - AMK_BLK_RING_BYTES(amk_ntid() >> 5, S, cb)) & ~(int64_t)15);
}
/* A slot's bytes: the larger matrix's chunk of m times AMK_BLK_RING_UNITS units. */
static __device__ __forceinline__ int64_t amk_blk_ring_cb(const amk_buffer_t *W, const amk_buffer_t *Wu, int m) {
    const int64_t a = amk_plan_blk_chunk(W->dtype), b = Wu ? amk_plan_blk_chunk(Wu->dtype) : 0;
    return (a > b ? a : b) * m;
}
/* Where the warp's chunks come from: its first gate (or W) chunk and its first up chunk (rows from
   row0, cpr chunks a row), and their chunks' bytes; chunk j < Tm is the gate's j, the rest the up's
   j - Tm. */
typedef struct amk_blk_src {
    const char *g, *u;
    uint32_t gb, ub;
    int Tm;
} amk_blk_src;
static __device__ __forceinline__ amk_blk_src amk_blk_ring_src(const amk_buffer_t *W, const amk_buffer_t *Wu, int64_t row0,
                                                              int cpr, int Tm, int m) {
    amk_blk_src r;
    r.gb = (uint32_t)(amk_plan_blk_chunk(W->dtype) * m);
    r.ub = Wu ? (uint32_t)(amk_plan_blk_chunk(Wu->dtype) * m) : 0u;
    r.g = (const char *)W->ptr + row0 * cpr * r.gb;
    r.u = Wu ? (const char *)Wu->ptr + row0 * cpr * r.ub : NULL;
    r.Tm = Tm;
    return r;
}
/* Lane 0's copy of the warp's chunk j into slot (its mbarrier bar); in the portable image every
   lane's part, 16-byte cp.async pieces, each lane then one arrival (the slots' mbarriers count
   AMK_BLK_RING_ISSUERS). why every lane there: the bulk copy's emulation is one thread's cp.async,
   72-288 of them a chunk one after another. AMK_BLK_RING_ISSUER(lane): whether lane issues. why
   the chunk's source written out in both bodies, not a shared helper: with one, the sm_90a images'
   VM code changed (bench/NOTES.md session "poll"), and theirs is the code measured. */
#if AMK_PORTABLE
#define AMK_BLK_RING_ISSUERS 32
#define AMK_BLK_RING_ISSUER(lane) 1
static __device__ __forceinline__ void amk_blk_ring_issue_lane(const amk_blk_src *r, int j, char *slot, uint64_t *bar, int lane) {
    const uint32_t b = j < r->Tm ? r->gb : r->ub;
    const char *src = j < r->Tm ? r->g + (int64_t)j * b : r->u + (int64_t)(j - r->Tm) * b;
    for (uint32_t i = 16u * (uint32_t)lane; i < b; i += 16u * AMK_BLK_RING_ISSUERS) amk_ptx_cp_async_16(slot + i, src + i);
    amk_ptx_bulk_commit(bar);
}
#define AMK_BLK_RING_ISSUE(r, j, slot, bar, lane) amk_blk_ring_issue_lane(r, j, slot, bar, lane)
#else
#define AMK_BLK_RING_ISSUERS 1
#define AMK_BLK_RING_ISSUER(lane) ((lane) == 0)
static __device__ __forceinline__ void amk_blk_ring_issue(const amk_blk_src *r, int j, char *slot, uint64_t *bar) {
    const uint32_t b = j < r->Tm ? r->gb : r->ub;
    amk_ptx_mbar_arrive_expect(bar, b);
    amk_ptx_bulk_copy_weights(slot, j < r->Tm ? r->g + (int64_t)j * b : r->u + (int64_t)(j - r->Tm) * b, b, bar);
    amk_ptx_bulk_commit(bar);
}
#define AMK_BLK_RING_ISSUE(r, j, slot, bar, lane) amk_blk_ring_issue(r, j, slot, bar)
#endif
/* The warp's rows [*r0, r0 + rows) of a tile of nt rows. */
static __device__ __forceinline__ int amk_blk_ring_rows_of(int nt, int *r0) {
    const int nw = amk_ntid() >> 5, per = (nt + nw - 1) / nw, a = (amk_tid() >> 5) * per;
    *r0 = a < nt ? a : nt;
    return a + per < nt ? per : nt - *r0;
}
/* Every thread, before the op's wait: the ring's mbarriers, and each warp's first S chunks. */
static __device__ __forceinline__ void amk_blk_ring_start(const amk_op_ctx *c, float *smem, int S, int m, const amk_buffer_t *W,
                                                          const amk_buffer_t *Wu, int64_t n0, int64_t nt) {
    const int64_t cb = amk_blk_ring_cb(W, Wu, m);
    const int cpr = c->ins.params.K / (32 * AMK_BLK_RING_UNITS * m), nw = amk_ntid() >> 5, warp = amk_tid() >> 5;
    char *ring = amk_blk_ring_base(smem, S, cb);
    uint64_t *bar = (uint64_t *)ring + warp * S;
    char *slots = ring + (int64_t)8 * nw * S + (int64_t)warp * S * cb;
    int r0;
    const int Tm = amk_blk_ring_rows_of((int)nt, &r0) * cpr, T = Tm * (Wu ? 2 : 1);
    const amk_blk_src src = amk_blk_ring_src(W, Wu, n0 + r0, cpr, Tm, m);
    if ((amk_tid() & 31) == 0)
        for (int s = 0; s < S; s++) amk_ptx_mbar_init(bar + s, AMK_BLK_RING_ISSUERS);
    amk_ptx_fence_proxy_async_smem(); /* why: the slots were last written through the generic proxy */
    __syncthreads();
    if (AMK_BLK_RING_ISSUER(amk_tid() & 31))
        for (int s = 0; s < S && s < T; s++) AMK_BLK_RING_ISSUE(&src, s, slots + s * cb, bar + s, amk_tid() & 31);
}
/* Every thread, at the op's end (also when it gave up, so that no copy lands after it): the
   warp's copies still in flight waited for, its mbarriers invalidated. done: the chunks the warp
   consumed. */
static __device__ __forceinline__ void amk_blk_ring_end(float *smem, int S, int64_t cb, int T, int done) {
    uint64_t *bar = (uint64_t *)amk_blk_ring_base(smem, S, cb) + (amk_tid() >> 5) * S;
    if ((amk_tid() & 31) == 0) {
        for (int j = done; j < T && j < done + S; j++) amk_ptx_mbar_wait(bar + j % S, (uint32_t)((j / S) & 1));
        for (int s = 0; s < S; s++)
            asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"((uint32_t)__cvta_generic_to_shared(bar + s)) : "memory");
    }
}
/* The warp's chunks of a tile (for amk_blk_ring_end after an op that gave up). */
static __device__ __forceinline__ int amk_blk_ring_chunks(const amk_op_ctx *c, int64_t nt, int two, int m) {
    int r0;
    return amk_blk_ring_rows_of((int)nt, &r0) * (c->ins.params.K / (32 * AMK_BLK_RING_UNITS * m)) * (two ? 2 : 1);
}

/* 1 when amk_blk_stage_x8 takes x and w (NULL: none). */
static __device__ __forceinline__ int amk_blk_stage_x8_takes(const amk_buffer_t *x, const amk_buffer_t *w) {
    const int a = x->dtype, b = w ? w->dtype : AMK_DTYPE_F32;
    return (a == AMK_DTYPE_F32 || a == AMK_DTYPE_BF16 || a == AMK_DTYPE_F16) &&
           (b == AMK_DTYPE_F32 || b == AMK_DTYPE_BF16 || b == AMK_DTYPE_F16) && (x->ptr & 15u) == 0 &&
           (!w || (w->ptr & 15u) == 0);
}
/* Quarter unit h of b (8 elements: two 16-byte pieces of F32, one of 16 bits) into r; as floats
   into y. */
static __device__ __forceinline__ void amk_blk_ld8(const amk_buffer_t *b, int h, uint4 *r) {
    if (b->dtype == AMK_DTYPE_F32) {
        r[0] = ((const uint4 *)b->ptr)[2 * h];
        r[1] = ((const uint4 *)b->ptr)[2 * h + 1];
    } else r[0] = ((const uint4 *)b->ptr)[h];
}
static __device__ __forceinline__ void amk_blk_cv8(int t, const uint4 *r, float *y) {
    if (t == AMK_DTYPE_F32) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            y[4 * i] = __uint_as_float(r[i].x);
            y[4 * i + 1] = __uint_as_float(r[i].y);
            y[4 * i + 2] = __uint_as_float(r[i].z);
            y[4 * i + 3] = __uint_as_float(r[i].w);
        }
    } else if (t == AMK_DTYPE_BF16) amk_unpack_bf16x8(r[0], y);
    else amk_unpack_f16x8(r[0], y);
}
/* x[0 .. K) times w (a norm weight, when w) rounded to 8 bits a unit (amk_plan_x_q8) into the
   ring's staging x8 (amk_plan.h's AMK_BLK_X8_BYTES), laid out for the ring's pairs of units
   (amk_blk_ring_mat: a lane takes units 2P and 2P + 1): four planes of P2 = K / 64 16-byte pieces,
   half h of unit u in plane 2 (u & 1) + h at piece u >> 1, so a warp's lanes read consecutive
   pieces; then at 32 UP bytes each unit's d (F32) and its halves' sums of q (two int16 in an I32,
   low half first), 8 bytes a unit, so a pair's four are one 16-byte load. Returns the thread's sum
   of x^2. A thread takes quarter units (8 elements: quarters tid, tid + threads, ...), x's by
   16-byte loads issued together (then w's, below), a unit's four quarters in neighbouring lanes.
   K a multiple of 2048 (the ring's rows), the block's threads a multiple of 32, x and w 16-byte
   aligned F32, BF16 or F16 (amk_blk_stage_x8_takes). why: amk_blk_stage_x (a warp a unit, an
   element a lane) waits out a load's latency each round of AMK_BLK_STAGE_ILP elements, behind the
   round's warp reductions: x's staging took 2.6-3.8 us of a K = 4096 tile on the 8B and 8 us at
   K = 14336 (AMK_VM_MARKS, bench/NOTES.md session "pairs"). */
static __device__ __forceinline__ float amk_blk_stage_x8(const amk_buffer_t *x, int K, const amk_buffer_t *w, uint8_t *x8) {
    const int tid = amk_tid(), nt = amk_ntid(), P2 = K / 64, UP = AMK_BLK_UP(K), j = tid & 3;
    float *xd = (float *)(x8 + 32 * UP);
    float ss = 0.0f;
    for (int h = tid; h < K / 8; h += nt) { /* why uniform in a warp: K / 8 and nt are multiples of 32 */
        uint4 rx[2], rw[2];
        float y[8];
        amk_blk_ld8(x, h, rx);
        amk_blk_cv8(x->dtype, rx, y);
#pragma unroll
        for (int k = 0; k < 8; k++) ss = fmaf(y[k], y[k], ss);
        if (w) { /* why after x's (a weight read by every SM: an L2 hit), and element by element, not
                    through a float array: with both in flight, the op ran out of registers */
            asm volatile("" ::: "memory");
            amk_blk_ld8(w, h, rw);
            const int tw = w->dtype;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const uint4 r = rw[tw == AMK_DTYPE_F32 ? k >> 2 : 0];
                const uint32_t e = tw == AMK_DTYPE_F32 ? ((k & 3) == 0 ? r.x : (k & 3) == 1 ? r.y : (k & 3) == 2 ? r.z : r.w)
                                                       : ((k >> 1) == 0 ? r.x : (k >> 1) == 1 ? r.y : (k >> 1) == 2 ? r.z : r.w);
                const uint32_t hb = (k & 1) ? e >> 16 : e & 0xFFFFu; /* a 16-bit weight's bits */
                y[k] *= tw == AMK_DTYPE_F32 ? __uint_as_float(e)
                        : tw == AMK_DTYPE_BF16 ? __uint_as_float(hb << 16)
                                               : __half2float(__ushort_as_half((unsigned short)hb));
            }
        }
        uint32_t top = 0u;
#pragma unroll
        for (int k = 0; k < 8; k++) top = max(top, __float_as_uint(y[k]) & 0x7FFFFFFFu);
        top = max(top, __shfl_xor_sync(0xFFFFFFFFu, top, 1));
        top = max(top, __shfl_xor_sync(0xFFFFFFFFu, top, 2)); /* the unit's largest */
        float d = 0.0f;
        uint32_t q2[2] = {0u, 0u};
        int sq = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int q = (int)amk_plan_x_q8(y[k], __uint_as_float(top), &d);
            q2[k >> 2] |= ((uint32_t)q & 0xFFu) << (8 * (k & 3));
            sq += q;
        }
        const int u = h >> 2; /* elements 8j .. 8j + 7 of unit u: bytes 8 (j & 1) of its half j >> 1 */
        *(uint2 *)(x8 + (((((u & 1) << 1) | (j >> 1)) * P2 + (u >> 1)) * 16 + 8 * (j & 1))) = make_uint2(q2[0], q2[1]);
        sq += __shfl_xor_sync(0xFFFFFFFFu, sq, 1); /* the half's sum */
        const int sa = sq + __shfl_xor_sync(0xFFFFFFFFu, sq, 2);
        if (j == 0) {
            xd[2 * u] = d;
            ((int *)xd)[2 * u + 1] = (sq & 0xFFFF) | (sa - sq) << 16;
        }
    }
    return ss;
}

/* The integer dots of a unit against x's q (xw: its 8 words, elements 4g .. 4g + 3 in word g), a
   unit at b in a slot. */
static __device__ __forceinline__ uint32_t amk_s32(const uint8_t *p) { return *(const uint32_t *)p; }
/* w[0 .. n) = the n 32-bit words at the even shared-memory address p (amk_blk_w32n's funnel). */
static __device__ __forceinline__ void amk_s32n(const uint8_t *p, uint32_t *w, const int n) {
    const uint8_t *a = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)3);
    const uint32_t sh = 8u * (uint32_t)((uintptr_t)p & 3u);
    uint32_t lo = amk_s32(a);
#pragma unroll
    for (int i = 0; i < n; i++) {
        const uint32_t hi = i + 1 < n || sh ? amk_s32(a + 4 * (i + 1)) : 0u;
        w[i] = __funnelshift_r(lo, hi, sh);
        lo = hi;
    }
}
static __device__ __forceinline__ float amk_s_f16(const uint8_t *p) {
    return __half2float(__ushort_as_half(*(const unsigned short *)p));
}
/* Unit uu (0 .. AMK_BLK_RING_UNITS - 1) of a chunk at slot, of format t in family fam (Q8_0 or the
   Q4_0 family, whose blocks are one unit; the K-quants decode by pairs, amk_blk_pair8), times x's
   unit: its q words xw, its d dx and its halves' sums of q sq. */
static __device__ __forceinline__ float amk_blk_unit8(const uint8_t *slot, const int fam, const int t, int uu,
                                                      const uint32_t *xw, float dx, int sq) {
    const int s0 = (int)(short)(sq & 0xFFFF), s1 = sq >> 16;
    int a = 0;
    switch (fam) {
    case AMK_DTYPE_Q8_0: {
        const uint8_t *b = slot + uu * 34;
        uint32_t q[8];
        int a1 = 0; /* why two sums: a chain of eight dependent dp4a waits out each one's latency */
        amk_s32n(b + 2, q, 8);
#pragma unroll
        for (int g = 0; g < 8; g += 2) {
            a = __dp4a((int)q[g], (int)xw[g], a);
            a1 = __dp4a((int)q[g + 1], (int)xw[g + 1], a1);
        }
        return amk_s_f16(b) * dx * (float)(a + a1);
    }
    default: { /* the Q4_0 family */
        const int m1 = t == AMK_DTYPE_Q4_1 || t == AMK_DTYPE_Q5_1, five = t == AMK_DTYPE_Q5_0 || t == AMK_DTYPE_Q5_1;
        const int B = t == AMK_DTYPE_Q4_0 ? 18 : t == AMK_DTYPE_Q4_1 ? 20 : t == AMK_DTYPE_Q5_0 ? 22 : 24;
        const uint8_t *b = slot + uu * B, *qw = b + (m1 ? 4 : 2) - (five ? 0 : 4);
        uint32_t q[5];
        q[0] = 0u;
        if (m1) {
#pragma unroll
            for (int i = 0; i < 5; i++)
                if (i > 0 || five) q[i] = amk_s32(qw + 4 * i);
        } else {
            if (five) amk_s32n(qw, q, 5);
            else amk_s32n(qw + 4, q + 1, 4);
        }
        int a1 = 0;
#pragma unroll
        for (int g = 0; g < 8; g++) {
            uint32_t w = (q[1 + (g & 3)] >> (g < 4 ? 0 : 4)) & 0x0F0F0F0Fu;
            if (five) {
                const uint32_t h = q[0] >> (4 * g);
                w |= ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
            }
            if (g & 1) a1 = __dp4a((int)w, (int)xw[g], a1);
            else a = __dp4a((int)w, (int)xw[g], a);
        }
        a += a1;
        const float d = amk_s_f16(b) * dx;
        return m1 ? fmaf(d, (float)a, amk_s_f16(b + 2) * dx * (float)(s0 + s1)) : d * (float)(a - (five ? 16 : 8) * (s0 + s1));
    }
    }
}

/* c + the dot of a's four unsigned bytes with b's four signed ones. */
static __device__ __forceinline__ int amk_dp4a_us(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
/* A unit's sum of q from its halves' (amk_blk_stage_x8's two int16). */
static __device__ __forceinline__ int amk_blk_sq(uint32_t sq) { return (int)(short)(sq & 0xFFFFu) + ((int)sq >> 16); }
/* Units 2p and 2p + 1 of a chunk at slot (a pair: p < 32 m), of format t in family fam, times x's
   units: their q words xa and xb (amk_blk_unit8's xw), and e = {d, halves' sums of q} of unit 2p,
   then of 2p + 1 (amk_blk_stage_x8's layout). why pairs: a K-quant's two adjacent units share their
   loads (Q4_K's sub-blocks 2c and 2c + 1 are the low and high nibbles of the same 32 bytes, under
   one header; Q6_K's k = 0, 1 or 2, 3 share their high bits), and their scales come from one
   word by branch-free selects, where a unit a lane decoded its scale's two cases as divergent
   branches: ~155 instructions a Q4_K unit (bench/NOTES.md session "pairs"). */
static __device__ __forceinline__ float amk_blk_pair8(const uint8_t *slot, const int fam, const int t, int p, const uint32_t *xa,
                                                      const uint32_t *xb, float4 e) {
    switch (fam) {
    case AMK_DTYPE_Q4_K: case AMK_DTYPE_Q5_K: { /* sub-blocks 2c, 2c + 1 (c = p & 3) of superblock p >> 2: the low
                                                   and high nibbles; Q5_K (its own family: a constant) their 5th bits */
        const int five = fam == AMK_DTYPE_Q5_K, c = p & 3;
        const uint8_t *b = slot + (p >> 2) * (five ? 176 : 144);
        const uint4 hd = *(const uint4 *)b;
        const uint4 q0 = *(const uint4 *)(b + (five ? 48 : 16) + 32 * c), q1 = *(const uint4 *)(b + (five ? 64 : 32) + 32 * c);
        uint4 h0 = make_uint4(0u, 0u, 0u, 0u), h1 = h0;
        if (five) { h0 = *(const uint4 *)(b + 16); h1 = *(const uint4 *)(b + 32); }
        /* the two sub-blocks' 6-bit scales and mins, as byte pairs: scales 2c, 2c + 1 (c < 2) are
           bytes 2c, 2c + 1 of the header's scales (mins at 4 on); for c >= 2, the low 4 bits from
           bytes 2c + 4, 2c + 5 and the top 2 from the top bits of bytes 2c - 4, 2c - 3 (mins: the
           high 4 bits, and the top bits of bytes 2c, 2c + 1) */
        const uint32_t sh = 16u * (uint32_t)(c & 1), Y = hd.y >> sh, Z = hd.z >> sh, Wd = hd.w >> sh;
        const uint32_t sc = c < 2 ? Y & 0x3F3Fu : (Wd & 0x0F0Fu) | ((Y >> 2) & 0x3030u);
        const uint32_t mn = c < 2 ? Z & 0x3F3Fu : ((Wd >> 4) & 0x0F0Fu) | ((Z >> 2) & 0x3030u);
        const float d = __half2float(__ushort_as_half((unsigned short)(hd.x & 0xFFFFu)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(hd.x >> 16)));
        const uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
        const uint32_t qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        int a0 = 0, a1 = 0;
#pragma unroll
        for (int g = 0; g < 8; g++) {
            if (five) {
                a0 = __dp4a((int)((qw[g] & 0x0F0F0F0Fu) | ((hw[g] >> (2 * c)) & 0x01010101u) << 4), (int)xa[g], a0);
                a1 = __dp4a((int)(((qw[g] >> 4) & 0x0F0F0F0Fu) | ((hw[g] >> (2 * c + 1)) & 0x01010101u) << 4), (int)xb[g], a1);
            } else { /* the high nibbles in place (16 q): unsigned bytes against x's signed ones */
                a0 = __dp4a((int)(qw[g] & 0x0F0F0F0Fu), (int)xa[g], a0);
                a1 = amk_dp4a_us(qw[g] & 0xF0F0F0F0u, xb[g], a1);
            }
        }
        if (!five) a1 >>= 4; /* exact: every term a multiple of 16 */
        const int sa = amk_blk_sq(__float_as_uint(e.y)), sb = amk_blk_sq(__float_as_uint(e.w));
        return d * fmaf(e.x, (float)((int)(sc & 0xFFu) * a0), e.z * (float)((int)(sc >> 8) * a1)) -
               dmin * fmaf(e.x, (float)((int)(mn & 0xFFu) * sa), e.z * (float)((int)(mn >> 8) * sb));
    }
    case AMK_DTYPE_Q6_K: { /* sub-blocks 2j, 2j + 1 (j = p & 3) of superblock p >> 2: n = j >> 1 and k = 2 (j & 1), + 1:
                              ql rows 64n and 64n + 32, nibble j & 1; qh row 32n, bits 2k and 2k + 2 */
        const int j = p & 3, n = j >> 1, hi = j & 1;
        const uint8_t *b = slot + (p >> 2) * 210, *ql = b + 64 * n, *qh = b + 128 + 32 * n;
        const uint32_t sca = *(const unsigned short *)(b + 192 + 8 * n + 4 * hi);
        const uint32_t scb = *(const unsigned short *)(b + 194 + 8 * n + 4 * hi);
        uint32_t wl[8], wm[8], wh[8];
        amk_s32n(ql, wl, 8);
        amk_s32n(ql + 32, wm, 8);
        amk_s32n(qh, wh, 8);
        int a0 = 0, a1 = 0, b0 = 0, b1 = 0; /* units 2j and 2j + 1, elements l < 16 and l >= 16 */
#pragma unroll
        for (int g = 0; g < 8; g++) {
            const int wa = (int)(((wl[g] >> (4 * hi)) & 0x0F0F0F0Fu) | (((wh[g] >> (4 * hi)) & 0x03030303u) << 4));
            const int wb = (int)(((wm[g] >> (4 * hi)) & 0x0F0F0F0Fu) | (((wh[g] >> (4 * hi + 2)) & 0x03030303u) << 4));
            if (g < 4) {
                a0 = __dp4a(wa, (int)xa[g], a0);
                b0 = __dp4a(wb, (int)xb[g], b0);
            } else {
                a1 = __dp4a(wa, (int)xa[g], a1);
                b1 = __dp4a(wb, (int)xb[g], b1);
            }
        }
        const uint32_t qa = __float_as_uint(e.y), qb = __float_as_uint(e.w);
        const int A = (int)(int8_t)(uint8_t)sca * (a0 - 32 * (int)(short)(qa & 0xFFFFu)) +
                      (int)(int8_t)(uint8_t)(sca >> 8) * (a1 - 32 * ((int)qa >> 16));
        const int B = (int)(int8_t)(uint8_t)scb * (b0 - 32 * (int)(short)(qb & 0xFFFFu)) +
                      (int)(int8_t)(uint8_t)(scb >> 8) * (b1 - 32 * ((int)qb >> 16));
        return amk_s_f16(b + 208) * fmaf(e.x, (float)A, e.z * (float)B);
    }
    default: /* Q8_0 and the Q4_0 family: blocks of one unit, decoded one by one */
        return amk_blk_unit8(slot, fam, t, 2 * p, xa, e.x, (int)__float_as_uint(e.y)) +
               amk_blk_unit8(slot, fam, t, 2 * p + 1, xb, e.z, (int)__float_as_uint(e.w));
    }
}

/* The warp's chunks [j, je) of one matrix (family fam, a constant), its row rr's dots into
   yo[rr] (lane 0); j counts across the gate and up, so the slot and phase follow from it. Returns
   je. */
static __device__ __forceinline__ void amk_blk_ring_mat(const amk_blk_src *src, const int fam, const int t, float *smem,
                                                       int S, int m, int64_t cb, int cpr, int T, int j, int je,
                                                       const uint8_t *x8, int UP, float *yo) {
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    char *ring = amk_blk_ring_base(smem, S, cb);
    uint64_t *bar = (uint64_t *)ring + warp * S;
    char *slots = ring + (int64_t)8 * nw * S + (int64_t)warp * S * cb;
    const uint4 *xv = (const uint4 *)x8;
    const float4 *xe = (const float4 *)(x8 + 32 * UP);
    const int P2 = cpr * m * (AMK_BLK_RING_UNITS / 2); /* a plane of x8's pieces (amk_blk_stage_x8) */
    float acc = 0.0f;
    int cc = 0, rr = 0, s = j % S;          /* the chunk within its row, the row, j's slot */
    uint32_t ph = (uint32_t)((j / S) & 1); /* and its phase */
    for (; j < je; j++) {
        const uint8_t *slot = (const uint8_t *)slots + s * cb;
        amk_ptx_mbar_wait(bar + s, ph);
#pragma unroll amk_blk_pair_unroll
        for (int pp = lane; pp < AMK_BLK_RING_UNITS / 2 * m; pp += 32) { /* the lane's pairs of units */
            const int P = cc * (AMK_BLK_RING_UNITS / 2) * m + pp;
            const uint4 a0 = xv[P], a1 = xv[P2 + P], b0 = xv[2 * P2 + P], b1 = xv[3 * P2 + P];
            const uint32_t xa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const uint32_t xb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            acc += amk_blk_pair8(slot, fam, t, pp, xa, xb, xe[P]);
        }
        __syncwarp();
        if (AMK_BLK_RING_ISSUER(lane) && j + S < T) AMK_BLK_RING_ISSUE(src, j + S, (char *)slot, bar + s, lane);
        if (++cc == cpr) {
            const float a = amk_warp_sum(acc);
            if (lane == 0) yo[rr] = a;
            acc = 0.0f;
            cc = 0;
            rr++;
        }
        if (++s == S) {
            s = 0;
            ph ^= 1u;
        }
    }
}
static __device__ __forceinline__ void amk_blk_ring_fam(const amk_blk_src *src, const amk_buffer_t *M, float *smem, int S,
                                                       int m, int64_t cb, int cpr, int T, int j, int je, const uint8_t *x8,
                                                       int UP, float *yo) {
    switch (M->dtype) {
    case AMK_DTYPE_Q8_0: amk_blk_ring_mat(src, AMK_DTYPE_Q8_0, M->dtype, smem, S, m, cb, cpr, T, j, je, x8, UP, yo); break;
    case AMK_DTYPE_Q4_0: case AMK_DTYPE_Q4_1: case AMK_DTYPE_Q5_0: case AMK_DTYPE_Q5_1:
        amk_blk_ring_mat(src, AMK_DTYPE_Q4_0, M->dtype, smem, S, m, cb, cpr, T, j, je, x8, UP, yo);
        break;
    case AMK_DTYPE_Q4_K: amk_blk_ring_mat(src, AMK_DTYPE_Q4_K, M->dtype, smem, S, m, cb, cpr, T, j, je, x8, UP, yo); break;
    case AMK_DTYPE_Q5_K: amk_blk_ring_mat(src, AMK_DTYPE_Q5_K, M->dtype, smem, S, m, cb, cpr, T, j, je, x8, UP, yo); break;
    default: amk_blk_ring_mat(src, AMK_DTYPE_Q6_K, M->dtype, smem, S, m, cb, cpr, T, j, je, x8, UP, yo); break;
    }
}
/* The tile's dots (every thread, x staged and the block synced): yb[r] = gate (or W) row n0 + r .
   x, yb[nt + r] the up's; then the ring's end. */
static __device__ __forceinline__ void amk_blk_ring(const amk_op_ctx *c, float *smem, int S, int m, const amk_buffer_t *W,
                                                    const amk_buffer_t *Wu, int64_t n0, int64_t nt, const uint8_t *x8,
                                                    float *yb) {
    const int64_t cb = amk_blk_ring_cb(W, Wu, m);
    const int cpr = c->ins.params.K / (32 * AMK_BLK_RING_UNITS * m), UP = AMK_BLK_UP(c->ins.params.K);
    int r0;
    const int Tm = amk_blk_ring_rows_of((int)nt, &r0) * cpr, T = Tm * (Wu ? 2 : 1);
    const amk_blk_src src = amk_blk_ring_src(W, Wu, n0 + r0, cpr, Tm, m);
    amk_blk_ring_fam(&src, W, smem, S, m, cb, cpr, T, 0, Tm, x8, UP, yb + r0);
    if (Wu) amk_blk_ring_fam(&src, Wu, smem, S, m, cb, cpr, T, Tm, T, x8, UP, yb + nt + r0);
    amk_blk_ring_end(smem, S, cb, T, T);
}
#endif /* AMK_BLK_RING */

/* RMSNORM_MLP's second half where its fifth input is W_down [H, N] in a block format, as stored
   (amk_blk_down): out[m, h] += sum_j ys[j] W_down[h, n0 + j] (+ resid[m, h], input ri when the
   op has ri + 1 inputs), its nt values ys (nt and n0 multiples of the block) staged into xq by
   units like x (amk_blk_put). A thread takes an output h: the dot of row h's K-slice [n0, n0 + nt)
   of whole blocks with them, unit by unit (amk_blk_unit, the row read from the slice's first
   block), added at L2; the same products as W_downT's rows (the reference VM's). why the quad
   decoder (amk_blk_unit's family Q2_K, which takes every format): a family's own decode here,
   beside the gate's and up's, took the VM past its registers (4-24 bytes of spills) */
static __device__ __forceinline__ void amk_blk_down_t(const amk_op_ctx *c, const float *xq, int64_t m, int64_t n0,
                                                      int64_t nt, int ri) {
    const amk_buffer_t *Wd = &c->in[4];
    const int64_t H = Wd->shape[0];
    const int t = Wd->dtype, N = (int)Wd->shape[1], U = (int)(nt / 32), UP = AMK_BLK_UP(nt), resid = c->ins.n_inputs == ri + 1;
    const int64_t off = n0 / amk_blk_elems(t) * amk_blk_bytes(t);
    float *out = (float *)c->out[0].ptr;
    for (int64_t h = (int64_t)amk_tid(); h < H; h += (int64_t)amk_ntid()) {
        const uint8_t *row = amk_blk_row(Wd, h, N) + off;
        float a = 0.0f;
#pragma unroll 1
        for (int u = 0; u < U; u++) a += amk_blk_unit(row, AMK_DTYPE_Q2_K, t, u, xq, UP);
        if (resid) a += amk_load((const void *)c->in[ri].ptr, c->in[ri].dtype, m * H + h);
        atomicAdd(out + m * H + h, a);
    }
}
/* ys's nt values into xq (every thread; the caller syncs before, when ys is complete, and after),
   then the adds above for row m of out. */
static __device__ __forceinline__ void amk_blk_down(const amk_op_ctx *c, float *xq, const float *ys, int64_t m, int64_t n0,
                                                    int64_t nt, int ri) {
    for (int64_t k = (int64_t)amk_tid(); k < nt; k += (int64_t)amk_ntid()) amk_blk_put(xq, AMK_BLK_UP(nt), (int)k, ys[k]); /* why
        warp-uniform: nt and the block's threads are multiples of 32 */
    __syncthreads();
    amk_blk_down_t(c, xq, m, n0, nt, ri);
}

#define AMK_OP_FN static __device__

#define AMK_OPS_TID ((int64_t)amk_tid())
#define AMK_OPS_NT ((int64_t)amk_ntid())

/* ==== >>ops: the instructions, in opcode order ================================================ */

/* NOP. */
AMK_OP_FN void amk_op_nop(amk_op_ctx *c, float *smem) {
    (void)c;
    (void)smem;
}

#if AMK_VM_PREFILL
/* 8 elements of out (F32, BF16 or F16) from v, stored as 32 or 16 bytes at element i. */
static __device__ __forceinline__ void amk_copy_store8(const amk_buffer_t *o, int64_t i, const float *v) {
    if (o->dtype == AMK_DTYPE_F32) {
        float4 *d = (float4 *)((float *)o->ptr + i);
        d[0] = make_float4(v[0], v[1], v[2], v[3]);
        d[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            w[k] = o->dtype == AMK_DTYPE_BF16 ? amk_pack_bf16x2(v[2 * k], v[2 * k + 1])
                                              : (uint32_t)__half_as_ushort(__float2half_rn(v[2 * k])) |
                                                    (uint32_t)__half_as_ushort(__float2half_rn(v[2 * k + 1])) << 16;
        *(uint4 *)((uint16_t *)o->ptr + i) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

/* The float of a small unsigned integer q (< 2^23) minus bias, exactly (float)((int)q - bias): 2^23 + q
   by its bits, less 2^23 + bias. why: the convert instruction issues at a quarter of the FP32 rate,
   and the K-quants' decode converts every element (bench/NOTES.md session "embed") */
static __device__ __forceinline__ float amk_u2f_bias(uint32_t q, float bias) {
    return __fsub_rn(__uint_as_float(0x4B000000u | q), 8388608.0f + bias);
}
/* Elements e..e+7 (e a multiple of 8) of a block of format t in shared memory (a constant), equal
   to two amk_blk_quad_at(x, t, e (+4), w, 1): the K-quants read their scale and quants once for
   the eight (Q4_K and Q5_K blocks 16-byte aligned: whole units, amk_copy_blk_ring), the other
   formats as two quads. */
static __device__ __forceinline__ void amk_blk_oct_sh(const uint8_t *x, const int t, int e, float *w) {
    if (t == AMK_DTYPE_Q4_K || t == AMK_DTYPE_Q5_K) { /* chunk c of 64: low nibbles sub-block 2c, high 2c + 1 */
        const int five = t == AMK_DTYPE_Q5_K, c = e >> 6, h = (e >> 5) & 1, l = e & 31, s = 2 * c + h;
        float sc, mn;
        amk_blk_k4_scale_min_at(x + 4, s, &sc, &mn, 1);
        const float dd = __fmul_rn(amk_blk_ldf16(x, 1), sc), mm = __fmul_rn(amk_blk_ldf16(x + 2, 1), mn);
        const uint2 u = *(const uint2 *)(x + (five ? 48 : 16) + 32 * c + l);
        const uint2 qh = five ? *(const uint2 *)(x + 16 + l) : make_uint2(0u, 0u);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t a = (i < 4 ? u.x : u.y) >> (8 * (i & 3) + 4 * h), b = (i < 4 ? qh.x : qh.y) >> (8 * (i & 3) + s);
            w[i] = __fsub_rn(__fmul_rn(dd, amk_u2f_bias((a & 0xFu) | (b & 1u) << 4, 0.0f)), mm);
        }
    } else if (t == AMK_DTYPE_Q6_K) { /* e = 128n + 32k + l: nibble k / 2 of ql[64n + 32(k % 2) + l], bits 2k of qh[32n + l] */
        const int n = e >> 7, k = (e >> 5) & 3, l = e & 31;
        const float ds = __fmul_rn(amk_blk_ldf16(x + 208, 1), (float)(int8_t)(uint8_t)amk_blk_ld8(x + 192 + 8 * n + l / 16 + 2 * k, 1));
        const uint8_t *ql = x + 64 * n + 32 * (k & 1) + l, *qh = x + 128 + 32 * n + l; /* (2-byte aligned: 210-byte blocks) */
        const uint32_t u[2] = {amk_blk_ld32(ql, 1), amk_blk_ld32(ql + 4, 1)}, v[2] = {amk_blk_ld32(qh, 1), amk_blk_ld32(qh + 4, 1)};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t q = ((u[i >> 2] >> (8 * (i & 3) + 4 * (k >> 1))) & 0xFu) | ((v[i >> 2] >> (8 * (i & 3) + 2 * k)) & 3u) << 4;
            w[i] = __fmul_rn(ds, amk_u2f_bias(q, 32.0f));
        }
    } else {
        amk_blk_quad_at(x, t, e, w, 1);
        amk_blk_quad_at(x, t, e + 4, w + 4, 1);
    }
}

/* Elements [e, n) of COPY's out from its block-format x of format t (a constant in each inlined
   copy, so that its decode is straight-line code), where they start 16-byte aligned in x: their
   blocks through a ring of bulk copies (AMK_COPY_SLOT bytes a slot, up to 4 slots of the shared
   memory: the count measured, run 411; more were not tried), each slot whole units of lcm(16, block bytes) (so every copy is 16-byte aligned and
   sized); the threads decode a slot's groups of 8 elements (two quads of one block: blocks are 32
   or 256 elements) as the reference VM decodes them, store them as 16 or 32 bytes, and the slot
   takes the chunk S on. Returns where it stopped: the blocks after the last whole unit (fewer than
   one unit's), or all of [e, n) when x is not aligned or the shared memory holds no two slots, are
   the caller's. why a ring: a thread's own loads of a block's few bytes wait out their latency
   one group at a time (~1.5 TB/s read and written, bench/RESULTS.md run 407); bytes in flight in
   shared memory do not take registers (the VM is at its cap). */
static __device__ __forceinline__ int64_t amk_copy_blk_ring(const amk_op_ctx *c, float *smem, const int t, int64_t e, int64_t n) {
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const int tid = amk_tid(), nt = amk_ntid();
    const int E = amk_blk_elems(t), B = amk_blk_bytes(t), lg = __ffs(E) - 1;
    const int L = B * 16 / ((B & -B) < 16 ? (B & -B) : 16), u = L / B; /* a unit: L bytes, u blocks */
    const int64_t pb = (int64_t)(AMK_COPY_SLOT / L) * u, nr = ((n - e) >> lg) / u * u; /* blocks a slot, the ring's */
    const char *src = (const char *)x->ptr + (e >> lg) * B;
    /* shared memory: the slots' mbarriers in the first 128 bytes, then the slots (16-byte aligned,
       as bulk copies need). why - 2048: amk_gemm_tma's reserve (its mbarriers, row scales and
       alignment); the ring needs 128 of it, and 6 slots fit either way, of which it takes 4 */
    const int64_t avail = (int64_t)amk_ptx_dynamic_smem_size() - 2048;
    const int S = avail / AMK_COPY_SLOT >= 4 ? 4 : (int)(avail / AMK_COPY_SLOT);
    if (S < 2 || nr == 0 || ((uintptr_t)src & 15)) return e;
    const int64_t nch = (nr + pb - 1) / pb;
    uint64_t *bar = (uint64_t *)smem;
    char *ring = (char *)smem + 128;
    if (tid == 0) {
        for (int k = 0; k < S; k++) amk_ptx_mbar_init(bar + k, 1);
        amk_ptx_fence_mbar_init();
    }
    amk_ptx_fence_proxy_async_smem(); /* why: the ring was last written through the generic proxy */
    __syncthreads();
    if (tid == 0)
        for (int64_t j = 0; j < S && j < nch; j++) {
            const uint32_t bytes = (uint32_t)((nr - j * pb < pb ? nr - j * pb : pb) * B);
            amk_ptx_mbar_arrive_expect(bar + j, bytes);
            amk_ptx_bulk_copy_weights(ring + j * AMK_COPY_SLOT, src + j * pb * B, bytes, bar + j);
            amk_ptx_bulk_commit(bar + j);
        }
    uint32_t s = 0, ph = 0;
    for (int64_t j = 0; j < nch; j++) {
        const int64_t cnt = nr - j * pb < pb ? nr - j * pb : pb, base = e + ((j * pb) << lg);
        const uint8_t *slot = (const uint8_t *)ring + s * AMK_COPY_SLOT;
        amk_ptx_mbar_wait(bar + s, ph);
        for (int64_t g = tid; g < (cnt << lg) / 8; g += nt) {
            const int64_t el = 8 * g;
            const uint8_t *blk = slot + (el >> lg) * B;
            float v[8];
            amk_blk_oct_sh(blk, t, (int)(el & (E - 1)), v);
            amk_copy_store8(o, base + el, v);
        }
        __syncthreads(); /* why: every thread is done with the slot before it takes the next chunk */
        if (tid == 0 && j + S < nch) {
            const int64_t b0 = (j + S) * pb;
            const uint32_t bytes = (uint32_t)((nr - b0 < pb ? nr - b0 : pb) * B);
            amk_ptx_mbar_arrive_expect(bar + s, bytes);
            amk_ptx_bulk_copy_weights(ring + s * AMK_COPY_SLOT, src + b0 * B, bytes, bar + s);
            amk_ptx_bulk_commit(bar + s);
        }
        if (++s == (uint32_t)S) {
            s = 0;
            ph ^= 1u;
        }
    }
    if (tid == 0)
        for (int k = 0; k < S; k++)
            asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"((uint32_t)__cvta_generic_to_shared(bar + k)) : "memory");
    return e + (nr << lg);
}

/* Elements [e, n) of COPY's out from its block-format x of format t (a constant): the ring
   (amk_copy_blk_ring) where it takes them, the rest by the threads' own loads, a group of 8
   elements a thread at a time, decoded and stored as there. */
static __device__ __forceinline__ void amk_copy_blk(const amk_op_ctx *c, float *smem, const int t, int64_t e, int64_t n) {
    const amk_buffer_t *x = &c->in[0];
    const int E = amk_blk_elems(t), B = amk_blk_bytes(t), lg = __ffs(E) - 1;
    e = amk_copy_blk_ring(c, smem, t, e, n);
    for (e += 8 * (int64_t)amk_tid(); e < n; e += 8 * (int64_t)amk_ntid()) {
        const uint8_t *blk = (const uint8_t *)x->ptr + (e >> lg) * B;
        float v[8];
        amk_blk_quad(blk, t, (int)(e & (E - 1)), v);
        amk_blk_quad(blk, t, (int)(e & (E - 1)) + 4, v + 4);
        amk_copy_store8(&c->out[0], e, v);
    }
}

/* COPY's rows [m_off, m_off + M_tile) (amk_ir.h), or all of out, from a block-format x
   (dequantized: a prefill chunk's matrix for its tensor-core tiles, amk_copy_blk) or a float one.
   Only the prefill image runs them (amk_plan_prefill_only), out of the VM's line (amk_prefill_ops).
   Returns 0 for a COPY it does not take. */
static __device__ __forceinline__ int amk_copy_rows(amk_op_ctx *c, float *smem) {
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const int xt = x->dtype, ot = o->dtype;
    if (c->ins.params.M_tile <= 0 && !amk_dtype_blk(xt)) return 0;
    const int64_t row = c->ins.params.M_tile > 0 ? o->numel / o->shape[0] : 0;
    const int64_t e0 = row ? c->ins.params.m_off * row : 0;
    const int64_t n = row ? (c->ins.params.m_off + (int64_t)c->ins.params.M_tile) * row : o->numel;
    switch (xt) {
#define AMK__COPY_BLK(t) case t: amk_copy_blk(c, smem, t, e0, n); break;
    AMK__COPY_BLK(AMK_DTYPE_Q8_0) AMK__COPY_BLK(AMK_DTYPE_Q4_0) AMK__COPY_BLK(AMK_DTYPE_Q4_1) AMK__COPY_BLK(AMK_DTYPE_Q5_0)
    AMK__COPY_BLK(AMK_DTYPE_Q5_1) AMK__COPY_BLK(AMK_DTYPE_Q2_K) AMK__COPY_BLK(AMK_DTYPE_Q3_K) AMK__COPY_BLK(AMK_DTYPE_Q4_K)
    AMK__COPY_BLK(AMK_DTYPE_Q5_K) AMK__COPY_BLK(AMK_DTYPE_Q6_K) AMK__COPY_BLK(AMK_DTYPE_IQ4_NL)
#undef AMK__COPY_BLK
    default:
        for (int64_t i = e0 + AMK_OPS_TID; i < n; i += AMK_OPS_NT)
            amk_store((void *)o->ptr, ot, i, amk_load((const void *)x->ptr, xt, i));
        break;
    }
    return 1;
}
#endif

#if AMK_VM_PREFILL
static __device__ __noinline__ int amk_prefill_ops(amk_op_ctx *c, float *smem); /* below */
#endif

/* COPY: out = x, cast (the prefill image's rows and block-format x: amk_copy_rows; the prefill
   image's amk_op_dispatch also sends its tasks for amk_prefill_ops here). */
AMK_OP_FN void amk_op_copy(amk_op_ctx *c, float *smem) {
    (void)smem;
#if AMK_VM_PREFILL
    if (amk_prefill_ops(c, smem)) return;
#endif
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const void *xp = (const void *)x->ptr;
    void *op = (void *)o->ptr;
    int64_t i, n = o->numel;
    if (x->dtype == o->dtype && x->dtype != AMK_DTYPE_I4) { /* same bytes: copy 16 at a time */
        int64_t nb = n * (o->dtype == AMK_DTYPE_F32 || o->dtype == AMK_DTYPE_I32 ? 4
                          : o->dtype == AMK_DTYPE_F16 || o->dtype == AMK_DTYPE_BF16 ? 2 : 1);
        const uint4 *s4 = (const uint4 *)xp;
        uint4 *d4 = (uint4 *)op;
        for (i = AMK_OPS_TID; i < nb / 16; i += AMK_OPS_NT) d4[i] = s4[i];
        for (i = nb / 16 * 16 + AMK_OPS_TID; i < nb; i += AMK_OPS_NT)
            ((uint8_t *)op)[i] = ((const uint8_t *)xp)[i];
        return;
    }
    for (i = AMK_OPS_TID; i < n; i += AMK_OPS_NT) amk_store(op, o->dtype, i, amk_load(xp, x->dtype, i));
}

/* FILL: out = scale everywhere (the start of an accumulation). */
AMK_OP_FN void amk_op_fill(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *o = &c->out[0];
    int64_t i;
    for (i = AMK_OPS_TID; i < o->numel; i += AMK_OPS_NT) amk_store((void *)o->ptr, o->dtype, i, c->ins.params.scale);
}

/* Row r of out = row id of a block-format table of H-element rows (whole blocks: the validator's
   rule), a quad a thread. */
static __device__ __forceinline__ void amk_embed_blk_row(const amk_buffer_t *tab, int64_t id, const amk_buffer_t *o, int64_t r,
                                                      int64_t H) {
    const int t = tab->dtype, E = amk_blk_elems(t), B = amk_blk_bytes(t);
    const uint8_t *src = amk_blk_row(tab, id, (int)H);
    for (int64_t q = AMK_OPS_TID; q < H / 4; q += AMK_OPS_NT) {
        float v[4];
        amk_blk_quad(src + (4 * q / E) * B, t, (int)(4 * q % E), v);
#pragma unroll
        for (int i = 0; i < 4; i++) amk_store((void *)o->ptr, o->dtype, r * H + 4 * q + i, v[i]);
    }
}

/* EMBED: out[r, :] = table[ids[r], :]; an id outside [0, V) is a run-time error. Each row's id
   is read once, then the row is copied in 16-byte pieces when table and out have one dtype and a
   row is a whole number of pieces (the decode step: a bf16 row of H = 2048 is one piece a thread
   at 512 threads). why: an id load before every element's load would make the step's first op a
   chain of 2 round trips an element a thread (bench/RESULTS.md run 58). */
AMK_OP_FN void amk_op_embed(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *ids = &c->in[0], *tab = &c->in[1], *o = &c->out[0];
    /* a row: the table's numel / V elements, as the validator's amk__check_embed (V >= 1) */
    const int64_t V = tab->shape[0], H = tab->numel / V, n_ids = ids->numel;
    const int w = amk_dtype_width(o->dtype); /* bits an element */
    const int pieces = tab->dtype == o->dtype && w >= 8 && H * (w / 8) % 16 == 0;
    const int nc = tab->kind == AMK_KIND_WEIGHT || tab->kind == AMK_KIND_CONST; /* read-only: no-allocate loads */
    const int blk = amk_dtype_blk(tab->dtype);
#if AMK_VM_PREFILL /* with M_tile (the prefill image's: amk_plan_prefill_only) ids [m_off, m_off + M_tile) alone */
    const int64_t r0 = c->ins.params.M_tile > 0 ? c->ins.params.m_off : 0;
    const int64_t r1 = c->ins.params.M_tile > 0 ? r0 + c->ins.params.M_tile : n_ids;
#else
    const int64_t r0 = 0, r1 = n_ids;
#endif
    for (int64_t r = r0; r < r1; r++) {
        const int64_t id = amk_load_int((const void *)ids->ptr, ids->dtype, r); /* every thread: one value */
        if (id < 0 || id >= V) {
            if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_EMBED_ID, id);
            return;
        }
        if (blk) {
            amk_embed_blk_row(tab, id, o, r, H);
        } else if (pieces) {
            const int64_t n16 = H * (w / 8) / 16;
            const uint4 *src = (const uint4 *)((const char *)tab->ptr + id * H * (w / 8));
            uint4 *dst = (uint4 *)((char *)o->ptr + r * H * (w / 8));
            for (int64_t i = AMK_OPS_TID; i < n16; i += AMK_OPS_NT) dst[i] = nc ? amk_ptx_ld_nc_na_v4(src + i) : src[i];
        } else {
            for (int64_t h = AMK_OPS_TID; h < H; h += AMK_OPS_NT)
                amk_store((void *)o->ptr, o->dtype, r * H + h, amk_load((const void *)tab->ptr, tab->dtype, id * H + h));
        }
    }
}

/* RMSNORM per row of `hidden`: out = x * (1/sqrt(mean(x^2) + eps)) * w, row r of x with w's row
   r % (w's rows) (a w of one row: every row's). */
AMK_OP_FN void amk_op_rmsnorm(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *x = &c->in[0], *w = &c->in[1], *o = &c->out[0];
    int64_t H = c->ins.params.hidden, w_rows = w->numel / H, r, k;
    /* rows [m_off, m_off + M_tile) with M_tile, else all (a row of the output is one of hidden) */
    const int64_t r0 = c->ins.params.M_tile > 0 ? c->ins.params.m_off : 0;
    const int64_t r1 = c->ins.params.M_tile > 0 ? r0 + c->ins.params.M_tile : x->numel / H;
    float eps = c->ins.params.eps;
    for (r = r0; r < r1; r++) {
        float ss = 0.0f, inv, v[AMK_EW_ILP], wv[AMK_EW_ILP];
        int j;
        const void *xr = (const void *)x->ptr;
        const int64_t w0 = (w_rows == 1 ? 0 : r % w_rows) * H; /* this row's weights */
        for (k = AMK_OPS_TID; k < H; k += AMK_EW_ILP * AMK_OPS_NT) {
            amk_load_ilp(xr, x->dtype, r * H + k, AMK_OPS_NT, r * H + H, v);
#pragma unroll
            for (j = 0; j < AMK_EW_ILP; j++) ss += v[j] * v[j];
        }
        ss = amk_block_sum(c, ss);
        inv = 1.0f / sqrtf(ss / (float)H + eps);
        for (k = AMK_OPS_TID; k < H; k += AMK_EW_ILP * AMK_OPS_NT) {
            amk_load_ilp(xr, x->dtype, r * H + k, AMK_OPS_NT, r * H + H, v);
            amk_load_ilp((const void *)w->ptr, w->dtype, w0 + k, AMK_OPS_NT, w0 + H, wv);
#pragma unroll
            for (j = 0; j < AMK_EW_ILP; j++)
                if (k + j * AMK_OPS_NT < H)
                    amk_store((void *)o->ptr, o->dtype, r * H + k + j * AMK_OPS_NT, v[j] * inv * wv[j]);
        }
    }
}

/* LAYERNORM per row of `hidden`: (x - mean) / sqrt(var + eps) * w (+ b), population variance; row
   r of x with row r % (their rows) of w and b. */
AMK_OP_FN void amk_op_layernorm(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *x = &c->in[0], *w = &c->in[1], *o = &c->out[0];
    const amk_buffer_t *b = c->ins.n_inputs > 2 ? &c->in[2] : 0;
    int64_t H = c->ins.params.hidden, rows = x->numel / H, w_rows = w->numel / H, b_rows = b ? b->numel / H : 1, r, k;
    float eps = c->ins.params.eps;
    for (r = 0; r < rows; r++) {
        const int64_t w0 = (w_rows == 1 ? 0 : r % w_rows) * H, b0 = (b_rows == 1 ? 0 : r % b_rows) * H;
        float s = 0.0f, mean, var, den;
        for (k = AMK_OPS_TID; k < H; k += AMK_OPS_NT) s += amk_load((const void *)x->ptr, x->dtype, r * H + k);
        mean = amk_block_sum(c, s) / (float)H;
        s = 0.0f;
        for (k = AMK_OPS_TID; k < H; k += AMK_OPS_NT) {
            float d = amk_load((const void *)x->ptr, x->dtype, r * H + k) - mean;
            s += d * d;
        }
        var = amk_block_sum(c, s) / (float)H;
        den = sqrtf(var + eps); /* why: divide, as the reference does (bit-for-bit elementwise) */
        for (k = AMK_OPS_TID; k < H; k += AMK_OPS_NT) {
            float v = (amk_load((const void *)x->ptr, x->dtype, r * H + k) - mean) / den *
                      amk_load((const void *)w->ptr, w->dtype, w0 + k);
            if (b) v += amk_load((const void *)b->ptr, b->dtype, b0 + k);
            amk_store((void *)o->ptr, o->dtype, r * H + k, v);
        }
    }
}

/* ---- GEMV / GEMM tiles -------------------------------------------------------------------------
   out[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for n in [n_off, n_off + N_tile) and the rows m
   of the tile; nothing else of out is written. x rows are staged in shared memory as fp32
   (AMK_GEMV_ROWS at a time); each warp owns output columns n (strided by the warp count), streams
   W's row with 16-byte no-allocate loads when the dtype and alignment allow, and reduces with
   shuffles. Quantized weights (qdtype 6 = I8, 7 = I4 packed) dequantize (q - zero) * scale on
   the fly, only for the tile's rows. AMK_GEMV_INFLIGHT 16-byte loads are in flight a lane. Every
   GEMV tile of a decode step has one row (AMK_GEMV_ROWS 1: the unrolled loops hold no unused
   rows' code); a tile of AMK_MMA_MIN_ROWS rows and more takes the tensor cores instead. */

/* n / d for the row counts of a tile (M = x's numel / K, a row's length = numel / M). why not
   n / d: a 64-bit division is ~20 dependent instructions on every warp of every task, and the
   decode step's tiles have one row, so the quotient is n or 1 (bench/NOTES.md session "setup"). */
static __device__ __forceinline__ int64_t amk_div_rows(int64_t n, int64_t d) {
    return d == 1 ? n : n == d ? 1 : n / d;
}

/* Rows of per_row floats that fit in avail floats of shared memory, at most AMK_GEMV_ROWS (why
   the test first: see amk_div_rows). */
static __device__ __forceinline__ int64_t amk_rows_fit(int64_t avail, int64_t per_row) {
    return avail >= AMK_GEMV_ROWS * per_row ? AMK_GEMV_ROWS : avail / per_row;
}

/* acc[r] += sum_j w[j] * xs[r*K + k0 + j] for the rows r < mr of the staged block. */
#define AMK__GEMV_FMA(ACC, W, NW, XS, K, K0, MR) do { \
    _Pragma("unroll") for (int r_ = 0; r_ < AMK_GEMV_ROWS; r_++) { \
        if (r_ < (MR)) { \
            const float *xr_ = (XS) + (int64_t)r_ * (K) + (K0); \
            float a_ = (ACC)[r_]; \
            _Pragma("unroll") for (int j_ = 0; j_ < (NW); j_++) a_ = fmaf((W)[j_], xr_[j_], a_); \
            (ACC)[r_] = a_; \
        } \
    } } while (0)

/* One pass of a 16-byte-vector weight row wrow (bytes) for a dtype with VEC elements per vector
   into the accumulators acc; UNPACK turns a uint4 into VEC floats. The lane's vectors start at
   k = lane*VEC and step 32*VEC; the loads of AMK_GEMV_INFLIGHT vectors are issued before any is
   used, the last batch too (K is a multiple of VEC: the caller's fast-path condition). */
#define AMK__GEMV_VEC_ROW(UNPACK, VEC, acc, wrow) do { \
    const int step_ = 32 * (VEC); \
    /* why one predicated loop, not full batches plus a tail: the tail (rows of K = 576 or 1536 \
       are all tail) needs the batch too, so one copy of the batch code serves both \
       (bench/RESULTS.md run 21: with the FP8 change below, SmolLM2 -2.4%, 8B and 1B unchanged) */ \
    for (int k0_ = lane * (VEC); k0_ < K; k0_ += AMK_GEMV_INFLIGHT * step_) { \
        uint4 raw_[AMK_GEMV_INFLIGHT]; \
        _Pragma("unroll") for (int u_ = 0; u_ < AMK_GEMV_INFLIGHT; u_++) \
            raw_[u_] = k0_ + u_ * step_ < K ? amk_ld_v4(wrow + (int64_t)(k0_ + u_ * step_) * esz, w_nc) \
                                            : make_uint4(0u, 0u, 0u, 0u); \
        _Pragma("unroll") for (int u_ = 0; u_ < AMK_GEMV_INFLIGHT; u_++) { \
            if (k0_ + u_ * step_ < K) { \
                float w_[VEC]; \
                UNPACK(raw_[u_], w_); \
                AMK__GEMV_FMA(acc, w_, VEC, xs, K, k0_ + u_ * step_, mr); \
            } \
        } \
    } } while (0)

/* RMSNORM_SWIGLU's gate row wrow into acc and up row urow into acu. why: a short row (K at most
   AMK_GEMV_INFLIGHT/2 vectors a lane: SmolLM2's 576) would wait a load latency for the gate
   row, then one for the up row; here both rows' loads go out in one batch. */
#define AMK__GEMV_VEC_PAIR(UNPACK, VEC, acc, wrow, acu, urow) do { \
    const int hs_ = 32 * (VEC), kb_ = lane * (VEC); \
    if (K <= (AMK_GEMV_INFLIGHT / 2) * hs_) { \
        uint4 rg_[AMK_GEMV_INFLIGHT / 2], ru_[AMK_GEMV_INFLIGHT / 2]; \
        _Pragma("unroll") for (int u_ = 0; u_ < AMK_GEMV_INFLIGHT / 2; u_++) { \
            const int k_ = kb_ + u_ * hs_; \
            rg_[u_] = k_ < K ? amk_ld_v4(wrow + (int64_t)k_ * esz, w_nc) : make_uint4(0u, 0u, 0u, 0u); \
            ru_[u_] = k_ < K ? amk_ld_v4(urow + (int64_t)k_ * esz, w_nc) : make_uint4(0u, 0u, 0u, 0u); \
        } \
        _Pragma("unroll") for (int u_ = 0; u_ < AMK_GEMV_INFLIGHT / 2; u_++) { \
            if (kb_ + u_ * hs_ < K) { \
                float w_[VEC]; \
                UNPACK(rg_[u_], w_); \
                AMK__GEMV_FMA(acc, w_, VEC, xs, K, kb_ + u_ * hs_, mr); \
                UNPACK(ru_[u_], w_); \
                AMK__GEMV_FMA(acu, w_, VEC, xs, K, kb_ + u_ * hs_, mr); \
            } \
        } \
    } else { \
        AMK__GEMV_VEC_ROW(UNPACK, VEC, acc, wrow); \
        AMK__GEMV_VEC_ROW(UNPACK, VEC, acu, urow); \
    } } while (0)

/* 16 bytes of a buffer: the no-allocate read-only path for read-only kinds (nc != 0), else a
   coherent load (an activation used as a weight may be written during the launch). */
static __device__ __forceinline__ uint4 amk_ld_v4(const void *p, int nc) {
    return nc ? amk_ptx_ld_nc_na_v4(p) : *(const uint4 *)p;
}

static __device__ __forceinline__ void amk_unpack_f32x4(uint4 r, float *w) {
    w[0] = __uint_as_float(r.x); w[1] = __uint_as_float(r.y);
    w[2] = __uint_as_float(r.z); w[3] = __uint_as_float(r.w);
}

/* Scale and zero of quantized weight (n, k): group g = k / group of row n. */
static __device__ __forceinline__ float amk_q_dequant(float q, const amk_buffer_t *sc,
                                                     const amk_buffer_t *zr, int64_t gi) {
    float s = amk_load((const void *)sc->ptr, sc->dtype, gi);
    float z = zr ? amk_load((const void *)zr->ptr, zr->dtype, gi) : 0.0f;
    return (q - z) * s;
}

/* xs[i] = x[base + i] for i < n (times w[i], a K-element vector, when w is given): f32/bf16 x
   (with an f32 w) in 16-byte loads of 8 contiguous elements a thread, other dtypes 8 loads in
   flight per thread (why: a tile's x staging sits on its critical path; one element at a time it
   costs a load latency per element a thread stages: 8 for K = 4096, 28 for 14336). Returns the
   thread's sum of x^2 over the elements it staged. The caller syncs before reading xs. */
#define AMK_STAGE_ILP 8
static __device__ __forceinline__ float amk_stage_x(float *xs, const amk_buffer_t *x, int64_t base, int64_t n,
                                                    const amk_buffer_t *w) {
    const int64_t tid = AMK_OPS_TID, nt = AMK_OPS_NT; /* why: once; AMK_OPS_* re-read per use */
    float ss = 0.0f;
    /* why: 8 contiguous elements a thread in 16-byte loads: a row of K = 4096 in one round of loads
       at 512 threads, where the strided path below takes a round per 8 elements a thread (on the
       H100 under a saturated memory system a round takes about 2 us) */
    if ((x->dtype == AMK_DTYPE_F32 || x->dtype == AMK_DTYPE_BF16) && (!w || w->dtype == AMK_DTYPE_F32) &&
        base % 8 == 0 && n % 8 == 0) {
        for (int64_t i0 = tid * 8; i0 < n; i0 += nt * 8) {
            float v[8], f[8];
            if (x->dtype == AMK_DTYPE_F32) {
                const uint4 *p = (const uint4 *)((const float *)x->ptr + base + i0);
                amk_unpack_f32x4(p[0], v);
                amk_unpack_f32x4(p[1], v + 4);
            } else {
                amk_unpack_bf16x8(*(const uint4 *)((const uint16_t *)x->ptr + base + i0), v);
            }
            if (w) {
                const uint4 *q = (const uint4 *)((const float *)w->ptr + i0);
                amk_unpack_f32x4(q[0], f);
                amk_unpack_f32x4(q[1], f + 4);
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                ss = fmaf(v[u], v[u], ss);
                xs[i0 + u] = w ? v[u] * f[u] : v[u];
            }
        }
        return ss;
    }
    for (int64_t i0 = tid; i0 < n; i0 += AMK_STAGE_ILP * nt) {
        float v[AMK_STAGE_ILP], f[AMK_STAGE_ILP];
        if (x->dtype == AMK_DTYPE_BF16) {
            const uint16_t *p = (const uint16_t *)x->ptr + base;
#pragma unroll
            for (int u = 0; u < AMK_STAGE_ILP; u++) {
                const int64_t i = i0 + u * nt;
                v[u] = i < n ? __uint_as_float((uint32_t)p[i] << 16) : 0.0f;
            }
        } else if (x->dtype == AMK_DTYPE_F32) {
            const float *p = (const float *)x->ptr + base;
#pragma unroll
            for (int u = 0; u < AMK_STAGE_ILP; u++) {
                const int64_t i = i0 + u * nt;
                v[u] = i < n ? p[i] : 0.0f;
            }
        } else {
#pragma unroll
            for (int u = 0; u < AMK_STAGE_ILP; u++) {
                const int64_t i = i0 + u * nt;
                v[u] = i < n ? amk_load((const void *)x->ptr, x->dtype, base + i) : 0.0f;
            }
        }
        if (w && w->dtype == AMK_DTYPE_F32) {
#pragma unroll
            for (int u = 0; u < AMK_STAGE_ILP; u++) {
                const int64_t i = i0 + u * nt;
                f[u] = i < n ? ((const float *)w->ptr)[i] : 0.0f;
            }
        } else {
#pragma unroll
            for (int u = 0; u < AMK_STAGE_ILP; u++) {
                const int64_t i = i0 + u * nt;
                f[u] = w && i < n ? amk_load((const void *)w->ptr, w->dtype, i) : 1.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < AMK_STAGE_ILP; u++) {
            const int64_t i = i0 + u * nt;
            if (i < n) { ss = fmaf(v[u], v[u], ss); xs[i] = v[u] * f[u]; }
        }
    }
    return ss;
}

/* 1 when a GEMV/GEMM tile's weights are I8/I4 with scales (input 2; zeros 3), not W as is. */
static __device__ __forceinline__ int amk_gemv_quant(const amk_op_ctx *c) {
    return (c->ins.params.qdtype == AMK_DTYPE_I8 || c->ins.params.qdtype == AMK_DTYPE_I4) && c->ins.n_inputs >= 3;
}

/* ---- GEMM on the tensor cores: GEMV/GEMM tiles with several rows ------------------------------
   out[m, n] = x[m, :] . W[n, :] (+ bias[n]) for rows [m_begin, m_end) and columns [n_off, n_off +
   N_tile), with wgmma m64n64k16: each warpgroup owns a 64-column block of W, the block's x rows
   come 64 at a time, K in chunks of AMK_MMA_KC. A ring of chunks (x raw, and each warpgroup's W
   block) is in flight through cp.async while the tensor cores work on the oldest one.
   Numerics: products of bf16 (or f16) operands are exact and accumulate in f32. W is used as
   stored; x is exact when it has W's dtype, and an f32 (or f16 with bf16 W) x is split into two
   bf16 terms x = hi + lo (two MMAs), which leaves |x - hi - lo| <= 2^-17 |x|: within the f32
   tolerance of the reference's sum (IR_SPEC_NOTES "What each opcode computes"). */
#if AMK_MMA_KC < 64
#error "AMK_MMA_KC must be >= 64: the epilogue stages 64 x 32 floats in a warpgroup's 64 x KC bf16 W stage"
#endif
#define AMK_MMA_KB (AMK_MMA_KC / 8) /* 16-byte units along K in a chunk row */

/* Row in its 64-row tile, and K elements from the chunk's start, of 16-byte unit u of a tile. */
static __device__ __forceinline__ int amk_mma_row(int u) { return u / (8 * AMK_MMA_KB) * 8 + (u & 7); }
static __device__ __forceinline__ int amk_mma_kofs(int u) { return 8 * ((u >> 3) % AMK_MMA_KB); }

/* Shared-memory descriptor of a 64 x KC K-major operand tile without swizzle: core matrices of 8
   rows x 16 bytes, 128 contiguous bytes each; the next one along K at +128 bytes (leading byte
   offset), the next 8 rows at +KC*16 (stride byte offset); bits per REFERENCE.md §5.4. Unit u
   (16 bytes) of a tile holds row u / (8 KB) * 8 + u % 8, K elements 8 * (u / 8 % KB) on (KB = KC/8):
   8 consecutive units are one core matrix, so a warp's 16-byte stores hit every bank once. */
static __device__ __forceinline__ uint64_t amk_mma_desc(const void *tile) {
    const uint64_t a = (uint64_t)__cvta_generic_to_shared(tile);
    return ((a >> 4) & 0x3FFFull) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)((AMK_MMA_KC * 16) >> 4) << 32);
}

/* The ring's stage count (2..AMK_MMA_STAGES) for this launch's shared memory; 0: fewer than two
   stages fit, or the operands are not ones the path takes. */
static __device__ __forceinline__ int amk_mma_stages(const amk_op_ctx *c, int quant) {
    const amk_buffer_t *x = &c->in[0], *W = &c->in[1];
    const int xt = x->dtype, wt = W->dtype, nt = amk_ntid();
    const int64_t xsz = xt == AMK_DTYPE_F32 ? 4 : 2;
    const int64_t stage = AMK_MMA_STAGE_BYTES(xsz, nt >> 7);
    int64_t s;
    if (quant || c->ins.params.K % 8 != 0 || nt % 128 != 0 || nt > 512) return 0; /* 512: amk_ptx_bar_warpgroup */
    if (!(wt == AMK_DTYPE_BF16 && (xt == AMK_DTYPE_F32 || xt == AMK_DTYPE_BF16 || xt == AMK_DTYPE_F16)) &&
        !(wt == AMK_DTYPE_F16 && xt == AMK_DTYPE_F16))
        return 0;
    s = ((int64_t)amk_ptx_dynamic_smem_size() - (xt == wt ? 0 : 2 * AMK_MMA_TILE)) / stage; /* + the split x */
    return s < 2 ? 0 : s > AMK_MMA_STAGES ? AMK_MMA_STAGES : (int)s;
}

/* Issues the cp.async copies of chunk ck (K elements ck*KC on) into ring stage raw: x rows m0 +
   0..63 (all threads) and the calling warpgroup's W rows nb + 0..63 (its 128 threads); units past
   m_end, n_end or K are zero-filled. One commit group, empty past the last chunk. */
static __device__ __forceinline__ void amk_mma_issue(char *raw, const amk_buffer_t *x, const amk_buffer_t *W,
                                                     int ck, int nck, int64_t K, int64_t m0, int64_t m_end,
                                                     int64_t nb, int64_t n_end, int xsz, int tid, int nt) {
    if (ck < nck) {
        const int tw = tid & 127;
        const int64_t k0 = (int64_t)ck * AMK_MMA_KC;
        char *bt = raw + AMK_MMA_X_BYTES(xsz) + (tid >> 7) * AMK_MMA_TILE;
        for (int u = tid; u < 64 * AMK_MMA_KC / 8; u += nt) {
            const int64_t m = m0 + amk_mma_row(u), k = k0 + amk_mma_kofs(u);
            const int ok = m < m_end && k < K;
            const char *src = (const char *)x->ptr + (ok ? (m * K + k) * xsz : 0);
            amk_ptx_cp_async_16_zfill(raw + u * 8 * xsz, src, ok ? 16u : 0u);
            if (xsz == 4) amk_ptx_cp_async_16_zfill(raw + u * 32 + 16, src + (ok ? 16 : 0), ok ? 16u : 0u);
        }
        if (nb < n_end)
            for (int u = tw; u < 64 * AMK_MMA_KC / 8; u += 128) {
                const int64_t n = nb + amk_mma_row(u), k = k0 + amk_mma_kofs(u);
                const int ok = n < n_end && k < K;
                amk_ptx_cp_async_16_zfill(bt + u * 16, (const char *)W->ptr + (ok ? (n * K + k) * 2 : 0), ok ? 16u : 0u);
            }
    }
    amk_ptx_cp_async_commit();
}

/* why: the calling warpgroup's 128 threads only: named barrier 1 + group (0 is __syncthreads;
   constant ids, so that ptxas reserves 5 barriers, not all 16). At most 4 groups (512 threads). */
static __device__ __forceinline__ void amk_ptx_bar_warpgroup(void) {
    switch (amk_tid() >> 7) {
    case 0: asm volatile("bar.sync 1, 128;" ::: "memory"); break;
    case 1: asm volatile("bar.sync 2, 128;" ::: "memory"); break;
    case 2: asm volatile("bar.sync 3, 128;" ::: "memory"); break;
    default: asm volatile("bar.sync 4, 128;" ::: "memory"); break;
    }
}

/* Writes a warpgroup's 64 x 64 accumulator tile d (rows m0.., columns nb..) to out, + bias, in
   two halves of 32 columns through buf (8 KB of the group's own, free, W stage): one copy of the
   dtype-generic store in a loop, not 32 inlined ones. D fragment (REFERENCE.md §5.4): warp w of
   the group, lane l holds d[4j + e] at row 16w + l/4 + 8(e >> 1), column 8j + 2(l % 4) + (e & 1). */
static __device__ __forceinline__ void amk_mma_epilogue(amk_op_ctx *c, const float *d, float *buf, int64_t m0,
                                                        int64_t m_end, int64_t nb, int64_t n_end, int64_t N_out) {
    const amk_buffer_t *o = &c->out[0], *bias = c->ins.n_inputs > 2 ? &c->in[2] : 0;
    const int tw = amk_tid() & 127, w4 = tw >> 5, lane = tw & 31;
#pragma unroll
    for (int half = 0; half < 2; half++) {
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                buf[(16 * w4 + (lane >> 2) + 8 * (e >> 1)) * 32 + 8 * j + 2 * (lane & 3) + (e & 1)] = d[16 * half + 4 * j + e];
        amk_ptx_bar_warpgroup();
        for (int i = tw; i < 64 * 32; i += 128) {
            const int64_t m = m0 + (i >> 5), n = nb + 32 * half + (i & 31);
            if (m < m_end && n < n_end)
                amk_store((void *)o->ptr, o->dtype, m * N_out + n,
                          buf[i] + (bias ? amk_load((const void *)bias->ptr, bias->dtype, n) : 0.0f));
        }
        amk_ptx_bar_warpgroup(); /* why: buf is rewritten (next half) or re-filled by cp.async (next block) */
    }
}

/* ---- the tensor-copy GEMM (AMK_FORM_GEMM_TMA) ---------------------------------------------------
   out[m, n] = x[m, :] . W[n, :] (+ bias[n]) over blocks of AMK_TMA_BM x AMK_TMA_BN (amk_plan.h), x
   and W 16-bit (bf16 or f16, the same), K in chunks of AMK_TMA_BK. Thread 0 fills a ring of S
   stages by tensor copies (the task's maps: x's box of 128 rows, W's of 256, 128-byte swizzle);
   stage s's copies complete on full[s]. Warpgroup g computes rows 64 (g & 1).., columns
   128 (g >> 1).. of the block with wgmma m64n128k16 straight from the stage, keeping one chunk's
   MMAs in flight; once its MMAs of a chunk are done it arrives on empty[s], and thread 0 refills
   the stage when all four have. Rows and columns past the tensors read as zero (the maps' bounds);
   rows past the tile's are computed and not stored. The epilogue stages each warpgroup's 64 x 128
   f32 sums in the ring and stores them row by row (coalesced), + bias, in the output's dtype.
   Numerics: exact products of the 16-bit operands, f32 sums (as amk_gemm_mma's direct path).
   Only the prefill image (AMK_VM_PREFILL, gpu.mk) holds it. */
#ifndef AMK_VM_PREFILL
#define AMK_VM_PREFILL 0
#endif
#if AMK_GEMM_TMA && AMK_VM_PREFILL
/* RMSNORM_GEMV's RoPE and position rules (defined with the fused tiles, below) */
static __device__ float amk_rope_inv_freq(const amk_params_t *P, int i);
static __device__ __forceinline__ int amk_fused_pos_bad(const amk_buffer_t *o, int kv_row, int64_t pos, int64_t N);

/* Descriptor of a K-major 16-bit operand tile with 128-byte swizzle (rows of 64 elements = 128
   bytes; amk_wg_desc). +16 K elements: start + 32 bytes. */
static __device__ __forceinline__ uint64_t amk_tma_desc(uint32_t saddr) {
    return amk_wg_desc(saddr, 16);
}

/* Thread 0: chunk ck's copies (x rows m0.., W rows n0.., K from ck * BK) into the stage at
   shared address st, completing on the mbarrier at bar. W in nw boxes of AMK_TMA_WBOX rows (2: the
   block's AMK_TMA_BN columns; 1: a narrow block's half). */
static __device__ __forceinline__ void amk_tma_issue(const amk_op_ctx *c, uint32_t st, uint32_t bar, int ck, int m0, int n0,
                                                     const int nw) {
    const uint64_t map = c->maps;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"((uint32_t)((AMK_TMA_BM + AMK_TMA_WBOX * nw) * AMK_TMA_BK * 2)) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(st), "l"(map), "r"(ck * AMK_TMA_BK), "r"(m0), "r"(bar) : "memory");
    for (int j = 0; j < nw; j++)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(st + (AMK_TMA_BM + AMK_TMA_WBOX * j) * AMK_TMA_BK * 2), "l"(map + 128u), "r"(ck * AMK_TMA_BK),
                        "r"(n0 + AMK_TMA_WBOX * j), "r"(bar) : "memory");
}
/* amk_tma_wait: waits until the phase of parity par of the mbarrier at shared address bar has
   completed; amk_tma_arrive: one arrival on it. */
static __device__ __forceinline__ void amk_tma_wait(uint32_t bar, uint32_t par) {
    uint32_t done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(par) : "memory");
    } while (!done);
}
static __device__ __forceinline__ void amk_tma_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

/* An RMSNORM_GEMV tile's x chunk ck in its stage (shared address st: 128 rows of 64 16-bit
   elements, 128-byte swizzle), the calling warpgroup pair's half of it: the 64 rows its MMAs read
   (half = wg & 1; warpgroups 0 and 2 share the first half, 1 and 3 the second). Each element times
   its column's norm weight (F32, input 1), in place, and each thread's squares of the raw values
   into ss[0..1]. Thread p of the pair (0..255) takes rows r = 64 half + p / 8 (amk_tma_norm_row)
   and r + 32, the 16-byte unit p % 8 of each; a unit's columns are 8 (p % 8 ^ r % 8) on (the swizzle), the same
   for both rows (32 apart), so one load of the weights serves both. Columns past K hold zeros (the
   map's bounds) and stay zero. */
static __device__ __forceinline__ int amk_tma_norm_row(int tid) {
    return 64 * ((tid >> 7) & 1) + 16 * (tid >> 8) + ((tid & 127) >> 3);
}
static __device__ __forceinline__ void amk_tma_norm_chunk(const amk_op_ctx *c, uint32_t st, int ck, const int f16, float *ss) {
    const int tid = amk_tid(), u = tid & 7, r0 = amk_tma_norm_row(tid);
    const int64_t K = c->ins.params.K, k = (int64_t)ck * AMK_TMA_BK + 8 * (u ^ (r0 & 7));
    const float *g = (const float *)c->in[1].ptr;
    float w[8];
    if (k < K) {
        const float4 g0 = *(const float4 *)(g + k), g1 = *(const float4 *)(g + k + 4);
        w[0] = g0.x; w[1] = g0.y; w[2] = g0.z; w[3] = g0.w; w[4] = g1.x; w[5] = g1.y; w[6] = g1.z; w[7] = g1.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) w[e] = 0.0f;
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t a = st + (uint32_t)((r0 + 32 * h) * 8 + u) * 16;
        uint32_t q[4];
        float v[8];
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(a));
        if (f16) amk_unpack_f16x8(make_uint4(q[0], q[1], q[2], q[3]), v);
        else amk_unpack_bf16x8(make_uint4(q[0], q[1], q[2], q[3]), v);
#pragma unroll
        for (int e = 0; e < 8; e++) ss[h] = fmaf(v[e], v[e], ss[h]);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float lo = v[2 * e] * w[2 * e], hi = v[2 * e + 1] * w[2 * e + 1];
            q[e] = f16 ? amk_pack_f16x2(lo, hi) : amk_pack_bf16x2(lo, hi);
        }
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(a), "r"(q[0]), "r"(q[1]), "r"(q[2]), "r"(q[3]) : "memory");
    }
}

/* One block's K loop: d = the calling warpgroup's 64 x 64 nw sums (NW, a constant: 2 for a block of
   AMK_TMA_BN columns, m64n128 MMAs; 1 for a narrow block of AMK_TMA_WBOX, m64n64). Shared
   addresses: ring (stage s at ring + s * AMK_TMA_STAGE), bars (full[s] at bars + 8 s, empty[s] at bars + 8 (S + s)). it: the
   ring's chunks before this block in the task (chunk g's stage is g % S, its phase (g / S) & 1,
   counted from it's).
   F16: a constant in each inlined copy (one loop each, no branch around the MMAs). NORM (an
   RMSNORM_GEMV tile, a constant too): x's chunks are scaled by the norm weight first, the squares
   summed into ss (amk_tma_norm_chunk), and a block barrier before the MMAs. why so few
   values: everything live across this loop shares the 128 registers with the 64 sums. */
static __device__ __forceinline__ void amk_tma_block(const amk_op_ctx *c, float *d, uint32_t ring, uint32_t bars,
                                                     uint32_t it, int nk, int S, int m0, int n0, const int f16,
                                                     const int norm, const int nw, float *ss) {
    const int tid = amk_tid(), wg = __shfl_sync(0xFFFFFFFFu, tid >> 7, 0);
    const uint32_t a_off = (uint32_t)(wg & 1) * 64 * 128, b_off = AMK_TMA_BM * 128 + (uint32_t)(wg >> 1) * 64 * nw * 128;
    /* chunk t's stage s and phase ph, the previous chunk's sp and php. why counted, not it + t's
       % S and / S: S is known at run time only, and those divisions were a quarter of the loop's
       stall samples (bench/RESULTS.md run 402) */
    uint32_t s = it % (uint32_t)S, ph = (it / (uint32_t)S) & 1u, sp = 0, php = 0;
    if (tid == 0)
        for (uint32_t t = 0, q = s; t < (uint32_t)S && t < (uint32_t)nk; t++, q = q + 1 == (uint32_t)S ? 0 : q + 1)
            amk_tma_issue(c, ring + q * (uint32_t)AMK_TMA_STAGE, bars + 8 * q, (int)t, m0, n0, nw);
    for (int t = 0; t < nk; t++) {
        const uint32_t st = ring + s * (uint32_t)AMK_TMA_STAGE;
        const uint64_t da = amk_tma_desc(st + a_off), db = amk_tma_desc(st + b_off);
        amk_tma_wait(bars + 8 * s, ph);
        if (norm) { /* x's chunk times the norm weight, in place; its squares into ss */
            amk_tma_norm_chunk(c, st, t, f16, ss);
            amk_ptx_fence_proxy_async_smem(); /* the MMAs read what the threads wrote */
            /* the pair that shares the half (barriers 1 and 2 of 256 threads; the epilogue's
               warpgroup barriers 1..4 of 128 come after the block's barrier) */
            asm volatile("bar.sync %0, 256;" :: "r"(1 + (wg & 1)) : "memory");
        }
        amk_ptx_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < AMK_TMA_BK / 16; kk++) {
            if (nw == 2) amk_ptx_wgmma_m64n128k16(d, da + 2 * kk, db + 2 * kk, t > 0 || kk > 0, f16);
            else amk_ptx_wgmma_m64n64k16(d, da + 2 * kk, db + 2 * kk, t > 0 || kk > 0, f16);
        }
        amk_ptx_wgmma_commit();
        amk_ptx_wgmma_wait_1(); /* chunk t - 1's MMAs are done: its stage is free of this warpgroup */
        if (t > 0) {
            if ((tid & 127) == 0) amk_tma_arrive(bars + 8 * (S + sp));
            if (tid == 0 && t - 1 + S < nk) { /* every warpgroup's arrival, then the stage's next chunk */
                amk_tma_wait(bars + 8 * (S + sp), php);
                amk_tma_issue(c, ring + sp * (uint32_t)AMK_TMA_STAGE, bars + 8 * sp, t - 1 + S, m0, n0, nw);
            }
        }
        sp = s;
        php = ph;
        if (++s == (uint32_t)S) {
            s = 0;
            ph ^= 1u;
        }
    }
    amk_ptx_wgmma_wait_all();
    if ((tid & 127) == 0) amk_tma_arrive(bars + 8 * (S + sp)); /* sp: the last chunk's stage */
}

/* sin and cos of a RoPE angle a (radians) for a 16-bit output: a reduced by 2 pi in two parts
   (Cody-Waite: j 2pi exact in the fma for |a| < 2^24), then the SFU's __sincosf on [-pi, pi]
   (absolute error ~4e-7 there; the float angle itself is off by up to half an ulp of a). why not
   sincosf: ~40 instructions and a slow path a value, in an epilogue of 64 values a thread, whose
   outputs round to 16 bits (~4e-3) */
static __device__ __forceinline__ void amk_sincos_rope(float a, float *s, float *c) {
    const float j = rintf(a * 0.159154943091895336f);
    const float r = fmaf(-j, -1.74845553e-7f, fmaf(-j, 6.28318548202514648f, a));
    __sincosf(r, s, c);
}

/* A block's epilogue: the warpgroup's sums d through its staging (64 rows of AMK_TMA_EPI_LD floats
   at st), then its rows [m0 + 64 (g & 1), +64) below m_end, columns n0 + cw (g >> 1) + 0..cw-1 (cw =
   64 nw: 128, or a narrow block's 64), a column a thread (narrow: every other row), + bias, into
   the output. rs: an RMSNORM_GEMV tile's row scales (the block's
   128 rows; NULL for GEMV/GEMM), then its RoPE and cache rows as amk_norm_gemv_body's epilogue. */
static __device__ __forceinline__ void amk_tma_epilogue(const amk_op_ctx *c, const float *d, float *ring, int m0, int n0,
                                                        int64_t m_end, const float *rs, const int nw) {
    /* why volatile: read here, not hoisted out of the blocks' loop, where they would stay live across
       the K loop beside the 64 sums */
    const volatile amk_op_ctx *v = c;
    const int tid = amk_tid(), wg = tid >> 7, tw = tid & 127, w4 = tw >> 5, lane = tw & 31;
    const int64_t K = v->ins.params.K, N_out = amk_div_rows(v->out[0].numel, amk_div_rows(v->in[0].numel, K));
    const int64_t n_end = (int64_t)v->ins.params.n_off + v->ins.params.N_tile, mb = m0 + 64 * (wg & 1);
    const int cw = 64 * nw, ci = tw & (cw - 1), r0 = tw / cw, rstep = 128 / cw; /* a thread's column and first row */
    const int64_t n = n0 + cw * (wg >> 1) + ci;
    float *st = ring + wg * 64 * AMK_TMA_EPI_LD, *sp = st + (16 * w4 + (lane >> 2)) * AMK_TMA_EPI_LD + 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < 64; i += 2) /* d[i], d[i + 1]: row + 8 ((i >> 1) & 1), columns 8 (i >> 2) + 0..1 */
        if (i < 32 * nw) *(float2 *)(sp + 8 * ((i >> 1) & 1) * AMK_TMA_EPI_LD + 8 * (i >> 2)) = make_float2(d[i], d[i + 1]);
    amk_ptx_bar_warpgroup();
    if (n < n_end && !rs) {
        void *out = (void *)v->out[0].ptr;
        const int odt = v->out[0].dtype;
        const float bv = v->ins.n_inputs > 2 ? amk_load((const void *)v->in[2].ptr, v->in[2].dtype, n) : 0.0f;
        /* why a loop a dtype: amk_store's switch in the loop is one branch a value */
        if (odt == AMK_DTYPE_BF16) {
            for (int r = r0; r < 64 && mb + r < m_end; r += rstep)
                ((__nv_bfloat16 *)out)[(mb + r) * N_out + n] = __float2bfloat16_rn(st[r * AMK_TMA_EPI_LD + ci] + bv);
        } else if (odt == AMK_DTYPE_F16) {
            for (int r = r0; r < 64 && mb + r < m_end; r += rstep)
                ((__half *)out)[(mb + r) * N_out + n] = __float2half_rn(st[r * AMK_TMA_EPI_LD + ci] + bv);
        } else if (odt == AMK_DTYPE_F32) {
            for (int r = r0; r < 64 && mb + r < m_end; r += rstep) ((float *)out)[(mb + r) * N_out + n] = st[r * AMK_TMA_EPI_LD + ci] + bv;
        } else {
            for (int r = r0; r < 64 && mb + r < m_end; r += rstep) amk_store(out, odt, (mb + r) * N_out + n, st[r * AMK_TMA_EPI_LD + ci] + bv);
        }
    } else if (rs) { /* RMSNORM_GEMV: the rows' norms, RoPE on pairs (n, n ^ 1), the cache row pos[m] */
        void *out = (void *)v->out[0].ptr;
        const int odt = v->out[0].dtype;
        const uint32_t fl = (uint32_t)v->ins.params.flags;
        const int rope = (fl & AMK_GEMV_FLAG_ROPE) != 0, kv_row = (fl & AMK_GEMV_FLAG_KV_ROW) != 0;
        const int64_t N = v->in[2].shape[0], last = kv_row ? N : amk_div_rows(v->out[0].numel, amk_div_rows(v->in[0].numel, K));
        const float inv = rope ? amk_rope_inv_freq(&c->ins.params, (int)((n % v->ins.params.head_dim) / 2)) : 0.0f;
        /* read once, not through the volatile view a row */
        const void *pp = (const void *)v->in[3].ptr;
        const int pdt = v->in[3].dtype, tiled = v->ins.params.M_tile > 0;
        const float *rsh = rs + 64 * (wg & 1);
        /* the warpgroup's 64 rows' positions: lane l reads and checks rows l and l + 32 (a KV form's
           tile of rows, M_tile, takes consecutive positions, pos[0] + m: amk_ir.h), and the row loop
           takes them by shuffles, the checks by ballots. why: read and checked for every value
           (64 rows a thread), they made the epilogue 38 of the q/k/v tile's 112 us, where an o
           tile's plain one takes 3.4 (bench/RESULTS.md runs 509-510). Every lane takes part (the
           shuffles); a lane past the tile's columns stores nothing. */
        int64_t pa = 0, pb = 0;
        int bad_a = 0, bad_b = 0;
        if (rope || kv_row) {
            const int64_t p0 = kv_row && tiled ? amk_load_int(pp, pdt, 0) : 0;
            if (mb + lane < m_end) {
                pa = amk_load_int(pp, pdt, mb + lane);
                bad_a = amk_fused_pos_bad(&c->out[0], kv_row, pa, N) || (kv_row && tiled && pa != p0 + mb + lane);
            }
            if (mb + 32 + lane < m_end) {
                pb = amk_load_int(pp, pdt, mb + 32 + lane);
                bad_b = amk_fused_pos_bad(&c->out[0], kv_row, pb, N) || (kv_row && tiled && pb != p0 + mb + 32 + lane);
            }
        }
        const uint32_t bad[2] = {__ballot_sync(0xFFFFFFFFu, bad_a), __ballot_sync(0xFFFFFFFFu, bad_b)};
        for (int r = r0; r < 64 && mb + r < m_end; r += rstep) {
            const int64_t m = mb + r, pos = __shfl_sync(0xFFFFFFFFu, r < 32 ? pa : pb, r & 31);
            float y = st[r * AMK_TMA_EPI_LD + ci] * rsh[r];
            if (rope) {
                const float p = st[r * AMK_TMA_EPI_LD + (ci ^ 1)] * rsh[r];
                float sf, cf;
                amk_sincos_rope((float)pos * inv, &sf, &cf);
                y = (n & 1) ? y * cf + p * sf : y * cf - p * sf;
            }
            if (n >= n_end) continue;
            const int64_t e = kv_row ? pos * N + n : m * last + n;
            if ((bad[r >> 5] >> (r & 31)) & 1u) amk_op_fail((amk_op_ctx *)c, kv_row ? AMK_VM_ERR_KV_POS : AMK_VM_ERR_ROPE_POS, pos);
            else if (odt == AMK_DTYPE_BF16) ((__nv_bfloat16 *)out)[e] = __float2bfloat16_rn(y);
            else if (odt == AMK_DTYPE_F16) ((__half *)out)[e] = __float2half_rn(y);
            else amk_store(out, odt, e, y);
        }
    }
}

/* GEMV/GEMM tile rows [m_begin, m_end) in the tensor-copy form (the host planned it: operands,
   maps and shared memory; amk_plan_gemm_tma). Blocks go in order of rows, then columns. why
   inlined (one call, amk_op_dispatch): out of line, ptxas serialised its MMAs (a wait after each
   wgmma; AMK_GEMM_TRY_MMA says why) */
static __device__ __forceinline__ void amk_gemm_tma(amk_op_ctx *c, float *smem, int64_t m_begin, int64_t m_end) {
    const int tid = amk_tid();
    const int nk = (int)((c->ins.params.K + AMK_TMA_BK - 1) / AMK_TMA_BK);
    const int64_t avail = (int64_t)amk_ptx_dynamic_smem_size() - 2048;
    const int S = avail / AMK_TMA_STAGE >= AMK_GEMM_TMA_STAGES ? AMK_GEMM_TMA_STAGES : (int)(avail / AMK_TMA_STAGE);
    const int norm = c->ins.op == AMK_OP_RMSNORM_GEMV; /* x's rows normalised: W is input 2 */
    /* shared memory: the mbarriers, an RMSNORM_GEMV tile's row scales, the ring (1024-aligned) */
    const uint32_t bars = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t ring = (bars + 2 * AMK_GEMM_TMA_STAGES * 8 + AMK_TMA_BM * 4 + 1023) / 1024 * 1024;
    float *rs = (float *)((char *)smem + 2 * AMK_GEMM_TMA_STAGES * 8);
    if (tid == 0) {
        for (int s = 0; s < 2 * S; s++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bars + 8 * s), "r"(s < S ? 1 : 4) : "memory");
        amk_ptx_fence_mbar_init();
    }
    /* why: the ring's memory was last written by other ops through the generic proxy, and the
       tensor copies write it through the async proxy */
    amk_ptx_fence_proxy_async_smem();
    if (amk_op_go(c)) { /* its barrier also publishes the mbarriers' init */
        AMK_OP_MARK(c, 0); /* the inputs complete */
        /* a tile of at most AMK_TMA_WBOX columns in narrow blocks (the host gives a phase such
           tiles when its wide blocks would not cover the SMs) */
        const int nw = c->ins.params.N_tile <= AMK_TMA_WBOX ? 1 : 2, bn = AMK_TMA_WBOX * nw;
        const int nn = (int)((c->ins.params.N_tile + bn - 1) / bn);
        const int nb = (int)((m_end - m_begin + AMK_TMA_BM - 1) / AMK_TMA_BM) * nn;
        if (tid == 0) amk_ptx_fence_proxy_async_global(); /* x was written by other SMs' generic stores */
        for (int b = 0; b < nb; b++) {
            const int m0 = (int)m_begin + b / nn * AMK_TMA_BM, n0 = c->ins.params.n_off + b % nn * bn;
            float d[64], ss[2] = {0.0f, 0.0f};
            if (norm && c->in[2].dtype == AMK_DTYPE_F16 && nw == 2) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 1, 1, 2, ss);
            else if (norm && c->in[2].dtype == AMK_DTYPE_F16) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 1, 1, 1, ss);
            else if (norm && nw == 2) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 0, 1, 2, ss);
            else if (norm) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 0, 1, 1, ss);
            else if (c->in[1].dtype == AMK_DTYPE_F16 && nw == 2) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 1, 0, 2, ss);
            else if (c->in[1].dtype == AMK_DTYPE_F16) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 1, 0, 1, ss);
            else if (nw == 2) amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 0, 0, 2, ss);
            else amk_tma_block(c, d, ring, bars, (uint32_t)(b * nk), nk, S, m0, n0, 0, 0, 1, ss);
            if (b == 0) AMK_OP_MARK(c, 1); /* the first block's K loop done */
            if (norm) { /* a row's squares are its 8 threads' (amk_tma_norm_chunk's rows): 1 / rms, as amk__ref_rms_inv */
                const int r0 = amk_tma_norm_row(tid);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    ss[h] += __shfl_xor_sync(0xFFFFFFFFu, ss[h], 1);
                    ss[h] += __shfl_xor_sync(0xFFFFFFFFu, ss[h], 2);
                    ss[h] += __shfl_xor_sync(0xFFFFFFFFu, ss[h], 4);
                    if ((tid & 7) == 0) rs[r0 + 32 * h] = 1.0f / sqrtf(ss[h] / (float)c->ins.params.K + c->ins.params.eps);
                }
            }
            __syncthreads(); /* why: every warpgroup's MMAs have read the ring, which the epilogue reuses */
            if (nw == 2) amk_tma_epilogue(c, d, (float *)((char *)smem + (ring - bars)), m0, n0, m_end, norm ? rs : NULL, 2);
            else amk_tma_epilogue(c, d, (float *)((char *)smem + (ring - bars)), m0, n0, m_end, norm ? rs : NULL, 1);
            __syncthreads(); /* why: the ring takes the next block's copies */
            if (b == 0) AMK_OP_MARK(c, 2); /* its epilogue done */
        }
        AMK_OP_MARK(c, 3); /* every block */
    }
    if (tid == 0)
        for (int s = 0; s < 2 * S; s++) asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(bars + 8 * s) : "memory");
}
#endif /* AMK_GEMM_TMA && AMK_VM_PREFILL */

/* Rows [m_begin, m_end) of a GEMV/GEMM tile on the tensor cores; returns 0, having done nothing,
   when the operands or the shared memory do not suit (the rows path then runs). why __noinline__:
   one copy out of the VM's op loop, so it does not move the decode GEMVs' code (bench/RESULTS.md
   run 36). */
static __device__ __noinline__ int amk_gemm_mma(amk_op_ctx *c, float *smem, int64_t m_begin, int64_t m_end) {
    const int stages = amk_mma_stages(c, amk_gemv_quant(c));
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *x = &c->in[0], *W = &c->in[1], *o = &c->out[0];
    const int64_t K = P->K, M = amk_div_rows(x->numel, K), N_out = amk_div_rows(o->numel, M);
    const int64_t n_begin = P->n_off, n_end = (int64_t)P->n_off + P->N_tile;
    const int xt = x->dtype, f16 = W->dtype == AMK_DTYPE_F16, xsz = xt == AMK_DTYPE_F32 ? 4 : 2;
    const int direct = xt == W->dtype; /* x's chunk is already the A operand: no split */
    /* why tid/nt once: this runs out of line, so nothing is held across the VM's loop */
    const int tid = amk_tid(), nt = amk_ntid(), wg = tid >> 7, nwg = nt >> 7;
    const int64_t a_bytes = AMK_MMA_X_BYTES(xsz), stage_bytes = AMK_MMA_STAGE_BYTES(xsz, nwg);
    const int nck = (int)((K + AMK_MMA_KC - 1) / AMK_MMA_KC);
    char *ring = (char *)smem, *a_hi = ring + stages * stage_bytes, *a_lo = a_hi + AMK_MMA_TILE; /* a_*: !direct */
    if (stages == 0) return 0;
    if (!amk_op_go(c)) return 1;
    for (int64_t m0 = m_begin; m0 < m_end; m0 += 64) {
        for (int64_t nr = n_begin; nr < n_end; nr += 64 * (int64_t)nwg) {
            const int64_t nb = nr + 64 * (int64_t)wg; /* this warpgroup's columns */
            int s_use = 0, s_fill = stages - 1, s_last = 0; /* ring stages of chunk ck and of chunk ck + stages - 1 */
            float d[32];
#pragma unroll
            for (int i = 0; i < 32; i++) d[i] = 0.0f;
            __syncthreads(); /* why: the last block's MMAs (other warpgroups) may still read the ring */
            for (int s = 0; s + 1 < stages; s++)
                amk_mma_issue(ring + s * stage_bytes, x, W, s, nck, K, m0, m_end, nb, n_end, xsz, tid, nt);
            for (int ck = 0; ck < nck; ck++) {
                char *raw = ring + s_use * stage_bytes;
                const char *bt = raw + a_bytes + wg * AMK_MMA_TILE;
                amk_ptx_cp_async_wait_pending(stages - 2); /* chunks ck+1 .. ck+stages-2 stay in flight */
                if (direct) amk_ptx_fence_proxy_async_smem(); /* the copies are the MMA's operands */
                /* why: every thread's copies of chunk ck are in, and every warpgroup's MMAs of chunk
                   ck-1 are done, so that chunk's stage takes chunk ck+stages-1 */
                __syncthreads();
                amk_mma_issue(ring + s_fill * stage_bytes, x, W, ck + stages - 1, nck, K, m0, m_end, nb, n_end, xsz,
                              tid, nt);
                if (!direct) { /* x (f32, or f16 under bf16 W) -> bf16 hi + lo */
                    for (int u = tid; u < 64 * AMK_MMA_KC / 8; u += nt) {
                        float v[8];
                        uint32_t hi[4], lo[4];
                        if (xt == AMK_DTYPE_F32) {
                            amk_unpack_f32x4(((const uint4 *)(raw + u * 32))[0], v);
                            amk_unpack_f32x4(((const uint4 *)(raw + u * 32))[1], v + 4);
                        } else {
                            amk_unpack_f16x8(*(const uint4 *)(raw + u * 16), v);
                        }
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            const float h0 = __bfloat162float(__float2bfloat16_rn(v[2 * j]));
                            const float h1 = __bfloat162float(__float2bfloat16_rn(v[2 * j + 1]));
                            hi[j] = amk_pack_bf16x2(h0, h1);
                            /* why: an infinite x keeps its sum infinite, not inf - inf = NaN */
                            lo[j] = amk_pack_bf16x2(isfinite(h0) ? v[2 * j] - h0 : 0.0f,
                                                    isfinite(h1) ? v[2 * j + 1] - h1 : 0.0f);
                        }
                        *(uint4 *)(a_hi + u * 16) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
                        *(uint4 *)(a_lo + u * 16) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
                    }
                    amk_ptx_fence_proxy_async_smem(); /* the W copies and the split x */
                    __syncthreads(); /* why: the A operand is complete for every warpgroup */
                }
                if (nb < n_end) {
                    const uint64_t da = amk_mma_desc(direct ? raw : a_hi), dl = amk_mma_desc(a_lo), db = amk_mma_desc(bt);
                    amk_ptx_wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < AMK_MMA_KC / 16; kk++) { /* +16 K elements: 2 core matrices, 256 B */
                        amk_ptx_wgmma_m64n64k16(d, da + 16 * kk, db + 16 * kk, ck > 0 || kk > 0, f16);
                        if (!direct) amk_ptx_wgmma_m64n64k16(d, dl + 16 * kk, db + 16 * kk, 1, 0);
                    }
                    amk_ptx_wgmma_commit();
                    amk_ptx_wgmma_wait_all(); /* why: the next chunk overwrites the A operand and this ring stage */
                }
                s_last = s_use;
                s_use = s_use + 1 == stages ? 0 : s_use + 1;
                s_fill = s_fill + 1 == stages ? 0 : s_fill + 1;
            }
            if (nb < n_end)
                amk_mma_epilogue(c, d, (float *)(ring + s_last * stage_bytes + a_bytes + wg * AMK_MMA_TILE), m0, m_end,
                                 nb, n_end, N_out);
        }
    }
    return 1;
}

/* The rows path of GEMV/GEMM tile rows [m_begin, m_end) over the columns [k0, k0 + kn) of x's and
   W's rows (a GEMM_TILE's K range: a float W; kn 0: all of them). */
static __device__ __forceinline__ void amk_gemm_rows_body(amk_op_ctx *c, float *smem, int64_t m_begin, int64_t m_end,
                                                          const int k0, const int kn) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *x = &c->in[0], *W = &c->in[1], *o = &c->out[0];
    const int quant = amk_gemv_quant(c);
    const amk_buffer_t *bias = !quant && c->ins.n_inputs > 2 ? &c->in[2] : 0;
    const amk_buffer_t *sc = quant ? &c->in[2] : 0, *zr = quant && c->ins.n_inputs > 3 ? &c->in[3] : 0;
    /* Kx: x's and W's rows; K: the columns the tile sums */
    const int Kx = P->K, K = kn > 0 ? kn : Kx, lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    const int64_t M = amk_div_rows(x->numel, Kx), N_out = amk_div_rows(o->numel, M);
    const int64_t n_begin = P->n_off, n_end = (int64_t)P->n_off + P->N_tile;
    const int esz = W->dtype == AMK_DTYPE_F32 ? 4 : 2;
    /* why: 16-byte loads need every row start 16-byte aligned (base is 256-aligned) */
    const int fast = !quant && (W->dtype == AMK_DTYPE_F32 || W->dtype == AMK_DTYPE_F16 ||
                                W->dtype == AMK_DTYPE_BF16) && ((int64_t)Kx * esz) % 16 == 0 && ((int64_t)k0 * esz) % 16 == 0 &&
                     ((int64_t)K * esz) % 16 == 0;
    const int w_nc = W->kind == AMK_KIND_WEIGHT || W->kind == AMK_KIND_CONST || W->kind == AMK_KIND_IO_INPUT;
    const int64_t mc = amk_rows_fit(amk_ptx_dynamic_smem_size() / 4, K);
    float *xs = smem; /* [mc, K] fp32 */
    int64_t m0, n;
    if (mc < 1) { /* the host sizes shared memory for K; never reached for a checked program */
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, K);
        return;
    }
    if (!amk_op_go(c)) return;
    for (m0 = m_begin; m0 < m_end; m0 += mc) {
        const int mr = (int)(m_end - m0 < mc ? m_end - m0 : mc);
        if (K == Kx) amk_stage_x(xs, x, m0 * K, (int64_t)mr * K, 0);
        else
            for (int r = 0; r < mr; r++) amk_stage_x(xs + (int64_t)r * K, x, (m0 + r) * Kx + k0, K, 0);
        __syncthreads();
        for (n = n_begin + warp; n < n_end; n += nw) {
            float acc[AMK_GEMV_ROWS] = {0.0f};
            /* why: the bias (the residual, in the Llama step) is loaded before the weights, so its
               latency overlaps theirs instead of following the sums (M = 1: the decode case) */
            const float bias0 = bias && lane == 0 && mr == 1 ? amk_load((const void *)bias->ptr, bias->dtype, n) : 0.0f;
            if (fast) {
                const char *wrow = (const char *)W->ptr + (n * Kx + k0) * esz; /* [K] of row n of W */
                if (W->dtype == AMK_DTYPE_BF16) AMK__GEMV_VEC_ROW(amk_unpack_bf16x8, 8, acc, wrow);
                else if (W->dtype == AMK_DTYPE_F16) AMK__GEMV_VEC_ROW(amk_unpack_f16x8, 8, acc, wrow);
                else AMK__GEMV_VEC_ROW(amk_unpack_f32x4, 4, acc, wrow);
            } else if (quant) {
                /* I8: [N, K] int8; I4: element (n, k) is nibble n*K+k of the bytes (low first),
                   q = nibble - 8, whether the buffer is I4 [N, K] or U8 [N, K/2] */
                const uint8_t *qw = (const uint8_t *)W->ptr;
                const int64_t group = P->group > 0 ? P->group : K, G = K / group;
                int k;
                for (k = lane; k < K; k += 32) { /* (K == Kx: no K range here) */
                    const int64_t e = n * K + k;
                    float q = P->qdtype == AMK_DTYPE_I8 ? (float)(int8_t)qw[e]
                            : (float)((int)((e & 1) ? (qw[e >> 1] >> 4) : (qw[e >> 1] & 15u)) - 8);
                    float w = amk_q_dequant(q, sc, zr, n * G + k / group);
                    AMK__GEMV_FMA(acc, &w, 1, xs, K, k, mr);
                }
            } else {
                int k;
                for (k = lane; k < K; k += 32) {
                    float w = amk_load((const void *)W->ptr, W->dtype, n * Kx + k0 + k);
                    AMK__GEMV_FMA(acc, &w, 1, xs, K, k, mr);
                }
            }
#pragma unroll
            for (int r = 0; r < AMK_GEMV_ROWS; r++) {
                if (r < mr) {
                    float v = amk_warp_sum(acc[r]);
                    if (lane == 0) {
                        if (bias) v += mr == 1 ? bias0 : amk_load((const void *)bias->ptr, bias->dtype, n);
                        amk_store((void *)o->ptr, o->dtype, (m0 + r) * N_out + n, v);
                    }
                }
            }
        }
        __syncthreads(); /* why: xs is overwritten by the next row block */
    }
}

/* The rows path of a W in a block format: each row of x staged by units (amk_blk_stage_x), the
   tile's dots into yb (a warp a row), then its outputs with the bias. */
static __device__ __forceinline__ void amk_gemm_rows_blk(amk_op_ctx *c, float *smem, int64_t m_begin, int64_t m_end) {
    const amk_buffer_t *x = &c->in[0], *W = &c->in[1], *o = &c->out[0];
    const amk_buffer_t *bias = c->ins.n_inputs > 2 ? &c->in[2] : 0;
    const int K = c->ins.params.K;
    const int64_t nt = c->ins.params.N_tile, n0 = c->ins.params.n_off;
    const int64_t M = amk_div_rows(x->numel, K), N_out = amk_div_rows(o->numel, M);
    const int64_t sf = AMK_BLK_STAGE_FLOATS(K, 1, nt, c->ins.params.x_q8); /* the staging's floats */
    float *xq = smem, *yb = smem + AMK_BLK_X_FLOATS(K);
    const int q8 = c->ins.params.x_q8;
    if ((int64_t)amk_ptx_dynamic_smem_size() < 4 * sf) { /* the host sizes it (amk_plan_least) */
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, K);
        return;
    }
    if (!amk_op_go(c)) return;
    for (int64_t m = m_begin; m < m_end; m++) {
        amk_blk_stage_x(xq, x, m * K, K, 0, q8);
        __syncthreads();
        amk_blk_rows(W, K, n0, nt, xq, yb);
        __syncthreads();
        for (int64_t r = AMK_OPS_TID; r < nt; r += AMK_OPS_NT)
            amk_store((void *)o->ptr, o->dtype, m * N_out + n0 + r,
                      yb[r] + (bias ? amk_load((const void *)bias->ptr, bias->dtype, n0 + r) : 0.0f));
        __syncthreads(); /* why: xq and yb are the next row's */
    }
}
static __device__ void amk_op_gemm_rows(amk_op_ctx *c, float *smem, int64_t m_begin, int64_t m_end) {
    if (!amk_gemv_quant(c) && amk_dtype_blk(c->in[1].dtype)) amk_gemm_rows_blk(c, smem, m_begin, m_end);
    else amk_gemm_rows_body(c, smem, m_begin, m_end, 0, 0);
}

/* The tensor-core path for a tile of at least AMK_MMA_MIN_ROWS rows whose operands it takes
   (the rows test inline, the rest out of line); 0 when the tile is left to the rows path. The
   prefill image has none: its tensor-copy GEMM runs from amk_op_dispatch, and the tiles it does
   not take run the rows path. why no amk_gemm_mma there: a wgmma in a function the VM calls makes
   ptxas serialise every wgmma of the kernel (C7510, "pipeline crossing function boundary"), the
   tensor-copy GEMM's too: a wait for each MMA (bench/NOTES.md session "rows") */
#if AMK_PORTABLE
/* The portable image's tensor-core path for such a tile (no wgmma on sm_80): blocks of
   AMK_SYNC_BM rows x AMK_SYNC_BN columns, K in chunks of AMK_SYNC_BK through two cp.async stages
   (rows of AMK_SYNC_LD 16-bit values: 80 bytes, so a ldmatrix's eight rows fall on distinct
   banks); 16 warps, each 16 rows x 32 columns of the block by ldmatrix and mma.sync m16n8k16.
   x and W of one 16-bit dtype (bf16 or f16), K (and a K range's start and length) a multiple of
   8, 512 threads; else 0 (the rows path runs). The same products and f32 sums as amk_gemm_mma's
   direct path. */
#define AMK_SYNC_BM 64
#define AMK_SYNC_BN 128
#define AMK_SYNC_BK 32
#define AMK_SYNC_LD 40
#define AMK_SYNC_STAGE ((AMK_SYNC_BM + AMK_SYNC_BN) * AMK_SYNC_LD * 2)
/* Chunk k0 of the block (rows m0.., columns n0..; K the rows' length) into stage st: thread u
   copies W's 16-byte unit u (row u / 4, k k0 + 8 (u % 4)) and, below 256, x's; units past m_end,
   n_end or k_end read nothing. */
static __device__ __forceinline__ void amk_sync_issue(char *st, const amk_buffer_t *x, const amk_buffer_t *W, int64_t K,
                                                      int64_t m0, int64_t m_end, int64_t n0, int64_t n_end, int64_t k0,
                                                      int64_t k_end, int u) {
    const int r = u >> 2, kk = 8 * (u & 3);
    const int in_k = k0 + kk < k_end;
    uint16_t *xs = (uint16_t *)st, *ws = xs + AMK_SYNC_BM * AMK_SYNC_LD;
    const int64_t n = n0 + r;
    amk_ptx_cp_async_16_zfill(ws + r * AMK_SYNC_LD + kk, (const uint16_t *)W->ptr + (n < n_end && in_k ? n * K + k0 + kk : 0),
                              n < n_end && in_k ? 16u : 0u);
    if (u < 4 * AMK_SYNC_BM) {
        const int64_t m = m0 + r;
        amk_ptx_cp_async_16_zfill(xs + r * AMK_SYNC_LD + kk, (const uint16_t *)x->ptr + (m < m_end && in_k ? m * K + k0 + kk : 0),
                                  m < m_end && in_k ? 16u : 0u);
    }
}
static __device__ __noinline__ int amk_gemm_sync(amk_op_ctx *c, float *smem, int64_t m_begin, int64_t m_end) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *x = &c->in[0], *W = &c->in[1], *o = &c->out[0];
    const int64_t K = P->K, M = amk_div_rows(x->numel, K), N_out = amk_div_rows(o->numel, M);
    const int64_t n_begin = P->n_off, n_end = (int64_t)P->n_off + P->N_tile;
    const int tid = amk_tid(), lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
    /* the K range [kb, ke): a GEMM_TILE's k_off and K_tile, else all of K */
    const int64_t kb = P->K_tile > 0 ? P->k_off : 0, ke = P->K_tile > 0 ? kb + P->K_tile : K;
    const int f16 = W->dtype == AMK_DTYPE_F16, nck = (int)((ke - kb + AMK_SYNC_BK - 1) / AMK_SYNC_BK);
    char *ring = (char *)smem;
    if (amk_gemv_quant(c) || K % 8 != 0 || kb % 8 != 0 || (ke - kb) % 8 != 0 || amk_ntid() != 512 || x->dtype != W->dtype ||
        (W->dtype != AMK_DTYPE_BF16 && W->dtype != AMK_DTYPE_F16) || amk_ptx_dynamic_smem_size() < 2 * AMK_SYNC_STAGE)
        return 0;
    if (!amk_op_go(c)) return 1;
    for (int64_t m0 = m_begin; m0 < m_end; m0 += AMK_SYNC_BM) {
        for (int64_t n0 = n_begin; n0 < n_end; n0 += AMK_SYNC_BN) {
            float d[4][4];
#pragma unroll
            for (int j = 0; j < 4; j++) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.0f;
            __syncthreads(); /* why: the last block's warps may still read the stages */
            amk_sync_issue(ring, x, W, K, m0, m_end, n0, n_end, kb, ke, tid);
            amk_ptx_cp_async_commit();
            for (int ck = 0; ck < nck; ck++) {
                if (ck + 1 < nck) { /* the next chunk into the other stage (free since the last barrier) */
                    amk_sync_issue(ring + ((ck + 1) & 1) * AMK_SYNC_STAGE, x, W, K, m0, m_end, n0, n_end,
                                   kb + (int64_t)(ck + 1) * AMK_SYNC_BK, ke, tid);
                    amk_ptx_cp_async_commit();
                    amk_ptx_cp_async_wait_pending(1);
                } else {
                    amk_ptx_cp_async_wait_pending(0);
                }
                __syncthreads(); /* chunk ck staged */
                const uint16_t *xs = (const uint16_t *)(ring + (ck & 1) * AMK_SYNC_STAGE), *ws = xs + AMK_SYNC_BM * AMK_SYNC_LD;
#pragma unroll
                for (int k16 = 0; k16 < AMK_SYNC_BK; k16 += 16) {
                    uint32_t a[4], b[4];
                    /* A: rows 16 wm + (lane % 16), k16 + 8 (lane / 16); B: W rows 32 wn + 16 h + (lane % 8) + 8 (lane / 16),
                       k16 + 8 ((lane / 8) % 2): matrices (b0, b1) of two 8-column fragments */
                    amk_ptx_ldmatrix_x4(a, xs + (16 * wm + (lane & 15)) * AMK_SYNC_LD + k16 + 8 * (lane >> 4));
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        amk_ptx_ldmatrix_x4(b, ws + (32 * wn + 16 * h + (lane & 7) + 8 * (lane >> 4)) * AMK_SYNC_LD + k16 +
                                                   8 * ((lane >> 3) & 1));
                        amk_ptx_mma_16816_x2(d[2 * h], d[2 * h + 1], a, b, f16);
                    }
                }
                __syncthreads(); /* why: the next chunk's copies go into this stage */
            }
            /* d[j]: rows m0 + 16 wm + lane / 4 (+ 8), columns n0 + 32 wn + 8 j + 2 (lane % 4) (+ 1) */
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int64_t m = m0 + 16 * wm + (lane >> 2) + 8 * (e >> 1), n = n0 + 32 * wn + 8 * j + 2 * (lane & 3) + (e & 1);
                    if (m < m_end && n < n_end)
                        amk_store((void *)o->ptr, o->dtype, m * N_out + n,
                                  d[j][e] + (c->ins.n_inputs > 2 ? amk_load((const void *)c->in[2].ptr, c->in[2].dtype, n) : 0.0f));
                }
        }
    }
    return 1;
}
#define AMK_GEMM_TRY_MMA(c, smem, m_begin, m_end) \
    ((m_end) - (m_begin) >= AMK_MMA_MIN_ROWS && amk_gemm_sync(c, smem, m_begin, m_end))
#elif AMK_GEMM_TMA && AMK_VM_PREFILL /* the prefill image's (gpu.mk) */
#define AMK_GEMM_TRY_MMA(c, smem, m_begin, m_end) 0
#else
#define AMK_GEMM_TRY_MMA(c, smem, m_begin, m_end) \
    ((m_end) - (m_begin) >= AMK_MMA_MIN_ROWS && amk_gemm_mma(c, smem, m_begin, m_end))
#endif

/* GEMV_TILE: every row of x. */
AMK_OP_FN void amk_op_gemv_tile(amk_op_ctx *c, float *smem) {
    const int64_t M = amk_div_rows(c->in[0].numel, c->ins.params.K);
    if (!AMK_GEMM_TRY_MMA(c, smem, 0, M)) amk_op_gemm_rows(c, smem, 0, M);
}

/* GEMM_TILE: rows [m_off, m_off + M_tile); in the prefill image (out of the VM's line there:
   amk_prefill_ops) of a K range too, which the portable image's mma.sync blocks or the rows path
   take (a float W: the validator's rule). */
AMK_OP_FN void amk_op_gemm_tile(amk_op_ctx *c, float *smem) {
    const int64_t m0 = c->ins.params.m_off, m1 = m0 + c->ins.params.M_tile;
    if (AMK_GEMM_TRY_MMA(c, smem, m0, m1)) return;
#if AMK_VM_PREFILL
    if (c->ins.params.K_tile > 0) {
        amk_gemm_rows_body(c, smem, m0, m1, c->ins.params.k_off, c->ins.params.K_tile);
        return;
    }
#endif
    amk_op_gemm_rows(c, smem, m0, m1);
}

/* ---- attention ---------------------------------------------------------------------------------
   One warp per query head (heads strided over warps), flash-style over blocks of 32 keys: lane i
   scores key j0+i against q (staged in shared memory), the warp rescales its running max m, sum l
   and accumulator (dims lane, lane+32, ...) and adds p_j * v_j. Caches are [rows, n_kv_heads,
   head_dim]; query head h reads kv head h / (n_heads / n_kv_heads). */

#define AMK_ATTN_DPL 8 /* why: head_dim <= 8*32 = 256 accumulator dims per lane (host checks) */

/* dot(qs[0..n), row elements off..off+n) of a buffer of dtype t). */
static __device__ __forceinline__ float amk_dot_row(const float *qs, const void *base, int t,
                                                    int64_t off, int n) {
    float s = 0.0f;
    int d = 0;
    if ((t == AMK_DTYPE_BF16 || t == AMK_DTYPE_F16) && (off & 7) == 0) {
        /* why: KV rows may be written in this launch (KV_APPEND), so a coherent load, not .nc */
        const uint4 *p = (const uint4 *)((const uint16_t *)base + off);
#pragma unroll 4
        for (; d + 8 <= n; d += 8) {
            float w[8];
            if (t == AMK_DTYPE_BF16) amk_unpack_bf16x8(p[d >> 3], w);
            else amk_unpack_f16x8(p[d >> 3], w);
#pragma unroll
            for (int j = 0; j < 8; j++) s = fmaf(qs[d + j], w[j], s);
        }
    } else if (t == AMK_DTYPE_F32 && (off & 3) == 0) {
        const float4 *p = (const float4 *)((const float *)base + off);
#pragma unroll 4
        for (; d + 4 <= n; d += 4) {
            float4 w = p[d >> 2];
            s = fmaf(qs[d], w.x, s); s = fmaf(qs[d + 1], w.y, s);
            s = fmaf(qs[d + 2], w.z, s); s = fmaf(qs[d + 3], w.w, s);
        }
    }
    for (; d < n; d++) s = fmaf(qs[d], amk_load(base, t, off + d), s);
    return s;
}

/* acc[t] += p_i * V[row j0+i, kv head g, dim lane+32t] over nvalid rows of V in dtype t. Called with
   t a constant for BF16 and F32: those copies have straight-line loads that the unrolled rows keep
   in flight together (amk_load's dtype switch would put each behind a branch); any other dtype
   goes through amk_load. */
static __device__ __forceinline__ void amk_attn_pv(float *acc, float p, const void *v, int dt,
                                                   int64_t j0, int nvalid, int nkv, int g, int hd, int lane) {
#pragma unroll 4
    for (int i = 0; i < nvalid; i++) {
        const float pi = __shfl_sync(0xFFFFFFFFu, p, i);
        const int64_t vb = ((j0 + i) * nkv + g) * hd;
#pragma unroll
        for (int t = 0; t < AMK_ATTN_DPL; t++) {
            const int d = lane + 32 * t;
            if (d < hd) {
                const float x = dt == AMK_DTYPE_BF16 ? __uint_as_float((uint32_t)((const uint16_t *)v)[vb + d] << 16)
                              : dt == AMK_DTYPE_F32 ? ((const float *)v)[vb + d] : amk_load(v, dt, vb + d);
                acc[t] = fmaf(pi, x, acc[t]);
            }
        }
    }
}

/* The flash loop of one query head (qs, staged) of kv head g over key blocks of 32, j0 = j_from,
   j_from + 32, ... below j_end: lane i scores key j0+i, the warp rescales its running max m, sum
   l and accumulator (dims lane + 32t) and adds p_j * v_j. */
static __device__ __forceinline__ void amk_attn_scan(const float *qs, const amk_buffer_t *kc, const amk_buffer_t *vc,
                                                     int g, int nkv, int hd, int64_t j_from, int64_t j_end,
                                                     float scale, int lane, float *m_io, float *l_io, float *acc) {
    float m_run = *m_io, l_run = *l_io;
    for (int64_t j0 = j_from; j0 < j_end; j0 += 32) {
        const int64_t j = j0 + lane;
        const int nvalid = (int)(j_end - j0 < 32 ? j_end - j0 : 32);
        float s = -INFINITY, m_new, alpha, p;
        if (j < j_end) s = scale * amk_dot_row(qs, (const void *)kc->ptr, kc->dtype, (j * nkv + g) * hd, hd);
        m_new = fmaxf(m_run, amk_warp_max(s));
        if (m_new == -INFINITY) continue; /* why: only -inf scores so far; nothing to add */
        alpha = expf(m_run - m_new);
        p = j < j_end ? expf(s - m_new) : 0.0f;
        l_run = l_run * alpha + amk_warp_sum(p);
#pragma unroll
        for (int t = 0; t < AMK_ATTN_DPL; t++) acc[t] *= alpha;
        if (vc->dtype == AMK_DTYPE_BF16) amk_attn_pv(acc, p, (const void *)vc->ptr, AMK_DTYPE_BF16, j0, nvalid, nkv, g, hd, lane);
        else if (vc->dtype == AMK_DTYPE_F32) amk_attn_pv(acc, p, (const void *)vc->ptr, AMK_DTYPE_F32, j0, nvalid, nkv, g, hd, lane);
        else amk_attn_pv(acc, p, (const void *)vc->ptr, vc->dtype, j0, nvalid, nkv, g, hd, lane);
        m_run = m_new;
    }
    *m_io = m_run;
    *l_io = l_run;
}

/* Element e of query head h's result from its sum acc, max m and mass l into the output at optr
   (dtype odt): the partial row [acc | m | l] (F32; m and l with e = 0) or acc / l (0 for no mass).
   Every attention path's output goes through here (ATTENTION_O's into shared memory). */
static __device__ __forceinline__ void amk_attn_out(uint64_t optr, int odt, int partial, int64_t h, int hd, int e,
                                                    float acc, float m, float l) {
    if (partial) {
        float *po = (float *)optr + h * (hd + 2); /* F32 (op_check) */
        po[e] = acc;
        if (e == 0) { po[hd] = m; po[hd + 1] = l; }
    } else {
        amk_store((void *)optr, odt, h * hd + e, l > 0.0f ? acc / l : 0.0f);
    }
}

/* Head h's result from the lane's dims (lane + 32t). */
static __device__ __forceinline__ void amk_attn_store(const amk_buffer_t *o, int partial, int64_t h, int hd,
                                                      const float *acc, float m_run, float l_run, int lane) {
#pragma unroll
    for (int t = 0; t < AMK_ATTN_DPL; t++)
        if (lane + 32 * t < hd) amk_attn_out(o->ptr, o->dtype, partial, h, hd, lane + 32 * t, acc[t], m_run, l_run);
}

AMK_OP_FN void amk_op_attention_tile(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2], *o = &c->out[0];
    const int hd = P->head_dim, nh = P->n_heads, nkv = P->n_kv_heads, grp = nh / nkv;
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    const int partial = (P->flags & AMK_ATTN_FLAG_PARTIAL) != 0;
    float *qs = smem + (int64_t)warp * hd; /* [head_dim] fp32, this warp's query head */
    int h;
    if ((uint32_t)(nw * hd) * 4u > amk_ptx_dynamic_smem_size() || hd > 32 * AMK_ATTN_DPL) {
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, hd); /* host checks: never for a checked program */
        return;
    }
    for (h = warp; h < nh; h += nw) {
        float m_run = -INFINITY, l_run = 0.0f, acc[AMK_ATTN_DPL];
#pragma unroll
        for (int t = 0; t < AMK_ATTN_DPL; t++) acc[t] = 0.0f;
        for (int d = lane; d < hd; d += 32) qs[d] = amk_load((const void *)q->ptr, q->dtype, (int64_t)h * hd + d);
        __syncwarp();
        amk_attn_scan(qs, kc, vc, h / grp, nkv, hd, P->kv_start, (int64_t)P->kv_start + P->kv_len, P->scale,
                      lane, &m_run, &l_run, acc);
        amk_attn_store(o, partial, h, hd, acc, m_run, l_run, lane);
        __syncwarp(); /* why: qs is overwritten for the warp's next head */
    }
}

/* ATTENTION_PREFILL: query rows [m_off, m_off + M_tile) of q at positions pos + m, the query heads
   of kv heads [n_off, n_off + N_tile): a warp a (row, head), ATTENTION_TILE's flash loop over the
   cache rows [max(0, pos + m + 1 - sliding_window), pos + m]. Positions outside the cache: a
   run-time error (pos is data). CUDA cores, as ATTENTION_TILE; in the prefill image, BF16 tiles run
   on the tensor cores (AMK_FORM_ATTN_MMA, amk_attn_prefill_mma). */
#if AMK_ATTN_PREFILL_MMA && AMK_VM_PREFILL
static __device__ __noinline__ void amk_attn_prefill_mma(amk_op_ctx *c, float *smem); /* below */
#endif
AMK_OP_FN void amk_op_attention_prefill(amk_op_ctx *c, float *smem) {
#if AMK_ATTN_PREFILL_MMA && AMK_VM_PREFILL
    if (c->ins.form == AMK_FORM_ATTN_MMA) {
        amk_attn_prefill_mma(c, smem);
        return;
    }
#endif
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2], *o = &c->out[0];
    const int hd = P->head_dim, nh = P->n_heads, nkv = P->n_kv_heads, grp = nh / nkv;
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    const int64_t rows = kc->numel / ((int64_t)nkv * hd), nq = (int64_t)P->M_tile * P->N_tile * grp;
    const int64_t pos = amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
    float *qs = smem + (int64_t)warp * hd; /* [head_dim] fp32, this warp's query row and head */
    if ((uint32_t)(nw * hd) * 4u > amk_ptx_dynamic_smem_size() || hd > 32 * AMK_ATTN_DPL) {
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, hd); /* host checks: never for a checked program */
        return;
    }
    if (pos < 0 || pos + P->m_off + P->M_tile > rows) { /* every thread read the same pos */
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_KV_POS, pos);
        return;
    }
    for (int64_t i = warp; i < nq; i += nw) {
        const int64_t m = P->m_off + i / ((int64_t)P->N_tile * grp), h = (int64_t)P->n_off * grp + i % ((int64_t)P->N_tile * grp);
        const int64_t p = pos + m, lo = P->sliding_window > 0 && p + 1 - P->sliding_window > 0 ? p + 1 - P->sliding_window : 0;
        float m_run = -INFINITY, l_run = 0.0f, acc[AMK_ATTN_DPL];
#pragma unroll
        for (int t = 0; t < AMK_ATTN_DPL; t++) acc[t] = 0.0f;
        for (int d = lane; d < hd; d += 32) qs[d] = amk_load((const void *)q->ptr, q->dtype, (m * nh + h) * hd + d);
        __syncwarp();
        amk_attn_scan(qs, kc, vc, (int)(h / grp), nkv, hd, lo, p + 1, P->scale, lane, &m_run, &l_run, acc);
        amk_attn_store(o, 0, m * nh + h, hd, acc, m_run, l_run, lane);
        __syncwarp(); /* why: qs is overwritten for the warp's next row and head */
    }
}

/* ATTENTION_DECODE: the query heads of kv heads [n_off, n_off + N_tile) over rows [kv_start,
   min(kv_start + kv_len, pos + 1)), chunk by chunk of C rows. Each chunk costs one load round
   trip: every thread issues its 16-byte pieces of the chunk's K and V rows at once (cp.async into
   shared memory, no registers held), then scores, softmax and P.V run from shared memory.
   why: decode attention is tiny and latency-bound, and a flash loop per warp (ATTENTION_TILE's)
   waits a load latency per 32-key block and per few V rows (bench/RESULTS.md run 12). Layout:
   AMK_ATTN_DECODE_SMEM (amk_plan.h). Rows keep the cache dtype (F32/F16/BF16 whose rows are whole
   16-byte pieces), else are converted to F32; each row is padded by 16 bytes so the threads that
   score one key each read distinct banks. Per pass of up to AMK_ATTN_GH query heads of one kv head:
   thread groups of kpt lanes score a key for all the pass's heads; warp h runs head h's online
   softmax over the chunk; KG groups of threads accumulate p.V over keys kg, kg + KG, ... (a thread
   two dims of every head) and the groups' sums meet in shared memory at the end. */

/* sc[h] += q[h, vi*VECE + e] * k[e] for the key row krow (shared memory), over the row's vectors
   vi = sub, sub + kpt, ...; LOAD fills k_[VECE] (VECE 4 or 8) from vector vi. q is read four
   floats at a time (one broadcast 16-byte read instead of four 4-byte ones). */
#define AMK__ATTN_QK(VECE, LOAD) do { \
    for (int vi = sub; vi < nvec; vi += kpt) { \
        float k_[VECE]; \
        LOAD; \
        _Pragma("unroll") for (int h_ = 0; h_ < AMK_ATTN_GH; h_++) { \
            const float4 *q_ = (const float4 *)(qs + h_ * hd + vi * (VECE)); \
            _Pragma("unroll") for (int e_ = 0; e_ < (VECE) / 4; e_++) { \
                const float4 qq_ = q_[e_]; \
                sc[h_] = fmaf(qq_.x, k_[4 * e_], sc[h_]); \
                sc[h_] = fmaf(qq_.y, k_[4 * e_ + 1], sc[h_]); \
                sc[h_] = fmaf(qq_.z, k_[4 * e_ + 2], sc[h_]); \
                sc[h_] = fmaf(qq_.w, k_[4 * e_ + 3], sc[h_]); \
            } \
        } \
    } } while (0)

/* ATTENTION_DECODE's staging: K and V rows [c0, c0 + nload) of kv head g (esz bytes an element,
   rows of whole 16-byte pieces) into ks, vs (rowb bytes a row) by cp.async, and rows [nload,
   nrows) zeroed. Thread tid owns the pieces v = tid, tid + NT, ... of 2 * nrows * hd * esz / 16
   (amk_attn_mma_zero_v walks the same). The caller waits for the copies. */
static __device__ __forceinline__ void amk_attn_load_rows(unsigned char *ks, unsigned char *vs, const amk_buffer_t *kc,
                                                          const amk_buffer_t *vc, int64_t c0, int nload, int nrows, int g,
                                                          int nkv, int hd, int esz, int64_t rowb, int tid, int NT) {
    const int nvec = hd * esz / 16, per = nrows * nvec;
    for (int v = tid; v < 2 * per; v += NT) {
        const int isv = v >= per, r = v - isv * per, row = r / nvec, col = r - row * nvec;
        unsigned char *dst = (isv ? vs : ks) + row * rowb + col * 16;
        if (row < nload)
            amk_ptx_cp_async_16(dst, (const char *)(isv ? vc->ptr : kc->ptr) + (((c0 + row) * nkv + g) * hd) * esz + col * 16);
        else
            *(uint4 *)dst = make_uint4(0u, 0u, 0u, 0u);
    }
}

/* After the thread's copies landed: V rows [n, nload) loaded past the position are zeroed (a
   masked key's p is 0, and 0 times a stale row's NaN would not be); the pieces the thread copied
   in amk_attn_load_rows (bf16 rows, nrows = n16). */
static __device__ __forceinline__ void amk_attn_mma_zero_v(unsigned char *vs, int n, int nload, int n16, int hd,
                                                           int64_t rowb, int tid, int NT) {
    const int nvec = hd / 8, per = n16 * nvec;
    int v = tid;
    if (v < per) v += (per - v + NT - 1) / NT * NT; /* the thread's first V piece */
    for (; v < 2 * per; v += NT) {
        const int row = (v - per) / nvec, col = (v - per) - row * nvec;
        if (row >= n && row < nload) *(uint4 *)(vs + row * rowb + col * 16) = make_uint4(0u, 0u, 0u, 0u);
    }
}

/* Query heads [h0, h0 + gh) into the 16 bf16 rows of qs (rows gh.. zero). */
static __device__ __forceinline__ void amk_attn_mma_stage_q(unsigned char *qs, const amk_buffer_t *q, int64_t h0, int gh,
                                                            int hd, int64_t rowb, int tid, int NT) {
    for (int i = tid; i < AMK_ATTN_MMA_ROWS * hd; i += NT) {
        const int h = i / hd, e = i - h * hd;
        ((uint16_t *)(qs + h * rowb))[e] = h < gh ? ((const uint16_t *)q->ptr)[(h0 + h) * hd + e] : (uint16_t)0;
    }
}

/* ATTENTION_DECODE with q, K and V in BF16 and head_dim a multiple of 16: returns 0 (nothing
   done) for any other task, or when shared memory holds fewer than 16 rows; the CUDA-core path
   below then runs it (the first test's planner twin, amk_plan_attn_mma, sizes the launch's
   shared memory). why: the CUDA-core path's scores, softmax and p.V are three block-wide
   steps, each reading q or the scores from shared memory per key: over half of a decode attention
   task (bench/RESULTS.md run 102). A warp takes 16 keys at a time
   (groups gi = warp, warp + warps, ...): scores = q . K^T on the tensor cores (16 query-head rows,
   the rows past the pass's heads zero), its softmax over the 16 keys in registers (m, l), p . V
   on the tensor cores with p split into three bf16 terms (hi + mid + lo: ~24 bits, so the sums
   keep F32 accuracy), the group's sums and m, l to shared memory; then a warp a head turns the
   groups' (m, l) into their weights (a lane a group: one exp each), and one thread an output (head,
   dim) adds the groups' sums by them (and the running sums of earlier chunks). why the weights
   once: with one thread an output doing both, each paid an exp a group, and the step ~0.5% more
   (bench/RESULTS.md runs 484, 487). The window's K and V
   rows are requested with q and the position when the window fits one chunk. */
AMK_OP_FN int amk_attn_decode_mma(amk_op_ctx *c, float *smem, uint64_t optr, int odt, int64_t dyn) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2];
    const int hd = P->head_dim, grp = P->n_heads / P->n_kv_heads, nkv = P->n_kv_heads;
    const int R = grp < AMK_ATTN_MMA_ROWS ? grp : AMK_ATTN_MMA_ROWS;
    const int64_t rowb = AMK_ATTN_ROW_BYTES(hd, 2);
    const int partial = (P->flags & AMK_ATTN_FLAG_PARTIAL) != 0;
    int64_t C, r0 = P->kv_start, r1 = (int64_t)P->kv_start + P->kv_len, loaded = -1, pos;
    int lo_n = 0, lo_n16 = 0; /* the staged rows: copied, and the pieces' extent */
    if (q->dtype != AMK_DTYPE_BF16 || kc->dtype != AMK_DTYPE_BF16 || vc->dtype != AMK_DTYPE_BF16 || hd % 16 != 0 ||
        hd > 256 || R < 1)
        return 0;
    /* the chunk: the window (at most 512 rows) when it fits, else what fits. why the test first:
       it spares the usual task the division on its path to the poll */
    C = (r1 - r0 + 15) / 16 * 16;
    if (C > 512) C = 512;
    if (AMK_ATTN_MMA_SMEM(hd, R, C) > dyn)
        C = dyn > AMK_ATTN_MMA_FIXED(hd) ? (int64_t)((uint32_t)(dyn - AMK_ATTN_MMA_FIXED(hd)) / (uint32_t)AMK_ATTN_MMA_PER16(hd, R)) * 16 : 0;
    if (C < 16) return 0;
    if (!amk_op_go(c)) return 1;
    {
        const int tid = amk_tid(), NT = amk_ntid();
        unsigned char *qs = (unsigned char *)smem, *ks = qs + 16 * rowb, *vs = ks + C * rowb;
        float *racc = (float *)(vs + C * rowb), *rml = racc + R * hd, *pacc = rml + 4 * R, *pml = pacc + (C / 16) * R * hd;
        pos = amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
        /* why before the position is known: q, the position and (a window of one chunk, at most
           AMK_ATTN_SPEC_ROWS) its K and V rows then cost one round trip, not two: 1B -0.4% at
           context 128; rows past the position are loaded for nothing, which cost 0.5% at
           position 100 of a 4096-row cache with 512-row windows (bench/RESULTS.md run 108) */
        if (r1 - r0 <= C && P->kv_len > 0 && P->kv_len <= AMK_ATTN_SPEC_ROWS) {
            lo_n = (int)(r1 - r0);
            lo_n16 = (lo_n + 15) / 16 * 16;
            amk_attn_load_rows(ks, vs, kc, vc, r0, lo_n, lo_n16, P->n_off, nkv, hd, 2, rowb, tid, NT);
            loaded = r0 * nkv + P->n_off;
        }
        /* why after the copies: q's shared-memory stores wait for its loads */
        amk_attn_mma_stage_q(qs, q, (int64_t)P->n_off * grp, R, hd, rowb, tid, NT);
        if (pos < 0) { /* uniform: every thread read the same position */
            amk_ptx_cp_async_wait_all(); /* why: no copy may land in the next task's shared memory */
            if (tid == 0) amk_op_fail(c, AMK_VM_ERR_ROPE_POS, pos);
            return 1;
        }
        AMK_OP_MARK(c, 0); /* q staging issued, the position read */
        if (pos + 1 < r1) r1 = pos + 1;
        if (P->sliding_window > 0 && pos + 1 - P->sliding_window > r0) { /* rows (pos - window, pos] */
            if (loaded >= 0) { /* why: no copy of the rows loaded ahead may land over the window's */
                amk_ptx_cp_async_wait_all();
                __syncthreads();
                loaded = -1;
            }
            r0 = pos + 1 - P->sliding_window;
        }
        for (int g = P->n_off; g < P->n_off + P->N_tile; g++) {
            for (int hp = 0; hp < grp; hp += R) {
                const int gh = grp - hp < R ? grp - hp : R;
                const int64_t h0 = (int64_t)g * grp + hp; /* the pass's first query head */
                int par = 0;
                if (g != P->n_off || hp != 0) amk_attn_mma_stage_q(qs, q, h0, gh, hd, rowb, tid, NT);
                if (r1 <= r0) { /* an empty window (a split past the position): no keys */
                    amk_ptx_cp_async_wait_all();
                    for (int i = tid; i < gh * hd; i += NT)
                        amk_attn_out(optr, odt, partial, h0 + i / hd, hd, i % hd, 0.0f, -INFINITY, 0.0f);
                    __syncthreads(); /* why: q is restaged by the next pass */
                    continue;
                }
                for (int64_t c0 = r0; c0 < r1; c0 += C, par ^= 1) {
                    const int n = (int)(r1 - c0 < C ? r1 - c0 : C), G = (n + 15) / 16, last = c0 + C >= r1;
                    const int lane = tid & 31;
                    if (loaded != c0 * nkv + g) {
                        lo_n = n;
                        lo_n16 = G * 16;
                        amk_attn_load_rows(ks, vs, kc, vc, c0, lo_n, lo_n16, g, nkv, hd, 2, rowb, tid, NT);
                        loaded = r1 - r0 <= C ? c0 * nkv + g : -1;
                    }
                    amk_ptx_cp_async_wait_all();
                    if (n < lo_n) amk_attn_mma_zero_v(vs, n, lo_n, lo_n16, hd, rowb, tid, NT);
                    __syncthreads(); /* K, V and q staged */
                    AMK_OP_MARK(c, 1);
                    for (int gi = tid >> 5; gi < G; gi += NT >> 5) {
                        const int k0 = gi * 16, gr = lane >> 2, t4 = lane & 3, mj = lane >> 3, mr = lane & 7;
                        float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
                        float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
                        uint32_t pa[3][4];
                        for (int kk = 0; kk < hd; kk += 16) { /* scores: 16 heads x 16 keys */
                            uint32_t a[4], b[4];
                            amk_ptx_ldmatrix_x4(a, qs + (mr + 8 * (mj & 1)) * rowb + (kk + 8 * (mj >> 1)) * 2);
                            amk_ptx_ldmatrix_x4(b, ks + (k0 + 8 * (mj >> 1) + mr) * rowb + (kk + 8 * (mj & 1)) * 2);
                            amk_ptx_mma_bf16_16816(s[0], a, b[0], b[1]);
                            amk_ptx_mma_bf16_16816(s[1], a, b[2], b[3]);
                        }
#pragma unroll
                        for (int nt = 0; nt < 2; nt++)
#pragma unroll
                            for (int i = 0; i < 4; i++) { /* keys past the window score -inf */
                                s[nt][i] = k0 + 8 * nt + 2 * t4 + (i & 1) < n ? s[nt][i] * P->scale : -INFINITY;
                                if (i < 2) m_lo = fmaxf(m_lo, s[nt][i]);
                                else m_hi = fmaxf(m_hi, s[nt][i]);
                            }
                        m_lo = fmaxf(m_lo, __shfl_xor_sync(0xFFFFFFFFu, m_lo, 1));
                        m_lo = fmaxf(m_lo, __shfl_xor_sync(0xFFFFFFFFu, m_lo, 2));
                        m_hi = fmaxf(m_hi, __shfl_xor_sync(0xFFFFFFFFu, m_hi, 1));
                        m_hi = fmaxf(m_hi, __shfl_xor_sync(0xFFFFFFFFu, m_hi, 2));
#pragma unroll
                        for (int nt = 0; nt < 2; nt++)
#pragma unroll
                            for (int i = 0; i < 4; i++) { /* the group's first key is valid: m is finite */
                                s[nt][i] = expf(s[nt][i] - (i < 2 ? m_lo : m_hi));
                                if (i < 2) l_lo += s[nt][i];
                                else l_hi += s[nt][i];
                            }
                        l_lo += __shfl_xor_sync(0xFFFFFFFFu, l_lo, 1);
                        l_lo += __shfl_xor_sync(0xFFFFFFFFu, l_lo, 2);
                        l_hi += __shfl_xor_sync(0xFFFFFFFFu, l_hi, 1);
                        l_hi += __shfl_xor_sync(0xFFFFFFFFu, l_hi, 2);
                        if (t4 == 0 && gr < gh) { pml[(gi * R + gr) * 2] = m_lo; pml[(gi * R + gr) * 2 + 1] = l_lo; }
                        if (t4 == 0 && gr + 8 < gh) { pml[(gi * R + gr + 8) * 2] = m_hi; pml[(gi * R + gr + 8) * 2 + 1] = l_hi; }
                        /* p as the A operand (its layout is the scores'): a[0] = keys 2t.. of row g
                           (n-tile 0, c0 c1), a[1] row g + 8 (c2 c3), a[2], a[3] keys 8 + 2t.. (n-tile 1);
                           three bf16 terms, each the rounding of what the ones before left */
#pragma unroll
                        for (int r = 0; r < 4; r++) {
                            float x0 = s[r >> 1][2 * (r & 1)], x1 = s[r >> 1][2 * (r & 1) + 1];
#pragma unroll
                            for (int sp = 0; sp < 3; sp++) {
                                const uint32_t u = amk_pack_bf16x2(x0, x1);
                                pa[sp][r] = u;
                                x0 -= __uint_as_float(u << 16);
                                x1 -= __uint_as_float(u & 0xFFFF0000u);
                            }
                        }
#pragma unroll 1 /* why: as measured with the unrolled combine (run 115); unrolled by 2, no faster */
                        for (int d0 = 0; d0 < hd; d0 += 16) { /* p . V: 16 heads x 16 dims */
                            uint32_t b[4];
                            float o0[4], o1[4];
                            amk_ptx_ldmatrix_x4_trans(b, vs + (k0 + 8 * (mj & 1) + mr) * rowb + (d0 + 8 * (mj >> 1)) * 2);
#pragma unroll
                            for (int i = 0; i < 4; i++) o0[i] = o1[i] = 0.0f;
#pragma unroll
                            for (int sp = 0; sp < 3; sp++) {
                                amk_ptx_mma_bf16_16816(o0, pa[sp], b[0], b[1]);
                                amk_ptx_mma_bf16_16816(o1, pa[sp], b[2], b[3]);
                            }
                            if (gr < gh) {
                                float *w = pacc + (int64_t)(gi * R + gr) * hd + d0 + 2 * t4;
                                *(float2 *)w = make_float2(o0[0], o0[1]);
                                *(float2 *)(w + 8) = make_float2(o1[0], o1[1]);
                            }
                            if (gr + 8 < gh) {
                                float *w = pacc + (int64_t)(gi * R + gr + 8) * hd + d0 + 2 * t4;
                                *(float2 *)w = make_float2(o0[2], o0[3]);
                                *(float2 *)(w + 8) = make_float2(o1[2], o1[3]);
                            }
                        }
                    }
                    __syncthreads(); /* the groups' sums and m, l */
                    AMK_OP_MARK(c, 2);
                    for (int h = tid >> 5; h < gh; h += NT >> 5) { /* head h's weights, a lane a group (G <= 32) */
                        const int first = c0 == r0;
                        const float mo = first ? -INFINITY : rml[(par * R + h) * 2];
                        const float mk = lane < G ? pml[(lane * R + h) * 2] : -INFINITY;
                        const float lk = lane < G ? pml[(lane * R + h) * 2 + 1] : 0.0f;
                        const float M = fmaxf(mo, amk_warp_max(mk)); /* finite: every group has a key */
                        const float w = lane < G ? expf(mk - M) : 0.0f, a = first ? 0.0f : expf(mo - M);
                        const float L = amk_warp_sum(w * lk) + (first ? 0.0f : rml[(par * R + h) * 2 + 1] * a);
                        __syncwarp(); /* every lane read its group's m and l */
                        if (lane < G) pml[(lane * R + h) * 2] = w;
                        if (lane == 0) {
                            pml[h * 2 + 1] = a; /* group 0's l slot: the running sums' factor */
                            rml[((par ^ 1) * R + h) * 2] = M;
                            rml[((par ^ 1) * R + h) * 2 + 1] = L;
                        }
                    }
                    __syncthreads(); /* the weights */
                    for (int i = tid; i < gh * hd; i += NT) { /* output (head h, dim e) */
                        const int h = i / hd, e = i - h * hd;
                        float A = c0 == r0 ? 0.0f : racc[i] * pml[h * 2 + 1];
#pragma unroll 4
                        for (int k = 0; k < G; k++) A = fmaf(pml[(k * R + h) * 2], pacc[(int64_t)(k * R + h) * hd + e], A);
                        if (!last) racc[i] = A;
                        else amk_attn_out(optr, odt, partial, h0 + h, hd, e, A, rml[((par ^ 1) * R + h) * 2],
                                          rml[((par ^ 1) * R + h) * 2 + 1]);
                    }
                    __syncthreads(); /* why: the next chunk or pass overwrites K, V, q and the sums */
                }
            }
        }
    }
    AMK_OP_MARK(c, 3); /* the outputs stored */
    return 1;
}

/* ATTENTION_PREFILL's form by warpgroup MMAs (AMK_FORM_ATTN_WG): the sm_90a prefill image's */
#define AMK__ATTN_WG (AMK_ATTN_PF_WG && AMK_ATTN_PREFILL_MMA && AMK_VM_PREFILL && !AMK_PORTABLE)
#if AMK_ATTN_PREFILL_MMA && AMK_VM_PREFILL
/* 2^x in one MUFU.EX2 (2 ulp; -inf gives +0, so masked scores need no test). sm_20+. */
static __device__ __forceinline__ float amk_ptx_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* The maxima of *x_lo and *x_hi over the four lanes that hold a row's values (an mma fragment's
   lanes 4i..4i+3), in place. */
static __device__ __forceinline__ void amk_quad_max2(float *x_lo, float *x_hi) {
    *x_lo = fmaxf(*x_lo, __shfl_xor_sync(0xFFFFFFFFu, *x_lo, 1));
    *x_lo = fmaxf(*x_lo, __shfl_xor_sync(0xFFFFFFFFu, *x_lo, 2));
    *x_hi = fmaxf(*x_hi, __shfl_xor_sync(0xFFFFFFFFu, *x_hi, 1));
    *x_hi = fmaxf(*x_hi, __shfl_xor_sync(0xFFFFFFFFu, *x_hi, 2));
}

/* A flash merge of a thread's two running rows (r and r + 8: max *m, sum *l in log2 units) with
   another split's, read from ml (row i's max at ml[2 i], its sum at ml[2 i + 1]): the merged max and
   sum, and the factors of the thread's own sums (a[0], a[1]: rows r, r + 8) and the other's (b). */
static __device__ __forceinline__ void amk_flash_merge_ml(const float *ml, int r, float *m_lo, float *m_hi, float *l_lo,
                                                          float *l_hi, float *a, float *b) {
    const float o_lo = ml[2 * r], o_hi = ml[2 * (r + 8)];
    const float n_lo = fmaxf(*m_lo, o_lo), n_hi = fmaxf(*m_hi, o_hi);
    a[0] = amk_ptx_ex2(*m_lo - n_lo); b[0] = amk_ptx_ex2(o_lo - n_lo);
    a[1] = amk_ptx_ex2(*m_hi - n_hi); b[1] = amk_ptx_ex2(o_hi - n_hi);
    *l_lo = *l_lo * a[0] + ml[2 * r + 1] * b[0];
    *l_hi = *l_hi * a[1] + ml[2 * (r + 8) + 1] * b[1];
    *m_lo = n_lo;
    *m_hi = n_hi;
}

/* A warp pair's own barrier (64 threads): named barrier 5 + pair, 5..12 (0 is __syncthreads, 1..4
   the warpgroups'). At most 8 pairs (512 threads). why the id in a register: a switch over constant
   ids cost a jump table and two branches a step (run 453). */
static __device__ __forceinline__ void amk_ptx_bar_pair(int pair) {
    asm volatile("bar.sync %0, 64;" :: "r"(5 + pair) : "memory");
}

/* ATTENTION_PREFILL on the tensor cores (AMK_FORM_ATTN_MMA: amk_plan_attn_prefill_mma took the
   task), the flash method. A vector is a (query row m, query head h) pair of the tile, in order of
   rows, then the heads of kv head g; vector (m, h) sees the cache rows [lo(m), pos + m] (lo: the
   sliding window's first row, else 0). A pair of warps owns a group of 16 vectors (the mma's M),
   each warp half of head_dim (its 16-dim slabs: the first half of them, or the rest): per step of
   AMK_ATTN_PF_KS keys each scores its half of q . k by ldmatrix and mma, the two add their partial
   scores through shared memory (a slot a warp, two a step's parity, the pair's own barrier), and
   both then run the same online softmax (masked per vector, in log2 units) and rescale and add p .
   V into their half of the sums, p rounded to q's 16-bit type (AMK_ATTN_PF_PTERMS terms). why pairs: a
   warp's whole head_dim of sums (64 registers at 128) and the step's scores spilled in the VM's
   register budget. A pass takes up to a group a pair; when the groups are fewer than the pairs,
   the spare pairs split the keys (split s takes the steps t with t % S == s) and merge into split
   0's registers at the pass's end, through shared memory. The block stages the pass's q rows once
   and its keys [lo(first row), pos + last row] in chunks of C rows, the next chunk's copies in
   flight while the warps work on this one. Shared memory: AMK_ATTN_PF_SMEM (C as it fits, 32..128).
   HD: head_dim (0: P->head_dim, loops bounded by AMK_ATTN_PF_MAX_HD); WIN 0: no sliding window;
   F16: q, K and V are f16 (else bf16). */
#define AMK_PF_MNONE (-1e30f) /* a running max before any key (finite, far below any score) */
static __device__ __forceinline__ void amk_attn_prefill_body(amk_op_ctx *c, float *smem, const int HD, const int WIN,
                                                             const int F16) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2], *o = &c->out[0];
    const int hd = HD ? HD : P->head_dim, nh = P->n_heads, nkv = P->n_kv_heads, grp = nh / nkv, sw = WIN ? P->sliding_window : 0;
    const int tid = amk_tid(), NT = amk_ntid(), npair = NT >> 6, lane = tid & 31, warp = tid >> 5;
    const int pair = warp >> 1, half = warp & 1, gr = lane >> 2, t4 = lane & 3, mj = lane >> 3, mr = lane & 7;
    /* the warp's 16-dim slabs of head_dim: [s0, s0 + ns) */
    const int hs = (hd / 16 + 1) / 2, s0 = half ? hs : 0, ns = half ? hd / 16 - hs : hs;
    const int KS = AMK_ATTN_PF_KS, NTL = AMK_ATTN_PF_KS / 8, SL = (AMK_ATTN_PF_MAX_HD / 16 + 1) / 2;
    const int rowb = (int)AMK_ATTN_ROW_BYTES(hd, 2);
    const int64_t rows = kc->numel / ((int64_t)nkv * hd);
    const int nv = P->M_tile * grp, ng = (nv + 15) / 16, gp = ng < npair ? ng : npair; /* vectors, groups, groups a pass */
    const float sl2 = P->scale * 1.44269504088896341f; /* scores in log2 units: p = 2^(s - m) */
    const int xb = (NT >> 5) * 2 * KS * 64; /* the partial scores' slots: a warp's KS x 16 floats, two parities */
    int C = (((int)amk_ptx_dynamic_smem_size() - xb) / rowb - 16 * gp) / 4 / 32 * 32;
    const int64_t pos = amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
    /* [q: 16 rows a group][partial scores][K, V: two chunks of [K: C rows][V: C rows]] */
    unsigned char *qs = (unsigned char *)smem, *xs = qs + 16 * gp * rowb, *kv = xs + xb;
    if (C > 128) C = 128;
    if (C < 32 || npair < 1) { /* the planner sized the launch for 32 */
        if (tid == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, hd);
        return;
    }
    if (pos < 0 || pos + P->m_off + P->M_tile > rows) { /* every thread read the same pos */
        if (tid == 0) amk_op_fail(c, AMK_VM_ERR_KV_POS, pos);
        return;
    }
    for (int g = P->n_off; g < P->n_off + P->N_tile; g++) {
        for (int p0 = 0; p0 < ng; p0 += gp) {
            const int np = ng - p0 < gp ? ng - p0 : gp, S = npair / np; /* groups this pass, splits a group */
            /* the pair's group and split (pairs past np * S, and an odd last warp, only stage) */
            const int wg = pair % np, split = pair < npair ? pair / np : S, vb = (p0 + wg) * 16;
            const int vend = (p0 + np) * 16 < nv ? (p0 + np) * 16 : nv;
            /* the pass's keys [r0, r1); the pair's [wmin, wmax]; the thread's two vectors' (rows gr and gr + 8) */
            const int r1 = (int)(pos + P->m_off + (vend - 1) / grp + 1);
            const int r0 = sw > 0 && pos + P->m_off + p0 * 16 / grp + 1 - sw > 0 ? (int)(pos + P->m_off + p0 * 16 / grp + 1 - sw) : 0;
            const int wmax = (int)(pos + P->m_off + ((vb + 15 < nv ? vb + 15 : nv - 1) / grp));
            const int wmin = sw > 0 ? (int)(pos + P->m_off + vb / grp + 1 - sw) : 0;
            const int kmax_lo = (int)(pos + P->m_off + (vb + gr) / grp), kmax_hi = (int)(pos + P->m_off + (vb + gr + 8) / grp);
            const int kmin_lo = sw > 0 ? kmax_lo + 1 - sw : 0, kmin_hi = sw > 0 ? kmax_hi + 1 - sw : 0;
            /* the keys every vector of the group sees: [wall0, wall1] (a step inside needs no mask) */
            const int wall1 = (int)(pos + P->m_off + vb / grp), wall0 = sw > 0 ? wmax + 1 - sw : 0;
            const int nch = (r1 - r0 + C - 1) / C;
            /* m starts at AMK_PF_MNONE, not -inf: with no key yet p = 2^(-inf - m) = 0 and the
               rescale 2^(m - m') needs no test */
            float acc[2 * SL][4], m_lo = AMK_PF_MNONE, m_hi = AMK_PF_MNONE, l_lo = 0.0f, l_hi = 0.0f;
            int par = 0;
#pragma unroll
            for (int d = 0; d < 2 * SL; d++) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.0f;
            for (int i = tid; i < np * 16 * (hd / 8); i += NT) { /* q's 16-byte pieces (vectors past nv: zero) */
                const int vr = i / (hd / 8), e = (i - vr * (hd / 8)) * 8, v = p0 * 16 + vr;
                uint4 u = make_uint4(0u, 0u, 0u, 0u);
                if (v < nv) {
                    const uint16_t *src = (const uint16_t *)q->ptr + ((P->m_off + v / grp) * (int64_t)nh + (int64_t)g * grp + v % grp) * hd + e;
                    if (((uintptr_t)src & 15) == 0) {
                        u = *(const uint4 *)src;
                    } else {
                        uint16_t t[8];
                        for (int k = 0; k < 8; k++) t[k] = src[k];
                        u = make_uint4(t[0] | (uint32_t)t[1] << 16, t[2] | (uint32_t)t[3] << 16, t[4] | (uint32_t)t[5] << 16,
                                       t[6] | (uint32_t)t[7] << 16);
                    }
                }
                *(uint4 *)(qs + vr * rowb + e * 2) = u;
            }
            amk_attn_load_rows(kv, kv + C * rowb, kc, vc, r0, r1 - r0 < C ? r1 - r0 : C, C, g, nkv, hd, 2, rowb, tid, NT);
            amk_ptx_cp_async_commit();
            for (int j = 0; j < nch; j++) {
                const int c0 = r0 + j * C, n = r1 - c0 < C ? r1 - c0 : C;
                /* the warp's ldmatrix rows: q's (its group, its first slab), K's and V's (this chunk's buffer) */
                const uint32_t qa = (uint32_t)__cvta_generic_to_shared(qs) + (wg * 16 + mr + 8 * (mj & 1)) * rowb + 16 * (mj >> 1) + 32 * s0;
                const uint32_t ka = (uint32_t)__cvta_generic_to_shared(kv + (j & 1) * 2 * C * rowb) + (8 * (mj >> 1) + mr) * rowb + 16 * (mj & 1) + 32 * s0;
                const uint32_t va = (uint32_t)__cvta_generic_to_shared(kv + (j & 1) * 2 * C * rowb + C * rowb) + (8 * (mj & 1) + mr) * rowb + 16 * (mj >> 1) + 32 * s0;
                if (j + 1 < nch) { /* the next chunk into the other buffer (free since the last barrier) */
                    const int c1 = c0 + C;
                    unsigned char *k1 = kv + ((j + 1) & 1) * 2 * C * rowb;
                    amk_attn_load_rows(k1, k1 + C * rowb, kc, vc, c1, r1 - c1 < C ? r1 - c1 : C, C, g, nkv, hd, 2, rowb, tid, NT);
                    amk_ptx_cp_async_commit();
                    amk_ptx_cp_async_wait_pending(1);
                } else {
                    amk_ptx_cp_async_wait_pending(0);
                }
                __syncthreads(); /* the chunk (and q) staged */
                /* the split's steps: t = (j * C + k0) / KS with t % S == split (the pair's two warps alike) */
                for (int k0 = (split - j * (C / KS) % S + S) % S * KS; split < S && k0 < n; k0 += S * KS) {
                    const int kb = c0 + k0; /* the step's first key */
                    if (kb > wmax || kb + KS - 1 < wmin) continue;
                    float s[AMK_ATTN_PF_KS / 8][4];
                    float *mine = (float *)(xs + (warp * 2 + par) * KS * 64), *other = (float *)(xs + ((warp ^ 1) * 2 + par) * KS * 64);
#pragma unroll
                    for (int nt = 0; nt < NTL; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
                    for (int sl = 0; sl < SL; sl++) { /* the warp's half of the scores: 16 vectors x KS keys */
                        if (sl < ns) {
                            uint32_t a[4], b[4];
                            amk_ptx_ldmatrix_x4_at(a, qa + 32 * sl);
#pragma unroll
                            for (int h2 = 0; h2 < KS / 16; h2++) {
                                amk_ptx_ldmatrix_x4_at(b, ka + (k0 + 16 * h2) * rowb + 32 * sl);
                                amk_ptx_mma_16816_x2(s[2 * h2], s[2 * h2 + 1], a, b, F16);
                            }
                        }
                    }
#pragma unroll
                    for (int nt = 0; nt < NTL; nt++) *(float4 *)(mine + (nt * 32 + lane) * 4) = make_float4(s[nt][0], s[nt][1], s[nt][2], s[nt][3]);
                    amk_ptx_bar_pair(pair);
                    float x_lo = -INFINITY, x_hi = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < NTL; nt++) {
                        const float4 u = *(const float4 *)(other + (nt * 32 + lane) * 4);
                        s[nt][0] = (s[nt][0] + u.x) * sl2; s[nt][1] = (s[nt][1] + u.y) * sl2;
                        s[nt][2] = (s[nt][2] + u.z) * sl2; s[nt][3] = (s[nt][3] + u.w) * sl2;
                    }
                    if (kb < wall0 || kb + KS - 1 > wall1) { /* a step on the diagonal or the window's edge */
#pragma unroll
                        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                            for (int i = 0; i < 4; i++) { /* keys outside the vector's range: -inf (past r1 they are) */
                                const int key = kb + 8 * nt + 2 * t4 + (i & 1);
                                const int ok = i < 2 ? key >= kmin_lo && key <= kmax_lo : key >= kmin_hi && key <= kmax_hi;
                                if (!ok) s[nt][i] = -INFINITY;
                            }
                    }
#pragma unroll
                    for (int nt = 0; nt < NTL; nt++) {
                        x_lo = fmaxf(x_lo, fmaxf(s[nt][0], s[nt][1]));
                        x_hi = fmaxf(x_hi, fmaxf(s[nt][2], s[nt][3]));
                    }
                    par ^= 1;
                    amk_quad_max2(&x_lo, &x_hi);
                    {
                        const float n_lo = fmaxf(m_lo, x_lo), n_hi = fmaxf(m_hi, x_hi);
                        const float a_lo = amk_ptx_ex2(m_lo - n_lo), a_hi = amk_ptx_ex2(m_hi - n_hi);
                        l_lo *= a_lo;
                        l_hi *= a_hi;
#pragma unroll
                        for (int nt = 0; nt < NTL; nt++) {
                            s[nt][0] = amk_ptx_ex2(s[nt][0] - n_lo); s[nt][1] = amk_ptx_ex2(s[nt][1] - n_lo);
                            s[nt][2] = amk_ptx_ex2(s[nt][2] - n_hi); s[nt][3] = amk_ptx_ex2(s[nt][3] - n_hi);
                            l_lo += s[nt][0] + s[nt][1];
                            l_hi += s[nt][2] + s[nt][3];
                        }
#pragma unroll
                        for (int d = 0; d < 2 * SL; d++) {
                            acc[d][0] *= a_lo; acc[d][1] *= a_lo;
                            acc[d][2] *= a_hi; acc[d][3] *= a_hi;
                        }
                        m_lo = n_lo;
                        m_hi = n_hi;
                    }
#pragma unroll
                    for (int h2 = 0; h2 < KS / 16; h2++) { /* p . V over the warp's slabs, 16 keys at a time */
                        float x[4][2];
#pragma unroll
                        for (int r = 0; r < 4; r++) { x[r][0] = s[2 * h2 + (r >> 1)][2 * (r & 1)]; x[r][1] = s[2 * h2 + (r >> 1)][2 * (r & 1) + 1]; }
#pragma unroll
                        for (int sp = 0; sp < AMK_ATTN_PF_PTERMS; sp++) {
                            uint32_t pa[4];
#pragma unroll
                            for (int r = 0; r < 4; r++) { /* the A fragment: rows gr / gr + 8, keys 2t4.. / 8 + 2t4.. */
                                if (F16) {
                                    pa[r] = amk_pack_f16x2(x[r][0], x[r][1]);
                                    x[r][0] -= __half2float(__ushort_as_half((unsigned short)(pa[r] & 0xFFFFu)));
                                    x[r][1] -= __half2float(__ushort_as_half((unsigned short)(pa[r] >> 16)));
                                } else {
                                    pa[r] = amk_pack_bf16x2(x[r][0], x[r][1]);
                                    x[r][0] -= __uint_as_float(pa[r] << 16);
                                    x[r][1] -= __uint_as_float(pa[r] & 0xFFFF0000u);
                                }
                            }
#pragma unroll
                            for (int sl = 0; sl < SL; sl++) {
                                if (sl < ns) {
                                    uint32_t b[4];
                                    amk_ptx_ldmatrix_x4_trans_at(b, va + (k0 + 16 * h2) * rowb + 32 * sl);
                                    amk_ptx_mma_16816_x2(acc[2 * sl], acc[2 * sl + 1], pa, b, F16);
                                }
                            }
                        }
                    }
                }
                __syncthreads(); /* why: the next chunk's copies go into this buffer */
            }
            l_lo += __shfl_xor_sync(0xFFFFFFFFu, l_lo, 1);
            l_lo += __shfl_xor_sync(0xFFFFFFFFu, l_lo, 2);
            l_hi += __shfl_xor_sync(0xFFFFFFFFu, l_hi, 1);
            l_hi += __shfl_xor_sync(0xFFFFFFFFu, l_hi, 2);
            for (int k = 1; k < S; k++) { /* split k's sums into split 0's (the staging is free: all chunks are done) */
                float *slot = smem + (int64_t)wg * 16 * (hd + 2), *ml = slot + 16 * hd;
                if (split == k) {
#pragma unroll
                    for (int sl = 0; sl < SL; sl++)
                        if (sl < ns)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                const int dim = 16 * (s0 + sl) + 8 * e + 2 * t4;
                                *(float2 *)(slot + gr * hd + dim) = make_float2(acc[2 * sl + e][0], acc[2 * sl + e][1]);
                                *(float2 *)(slot + (gr + 8) * hd + dim) = make_float2(acc[2 * sl + e][2], acc[2 * sl + e][3]);
                            }
                    if (t4 == 0 && half == 0) {
                        ml[2 * gr] = m_lo; ml[2 * gr + 1] = l_lo;
                        ml[2 * (gr + 8)] = m_hi; ml[2 * (gr + 8) + 1] = l_hi;
                    }
                }
                __syncthreads();
                if (split == 0) {
                    float fa[2], fb[2];
                    amk_flash_merge_ml(ml, gr, &m_lo, &m_hi, &l_lo, &l_hi, fa, fb);
#pragma unroll
                    for (int sl = 0; sl < SL; sl++)
                        if (sl < ns)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                const int dim = 16 * (s0 + sl) + 8 * e + 2 * t4;
                                const float2 u = *(const float2 *)(slot + gr * hd + dim), w = *(const float2 *)(slot + (gr + 8) * hd + dim);
                                float *a = acc[2 * sl + e];
                                a[0] = a[0] * fa[0] + u.x * fb[0]; a[1] = a[1] * fa[0] + u.y * fb[0];
                                a[2] = a[2] * fa[1] + w.x * fb[1]; a[3] = a[3] * fa[1] + w.y * fb[1];
                            }
                }
                __syncthreads(); /* why: split k + 1 writes the slot next */
            }
            if (split == 0) { /* the results acc / l into slot wg (every vector sees its own row, so l > 0) */
                float *slot = smem + (int64_t)wg * 16 * hd;
                const float i_lo = 1.0f / l_lo, i_hi = 1.0f / l_hi;
#pragma unroll
                for (int sl = 0; sl < SL; sl++)
                    if (sl < ns)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int dim = 16 * (s0 + sl) + 8 * e + 2 * t4;
                            *(float2 *)(slot + gr * hd + dim) = make_float2(acc[2 * sl + e][0] * i_lo, acc[2 * sl + e][1] * i_lo);
                            *(float2 *)(slot + (gr + 8) * hd + dim) = make_float2(acc[2 * sl + e][2] * i_hi, acc[2 * sl + e][3] * i_hi);
                        }
            }
            __syncthreads();
            for (int i = tid; i < (vend - p0 * 16) * hd; i += NT) { /* the block stores the pass's results */
                const int vr = i / hd, e = i - vr * hd, v = p0 * 16 + vr;
                const int64_t at = ((P->m_off + v / grp) * (int64_t)nh + (int64_t)g * grp + v % grp) * hd + e;
                if (o->dtype == AMK_DTYPE_BF16) ((__nv_bfloat16 *)o->ptr)[at] = __float2bfloat16_rn(smem[i]);
                else if (o->dtype == AMK_DTYPE_F16) ((__half *)o->ptr)[at] = __float2half_rn(smem[i]);
                else ((float *)o->ptr)[at] = smem[i];
            }
            __syncthreads(); /* why: the next pass stages q here */
        }
    }
}
#if AMK__ATTN_WG
/* 1/x in one MUFU.RCP (1 ulp), no slow path. */
static __device__ __forceinline__ float amk_ptx_rcp(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* The byte offset of row r's 16-byte unit u in amk_attn_pf_wg's 64-row blocks (a block of 64 rows
   of 128 bytes for every 64 columns, 128-byte swizzle). */
static __device__ __forceinline__ uint32_t amk_attn_wg_at(int r, int u) {
    return (uint32_t)(u >> 3) * 8192u + (uint32_t)(r & 63) * 128u + (uint32_t)((u & 7) ^ (r & 7)) * 16u;
}

/* The keys [c0, c0 + CH) of kv head g (CH = S AMK_ATTN_WG_KEYS) into a chunk at dst (amk_attn_pf_wg's
   layout), by cp.async; rows at r1 and past it as zeros. */
static __device__ __forceinline__ void amk_attn_wg_load(unsigned char *dst, const amk_buffer_t *kc, const amk_buffer_t *vc,
                                                        int c0, int r1, int S, int g, int nkv, const int HD, int tid) {
    const int UR = HD / 8, CH = AMK_ATTN_WG_KEYS * S; /* 16-byte units a row; keys a chunk */
    const uint32_t KVB = (uint32_t)AMK_ATTN_WG_KEYS * HD * 2u;
    for (int i = tid; i < 2 * CH * UR; i += 512) {
        const int u = i % UR, k = (i / UR) % CH, isv = i / (UR * CH), r = c0 + k, ok = r < r1;
        const uint32_t off = (uint32_t)(k / AMK_ATTN_WG_KEYS) * 2u * KVB + (uint32_t)isv * KVB + amk_attn_wg_at(k, u);
        const uint16_t *src = (const uint16_t *)(isv ? vc->ptr : kc->ptr) + ((int64_t)(ok ? r : 0) * nkv + g) * HD + u * 8;
        amk_ptx_cp_async_16_zfill(dst + off, src, ok ? 16u : 0u);
    }
}

/* ATTENTION_PREFILL by warpgroup MMAs (amk_plan_attn_pf_wg_bytes took the task: 512 threads,
   head_dim HD 64 or 128, no sliding window): the flash method over amk_attn_prefill_body's
   vectors, vector v = (row v / grp, head v % grp of kv head g) seeing the cache rows [0, pos + m].
   Warpgroup w owns a group of 64 vectors (wgmma's M); a pass takes np <= 4 groups, and with np <= 2
   the warpgroups past them split the keys (S = 2: split w / np takes the second 64 keys of each
   chunk). A step of a warpgroup: the scores of its 64 vectors x AMK_ATTN_WG_STEP keys by wgmma from
   q's and K's rows in shared memory; the online softmax on them in registers (a thread holds 8 keys
   of two vectors, in log2 units, masked on the diagonal); p . V by wgmma with p from those registers (the
   accumulator's layout is the A fragment's, so p is only rounded to 16 bits) and V's rows as they
   lie (N-major). The block copies the next chunk (AMK_ATTN_WG_KEYS keys a split) by cp.async while the
   warpgroups work on this one; keys at the pass's end and past it are zeros. Shared memory
   (AMK_ATTN_WG_SMEM): q [np groups][HD / 64 column blocks][64 rows of 128 bytes], then two chunks of
   [S splits][K, V][HD / 64 blocks][64 keys of 128 bytes], all with 128-byte swizzle (the 16-byte
   unit u of row r at u ^ (r & 7)); the splits merge through the chunks' memory. F16: q, K and V
   f16 (else bf16). */
static __device__ __forceinline__ void amk_attn_pf_wg_body(amk_op_ctx *c, float *smem, int64_t pos, const int HD,
                                                           const int F16) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2], *o = &c->out[0];
    const int nh = P->n_heads, nkv = P->n_kv_heads, grp = nh / nkv, KB = AMK_ATTN_WG_KEYS, UR = HD / 8;
    const int tid = amk_tid(), wg = tid >> 7, w4 = (tid >> 5) & 3, lane = tid & 31, gr = lane >> 2, t4 = lane & 3;
    const uint32_t QG = 64u * HD * 2u, KVB = (uint32_t)KB * HD * 2u; /* a group's q; a split's K (or V) */
    const int nv = P->M_tile * grp, ng = (nv + 63) / 64;
    const float sl2 = P->scale * 1.44269504088896341f; /* scores in log2 units: p = 2^(s - m) */
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem), base = (s0 + 1023u) & ~1023u;
    unsigned char *const sb = (unsigned char *)smem + (base - s0);
    for (int g = P->n_off; g < P->n_off + P->N_tile; g++) {
        for (int p0 = 0; p0 < ng;) {
            const int np = ng - p0 < 4 ? ng - p0 : 4, S = np <= 2 ? 2 : 1, CH = KB * S; /* groups, splits, keys a chunk */
            const int gq = wg % np, split = wg / np, act = wg < np * S; /* the warpgroup's group and split */
            const int vb = (p0 + gq) * 64, vend = (p0 + np) * 64 < nv ? (p0 + np) * 64 : nv;
            const int64_t m0 = pos + P->m_off; /* row m sees the keys [0, m0 + m] */
            /* the pass's keys [0, r1); the group's last (wmax) and the key every vector of the group
               sees (wall: a step up to it needs no mask); the thread's two vectors' last */
            const int r1 = (int)(m0 + (vend - 1) / grp + 1), nch = (r1 + CH - 1) / CH;
            const int wmax = (int)(m0 + (vb + 63 < nv ? vb + 63 : nv - 1) / grp), wall = (int)(m0 + vb / grp);
            const int v_lo = vb + 16 * w4 + gr, kmax_lo = (int)(m0 + v_lo / grp), kmax_hi = (int)(m0 + (v_lo + 8) / grp);
            const uint32_t qs = base + (uint32_t)gq * QG, kvs = base + (uint32_t)np * QG, cb = 2u * (uint32_t)S * KVB;
            /* m starts at AMK_PF_MNONE, not -inf (amk_attn_prefill_body's reason) */
            float acc[64], m_lo = AMK_PF_MNONE, m_hi = AMK_PF_MNONE, l_lo = 0.0f, l_hi = 0.0f;
#pragma unroll
            for (int i = 0; i < HD / 2; i++) acc[i] = 0.0f;
            for (int i = tid; i < np * 64 * UR; i += 512) { /* q's rows (vectors past nv: zeros) */
                const int r = i / UR, u = i % UR, v = p0 * 64 + r, w = v < nv ? v : 0;
                const uint16_t *src = (const uint16_t *)q->ptr + ((P->m_off + w / grp) * (int64_t)nh + (int64_t)g * grp + w % grp) * HD + u * 8;
                amk_ptx_cp_async_16_zfill(sb + (uint32_t)(r >> 6) * QG + amk_attn_wg_at(r, u), src, v < nv ? 16u : 0u);
            }
            amk_attn_wg_load(sb + (kvs - base), kc, vc, 0, r1, S, g, nkv, HD, tid);
            amk_ptx_cp_async_commit();
            for (int j = 0; j < nch; j++) {
                const int kb = j * CH + KB * split; /* the warpgroup's step: keys [kb, kb + KB) */
                amk_ptx_cp_async_wait_pending(0);
                amk_ptx_fence_proxy_async_smem(); /* the MMAs read what the copies wrote */
                __syncthreads(); /* chunk j is in; every warpgroup is done with chunk j - 1's buffer */
                if (j + 1 < nch) {
                    amk_attn_wg_load(sb + (kvs - base) + ((j + 1) & 1) * cb, kc, vc, (j + 1) * CH, r1, S, g, nkv, HD, tid);
                    amk_ptx_cp_async_commit();
                }
                for (int h = 0; h < KB / AMK_ATTN_WG_STEP; h++) { /* its steps of AMK_ATTN_WG_STEP keys */
                    const int k0 = kb + h * AMK_ATTN_WG_STEP, NS = AMK_ATTN_WG_STEP;
                    if (!act || k0 > wmax) break; /* (uniform in the warpgroup) */
                    const uint32_t ks = kvs + (uint32_t)(j & 1) * cb + (uint32_t)split * 2u * KVB + (uint32_t)h * NS * 128u;
                    const uint32_t vs = ks + KVB;
                    float s[AMK_ATTN_WG_STEP / 2], x_lo = -INFINITY, x_hi = -INFINITY, e_lo = 0.0f, e_hi = 0.0f;
                    uint32_t pa[AMK_ATTN_WG_STEP / 4];
                    amk_ptx_wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < HD / 16; kk++) { /* +16 dims: 32 bytes, a column block every 64 */
                        const uint32_t d = (uint32_t)(kk >> 2) * 8192u + (uint32_t)(kk & 3) * 32u;
                        amk_ptx_wgmma_m64n32k16(s, amk_wg_desc(qs + d, 16), amk_wg_desc(ks + d, 16), kk > 0, F16);
                    }
                    amk_ptx_wgmma_commit();
                    amk_ptx_wgmma_wait_all();
                    /* s[4i + e]: vector v_lo (e < 2) or v_lo + 8, key k0 + 8i + 2 t4 + (e & 1) */
#pragma unroll
                    for (int i = 0; i < NS / 2; i++) s[i] *= sl2;
                    if (k0 + NS - 1 > wall) { /* a step on the diagonal: keys past a vector's row are -inf */
#pragma unroll
                        for (int i = 0; i < NS / 2; i++)
                            if (k0 + 8 * (i >> 2) + 2 * t4 + (i & 1) > ((i & 2) ? kmax_hi : kmax_lo)) s[i] = -INFINITY;
                    }
#pragma unroll
                    for (int i = 0; i < NS / 2; i += 4) {
                        x_lo = fmaxf(x_lo, fmaxf(s[i], s[i + 1]));
                        x_hi = fmaxf(x_hi, fmaxf(s[i + 2], s[i + 3]));
                    }
                    amk_quad_max2(&x_lo, &x_hi);
                    const float n_lo = fmaxf(m_lo, x_lo), n_hi = fmaxf(m_hi, x_hi);
                    const float a_lo = amk_ptx_ex2(m_lo - n_lo), a_hi = amk_ptx_ex2(m_hi - n_hi);
#pragma unroll
                    for (int i = 0; i < NS / 2; i += 4) { /* p, and its A fragments: pa[4 j2 ..] keys 16 j2.. */
                        const float p0v = amk_ptx_ex2(s[i] - n_lo), p1v = amk_ptx_ex2(s[i + 1] - n_lo);
                        const float p2v = amk_ptx_ex2(s[i + 2] - n_hi), p3v = amk_ptx_ex2(s[i + 3] - n_hi);
                        e_lo += p0v + p1v;
                        e_hi += p2v + p3v;
                        pa[i / 2] = F16 ? amk_pack_f16x2(p0v, p1v) : amk_pack_bf16x2(p0v, p1v);
                        pa[i / 2 + 1] = F16 ? amk_pack_f16x2(p2v, p3v) : amk_pack_bf16x2(p2v, p3v);
                    }
                    l_lo = l_lo * a_lo + e_lo;
                    l_hi = l_hi * a_hi + e_hi;
                    m_lo = n_lo;
                    m_hi = n_hi;
#pragma unroll
                    for (int i = 0; i < HD / 2; i += 4) {
                        acc[i] *= a_lo; acc[i + 1] *= a_lo;
                        acc[i + 2] *= a_hi; acc[i + 3] *= a_hi;
                    }
                    amk_ptx_wgmma_fence();
#pragma unroll
                    for (int j2 = 0; j2 < NS / 16; j2++) { /* +16 keys: 2048 bytes; V's column blocks 8192 apart */
                        const uint64_t dv = amk_wg_desc(vs + (uint32_t)j2 * 2048u, 8192u);
                        if (HD == 128) amk_ptx_wgmma_rs_m64n128k16(acc, pa + 4 * j2, dv, F16);
                        else amk_ptx_wgmma_rs_m64n64k16(acc, pa + 4 * j2, dv, F16);
                    }
                    amk_ptx_wgmma_commit();
                    amk_ptx_wgmma_wait_all();
                }
            }
            l_lo += __shfl_xor_sync(0xFFFFFFFFu, l_lo, 1);
            l_lo += __shfl_xor_sync(0xFFFFFFFFu, l_lo, 2);
            l_hi += __shfl_xor_sync(0xFFFFFFFFu, l_hi, 1);
            l_hi += __shfl_xor_sync(0xFFFFFFFFu, l_hi, 2);
            if (S > 1) { /* split 1's sums into split 0's, through a slot a group in the chunks' memory */
                const int LD = HD + 8, rl = 16 * w4 + gr; /* a slot's row stride (floats), the thread's first row */
                float *slot = (float *)(sb + (kvs - base) + (uint32_t)gq * (64u * (uint32_t)LD * 4u + 512u)), *ml = slot + 64 * LD;
                __syncthreads(); /* every warpgroup is done with the chunks */
                if (act && split == 1) {
#pragma unroll
                    for (int i = 0; i < HD / 2; i += 4) {
                        const int d = 8 * (i >> 2) + 2 * t4;
                        *(float2 *)(slot + rl * LD + d) = make_float2(acc[i], acc[i + 1]);
                        *(float2 *)(slot + (rl + 8) * LD + d) = make_float2(acc[i + 2], acc[i + 3]);
                    }
                    if (t4 == 0) {
                        ml[2 * rl] = m_lo; ml[2 * rl + 1] = l_lo;
                        ml[2 * (rl + 8)] = m_hi; ml[2 * (rl + 8) + 1] = l_hi;
                    }
                }
                __syncthreads();
                if (act && split == 0) {
                    float fa[2], fb[2];
                    amk_flash_merge_ml(ml, rl, &m_lo, &m_hi, &l_lo, &l_hi, fa, fb);
#pragma unroll
                    for (int i = 0; i < HD / 2; i += 4) {
                        const int d = 8 * (i >> 2) + 2 * t4;
                        const float2 u = *(const float2 *)(slot + rl * LD + d), w = *(const float2 *)(slot + (rl + 8) * LD + d);
                        acc[i] = acc[i] * fa[0] + u.x * fb[0]; acc[i + 1] = acc[i + 1] * fa[0] + u.y * fb[0];
                        acc[i + 2] = acc[i + 2] * fa[1] + w.x * fb[1]; acc[i + 3] = acc[i + 3] * fa[1] + w.y * fb[1];
                    }
                }
            }
            if (act && split == 0) { /* acc / l into the output rows (every vector sees its own row: l > 0) */
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int v = v_lo + 8 * h;
                    const float iv = amk_ptx_rcp(h ? l_hi : l_lo);
                    if (v >= nv) continue;
                    const int64_t at = ((P->m_off + v / grp) * (int64_t)nh + (int64_t)g * grp + v % grp) * HD + 2 * t4;
#pragma unroll
                    for (int i = 0; i < HD / 2; i += 4) {
                        const float y0 = acc[i + 2 * h] * iv, y1 = acc[i + 2 * h + 1] * iv;
                        const int64_t e = at + 8 * (i >> 2);
                        if (o->dtype == AMK_DTYPE_BF16) *(uint32_t *)((__nv_bfloat16 *)o->ptr + e) = amk_pack_bf16x2(y0, y1);
                        else if (o->dtype == AMK_DTYPE_F16) *(uint32_t *)((__half *)o->ptr + e) = amk_pack_f16x2(y0, y1);
                        else *(float2 *)((float *)o->ptr + e) = make_float2(y0, y1);
                    }
                }
            }
            __syncthreads(); /* why: the next pass stages q and the chunks over this one's */
            p0 += np;
        }
    }
}
/* ATTENTION_PREFILL in the form AMK_FORM_ATTN_WG (amk_plan_form): amk_attn_pf_wg_body's four
   bodies; rows [pos + m_off, + M_tile) outside the cache are a run-time error. why inlined at its
   one call (amk_op_dispatch): a wgmma in a function the VM calls makes ptxas serialise every
   wgmma of the kernel (C7510; bench/NOTES.md session "rows") */
static __device__ __forceinline__ void amk_attn_pf_wg(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const int hd = P->head_dim, f16 = c->in[0].dtype == AMK_DTYPE_F16;
    const int64_t pos = amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
    if (pos < 0 || pos + P->m_off + P->M_tile > c->in[1].numel / ((int64_t)P->n_kv_heads * hd)) { /* every thread read pos */
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_KV_POS, pos);
        return;
    }
    if (hd == 128 && f16) amk_attn_pf_wg_body(c, smem, pos, 128, 1);
    else if (hd == 128) amk_attn_pf_wg_body(c, smem, pos, 128, 0);
    else if (f16) amk_attn_pf_wg_body(c, smem, pos, 64, 1);
    else amk_attn_pf_wg_body(c, smem, pos, 64, 0);
}
#endif /* AMK__ATTN_WG */
#undef AMK_PF_MNONE
/* why three bodies: with head_dim a constant and no window the loops carry no guards */
static __device__ __noinline__ void amk_attn_prefill_mma(amk_op_ctx *c, float *smem) {
    const int hd = c->ins.params.head_dim, win = c->ins.params.sliding_window > 0;
    const int f16 = c->in[0].dtype == AMK_DTYPE_F16;
    /* why head_dim 128 and 64 apart: the loops bounded by a constant (the general body: +30% on
       the 8B, run 449) */
    if (hd == 128 && !win) {
        if (f16) amk_attn_prefill_body(c, smem, 128, 0, 1);
        else amk_attn_prefill_body(c, smem, 128, 0, 0);
    } else if (hd == 64 && !win) {
        if (f16) amk_attn_prefill_body(c, smem, 64, 0, 1);
        else amk_attn_prefill_body(c, smem, 64, 0, 0);
    } else if (f16) {
        amk_attn_prefill_body(c, smem, 0, 1, 1);
    } else {
        amk_attn_prefill_body(c, smem, 0, 1, 0);
    }
}
#endif /* AMK_ATTN_PREFILL_MMA && AMK_VM_PREFILL */

/* ATTENTION_DECODE on the CUDA cores: any dtypes, results to optr (dtype odt), dyn bytes of
   shared memory from smem. */
static __device__ __forceinline__ void amk_attn_decode_cc(amk_op_ctx *c, float *smem, uint64_t optr, int odt,
                                                          int64_t dyn) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2];
    const int hd = P->head_dim, grp = P->n_heads / P->n_kv_heads, nkv = P->n_kv_heads;
    const int tid = amk_tid(), NT = amk_ntid(), lane = tid & 31, warp = tid >> 5, nw = NT >> 5;
    const int partial = (P->flags & AMK_ATTN_FLAG_PARTIAL) != 0, GH = AMK_ATTN_GH;
    const int dt = kc->dtype;
    const int esz = dt == AMK_DTYPE_F32 ? 4 : dt == AMK_DTYPE_F16 || dt == AMK_DTYPE_BF16 ? 2 : 0;
    /* why: cp.async moves whole 16-byte pieces; other rows go through amk_load into F32 */
    const int vec = esz && vc->dtype == dt && (hd * esz) % 16 == 0;
    const int fmt = vec ? dt : AMK_DTYPE_F32, fsz = vec ? esz : 4;
    const int vece = !vec ? 1 : esz == 2 ? 8 : 4, nvec = hd / vece; /* elements per vector, vectors per row */
    const int64_t rowb = AMK_ATTN_ROW_BYTES(hd, fsz);
    /* p.V: KG groups of (hd + 1) / 2 threads, thread (kg, d) owns dims d, d + 1 of every head */
    const int KG = AMK_ATTN_KEY_GROUPS(hd, NT), kg = tid / ((hd + 1) / 2), d = 2 * (tid - kg * ((hd + 1) / 2));
    const int pv = kg < KG;
    if (!amk_op_go(c)) return;
    const int64_t pos = amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
    int64_t r0 = P->kv_start, r1 = (int64_t)P->kv_start + P->kv_len, loaded = -1;
    int C = (int)((dyn - AMK_ATTN_DECODE_FIXED(hd, KG)) / AMK_ATTN_DECODE_PER_ROW(rowb)) & ~31;
    float *qs = smem, *mla = qs + GH * hd, *ss, *red;
    unsigned char *ks, *vs;
    if (C > 512) C = 512;
    if ((r1 - r0 + 31) / 32 * 32 < C) C = (int)((r1 - r0 + 31) / 32 * 32);
    if (C < 32) C = 32;
    ss = mla + 4 * GH;
    red = ss + (int64_t)GH * C;
    ks = (unsigned char *)(red + (int64_t)KG * GH * hd);
    vs = ks + (int64_t)C * rowb;
    if (AMK_ATTN_DECODE_SMEM(hd, rowb, KG, C) > dyn || hd > 32 * AMK_ATTN_DPL) {
        if (tid == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, hd); /* host checks: never for a checked program */
        return;
    }
    if (pos < 0) { /* uniform: every thread read the same position */
        if (tid == 0) amk_op_fail(c, AMK_VM_ERR_ROPE_POS, pos);
        return;
    }
    if (pos + 1 < r1) r1 = pos + 1;
    if (P->sliding_window > 0 && pos + 1 - P->sliding_window > r0) r0 = pos + 1 - P->sliding_window; /* rows (pos - window, pos] */
    for (int g = P->n_off; g < P->n_off + P->N_tile; g++) {
        for (int hp = 0; hp < grp; hp += GH) {
            const int gh = grp - hp < GH ? grp - hp : GH;
            const int64_t h0 = (int64_t)g * grp + hp; /* the pass's first query head */
            for (int i = tid; i < GH * hd; i += NT) /* heads past gh score as 0 and are never stored */
                qs[i] = i < gh * hd ? amk_load((const void *)q->ptr, q->dtype, h0 * hd + i) : 0.0f;
            if (tid < GH) { mla[tid] = -INFINITY; mla[GH + tid] = 0.0f; }
            for (int64_t c0 = r0; c0 < r1; c0 += C) {
                const int n = (int)(r1 - c0 < C ? r1 - c0 : C);
                const int kpt = n * 4 <= NT && nvec >= 4 ? 4 : n * 2 <= NT && nvec >= 2 ? 2 : 1;
                if (loaded != c0 * nkv + g) { /* why: one chunk and several passes: K and V stay */
                    if (vec) {
                        amk_attn_load_rows(ks, vs, kc, vc, c0, n, n, g, nkv, hd, esz, rowb, tid, NT);
                        amk_ptx_cp_async_wait_all();
                    } else {
                        for (int e = tid; e < 2 * n * hd; e += NT) {
                            const int isv = e >= n * hd, r = e - isv * n * hd, row = r / hd, col = r - row * hd;
                            const amk_buffer_t *b = isv ? vc : kc;
                            ((float *)((isv ? vs : ks) + row * rowb))[col] =
                                amk_load((const void *)b->ptr, b->dtype, ((c0 + row) * nkv + g) * hd + col);
                        }
                    }
                    loaded = r1 - r0 <= C ? c0 * nkv + g : -1;
                }
                __syncthreads(); /* K, V (and q, m, l) staged */
                for (int kb = 0; kb < n; kb += NT / kpt) { /* scores: kpt lanes a key */
                    const int key = kb + tid / kpt, sub = tid % kpt;
                    float sc[AMK_ATTN_GH] = {0.0f};
                    if (key < n) {
                        const unsigned char *kr = ks + key * rowb;
                        if (fmt == AMK_DTYPE_BF16) AMK__ATTN_QK(8, amk_unpack_bf16x8(((const uint4 *)kr)[vi], k_));
                        else if (fmt == AMK_DTYPE_F16) AMK__ATTN_QK(8, amk_unpack_f16x8(((const uint4 *)kr)[vi], k_));
                        else if (vec) AMK__ATTN_QK(4, amk_unpack_f32x4(((const uint4 *)kr)[vi], k_));
                        else
                            for (int col = sub; col < hd; col += kpt)
#pragma unroll
                                for (int h = 0; h < AMK_ATTN_GH; h++)
                                    sc[h] = fmaf(qs[h * hd + col], ((const float *)kr)[col], sc[h]);
                    }
#pragma unroll
                    for (int h = 0; h < AMK_ATTN_GH; h++) {
                        for (int o2 = 1; o2 < kpt; o2 <<= 1) sc[h] += __shfl_xor_sync(0xFFFFFFFFu, sc[h], o2);
                        if (key < n && sub == 0 && h < gh) ss[h * C + key] = sc[h] * P->scale;
                    }
                }
                __syncthreads();
                for (int h = warp; h < gh; h += nw) { /* online softmax of head h over the chunk */
                    float mx = -INFINITY, sum = 0.0f, m_new, a;
                    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, ss[h * C + j]);
                    m_new = fmaxf(mla[h], amk_warp_max(mx));
                    for (int j = lane; j < n; j += 32) {
                        const float p = expf(ss[h * C + j] - m_new);
                        ss[h * C + j] = p;
                        sum += p;
                    }
                    sum = amk_warp_sum(sum);
                    a = expf(mla[h] - m_new);
                    __syncwarp();
                    if (lane == 0) { mla[GH + h] = mla[GH + h] * a + sum; mla[2 * GH + h] = a; mla[h] = m_new; }
                }
                __syncthreads();
                if (pv) { /* p.V: thread (kg, d) sums keys kg, kg + KG, ... for dims d, d + 1 */
                    float acc[AMK_ATTN_GH][2], *wa = red + (int64_t)kg * GH * hd + d;
#pragma unroll
                    for (int h = 0; h < AMK_ATTN_GH; h++) { /* the first chunk starts from 0 */
                        const float a = mla[2 * GH + h];
                        acc[h][0] = c0 == r0 || h >= gh ? 0.0f : wa[h * hd] * a;
                        acc[h][1] = c0 == r0 || h >= gh || d + 1 >= hd ? 0.0f : wa[h * hd + 1] * a;
                    }
                    for (int j = kg; j < n; j += KG) {
                        const unsigned char *vr = vs + j * rowb;
                        float v0, v1;
                        if (fmt == AMK_DTYPE_BF16) {
                            const uint32_t u = *(const uint32_t *)(vr + 2 * d); /* why: 2 dims a load */
                            v0 = __uint_as_float(u << 16);
                            v1 = __uint_as_float(u & 0xFFFF0000u);
                        } else if (fmt == AMK_DTYPE_F16) {
                            const __half2 u = *(const __half2 *)(vr + 2 * d);
                            v0 = __low2float(u);
                            v1 = __high2float(u);
                        } else {
                            const float2 u = *(const float2 *)(vr + 4 * d);
                            v0 = u.x;
                            v1 = u.y;
                        }
#pragma unroll
                        for (int h = 0; h < AMK_ATTN_GH; h++) {
                            const float p = h < gh ? ss[h * C + j] : 0.0f;
                            acc[h][0] = fmaf(p, v0, acc[h][0]);
                            acc[h][1] = fmaf(p, v1, acc[h][1]); /* past an odd hd: never stored */
                        }
                    }
#pragma unroll
                    for (int h = 0; h < AMK_ATTN_GH; h++) {
                        if (h < gh) wa[h * hd] = acc[h][0];
                        if (h < gh && d + 1 < hd) wa[h * hd + 1] = acc[h][1];
                    }
                }
                __syncthreads(); /* why: the next chunk overwrites K, V and the scores; sums final */
            }
            /* why: an empty window runs no chunk, whose barriers would order the m, l set above
               before these reads (a split past the position: pos < kv_start) */
            if (r1 <= r0) __syncthreads();
            for (int i = tid; i < gh * hd; i += NT) { /* the key groups' sums, head h0 + i / hd */
                const int h = i / hd, e = i - h * hd;
                const float l = mla[GH + h];
                float s = 0.0f;
                if (r1 > r0) /* why: an empty window never wrote the sums */
                    for (int k = 0; k < KG; k++) s += red[((int64_t)k * GH + h) * hd + e];
                amk_attn_out(optr, odt, partial, h0 + h, hd, e, s, mla[h], l);
            }
            __syncthreads(); /* why: q, m, l and the sums are reused by the next pass */
        }
    }
}

/* ROPE, rotate-half: x [S, heads, head_dim] (S = numel(positions)); pairs (i, i + half) of every
   head row rotate by pos * inv_freq[i]. inv_freq and cos/sin go through double and round once,
   so they land on the correctly rounded fp32 value the host's libm gives (almost always). */
static __device__ float amk_rope_inv_freq(const amk_params_t *P, int i) {
    const float e = (float)(2 * i) / (float)P->head_dim;
    /* why exp2(e*log2(theta)), not pow: the same double accuracy for these arguments (an error
       near 1e-15, far below fp32's rounding step) and a fraction of pow's latency, which the RoPE
       tiles' epilogue waits for (bench/NOTES.md) */
    float inv = 1.0f / (float)exp2((double)e * log2((double)P->theta));
    if (P->rope_type != AMK_ROPE_DEFAULT) { /* linear, YaRN: the ramp amk_task_marshal_params set, in fp32 */
        const float ramp = ((float)i - P->rope_low_freq_factor) / (P->rope_high_freq_factor - P->rope_low_freq_factor);
        const float extra = 1.0f - (ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp);
        return inv / P->rope_factor * (1.0f - extra) + inv * extra;
    }
    if (P->rope_factor > 0.0f) { /* llama3 scaling (REFERENCE.md §3.4), in fp32 */
        const float orig = (float)P->rope_orig_ctx, lo = P->rope_low_freq_factor, hi = P->rope_high_freq_factor;
        const float wavelen = 2.0f * 3.14159265358979323846f / inv;
        const float low_wl = orig / lo, high_wl = orig / hi;
        if (wavelen < high_wl) {
            /* high frequency: kept */
        } else if (wavelen > low_wl) {
            inv = inv / P->rope_factor;
        } else {
            const float smooth = (orig / wavelen - lo) / (hi - lo);
            inv = (1.0f - smooth) * inv / P->rope_factor + smooth * inv;
        }
    }
    return inv;
}

AMK_OP_FN void amk_op_rope(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *x = &c->in[0], *ps = &c->in[1], *o = &c->out[0];
    const int64_t hd = P->head_dim, half = hd / 2, S = ps->numel;
    const int64_t per_pos = x->numel / (S * hd); /* head rows per position */
    int64_t e;
    for (e = AMK_OPS_TID; e < x->numel / 2; e += AMK_OPS_NT) {
        const int64_t row = e / half, i = e - row * half, base = row * hd;
        const int64_t pos = amk_load_int((const void *)ps->ptr, ps->dtype, row / per_pos);
        float ang, cs, sn, x1, x2;
        if (pos < 0) { amk_op_fail(c, AMK_VM_ERR_ROPE_POS, pos); continue; }
        ang = (float)pos * amk_rope_inv_freq(P, (int)i);
        cs = (float)cos((double)ang);
        sn = (float)sin((double)ang);
        x1 = amk_load((const void *)x->ptr, x->dtype, base + i);
        x2 = amk_load((const void *)x->ptr, x->dtype, base + i + half);
        amk_store((void *)o->ptr, o->dtype, base + i, x1 * cs - x2 * sn);
        amk_store((void *)o->ptr, o->dtype, base + i + half, x2 * cs + x1 * sn);
    }
}

/* ---- the fused decode tiles (AMK opcodes 20, 21) -------------------------------------------------
   RMSNORM_GEMV [x, norm_w, W(, pos)] and RMSNORM_SWIGLU [x, norm_w, W_gate, W_up]: x's rows are
   staged in shared memory, normalised there in fp32 (each tile recomputes the row's rms: x is a few
   KB and already staged, so this costs no extra pass), then the GEMV loop above runs over the
   tile's rows. The epilogue stores y, silu(g) * u (SWIGLU), and with RMSNORM_GEMV's flags RoPE on
   pairs (n, n+1) and/or the KV-cache row pos[m]. RoPE needs both halves of a pair, so with ROPE the
   tile's values go through shared memory first. */

/* pos[m] of a fused tile with flags: pos0 is pos[0], loaded once at the op's start (why: the
   decode step has one row, so no later use loads it again). */
static __device__ __forceinline__ int64_t amk_fused_pos(const amk_op_ctx *c, int64_t m, int64_t pos0) {
    return m == 0 ? pos0 : amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, m);
}

/* 1 when a fused tile's position pos is out of range: negative, or (KV_ROW) at or past the cache's
   rows, numel / N. why the product: see amk_div_rows (exact below 2^31 each, where it is the same
   test) */
static __device__ __forceinline__ int amk_fused_pos_bad(const amk_buffer_t *o, int kv_row, int64_t pos, int64_t N) {
    return pos < 0 || (kv_row && (pos >= INT32_MAX || N >= INT32_MAX ? pos >= o->numel / N : (pos + 1) * N > o->numel));
}

/* Where output (m, n) of a fused tile goes: out[m, n], or the cache row pos[m] (KV_ROW). */
static __device__ __forceinline__ int64_t amk_fused_index(const amk_op_ctx *c, int kv_row, int64_t m, int64_t n,
                                                          int64_t N, int64_t last, int64_t pos0) {
    return kv_row ? amk_fused_pos(c, m, pos0) * N + n : m * last + n;
}

/* The accumulating ops' weight rows n0 .. n0+nt of input 4 ([N, H], contiguous: RMSNORM_MLP's
   W_downT, ATTENTION_O's W_oT) in shared memory: the bytes the op stages (one bulk copy before its
   wait; AMK_ROWS_STAGE_BYTES, as the host sized the launch's shared memory), or 0 when it reads
   them from global memory. */
static __device__ __forceinline__ int64_t amk_rows_stage_bytes(const amk_op_ctx *c, int64_t nt) {
    const amk_buffer_t *Wd = &c->in[4];
    return Wd->ptr % 16 == 0 ? amk_plan_rows_stage_bytes(Wd->dtype, Wd->shape[1], nt) : 0;
}

/* Row n0 of input 4 in global memory. */
static __device__ __forceinline__ const char *amk_rows_src(const amk_op_ctx *c, int64_t n0) {
    return (const char *)c->in[4].ptr + n0 * c->in[4].shape[1] * (c->in[4].dtype == AMK_DTYPE_F32 ? 4 : 2);
}

/* An op's bulk copies before its wait, one phase of the VM's mbarrier for all of them (all threads
   call it): the helper thread orders earlier ops' generic accesses to shared memory before the
   copies and arms the phase for bytes in all, then issues the copies itself
   (amk_ptx_bulk_copy_armed). Returns the phase's parity (why read here: every thread reads it
   before the phase is counted). */
static __device__ __forceinline__ uint32_t amk_stage_arm(const amk_op_ctx *c, uint32_t bytes) {
    const uint32_t par = *c->mbar_uses & 1u;
    if (amk_tid() == AMK_AUX_TID) {
        amk_ptx_fence_proxy_async_smem();
        amk_ptx_mbar_arrive_expect(c->mbar, bytes);
    }
    return par;
}

/* Those rows into ws (all threads call it): one bulk copy by the helper thread on the VM's
   mbarrier, before the op's wait. Returns the parity of the copy's phase: every thread waits for
   it (amk_ptx_mbar_wait) before it reads ws, and the op ends with amk_rows_release (or a
   barrier, then amk_rows_done), which counts the phase. why the VM's mbarrier: initialising one in
   the op delays the op's start (its release fence waits for the thread's earlier stores;
   bench/RESULTS.md run 151) */
static __device__ __forceinline__ uint32_t amk_rows_stage(const amk_op_ctx *c, char *ws, int64_t n0, int64_t wsb) {
    const uint32_t par = amk_stage_arm(c, (uint32_t)wsb);
    if (amk_tid() == AMK_AUX_TID) {
        amk_ptx_bulk_copy_weights(ws, amk_rows_src(c, n0), (uint32_t)wsb, c->mbar);
        amk_ptx_bulk_commit(c->mbar);
    }
    return par;
}

/* After every thread waited for the staged rows and passed a barrier: the phase is counted, so
   the next op's copy waits on the other parity. */
static __device__ __forceinline__ void amk_rows_done(const amk_op_ctx *c) {
    if (amk_tid() == AMK_AUX_TID) (*c->mbar_uses)++;
}

/* An op's end with staged rows (every thread): the copy of parity par landed (why also when the op
   gave up: no copy may land after it), the block met, the phase counted. */
static __device__ __forceinline__ void amk_rows_release(const amk_op_ctx *c, uint32_t par) {
    amk_ptx_mbar_wait(c->mbar, par);
    __syncthreads();
    amk_rows_done(c);
}

/* The accumulating ops' second half, rows m0 .. m0+mr of out: out[m, h] += sum_j ys[(m - m0) * nt
   + j] * W[n0 + j, h] (+ resid[m, h], input ri when the op has ri + 1 inputs: 5, or 6 in the folded
   forms, RMSNORM_MLP FOLD and ATTENTION_O PRENORM) with W input 4 (RMSNORM_MLP's W_downT, ATTENTION_O's
   W_oT), added at L2 (out is F32, host-checked). A thread takes four consecutive outputs (8 or 16
   bytes of each row, coalesced across the warp) and adds them with one vector reduction when H is
   a multiple of 4; else one output a thread. The rows come from ws when staged (nonzero; ws then
   points into the block's shared memory), else from global memory. why staged, not ws != NULL: a
   lean caller's literal 1 leaves the rows' loads in the shared state space; chosen at run time
   they are generic loads (bench/RESULTS.md run 295). why inlined: out of line, ys and ws reach it
   as generic pointers (shared memory, not known to be), and its loop slows every ATTENTION_O and
   RMSNORM_MLP task (bench/RESULTS.md runs 209-210) */
static __device__ __forceinline__ void amk_rows_add(const amk_op_ctx *c, const float *ys, const char *ws, int staged,
                                                 int64_t m0, int mr, int64_t n0, int64_t nt, int ri) {
    const amk_buffer_t *Wd = &c->in[4], *o = &c->out[0];
    const int64_t H = Wd->shape[1];
    const int dt = Wd->dtype, esz = dt == AMK_DTYPE_F32 ? 4 : 2, resid = c->ins.n_inputs == ri + 1;
    const char *rows = staged ? ws : amk_rows_src(c, n0);
    const int v4 = H % 4 == 0 && o->ptr % 16 == 0 && (dt == AMK_DTYPE_F32 || dt == AMK_DTYPE_BF16 || dt == AMK_DTYPE_F16) &&
                   ((uintptr_t)rows + H * esz) % (4 * esz) == 0 && (uintptr_t)rows % (4 * esz) == 0;
    float *out = (float *)o->ptr;
    if (v4) {
        for (int64_t h = 4 * AMK_OPS_TID; h < H; h += 4 * AMK_OPS_NT)
            for (int r = 0; r < mr; r++) {
                const float *a = ys + (int64_t)r * nt;
                float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
                for (int64_t j = 0; j < nt; j++) {
                    const char *p = rows + (j * H + h) * esz;
                    float w0, w1, w2, w3;
                    if (dt == AMK_DTYPE_F32) {
                        const float4 f = *(const float4 *)p;
                        w0 = f.x; w1 = f.y; w2 = f.z; w3 = f.w;
                    } else if (dt == AMK_DTYPE_BF16) {
                        const uint2 u = *(const uint2 *)p;
                        w0 = __uint_as_float(u.x << 16); w1 = __uint_as_float(u.x & 0xFFFF0000u);
                        w2 = __uint_as_float(u.y << 16); w3 = __uint_as_float(u.y & 0xFFFF0000u);
                    } else {
                        const uint2 u = *(const uint2 *)p;
                        const float2 f0 = __half22float2(*(const __half2 *)&u.x), f1 = __half22float2(*(const __half2 *)&u.y);
                        w0 = f0.x; w1 = f0.y; w2 = f1.x; w3 = f1.y;
                    }
                    s0 += a[j] * w0; s1 += a[j] * w1; s2 += a[j] * w2; s3 += a[j] * w3;
                }
                if (resid) {
                    const void *rp = (const void *)c->in[ri].ptr;
                    const int rt = c->in[ri].dtype;
                    const int64_t e = (m0 + r) * H + h;
                    s0 += amk_load(rp, rt, e); s1 += amk_load(rp, rt, e + 1);
                    s2 += amk_load(rp, rt, e + 2); s3 += amk_load(rp, rt, e + 3);
                }
                amk_ptx_red_add_v4_f32(out + (m0 + r) * H + h, s0, s1, s2, s3);
            }
        return;
    }
    for (int64_t h = AMK_OPS_TID; h < H; h += AMK_OPS_NT)
        for (int r = 0; r < mr; r++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < nt; j++) acc += ys[(int64_t)r * nt + j] * amk_load(rows, dt, j * H + h);
            if (resid) acc += amk_load((const void *)c->in[ri].ptr, c->in[ri].dtype, (m0 + r) * H + h);
            atomicAdd(out + (m0 + r) * H + h, acc);
        }
}

/* ATTENTION_O PRENORM's RoPE: the cos and sin of pair i of a head at pos. */
static __device__ __forceinline__ float2 amk_attn_pre_trig(const amk_params_t *P, int64_t pos, int i) {
    double sd, cd;
    sincos((double)((float)pos * amk_rope_inv_freq(P, i)), &sd, &cd);
    return make_float2((float)cd, (float)sd);
}

/* ATTENTION_O PRENORM's inputs after the wait, in the lean form's layout: qkv (input 0, F32: the
   raw q, k and v rows of every head, as the folded MLP tiles added them) scaled by x's (input 5)
   1 / rms and rotated. Warp 0: x's rms (inv_s[0]), its kv head's k and v at the position (a pair
   of dims a lane; rounded to the caches' dtype as a store would), into shared row pos - r0 when
   the window holds it (after the tensor copies landed: theirs is the cache's stale row) and, in
   the task with the cache outputs, into cache row pos. The next nh * hd / 2 threads: a pair of q
   each, rotated but not scaled (the scores take inv_s[0]: RoPE is linear). The caller's barrier
   publishes all of it. The pairs' cos and sin come from cs (written before the wait, early) or
   are computed here. why every load before anything waits for one (x's pieces unrolled, bad only
   guarding the stores), the trig before the wait, and the rms in one warp: each is a round trip
   or a dependent chain on the path to the barrier that the staging needs anyway (bench/RESULTS.md
   run 290). */
static __device__ __forceinline__ void amk_attn_prenorm(amk_op_ctx *c, unsigned char *ks, unsigned char *vs, float *qs, float *inv_s,
                                                     const float *cs, int early, int tma, uint32_t wpar, int64_t rowb,
                                                     int64_t r0, int64_t n, int64_t pos, int bad, int h0, int nh) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *kc = &c->in[1], *vc = &c->in[2];
    const int hd = P->head_dim, nkv = P->n_kv_heads, g = P->n_off, tid = amk_tid(), lane = tid & 31, dt = kc->dtype;
    const float *qkv = (const float *)c->in[0].ptr;
    if (tid < 32) {
        const float *xp = (const float *)c->in[5].ptr;
        const int H = (int)c->in[5].numel, i = lane, on = 2 * i < hd;
        /* why unconditional (a lane past head_dim reads pair 0 and stores nothing): guarded, the
           loads go out only after x's sum of squares, a second round trip (bench/RESULTS.md run 295) */
        const float2 kr = *(const float2 *)(qkv + (int64_t)(P->n_heads + g) * hd + 2 * (on ? i : 0));
        const float2 vr = *(const float2 *)(qkv + (int64_t)(P->n_heads + nkv + g) * hd + 2 * (on ? i : 0));
        float4 xv[AMK_LEAN_PPL];
        float ss = 0.0f;
#pragma unroll
        for (int u = 0; u < AMK_LEAN_PPL; u++) /* H <= 128 * AMK_LEAN_PPL (amk_attn_o_lean checks) */
            xv[u] = 4 * (lane + 32 * u) < H ? *(const float4 *)(xp + 4 * (lane + 32 * u)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int u = 0; u < AMK_LEAN_PPL; u++)
            ss = fmaf(xv[u].x, xv[u].x, fmaf(xv[u].y, xv[u].y, fmaf(xv[u].z, xv[u].z, fmaf(xv[u].w, xv[u].w, ss))));
        const float2 t = early ? make_float2(cs[2 * i], cs[2 * i + 1]) : amk_attn_pre_trig(P, pos, i);
        const float inv = 1.0f / sqrtf(amk_warp_sum(ss) / (float)H + P->eps);
        float k0 = inv * (kr.x * t.x - kr.y * t.y), k1 = inv * (kr.y * t.x + kr.x * t.y), v0 = inv * vr.x, v1 = inv * vr.y;
        const int64_t e = (pos * nkv + g) * hd + 2 * i, pj = pos - r0;
        if (lane == 0) inv_s[0] = inv;
        if (dt == AMK_DTYPE_BF16) { /* as stored: the key and value every later step reads */
            k0 = __bfloat162float(__float2bfloat16_rn(k0)); k1 = __bfloat162float(__float2bfloat16_rn(k1));
            v0 = __bfloat162float(__float2bfloat16_rn(v0)); v1 = __bfloat162float(__float2bfloat16_rn(v1));
        }
        if (on && !bad && c->ins.n_outputs == 3) { /* (e is even: 4- or 8-byte aligned pairs) */
            if (dt == AMK_DTYPE_BF16) {
                ((uint32_t *)kc->ptr)[e >> 1] = amk_pack_bf16x2(k0, k1);
                ((uint32_t *)vc->ptr)[e >> 1] = amk_pack_bf16x2(v0, v1);
            } else {
                ((float2 *)kc->ptr)[e >> 1] = make_float2(k0, k1);
                ((float2 *)vc->ptr)[e >> 1] = make_float2(v0, v1);
            }
        }
        if (tma) amk_ptx_mbar_wait(c->mbar, wpar); /* the copies landed: row pos goes over theirs */
        if (on && !bad && pj >= 0 && pj < n) {
            if (dt == AMK_DTYPE_BF16) {
                const int sw = tma ? (int)(pj & 7) : 0, off = ((((2 * i) >> 3) ^ sw) << 4) + ((2 * i) & 7) * 2;
                *(uint32_t *)(ks + pj * rowb + off) = amk_pack_bf16x2(k0, k1);
                *(uint32_t *)(vs + pj * rowb + off) = amk_pack_bf16x2(v0, v1);
            } else {
                *(float2 *)(ks + pj * rowb + 8 * i) = make_float2(k0, k1);
                *(float2 *)(vs + pj * rowb + 8 * i) = make_float2(v0, v1);
            }
        }
    } else if (tid - 32 < nh * hd / 2) {
        const int u = tid - 32, hh = u >= hd / 2, i = u - hh * (hd / 2);
        const float2 r = *(const float2 *)(qkv + (int64_t)(h0 + hh) * hd + 2 * i);
        const float2 t = early ? make_float2(cs[2 * i], cs[2 * i + 1]) : amk_attn_pre_trig(P, pos, i);
        qs[hh * hd + 2 * i] = r.x * t.x - r.y * t.y;
        qs[hh * hd + 2 * i + 1] = r.y * t.x + r.x * t.y;
    }
}

/* ATTENTION_O's lean form: a task whose M_tile <= AMK_ATTN_LEAN_DIMS rows of W_oT lie in one or two
   query heads, over at most AMK_ATTN_SPEC_ROWS keys (and ntid / heads), with F32 or BF16 q and
   caches of whole 16-byte row pieces. why: the general path computes its kv head's every query
   head and dimension, a block-wide step each (staging, key groups, combine: ~4.4 of its ~5.9 us
   on SmolLM2, bench/NOTES.md session "early"), to use M_tile of them. Here a thread scores one key
   of one of the task's heads (q and the rows staged in shared memory, the rows requested with
   the position), the block takes each head's max through a barrier, the keys' weights p go to
   shared memory, and a warp a dimension of the task sums p and p * V over the keys; then W_oT's
   rows (staged before the wait) add in as the general path does (bench/RESULTS.md run 203). The
   launch's shared memory is the general path's (the host sizes it); a task whose rows do not fit
   there takes the general path (these checks' planner twin: amk_plan_attn_lean_bytes and
   amk_plan_attn_tma, amk_plan.h). AMK_ATTN_LEAN 0 (amk_tune.h) turns the form off. Returns 0
   (nothing done, before the wait) for other tasks.
   With AMK_ATTN_KV_TMA, a lean task whose context carries tensor maps of its caches (amk_vm_ctx_t
   maps: the runtime sets them only with AMK_VM_HINT_KV_EARLY, the host's proof that no task of
   the step writes the cache rows below the position) copies its kv head's rows [kv_start,
   kv_start + kv_len) before its wait, two tensor copies from the helper thread on the op's
   mbarrier beside W_oT's rows, swizzled by 128 bytes (bf16, head_dim 64: a row is 128 bytes);
   after the wait only row pos is read again over the copy's. why: rows loaded after the wait are
   a fifth of the task (bench/RESULTS.md run 269); the position is not needed before the
   wait (the rows past it are copied and not used), and one thread issues two copies, so nothing
   queues behind thread 0's polls. Other tasks stage their rows by cp.async after the wait. */
static __device__ __forceinline__ int amk_attn_o_lean(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *kc = &c->in[1], *vc = &c->in[2];
    const int hd = P->head_dim, nkv = P->n_kv_heads, grp = P->n_heads / (nkv > 0 ? nkv : 1), M = P->M_tile;
    const int dt = kc->dtype, esz = dt == AMK_DTYPE_F32 ? 4 : 2, NT = amk_ntid(), tid = amk_tid();
    const int h0 = hd > 0 ? P->m_off / hd : 0, nh = hd > 0 ? (P->m_off + M - 1) / hd - h0 + 1 : 0;
    /* the tensor copies' layout: rows of 128 bytes unpadded, K from the first 1024-byte boundary,
       V after n rows rounded up to 8 (a 1024-byte boundary again); chunk u of row r at u ^ (r & 7).
       Else rows of AMK_ATTN_ROW_BYTES, K at 0, V after n rows, unswizzled (sw 0) */
#if AMK_ATTN_KV_TMA
    const int tma = (c->maps != 0) & (c->kv_rows == P->kv_len) & (dt == AMK_DTYPE_BF16) & (hd == 64);
#else
    const int tma = 0;
#endif
    const int sw = tma ? 7 : 0, pre = ((uint32_t)P->flags & AMK_ATTN_FLAG_PRENORM) != 0;
    const int64_t kso = tma ? (int64_t)((AMK_ATTN_TMA_ALIGN - ((uint32_t)__cvta_generic_to_shared(smem) & (AMK_ATTN_TMA_ALIGN - 1))) &
                                        (AMK_ATTN_TMA_ALIGN - 1)) : 0;
    const int64_t rowb = tma ? 128 : AMK_ATTN_ROW_BYTES(hd, esz), n = P->kv_len, nr = tma ? (n + 7) & ~(int64_t)7 : n;
    const int64_t fixed = kso + 2 * nr * rowb + (nh * hd + AMK_OPS_WARP + nh * n + AMK_ATTN_LEAN_DIMS + 4 + 2 * AMK_OPS_WARP) * 4;
    const int64_t want = amk_rows_stage_bytes(c, M), dyn = amk_ptx_dynamic_smem_size();
    const int64_t wso = (dyn - want) & ~(int64_t)15;
    if (((dt != AMK_DTYPE_F32) & (dt != AMK_DTYPE_BF16)) | (vc->dtype != dt) | ((q->dtype != AMK_DTYPE_F32) & (q->dtype != AMK_DTYPE_BF16)) |
        (hd < 8) | (hd > 256) | ((hd * esz) % 16 != 0) | (P->N_tile != 1) | (M < 1) | (M > AMK_ATTN_LEAN_DIMS) |
        (nh > 2) | (h0 < P->n_off * grp) | (h0 + nh > (P->n_off + 1) * grp) | (n < 1) | (n > AMK_ATTN_SPEC_ROWS) |
        (n > NT / (nh > 0 ? nh : 1)) | ((NT / (nh > 0 ? nh : 1)) % 32 != 0) | ((P->flags & AMK_ATTN_FLAG_PARTIAL) != 0) |
        (kc->ptr % 16 != 0) | (vc->ptr % 16 != 0) | (want == 0) | (fixed > wso) |
        (pre & ((q->dtype != AMK_DTYPE_F32) | (q->numel != (int64_t)(P->n_heads + 2 * nkv) * hd) | (c->in[5].dtype != AMK_DTYPE_F32) |
                (c->in[5].ptr % 16 != 0) | (c->in[5].numel % 4 != 0) | (c->in[5].numel != c->in[4].shape[1]) |
                (c->in[5].numel > 128 * AMK_LEAN_PPL) |
                (c->ins.n_outputs != 1 && c->ins.n_outputs != 3) | (hd > 64) | (NT < 32 + nh * hd / 2) | (q->ptr % 8 != 0))))
        return 0;
    char *ws = (char *)smem + wso;
    /* shared memory: [K, V: nr rows each][q: nh heads][the warps' maxima][p: nh x n][a: M][PRENORM's
       1 / rms, a word, the early position in words 2-3][PRENORM's cos and sin: hd / 2 pairs] */
    unsigned char *ks = (unsigned char *)smem + kso, *vs = ks + nr * rowb;
    uint32_t wpar;
    if (tma) { /* W_oT's rows and the cache rows, one phase, before the wait */
        wpar = amk_stage_arm(c, (uint32_t)(want + 2 * n * 128));
        if (tid == AMK_AUX_TID) {
            amk_ptx_fence_proxy_async_global(); /* the rows earlier steps of a chained launch wrote */
            amk_ptx_bulk_copy_weights(ws, amk_rows_src(c, P->m_off), (uint32_t)want, c->mbar);
            amk_ptx_tensor_copy_2d(ks, c->maps, P->n_off * hd, P->kv_start, c->mbar);
            amk_ptx_tensor_copy_2d(vs, c->maps + 128u, P->n_off * hd, P->kv_start, c->mbar);
            amk_ptx_bulk_commit(c->mbar);
        }
    } else
        wpar = amk_rows_stage(c, ws, P->m_off, want); /* W_oT's rows, before the wait */
    /* PRENORM with a position no task writes (AMK_VM_HINT_KV_EARLY: final before the wait, also in a
       chained launch, whose join writes it before the step begins): warp 1 computes its pairs' cos
       and sin now, into cs (after the layout's parts), once the copies are out */
    const int early = pre & ((c->ins.hints & AMK_VM_HINT_KV_EARLY) != 0);
    float *cs = (float *)(ks + 2 * nr * rowb) + nh * hd + AMK_OPS_WARP + nh * n + AMK_ATTN_LEAN_DIMS + 4;
    /* and the position itself, into words 2 and 3 of the 1 / rms slot (inv_s below). why: read
       after the wait it is a round trip on warp 0's path to the barrier (the wait's acquire
       leaves no line of it in L1) */
    uint32_t *pos_s = (uint32_t *)cs - 2;
    if (early && (tid >> 5) == 1 && 2 * (tid & 31) < hd) {
        const int64_t p = amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
        const float2 t = amk_attn_pre_trig(P, p, tid & 31);
        cs[2 * (tid & 31)] = t.x;
        cs[2 * (tid & 31) + 1] = t.y;
        if ((tid & 31) == 0) {
            pos_s[0] = (uint32_t)(uint64_t)p;
            pos_s[1] = (uint32_t)((uint64_t)p >> 32);
        }
    }
    if (!amk_op_go(c)) {
        amk_ptx_cp_async_wait_all(); /* why: no copy may land in a later task's shared memory */
        amk_rows_release(c, wpar);
        return 1;
    }
    {
        float *qs = (float *)(vs + nr * rowb), *rm = qs + nh * hd, *ps = rm + AMK_OPS_WARP, *a = ps + nh * n;
        float *inv_s = a + AMK_ATTN_LEAN_DIMS; /* PRENORM: x's 1 / rms */
        const int G = NT / nh, hh = tid >= G, j = tid - hh * G, lane = tid & 31, warp = tid >> 5;
        /* why no division here: m / hd and m % hd a dimension on every thread more than double
           the softmax and p * V part (bench/RESULTS.md runs 190-191) */
        const int c0 = P->m_off - h0 * hd, b = hd - c0;
        const int64_t r0 = P->kv_start,
                      pos = early ? (int64_t)(((uint64_t)pos_s[1] << 32) | pos_s[0]) : amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0);
        /* the same on every thread: a negative position, or (PRENORM with the cache outputs) one past
           the caches' rows */
        const int bad = (pos < 0) | (pre & (c->ins.n_outputs == 3) & ((pos + 1) * nkv * hd > kc->numel));
        int64_t ne;
        float sc = -INFINITY, mx;
        if (pre) {
            if (!tma) { /* the rows below the position (row pos comes from warp 0) */
                const int below = bad ? 0 : (int)(pos - r0 < 0 ? 0 : pos - r0 < n ? pos - r0 : n);
                amk_attn_load_rows(ks, vs, kc, vc, r0, below, below, P->n_off, nkv, hd, esz, rowb, tid, NT);
            }
            amk_attn_prenorm(c, ks, vs, qs, inv_s, cs, early, tma, wpar, rowb, r0, n, pos, bad, h0, nh);
        } else if (tma) { /* row pos, which this step wrote, again over the copy's (16 threads, 16 bytes each) */
            const int64_t pj = pos - r0;
            const int mine = (tid < 16) & (pj >= 0) & (pj < n), u = tid & 7;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (mine) v = __ldcg((const uint4 *)((const char *)(tid < 8 ? kc->ptr : vc->ptr) + ((pos * nkv + P->n_off) * hd) * 2 + u * 16));
            amk_ptx_mbar_wait(c->mbar, wpar); /* the copies landed: the row's store goes over theirs */
            if (mine) *(uint4 *)((tid < 8 ? ks : vs) + pj * 128 + ((u ^ (int)(pj & 7)) << 4)) = v;
        } else
        amk_attn_load_rows(ks, vs, kc, vc, r0, (int)n, (int)n, P->n_off, nkv, hd, esz, rowb, tid, NT);
        if (!pre)
            for (int i = tid; i < nh * hd; i += NT) qs[i] = amk_load((const void *)q->ptr, q->dtype, (int64_t)h0 * hd + i);
        amk_ptx_cp_async_wait_all();
        __syncthreads(); /* K, V and q staged */
        AMK_OP_MARK(c, 0);
        if (bad) { /* uniform: every thread read the same position */
            if (tid == 0) amk_op_fail(c, pos < 0 ? AMK_VM_ERR_ROPE_POS : AMK_VM_ERR_KV_POS, pos);
            amk_rows_release(c, wpar);
            return 1;
        }
        ne = pos + 1 - r0 < n ? pos + 1 - r0 : n; /* the keys at or below the position */
        const int64_t jlo = P->sliding_window > 0 && pos + 1 - P->sliding_window > r0 ? pos + 1 - P->sliding_window - r0 : 0; /* and
            within its sliding window: keys below jlo score -inf, p 0 */
        if (j < ne) { /* key j's score against head h0 + hh. why not amk_dot_row: its one sum is one
                         dependent chain of head_dim FMAs; two halve it */
            const float *qh = qs + hh * hd;
            const unsigned char *kr = ks + j * rowb;
            float s0 = 0.0f, s1 = 0.0f;
            if (dt == AMK_DTYPE_BF16) {
                for (int d = 0; d < hd; d += 8) {
                    float w[8];
                    amk_unpack_bf16x8(*(const uint4 *)(kr + (((d >> 3) ^ (j & sw)) << 4)), w);
                    const float4 qa = *(const float4 *)(qh + d), qb = *(const float4 *)(qh + d + 4);
                    s0 = fmaf(qa.x, w[0], s0); s1 = fmaf(qa.y, w[1], s1); s0 = fmaf(qa.z, w[2], s0); s1 = fmaf(qa.w, w[3], s1);
                    s0 = fmaf(qb.x, w[4], s0); s1 = fmaf(qb.y, w[5], s1); s0 = fmaf(qb.z, w[6], s0); s1 = fmaf(qb.w, w[7], s1);
                }
            } else {
                for (int d = 0; d < hd; d += 4) {
                    const float4 k4 = *(const float4 *)(kr + d * 4), q4 = *(const float4 *)(qh + d);
                    s0 = fmaf(q4.x, k4.x, s0); s1 = fmaf(q4.y, k4.y, s1); s0 = fmaf(q4.z, k4.z, s0); s1 = fmaf(q4.w, k4.w, s1);
                }
            }
            sc = j < jlo ? -INFINITY : (s0 + s1) * (pre ? P->scale * inv_s[0] : P->scale);
        }
        mx = amk_warp_max(sc);
        if (lane == 0) rm[warp] = mx;
        __syncthreads();
        /* the head's maximum: its warps' (G / 32 <= 32 of them) a lane each. why not a loop over
           them: a chain of dependent loads, ~0.2 us on 16 warps */
        mx = amk_warp_max(lane < (G >> 5) ? rm[hh * (G >> 5) + lane] : -INFINITY);
        if (j < ne) ps[hh * n + j] = expf(sc - mx); /* mx is finite when the head has a key */
        __syncthreads();
        AMK_OP_MARK(c, 1);
        /* a warp a dimension t (output m_off + t: head h0's column c0 + t below b, else h0 + 1's
           t - b): its lanes take every 32nd key, p and p * V, then two warp sums. why not each key's
           thread summing every dimension across its warp (8 warp sums a thread, then the warps'
           partials): on all 16 warps, for ~5 warps of keys, that is a quarter of the task
           (bench/RESULTS.md runs 201-203) */
        for (int t = warp; t < M; t += NT >> 5) {
            const int th = t < b ? 0 : 1, col = th == 0 ? c0 + t : t - b;
            const float *pp = ps + th * n;
            float acc = 0.0f, l = 0.0f;
#pragma unroll 4 /* why: four keys' loads in flight together */
            for (int64_t k = lane; k < ne; k += 32) {
                const unsigned char *vr = vs + k * rowb;
                const float pk = pp[k];
                l += pk;
                acc = fmaf(pk, dt == AMK_DTYPE_BF16 ? __uint_as_float((uint32_t)*(const uint16_t *)(vr + (((col >> 3) ^ ((int)k & sw)) << 4) + (col & 7) * 2) << 16)
                                                    : ((const float *)vr)[col], acc);
            }
            l = amk_warp_sum(l);
            acc = amk_warp_sum(acc);
            if (lane == 0) a[t] = l > 0.0f ? acc / l : 0.0f;
        }
        __syncthreads(); /* a is complete */
        AMK_OP_MARK(c, 2);
        amk_ptx_mbar_wait(c->mbar, wpar); /* W_oT's rows landed (every thread waits) */
        amk_rows_add(c, a, ws, 1, 0, 1, P->m_off, M, 5 + pre);
        AMK_OP_MARK(c, 3);
    }
    amk_rows_release(c, wpar);
    return 1;
}

/* ATTENTION_DECODE, and ATTENTION_O: the same attention with its results (F32) in shared memory
   (ys: the query heads of kv heads [n_off, n_off + N_tile)), then out[0, :] += ys[m_off - base ..
   + M_tile] @ W_oT[m_off .. + M_tile] (+ resid) by amk_rows_add. Shared memory: the attention's,
   then ys, then W_oT's rows when they stage (AMK_ATTN_O_YS_BYTES, amk_plan.h); the rows go out with
   one bulk copy before the wait. why one function for both: the attention paths are inlined once */
AMK_OP_FN void amk_op_attention_decode(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const int fo = c->ins.op == AMK_OP_ATTENTION_O;
#if AMK_ATTN_LEAN
    if (fo && amk_attn_o_lean(c, smem)) return;
    if (fo && ((uint32_t)P->flags & AMK_ATTN_FLAG_PRENORM)) { /* only the lean form takes it (the host checks it) */
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_BAD_OP, P->flags);
        return;
    }
#endif
    uint64_t optr = c->out[0].ptr;
    int odt = c->out[0].dtype;
    int64_t dyn = amk_ptx_dynamic_smem_size(), wsb = 0;
    char *ws = NULL;
    uint32_t wpar = 0;
    if (fo) {
        const int hd = P->head_dim, grp = P->n_heads / P->n_kv_heads;
        const int64_t base = (int64_t)P->n_off * grp * hd, ysb = AMK_ATTN_O_YS_BYTES(hd, P->N_tile * grp);
        const int64_t want = amk_rows_stage_bytes(c, P->M_tile);
        const int64_t wso = (dyn - want) & ~(int64_t)15; /* why: the bulk copy's destination is 16-byte aligned */
        if (want > 0 && wso - ysb >= AMK_ATTN_DECODE_LEAST(hd, amk_ntid())) {
            wsb = want;
            ws = (char *)smem + wso;
            wpar = amk_rows_stage(c, ws, P->m_off, wsb);
        }
        dyn = (wsb ? wso : dyn & ~(int64_t)15) - ysb; /* ys, the results, from here */
        /* why base below ys: the attention stores head h's dim e at h * hd + e */
        optr = (uint64_t)(uintptr_t)smem + (uint64_t)dyn - (uint64_t)base * 4u;
        odt = AMK_DTYPE_F32;
    } else if (P->part > 0 && (P->flags & AMK_ATTN_FLAG_PARTIAL)) { /* set part of the stacked partials */
        optr += (uint64_t)P->part * (uint64_t)P->n_heads * (uint64_t)(P->head_dim + 2) * 4u;
    }
    if (!amk_attn_decode_mma(c, smem, optr, odt, dyn)) amk_attn_decode_cc(c, smem, optr, odt, dyn);
    if (!fo) return;
    __syncthreads(); /* ys is complete; c->go and c->error are final */
    if (c->go && !c->error) {
        if (wsb) amk_ptx_mbar_wait(c->mbar, wpar); /* the rows landed (every thread waits) */
        amk_rows_add(c, (const float *)(uintptr_t)optr + P->m_off, ws, ws != NULL, 0, 1, P->m_off, P->M_tile, 5);
    }
    if (wsb) amk_rows_release(c, wpar);
}

/* ---- the lean decode tiles: RMSNORM_GEMV and RMSNORM_MLP for one row of x with short rows -------
   why: on the general path a tiny model's tiles (SmolLM2: Q/K/V 8 rows of K = 576, MLP 12 gate/up
   rows) are chains of block-wide parts of ~1 us each whatever their work: x staged in shared memory
   and its block sum, the rows from global memory, a RoPE pass (bench/NOTES.md session "early").
   Here norm_w and the tile's rows (RMSNORM_MLP: gate, up and W_downT's) go to shared memory with
   bulk copies before the wait. After it only the warps with rows work: they stage x (F32) in shared
   memory together and meet at a named barrier; then each sums x^2 itself (no block sum) and takes
   two rows. RMSNORM_GEMV: two adjacent rows, so a RoPE pair (2i, 2i + 1) rotates in the warp, with
   the cos and sin that one more warp computes while x is in flight; no pass or block barrier
   follows the sums. RMSNORM_MLP: a gate row and its up row, then the block adds its share of
   down_proj as amk_op_norm_gemv does (bench/RESULTS.md run 182). Conditions: one row of x, K a
   multiple of 8 up to 128 * AMK_LEAN_PPL, bf16 W, F32 norm_w and x, F32 or bf16 out, the rows in
   the launch's shared memory (their planner twin: amk_plan_lean_bytes, amk_plan.h, by which the host
   sizes it). Returns 0 (nothing done,
   before the wait) for any other tile. AMK_LEAN 0 (amk_tune.h) turns the form off. */
/* Named barriers: AMK_LEAN_BAR the RoPE warp's cos and sin, AMK_LEAN_BAR + 1 x staged by the row
   warps. why 5: 1-4 are the tensor-core GEMM's (amk_ptx_bar_warpgroup) */
#define AMK_LEAN_BAR 5
/* AMK_NAMED_BARRIERS 0 (amk_tune.h; for compute-sanitizer racecheck only, never shipped): the
   lean tile's two named barriers become one block barrier that every warp meets after the trig
   and x's staging. why: racecheck (2025.3) reports hazards on correct code once a subset of a
   block's warps has met at a named barrier twice in a launch: a write before a later
   __syncthreads() and a read after it, by a warp that was not in the subset (bench/race_probe.cu,
   modes 3-5; bench/RESULTS.md run 278). A launch runs many lean tiles on each SM, so with the
   named barriers racecheck cannot check the rest of a step; scripts/gpu_run.sh builds this form
   for it. */
/* Named barrier b for n threads (a multiple of 32, whole warps): arrive without waiting, or wait
   for all n; the writes to shared memory before the arrival are visible after the sync. */
static __device__ __forceinline__ void amk_ptx_bar_arrive(int b, int n) {
    asm volatile("bar.arrive %0, %1;" :: "r"(b), "r"(n) : "memory");
}
static __device__ __forceinline__ void amk_ptx_bar_sync(int b, int n) {
    asm volatile("bar.sync %0, %1;" :: "r"(b), "r"(n) : "memory");
}
/* The conditions the lean and ring forms share (their planner twin: amk_plan_short_rows, amk_plan.h): one
   row of F32 x, K a multiple of 8 up to kmax, F32 norm_w, bf16 W, all 16-byte aligned, and an
   RMSNORM_GEMV's output F32 or BF16. */
static __device__ __forceinline__ int amk_short_rows_ok(const amk_op_ctx *c, int kmax) {
    const amk_buffer_t *x = &c->in[0], *nwt = &c->in[1], *W = &c->in[2];
    const int K = c->ins.params.K, od = c->out[0].dtype;
    return x->numel == K && K % 8 == 0 && K <= kmax && x->dtype == AMK_DTYPE_F32 && nwt->dtype == AMK_DTYPE_F32 &&
           W->dtype == AMK_DTYPE_BF16 && x->ptr % 16 == 0 && nwt->ptr % 16 == 0 && W->ptr % 16 == 0 &&
           (c->ins.op == AMK_OP_RMSNORM_MLP || od == AMK_DTYPE_F32 || od == AMK_DTYPE_BF16);
}
/* out[e] = y for an F32 or BF16 output (the lean and ring forms); returns the value as stored. why
   not amk_store: its FP8 encodings call out of line */
static __device__ __forceinline__ float amk_store_f32_bf16(const amk_buffer_t *o, int64_t e, float y) {
    if (o->dtype == AMK_DTYPE_F32) {
        ((float *)o->ptr)[e] = y;
        return y;
    }
    const __nv_bfloat16 b = __float2bfloat16_rn(y);
    ((__nv_bfloat16 *)o->ptr)[e] = b;
    return __bfloat162float(b);
}
/* The lean tile's layout (amk_plan_lean_layout, amk_plan.h), computed before the wait and again
   after it: why twice, not kept: held across the wait, the values take registers the rows need,
   and the VM spills. */
typedef amk_plan_lean_t amk_lean_t;
static __device__ __forceinline__ int amk_lean_row_warps(const amk_op_ctx *c) {
    return amk_plan_lean_row_warps((const amk_vm_ctx_t *)c);
}
static __device__ __forceinline__ amk_lean_t amk_lean_form(const amk_op_ctx *c) {
    return amk_plan_lean_layout((const amk_vm_ctx_t *)c);
}

/* RMSNORM_MLP FOLD's second output: qkv[f] += sum_j ys[j] W_cat[n_off + j, f] + sum_k xb[k] W_cat[N +
   b0 + k, f] over the tile's nt values and its nb base rows (x's elements b0 .. b0 + nb), the
   nt + nb rows staged bf16 in wc; 4 columns a thread, one vector reduction each. The threads are
   counted from the block's last, so the first ones, which add W_downT's share (amk_rows_add: H / 4
   of them), are not also the ones that take these (SmolLM2: 144 and 240 of 512). */
static __device__ __forceinline__ void amk_fold_add(const amk_op_ctx *c, const float *ys, const float *xb, const char *wc,
                                                 int nt, int nb, int F) {
    float *out = (float *)c->out[1].ptr;
    for (int f = 4 * (amk_ntid() - 1 - amk_tid()); f < F; f += 4 * amk_ntid()) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int j = 0; j < nt + nb; j++) {
            const uint2 u = *(const uint2 *)(wc + ((int64_t)j * F + f) * 2);
            const float a = j < nt ? ys[j] : xb[j - nt];
            s0 = fmaf(a, __uint_as_float(u.x << 16), s0);
            s1 = fmaf(a, __uint_as_float(u.x & 0xFFFF0000u), s1);
            s2 = fmaf(a, __uint_as_float(u.y << 16), s2);
            s3 = fmaf(a, __uint_as_float(u.y & 0xFFFF0000u), s3);
        }
        amk_ptx_red_add_v4_f32(out + f, s0, s1, s2, s3);
    }
}

/* amk_norm_gemv_lean after the wait. */
static __device__ __forceinline__ void amk_norm_gemv_lean_run(amk_op_ctx *c, float *smem, uint32_t par) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, k0 = 4 * amk_tid();
    /* why first, before the layout: x's loads and the position's go out at once, and the layout's
       arithmetic runs while they are in flight (after them it adds to every tile, bench/RESULTS.md
       run 213). The row warps' first piece of x goes to a register here, to shared memory below. */
    const int nrw0 = amk_lean_row_warps(c), K0 = P->K;
    const uint32_t flags = c->ins.op == AMK_OP_RMSNORM_MLP ? 0u : (uint32_t)P->flags;
    const float4 x0 = warp < nrw0 && k0 < K0 ? *(const float4 *)((const float *)x->ptr + k0) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int64_t pos = flags ? amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0) : 0;
    const amk_lean_t L = amk_lean_form(c);
    const int mlp = L.mlp, rope = L.rope, kv_row = L.kv_row, K = L.K, nrw = L.nrw;
    const int64_t nt = L.nt, n_begin = L.n_begin, N = L.N, rb = L.rb;
    char *gs = (char *)smem + L.gso, *ws = (char *)smem + L.wso;
    /* ys: RMSNORM_MLP's values, or the cos and sin */
    float *xs = smem, *ys = (float *)((char *)smem + L.yso), *ns = (float *)((char *)smem + L.nso);
    /* the warp's rows (warps below nrw): RMSNORM_GEMV n0 and n0 + 1 of W; RMSNORM_MLP gate row n0 and
       up row n0 */
    const int64_t n0 = n_begin + (mlp ? warp : 2 * warp);
    const int bad = flags && amk_fused_pos_bad(o, kv_row, pos, N); /* the same for every thread */
    /* RoPE: warp nrw computes the cos and sin of the tile's pairs, a lane a pair, while the warps
       with rows wait for x (why not each warp its own: the double-precision trig beside x in
       registers spills, and on the path after the sums it is latency every tile pays), and hands
       them over through named barrier AMK_LEAN_BAR (arrive here, sync in the row warps) */
    if (rope && warp == nrw && !bad) { /* why not when bad: the row warps will not sync */
        for (int i = lane; i < nt / 2; i += 32) {
            const float ang = (float)pos * amk_rope_inv_freq(P, (int)(((n_begin + 2 * i) % P->head_dim) / 2));
            double sd, cd;
            sincos((double)ang, &sd, &cd);
            ys[2 * i] = (float)cd;
            ys[2 * i + 1] = (float)sd;
        }
#if AMK_NAMED_BARRIERS
        amk_ptx_bar_arrive(AMK_LEAN_BAR, (nrw + 1) * 32);
#endif
    }
    if (warp < nrw) { /* x into shared memory by the row warps together, each piece once (why not a copy
                         a warp, or x in registers: every SM reads the same lines of x, just summed
                         at L2; a copy a warp by cp.async costs a tile more, and x in
                         registers takes the VM past its 128) */
        if (k0 < K) *(float4 *)(xs + k0) = x0;
        for (int k = k0 + 4 * 32 * nrw; k < K; k += 4 * 32 * nrw) *(float4 *)(xs + k) = *(const float4 *)((const float *)x->ptr + k);
#if AMK_NAMED_BARRIERS
        amk_ptx_bar_sync(AMK_LEAN_BAR + 1, nrw * 32);
#endif
    }
#if !AMK_NAMED_BARRIERS
    __syncthreads(); /* x staged, the cos and sin written (bad is the same on every thread) */
#endif
    AMK_OP_MARK(c, 0);
    if (bad) {
        if (amk_tid() == 0) amk_op_fail(c, kv_row ? AMK_VM_ERR_KV_POS : AMK_VM_ERR_ROPE_POS, pos);
        amk_rows_release(c, par);
        return;
    }
    if (warp < nrw) {
        const int two = mlp || n0 + 1 < n_begin + nt;
        const uint32_t o0 = (uint32_t)(n0 - n_begin) * (uint32_t)K * 2u, o1 = o0 + (uint32_t)(mlp ? rb : two ? K * 2 : 0);
        float a0 = 0.0f, a1 = 0.0f, ss = 0.0f;
        amk_ptx_mbar_wait(c->mbar, par); /* norm_w and the rows landed (long before, as a rule) */
#pragma unroll
        for (int u = 0; u < AMK_LEAN_PPL; u++) { /* x^2, and the rows times x * norm_w */
            const int k = 4 * (lane + 32 * u);
            if (k < K) {
                const uint2 ra = *(const uint2 *)(gs + o0 + k * 2), rc = *(const uint2 *)(gs + o1 + k * 2);
                const float4 v = *(const float4 *)(xs + k), f = *(const float4 *)(ns + k);
                const float x0 = v.x * f.x, x1 = v.y * f.y, x2 = v.z * f.z, x3 = v.w * f.w;
                ss = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, ss))));
                a0 = fmaf(__uint_as_float(ra.x << 16), x0, a0);
                a0 = fmaf(__uint_as_float(ra.x & 0xFFFF0000u), x1, a0);
                a0 = fmaf(__uint_as_float(ra.y << 16), x2, a0);
                a0 = fmaf(__uint_as_float(ra.y & 0xFFFF0000u), x3, a0);
                a1 = fmaf(__uint_as_float(rc.x << 16), x0, a1);
                a1 = fmaf(__uint_as_float(rc.x & 0xFFFF0000u), x1, a1);
                a1 = fmaf(__uint_as_float(rc.y << 16), x2, a1);
                a1 = fmaf(__uint_as_float(rc.y & 0xFFFF0000u), x3, a1);
            }
        }
        const float inv = 1.0f / sqrtf(amk_warp_sum(ss) / (float)K + P->eps);
        float y0 = amk_warp_sum(a0) * inv, y1 = amk_warp_sum(a1) * inv;
        if (mlp) {
            if (lane == 0) ys[n0 - n_begin] = y0 / (1.0f + expf(-y0)) * y1;
        } else {
            if (rope) {
#if AMK_NAMED_BARRIERS
                amk_ptx_bar_sync(AMK_LEAN_BAR, (nrw + 1) * 32); /* the trig warp's cos and sin */
#endif
                const float cs = ys[2 * warp], sn = ys[2 * warp + 1];
                const float r0 = y0 * cs - y1 * sn, r1 = y1 * cs + y0 * sn;
                y0 = r0;
                y1 = r1;
            }
            if (lane < 1 + two) /* out[n] or the cache row pos (KV_ROW) */
                amk_store_f32_bf16(o, (kv_row ? pos * N : 0) + n0 + lane, lane ? y1 : y0);
        }
    }
    if (mlp) {
        AMK_OP_MARK(c, 1);
        amk_ptx_mbar_wait(c->mbar, par); /* W_downT's rows landed (every thread reads them) */
        __syncthreads();                 /* ys is complete */
        AMK_OP_MARK(c, 2);
        amk_rows_add(c, ys, ws, 1, 0, 1, n_begin, nt, 5 + L.fold);
        AMK_OP_MARK(c, 3);
        if (L.fold) amk_fold_add(c, ys, xs + L.b0, (const char *)smem + L.fso, (int)nt, L.nb, L.F);
    }
    amk_rows_release(c, par);
}

static __device__ __forceinline__ int amk_norm_gemv_lean(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *nwt = &c->in[1], *W = &c->in[2], *Wu = &c->in[3];
    const int nw = amk_ntid() >> 5;
    const amk_lean_t L = amk_lean_form(c);
    const uint32_t flags = L.mlp ? 0u : (uint32_t)P->flags;
    /* shared memory, 16-byte aligned: [x | ys (RMSNORM_MLP) or the pairs' cos and sin (RoPE) | norm_w |
       W's (gate) rows | up rows | W_downT rows] (AMK_LEAN_BYTES) */
    if ((c->ins.op != AMK_OP_RMSNORM_GEMV && !L.mlp) || !amk_short_rows_ok(c, 128 * AMK_LEAN_PPL) ||
        (L.mlp && (Wu->dtype != AMK_DTYPE_BF16 || Wu->ptr % 16 != 0 || L.wsb == 0)) || L.nt < 1 || L.nrw > nw - L.rope ||
        (L.fold && (c->in[5].dtype != AMK_DTYPE_BF16 || c->in[5].ptr % 16 != 0 || L.F < 8 || L.F % 8 != 0 ||
                    c->in[5].shape[0] != L.N + L.K || c->out[1].dtype != AMK_DTYPE_F32 || c->out[1].ptr % 16 != 0 ||
                    c->out[1].numel != L.F || c->ins.n_outputs != 2)) ||
        L.n_begin + L.nt > L.N || (L.rope && (L.nt % 2 != 0 || L.n_begin % 2 != 0)) ||
        (flags & AMK_GEMV_FLAG_ARGMAX) || (flags && c->ins.n_inputs < 4) ||
        L.bytes > (int64_t)amk_ptx_dynamic_smem_size())
        return 0;
    const uint32_t par = amk_stage_arm(c, (uint32_t)(L.bytes - L.nso)); /* norm_w and the rows, before the wait */
    if (amk_tid() == AMK_AUX_TID) {
        const int64_t g0 = L.n_begin * L.K * 2;
        char *gs = (char *)smem + L.gso;
        amk_ptx_bulk_copy_weights((char *)smem + L.nso, (const void *)nwt->ptr, (uint32_t)(L.K * 4), c->mbar);
        amk_ptx_bulk_copy_weights(gs, (const char *)W->ptr + g0, (uint32_t)L.rb, c->mbar);
        if (L.mlp) {
            amk_ptx_bulk_copy_weights(gs + L.rb, (const char *)Wu->ptr + g0, (uint32_t)L.rb, c->mbar);
            amk_ptx_bulk_copy_weights((char *)smem + L.wso, amk_rows_src(c, L.n_begin), (uint32_t)L.wsb, c->mbar);
        }
        if (L.fold) { /* W_cat's tile rows, then its base rows right after them */
            const char *wc = (const char *)c->in[5].ptr;
            const uint32_t fb = (uint32_t)L.F * 2u;
            amk_ptx_bulk_copy_weights((char *)smem + L.fso, wc + L.n_begin * fb, (uint32_t)L.nt * fb, c->mbar);
            if (L.nb > 0)
                amk_ptx_bulk_copy_weights((char *)smem + L.fso + L.nt * fb, wc + (L.N + L.b0) * fb, (uint32_t)L.nb * fb, c->mbar);
        }
        amk_ptx_bulk_commit(c->mbar);
    }
    if (!amk_op_go(c)) {
        amk_rows_release(c, par);
        return 1;
    }
    amk_norm_gemv_lean_run(c, smem, par);
    return 1;
}

/* The argmax rule (SAMPLE_ARGMAX, the ARGMAX_* pair, RMSNORM_GEMV's ARGMAX flag): the first index
   of the max; NaN never wins (amk__argmax_merge). */
static __device__ __forceinline__ void amk_argmax_merge(float *bv, int64_t *bi, float v, int64_t i) {
    if (i < 0 || v != v) return;
    if (*bi < 0 || v > *bv || (v == *bv && i < *bi)) { *bv = v; *bi = i; }
}

/* A partial's index as stored (an F32): -1 (no candidate) unless in [0, 2^31); truncated
   (amk__argmax_index). */
static __device__ __forceinline__ int64_t amk_argmax_index(float f) {
    return f >= 0.0f && f < 2147483648.0f ? (int64_t)f : -1;
}

/* The warp's best (bv, bi) by amk_argmax_merge, in every lane. */
static __device__ __forceinline__ void amk_warp_argmax(float *bv, int64_t *bi) {
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xFFFFFFFFu, *bv, off);
        int64_t oi = __shfl_xor_sync(0xFFFFFFFFu, *bi, off);
        amk_argmax_merge(bv, bi, ov, oi);
    }
}

/* The block's best (bv, bi) by amk_argmax_merge, in thread 0's; all threads call it. why int
   in redi: indices below 2^31 here (rows of at most 2^31 columns). why warp 0 merges the warps'
   results by shuffles: thread 0 alone would merge them one after another, a dependent chain of 16
   shared-memory rounds at 512 threads */
static __device__ __forceinline__ void amk_block_argmax(amk_op_ctx *c, float *bv, int64_t *bi) {
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    amk_warp_argmax(bv, bi);
    if (lane == 0) { c->red[warp] = *bv; c->redi[warp] = (int)*bi; }
    __syncthreads();
    if (warp == 0) {
        *bv = lane < nw ? c->red[lane] : 0.0f;
        *bi = lane < nw ? c->redi[lane] : -1;
        amk_warp_argmax(bv, bi);
    }
}

/* The pair `part` of row m of partials pp: the max, its index as F32 (NaN, -1 when there is no
   candidate). */
static __device__ __forceinline__ void amk_pair_store(const amk_buffer_t *pp, int part, int64_t m, float bv, int64_t bi) {
    float *q = (float *)pp->ptr + m * pp->shape[pp->rank - 1] + 2 * (int64_t)part;
    q[0] = bi < 0 ? NAN : bv;
    q[1] = (float)bi;
}

/* RMSNORM_GEMV's ring form: a tile of one row of F32 x with K <= 256 * AMK_RING_VPL, bf16 rows, no
   flags but ARGMAX, and more rows than the lean form takes (two a warp): SmolLM2's LM-head tiles, 373 rows of
   576. The rows stream through S slots of shared memory (AMK_RING_SLOTS, or as many as the launch
   holds, at least 2), a slot one row a warp, each filled by one bulk copy on its own mbarrier
   (c->mbar[1 + s]); the first S go out before the wait. After the wait each warp loads x and
   norm_w into registers (x * norm_w, AMK_RING_VPL vectors of 8 a lane) and sums x^2 itself; then,
   round by round, each warp takes its row of the round's slot, the block meets, and the helper
   thread refills the slot with the round S ahead. why: the general path's two rows a pass keep
   ~37 KB of loads in flight a SM, and every warp waits its loads' latency each pass, far from the
   read ceiling on SmolLM2's head (bench/RESULTS.md run 220). With AMK_GEMV_FLAG_ARGMAX each warp's
   lane 0 keeps the best of its rows as stored, and the block's best goes to the partials (the LM
   head with its argmax: no ARGMAX_PARTIAL phase after it). Returns 0 (nothing done, before the
   wait) for other tasks. AMK_RING 0 (amk_tune.h) turns the form off. */
#if AMK_RING_SLOTS < 2 || AMK_RING_SLOTS > 8 /* why 8: the slots' parities travel as bits of one word */
#error "AMK_RING_SLOTS must be 2..8"
#endif
/* Slot s <- the rows r0 .. r0 + nw (at most nt) of the tile: one bulk copy by the helper thread. */
static __device__ __forceinline__ void amk_ring_issue(const amk_op_ctx *c, char *smem, int s, int64_t r0, int64_t nt,
                                                      uint32_t rb, int nw, int K) {
    const uint32_t bytes = (uint32_t)(nt - r0 < nw ? nt - r0 : nw) * (uint32_t)K * 2u;
    amk_ptx_mbar_arrive_expect(c->mbar + 1 + s, bytes);
    amk_ptx_bulk_copy_weights(smem + (uint32_t)s * rb, (const char *)c->in[2].ptr + (c->ins.params.n_off + r0) * K * 2, bytes,
                              c->mbar + 1 + s);
    amk_ptx_bulk_commit(c->mbar + 1 + s);
}
static __device__ __forceinline__ int amk_norm_gemv_ring(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *x = &c->in[0], *nwt = &c->in[1], *W = &c->in[2], *o = &c->out[0];
    const int K = P->K, nw = amk_ntid() >> 5, lane = amk_tid() & 31, warp = amk_tid() >> 5;
    const int64_t nt = P->N_tile, n_begin = P->n_off;
    const uint32_t rb = (uint32_t)nw * (uint32_t)K * 2u, sm = amk_ptx_dynamic_smem_size(); /* a slot's bytes */
    char *ring = (char *)smem;
    int S = AMK_RING_SLOTS, S0, s;
    uint32_t par = 0, k;
    if (c->ins.op != AMK_OP_RMSNORM_GEMV || (P->flags & ~(int32_t)AMK_GEMV_FLAG_ARGMAX) != 0 ||
        !amk_short_rows_ok(c, 256 * AMK_RING_VPL) ||
        nt <= 2 * nw || n_begin + nt > W->shape[0] || 2u * rb > sm)
        return 0;
    while (S > 2 && (uint32_t)S * rb > sm) S--;
    for (s = 0; s < S; s++) par |= (c->mbar_uses[1 + s] & 1u) << s; /* read before the go barrier */
    S0 = 0; /* the rounds that go out before the wait: at most S */
    while (S0 < S && (int64_t)S0 * nw < nt) S0++;
    if (amk_tid() == AMK_AUX_TID) { /* the first rounds, before the wait (the rows are read-only) */
        amk_ptx_fence_proxy_async_smem(); /* the earlier ops' accesses to this shared memory come first */
        for (s = 0; s < S0; s++) amk_ring_issue(c, ring, s, (int64_t)s * nw, nt, rb, nw, K);
    }
    const int go = amk_op_go(c);
    if (amk_tid() == AMK_AUX_TID) /* every thread read the parities before the barrier: count those copies */
        for (s = 0; s < S0; s++) c->mbar_uses[1 + s]++;
    if (!go) { /* no copy may land after the op */
        for (s = 0; s < S0; s++) amk_ptx_mbar_wait(c->mbar + 1 + s, (par >> s) & 1u);
        __syncthreads();
        return 1;
    }
    float xn[8 * AMK_RING_VPL], ss = 0.0f; /* the lane's x * norm_w: vectors lane, lane + 32, ... */
#pragma unroll
    for (int u = 0; u < AMK_RING_VPL; u++) {
        const int kk = 8 * (lane + 32 * u);
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a, f = a, g = a;
        if (kk < K) {
            a = *(const float4 *)((const float *)x->ptr + kk);
            b = *(const float4 *)((const float *)x->ptr + kk + 4);
            f = *(const float4 *)((const float *)nwt->ptr + kk);
            g = *(const float4 *)((const float *)nwt->ptr + kk + 4);
        }
        ss = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, ss))));
        ss = fmaf(b.x, b.x, fmaf(b.y, b.y, fmaf(b.z, b.z, fmaf(b.w, b.w, ss))));
        xn[8 * u + 0] = a.x * f.x; xn[8 * u + 1] = a.y * f.y; xn[8 * u + 2] = a.z * f.z; xn[8 * u + 3] = a.w * f.w;
        xn[8 * u + 4] = b.x * g.x; xn[8 * u + 5] = b.y * g.y; xn[8 * u + 6] = b.z * g.z; xn[8 * u + 7] = b.w * g.w;
    }
    const float inv = 1.0f / sqrtf(amk_warp_sum(ss) / (float)K + P->eps);
    float bv = 0.0f; /* ARGMAX: lane 0's best row of the warp so far (bi < 0: none) */
    int64_t bi = -1;
    s = 0;
    k = 0; /* the fill of slot s this round is the task's k-th into it */
    for (int64_t r0 = 0; r0 < nt; r0 += nw) {
        amk_ptx_mbar_wait(c->mbar + 1 + s, ((par >> s) ^ k) & 1u);
        if (r0 + warp < nt) {
            const char *wr = ring + (uint32_t)s * rb + (uint32_t)warp * (uint32_t)K * 2u;
            float a = 0.0f;
#pragma unroll
            for (int u = 0; u < AMK_RING_VPL; u++) {
                const int kk = 8 * (lane + 32 * u);
                if (kk < K) {
                    float w[8];
                    amk_unpack_bf16x8(*(const uint4 *)(wr + kk * 2), w);
#pragma unroll
                    for (int i = 0; i < 8; i++) a = fmaf(w[i], xn[8 * u + i], a);
                }
            }
            const float y = amk_warp_sum(a) * inv;
            if (lane == 0) {
                const float v = amk_store_f32_bf16(o, n_begin + r0 + warp, y);
                if (P->flags) amk_argmax_merge(&bv, &bi, v, n_begin + r0 + warp); /* flags: ARGMAX alone */
            }
        }
        __syncthreads(); /* every warp is done with slot s */
        if (amk_tid() == AMK_AUX_TID && r0 + (int64_t)S * nw < nt) {
            amk_ptx_fence_proxy_async_smem();
            amk_ring_issue(c, ring, s, r0 + (int64_t)S * nw, nt, rb, nw, K);
            c->mbar_uses[1 + s]++;
        }
        if (++s == S) {
            s = 0;
            k++;
        }
    }
    if (P->flags) { /* ARGMAX */
        amk_block_argmax(c, &bv, &bi);
        if (amk_tid() == 0) amk_pair_store(&c->out[1], P->part, 0, bv, bi);
    }
    return 1;
}

/* An ARGMAX tile's pairs on the general path: per row m of M, the max of its columns [n_off,
   n_off + N_tile) of out (rows of `last`) as stored, and the first index. why __noinline__: it
   runs once a head tile, and out of line it does not move the general path's code (Llama's Q/K/V
   tiles); the step's difference is inside the harness's spread (bench/RESULTS.md run 243). */
static __device__ __noinline__ void amk_tile_pairs(amk_op_ctx *c, int64_t M, int64_t last) {
    const amk_buffer_t *o = &c->out[0];
    const int64_t n_begin = c->ins.params.n_off, n_end = n_begin + c->ins.params.N_tile;
    for (int64_t m = 0; m < M; m++) {
        float bv = 0.0f;
        int64_t bi = -1;
        for (int64_t n = n_begin + AMK_OPS_TID; n < n_end; n += AMK_OPS_NT)
            amk_argmax_merge(&bv, &bi, amk_load((const void *)o->ptr, o->dtype, m * last + n), n);
        amk_block_argmax(c, &bv, &bi);
        if (amk_tid() == 0) amk_pair_store(&c->out[1], c->ins.params.part, m, bv, bi);
        __syncthreads(); /* c->red is the next row's */
    }
}

/* RMSNORM_GEMV, RMSNORM_SWIGLU and RMSNORM_MLP's body; blk (a constant at each call): W (or the gate
   or up) in a block format, whose tiles take the general path. */
static __device__ __forceinline__ void amk_norm_gemv_body(amk_op_ctx *c, float *smem, const int blk) {
    const amk_params_t *P = &c->ins.params;
    const int mlp = c->ins.op == AMK_OP_RMSNORM_MLP, swiglu = c->ins.op == AMK_OP_RMSNORM_SWIGLU || mlp;
    /* flags: the bits that take the positions; argmax: the pairs into the second output */
    const uint32_t flags = swiglu ? 0u : (uint32_t)P->flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW);
    const int argmax = !swiglu && ((uint32_t)P->flags & AMK_GEMV_FLAG_ARGMAX) != 0;
    const int rope = (flags & AMK_GEMV_FLAG_ROPE) != 0, kv_row = (flags & AMK_GEMV_FLAG_KV_ROW) != 0;
    const amk_buffer_t *x = &c->in[0], *nwt = &c->in[1], *W = &c->in[2], *Wu = &c->in[3], *o = &c->out[0];
    const int K = P->K, lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    /* the rows of x: [m_first, M), all of them or, in the prefill image, with M_tile the task's (m_off
       is 0 without M_tile: the host's default). why only there: a prefill chunk's tiles of rows,
       which the other images' hosts refuse (amk__cuda_check_task), and the decode images' code stays
       as it was, byte for byte (their VM is at its 128 registers; bench/RESULTS.md run 389) */
#if AMK_VM_PREFILL
    const int64_t R = amk_div_rows(x->numel, K), M = P->M_tile > 0 ? (int64_t)P->m_off + P->M_tile : R, N = W->shape[0], nt = P->N_tile;
    const int64_t m_first = P->m_off;
#else
    const int64_t M = amk_div_rows(x->numel, K), N = W->shape[0], nt = P->N_tile, R = M;
    const int64_t m_first = 0;
#endif
    const int64_t n_begin = P->n_off, n_end = (int64_t)P->n_off + P->N_tile;
    const int64_t last = kv_row ? N : amk_div_rows(o->numel, R);
    const int esz = W->dtype == AMK_DTYPE_F32 ? 4 : 2;
    const int fast = !blk && (W->dtype == AMK_DTYPE_F32 || W->dtype == AMK_DTYPE_F16 || W->dtype == AMK_DTYPE_BF16) &&
                     (!swiglu || Wu->dtype == W->dtype) && ((int64_t)K * esz) % 16 == 0;
    const int w_nc = W->kind == AMK_KIND_WEIGHT || W->kind == AMK_KIND_CONST || W->kind == AMK_KIND_IO_INPUT;
    /* RMSNORM_MLP's rows of W_downT at the end of shared memory */
    /* floats a staged row of x takes: with a block-format W, x by units and the tile's dots (yb) */
    const int64_t xfl = blk ? AMK_BLK_STAGE_FLOATS(K, swiglu ? 2 : 1, nt, P->x_q8) : K;
    const int64_t per_row = xfl + (rope ? 2 * nt : mlp ? nt : 0);
    const int64_t wsb = mlp ? amk_rows_stage_bytes(c, nt) : 0;
    const int64_t wso = ((int64_t)amk_ptx_dynamic_smem_size() - wsb) & ~(int64_t)15; /* why: the bulk copy's
                        destination is 16-byte aligned; the launch's size need not be a multiple of 16 */
    const int64_t mc0 = amk_rows_fit(wso / 4, per_row);
    const int staged = wsb > 0 && mc0 >= 1;
    const int64_t mc1 = staged ? mc0 : amk_rows_fit(amk_ptx_dynamic_smem_size() / 4, per_row);
    const int64_t mc = blk && mc1 > 1 ? 1 : mc1; /* the block tiles stage one row of x at a time */
    char *ws = staged ? (char *)smem + wso : NULL;
    float *xs = smem;            /* [mc, K] normalised rows of x (a block-format W: x by units, then yb) */
    float *yb = smem + AMK_BLK_X_FLOATS(K); /* a block-format W's dots: [N_tile] (and the up's [N_tile]) */
    float *ys = smem + mc * xfl; /* [mc, N_tile] the tile's values before RoPE */
    float *cssn = ys + mc * nt; /* [mc, N_tile / 2, 2] each pair's cos and sin */
    const int q8 = blk && P->x_q8; /* x rounded to 8 bits a unit (x_q8) */
    int64_t m0, n, i;
#if AMK_LEAN /* why after the setup above (the compiler sinks what the lean form does not use):
                 called first, or from the dispatcher, it is no faster (bench/RESULTS.md run 186) */
    if (!blk && amk_norm_gemv_lean(c, smem)) return;
    if (mlp && ((uint32_t)P->flags & AMK_MLP_FLAG_FOLD)) { /* only the lean form folds (the host checks it) */
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_BAD_OP, P->flags);
        return;
    }
#endif
#if AMK_RING
    if (!blk && amk_norm_gemv_ring(c, smem)) return;
#endif
    /* a block W_down's values restage where x was (amk_blk_down): as many units as x's at most, and x
       by units (the host refuses the rest) */
    if (mc < 1 || (blk && mlp && amk_dtype_blk(c->in[4].dtype) && (K % 32 != 0 || AMK_BLK_UP(nt) > AMK_BLK_UP(K)))) {
        if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_SMEM, K);
        return;
    }
    const uint32_t wpar = staged ? amk_rows_stage(c, ws, n_begin, wsb) : 0u; /* weights, before the wait */
    if (!amk_op_go(c)) {
        if (staged) amk_rows_release(c, wpar);
        return;
    }
    /* why: the first position is loaded before staging and checked after it, so its load
       latency hides behind the staging loads instead of preceding them */
    const int64_t pos_first = flags ? amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0) : 0;
    for (m0 = m_first; m0 < M; m0 += mc) {
        const int mr = (int)(M - m0 < mc ? M - m0 : mc);
        float inv[AMK_GEMV_ROWS]; /* why: xs holds x * norm_w; the row's 1/rms scales the sums */
#pragma unroll
        for (int r = 0; r < AMK_GEMV_ROWS; r++) {
            const float ss = r >= mr ? 0.0f : blk ? amk_blk_stage_x(xs, x, (m0 + r) * K, K, nwt, q8)
                                                  : amk_stage_x(xs + (int64_t)r * K, x, (m0 + r) * K, K, nwt);
            inv[r] = r < mr ? 1.0f / sqrtf(amk_block_sum(c, ss) / (float)K + P->eps) : 0.0f; /* syncs */
        }
        if (blk) { /* the tile's dots (the sums above synced: x is staged) */
            amk_blk_rows(W, K, n_begin, nt, xs, yb);
            if (swiglu) amk_blk_rows(Wu, K, n_begin, nt, xs, yb + nt);
            __syncthreads();
        }
        if (flags && m0 == m_first) /* why: every thread reads the same positions, so all return together */
            for (int64_t m = m_first; m < M; m++) {
                const int64_t pos = amk_fused_pos(c, m, pos_first);
                /* a KV form's tile of rows (M_tile) takes consecutive positions, pos[0] + m (amk_ir.h) */
                if (amk_fused_pos_bad(o, kv_row, pos, N) || (AMK_VM_PREFILL && kv_row && P->M_tile > 0 && pos != pos_first + m)) {
                    if (amk_tid() == 0) amk_op_fail(c, kv_row ? AMK_VM_ERR_KV_POS : AMK_VM_ERR_ROPE_POS, pos);
                    return;
                }
            }
        if (rope) /* why: the pairs' cos and sin before the sums, by the block's last threads (in
                     warps with no or fewer rows when N_tile is not a multiple of the warps), so the
                     epilogue after the sums does not wait for the double-precision trig */
            for (i = AMK_OPS_NT - 1 - AMK_OPS_TID; i < (int64_t)mr * (nt / 2); i += AMK_OPS_NT) {
                const int64_t r = i / (nt / 2), nn = n_begin + 2 * (i - r * (nt / 2));
                const int64_t pos = amk_fused_pos(c, m0 + r, pos_first);
                const float ang = (float)pos * amk_rope_inv_freq(P, (int)((nn % P->head_dim) / 2));
                double sd, cd;
                sincos((double)ang, &sd, &cd);
                cssn[2 * i] = (float)cd;
                cssn[2 * i + 1] = (float)sd;
            }
        for (n = n_begin + warp; n < n_end; n += nw) {
            float acc[AMK_GEMV_ROWS] = {0.0f}, acu[AMK_GEMV_ROWS] = {0.0f};
            /* why two rows a pass (n and n + nw, the second in acu): a short row (SmolLM2's K =
               576: 2-3 loads a lane) alone waits a load latency for a few loads; its LM head tile
               has 372 rows, 23 a warp (bench/NOTES.md session "setup") */
            const int pair = fast && !swiglu && !rope && mr == 1 && W->dtype == AMK_DTYPE_BF16 &&
                             K <= AMK_GEMV_INFLIGHT / 2 * 256 && n + nw < n_end;
            if (fast) {
                const char *wrow = (const char *)W->ptr + n * K * esz; /* [K] row n of W */
                const char *urow = swiglu ? (const char *)Wu->ptr + n * K * esz : pair ? wrow + nw * K * esz : wrow;
                if (W->dtype == AMK_DTYPE_BF16) {
                    if (swiglu || pair) AMK__GEMV_VEC_PAIR(amk_unpack_bf16x8, 8, acc, wrow, acu, urow);
                    else AMK__GEMV_VEC_ROW(amk_unpack_bf16x8, 8, acc, wrow);
                } else if (W->dtype == AMK_DTYPE_F16) {
                    if (swiglu) AMK__GEMV_VEC_PAIR(amk_unpack_f16x8, 8, acc, wrow, acu, urow);
                    else AMK__GEMV_VEC_ROW(amk_unpack_f16x8, 8, acc, wrow);
                } else {
                    if (swiglu) AMK__GEMV_VEC_PAIR(amk_unpack_f32x4, 4, acc, wrow, acu, urow);
                    else AMK__GEMV_VEC_ROW(amk_unpack_f32x4, 4, acc, wrow);
                }
            } else if (blk) { /* the dots of the pass above: lane 0's, which the sums below keep */
                if (lane == 0) {
                    acc[0] = yb[n - n_begin];
                    if (swiglu) acu[0] = yb[nt + n - n_begin];
                }
            } else {
                for (int k = lane; k < K; k += 32) {
                    float w = amk_load((const void *)W->ptr, W->dtype, n * K + k);
                    AMK__GEMV_FMA(acc, &w, 1, xs, K, k, mr);
                    if (swiglu) {
                        w = amk_load((const void *)Wu->ptr, Wu->dtype, n * K + k);
                        AMK__GEMV_FMA(acu, &w, 1, xs, K, k, mr);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < AMK_GEMV_ROWS; r++) {
                if (r < mr) {
                    float v = amk_warp_sum(acc[r]) * inv[r];
                    if (swiglu) v = v / (1.0f + expf(-v)) * (amk_warp_sum(acu[r]) * inv[r]);
                    if (lane == 0) {
                        if (rope || mlp) ys[r * nt + (n - n_begin)] = v;
                        else amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, m0 + r, n, N, last, pos_first), v);
                    }
                }
            }
            if (pair) {
                const float v = amk_warp_sum(acu[0]) * inv[0];
                if (lane == 0) amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, m0, n + nw, N, last, pos_first), v);
                n += nw; /* the loop's step then moves past both rows */
            }
        }
        __syncthreads(); /* why: ys is complete; xs and ys are overwritten by the next row block */
        if (mlp) {
            if (staged && m0 == 0) amk_ptx_mbar_wait(c->mbar, wpar); /* the rows landed (every thread waits) */
            if (blk && amk_dtype_blk(c->in[4].dtype)) amk_blk_down(c, xs, ys, m0, n_begin, nt, 5); /* one row: mr 1 */
            else amk_rows_add(c, ys, ws, ws != NULL, m0, mr, n_begin, nt, 5);
            __syncthreads();
        }
        if (rope) {
            for (i = AMK_OPS_TID; i < (int64_t)mr * (nt / 2); i += AMK_OPS_NT) {
                const int64_t r = i / (nt / 2), j = 2 * (i - r * (nt / 2)), nn = n_begin + j;
                const float cs = cssn[2 * i], sn = cssn[2 * i + 1];
                const float x1 = ys[r * nt + j], x2 = ys[r * nt + j + 1];
                amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, m0 + r, nn, N, last, pos_first), x1 * cs - x2 * sn);
                amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, m0 + r, nn + 1, N, last, pos_first), x2 * cs + x1 * sn);
            }
            __syncthreads();
        }
    }
    if (argmax) amk_tile_pairs(c, M, last); /* every store above came before the loop's last barrier */
    if (staged) amk_rows_done(c); /* every thread waited: the barrier above */
}

AMK_OP_FN void amk_op_norm_gemv(amk_op_ctx *c, float *smem) {
    const int mats = c->ins.op == AMK_OP_RMSNORM_SWIGLU || c->ins.op == AMK_OP_RMSNORM_MLP ? 2 : 1;
    /* a block-format W (or gate, up or W_down): the body's block instance */
    if (amk_dtype_blk(c->in[2].dtype) || (mats == 2 && amk_dtype_blk(c->in[3].dtype)) ||
        (c->ins.op == AMK_OP_RMSNORM_MLP && c->ins.n_inputs >= 5 && amk_dtype_blk(c->in[4].dtype)))
        amk_norm_gemv_body(c, smem, 1);
    else amk_norm_gemv_body(c, smem, 0);
}

/* The block's dynamic shared memory (the VM's, amk_vm.cuh: every op's smem argument points here). */
extern __shared__ __align__(16) unsigned char amk_vm_smem[];

#if AMK_BLK_RING
/* An x_q8 tile (GEMV_TILE, RMSNORM_GEMV in any form, RMSNORM_SWIGLU) of one row of x, which
   amk_op_dispatch sends here: the whole op with its block ring (amk_blk_ring) where the tile takes
   it; 0 (before its wait, nothing done) where it does not, for the op's own function. Its shared
   memory: the block staging with x8 (AMK_BLK_STAGE_FLOATS), RoPE's cos and sin, the ring at the
   end. The epilogue is the fused body's (amk_norm_gemv_body) for one row: the dots times 1/rms,
   SiLU(gate) * up, RoPE on pairs, into out or the cache's row pos, the argmax pairs; GEMV's + bias.
   why a function of its own, out of the VM's line, and not the fused body's: the ring's loop
   inlined into the VM, or into the body, or called from inside either, spilled the VM's
   registers (bench/NOTES.md session "dp4a"); here it runs with little else live, and a call from
   the dispatch, like amk_op_bias_add's, leaves the VM as it was. */
static __device__ __noinline__ int amk_op_blk_ring(amk_op_ctx *c, float *smem_arg) {
    /* why the VM's array, not the argument: a pointer argument is generic to a function out of
       line, and the slots' and x's loads through it were generic loads, not shared-memory ones */
    float *smem = (float *)amk_vm_smem;
    const amk_params_t *P = &c->ins.params;
    (void)smem_arg;
    const int gemv = c->ins.op == AMK_OP_GEMV_TILE, swiglu = c->ins.op == AMK_OP_RMSNORM_SWIGLU;
    const uint32_t flags = gemv || swiglu ? 0u : (uint32_t)P->flags;
    const int rope = (flags & AMK_GEMV_FLAG_ROPE) != 0, kv_row = (flags & AMK_GEMV_FLAG_KV_ROW) != 0;
    const amk_buffer_t *x = &c->in[0], *W = &c->in[gemv ? 1 : 2], *Wu = swiglu ? &c->in[3] : NULL, *o = &c->out[0];
    const int K = P->K;
    const int64_t nt = P->N_tile, n0 = P->n_off, N = W->shape[0];
    const int64_t sf = AMK_BLK_STAGE_FLOATS(K, swiglu ? 2 : 1, nt, 1) + (rope ? nt : 0); /* + RoPE's cos and sin */
    if (amk_div_rows(x->numel, K) != 1 || P->M_tile > 0 || !amk_blk_stage_x8_takes(x, gemv ? NULL : &c->in[1])) return 0;
    int m = 1; /* chunks of m times AMK_BLK_RING_UNITS units */
    const int S = amk_blk_ring_slots(c, W, Wu, (int64_t)amk_ptx_dynamic_smem_size() - 4 * sf - 16, &m);
    if (!S) return 0;
    amk_blk_ring_start(c, smem, S, m, W, Wu, n0, nt);
    if (!amk_op_go(c)) {
        amk_blk_ring_end(smem, S, amk_blk_ring_cb(W, Wu, m), amk_blk_ring_chunks(c, nt, swiglu, m), 0);
        return 1;
    }
    float *yb = smem + AMK_BLK_X_FLOATS(K), *cssn = smem + AMK_BLK_STAGE_FLOATS(K, swiglu ? 2 : 1, nt, 1);
    uint8_t *x8 = (uint8_t *)(smem + AMK_BLK_X8_OFF(K, swiglu ? 2 : 1, nt));
    const int64_t pos = flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW) ? amk_load_int((const void *)c->in[3].ptr, c->in[3].dtype, 0) : 0;
    const float ss = amk_blk_stage_x8(x, K, gemv ? NULL : &c->in[1], x8);
    const float inv = gemv ? 1.0f : 1.0f / sqrtf(amk_block_sum(c, ss) / (float)K + P->eps); /* syncs */
    if (gemv) __syncthreads();
    AMK_OP_MARK(c, 0); /* x staged */
    if ((rope || kv_row) && amk_fused_pos_bad(o, kv_row, pos, N)) { /* every thread read the same position */
        if (amk_tid() == 0) amk_op_fail(c, kv_row ? AMK_VM_ERR_KV_POS : AMK_VM_ERR_ROPE_POS, pos);
        amk_blk_ring_end(smem, S, amk_blk_ring_cb(W, Wu, m), amk_blk_ring_chunks(c, nt, swiglu, m), 0);
        return 1;
    }
    if (rope) /* the pairs' cos and sin, as the fused body's (before the dots, by the block's last threads) */
        for (int64_t i = AMK_OPS_NT - 1 - AMK_OPS_TID; i < nt / 2; i += AMK_OPS_NT) {
            const float ang = (float)pos * amk_rope_inv_freq(P, (int)(((n0 + 2 * i) % P->head_dim) / 2));
            double sd, cd;
            sincos((double)ang, &sd, &cd);
            cssn[2 * i] = (float)cd;
            cssn[2 * i + 1] = (float)sd;
        }
    amk_blk_ring(c, smem, S, m, W, Wu, n0, nt, x8, yb);
    AMK_OP_MARK(c, 1); /* warp 0's rows */
    __syncthreads();
    AMK_OP_MARK(c, 2); /* every warp's */
    const int64_t last = kv_row ? N : o->numel;
    if (rope) {
        for (int64_t i = AMK_OPS_TID; i < nt / 2; i += AMK_OPS_NT) {
            const float cs = cssn[2 * i], sn = cssn[2 * i + 1], x1 = yb[2 * i] * inv, x2 = yb[2 * i + 1] * inv;
            amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, 0, n0 + 2 * i, N, last, pos), x1 * cs - x2 * sn);
            amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, 0, n0 + 2 * i + 1, N, last, pos), x2 * cs + x1 * sn);
        }
    } else {
        const amk_buffer_t *bias = gemv && c->ins.n_inputs > 2 ? &c->in[2] : NULL;
        for (int64_t r = AMK_OPS_TID; r < nt; r += AMK_OPS_NT) {
            float v = yb[r] * inv;
            if (swiglu) v = v / (1.0f + expf(-v)) * (yb[nt + r] * inv);
            if (bias) v += amk_load((const void *)bias->ptr, bias->dtype, n0 + r);
            amk_store((void *)o->ptr, o->dtype, amk_fused_index(c, kv_row, 0, n0 + r, N, last, pos), v);
        }
    }
    AMK_OP_MARK(c, 3); /* the outputs stored */
    if (flags & AMK_GEMV_FLAG_ARGMAX) {
        __syncthreads(); /* why: amk_tile_pairs reads the tile's values as stored */
        amk_tile_pairs(c, 1, last);
    }
    return 1;
}
#endif

/* The binary elementwise ops, out[e] = f(a[e], b[e]); op is a compile-time constant at each call
   so the choice folds away. With M_tile, the rows [m_off, m_off + M_tile) of the output's first
   axis only. */
/* SILU_MUL's silu(a) * b, else ADD's a + b. */
static __device__ __forceinline__ float amk_binary_value(int op, float a, float b) {
    return op == AMK_OP_SILU_MUL ? a / (1.0f + expf(-a)) * b : a + b;
}
#if AMK_VM_PREFILL
/* amk_op_binary's rows [e0, n) over 16-byte vectors where the buffers take them; 0 (nothing done)
   where they do not. why out of line: inlined, its loop over three dtypes made the prefill VM
   spill 1.1 KB more (bench/RESULTS.md run 452) */
static __device__ __noinline__ int amk_binary_vec(amk_op_ctx *c, int op, int64_t e0, int64_t n) {
    const amk_buffer_t *a = &c->in[0], *b = &c->in[1], *o = &c->out[0];
    /* a prefill chunk's SILU_MUL and residual ADDs (512 rows of bf16, f16 or f32): 16-byte vectors,
       two a thread in flight, the same values as below. why the prefill builds only: the decode
       images' code stays the one measured (their binary ops are a row or none) */
    if (a->dtype == o->dtype && b->dtype == o->dtype &&
        (o->dtype == AMK_DTYPE_BF16 || o->dtype == AMK_DTYPE_F16 || o->dtype == AMK_DTYPE_F32) &&
        ((a->ptr | b->ptr | o->ptr) & 15u) == 0 && e0 % 8 == 0 && n % 8 == 0 && a->numel >= n && b->numel >= n) {
        const int bf = o->dtype == AMK_DTYPE_BF16, hf = o->dtype == AMK_DTYPE_F16, per = bf || hf ? 8 : 4; /* elements a vector */
        const uint4 *av = (const uint4 *)a->ptr, *bv = (const uint4 *)b->ptr;
        uint4 *ov = (uint4 *)o->ptr;
        const int64_t v1 = n / per, step = AMK_OPS_NT;
        for (int64_t v = e0 / per + AMK_OPS_TID; v < v1; v += 2 * step) {
            uint4 ra[2], rb[2];
#pragma unroll
            for (int k = 0; k < 2; k++) {
                ra[k] = v + k * step < v1 ? av[v + k * step] : make_uint4(0u, 0u, 0u, 0u);
                rb[k] = v + k * step < v1 ? bv[v + k * step] : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int k = 0; k < 2; k++) {
                if (v + k * step >= v1) break;
                float fa[8], fb[8], r[8];
                if (bf) {
                    amk_unpack_bf16x8(ra[k], fa);
                    amk_unpack_bf16x8(rb[k], fb);
                } else if (hf) {
                    amk_unpack_f16x8(ra[k], fa);
                    amk_unpack_f16x8(rb[k], fb);
                } else {
                    amk_unpack_f32x4(ra[k], fa);
                    amk_unpack_f32x4(rb[k], fb);
                }
#pragma unroll
                for (int j = 0; j < 8; j++) r[j] = j < per ? amk_binary_value(op, fa[j], fb[j]) : 0.0f;
                ov[v + k * step] = bf ? make_uint4(amk_pack_bf16x2(r[0], r[1]), amk_pack_bf16x2(r[2], r[3]),
                                                   amk_pack_bf16x2(r[4], r[5]), amk_pack_bf16x2(r[6], r[7]))
                                   : hf ? make_uint4(amk_pack_f16x2(r[0], r[1]), amk_pack_f16x2(r[2], r[3]),
                                                     amk_pack_f16x2(r[4], r[5]), amk_pack_f16x2(r[6], r[7]))
                                        : make_uint4(__float_as_uint(r[0]), __float_as_uint(r[1]), __float_as_uint(r[2]),
                                                     __float_as_uint(r[3]));
            }
        }
        return 1;
    }
    return 0;
}
#endif

static __device__ __forceinline__ void amk_op_binary(amk_op_ctx *c, int op) {
    const amk_buffer_t *a = &c->in[0], *b = &c->in[1], *o = &c->out[0];
    const int64_t row = c->ins.params.M_tile > 0 ? o->numel / o->shape[0] : 0;
    const int64_t e0 = row ? c->ins.params.m_off * row : 0;
    const int64_t n = row ? (c->ins.params.m_off + (int64_t)c->ins.params.M_tile) * row : o->numel;
    int64_t i;
#if AMK_VM_PREFILL
    if (amk_binary_vec(c, op, e0, n)) return;
#endif
    for (i = e0 + AMK_OPS_TID; i < n; i += AMK_EW_ILP * AMK_OPS_NT) {
        float av[AMK_EW_ILP], bv[AMK_EW_ILP];
        int k;
        amk_load_ilp((const void *)a->ptr, a->dtype, i, AMK_OPS_NT, n, av);
        amk_load_ilp((const void *)b->ptr, b->dtype, i, AMK_OPS_NT, n, bv);
#pragma unroll
        for (k = 0; k < AMK_EW_ILP; k++) {
            const float r = amk_binary_value(op, av[k], bv[k]);
            if (i + k * AMK_OPS_NT < n) amk_store((void *)o->ptr, o->dtype, i + k * AMK_OPS_NT, r);
        }
    }
}

/* SILU_MUL: silu(gate) * up. */
AMK_OP_FN void amk_op_silu_mul(amk_op_ctx *c, float *smem) {
    (void)smem;
    amk_op_binary(c, AMK_OP_SILU_MUL);
}

/* GELU, exact (erf). */
AMK_OP_FN void amk_op_gelu(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    int64_t i;
    for (i = AMK_OPS_TID; i < o->numel; i += AMK_OPS_NT) {
        const float v = amk_load((const void *)x->ptr, x->dtype, i);
        amk_store((void *)o->ptr, o->dtype, i, 0.5f * v * (1.0f + erff(v / sqrtf(2.0f))));
    }
}

/* ADD: a + b. */
AMK_OP_FN void amk_op_add(amk_op_ctx *c, float *smem) {
    (void)smem;
    amk_op_binary(c, AMK_OP_ADD);
}

/* MUL: a * b (b of one element broadcasts), or a * scale with one input. */
AMK_OP_FN void amk_op_mul(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *a = &c->in[0], *b = c->ins.n_inputs > 1 ? &c->in[1] : 0, *o = &c->out[0];
    int64_t i;
    for (i = AMK_OPS_TID; i < o->numel; i += AMK_OPS_NT) {
        const float bv = !b ? c->ins.params.scale
                       : amk_load((const void *)b->ptr, b->dtype, b->numel == 1 ? 0 : i);
        amk_store((void *)o->ptr, o->dtype, i, amk_load((const void *)a->ptr, a->dtype, i) * bv);
    }
}

/* DEQUANT: (q - zero) * scale over groups of `group` consecutive elements. qdtype 6: q is I8;
   qdtype 7: q is I4, or U8 holding two nibbles a byte (logical element 2b in the low nibble). */
AMK_OP_FN void amk_op_dequant(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_params_t *P = &c->ins.params;
    const amk_buffer_t *q = &c->in[0], *sc = &c->in[1], *zr = c->ins.n_inputs > 2 ? &c->in[2] : 0;
    const amk_buffer_t *o = &c->out[0];
    const int64_t n = o->numel, group = P->group;
    int64_t i;
    for (i = AMK_OPS_TID; i < n; i += AMK_OPS_NT) {
        float qv;
        if (q->dtype == AMK_DTYPE_U8) {
            const uint32_t byte = ((const uint8_t *)q->ptr)[i >> 1];
            qv = (float)((int)((i & 1) ? (byte >> 4) : (byte & 15u)) - 8);
        } else {
            qv = amk_load((const void *)q->ptr, q->dtype, i); /* I8, or I4 (already q = nibble - 8) */
        }
        amk_store((void *)o->ptr, o->dtype, i, amk_q_dequant(qv, sc, zr, i / group));
    }
}

/* SOFTMAX along `dim`: one warp per line (outer x inner lines of D elements, stride inner). */
AMK_OP_FN void amk_op_softmax(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const int lane = amk_tid() & 31, warp = amk_tid() >> 5, nw = amk_ntid() >> 5;
    int dim = c->ins.params.dim, k;
    int64_t D = x->numel, inner = 1, lines, line, j;
    if (x->rank > 0) {
        if (dim < 0) dim += x->rank;
        D = x->shape[dim];
        for (k = dim + 1; k < x->rank; k++) inner *= x->shape[k];
    }
    lines = D > 0 ? x->numel / D : 0;
    for (line = warp; line < lines; line += nw) {
        const int64_t outer = line / inner, in = line - outer * inner, base = outer * D * inner + in;
        float m = -INFINITY, s = 0.0f;
        for (j = lane; j < D; j += 32) m = fmaxf(m, amk_load((const void *)x->ptr, x->dtype, base + j * inner));
        m = amk_warp_max(m);
        for (j = lane; j < D; j += 32) s += expf(amk_load((const void *)x->ptr, x->dtype, base + j * inner) - m);
        s = amk_warp_sum(s);
        for (j = lane; j < D; j += 32)
            amk_store((void *)o->ptr, o->dtype, base + j * inner,
                      expf(amk_load((const void *)x->ptr, x->dtype, base + j * inner) - m) / s);
    }
}

/* ALLREDUCE_SHARD: the sum of the shards, in input order (the single-device meaning); with M_tile
   (the prefill image's: amk_plan_prefill_only) rows [m_off, m_off + M_tile) of out alone. */
AMK_OP_FN void amk_op_allreduce_shard(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *o = &c->out[0];
#if AMK_VM_PREFILL
    const int64_t row = c->ins.params.M_tile > 0 ? o->numel / o->shape[0] : 0;
    const int64_t e0 = row ? c->ins.params.m_off * row : 0;
    const int64_t n = row ? (c->ins.params.m_off + (int64_t)c->ins.params.M_tile) * row : o->numel;
#else
    const int64_t e0 = 0, n = o->numel;
#endif
    int64_t i;
    for (i = e0 + AMK_OPS_TID; i < n; i += AMK_OPS_NT) {
        float s = amk_load((const void *)c->in[0].ptr, c->in[0].dtype, i);
        for (int p = 1; p < c->ins.n_inputs; p++) s += amk_load((const void *)c->in[p].ptr, c->in[p].dtype, i);
        amk_store((void *)o->ptr, o->dtype, i, s);
    }
}

#if AMK_VM_PREFILL
/* The prefill image's ops that run out of the VM's line, from COPY's one call (amk_op_dispatch sends
   the others there); 1 when it ran c's task: a COPY of rows or of a block-format x (amk_copy_rows),
   every GEMM_TILE the tensor-copy GEMM does not take (a K range among them). why one call for
   both: each call site in the VM's op loop costs the VM registers (a call of its own, in
   GEMM_TILE's function, spilled the prefill VM more and slowed its chunks 1-2%: bench/NOTES.md
   session "split-k"); why out of line at all: inlined, COPY's rows
   spilled the VM ~1.6 KB more. */
static __device__ __noinline__ int amk_prefill_ops(amk_op_ctx *c, float *smem) {
    if (c->ins.op == AMK_OP_GEMM_TILE) amk_op_gemm_tile(c, smem);
    else return amk_copy_rows(c, smem);
    return 1;
}
#endif

/* KV_APPEND: row pos (numel(new) elements) of the cache = new, cast; the rest untouched. */
AMK_OP_FN void amk_op_kv_append(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *nw = &c->in[0], *o = &c->out[0]; /* out is the cache (in[1]) itself */
    const int64_t R = nw->numel, base = (int64_t)c->ins.params.pos * R;
    int64_t i;
    for (i = AMK_OPS_TID; i < R; i += AMK_OPS_NT)
        amk_store((void *)o->ptr, o->dtype, base + i, amk_load((const void *)nw->ptr, nw->dtype, i));
}

/* SAMPLE_ARGMAX per row of the last axis: first index of the max; NaN never wins; all NaN -> 0. */
AMK_OP_FN void amk_op_sample_argmax(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const int64_t L = x->shape[x->rank - 1], rows = x->numel / L;
    int64_t r, j;
    for (r = 0; r < rows; r++) {
        float bv = 0.0f;
        int64_t bi = -1;
        if (x->dtype == AMK_DTYPE_F32 && L % 4 == 0 && (x->ptr & 15u) == 0) {
            /* why: 128k logits on one SM; 4 float4 loads in flight per thread, not one scalar */
            const float4 *p4 = (const float4 *)((const float *)x->ptr + r * L);
            const int64_t n4 = L / 4;
            for (j = AMK_OPS_TID; j < n4; j += 4 * AMK_OPS_NT) {
                float4 v[4];
#pragma unroll
                for (int u = 0; u < 4; u++) v[u] = j + u * AMK_OPS_NT < n4 ? p4[j + u * AMK_OPS_NT] : make_float4(NAN, NAN, NAN, NAN);
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int64_t b = 4 * (j + u * AMK_OPS_NT);
                    amk_argmax_merge(&bv, &bi, v[u].x, b);
                    amk_argmax_merge(&bv, &bi, v[u].y, b + 1);
                    amk_argmax_merge(&bv, &bi, v[u].z, b + 2);
                    amk_argmax_merge(&bv, &bi, v[u].w, b + 3);
                }
            }
        } else {
            for (j = AMK_OPS_TID; j < L; j += AMK_OPS_NT) amk_argmax_merge(&bv, &bi, amk_load((const void *)x->ptr, x->dtype, r * L + j), j);
        }
        amk_block_argmax(c, &bv, &bi);
        if (amk_tid() == 0) amk_store_int((void *)o->ptr, o->dtype, r, bi < 0 ? 0 : bi);
        __syncthreads();
    }
}

/* ARGMAX_PARTIAL (columns [n_off, n_off + N_tile) of each row -> the pair `part` of out: the max,
   its index as F32; NaN, -1 when no candidate) and ARGMAX_COMBINE (the index of each row's best
   pair; 0 when none): amk__ref_argmax's rule. why __noinline__: once a step, kept out of the VM
   loop's code (bench/NOTES.md: code placement moves the hot ops). */
static __device__ __noinline__ void amk_op_argmax_pair(amk_op_ctx *c, float *smem) {
    (void)smem;
    const amk_buffer_t *x = &c->in[0], *o = &c->out[0];
    const int tid = amk_tid(), nt = amk_ntid(), combine = c->ins.op == AMK_OP_ARGMAX_COMBINE;
    const int64_t L = x->shape[x->rank - 1], rows = x->numel / L;
    const int64_t j0 = combine ? 0 : c->ins.params.n_off, j1 = combine ? L / 2 : j0 + c->ins.params.N_tile;
    for (int64_t r = 0; r < rows; r++) {
        float bv = 0.0f;
        int64_t bi = -1, j;
        if (combine) { /* F32 pairs (the host checks) */
            const float *p = (const float *)x->ptr + r * L;
            for (j = tid; j < j1; j += nt) amk_argmax_merge(&bv, &bi, p[2 * j], amk_argmax_index(p[2 * j + 1]));
        } else if (x->dtype == AMK_DTYPE_F32) { /* why: 4 loads in flight a thread, as SAMPLE_ARGMAX */
            const float *p = (const float *)x->ptr + r * L;
            for (j = j0 + tid; j < j1; j += 4 * (int64_t)nt) {
                float v[4];
#pragma unroll
                for (int u = 0; u < 4; u++) v[u] = j + u * nt < j1 ? p[j + u * nt] : NAN; /* NaN: no candidate */
#pragma unroll
                for (int u = 0; u < 4; u++) amk_argmax_merge(&bv, &bi, v[u], j + u * nt);
            }
        } else {
            for (j = j0 + tid; j < j1; j += nt) amk_argmax_merge(&bv, &bi, amk_load((const void *)x->ptr, x->dtype, r * L + j), j);
        }
        amk_block_argmax(c, &bv, &bi);
        if (tid == 0) {
            if (combine) {
                amk_store_int((void *)o->ptr, o->dtype, r, bi < 0 ? 0 : bi);
            } else {
                amk_pair_store(o, c->ins.params.part, r, bv, bi);
            }
        }
        __syncthreads();
    }
}

/* One set of ATTENTION_COMBINE's partials into a thread's running max M, mass L and pair of sums
   (a0, a1): the sums so far rescaled to the new max, then each input's weight exp(m_i - max). */
static __device__ __forceinline__ void amk_combine_set(const float2 *v, const float2 *ml, float *M, float *L, float *a0,
                                                       float *a1) {
    float mc = *M, r;
#pragma unroll
    for (int i = 0; i < AMK_MAX_INPUTS; i++) mc = fmaxf(mc, ml[i].x);
    r = *M == -INFINITY ? 0.0f : expf(*M - mc);
    *L *= r;
    *a0 *= r;
    *a1 *= r;
#pragma unroll
    for (int i = 0; i < AMK_MAX_INPUTS; i++) {
        const float w = ml[i].y > 0.0f ? expf(ml[i].x - mc) : 0.0f;
        *L += ml[i].y * w;
        *a0 += v[i].x * w;
        *a1 += v[i].y * w;
    }
    *M = mc;
}

/* ATTENTION_COMBINE: out [n_heads, head_dim] from the partials [n_heads, head_dim + 2] = [acc | m |
   l], k sets an input (AMK_ATTN_FLAG_PARTIAL's stacked sets; partial p = s * ni + i is set s of
   input i), merged with the max m: w_p = l_p > 0 ? exp(m_p - m) : 0, out = sum acc_p w_p / sum l_p
   w_p (0 when the sum is 0); with N_tile >= 1 the heads [n_off, n_off + N_tile) only. A thread a
   pair of dims (an even head_dim, 8-byte aligned partials) loads two sets of every input at once,
   each its acc pair and its (m, l), and keeps a running max over the sets (the sums rescaled when
   it grows): one load round for two sets, no shared memory. why: the staged weights' form (a round
   for the (m, l), a barrier, the weights, a barrier, then the sums) took 6.3 us a task for 4 heads
   of 16 splits (8B at context 4096, run 421), its rounds of latency, not its bytes; a round a set
   3.9 (run 422). Else a thread an element, the max first. */
AMK_OP_FN void amk_op_attention_combine(amk_op_ctx *c, float *smem) {
    const amk_params_t *P = &c->ins.params;
    const int hd = P->head_dim, ni = c->ins.n_inputs;
    const amk_buffer_t *o = &c->out[0];
    const int64_t nh = o->numel / hd, row = hd + 2;
    const int k = (int)(c->in[0].numel / (nh * row)), np = ni * k;
    const int64_t h0 = P->N_tile > 0 ? P->n_off : 0, nt = P->N_tile > 0 ? P->N_tile : nh;
    int pairs = hd % 2 == 0;
    int64_t e;
    (void)smem;
    for (int i = 0; i < ni; i++) pairs &= c->in[i].ptr % 8 == 0;
    if (pairs) {
        for (e = AMK_OPS_TID; e < nt * hd / 2; e += AMK_OPS_NT) {
            const int64_t t = 2 * e / hd, d = 2 * e - t * hd, h = h0 + t;
            float M = -INFINITY, L = 0.0f, a0 = 0.0f, a1 = 0.0f;
            for (int s = 0; s < k; s += 2) {
                const int two = s + 1 < k;
                const int64_t off = (s * nh + h) * row, off2 = two ? off + nh * row : off;
                float2 v[2][AMK_MAX_INPUTS], ml[2][AMK_MAX_INPUTS];
#pragma unroll
                for (int i = 0; i < AMK_MAX_INPUTS; i++) {
                    const float *pi = (const float *)c->in[i < ni ? i : 0].ptr;
                    v[0][i] = i < ni ? *(const float2 *)(pi + off + d) : make_float2(0.0f, 0.0f);
                    ml[0][i] = i < ni ? *(const float2 *)(pi + off + hd) : make_float2(-INFINITY, 0.0f);
                    v[1][i] = i < ni && two ? *(const float2 *)(pi + off2 + d) : make_float2(0.0f, 0.0f);
                    ml[1][i] = i < ni && two ? *(const float2 *)(pi + off2 + hd) : make_float2(-INFINITY, 0.0f);
                }
                amk_combine_set(v[0], ml[0], &M, &L, &a0, &a1);
                amk_combine_set(v[1], ml[1], &M, &L, &a0, &a1);
            }
            AMK_OP_MARK(c, 0); /* the sets merged */
            L = L > 0.0f ? 1.0f / L : 0.0f;
            amk_store((void *)o->ptr, o->dtype, h * hd + d, a0 * L);
            amk_store((void *)o->ptr, o->dtype, h * hd + d + 1, a1 * L);
        }
        AMK_OP_MARK(c, 1); /* the outputs stored */
        return;
    }
    for (e = AMK_OPS_TID; e < nt * hd; e += AMK_OPS_NT) {
        const int64_t t = e / hd, d = e - t * hd, h = h0 + t;
        float m = -INFINITY, l = 0.0f, acc = 0.0f;
        for (int p = 0; p < np; p++) {
            const int s = p / ni, i = p - s * ni;
            m = fmaxf(m, ((const float *)c->in[i].ptr)[(s * nh + h) * row + hd]);
        }
        for (int p = 0; p < np; p++) {
            const int s = p / ni, i = p - s * ni;
            const float *pp = (const float *)c->in[i].ptr + (s * nh + h) * row; /* F32 (op_check) */
            const float lp = pp[hd + 1], w = lp > 0.0f ? expf(pp[hd] - m) : 0.0f;
            l += lp * w;
            acc += pp[d] * w;
        }
        amk_store((void *)o->ptr, o->dtype, h * hd + d, l > 0.0f ? acc / l : 0.0f);
    }
}

/* BIAS_ADD: out[m, n] = x[m, n] + b[n], a thread a column of b, row by row (no division). why
   __noinline__: no decode step runs it, so its code stays out of the VM loop's (like ARGMAX's). */
static __device__ __noinline__ void amk_op_bias_add(amk_op_ctx *c, float *smem) {
    const amk_buffer_t *x = &c->in[0], *b = &c->in[1], *o = &c->out[0];
    const int64_t N = b->numel, rows = x->numel / N;
    (void)smem;
    for (int64_t n = AMK_OPS_TID; n < N; n += AMK_OPS_NT) {
        const float bn = amk_load((const void *)b->ptr, b->dtype, n);
        for (int64_t m = 0; m < rows; m++)
            amk_store((void *)o->ptr, o->dtype, m * N + n, amk_load((const void *)x->ptr, x->dtype, m * N + n) + bn);
    }
}

/* Runs instruction c->ins on the calling block: its device function in the op table (amk_ir.h
   AMK_OPS). smem: the dynamic shared memory. why __forceinline__: left to itself, the compiler made
   the dispatch a call once the ops grew, and the call spilled (the ops are written for the inlined
   register budget). */
static __device__ __forceinline__ void amk_op_dispatch(amk_op_ctx *c, float *smem) {
    const int op = c->ins.op;
    /* the ops that split their setup from their work call amk_op_go themselves (>>go) */
#define AMK__OP_SPLITS(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) || ((go) && op == (code))
    const int splits = 0 AMK_OPS(AMK__OP_SPLITS);
#undef AMK__OP_SPLITS
    if ((!AMK_VM_EARLY_SETUP || !splits) && !amk_op_wait_go(c)) return;
#if AMK__ATTN_WG
    if (c->ins.form == AMK_FORM_ATTN_WG) { /* why here: amk_attn_pf_wg's one call, inlined into the VM */
        amk_attn_pf_wg(c, smem);
        return;
    }
#endif
#if AMK_GEMM_TMA && AMK_VM_PREFILL
    /* the tensor-copy GEMM of a GEMV_TILE, GEMM_TILE or RMSNORM_GEMV tile (the prefill image): its
       rows [m_off, m_off + M_tile), or all of x's. why here: its one call, inlined into the VM */
    if (c->ins.form == AMK_FORM_GEMM_TMA) {
        const int64_t m0 = c->ins.params.M_tile > 0 ? c->ins.params.m_off : 0;
        amk_gemm_tma(c, smem, m0, c->ins.params.M_tile > 0 ? m0 + c->ins.params.M_tile : amk_div_rows(c->in[0].numel, c->ins.params.K));
        return;
    }
#endif
#if AMK_BLK_RING
    if (c->ins.params.x_q8 && ((op == AMK_OP_GEMV_TILE && !amk_gemv_quant(c)) || op == AMK_OP_RMSNORM_GEMV ||
                               op == AMK_OP_RMSNORM_SWIGLU)) { /* its W in a block format: the validator's rule */
        if (amk_op_blk_ring(c, smem)) return;
    }
#endif
    switch (op) { /* each op jumps to its device function's one call (the table's dev_first) */
/* (the prefill image: GEMM_TILE to amk_prefill_ops's one call, in COPY's function) */
#define AMK__OP_DEV_CASE_1(code, dv) \
    case code: if (AMK_VM_PREFILL && (code) == AMK_OP_GEMM_TILE) goto amk__dev_amk_op_copy; \
        goto amk__dev_##dv;
#define AMK__OP_DEV_CASE_0(code, dv) case code: goto amk__dev_##dv;
#define AMK__OP_DEV_CASE_AS(code, dv) /* the host sends it as its base op's form */
#define AMK__OP_DEV_CASE(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) AMK__OP_DEV_CASE_##df(code, dv)
        AMK_OPS(AMK__OP_DEV_CASE)
#undef AMK__OP_DEV_CASE
#undef AMK__OP_DEV_CASE_AS
#undef AMK__OP_DEV_CASE_0
#undef AMK__OP_DEV_CASE_1
    default: if (amk_tid() == 0) amk_op_fail(c, AMK_VM_ERR_BAD_OP, c->ins.op); return;
    }
#define AMK__OP_DEV_CALL_0(dv)
#define AMK__OP_DEV_CALL_AS(dv)
#define AMK__OP_DEV_CALL_1(dv) amk__dev_##dv: dv(c, smem); return;
#define AMK__OP_DEV_CALL(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) AMK__OP_DEV_CALL_##df(dv)
    AMK_OPS(AMK__OP_DEV_CALL)
#undef AMK__OP_DEV_CALL
#undef AMK__OP_DEV_CALL_1
#undef AMK__OP_DEV_CALL_AS
#undef AMK__OP_DEV_CALL_0
}

#endif /* AMK_OPS_CUH */
