/* bench/race_probe.cu - does compute-sanitizer racecheck model named barriers used by a subset of
   a block's warps? Each kernel: one block of 512 threads; some pattern first, then lane 0 of
   every warp writes s[warp], __syncthreads(), and warp 15 reads all of s (correct code: the
   barrier orders the writes before the reads). Run each mode under racecheck:
     nvcc -gencode arch=compute_90a,code=sm_90a -lineinfo -o race_probe bench/race_probe.cu
     for m in 0 1 2 3 4 5; do compute-sanitizer --tool racecheck ./race_probe $m; done
   mode 0: nothing first (control)
   mode 1: warps 0-1 meet at named barrier 5 (64 threads), then __syncthreads()
   mode 2: warp 2 arrives (bar.arrive) at barrier 5 and warps 0-1 sync there (96 threads)
   mode 3: mode 1, twice (two "tasks")
   mode 4: warps 0-13 at barrier 6 (448 threads), warp 14 arrives at barrier 5 and warps 0-13
           sync there (480 threads): the lean Q/K/V tile's pattern (amk_ops.cuh)
   mode 5: thread 0 polls a global word (nanosleep back-off) and writes a shared flag, the block
           meets, every thread reads the flag: amk_op_wait_go's pattern, with mode 4 before it
   Measured (compute-sanitizer 2025.3.1, bench/RESULTS.md run 278): modes 0-2 no hazard, modes 3-5
   hazards on these correct kernels (each prints the right sum). */
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar_sync(int b, int n) { asm volatile("bar.sync %0, %1;" ::"r"(b), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int b, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(b), "r"(n) : "memory"); }

__global__ void probe(int mode, float *out, const volatile int *word) {
    __shared__ float s[16];
    __shared__ float t[16];
    __shared__ int go;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x < 16) t[threadIdx.x] = 0.0f;
    __syncthreads();
    for (int rep = 0; rep < (mode == 3 ? 2 : 1); rep++) {
        if (mode == 1 || mode == 3) {
            if (warp < 2) {
                if (lane == 0) t[warp] = 1.0f;
                bar_sync(5, 64);
            }
        } else if (mode == 2) {
            if (warp == 2) bar_arrive(5, 96);
            if (warp < 2) bar_sync(5, 96);
        } else if (mode == 4 || mode == 5) {
            if (warp == 14) bar_arrive(5, 480);
            if (warp < 14) {
                bar_sync(6, 448);
                bar_sync(5, 480);
            }
        }
        __syncthreads();
        if (mode == 5) {
            if (threadIdx.x == 0) {
                int ns = 32;
                while (*word == 0) { __nanosleep(ns); ns = ns < 64 ? 2 * ns : ns; }
                go = *word;
            }
            __syncthreads();
            if (go != 1) out[1] = 1.0f; /* never: word is 1 */
        }
        if (lane == 0) s[warp] = (float)(warp + rep) + t[0] * 0.0f;
        __syncthreads();
        if (warp == 15) {
            float a = 0.0f;
            for (int i = 0; i < 16; i++) a += s[i];
            if (lane == 0) out[rep] = a;
        }
        __syncthreads();
    }
}

int main(int argc, char **argv) {
    const int mode = argc > 1 ? atoi(argv[1]) : 0;
    float *out, h[2] = {0, 0};
    int *word, one = 1;
    cudaMalloc(&out, 2 * sizeof(float));
    cudaMalloc(&word, sizeof(int));
    cudaMemcpy(word, &one, sizeof one, cudaMemcpyHostToDevice);
    cudaMemset(out, 0, 2 * sizeof(float));
    probe<<<1, 512>>>(mode, out, word);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    printf("mode %d: %s, sum %.0f (want 120)\n", mode, cudaGetErrorString(e), h[0]);
    return e != cudaSuccess;
}
