#!/usr/bin/env bash
# scripts/gpu_run.sh PHASE - the lead's GPU session in two calls (the 98 MB model travels in two
# halves, since one call carries at most 64 MiB; the machine keeps /tmp between warm calls).
#   phase a: stash the first half; build; GPU op tests; the builder sweep (tests/gpu/test_sweep.c);
#            amk bench; HF transformers baseline
#   phase b: join the model; golden greedy check on CUDA vs HF and the reference VM; generate;
#            compute-sanitizer on a full SmolLM2 decode step and a prefill chunk, the GEMM tile and decode attention tests,
#            and SmolLM2's bf16 steps (single and chained) under racecheck
# The halves (after scripts/fetch_model.sh; .model_parts/ listed in .git/info/exclude so that only
# the carried half travels):
#   mkdir -p .model_parts/a .model_parts/b && split -n 2 -d -a 2 models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/part
#   mv /tmp/part00 .model_parts/a/ && mv /tmp/part01 .model_parts/b/
# then call phase a carrying .model_parts/a and phase b carrying .model_parts/b on the same machine.
# Logs and traces go to $OUT; a short table is printed last.
set -u
cd "$(dirname "$0")/.."
B=build-gpu
# why WARN: the GPU machine has a newer gcc whose extra warnings are not errors here (CI and the
# dev machine build with -Werror on gcc 12)
MK="make -j16 BUILD=$B WARN=-Wall"
OUTD=${OUT:-/tmp/amk-out}
mkdir -p "$OUTD"
# shellcheck source=scripts/gpu_lib.sh
. scripts/gpu_lib.sh # run NAME CMD... and rows
gpu_header
# why the compiler's version: the VM sits at the register cap, and this host's build has spilled
# code the dev machine's build did not (bench/RESULTS.md runs 323, 326: the same nvcc there)
nvcc --version | tail -n 2 | head -n 1
case "${1:-a}" in
a)
  cp .model_parts/a/part00 /tmp/amk_model_part00
  run build $MK $B/amk $B/gpu/test_gpu $B/gpu/test_sweep
  run test_gpu $B/gpu/test_gpu
  run test_sweep $B/gpu/test_sweep
  run bench $B/amk bench --iters 50 --trace "$OUTD/trace"
  # quantized weights (issue 39): the three shapes in llama.cpp's recipes, context 128
  run bench_quant $B/amk bench --iters 30 --ctx 128 --quant Q8_0,Q4_K_M,Q4_0,Q4_1
  [ "${SKIP_HF:-0}" = 1 ] || run hf_baseline python3 bench/hf_baseline.py "$OUTD/hf_baseline.json"
  tail -n 40 "$OUTD/bench.log"
  grep -E '^\||^read ceiling' "$OUTD/bench_quant.log"
  [ -f "$OUTD/hf_baseline.log" ] && tail -n 15 "$OUTD/hf_baseline.log"
  ls "$OUTD"/trace.* 2>/dev/null | head -3 | while read f; do gzip -f "$f"; done
  rm -f "$OUTD"/trace.*.json
  ;;
