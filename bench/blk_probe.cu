// bench/blk_probe.cu - what bounds a Q4_0 GEMV tile on this GPU, outside the VM (issue 39).
//
// The VM's block tiles stream ~1 TB/s on the H200 whatever the format's bytes an element
// (bench/RESULTS.md session "bound"). This probe times the same lane design in a plain kernel
// and varies one thing at a time: threads a block and blocks an SM (the VM runs one block of 512
// threads at 128 registers), units a lane in flight, and a warp-coalesced layout. Weights: a
// [N, K] Q4_0 matrix of random blocks (f16 scale, 16 bytes of nibbles), four copies so the stream
// is ~4x the L2; y = W x with x in shared memory by units (AMK's transposed layout).
// Also: the split layout (a repacking with the same bits: a row's quants as 16-byte units, then
// its scales), loads issued ahead explicitly, x quantized to int8 a unit with dp4a dots
// (llama.cpp's q8_1 idea: other products than the float decode's), and rows through shared
// memory by bulk copies (a ring a warp or a block).
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/blk_probe bench/blk_probe.cu && /tmp/blk_probe [FILTER]
//
// Prints one line a variant (FILTER: only names holding it): GB/s of weight bytes (median of 20
// runs), and the checksum of y against variant 0's (stored layout) or the first split variant's
// (the layouts and the int8 x differ, so sums agree only within a group). bench/RESULTS.md runs
// 345-347 have the numbers.
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

// ---- the split layout (a repacking with the same bits): a row is [U x 16 bytes of quants][U f16
// scales], the scales lane-major (unit lane + 32 j's at lane * UL + j), so a lane's UL scales are
// one 8-byte load and a warp's quant loads are 512 contiguous bytes. Filled by fill_split.
static const int UL = U / 32;
__global__ void fill_split(uint8_t *w, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        const size_t o = i % ROWB;
        w[i] = o >= (size_t)U * 16 && (o - U * 16) % 2 == 1 ? 0x1c : (uint8_t)h;
    }
}
__device__ __forceinline__ float split_dot(uint4 q, uint32_t dw, int k, const float *xq, int u, int UP) {
    const uint32_t qq[4] = {q.x, q.y, q.z, q.w};
    float acc = 0.0f;
#pragma unroll
    for (int g = 0; g < 8; g++) acc += dot4((qq[g & 3] >> (g < 4 ? 0 : 4)) & 0x0F0F0F0Fu, *(const float4 *)(xq + (g * UP + u) * 4));
    const float d = __half2float(__ushort_as_half((unsigned short)(k & 1 ? dw >> 16 : dw & 0xFFFFu)));
    return d * (acc - 8.0f * xq[32 * UP + u]);
}
__device__ __forceinline__ uint4 ldg_nc(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
// xq, made to depend on a (a zero offset ptxas cannot see is zero): why: so that a unit's x loads
// wait for the previous unit's dot instead of all being hoisted (which spilled).
__device__ __forceinline__ const float *xdep(const float *xq, float a) {
    uint32_t z;
    asm volatile("{ .reg .pred p; setp.nan.f32 p, %1, %1; selp.u32 %0, 4, 0, p; }" : "=r"(z) : "f"(a));
    return xq + z;
}


// x quantized a unit (llama.cpp's q8_1): 32 int8 q = round(x / dx), dx = max|x| / 127, in two 16-byte
// pieces, piece h of unit u at (h * UP + u) (a warp's loads of its lanes' units conflict-free), then
// dx and sum(q) a unit. A unit's dot is d dx sum((w - 8) q): integer sums exact, by dp4a.
__device__ __forceinline__ void stage_x8(const float *x, uint32_t *x8) {
    const int UP = U | 1;
    float *dxs = (float *)(x8 + 8 * UP);
    int *sq = (int *)(dxs + UP);
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        const float v = x[k];
        float m = fabsf(v);
        for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float dx = m / 127.0f;
        const int q = dx > 0.0f ? __float2int_rn(v / dx) : 0;
        int sum = q;
        for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const int l = k & 31, u = k >> 5;
        ((int8_t *)x8)[((l >> 4) * UP + u) * 16 + (l & 15)] = (int8_t)q;
        if (l == 0) { dxs[u] = dx; sq[u] = sum; }
    }
    __syncthreads();
}
__device__ __forceinline__ float split_dot8(uint4 q, uint32_t dw, int k, const uint32_t *x8, int u, int UP) {
    const uint4 a = *(const uint4 *)(x8 + 4 * u), b = *(const uint4 *)(x8 + 4 * (UP + u));
    int s = 0;
    s = __dp4a((int)(q.x & 0x0F0F0F0Fu), (int)a.x, s);
    s = __dp4a((int)(q.y & 0x0F0F0F0Fu), (int)a.y, s);
    s = __dp4a((int)(q.z & 0x0F0F0F0Fu), (int)a.z, s);
    s = __dp4a((int)(q.w & 0x0F0F0F0Fu), (int)a.w, s);
    s = __dp4a((int)((q.x >> 4) & 0x0F0F0F0Fu), (int)b.x, s);
    s = __dp4a((int)((q.y >> 4) & 0x0F0F0F0Fu), (int)b.y, s);
    s = __dp4a((int)((q.z >> 4) & 0x0F0F0F0Fu), (int)b.z, s);
    s = __dp4a((int)((q.w >> 4) & 0x0F0F0F0Fu), (int)b.w, s);
    const float *dxs = (const float *)(x8 + 8 * UP);
    const int *sq = (const int *)(dxs + UP);
    const float d = __half2float(__ushort_as_half((unsigned short)(k & 1 ? dw >> 16 : dw & 0xFFFFu)));
    return d * dxs[u] * (float)(s - 8 * sq[u]);
}

