"""bench/gemm_cublas.py - torch.matmul (cuBLAS) on the shapes of test_gpu --bench-gemm: bf16
x [M, K] @ W[N, K].T -> bf16 [M, N], Llama-3-8B's projections at M = 512 and 2048. Prints one line
a shape: the median of 50 timed runs (CUDA events, after 10 warm-up runs) and TFLOP/s. Run beside
the AMK bench in one call (scripts/gpu_gemm.sh) so that both see the same GPU and clocks."""
import torch

SHAPES = [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336)]


def median_ms(fn, n=50):
    for _ in range(10):
        fn()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    torch.manual_seed(0)
    print("cublas:", torch.cuda.get_device_name(0), "torch", torch.__version__)
    for m in (512, 2048):
        for n, k in SHAPES:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.05
            ms = median_ms(lambda: torch.matmul(x, w.t()))
            print(f"  cublas M={m} N={n} K={k} bf16: median {ms * 1e3:.1f} us ({2.0 * m * n * k / ms * 1e-9:.1f} TFLOP/s)")


if __name__ == "__main__":
    main()
