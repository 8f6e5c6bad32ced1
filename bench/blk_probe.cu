// bench/blk_probe.cu - what bounds a Q4_0 GEMV tile on this GPU, outside the VM (issue 39).
//
// The VM's block tiles stream ~1 TB/s on the H200 whatever the format's bytes an element
// (bench/RESULTS.md session "bound"). This probe times the same lane design in a plain kernel
// and varies one thing at a time: threads a block and blocks an SM (the VM runs one block of 512
// threads at 128 registers), units a lane in flight, and a warp-coalesced layout. Weights: a
// [N, K] Q4_0 matrix of random blocks (f16 scale, 16 bytes of nibbles), four copies so the stream
// is ~4x the L2; y = W x with x in shared memory by units (AMK's transposed layout).
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/blk_probe bench/blk_probe.cu && /tmp/blk_probe
//
// Prints one line a variant: GB/s of weight bytes (median of 20 runs), and the checksum of y
// against variant 0's (the layouts differ: the coalesced variants read other bytes as their
// units, so only the plain variants' sums agree). bench/RESULTS.md run 345 has the first numbers;
// the gemv_lane_ahead variants (loads issued ahead explicitly, 56 and 100 registers) came after
// it and have not run yet.
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_fp16.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static const int N = 14336, K = 4096, U = K / 32, COPIES = 4;
static const size_t ROWB = (size_t)U * 18, MATB = (size_t)N * ROWB;

__global__ void fill(uint8_t *w, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        w[i] = (uint8_t)h;
        if (i % 18 == 1) w[i] = 0x1c; // the block's f16 scale: 0x1cXX, ~0.004 (finite)
    }
}

__device__ __forceinline__ float dot4(uint32_t w, float4 x) {
#define B_(i) (__int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7440u + (i))) - 8388608.0f)
    return fmaf(B_(0), x.x, fmaf(B_(1), x.y, fmaf(B_(2), x.z, B_(3) * x.w)));
#undef B_
}
__device__ __forceinline__ uint32_t ld32(const uint8_t *p) { return __ldg((const unsigned int *)p); }

// A unit of a stored row: [f16 d][16 bytes], at an even offset: five aligned words (funnel-shifted
// by s when decoded) and d, as loaded.
struct raw { uint32_t w[5], s; unsigned short d; };
__device__ __forceinline__ raw unit_load(const uint8_t *b) {
    raw r;
    const uint8_t *a = (const uint8_t *)((uintptr_t)(b + 2) & ~(uintptr_t)3);
    r.s = 8u * (uint32_t)((uintptr_t)(b + 2) & 3u);
#pragma unroll
    for (int i = 0; i < 5; i++) r.w[i] = ld32(a + 4 * i);
    r.d = __ldg((const unsigned short *)b);
    return r;
}
__device__ __forceinline__ float unit_dot(const raw &r, const float *xq, int u, int UP) {
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = __funnelshift_r(r.w[i], r.w[i + 1], r.s);
    float acc = 0.0f;
#pragma unroll
    for (int g = 0; g < 8; g++)
        acc += dot4((q[g & 3] >> (g < 4 ? 0 : 4)) & 0x0F0F0F0Fu, *(const float4 *)(xq + (g * UP + u) * 4));
    return __half2float(__ushort_as_half(r.d)) * (acc - 8.0f * xq[32 * UP + u]);
}

// x into shared memory by units, transposed (AMK's amk_blk_stage_x layout), each unit's sum after.
__device__ __forceinline__ void stage_x(const float *x, float *xq) {
    const int UP = U | 1;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        const float v = x[k];
        float s = v;
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        xq[(((k & 31) >> 2) * UP + (k >> 5)) * 4 + (k & 3)] = v;
        if ((k & 31) == 0) xq[32 * UP + (k >> 5)] = s;
    }
    __syncthreads();
}

// The stored layout, a warp a row, a lane units lane, lane + 32, ... (NU of them in flight).
template <int NU>
__global__ void gemv_lane(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ float xq[];
    const int UP = U | 1;
    stage_x(x, xq);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int r0 = blockIdx.x * rows_per_block, r1 = min(r0 + rows_per_block, N * COPIES);
    for (int r = r0 + warp; r < r1; r += nw) {
        const uint8_t *row = W + (size_t)r * ROWB;
        float a = 0.0f;
#pragma unroll NU
        for (int u = lane; u < U; u += 32) a += unit_dot(unit_load(row + (size_t)u * 18), xq, u, UP);
        for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) y[r] = a;
    }
}

// The lane design with its loads issued ahead explicitly: a row's U / 32 units a lane loaded before
// any is decoded (AHEAD 0), or also the warp's next row's while this one decodes (AHEAD 1: two
// rows' raw words in registers).
template <int AHEAD>
__global__ void gemv_lane_ahead(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ float xq[];
    const int UP = U | 1, UL = U / 32;
    stage_x(x, xq);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int r0 = blockIdx.x * rows_per_block, r1 = min(r0 + rows_per_block, N * COPIES);
    raw cur[UL], nxt[UL];
    int r = r0 + warp;
    if (r < r1)
#pragma unroll
        for (int k = 0; k < UL; k++) cur[k] = unit_load(W + (size_t)r * ROWB + (size_t)(lane + 32 * k) * 18);
    for (; r < r1; r += nw) {
        if (AHEAD && r + nw < r1)
#pragma unroll
            for (int k = 0; k < UL; k++) nxt[k] = unit_load(W + (size_t)(r + nw) * ROWB + (size_t)(lane + 32 * k) * 18);
        float a = 0.0f;
#pragma unroll
        for (int k = 0; k < UL; k++) a += unit_dot(cur[k], xq, lane + 32 * k, UP);
        for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) y[r] = a;
        if (r + nw < r1)
#pragma unroll
            for (int k = 0; k < UL; k++)
                cur[k] = AHEAD ? nxt[k] : unit_load(W + (size_t)(r + nw) * ROWB + (size_t)(lane + 32 * k) * 18);
    }
}