// DP4A: x as int8 and dp4a dots (split_dot8). A warp ROWS rows a pass, every load of the pass (ROWS x UL x 16 bytes a lane) issued before any decode:
// the BF16 tiles' design (8 16-byte loads a lane in flight).
template <int ROWS, int DP4A>
__global__ void __launch_bounds__(512, 1) gemv_split(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ float xq[];
    const int UP = U | 1;
    if (DP4A) stage_x8(x, (uint32_t *)xq);
    else stage_x(x, xq);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int r0 = blockIdx.x * rows_per_block, r1 = min(r0 + rows_per_block, N * COPIES);
    for (int r = r0 + warp * ROWS; r < r1; r += nw * ROWS) {
        uint4 q[ROWS][UL];
        uint2 d[ROWS];
#pragma unroll
        for (int i = 0; i < ROWS; i++) {
            const uint8_t *row = W + (size_t)min(r + i, r1 - 1) * ROWB;
#pragma unroll
            for (int k = 0; k < UL; k++) q[i][k] = ldg_nc(row + (lane + 32 * k) * 16);
            d[i] = __ldg((const uint2 *)(row + U * 16 + lane * UL * 2));
        }
#pragma unroll
        for (int i = 0; i < ROWS; i++) {
            float a = 0.0f;
#pragma unroll
            for (int k = 0; k < UL; k++)
                a += DP4A ? split_dot8(q[i][k], k < 2 ? d[i].x : d[i].y, k, (const uint32_t *)xq, lane + 32 * k, UP)
                          : split_dot(q[i][k], k < 2 ? d[i].x : d[i].y, k, xdep(xq, a), lane + 32 * k, UP);
            for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0 && r + i < r1) y[r + i] = a;
        }
    }
}

// A row a pass, the next pass's loads issued before this one's decode (two rows' 4 + 4 loads a lane); DP4A as gemv_split's.
template <int DP4A>
__global__ void __launch_bounds__(512, 1) gemv_split_ahead(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ float xq[];
    const int UP = U | 1;
    if (DP4A) stage_x8(x, (uint32_t *)xq);
    else stage_x(x, xq);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int r0 = blockIdx.x * rows_per_block, r1 = min(r0 + rows_per_block, N * COPIES);
    uint4 q[UL], qn[UL];
    uint2 d = make_uint2(0u, 0u), dn = d;
    int r = r0 + warp;
    if (r < r1) {
#pragma unroll
        for (int k = 0; k < UL; k++) q[k] = ldg_nc(W + (size_t)r * ROWB + (lane + 32 * k) * 16);
        d = __ldg((const uint2 *)(W + (size_t)r * ROWB + U * 16 + lane * UL * 2));
    }
    for (; r < r1; r += nw) {
        const uint8_t *nrow = W + (size_t)min(r + nw, r1 - 1) * ROWB;
#pragma unroll
        for (int k = 0; k < UL; k++) qn[k] = ldg_nc(nrow + (lane + 32 * k) * 16);
        dn = __ldg((const uint2 *)(nrow + U * 16 + lane * UL * 2));
        float a = 0.0f;
#pragma unroll
        for (int k = 0; k < UL; k++)
            a += DP4A ? split_dot8(q[k], k < 2 ? d.x : d.y, k, (const uint32_t *)xq, lane + 32 * k, UP)
                      : split_dot(q[k], k < 2 ? d.x : d.y, k, xdep(xq, a), lane + 32 * k, UP);
        for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) y[r] = a;
#pragma unroll
        for (int k = 0; k < UL; k++) q[k] = qn[k];
        d = dn;
    }
}

