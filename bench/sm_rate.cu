/* bench/sm_rate.cu - how fast one SM streams read-only data, by three means (bench/NOTES.md).

   Not part of the library: a measurement behind a design question (can bulk copies into shared
   memory feed one SM faster than the GEMV loop's 16-byte register loads?). Each block streams its
   own slice of a buffer (resident in L2, or in HBM) and records its start and end (globaltimer);
   the table gives the median block's GB/s and the aggregate. One block a SM (a full SM's shared
   memory and 512 threads).

     ld        the GEMV loop's pattern: each warp reads 4 KB rows, 8 16-byte no-allocate loads a
               lane in flight, and XORs them (amk_ops.cuh AMK__GEMV_VEC_ROW without the FMAs)
     bulk      thread 0 keeps STAGES bulk copies (cp.async.bulk + mbarrier) of CHUNK bytes in
               flight into a shared-memory ring; only it waits (the copy engine alone)
     bulk+use  the same, every thread waits for each chunk, reads its 16-byte pieces from shared
               memory, and a block barrier frees the stage (a consumer like the weight ring's)

   Build and run (on the GPU machine):
       nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/sm_rate bench/sm_rate.cu && /tmp/sm_rate */
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>

#include "bench_ptx.cuh"

/* The GEMV loop itself over rows of K = 2048 bf16 (4 KB): x staged in shared memory as f32, each
   lane's 16-byte weight vector (8 elements) times 8 staged floats into one accumulator, a warp sum
   a row. xmode 0: x read as two 16-byte loads a lane at lane*32 (the VM's pattern, two lanes of a
   quarter warp on one bank group); 1: the two loads in the opposite order for lanes with bit 2 set
   (no bank conflicts; the products still summed in element order); 2: x from registers (no shared
   memory reads at all: the FMA chain's own ceiling). */
__global__ void __launch_bounds__(512, 1) k_gemv(const char *src, uint64_t per_block, int xmode, uint64_t *times,
                                                 float *out) {
    __shared__ __align__(16) float xs[2048];
    const char *p = src + (uint64_t)blockIdx.x * per_block;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const int h = (lane >> 2) & 1;
    float keep = 0.0f;
    uint64_t t0;
    for (int i = tid; i < 2048; i += blockDim.x) xs[i] = 1.0f + (float)(i & 7) * 0.125f;
    __syncthreads();
    t0 = gtimer();
    for (uint64_t row = warp; row < per_block / 4096; row += nw) {
        uint4 r[8];
        float acc = 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++) r[u] = ld_nc_na(p + row * 4096 + (uint64_t)(lane + 32 * u) * 16);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int k = lane * 8 + u * 256;
            float w[8], x[8];
            w[0] = __uint_as_float(r[u].x << 16); w[1] = __uint_as_float(r[u].x & 0xFFFF0000u);
            w[2] = __uint_as_float(r[u].y << 16); w[3] = __uint_as_float(r[u].y & 0xFFFF0000u);
            w[4] = __uint_as_float(r[u].z << 16); w[5] = __uint_as_float(r[u].z & 0xFFFF0000u);
            w[6] = __uint_as_float(r[u].w << 16); w[7] = __uint_as_float(r[u].w & 0xFFFF0000u);
            if (xmode == 2) {
#pragma unroll
                for (int j = 0; j < 8; j++) x[j] = 1.0f + (float)j * 0.125f;
            } else {
                float4 a, b;
                if (xmode == 1) { /* the same two loads, each lane's first one at +16*h */
                    const float4 f = *(const float4 *)((const char *)(xs + k) + 16 * h);
                    const float4 g = *(const float4 *)((const char *)(xs + k) + 16 * (1 - h));
                    a = h ? g : f;
                    b = h ? f : g;
                } else {
                    a = ((const float4 *)(xs + k))[0];
                    b = ((const float4 *)(xs + k))[1];
                }
                x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
            }
#pragma unroll
            for (int j = 0; j < 8; j++) acc = fmaf(w[j], x[j], acc);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
        keep += acc;
    }
    __syncthreads();
    if (tid == 0) {
        times[2 * blockIdx.x] = t0;
        times[2 * blockIdx.x + 1] = gtimer();
    }
    if (keep == 1234.5f) out[0] = keep;
}

