/* bench/red_probe.cu - what an accumulating phase's reductions cost at L2 (bench/NOTES.md).

   Not part of the library: a measurement behind a design question. SmolLM2's accumulating tasks
   (ATTENTION_O, RMSNORM_MLP) each add their share into the same 576 floats with one
   red.global.add.v4.f32 a thread: ~128 tasks x 144 reductions onto 18 lines of L2 a phase. Is that
   where ~1 us of each such phase goes, and does spreading the adds over R replicas of the vector
   (the readers sum the R copies) or one bulk reduction a task (cp.reduce.async.bulk) take it away?

   A chain of dependent phases over every SM, the VM's hop (thread 0 polls the counter relaxed with
   a nanosleep back-off, then reads it once with acquire; the block meets at a barrier; the block's
   last signal is one red.release.gpu add): each phase reads its input vector (the sum of its R
   replicas), adds a share into the next vector's replica (block % R), and signals.

     none   no reductions: the hop and the input's read alone
     red    one red.global.add.v4.f32 a thread (the VM's amk_rows_add)
     bulk   the share staged in shared memory, one cp.reduce.async.bulk.add.f32 by one thread,
            waited for (bulk_group) before the signal

   Build and run (on the GPU machine):
       nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/red_probe bench/red_probe.cu && /tmp/red_probe */
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>

#include "bench_ptx.cuh"

#define H 576       /* SmolLM2's hidden size */
#define THREADS 512 /* the VM's block */

/* mode 0 none, 1 red, 2 bulk. acc: phases x R x H floats, zeroed. x0: the first input (H). */
__global__ void __launch_bounds__(THREADS, 1) k_chain(int mode, int R, int phases, const float *x0, float *acc,
                                                       uint32_t *ctr, uint64_t *times) {
    __shared__ __align__(16) float xs[H];
    __shared__ __align__(16) float ys[H];
    const int tid = threadIdx.x, nb = gridDim.x, b = blockIdx.x;
    for (int p = 0; p < phases; p++) {
        if (tid == 0) {
            if (p > 0) {
                const uint32_t th = (uint32_t)p * nb;
                uint32_t ns = 0;
                while (ld_relaxed(ctr) < th) {
                    if (ns) asm volatile("nanosleep.u32 %0;" :: "r"(ns));
                    ns = ns == 0 ? 32u : ns < 64u ? 2 * ns : ns;
                }
                (void)ld_acquire(ctr);
            }
            times[(size_t)p * nb + b] = gtimer();
        }
        __syncthreads();
        const float *in = p == 0 ? x0 : acc + (size_t)(p - 1) * R * H;
        const int rin = p == 0 ? 1 : R;
        if (tid < H / 4) {
            float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
            for (int r = 0; r < rin; r++) {
                const float4 v = *(const float4 *)(in + (size_t)r * H + 4 * tid);
                s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
            }
            *(float4 *)(xs + 4 * tid) = s;
        }
        __syncthreads();
        float *out = acc + ((size_t)p * R + (b % R)) * H;
        if (tid < H / 4) {
            /* each element of the next vector sums to nb (plus a trace of x: keeps the read alive) */
            const float4 v = *(const float4 *)(xs + 4 * tid);
            const float a = 1.0f + v.x * 1e-30f, bb = 1.0f + v.y * 1e-30f, c = 1.0f + v.z * 1e-30f, d = 1.0f + v.w * 1e-30f;
            if (mode == 1) {
                asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(out + 4 * tid), "f"(a), "f"(bb), "f"(c), "f"(d) : "memory");
            } else if (mode == 2) {
                *(float4 *)(ys + 4 * tid) = make_float4(a, bb, c, d);
            }
        }
        if (mode == 2) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncthreads();
            if (tid == 0) {
                asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                             :: "l"(out), "r"(smem_addr(ys)), "r"(H * 4) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
                asm volatile("fence.proxy.async.global;" ::: "memory");
            }
        }
        __syncthreads();
        if (tid == 0) red_release_add(ctr, 1u);
    }
}

int main(void) {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int phases = 400, warm = 40, Rmax = 32;
    float *x0, *acc;
    uint32_t *ctr;
    uint64_t *times;
    CK(cudaMalloc(&x0, H * 4));
    CK(cudaMemset(x0, 0, H * 4));
    CK(cudaMalloc(&acc, (size_t)phases * Rmax * H * 4));
    CK(cudaMalloc(&ctr, 4));
    CK(cudaMalloc(&times, (size_t)phases * sms * 8));
    std::vector<uint64_t> t((size_t)phases * sms);
    std::vector<float> last((size_t)Rmax * H);
    const char *names[3] = {"none", "red", "bulk"};
    const int Rs[] = {1, 2, 4, 8, 16, 32};
    printf("red_probe: %d SMs x %d threads, %d dependent phases (first %d not timed), vector of %d floats\n", sms,
           THREADS, phases, warm, H);
    printf("| mode | R | us a phase (median of 5 runs) | min | sums ok |\n|---|---|---|---|---|\n");
    for (int mode = 0; mode < 3; mode++)
        for (int ri = 0; ri < (int)(sizeof Rs / sizeof Rs[0]); ri++) {
            const int R = Rs[ri];
            if (mode == 0 && R > 8) continue;
            std::vector<double> per;
            int ok = 1;
            for (int rep = 0; rep < 5; rep++) {
                CK(cudaMemset(acc, 0, (size_t)phases * R * H * 4));
                CK(cudaMemset(ctr, 0, 4));
                void *args[] = {(void *)&mode, (void *)&R, (void *)&phases, (void *)&x0, (void *)&acc, (void *)&ctr, (void *)&times};
                CK(cudaLaunchCooperativeKernel((void *)k_chain, sms, THREADS, args, 0, 0));
                CK(cudaDeviceSynchronize());
                CK(cudaMemcpy(t.data(), times, t.size() * 8, cudaMemcpyDeviceToHost));
                /* a phase: the median block's start, last phase against the first timed one */
                std::vector<uint64_t> a(t.begin() + (size_t)warm * sms, t.begin() + (size_t)(warm + 1) * sms),
                    z(t.begin() + (size_t)(phases - 1) * sms, t.begin() + (size_t)phases * sms);
                std::sort(a.begin(), a.end());
                std::sort(z.begin(), z.end());
                per.push_back((double)(z[sms / 2] - a[sms / 2]) / 1e3 / (phases - 1 - warm));
                if (mode > 0) {
                    CK(cudaMemcpy(last.data(), acc + (size_t)(phases - 1) * R * H, (size_t)R * H * 4, cudaMemcpyDeviceToHost));
                    for (int h = 0; h < H; h++) {
                        double s = 0;
                        for (int r = 0; r < R; r++) s += last[(size_t)r * H + h];
                        if (s < sms - 0.01 || s > sms + 0.01) ok = 0;
                    }
                }
            }
            std::sort(per.begin(), per.end());
            printf("| %s | %d | %.3f | %.3f | %s |\n", names[mode], R, per[2], per[0], mode == 0 ? "-" : ok ? "yes" : "NO");
        }
    return 0;
}
