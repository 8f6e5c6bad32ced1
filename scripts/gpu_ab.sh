#!/usr/bin/env bash
# scripts/gpu_ab.sh - A/B timing of device or lowering changes on the GPU, in one call.
#
# The trees it times, each built from this working tree:
#   e0    the working tree with its library and device sources (every top-level amk*.h and
#         amk*.cuh) replaced by the files in $AB_DIR/base/ (the library, device code and amk
#         command of the baseline; make them with `scripts/gpu_ab.sh --prepare REV` here, where
#         git is)
#   new   the working tree as it is
#   vN    the working tree with sed script $AB_DIR/vN.sed applied to its top-level amk*.h and
#         amk*.cuh (a knob or a path switched off, e.g. in amk_tune.h: the control that separates a
#         change's effect from the code-placement effect, bench/NOTES.md session "affinity")
# For each tree, ROUNDS rounds of `amk bench` (trees interleaved within a round, so drift hits all
# alike; the order rotates from round to round), one ms/token line per tree and round, then
# bench/phases.py's table of layer 8 (1B) and layer 15 (SmolLM2) for every tree (its columns: span,
# task median, task max, start spread, hop). The GPU tests run on "new" first. Everything lands in
# $OUT/all.tar (traces, logs).
#
#   here:            scripts/gpu_ab.sh --prepare HEAD        # $AB_DIR/base/ from a commit
#                    echo 's/AMK_X 1/AMK_X 0/' > .ab/v1.sed   # optional controls
#   on the GPU host: scripts/gpu_ab.sh                       # (the device tool: carry [".ab"])
#
# Knobs (environment): AB_DIR (.ab), ROUNDS (3), ITERS (50), CTX (128), SHAPES (all three),
# AB_TEST=0 (no GPU tests), AB_TRACE=0 (no traces), AB_REUSE=1 with ROUND_FROM=N (a later call on
# the same warm machine: the trees built before, rounds numbered from N),
# NEW_ARGS (more `amk bench` options for "new" only, e.g. "--chain 16": only "new" builds the chain
# images, the other trees build with CHAIN_IMAGES=0),
# GEMM_BENCH=1 (also `test_gpu --bench`'s GEMV/GEMM lines).
set -u
cd "$(dirname "$0")/.." || exit 1
AB_DIR=${AB_DIR:-.ab}
# The baseline's files: the library and device sources at the top level (one amk.h and amk_ir.h in
# an old commit, the layered headers, amk_tune.h and amk_plan.h in a newer one), the amk command,
# and how the tree builds its device images (gpu.mk, embed.c)
LIB_RE='^amk[^/]*\.(h|cuh)$'
OTHER_FILES="examples/amk.c gpu.mk tests/gpu/embed.c"
if [ "${1:-}" = --prepare ]; then
  rev=${2:-HEAD}
  git rev-parse --verify -q "$rev^{commit}" > /dev/null || { echo "no commit $rev" >&2; exit 2; }
  files="$(git ls-tree --name-only "$rev" | grep -E "$LIB_RE" | tr '\n' ' ')$OTHER_FILES"
  rm -rf "$AB_DIR/base" && mkdir -p "$AB_DIR/base" || exit 1
  for f in $files; do mkdir -p "$AB_DIR/base/$(dirname "$f")" && git show "$rev:$f" > "$AB_DIR/base/$f" || exit 1; done
  echo "$AB_DIR/base: $files at $(git rev-parse --short "$rev")"
  exit 0