// Groups of 8 rows, a unit's cell [8 x 16 bytes][8 x f16]: a lane (row lane % 8, units lane / 8,
// + 4, ...) loads 16 bytes, a warp 512 contiguous bytes; x broadcast. A warp a group.
template <int NU>
__global__ void gemv_cell(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ float xq[];
    const int UP = U | 1;
    stage_x(x, xq);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, ur = lane >> 3, rr = lane & 7;
    const int r0 = blockIdx.x * rows_per_block, r1 = min(r0 + rows_per_block, N * COPIES);
    for (int g = r0 / 8 + warp; g * 8 < r1; g += nw) {
        const uint8_t *grp = W + (size_t)g * 8 * ROWB;
        float a = 0.0f;
#pragma unroll NU
        for (int u = ur; u < U; u += 4) {
            const uint8_t *cell = grp + (size_t)u * 144;
            const uint4 q = __ldg((const uint4 *)(cell + 16 * rr));
            const float d = __half2float(__ushort_as_half(__ldg((const unsigned short *)(cell + 128 + 2 * rr))));
            const uint32_t qq[4] = {q.x, q.y, q.z, q.w};
            float b = 0.0f;
#pragma unroll
            for (int gg = 0; gg < 8; gg++) b += dot4((qq[gg & 3] >> (gg < 4 ? 0 : 4)) & 0x0F0F0F0Fu, *(const float4 *)(xq + (gg * UP + u) * 4));
            a = fmaf(d, b - 8.0f * xq[32 * UP + u], a);
        }
        a += __shfl_xor_sync(0xffffffffu, a, 8);
        a += __shfl_xor_sync(0xffffffffu, a, 16);
        if (lane < 8) y[g * 8 + rr] = a;
    }
}

typedef void (*kern)(const uint8_t *, const float *, float *, int);
struct variant { const char *name; kern k; int threads, blocks_per_sm; };

int main() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t bytes = MATB * COPIES;
    uint8_t *W; float *x, *y;
    CK(cudaMalloc(&W, bytes)); CK(cudaMalloc(&x, K * 4)); CK(cudaMalloc(&y, (size_t)N * COPIES * 4));
    fill<<<1024, 256>>>(W, bytes, 12345u);
    std::vector<float> hx(K);
    for (int k = 0; k < K; k++) hx[k] = (float)((k * 37) % 101 - 50) / 50.0f;
    CK(cudaMemcpy(x, hx.data(), K * 4, cudaMemcpyHostToDevice));
    const int smem = 33 * (U | 1) * 4;
    variant vs[] = {
        {"lane 1 unit, 512 thr x 1 block/SM (the VM's shape)", gemv_lane<1>, 512, 1},
        {"lane 2 units, 512 x 1", gemv_lane<2>, 512, 1},
        {"lane 4 units, 512 x 1", gemv_lane<4>, 512, 1},
        {"lane 1 unit, 256 x 4 blocks/SM", gemv_lane<1>, 256, 4},
        {"lane 1 unit, 512 x 2 blocks/SM", gemv_lane<1>, 512, 2},
        {"lane 4 units, 256 x 4 blocks/SM", gemv_lane<4>, 256, 4},
        {"lane, a row's 4 units loaded first, 512 x 1", gemv_lane_ahead<0>, 512, 1},
        {"lane, the next row's units loaded ahead, 512 x 1", gemv_lane_ahead<1>, 512, 1},
        {"lane, the next row's units loaded ahead, 256 x 4", gemv_lane_ahead<1>, 256, 4},
        {"cell 1 unit, 512 x 1", gemv_cell<1>, 512, 1},
        {"cell 2 units, 512 x 1", gemv_cell<2>, 512, 1},
        {"cell 4 units, 512 x 1", gemv_cell<4>, 512, 1},
        {"cell 1 unit, 256 x 4 blocks/SM", gemv_cell<1>, 256, 4},
    };
    double ref = 0.0;
    printf("Q4_0 GEMV [%d x %d] x %d copies (%.1f MB), %d SMs\n", N, K, COPIES, bytes / 1e6, sms);
    for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
        const int blocks = sms * vs[v].blocks_per_sm, rows = (N * COPIES + blocks - 1) / blocks;
        const int rows8 = (rows + 7) / 8 * 8;
        CK(cudaFuncSetAttribute(vs[v].k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, vs[v].k));
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, vs[v].k, vs[v].threads, smem));
        std::vector<float> t;
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
        for (int i = 0; i < 25; i++) {
            CK(cudaEventRecord(a));
            vs[v].k<<<blocks, vs[v].threads, smem>>>(W, x, y, rows8);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, a, b));
            if (i >= 5) t.push_back(ms);
        }
        CK(cudaGetLastError());
        std::sort(t.begin(), t.end());
        std::vector<float> hy((size_t)N * COPIES);
        CK(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost));
        double sum = 0.0;
        for (float f : hy) sum += f;
        if (v == 0) ref = sum;
        printf("  %-52s %3d regs, %d blocks/SM fit: %7.1f us  %6.0f GB/s  sum %s\n", vs[v].name, fa.numRegs, occ,
               t[t.size() / 2] * 1e3, bytes / (t[t.size() / 2] * 1e-3) / 1e9,
               fabs(sum - ref) <= 1e-3 * fabs(ref) + 1e-3 ? "= variant 0" : "differs (layout)");
    }
    return 0;
}
