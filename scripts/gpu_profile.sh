#!/usr/bin/env bash
# scripts/gpu_profile.sh [SHAPES] - where one decode step's time goes, on the GPU machine:
#   per shape (default smollm2-135m,llama3.2-1b; ctx 128; QUANT=Q4_0 for one weight type of
#   `amk bench --quant`, SECTIONS for more ncu sections): `amk bench` with its timeline, the
#   per-phase table of the middle layer (bench/phases.py), and Nsight Compute on one megakernel
#   launch (warp states, stall samples per SASS instruction, instruction counts).
# Writes to $OUT (or /tmp/amk-out): bench.SHAPE.log, phases.SHAPE.txt, ncu.SHAPE.details.txt,
# ncu.SHAPE.sass.csv.gz (the source page: one row per SASS instruction with its samples),
# ncu.SHAPE.cuda.csv.gz (the same per CUDA source line: the image is built with -lineinfo, in its
# own build directory so that it never stands in for the normal image).
set -u
cd "$(dirname "$0")/.."
B=${BUILD:-build-prof}
export NVCC_FLAGS="-O3 -fmad=false -lineinfo -Xptxas -v,--warn-on-spills -Werror all-warnings"
OUTD=${OUT:-/tmp/amk-out}
mkdir -p "$OUTD"
# why WARN: see gpu_run.sh (the GPU machine's newer gcc)
# BIN=path: a binary built elsewhere (the dev machine's; ncu's SASS page needs no line info)
if [ -n "${BIN:-}" ]; then mkdir -p "$B"; cp "$BIN" "$B/amk"
else make -j16 BUILD=$B WARN=-Wall $B/amk > "$OUTD/build.log" 2>&1 || { tail -n 30 "$OUTD/build.log"; exit 1; }; fi
Q=${QUANT:+--quant $QUANT}
for sh in $(echo "${1:-smollm2-135m,llama3.2-1b}" | tr ',' ' '); do
  $B/amk bench --shapes "$sh" $Q --ctx 128 --iters 50 --trace "$OUTD/trace" > "$OUTD/bench.$sh.log" 2>&1
  python3 bench/phases.py "$OUTD"/trace.$sh*.128.json > "$OUTD/phases.$sh.txt" 2>&1
  gzip -f "$OUTD"/trace.$sh*.128.json
  # why --launch-skip 4: the bench's first megakernel launches set up the step; 4 skips into
  # its warm-up runs. --clock-control none: the device README asks to leave the clocks alone.
  timeout 300 ncu --clock-control none -k amk_vm_main --launch-skip 4 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section InstructionStats --section LaunchStats ${SECTIONS:-} \
    -f -o "$OUTD/ncu.$sh" $B/amk bench --shapes "$sh" $Q --ctx 128 --iters 2 > "$OUTD/ncu.$sh.log" 2>&1
  ncu -i "$OUTD/ncu.$sh.ncu-rep" --page details > "$OUTD/ncu.$sh.details.txt" 2>&1
  ncu -i "$OUTD/ncu.$sh.ncu-rep" --page source --csv --print-source sass > "$OUTD/ncu.$sh.sass.csv" 2>&1
  ncu -i "$OUTD/ncu.$sh.ncu-rep" --page source --csv --print-source cuda > "$OUTD/ncu.$sh.cuda.csv" 2>&1
  gzip -f "$OUTD/ncu.$sh.sass.csv" "$OUTD/ncu.$sh.cuda.csv"
  rm -f "$OUTD/ncu.$sh.ncu-rep"
  echo "== $sh"; head -n 3 "$OUTD/bench.$sh.log"; cat "$OUTD/phases.$sh.txt"
  grep -E "Stall|Warp Cycles|Issued Warp|No Instruction|Barrier|Long Scoreboard" "$OUTD/ncu.$sh.details.txt" | head -n 30
done
