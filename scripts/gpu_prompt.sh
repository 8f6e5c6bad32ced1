#!/usr/bin/env bash
# scripts/gpu_prompt.sh PHASE - the short prompt's phases (issue 40's 128-token bar) on the GPU
# machine, from binaries built on the dev machine (.gpu_carry/bins.tar.xz: build/amk,
# build/gpu/test_gpu, build/gpu/test_sweep, build/test_llama_gpu; VARIANTS="X Y" adds
# build/amk_X ... built with other builders or prefill images).
#   phase p (carry .gpu_carry): where the 8B's 128- and 512-row chunks spend their time: the
#            bench's timelines (bench/phases.py of the middle layer), each variant's the same;
#            test_prefill_program with the seed session "portable" left failing
#   phase t (carry .gpu_carry): all of test_gpu, the builder sweep, test_llama's prompt GPU cases,
#            the prompt cases of test_gpu on each image set in .gpu_carry/sets, the prompt's
#            bench of each variant (two rounds), then the prompt's bench (BF16, F16, Q4_K_M; 8B
#            and 1B) and the decode step at context 128 (SKIP_TESTS=1: no test_gpu; SKIP_BENCH=1:
#            the variants' rounds only)
# Logs in $OUT; a table last.
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/gpu_lib.sh
. scripts/gpu_lib.sh # run NAME CMD... and rows
gpu_start
case "${1:-p}" in
p)
  for v in "" ${VARIANTS:-}; do
    b=build/amk${v:+_$v}; n=${v:-base}
    run "pf128_$n" timeout 300 $b bench --shapes "${SHAPES:-llama3-8b}" --prefill 128 --prefill-rows 128 --trace "$OUTD/tr_$n"
    run "pf512_$n" timeout 300 $b bench --shapes "${SHAPES:-llama3-8b}" --prefill 512 --prefill-rows 512 --trace "$OUTD/tr_$n"
    for f in "$OUTD"/tr_"$n".*.json; do echo "== $f"; python3 bench/phases.py "$f" | head -n 24; gzip -f "$f"; done
    grep -hE '^\| llama|per opcode|waits were met' "$OUTD/pf128_$n.log" "$OUTD/pf512_$n.log"
  done
  run seed env AMK_TEST_SEED=1796043172 timeout 300 build/gpu/test_gpu test_prefill_program
  run tg timeout 300 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program test_elementwise
  run llama_pf env AMK_TEST_ONLY=test_prefill_cuda timeout 300 build/test_llama_gpu
  # each image set in .gpu_carry/sets (SET.set: a candidate's images) through the prompt's GPU cases
  for f in .gpu_carry/sets/*.set; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .set)
    run "tg_$n" env AMK_TEST_IMAGE="$f" timeout 300 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program test_elementwise
  done
  grep -hE "FAIL|passed" "$OUTD"/seed.log "$OUTD"/tg_*.log | head -20
  ;;
t)
  [ "${SKIP_TESTS:-0}" = 1 ] || run test_gpu timeout 600 build/gpu/test_gpu
  run test_sweep timeout 500 build/gpu/test_sweep
  for t in test_prefill_cuda test_auto_dtypes_cuda; do
    run "llama_$t" env AMK_TEST_ONLY=$t timeout 300 build/test_llama_gpu
  done
  for f in .gpu_carry/sets/*.set; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .set)
    run "tg_$n" env AMK_TEST_IMAGE="$f" timeout 300 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program test_elementwise
  done
  grep -hE "FAIL|failed:" "$OUTD"/test_gpu.log "$OUTD"/test_sweep.log "$OUTD"/tg_*.log | head -20
  # the candidates (VARIANTS: build/amk_X), two rounds interleaved
  for r in 1 2; do
    for v in "" ${VARIANTS:-}; do
      b=build/amk${v:+_$v}; n=${v:-base}
      run "ab${r}_$n" timeout 300 $b bench --shapes llama3-8b,llama3.2-1b --prefill 128,512,2048
    done
  done
  for f in "$OUTD"/ab*.log; do echo "== $f"; grep -E '^\| llama' "$f"; done
  if [ "${SKIP_BENCH:-0}" != 1 ]; then
    run pf timeout 600 build/amk bench --shapes llama3-8b,llama3.2-1b --quant BF16,F16,Q4_K_M --prefill 128,512,2048
    run decode timeout 300 build/amk bench --shapes llama3-8b,llama3.2-1b --ctx 128
    grep -E '^\| [a-z]' "$OUTD/pf.log" "$OUTD/decode.log"
  fi
  ;;
esac
echo
printf '%s\n' "${rows[@]}"
