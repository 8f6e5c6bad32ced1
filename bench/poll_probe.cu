/* bench/poll_probe.cu - how late a waiting SM sees its counter, and reads its inputs after it,
   when it has copies of its own in flight (bench/NOTES.md sessions "overlap" and "poll").

   Not part of the library: a measurement behind a design question. In the VM a task issues copies
   before its wait (the block ring's first chunks, the VM's L2 prefetch; attention's K/V rows in run
   476's variant), and then thread 0 polls its counter. Session "overlap" saw such tasks start
   0.7-2 us later after their inputs were complete than tasks without copies, while HBM was busy
   with the phase before. Which copies cost the poll that, and how many bytes, issued how long
   before the signal, with HBM busy or idle? (The answer, bench/RESULTS.md run 482: the SM's own
   bulk copies and bulk prefetches hold back its poll and the loads after it until they land;
   cp.async only the loads; a warp's register loads nothing.)

   Every block is one SM's (512 threads, shared memory enough for one block an SM). Block 0 signals
   one counter (red.release.gpu) at a time T it announces; every other block first streams its
   slice of a large buffer from warps 2-15 until T (busy 1: the phase before, holding HBM) or not
   (busy 0), issues `bytes` of copies at T - lead from warp 1, and thread 0 polls the counter as the
   VM does (relaxed loads, a nanosleep back-off of 32 doubling to 64 ns, one acquire read once
   met). The row: the median and 90th percentile over the blocks of (seen - T), and the median of
   the copies' completion after T (warp 1's wait for them; "-" for none and prefetch, which have
   nothing to wait for).

     none      no copies
     ldgsts    cp.async 16-byte pieces (LDGSTS) over warp 1's lanes, into shared memory
     bulk      cp.async.bulk of 4 KB chunks by warp 1's lane 0, one mbarrier (the block ring's)
     prefetch  cp.async.bulk.prefetch.L2 of 4 KB chunks by warp 1's lane 0 (the VM's prefetch)
     ld        16-byte ld.global.nc loads into registers over warp 1's lanes, kept live
     lanepf    prefetch.global.L2 of one 128-byte line a lane over warp 1's lanes (a per-thread L2
               prefetch, not the bulk one)
     readonly  nothing before T; at T warp 1 reads the bytes (the prefetch rows' baseline)

   Two more columns: when warp 0 has read a 16 KB vector that every SM reads (x, hot in L2) after
   its thread 0 saw the counter (the inputs a task loads after its wait), and, for the prefetch
   modes, when warp 1 has read the prefetched bytes after T (ld.global.nc, 8 in flight a lane):
   how much of them the prefetch brought into L2 by then.

   Build and run (on the GPU machine):
       nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/poll_probe bench/poll_probe.cu && /tmp/poll_probe */
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>

#include "bench_ptx.cuh"

#define THREADS 512
#define SMEM (200 * 1024) /* dynamic shared memory a block: one block an SM, room for 128 KB of copies */
#define CHUNK 4096u
#define BG_SLICE (16ull << 20) /* each block's streaming slice (busy 1); a run streams ~1 MB of it */

static __device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_addr(dst)), "l"(src) : "memory");
}
static __device__ __forceinline__ void prefetch_l2(const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(src), "r"(bytes) : "memory");
}

/* The warp's read of bytes at p: 16-byte ld.global.nc a lane, 8 in flight; returns the lane's XOR. */
static __device__ __forceinline__ uint32_t warp_read(const char *p, uint32_t bytes, int lane) {
    uint32_t acc = 0;
    for (uint32_t o = lane * 16; o < bytes; o += 8 * 32 * 16) {
        uint4 r[8];
#pragma unroll
        for (int u = 0; u < 8; u++) r[u] = o + u * 32 * 16 < bytes ? ld_nc_na(p + o + u * 32 * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 8; u++) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
    }
    return acc;
}

/* ctl[0]: blocks ready; ctl[1]: T's low word, ctl[2] its high word, ctl[3] T announced; ctl[4]: the
   counter. out[3 b + 0] seen - T, out[3 b + 1] copies done (or the prefetched bytes read) - T,
   out[3 b + 2] x read - T (ns; signed as int64). */
