#!/usr/bin/env bash
# Runs every host test binary given on the command line, adds up their
# "<file>: N passed, N failed" lines and ends with the total "N passed, N failed".
# The tests run TEST_JOBS at a time (default: a CPU each; they share no files), and their results
# are read in the order given.
set -u
passed=0; failed=0; broken=0
jobs_max=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amk-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
i=0
for t in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n 2>/dev/null || sleep 0.2; done
  ( "$t" > "$tmp/$i.out" 2>&1; echo $? > "$tmp/$i.rc" ) &
  i=$((i + 1))
done
wait
i=0
for t in "$@"; do
  out=$(cat "$tmp/$i.out"); rc=$(cat "$tmp/$i.rc" 2>/dev/null || echo 1)
  i=$((i + 1))
  line=$(printf '%s\n' "$out" | grep -E ': [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 30
    echo "$t: crashed or printed no summary (exit $rc)"; broken=$((broken + 1)); continue
  fi
  p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/')
  f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/')
  if [ "$f" != 0 ] || [ "$rc" != 0 ]; then printf '%s\n' "$out" | grep -v ' passed, ' | tail -n 40; fi
  [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
  echo "$line"
  passed=$((passed + p)); failed=$((failed + f))
done
failed=$((failed + broken))
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
