/* bench/bench_ptx.cuh - the few PTX helpers the standalone GPU probes in bench/ share
   (sm_rate.cu, cluster_probe.cu, red_probe.cu, poll_probe.cu). Not part of the library: amk_ops.cuh
   has its own. */
#ifndef AMK_BENCH_PTX_CUH
#define AMK_BENCH_PTX_CUH
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static __device__ __forceinline__ uint64_t gtimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
/* The VM's hop (amk_ops.cuh): the counter's polls relaxed, one acquire read once met, the signal
   one release add. */
static __device__ __forceinline__ uint32_t ld_relaxed(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ uint32_t ld_acquire(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void red_release_add(uint32_t *p, uint32_t v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ uint4 ld_nc_na(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
static __device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void bar_init(uint64_t *b, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(b)), "r"(count) : "memory");
}
static __device__ __forceinline__ void bar_expect(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_addr(b)), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    bar_expect(b, bytes);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(b)) : "memory");
}
static __device__ __forceinline__ void bar_wait(uint64_t *b, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(smem_addr(b)), "r"(parity) : "memory");
}


#define STAGES_MAX 8

/* Each block streams its slice of src. mode 0 ld (16-byte no-allocate loads, 8 in flight a lane),
   1 bulk (thread 0 keeps `stages` copies of `chunk` bytes in flight into a shared-memory ring),
   2 bulk+use (every thread reads each chunk from shared memory; a block barrier frees the stage). src: per_block bytes a block (a multiple of the chunk and 4 KB). */
__global__ void __launch_bounds__(512, 1) k_stream(const char *src, uint64_t per_block, int mode, uint32_t chunk,
                                                   int stages, uint64_t *times, uint32_t *sink) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ uint64_t bars[STAGES_MAX];
    const char *p = src + (uint64_t)blockIdx.x * per_block;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    uint32_t acc = 0;
    uint64_t t0;
    if (mode != 0 && tid == 0) {
        for (int s = 0; s < stages; s++) bar_init(&bars[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    t0 = gtimer();
    if (mode == 0) {
        for (uint64_t row = warp; row < per_block / 4096; row += nw) {
            uint4 r[8];
#pragma unroll
            for (int u = 0; u < 8; u++) r[u] = ld_nc_na(p + row * 4096 + (uint64_t)(lane + 32 * u) * 16);
#pragma unroll
            for (int u = 0; u < 8; u++) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
        }
    } else {
        const uint64_t n = per_block / chunk;
        if (tid == 0)
            for (int s = 0; s < stages && (uint64_t)s < n; s++) bulk_copy(ring + (uint64_t)s * chunk, p + (uint64_t)s * chunk, chunk, &bars[s]);
        for (uint64_t i = 0; i < n; i++) {
            const int s = (int)(i % stages);
            const uint32_t parity = (uint32_t)((i / stages) & 1);
            if (mode == 1) {
                if (tid == 0) {
                    bar_wait(&bars[s], parity);
                    acc ^= *(volatile uint32_t *)(ring + (uint64_t)s * chunk);
                    if (i + stages < n) bulk_copy(ring + (uint64_t)s * chunk, p + (i + stages) * chunk, chunk, &bars[s]);
                }
            } else {
                bar_wait(&bars[s], parity);
                for (uint32_t o = tid * 16; o < chunk; o += blockDim.x * 16) {
                    const uint4 v = *(const uint4 *)(ring + (uint64_t)s * chunk + o);
                    acc ^= v.x ^ v.y ^ v.z ^ v.w;
                }
                __syncthreads(); /* every thread has read stage s */
                if (tid == 0 && i + stages < n) bulk_copy(ring + (uint64_t)s * chunk, p + (i + stages) * chunk, chunk, &bars[s]);
            }
        }
    }
    __syncthreads();
    if (tid == 0) {
        times[2 * blockIdx.x] = t0;
        times[2 * blockIdx.x + 1] = gtimer();
    }
    if (acc == 0x9E3779B9u) *sink = acc; /* why: keeps the loads alive; practically never taken */
}


/* The streaming runs' buffers: BIG bytes to read (windows far apart, so nothing of one run is
   left in the 50 MB L2 for the next), 1024 blocks' start/end times, k_stream's sink. */
struct StreamBufs { char *buf; uint64_t *times; uint32_t *sink; int sms; };
static inline StreamBufs stream_bufs(uint64_t big) {
    StreamBufs b;
    CK(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaMalloc(&b.buf, big));
    CK(cudaMemset(b.buf, 1, big));
    CK(cudaMalloc(&b.times, 2 * 1024 * sizeof(uint64_t)));
    CK(cudaMalloc(&b.sink, 4));
    return b;
}

#endif