int main(void) {
    const uint64_t big = 4ull << 30; /* HBM: slices far apart, every byte read once a run */
    const StreamBufs sb = stream_bufs(big);
    char *const buf = sb.buf;
    uint64_t *const times = sb.times;
    uint32_t *const sink = sb.sink;
    const int sms = sb.sms;
    CK(cudaFuncSetAttribute(k_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    struct cfg { const char *name; int mode; uint32_t chunk; int stages; } cfgs[] = {
        {"ld", 0, 0, 0},
        {"bulk 32KBx4", 1, 32768, 4},
        {"bulk+use 32KBx4", 2, 32768, 4},
        {"gemv, x f32 smem", 10, 0, 0}, {"gemv, x smem no conflicts", 11, 0, 0}, {"gemv, x in registers", 12, 0, 0},
    };
    printf("| means | where | blocks | per block | median block GB/s | aggregate GB/s |\n|---|---|---|---|---|---|\n");
    for (int where = 0; where < 2; where++) {           /* 0: L2 (16 MB in all, re-read), 1: HBM */
        const int blocks_list[3] = {1, 16, sms};
        for (int bi = 0; bi < 3; bi++) {
            const int blocks = blocks_list[bi];
            /* L2: 16 MB in all, the same bytes every run; HBM: a fresh 512 MB window a run (at
               most 8 MB a block), so nothing is left in the 50 MB L2 from the run before */
            uint64_t per_block = where == 0 ? (16ull << 20) / blocks : (big / 8) / blocks;
            if (per_block > (8ull << 20) && where == 1) per_block = 8ull << 20;
            per_block = per_block / 65536 * 65536;
            for (auto &c : cfgs) {
                std::vector<double> med;
                double agg = 0;
                const size_t smem = c.mode ? (size_t)c.chunk * c.stages : 0;
                for (int rep = 0; rep < 6; rep++) { /* rep 0 warms up; 1-5 are timed */
                    std::vector<uint64_t> h(2 * blocks);
                    if (c.mode >= 10)
                        k_gemv<<<blocks, 512>>>(buf + (where ? (uint64_t)rep * (big / 8) : 0), per_block, c.mode - 10, times,
                                                (float *)sink);
                    else
                        k_stream<<<blocks, 512, smem>>>(buf + (where ? (uint64_t)rep * (big / 8) : 0), per_block, c.mode,
                                                        c.chunk, c.stages, times, sink);
                    CK(cudaGetLastError());
                    CK(cudaMemcpy(h.data(), times, 2 * blocks * sizeof(uint64_t), cudaMemcpyDeviceToHost)); /* waits */
                    if (rep == 0) continue; /* warm-up (and, for L2, the fill) */
                    std::vector<double> g;
                    uint64_t first = ~0ull, last = 0;
                    for (int b = 0; b < blocks; b++) {
                        g.push_back((double)per_block / (double)(h[2 * b + 1] - h[2 * b]));
                        first = std::min(first, h[2 * b]);
                        last = std::max(last, h[2 * b + 1]);
                    }
                    std::sort(g.begin(), g.end());
                    med.push_back(g[g.size() / 2]);
                    agg += (double)per_block * blocks / (double)(last - first) / 5.0;
                }
                std::sort(med.begin(), med.end());
                printf("| %s | %s | %d | %llu KB | %.1f | %.0f |\n", c.name, where ? "HBM" : "L2", blocks,
                       (unsigned long long)(per_block >> 10), med[med.size() / 2], agg);
            }
        }
    }
    return 0;
}