// A stored unit's dot by dp4a on x as int8 (gemv_lane_ahead with DP4A).
__device__ __forceinline__ float unit_dot8(const raw &r, const uint32_t *x8, int u, int UP) {
    uint4 q;
    q.x = __funnelshift_r(r.w[0], r.w[1], r.s);
    q.y = __funnelshift_r(r.w[1], r.w[2], r.s);
    q.z = __funnelshift_r(r.w[2], r.w[3], r.s);
    q.w = __funnelshift_r(r.w[3], r.w[4], r.s);
    return split_dot8(q, r.d, 0, x8, u, UP);
}

// The lane design with its loads issued ahead explicitly: a row's U / 32 units a lane loaded before
// any is decoded (AHEAD 0), or also the warp's next row's while this one decodes (AHEAD 1: two
// rows' raw words in registers); DP4A: x as int8 and dp4a dots (unit_dot8).
template <int AHEAD, int DP4A>
__global__ void __launch_bounds__(512, 1) gemv_lane_ahead(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ float xq[];
    const int UP = U | 1, UL = U / 32;
    if (DP4A) stage_x8(x, (uint32_t *)xq);
    else stage_x(x, xq);
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
        for (int k = 0; k < UL; k++)
            a += DP4A ? unit_dot8(cur[k], (const uint32_t *)xq, lane + 32 * k, UP) : unit_dot(cur[k], xq, lane + 32 * k, UP);
        for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) y[r] = a;
        if (r + nw < r1)
#pragma unroll
            for (int k = 0; k < UL; k++)
                cur[k] = AHEAD ? nxt[k] : unit_load(W + (size_t)(r + nw) * ROWB + (size_t)(lane + 32 * k) * 18);
    }
}

// Rows through shared memory by bulk copies (no registers in flight). WARP 1: each warp its own
// ring of S one-row slots, refilled by its lane 0 after a __syncwarp (no block barrier); WARP 0: a
// block-wide ring of S slots of nw rows (one copy a slot), a __syncthreads a round. SPLIT: the split
// layout (quants by 16-byte shared loads) or the stored one (a unit's five words funnel-shifted).
__device__ __forceinline__ void mbar_init(uint64_t *b) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((uint32_t)__cvta_generic_to_shared(b)) : "memory");
}
__device__ __forceinline__ void bulk(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"((uint32_t)__cvta_generic_to_shared(b)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes), "r"((uint32_t)__cvta_generic_to_shared(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t par) {
    uint32_t done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"((uint32_t)__cvta_generic_to_shared(b)), "r"(par) : "memory");
    } while (!done);
}
template <int SPLIT>
__device__ __forceinline__ float row_dot_smem(const uint8_t *row, const float *xq, int lane, int UP) {
    float a = 0.0f;
    if (SPLIT == 2) {
        const uint2 d = *(const uint2 *)(row + U * 16 + lane * UL * 2);
#pragma unroll
        for (int k = 0; k < UL; k++)
            a += split_dot8(*(const uint4 *)(row + (lane + 32 * k) * 16), k < 2 ? d.x : d.y, k, (const uint32_t *)xq, lane + 32 * k, UP);
    } else if (SPLIT) {
        const uint2 d = *(const uint2 *)(row + U * 16 + lane * UL * 2);
#pragma unroll
        for (int k = 0; k < UL; k++) a += split_dot(*(const uint4 *)(row + (lane + 32 * k) * 16), k < 2 ? d.x : d.y, k, xq, lane + 32 * k, UP);
    } else {
#pragma unroll
        for (int k = 0; k < UL; k++) {
            const int u = lane + 32 * k;
            const uint8_t *b = row + u * 18, *al = (const uint8_t *)((uintptr_t)(b + 2) & ~(uintptr_t)3);
            raw r;
            r.s = 8u * (uint32_t)((uintptr_t)(b + 2) & 3u);
#pragma unroll
            for (int i = 0; i < 5; i++) r.w[i] = *(const uint32_t *)(al + 4 * i);
            r.d = *(const unsigned short *)b;
            a += unit_dot(r, xq, u, UP);
        }
    }
    return a;
}
static const int RING_XQ = (33 * (U | 1) * 4 + 127) / 128 * 128; // xq's bytes, then the mbarriers (128 a block), then the slots
template <int WARP, int SPLIT, int S>
__global__ void gemv_ring(const uint8_t *W, const float *x, float *y, int rows_per_block) {
    extern __shared__ __align__(128) float xq[];
    uint64_t *mb = (uint64_t *)((char *)xq + RING_XQ);
    uint8_t *slots = (uint8_t *)xq + RING_XQ + 128 * 8;
    const int UP = U | 1;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int r0 = blockIdx.x * rows_per_block, r1 = min(r0 + rows_per_block, N * COPIES);
    if (WARP) {
        uint8_t *ws = slots + (size_t)warp * S * ROWB;
        uint64_t *wb = mb + warp * S;
        if (lane == 0) {
            for (int s = 0; s < S; s++) mbar_init(wb + s);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            for (int s = 0; s < S && r0 + warp + s * nw < r1; s++) bulk(ws + s * ROWB, W + (size_t)(r0 + warp + s * nw) * ROWB, ROWB, wb + s);
        }
        if (SPLIT == 2) stage_x8(x, (uint32_t *)xq); // syncs the block
        else stage_x(x, xq);
        int it = 0;
        for (int r = r0 + warp; r < r1; r += nw, it++) {
            const int s = it % S;
            mbar_wait(wb + s, (it / S) & 1);
            float a = row_dot_smem<SPLIT>(ws + s * ROWB, xq, lane, UP);
            for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0) {
                y[r] = a;
                if (r + S * nw < r1) bulk(ws + s * ROWB, W + (size_t)(r + S * nw) * ROWB, ROWB, wb + s);
            }
            __syncwarp();
        }
    } else {
        const uint32_t sb = nw * ROWB;
        if (threadIdx.x == 0) {
            for (int s = 0; s < S; s++) mbar_init(mb + s);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            for (int s = 0; s < S && r0 + s * nw < r1; s++)
                bulk(slots + s * sb, W + (size_t)(r0 + s * nw) * ROWB, min(nw, r1 - r0 - s * nw) * ROWB, mb + s);
        }
        if (SPLIT == 2) stage_x8(x, (uint32_t *)xq);
        else stage_x(x, xq);
        int it = 0;
        for (int rb = r0; rb < r1; rb += nw, it++) {
            const int s = it % S;
            mbar_wait(mb + s, (it / S) & 1);
            if (rb + warp < r1) {
                float a = row_dot_smem<SPLIT>(slots + s * sb + warp * ROWB, xq, lane, UP);
                for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
                if (lane == 0) y[rb + warp] = a;
            }
            __syncthreads();
            if (threadIdx.x == 0 && rb + S * nw < r1)
                bulk(slots + s * sb, W + (size_t)(rb + S * nw) * ROWB, min(nw, r1 - rb - S * nw) * ROWB, mb + s);
        }
    }
}

