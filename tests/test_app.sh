#!/usr/bin/env bash
# tests/test_app.sh - examples/generate.c as `make app` builds it ($GENERATE, default
# build/generate; $GENERATE_IMAGES 1 where the Makefile embedded the device images, 0 where there
# was no nvcc): it generates from the default model, and its first line on stderr names the backend
# and why. With the images it must not say it holds none: on a GPU it runs there ("backend cuda"),
# without one the reason is the driver's ("no usable GPU: ..."). Without them it says so.
# Last line: "test_app.sh: N passed, N failed".
set -u
G=${GENERATE:-build/generate}
IMAGES=${GENERATE_IMAGES:-1}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d "${TMPDIR:-/tmp}/amk-app.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
check() { # check CONDITION WHAT
  if eval "$1"; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: $2" >&2
    printf '  stdout: %s\n  stderr: %s\n' "$(head -c 400 "$TMP/out")" "$(head -c 400 "$TMP/err")" >&2
  fi
}

"$G" "$MODEL" "The capital of France is" >"$TMP/out" 2>"$TMP/err"
rc=$?
first=$(head -n 1 "$TMP/err")
check '[ "$rc" = 0 ]' "generate exits 0 (exit $rc)"
check 'case "$first" in "backend cpu ("*|"backend cuda ("*) true ;; *) false ;; esac' \
  "the first line on stderr names the backend: '$first'"
if [ "$IMAGES" = 1 ]; then
  check 'case "$first" in *"no device image"*) false ;; *) true ;; esac' \
    "built with the device images, it does not say it holds none: '$first'"
else
  check 'case "$first" in *"no device image in this program"*) true ;; *) false ;; esac' \
    "built without nvcc, it says it holds no device image: '$first'"
fi
check '[ "$(head -c 24 "$TMP/out")" = "The capital of France is" ] && [ "$(wc -c < "$TMP/out")" -gt 30 ]' \
  "it prints the prompt and generated text"

echo "test_app.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
