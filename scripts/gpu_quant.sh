#!/usr/bin/env bash
# scripts/gpu_quant.sh - quantized decode on the GPU (issue 39), in one call: the carried binaries
# (.gpu_carry/bins.tar.xz: build/amk, build/gpu/test_gpu, build/gpu/test_sweep, built on the dev
# machine), test_gpu's block and x_q8 cases on every image (or all of test_gpu: FULL=1), then
# `amk bench --quant` with x rounded to 8 bits (--x-q8 1, the default) and without (--x-q8 0) in the
# same call: the block ring's dp4a path against the lanes' float path; FULL=1 adds the sweep and
# the bf16 steps' bench; TRACE=1 instead writes one step's timeline a model (the quantized ones and
# bf16, llama3-8b unless SHAPES) and prints bench/phases.py's table of each. Logs in $OUT; a table last.
#   tar -cf - build/amk build/gpu/test_gpu build/gpu/test_sweep | xz -T2 -6 > .gpu_carry/bins.tar.xz
set -u
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu_lib.sh
. scripts/gpu_lib.sh # run NAME CMD... and rows
gpu_start
if [ "${TRACE:-0}" = 1 ]; then
  SH=${SHAPES:-llama3-8b}
  run trace_q timeout 600 build/amk bench --shapes "$SH" --iters 20 --ctx 128 --quant "${QUANTS:-Q4_K_M}" --trace "$OUTD/t"
  run trace_bf16 timeout 300 build/amk bench --shapes "$SH" --iters 20 --ctx 128 --trace "$OUTD/t"
  for f in "$OUTD"/t.*.json; do echo "== $f"; python3 bench/phases.py "$f" --starts; gzip -f "$f"; done
  grep -E '^\| [a-z]|^read ceiling' "$OUTD"/trace_*.log
  printf '%s\n' "${rows[@]}"
  exit 0
fi
if [ "${FULL:-0}" = 1 ]; then
  run test_gpu timeout 900 build/gpu/test_gpu
  run test_sweep timeout 600 build/gpu/test_sweep
  run bench_bf16 timeout 300 build/amk bench --iters 30 --ctx 128
else
  run test_gpu_blk timeout 600 build/gpu/test_gpu test_blk_ring test_gemv_tile test_fused_gemv test_fused_mlp
fi
grep -E "FAIL|failed:" "$OUTD"/test_gpu*.log | head -20
SH=${SHAPES:-llama3-8b,llama3.2-1b}
Q=${QUANTS:-Q4_K_M,Q8_0,Q4_0}
run bench_x8 timeout 600 build/amk bench --shapes "$SH" --iters 30 --ctx 128 --quant "$Q" --x-q8 1
run bench_f32x timeout 600 build/amk bench --shapes "$SH" --iters 30 --ctx 128 --quant "$Q" --x-q8 0
for f in bench_x8 bench_f32x bench_bf16; do
  [ -f "$OUTD/$f.log" ] && { echo "== $f"; grep -E '^\| [a-z]|^read ceiling|per opcode' "$OUTD/$f.log" | sed 's/(sum over SMs of op time; % of all SMs x step time)//'; }
done
printf '%s\n' "${rows[@]}"