fi
[ -d "$AB_DIR/base" ] || { echo "no $AB_DIR/base: run scripts/gpu_ab.sh --prepare REV first" >&2; exit 2; }
OUTD=${OUT:-/tmp/amk-ab}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUTD"
nvcc --version | tail -n 2 | head -n 1 # why: this host's build has spilled what the dev machine's did not (runs 323, 326)
copy_tree() { # copy_tree DIR: the working tree without builds or git
  rm -rf "$1"; mkdir -p "$1"
  tar cf - --exclude=./build --exclude='./build-*' --exclude=./.git --exclude="./$AB_DIR" --exclude=./.model_parts . | tar xf - -C "$1"
}
lib_files() { # lib_files DIR: DIR's top-level library and device sources, one a line
  find "$1" -maxdepth 1 -type f -name 'amk*' | grep -E "/amk[^/]*\.(h|cuh)$"
}
trees="e0 new"
# AB_REUSE=1 (a second call on the same, still warm machine): the trees and builds of the call
# before stay as they are
reuse() { [ "${AB_REUSE:-0}" = 1 ] && [ -x "$1/build-ab/amk" ]; }
# why remove the tree's own first: a baseline from before a header existed must not build with
# the new tree's copy of it (an old amk.h beside the new amk_cuda.h, say)
reuse /tmp/ab-e0 || { copy_tree /tmp/ab-e0 && { lib_files /tmp/ab-e0 | xargs -r rm -f; } && cp -r "$AB_DIR"/base/. /tmp/ab-e0/; }
for f in "$AB_DIR"/v*.sed; do
  [ -f "$f" ] || continue
  v=$(basename "$f" .sed)
  reuse "/tmp/ab-$v" || { copy_tree "/tmp/ab-$v" && lib_files "/tmp/ab-$v" | xargs -r sed -i -f "$f"; }
  trees="$trees $v"
done
for v in $trees; do
  [ "$v" = new ] && continue
  (cd "/tmp/ab-$v" && make -j4 BUILD=build-ab WARN=-Wall CHAIN_IMAGES=0 build-ab/amk > "$OUTD/build_$v.log" 2>&1 ||
   echo "build of $v failed: $OUTD/build_$v.log") &
done
make -j6 BUILD=build-gpu WARN=-Wall build-gpu/amk build-gpu/gpu/test_gpu > "$OUTD/build_new.log" 2>&1 ||
  { tail -30 "$OUTD/build_new.log"; exit 1; }
wait
if [ "${AB_TEST:-1}" = 1 ]; then
  build-gpu/gpu/test_gpu > "$OUTD/test_gpu.log" 2>&1
  echo "test_gpu (new) rc=$?: $(grep -E '[0-9]+ passed, [0-9]+ failed' "$OUTD/test_gpu.log" | tail -1)"
  grep -E "FAIL|^images:" "$OUTD/test_gpu.log" | head -12
fi
if [ "${GEMM_BENCH:-0}" = 1 ]; then
  build-gpu/gpu/test_gpu --bench test_read_bandwidth > "$OUTD/bench_gemm.log" 2>&1
  grep -E "^  bench" "$OUTD/bench_gemm.log"
fi
# why the order rotates each round: with a fixed order, "new" (always second) measured ~1% slower
# than e0 on Llama-3.2-1B with identical code (bench/RESULTS.md run 243)
read -r -a tlist <<< "$trees"
for i in $(seq "${ROUND_FROM:-1}" $(( ${ROUND_FROM:-1} + ROUNDS - 1 ))); do
  k=$(( (i - 1) % ${#tlist[@]} ))
  for v in "${tlist[@]:k}" "${tlist[@]:0:k}"; do
    if [ "$v" = new ]; then amk=build-gpu/amk; else amk=/tmp/ab-$v/build-ab/amk; fi
    extra=""; [ "$v" = new ] && extra=${NEW_ARGS:-}
    # shellcheck disable=SC2086 # NEW_ARGS: words
    "$amk" bench --iters "${ITERS:-50}" --ctx "${CTX:-128}" --shapes "${SHAPES:-llama3-8b,llama3.2-1b,smollm2-135m}" \
      $([ "${AB_TRACE:-1}" = 1 ] && echo --trace "$OUTD/t$v") $extra > "$OUTD/bench_${v}_$i.log" 2>&1
    echo "$v $i: $(grep -E '^\| [a-z]' "$OUTD/bench_${v}_$i.log" | grep -v '^| shape' | awk -F'|' '{printf "%s %s %s;", $2, $3, $4}')"
  done
done
for s in llama3.2-1b smollm2-135m; do
  for v in $trees; do
    f="$OUTD/t$v.$s.${CTX:-128}.json"
    [ -f "$f" ] && { echo "== $v $s"; python3 bench/phases.py "$f" | tail -n +3; }
  done
done
cd "$OUTD" || exit 1
gzip -f t*.json 2>/dev/null
tar cf all.tar --exclude=all.tar . && find . -type f ! -name all.tar -delete