typedef void (*kern)(const uint8_t *, const float *, float *, int);
struct variant { const char *name; kern k; int threads, blocks_per_sm, split, smem; };

int main(int argc, char **argv) {
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
    auto rsm = [](int slots) { return RING_XQ + 128 * 8 + slots * (int)ROWB + 16; }; // why + 16: a stored unit's last aligned word
    uint8_t *W2; // the split layout
    CK(cudaMalloc(&W2, bytes));
    fill_split<<<1024, 256>>>(W2, bytes, 12345u);
    variant vs[] = {
        {"lane 1 unit, 512 thr x 1 block/SM (the VM's shape)", gemv_lane<1>, 512, 1, 0, smem},
        {"lane 2 units, 512 x 1", gemv_lane<2>, 512, 1, 0, smem},
        {"lane 4 units, 512 x 1", gemv_lane<4>, 512, 1, 0, smem},
        {"lane 1 unit, 256 x 4 blocks/SM", gemv_lane<1>, 256, 4, 0, smem},
        {"lane 1 unit, 512 x 2 blocks/SM", gemv_lane<1>, 512, 2, 0, smem},
        {"lane 4 units, 256 x 4 blocks/SM", gemv_lane<4>, 256, 4, 0, smem},
        {"lane, a row's 4 units loaded first, 512 x 1", gemv_lane_ahead<0, 0>, 512, 1, 0, smem},
        {"lane, the next row's units loaded ahead, 512 x 1", gemv_lane_ahead<1, 0>, 512, 1, 0, smem},
        {"lane, the next row's units loaded ahead, 256 x 4", gemv_lane_ahead<1, 0>, 256, 4, 0, smem},
        {"cell 1 unit, 512 x 1", gemv_cell<1>, 512, 1, 0, smem},
        {"cell 2 units, 512 x 1", gemv_cell<2>, 512, 1, 0, smem},
        {"cell 4 units, 512 x 1", gemv_cell<4>, 512, 1, 0, smem},
        {"cell 1 unit, 256 x 4 blocks/SM", gemv_cell<1>, 256, 4, 0, smem},
        {"split, a row a pass (4 loads a lane), 512 x 1", gemv_split<1, 0>, 512, 1, 1, smem},
        {"split, 2 rows a pass (8 loads a lane), 512 x 1", gemv_split<2, 0>, 512, 1, 1, smem},
        {"split, 4 rows a pass (16 loads a lane), 512 x 1", gemv_split<4, 0>, 512, 1, 1, smem},
        {"split, the next row's loads ahead (8 a lane), 512 x 1", gemv_split_ahead<0>, 512, 1, 1, smem},
        {"lane8 (stored, int8 x, dp4a), a row's units first, 512 x 1", gemv_lane_ahead<0, 1>, 512, 1, 0, smem},
        {"lane8 (stored, int8 x, dp4a), next row ahead, 512 x 1", gemv_lane_ahead<1, 1>, 512, 1, 0, smem},
        {"split8 (int8 x, dp4a), next row ahead, 512 x 1", gemv_split_ahead<1>, 512, 1, 1, smem},
        {"split8, 2 rows a pass, 512 x 1", gemv_split<2, 1>, 512, 1, 1, smem},
        {"split8, 4 rows a pass, 512 x 1", gemv_split<4, 1>, 512, 1, 1, smem},
        {"split8, 2 rows a pass, 256 x 2", gemv_split<2, 1>, 256, 2, 1, smem},
        {"ring a warp, split, 4 slots, 512 x 1", gemv_ring<1, 1, 4>, 512, 1, 1, rsm(16 * 4)},
        {"ring a warp, split, 5 slots, 512 x 1", gemv_ring<1, 1, 5>, 512, 1, 1, rsm(16 * 5)},
        {"ring a warp, stored, 4 slots, 512 x 1", gemv_ring<1, 0, 4>, 512, 1, 0, rsm(16 * 4)},
        {"ring a block, split, 4 slots, 512 x 1", gemv_ring<0, 1, 4>, 512, 1, 1, rsm(16 * 4)},
        {"ring a block, split, 5 slots, 512 x 1", gemv_ring<0, 1, 5>, 512, 1, 1, rsm(16 * 5)},
        {"ring a block, stored, 4 slots, 512 x 1", gemv_ring<0, 0, 4>, 512, 1, 0, rsm(16 * 4)},
        {"ring a warp, split8, 4 slots, 512 x 1", gemv_ring<1, 2, 4>, 512, 1, 1, rsm(16 * 4)},
        {"ring a block, split8, 4 slots, 512 x 1", gemv_ring<0, 2, 4>, 512, 1, 1, rsm(16 * 4)},
        {"ring a block, split8, 5 slots, 512 x 1", gemv_ring<0, 2, 5>, 512, 1, 1, rsm(16 * 5)},
        {"ring a warp, split, 3 slots, 256 x 2", gemv_ring<1, 1, 3>, 256, 2, 1, rsm(8 * 3)},
    };
    double ref = 0.0, ref2 = 0.0;
    printf("Q4_0 GEMV [%d x %d] x %d copies (%.1f MB), %d SMs\n", N, K, COPIES, bytes / 1e6, sms);
    for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
        if (argc > 1 && !strstr(vs[v].name, argv[1])) continue;
        const int blocks = sms * vs[v].blocks_per_sm, rows = (N * COPIES + blocks - 1) / blocks;
        const int rows8 = (rows + 7) / 8 * 8;
        const int sm_v = vs[v].smem;
        CK(cudaFuncSetAttribute(vs[v].k, cudaFuncAttributeMaxDynamicSharedMemorySize, sm_v));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, vs[v].k));
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, vs[v].k, vs[v].threads, sm_v));
        std::vector<float> t;
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
        for (int i = 0; i < 25; i++) {
            CK(cudaEventRecord(a));
            vs[v].k<<<blocks, vs[v].threads, sm_v>>>(vs[v].split ? W2 : W, x, y, rows8);
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
        if (vs[v].split && ref2 == 0.0) ref2 = sum;
        const double rf = vs[v].split ? ref2 : ref;
        printf("  %-52s %3d regs, %d blocks/SM fit: %7.1f us  %6.0f GB/s  sum %s\n", vs[v].name, fa.numRegs, occ,
               t[t.size() / 2] * 1e3, bytes / (t[t.size() / 2] * 1e-3) / 1e9,
               fabs(sum - rf) <= 1e-3 * fabs(rf) + 1e-3 ? (vs[v].split ? "= first split" : "= variant 0") : "differs (layout)");
    }
    return 0;
}
