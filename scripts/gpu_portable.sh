#!/usr/bin/env bash
# scripts/gpu_portable.sh PHASE - issue 42's acceptance on the lent H200: the portable image forced
# (AMK_CUDA_IMAGE=portable) with shared memory capped at a consumer GPU's 99 KB a block
# (AMK_CUDA_SMEM_CAP=101376). Binaries built on the dev machine travel as .gpu_carry/bins.tar.xz
# (build/amk, build/gpu/test_gpu, build/gpu/test_sweep, build/test_llama_gpu: each embeds the image
# set, which xz with a 64 MiB dictionary stores once; one call carries at most 64 MiB):
#   tar -cf - build/amk build/gpu/test_gpu build/gpu/test_sweep build/test_llama_gpu |
#     xz -T2 -6 --lzma2=dict=64MiB > .gpu_carry/bins.tar.xz     (.gpu_carry/ in .git/info/exclude)
# The machine keeps /tmp between warm calls.
#   phase a: carry .gpu_carry: the GPU tests on the portable image, then `amk bench` at context
#            128 on the three shapes (bf16, and Q4_K_M on the 8B) with the sm_90a images and with
#            the portable one
#   phase s: carry .gpu_carry: the builder sweep (tests/gpu/test_sweep.c) on the portable image
#   phases b, c: carry .model_parts/a, then .model_parts/b (SmolLM2 Q4_1 in parts: gpu_run.sh)
#   phase d: carry .model_parts/c and .gpu_carry: the golden check on CUDA (AMK_GOLDEN_FULL) on
#            the portable image, and `amk generate` of a prompt with each dtype on it
# Logs go to $OUT; a short table is printed last.
set -u
cd "$(dirname "$0")/.." || exit 1
OUTD=${OUT:-/tmp/amk-portable}
mkdir -p "$OUTD"
export AMK_TEST_SEED=${AMK_TEST_SEED:-$(date +%s)}
PORT=(env AMK_CUDA_IMAGE=portable AMK_CUDA_SMEM_CAP=101376)
# shellcheck source=scripts/gpu_lib.sh
. scripts/gpu_lib.sh # run NAME CMD... and rows
gpu_header
echo "seed $AMK_TEST_SEED"
unpack() { xz -dc .gpu_carry/bins.tar.xz | tar -xf - || { echo "no .gpu_carry/bins.tar.xz (header)" >&2; exit 2; }; }
case "${1:-a}" in
a)
  unpack
  run test_gpu "${PORT[@]}" build/gpu/test_gpu
  grep -E '^  (test_|images)' "$OUTD/test_gpu.log" | grep -v ' ok ' | head -40
  grep -E 'FAIL|failed' "$OUTD/test_gpu.log" | head -20
  for img in sm90a portable; do
    if [ $img = portable ]; then E=("${PORT[@]}"); else E=(env); fi
    run "bench_$img" "${E[@]}" build/amk bench --iters 20 --ctx 128 --shapes llama3-8b,llama3.2-1b,smollm2-135m
    run "benchq_$img" "${E[@]}" build/amk bench --iters 20 --ctx 128 --shapes llama3-8b --quant Q4_K_M
    grep -E '^\||ceiling|image' "$OUTD/bench_$img.log" "$OUTD/benchq_$img.log"
  done
  ;;
s)
  unpack
  run sweep "${PORT[@]}" build/gpu/test_sweep
  grep -E 'FAIL' "$OUTD/sweep.log" | head -20
  grep -E -A3 'coverage' "$OUTD/sweep.log" | head -8
  ;;
b) cp .model_parts/a/part00 /tmp/amk_model_part00 && ls -la /tmp/amk_model_part* ;;
c) cp .model_parts/b/part01 /tmp/amk_model_part01 && ls -la /tmp/amk_model_part* ;;
d)
  unpack
  cp .model_parts/c/part02 /tmp/amk_model_part02
  mkdir -p models
  cat /tmp/amk_model_part00 /tmp/amk_model_part01 /tmp/amk_model_part02 > models/SmolLM2-135M-Instruct.Q4_1.gguf
  sha256sum models/SmolLM2-135M-Instruct.Q4_1.gguf
  run golden env AMK_GOLDEN_FULL=1 AMK_TEST_ONLY=test_golden_smollm2_cuda "${PORT[@]}" build/test_llama_gpu
  grep -E 'golden' "$OUTD/golden.log"
  for dt in F32 BF16 F16; do
    run "gen_$dt" "${PORT[@]}" build/amk generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf --dtype $dt -n 32 \
      -p "The capital of France is"
    grep -E 'backend|tok/s|prompt' "$OUTD/gen_$dt.log" | head -4
  done
  run gen_stored "${PORT[@]}" build/amk generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf --act-dtype F32 -n 32 -p "The capital of France is"
  run gen_cpu build/amk generate --cpu -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 32 -p "The capital of France is"
  for f in gen_F32 gen_BF16 gen_F16 gen_stored gen_cpu; do echo "--- $f"; grep -v -E 'backend|tok/s|load|prompt' "$OUTD/$f.log" | head -5; done
  ;;
esac
echo
printf '%s\n' "${rows[@]}"
