#!/usr/bin/env bash
# scripts/gpu_llamacpp.sh PHASE - llama.cpp's CUDA build beside `amk bench` on the lent GPU, for
# issue 38's decode bars: F16 decode (tg128) at depth 0 and 4096 against AMK's step at contexts 128
# and 4096, Llama-3.2-1B and Llama-3-8B shapes, random weights, in one session.
#   phase 1: build llama-bench and write the F16 GGUFs (../shared/bench/llamacpp_baseline.sh 1;
#            about 4.5 minutes)
#   phase 2: on the same warm machine: llama-bench -fa 1 -p 0 -n 128 -d 0,4096 on each F16 GGUF,
#            then `amk bench --ctx 128,4096` on the same shapes, and a table of both
#   phase q: on the same warm machine (after phase 1), issue 39's decode bars: each F16 GGUF
#            quantized to Q4_K_M and Q8_0, llama-bench -fa 1 -p 0 -n 128 on each, then `amk bench
#            --quant Q4_K_M,Q8_0 --ctx 128` (random weights in the same recipes), and a table of both
#   phase p: on the same warm machine (after phase 1), issue 40's prompt bar: each F16 GGUF
#            quantized to Q4_K_M and Q8_0 (llama-quantize), llama-bench -fa 1 -p 512 -n 0 on the
#            three, then `amk bench --quant BF16,Q4_K_M,Q8_0 --prefill 512` (random weights in the
#            same recipes), and a table of both with the ratios (SHAPES=llama3-8b for the 8B alone:
#            about 2 minutes; bench/RESULTS.md run 414)
# Prepare once on the dev machine (.lcp/ is in .git/info/exclude): the steps in the header of
# ../shared/bench/llamacpp_baseline.sh (llama.tgz and the gguf wheel in .lcp/), then
#   cp -r ../shared/bench .lcp/bench
# Device calls: `scripts/gpu_llamacpp.sh 1` then `scripts/gpu_llamacpp.sh 2`, each carrying .lcp
# (AMK_BIN=build/amk, carrying build/amk too, times a dev-machine build instead of building one).
set -u
cd "$(dirname "$0")/.." || exit 1
[ -f .lcp/bench/llamacpp_baseline.sh ] || { echo "no .lcp/bench: prepare .lcp first (header)" >&2; exit 2; }
SHAPES=${SHAPES:-llama3.2-1b llama3-8b}
# The amk that phases 2 and p time: $AMK_BIN (one built on the dev machine with the device image
# and carried, which spares the device ~3 minutes of building), else build-gpu/amk built here
amk_bin() {
  if [ -n "${AMK_BIN:-}" ]; then
    AMK=$AMK_BIN
    [ -x "$AMK" ] || { echo "AMK_BIN=$AMK_BIN is not an executable" >&2; return 1; }
    return 0
  fi
  AMK=build-gpu/amk
  make -j16 BUILD=build-gpu WARN=-Wall build-gpu/amk > /tmp/lcp_amk_build.log 2>&1 || { tail -20 /tmp/lcp_amk_build.log; return 1; }
}
# quantize S Q: the F16 GGUF of shape S quantized to Q by llama-quantize, once a machine
quantize() {
  [ -f "/tmp/lcpw/$1.$2.gguf" ] || "$B/llama-quantize" "/tmp/lcpw/$1.f16.gguf" "/tmp/lcpw/$1.$2.gguf" "$2" 16 > /dev/null 2>&1 ||
    echo "quantize $1 $2 failed"
}
case "${1:-}" in
1) SHAPES="$SHAPES" bash .lcp/bench/llamacpp_baseline.sh 1 ;;
2)
  B=/tmp/lcpw/llama.cpp/build/bin
  [ -x "$B/llama-bench" ] || { echo "no llama-bench: run phase 1 on this machine first" >&2; exit 1; }
  : > /tmp/lcp_tg.txt # why: the table reads the first line of each shape; a rerun must not find the last run's
  for s in $SHAPES; do
    "$B/llama-bench" -m "/tmp/lcpw/$s.f16.gguf" -ngl 99 -fa 1 -p 0 -n 128 -d 0,4096 -r 3 -o md 2>/dev/null |
      grep tg128 | sed "s/^/$s /" | tee -a /tmp/lcp_tg.txt
  done
  amk_bin || exit 1
  "$AMK" bench --iters 50 --ctx 128,4096 --shapes llama3-8b,llama3.2-1b | tee /tmp/lcp_amk.txt | grep -E '^\||ceiling'
  # the table: llama.cpp's tokens/s (the last number before "±" on a tg128 line) as ms/token
  echo
  echo "| shape | depth / ctx | llama.cpp F16 ms/token | AMK bf16 ms/token | llama.cpp / AMK |"
  echo "|---|---|---|---|---|"
  for s in $SHAPES; do
    for dep in 0 4096; do
      ctx=$([ "$dep" = 0 ] && echo 128 || echo 4096)
      tps=$(grep "^$s " /tmp/lcp_tg.txt | grep -E "tg128 @ d$dep |tg128 +\|" | awk -v d="$dep" -F'|' '
        { if ((d == 0 && $0 !~ /@ d/) || (d != 0 && $0 ~ ("@ d" d " "))) { split($(NF-1), a, "±"); print a[1] + 0 } }' | head -1)
      amk=$(grep -E "^\| $s \| $ctx \|" /tmp/lcp_amk.txt | awk -F'|' '{print $4 + 0}')
      awk -v s="$s" -v d="$dep" -v c="$ctx" -v t="$tps" -v a="$amk" 'BEGIN {
        l = t > 0 ? 1000 / t : 0; printf "| %s | %d / %d | %.3f | %.3f | %.3f |\n", s, d, c, l, a, (a > 0 ? l / a : 0) }'
    done
  done
  ;;
