#!/usr/bin/env bash
# scripts/gpu_check.sh - the one command a GPU run calls (H100/H200): builds the device image and
# the GPU tests, runs them (with --bench numbers), runs compute-sanitizer memcheck on the quick
# suite and racecheck/synccheck on the single-SM op tests (shared-memory hazards), and prints a
# short table last. Logs go to $OUT (or /tmp/amk-gpu-check). Exit status: nonzero if any step failed.
#   BUILD=build-gpu  build directory      GPU_CHECK_SANITIZE=0  skip compute-sanitizer (=memcheck: only it)
#   GPU_CHECK_BENCH=0  no --bench         AMK_TEST_SEED=N       repeat a seed
#   GPU_CHECK_PREBUILT=1  use $BUILD/gpu/test_gpu as carried (built on an x86-64 dev machine with
#                         `make BUILD=... $BUILD/gpu/test_gpu`): no compile on the GPU machine
#   GPU_CHECK_SAN_TESTS="test_a test_b"  memcheck only these tests (default: the whole quick suite)
#   GPU_CHECK_HF=shape,shape  also run bench/hf_baseline.py on these shapes (JSON: $LOG/hf_baseline.json)
#   GPU_CHECK_HF_CTX=128,4096  its context lengths
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LOG=${OUT:-/tmp/amk-gpu-check}
mkdir -p "$LOG"
JOBS=$(nproc 2>/dev/null || echo 4)
rows=()
fail=0

# step NAME SUMMARY-COMMAND -- COMMAND...: runs COMMAND into $LOG/NAME.log, records rc and time;
# SUMMARY-COMMAND (given the log path) prints the table's note.
step() {
  local name=$1 summ=$2; shift 3
  local t0 t1 rc note
  t0=$(date +%s.%N)
  "$@" > "$LOG/$name.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  note=$($summ "$LOG/$name.log" 2>/dev/null | tr '\n' ' ' | cut -c1-70)
  [ "$rc" != 0 ] && fail=1
  rows+=("$(printf '%-12s %-4s %7.1f s  %s' "$name" "$([ "$rc" = 0 ] && echo ok || echo "rc$rc")" "$(awk "BEGIN{print $t1 - $t0}")" "$note")")
  echo "== $name: rc $rc"
}
tally()   { grep -E '[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1; }
san()     { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$1" | tail -n 2; tally "$1"; }
lastline(){ tail -n 1 "$1"; }

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; nvcc --version | tail -n 1; } > "$LOG/env.log" 2>&1
cat "$LOG/env.log"

if [ "${GPU_CHECK_PREBUILT:-0}" = 1 ] && [ -x "$BUILD/gpu/test_gpu" ]; then
  rows+=("build        (prebuilt $BUILD/gpu/test_gpu)")
else
  step build  lastline -- make -j"$JOBS" BUILD="$BUILD" "$BUILD/gpu/test_gpu" "$BUILD/gpu/test_cuda_host"
  step host   tally    -- "$BUILD/gpu/test_cuda_host"
fi
grep -A3 "entry function 'amk_vm_main'" "$BUILD/device/ptxas.log" 2>/dev/null | tail -n 2
BENCH=--bench; [ "${GPU_CHECK_BENCH:-1}" = 0 ] && BENCH=
step test_gpu tally    -- "$BUILD/gpu/test_gpu" $BENCH
grep -E '^  (test_|bench|PTX|device|bandwidth|time_runs|images)' "$LOG/test_gpu.log"

# Experiment images ($BUILD/device/variants/NAME.cubin, built by hand with -D overrides of
# amk_vm.cuh / amk_ops.cuh constants): the same benchmarks with each.
for v in "$BUILD"/device/variants/*.cubin; do
  [ -f "$v" ] || continue
  n=$(basename "$v" .cubin)
  AMK_TEST_IMAGE="$v" "$BUILD/gpu/test_gpu" --bench none > "$LOG/variant_$n.log" 2>&1
  grep -E '^  bench' "$LOG/variant_$n.log" | sed "s/^  bench/  [$n] bench/"
done

if [ -n "${GPU_CHECK_HF:-}" ]; then
  hf_table() { sed -n '/^shape /,/^hf_baseline: wrote/p' "$1" | grep -v '^hf_baseline' | awk '{printf "%s/%s %s; ", $1, $2, $4}'; }
  step hf_baseline hf_table -- timeout 420 env PYTHONUNBUFFERED=1 python3 bench/hf_baseline.py "$LOG/hf_baseline.json" \
       --shapes "$GPU_CHECK_HF" --ctx "${GPU_CHECK_HF_CTX:-128,4096}"
  sed -n '/^shape /,$p' "$LOG/hf_baseline.log"
fi

if [ "${GPU_CHECK_SANITIZE:-1}" != 0 ] && command -v compute-sanitizer > /dev/null; then
  export AMK_TEST_SLOW=30
  # why --report-api-errors no: test_images feeds the driver a broken PTX on purpose; the tests
  # check every API result themselves
  # shellcheck disable=SC2086 # why: the test names split into arguments
  step memcheck  san -- timeout 240 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 \
       "$BUILD/gpu/test_gpu" --quick ${GPU_CHECK_SAN_TESTS:-}
  if [ "${GPU_CHECK_SANITIZE:-1}" != memcheck ]; then
    step racecheck san -- timeout 150 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 \
         "$BUILD/gpu/test_gpu" --quick test_gemv test_attention_tile test_rmsnorm test_sample_argmax test_softmax
    step synccheck san -- timeout 90 compute-sanitizer --tool synccheck --error-exitcode 99 \
         "$BUILD/gpu/test_gpu" --quick test_gemv test_attention_tile test_rmsnorm test_sample_argmax test_timing
  fi
else
  rows+=("compute-sanitizer: skipped")
fi

echo
echo "step         res     time    notes"
for r in "${rows[@]}"; do echo "$r"; done
exit $fail
