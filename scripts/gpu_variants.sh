#!/usr/bin/env bash
# scripts/gpu_variants.sh BIN... - A/B timing of amk binaries on the GPU, in one call. Each BIN is
# an amk command built on the dev machine: this tree's build/amk, or a build with one image
# replaced (scripts/variant.sh), carried compressed in .gpu_carry/bins.tar.xz. ROUNDS rounds, the
# binaries alternating within a round and their order rotating from round to round (so that drift
# hits all alike); in each, `amk bench --iters ITERS --ctx CTX --shapes SHAPES` with BF16 weights and
# with each of QUANTS. Then a table: a row per shape, context and weights, a column per binary with
# its rounds' ms/token and their median, and each binary's median over the first's. TRACE=1 adds
# one step's timeline per binary, shape and weights at the first context (bench/phases.py --starts).
# Logs and traces in $OUT.
#   here:       DEFS=-DKNOB=1 scripts/variant.sh x 1        (builds the general image with the knob)
#               tar -cf - build/amk build/amk_x | xz -T2 -6 --lzma2=dict=64MiB > .gpu_carry/bins.tar.xz
#   on the GPU: scripts/gpu_variants.sh build/amk build/amk_x       (the device tool: carry [".gpu_carry"])
# Knobs (environment): ROUNDS (3), ITERS (30), CTX (128; a list such as 128,4096), SHAPES
# (llama3-8b,llama3.2-1b), QUANTS (Q4_K_M; a list, or empty for BF16 alone), TRACE (0).
set -u
cd "$(dirname "$0")/.." || exit 1
[ $# -ge 1 ] || { echo "usage: scripts/gpu_variants.sh BIN..." >&2; exit 2; }
# shellcheck source=scripts/gpu_lib.sh
. scripts/gpu_lib.sh # run NAME CMD... and rows
gpu_start
ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-30} CTX=${CTX:-128} SHAPES=${SHAPES:-llama3-8b,llama3.2-1b}
QUANTS=${QUANTS-Q4_K_M}
bins=("$@")
# qargs W: amk bench's options for weights W (BF16: the float step's own)
qargs() { [ "$1" = BF16 ] || printf '%s\n' --quant "$1"; }
weights=(BF16)
for q in ${QUANTS//,/ }; do weights+=("$q"); done
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_variants.sh: $b is not an executable" >&2; exit 2; }; done
# the runs' logs are NAME = the binary's file name, the weights and the round
for r in $(seq 1 "$ROUNDS"); do
  for k in "${!bins[@]}"; do
    b=${bins[$(((k + r - 1) % ${#bins[@]}))]}
    for w in "${weights[@]}"; do
      mapfile -t qa < <(qargs "$w")
      run "$(basename "$b").$w.$r" timeout 300 "$b" bench --shapes "$SHAPES" --iters "$ITERS" --ctx "$CTX" "${qa[@]}"
    done
  done
done
if [ "${TRACE:-0}" = 1 ]; then
  for b in "${bins[@]}"; do
    for w in "${weights[@]}"; do
      mapfile -t qa < <(qargs "$w")
      run "$(basename "$b").$w.trace" timeout 300 "$b" bench --shapes "$SHAPES" --iters 10 --ctx "${CTX%%,*}" "${qa[@]}" \
        --trace "$OUTD/$(basename "$b")"
    done
  done
  for f in "$OUTD"/*.json; do
    [ -f "$f" ] || continue
    echo "== $f"
    python3 bench/phases.py "$f" --starts
    gzip -f "$f"
  done
fi
printf '%s\n' "${rows[@]}"
python3 - "$OUTD" "${bins[@]}" <<'EOF'
import os, statistics, sys
outd, bins = sys.argv[1], [os.path.basename(b) for b in sys.argv[2:]]
cells, rows = {}, set()  # (row, bin) -> {round: ms}; the rows seen
for name in sorted(os.listdir(outd)):
    parts = name.rsplit(".", 3)  # BIN.WEIGHTS.ROUND.log
    if len(parts) != 4 or parts[3] != "log" or parts[0] not in bins or not parts[2].isdigit():
        continue
    for line in open(os.path.join(outd, name), errors="replace"):
        f = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(f) < 3 or not line.startswith("| ") or not f[1].isdigit():
            continue  # bench rows: | shape [weights] | ctx | ms/token | ...
        try:
            ms = float(f[2])
        except ValueError:
            continue
        row = (f[0], int(f[1]))
        rows.add(row)
        cells.setdefault((row, parts[0]), {})[int(parts[2])] = ms
print("\n| shape | ctx | " + " | ".join(f"{b} ms (rounds; median)" for b in bins) + " | " +
      " | ".join(f"{b} / {bins[0]}" for b in bins[1:]) + " |")
print("|---|---|" + "---|" * (2 * len(bins) - 1))
for row in sorted(rows):
    meds, out = [], []
    for b in bins:
        v = cells.get((row, b), {})
        vals = [v[r] for r in sorted(v)]
        meds.append(statistics.median(vals) if vals else None)
        out.append(" / ".join(f"{x:.3f}" for x in vals) + (f"; {meds[-1]:.3f}" if vals else "-"))
    ratios = [f"{m / meds[0]:.3f}" if m and meds[0] else "-" for m in meds[1:]]
    print(f"| {row[0]} | {row[1]} | " + " | ".join(out) + " | " + " | ".join(ratios) + " |")
EOF