__global__ void __launch_bounds__(THREADS, 1) k_poll(int mode, uint32_t bytes, uint32_t lead_ns, int busy, const char *src,
                                                     const char *bg, uint64_t bg_off, const char *xv, uint32_t *ctl, int64_t *out,
                                                     uint32_t *sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    __shared__ uint64_t bar;
    __shared__ uint64_t t_sig_s;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, b = blockIdx.x, nb = gridDim.x;
    uint32_t acc = 0;
    if (tid == 0) {
        bar_init(&bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (b == 0) { /* the producer: T 20 us after every block is ready */
        if (tid == 0) {
            while (ld_relaxed(&ctl[0]) < (uint32_t)(nb - 1)) {}
            const uint64_t T = gtimer() + 20000;
            ctl[1] = (uint32_t)T;
            ctl[2] = (uint32_t)(T >> 32);
            red_release_add(&ctl[3], 1);
            while (gtimer() < T) {}
            red_release_add(&ctl[4], 1);
        }
        return;
    }
    if (tid == 0) {
        red_release_add(&ctl[0], 1);
        while (ld_acquire(&ctl[3]) == 0) {}
        t_sig_s = (uint64_t)ctl[1] | ((uint64_t)ctl[2] << 32);
    }
    __syncthreads();
    const uint64_t T = t_sig_s;
    const char *s = src + (uint64_t)(b - 1) * (128u << 10);
    if (warp >= 2) { /* the phase before: stream until T */
        if (busy) {
            const char *p = bg + (uint64_t)(b - 1) * BG_SLICE + bg_off;
            for (uint64_t row = warp - 2; gtimer() < T && row < (BG_SLICE - bg_off) / 4096; row += 14) {
                uint4 r[8];
#pragma unroll
                for (int u = 0; u < 8; u++) r[u] = ld_nc_na(p + row * 4096 + (uint64_t)(lane + 32 * u) * 16);
#pragma unroll
                for (int u = 0; u < 8; u++) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
            }
        }
    } else if (warp == 1) { /* the copies, at T - lead */
        while (gtimer() + lead_ns < T) {}
        if (mode == 1) {
            for (uint32_t o = lane * 16; o < bytes; o += 32 * 16) cp_async16(sm + o, s + o);
        } else if (mode == 2 && lane == 0) {
            bar_expect(&bar, bytes);
            for (uint32_t o = 0; o < bytes; o += CHUNK)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             :: "r"(smem_addr(sm + o)), "l"(s + o), "r"(CHUNK), "r"(smem_addr(&bar)) : "memory");
        } else if (mode == 3 && lane == 0) {
            for (uint32_t o = 0; o < bytes; o += CHUNK) prefetch_l2(s + o, CHUNK);
        } else if (mode == 4) {
            acc ^= warp_read(s, bytes, lane);
        } else if (mode == 5) {
            for (uint32_t o = lane * 128; o < bytes; o += 32 * 128) asm volatile("prefetch.global.L2 [%0];" :: "l"(s + o) : "memory");
        }
    } else if (warp == 0) { /* the VM's poll, then the task's inputs */
        if (tid == 0) {
            uint32_t ns = 0;
            while (ld_relaxed(&ctl[4]) < 1u) {
                if (ns) asm volatile("nanosleep.u32 %0;" :: "r"(ns));
                ns = ns == 0 ? 32u : ns < 64u ? 2 * ns : ns;
            }
            (void)ld_acquire(&ctl[4]);
            out[3 * b] = (int64_t)(gtimer() - T);
        }
        __syncwarp();
        for (uint32_t o = lane * 16; o < 16384u; o += 8 * 32 * 16) {
            uint4 r[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(r[u].x), "=r"(r[u].y), "=r"(r[u].z), "=r"(r[u].w) : "l"(xv + o + u * 32 * 16) : "memory");
#pragma unroll
            for (int u = 0; u < 8; u++) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
        }
        __syncwarp();
        if (lane == 0) out[3 * b + 2] = (int64_t)(gtimer() - T);
    }
    if (warp == 1) { /* the copies' completion; for the prefetch modes, the bytes read after T */
        if (mode == 1) asm volatile("cp.async.wait_all;" ::: "memory");
        if (mode == 2) bar_wait(&bar, 0);
        if (mode == 3 || mode == 5 || mode == 6) {
            while (gtimer() < T) {}
            acc ^= warp_read(s, bytes, lane);
        }
        __syncwarp();
        if (lane == 0) out[3 * b + 1] = (int64_t)(gtimer() - T);
    }
    if (acc == 0x9E3779B9u) *sink = acc; /* why: keeps the loads alive; practically never taken */
}

int main(void) {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    char *src, *bg, *xv;
    uint32_t *ctl, *sink;
    int64_t *out;
    const uint64_t src_bytes = 2048ull << 20; /* windows of 128 KB a block, far apart from run to run */
    CK(cudaMalloc(&src, src_bytes));
    CK(cudaMalloc(&bg, (uint64_t)sms * BG_SLICE));
    CK(cudaMemset(src, 1, src_bytes));
    CK(cudaMemset(bg, 2, (uint64_t)sms * BG_SLICE));
    CK(cudaMalloc(&xv, 16384));
    CK(cudaMemset(xv, 3, 16384));
    CK(cudaMalloc(&ctl, 64));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&out, (size_t)3 * sms * sizeof(int64_t)));
    CK(cudaFuncSetAttribute(k_poll, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    const char *names[] = {"none", "ldgsts", "bulk", "prefetch", "ld", "lanepf", "readonly"};
    const uint32_t sizes[] = {16u << 10, 64u << 10, 128u << 10};
    const uint32_t leads[] = {500, 1000, 2000, 4000};
    std::vector<int64_t> h((size_t)3 * sms);
    uint64_t window = 0;
    printf("| busy | copies | KB an SM | issued before T (us) | seen after T: median | p90 (us) | x read: median (us) | copies done or prefetched bytes read: median (us) |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int busy = 0; busy < 2; busy++)
        for (int mode = 0; mode < 7; mode++)
            for (uint32_t bytes : sizes)
                for (uint32_t lead : leads) {
                    if (mode == 0 && (bytes != sizes[0] || lead != leads[0])) continue;
                    if (mode == 6 && lead != leads[0]) continue;
                    const char *s = src + (window++ % 15) * ((uint64_t)(128u << 10) * sms);
                    CK(cudaMemset(ctl, 0, 64));
                    uint64_t bg_off = (window % 8) * (2ull << 20); /* why: the last run's lines out of L2 */
                    void *args[] = {&mode, (void *)&bytes, (void *)&lead, &busy, (void *)&s, &bg, &bg_off, &xv, &ctl, &out, &sink};
                    CK(cudaLaunchCooperativeKernel((void *)k_poll, sms, THREADS, args, SMEM, 0));
                    CK(cudaDeviceSynchronize());
                    CK(cudaMemcpy(h.data(), out, h.size() * sizeof(int64_t), cudaMemcpyDeviceToHost));
                    std::vector<double> seen, done, xr;
                    for (int b = 1; b < sms; b++) {
                        seen.push_back(h[3 * b] / 1000.0);
                        done.push_back(h[3 * b + 1] / 1000.0);
                        xr.push_back(h[3 * b + 2] / 1000.0);
                    }
                    std::sort(seen.begin(), seen.end());
                    std::sort(done.begin(), done.end());
                    std::sort(xr.begin(), xr.end());
                    const size_t n = seen.size();
                    char dn[16] = "-";
                    if (mode != 0) snprintf(dn, sizeof dn, "%.2f", done[n / 2]);
                    printf("| %d | %s | %u | %.1f | %.2f | %.2f | %.2f | %s |\n", busy, names[mode], bytes >> 10, lead / 1000.0,
                           seen[n / 2], seen[n * 9 / 10], xr[n / 2], dn);
                }
    return 0;
}
