# shellcheck shell=bash
# scripts/gpu_lib.sh - sourced by the GPU scripts (gpu_run.sh, gpu_portable.sh, gpu_quant.sh,
# gpu_dtypes.sh, gpu_prompt.sh), from the repository's root.
# gpu_header: the GPU, its driver and clocks, one line.
gpu_header() { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; }
# unpack_bins: the binaries built on the dev machine (.gpu_carry/bins.tar.xz), where they travel.
unpack_bins() { [ ! -f .gpu_carry/bins.tar.xz ] || xz -dc .gpu_carry/bins.tar.xz | tar -xf -; }
# gpu_start: a script's start on the GPU machine: OUTD ($OUT, else /tmp/amk-out), the binaries
# unpacked, the GPU's line.
gpu_start() {
  OUTD=${OUT:-/tmp/amk-out}
  mkdir -p "$OUTD"
  unpack_bins
  gpu_header
}
# run NAME CMD...: CMD's output into $OUTD/NAME.log; a line into rows with its exit status, its
# time and the log's last summary lines (tests' counts, sanitizer summaries, the golden and
# coverage lines); prints "== NAME rc=RC".
rows=()
run() {
  local name=$1; shift
  local t0 rc
  t0=$(date +%s.%N)
  "$@" > "$OUTD/$name.log" 2>&1; rc=$?
  rows+=("$(printf '%-16s rc=%-3s %6.1f s  %s' "$name" "$rc" "$(awk "BEGIN{print $(date +%s.%N) - $t0}")" \
          "$(grep -E '[0-9]+ passed, [0-9]+ failed|ERROR SUMMARY|RACECHECK SUMMARY|golden|coverage' "$OUTD/$name.log" |
             tail -n 2 | tr '\n' ' ' | cut -c1-110)")")
  echo "== $name rc=$rc"
}