b)
  mkdir -p models
  cat /tmp/amk_model_part00 .model_parts/b/part01 > models/SmolLM2-135M-Instruct.Q4_1.gguf
  sha256sum models/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -x $B/amk ] || run build $MK $B/amk
  run golden $MK test-gpu-llama
  # the file's own types (Q4_1 matrices, a Q8_0 embedding) with F32 activations (the reference VM's
  # default) and with the GPU's default BF16 ones, each on the GPU and the reference VM: the same text
  P="The history of the printing press"
  run generate $B/amk generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf --act-dtype F32 -n 48 -p "$P" --trace "$OUTD/smollm2_trace.json"
  run generate_chat $B/amk generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf --chat -n 48 -p "What is the capital of France? Answer in one sentence."
  run generate_cpu $B/amk generate --cpu -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 48 -p "$P"
  run generate_default $B/amk generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 48 -p "$P"
  run generate_default_cpu $B/amk generate --cpu --act-dtype BF16 -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 48 -p "$P"
  cpu_text=$(grep -v '^load\|backend' "$OUTD/generate_cpu.log" | sed '/^$/d')
  # why the sed: --trace's line (stderr) lands right after the text, which ends without a newline
  [ -n "$cpu_text" ] && [ "$(grep -v '^load\|backend' "$OUTD/generate.log" | sed 's/trace: .*$//' | sed '/^$/d')" = "$cpu_text" ] &&
    rows+=("generate (as stored, F32) = generate_cpu: same text") || rows+=("generate (as stored, F32) DIFFERS from generate_cpu (or no text)")
  cpu_text=$(grep -v '^load\|backend' "$OUTD/generate_default_cpu.log" | sed '/^$/d')
  [ -n "$cpu_text" ] && [ "$(grep -v '^load\|backend' "$OUTD/generate_default.log" | sed '/^$/d')" = "$cpu_text" ] &&
    rows+=("generate (GPU default: as stored, BF16) = its reference VM run: same text") ||
    rows+=("generate (GPU default: as stored, BF16) DIFFERS from its reference VM run (or no text)")
  run memcheck timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $B/amk generate -q --act-dtype F32 -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 2 -p "Hello"
  # a prefill launch under memcheck (issue 40): the prompt's 6 tokens as a padded chunk of 8 rows,
  # the GPU's default dtypes (the Q4_1 blocks dequantized for the tensor cores)
  run memcheck_prefill timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $B/amk generate -q -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 2 --prefill-rows 8 -p "The history of the printing press"
  # bf16 matrices and caches (the lean attention's tensor-copy form; the golden check is F32): the
  # same text on CUDA, chained and a launch a token, as on the reference VM
  G="generate --dtype BF16 --ctx 256 -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 64"
  # shellcheck disable=SC2086 # $G: words
  run generate_bf16 $B/amk $G -p "The history of the printing press"
  # shellcheck disable=SC2086
  run generate_bf16_single $B/amk $G --chain 1 -p "The history of the printing press"
  # shellcheck disable=SC2086
  run generate_bf16_cpu $B/amk $G --cpu -p "The history of the printing press"
  # the text alone (not the load and rate lines); an empty reference text is no match
  cpu_text=$(grep -v '^load\|backend' "$OUTD/generate_bf16_cpu.log")
  for f in bf16 bf16_single; do
    [ -n "$cpu_text" ] && [ "$(grep -v '^load\|backend' "$OUTD/generate_$f.log")" = "$cpu_text" ] &&
      rows+=("generate_$f = generate_bf16_cpu: same text") || rows+=("generate_$f DIFFERS from generate_bf16_cpu (or no text)")
  done
  # a prompt of ~460 tokens in BF16: the fitted cache (one KV split of ~490 rows) is past the lean
  # attention's window, so AMK's choice does not fold (issue 38's refusal); the same text as the CPU
  long_p=$(for i in $(seq 46); do printf 'The quick brown fox jumps over the lazy dog. '; done)
  L="generate --dtype BF16 -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 32"
  # shellcheck disable=SC2086
  run generate_long_bf16 $B/amk $L -p "$long_p"
  # shellcheck disable=SC2086
  run generate_long_bf16_cpu $B/amk $L --cpu -p "$long_p"
  cpu_text=$(grep -v '^load\|backend' "$OUTD/generate_long_bf16_cpu.log")
  [ -n "$cpu_text" ] && [ "$(grep -v '^load\|backend' "$OUTD/generate_long_bf16.log")" = "$cpu_text" ] &&
    rows+=("generate_long_bf16 = generate_long_bf16_cpu: same text") || rows+=("generate_long_bf16 DIFFERS from generate_long_bf16_cpu (or no text)")
  run memcheck_bf16 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $B/amk generate -q --dtype BF16 --ctx 256 -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 2 -p "Hello"
  # why --ctx 1024: two KV splits, the second past the position, so the step also runs an
  # attention task with an empty window and the COMBINE
  run racecheck timeout 280 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 $B/amk generate -q --timeout 240000 --ctx 1024 -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 1 -p "Hi"
  # the sanitizer runs of test_gpu's cases take the full image only (AMK_CUDA_IMAGE=full: test_gpu
  # runs each case on both images otherwise, twice the time under the tools)
  # the tensor-core GEMM path (shared-memory ring, named barriers) under both tools
  [ -x $B/gpu/test_gpu ] || run build_test $MK $B/gpu/test_gpu
  run memcheck_gemm env AMK_CUDA_IMAGE=full timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $B/gpu/test_gpu test_gemm_tile
  run racecheck_gemm env AMK_CUDA_IMAGE=full timeout 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 $B/gpu/test_gpu test_gemm_tile
  # the tensor-core decode attention (bf16 caches; the real model's step runs F32 caches)
  run memcheck_attn env AMK_CUDA_IMAGE=full timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $B/gpu/test_gpu test_attention_decode
  run racecheck_attn env AMK_CUDA_IMAGE=full timeout 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 $B/gpu/test_gpu test_attention_decode
  # the lean decode tiles and ATTENTION_O (bulk-copied rows, named barriers, the error path) under
  # memcheck (the model's step above runs ATTENTION_O only at contexts of one KV split)
  run memcheck_lean env AMK_CUDA_IMAGE=full timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $B/gpu/test_gpu test_fused test_lean_errors test_attention_o
  # the lean forms under racecheck (those cases, then SmolLM2's shape in bf16, single and chained
  # steps) on a build whose lean tiles meet at block barriers: racecheck reports correct code after
  # named barriers that a subset of the warps meets repeatedly (bench/race_probe.cu, bench/RESULTS.md
  # run 278; the lean cases on the shipped build: 4 such reports in some runs, run 302)
  run build_san make -j16 BUILD=build-san WARN=-Wall NVCC_FLAGS="-O3 -fmad=false -lineinfo -DAMK_NAMED_BARRIERS=0 -Xptxas -v" build-san/gpu/test_gpu
  run racecheck_lean env AMK_CUDA_IMAGE=full timeout 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 build-san/gpu/test_gpu test_fused test_lean_errors test_attention_o
  run racecheck_step env AMK_TEST_SLOW=45 AMK_TEST_LLM_CHAIN=single:2 timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 build-san/gpu/test_gpu test_llm_chain
  run racecheck_chain env AMK_TEST_SLOW=45 AMK_TEST_LLM_CHAIN=chain:3 timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 build-san/gpu/test_gpu test_llm_chain
  for f in generate generate_chat generate_cpu generate_default generate_default_cpu; do echo "--- $f"; tail -n 4 "$OUTD/$f.log"; done
  grep golden "$OUTD/golden.log"
  tail -n 6 "$OUTD/memcheck.log" "$OUTD/memcheck_bf16.log" "$OUTD/racecheck.log" "$OUTD/memcheck_gemm.log" "$OUTD/racecheck_gemm.log" \
    "$OUTD/memcheck_attn.log" "$OUTD/racecheck_attn.log" "$OUTD/memcheck_lean.log" "$OUTD/racecheck_lean.log" \
    "$OUTD/racecheck_step.log" "$OUTD/racecheck_chain.log"
  gzip -f "$OUTD/smollm2_trace.json" 2>/dev/null
  ;;
esac
echo
for r in "${rows[@]}"; do echo "$r"; done