p)
  B=/tmp/lcpw/llama.cpp/build/bin
  [ -x "$B/llama-bench" ] || { echo "no llama-bench: run phase 1 on this machine first" >&2; exit 1; }
  : > /tmp/lcp_pp.txt
  for s in $SHAPES; do
    for q in Q4_K_M Q8_0; do quantize "$s" $q; done
    for q in f16 Q8_0 Q4_K_M; do
      "$B/llama-bench" -m "/tmp/lcpw/$s.$q.gguf" -ngl 99 -fa 1 -p 512 -n 0 -r 3 -o md 2>/dev/null | grep pp512 |
        sed "s/^/$s $q /" | tee -a /tmp/lcp_pp.txt
    done
  done
  amk_bin || exit 1
  "$AMK" bench --iters 3 --quant BF16,Q4_K_M,Q8_0 --prefill 512 --shapes "$(echo $SHAPES | tr ' ' ',')" |
    tee /tmp/lcp_amk_pp.txt | grep -E '^\|'
  echo
  echo "| shape | weights | llama.cpp pp512 tok/s | AMK 512-token prompt tok/s | AMK / llama.cpp |"
  echo "|---|---|---|---|---|"
  for s in $SHAPES; do
    for q in f16 Q8_0 Q4_K_M; do
      aq=$([ "$q" = f16 ] && echo BF16 || echo "$q")
      tps=$(grep "^$s $q " /tmp/lcp_pp.txt | awk -F'|' '{ split($(NF-1), a, "±"); print a[1] + 0 }' | head -1)
      amk=$(grep -E "^\| $s $aq \| 512 \|" /tmp/lcp_amk_pp.txt | awk -F'|' '{print $6 + 0}')
      awk -v s="$s" -v q="$q" -v t="$tps" -v a="$amk" 'BEGIN {
        printf "| %s | %s | %.0f | %.0f | %.2f |\n", s, q, t, a, (t > 0 ? a / t : 0) }'
    done
  done
  ;;
q)
  B=/tmp/lcpw/llama.cpp/build/bin
  [ -x "$B/llama-bench" ] || { echo "no llama-bench: run phase 1 on this machine first" >&2; exit 1; }
  : > /tmp/lcp_tq.txt
  for s in $SHAPES; do
    for q in Q4_K_M Q8_0; do
      quantize "$s" $q
      "$B/llama-bench" -m "/tmp/lcpw/$s.$q.gguf" -ngl 99 -fa 1 -p 0 -n 128 -r 3 -o md 2>/dev/null | grep tg128 |
        sed "s/^/$s $q /" | tee -a /tmp/lcp_tq.txt
    done
  done
  amk_bin || exit 1
  "$AMK" bench --iters 50 --ctx 128 --quant Q4_K_M,Q8_0 --shapes "$(echo $SHAPES | tr ' ' ',')" |
    tee /tmp/lcp_amk_tq.txt | grep -E '^\||ceiling'
  echo
  echo "| shape | weights | llama.cpp tg128 ms/token | AMK ms/token (ctx 128) | llama.cpp / AMK |"
  echo "|---|---|---|---|---|"
  for s in $SHAPES; do
    for q in Q4_K_M Q8_0; do
      tps=$(grep "^$s $q " /tmp/lcp_tq.txt | awk -F'|' '{ split($(NF-1), a, "±"); print a[1] + 0 }' | head -1)
      amk=$(grep -E "^\| $s $q \| 128 \|" /tmp/lcp_amk_tq.txt | awk -F'|' '{print $4 + 0}')
      awk -v s="$s" -v q="$q" -v t="$tps" -v a="$amk" 'BEGIN {
        l = t > 0 ? 1000 / t : 0; printf "| %s | %s | %.3f | %.3f | %.3f |\n", s, q, l, a, (a > 0 ? l / a : 0) }'
    done
  done
  ;;
*) echo "usage: scripts/gpu_llamacpp.sh 1|2|p|q" >&2; exit 2 ;;
esac
