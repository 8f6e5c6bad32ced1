#!/usr/bin/env bash
# Interop with the spec's reference implementation (RightNow-AI/AutoMegaKernel; IR_SPEC.md §0):
# the programs its lowering writes for toy Llama decoders, with its reference VM's numbers, and
# programs its validator rejects (tests/data/interop, written by scripts/amkpy_interop.py; no
# Python here). Every line of tests/data/interop/manifest.txt is a check:
#   run PROGRAM WEIGHTS INPUTS KV EXPECTED RTOL [# note]
#       amk validate accepts PROGRAM, and amk run matches EXPECTED (its reference VM's logits and
#       KV caches) within RTOL of each tensor's largest value. KV is a file of KV caches to start
#       from, '-' for none, or '@prev' for the outputs of this script's run of the line before
#       (decode steps that thread the cache).
#   reject PROGRAM
#       amk validate rejects PROGRAM (exit 1), as its validator does.
# Paths are relative to tests/data/interop. Prints "test_interop.sh: N passed, N failed".
set -u
AMK=${AMK:-build/amk}
DATA=$(cd "$(dirname "$0")/data/interop" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

step=0; prev=""
while read -r kind prog weights inputs kv expected rtol _; do
    case "$kind" in ''|'#'*) continue ;; esac
    if [ "$kind" = reject ]; then
        "$AMK" validate "$DATA/$prog" > "$tmp/v.txt" 2>&1; rc=$?
        if [ "$rc" = 1 ] && grep -q '^rejected: ' "$tmp/v.txt"; then ok; else bad "validate $prog: exit $rc, want 1 (rejected)"; cat "$tmp/v.txt"; fi
        continue
    fi
    if "$AMK" validate "$DATA/$prog" > "$tmp/v.txt" 2>&1; then ok; else bad "validate $prog rejects it"; cat "$tmp/v.txt"; fi
    kvarg=()
    case "$kv" in
        -) ;;
        @prev) kvarg=(--kv "$prev") ;;
        *) kvarg=(--kv "$DATA/$kv") ;;
    esac
    step=$((step + 1))
    out="$tmp/out$step.safetensors"
    if "$AMK" run "$DATA/$prog" --weights "$DATA/$weights" --inputs "$DATA/$inputs" "${kvarg[@]}" \
           -o "$out" --expect "$DATA/$expected" --rtol "$rtol" > "$tmp/r.txt" 2>&1; then
        ok
    else
        bad "run $prog against $expected (rtol $rtol)"; cat "$tmp/r.txt"
    fi
    prev=$out
done < "$DATA/manifest.txt"

[ "$passed" -ge 20 ] || bad "only $passed checks ran: is tests/data/interop/manifest.txt complete?"
echo "test_interop.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
