#!/usr/bin/env bash
# scripts/gpu_dtypes.sh PHASE - the GPU's default dtypes (amk_llm's AMK_DTYPE_AUTO: BF16 on the GPU)
# and the F16 prompt on the tensor cores, in three calls on one warm machine: the 98 MB model
# travels in thirds (.model_parts/{a,b,c}, see scripts/gpu_run.sh), one a call, beside the
# binaries built on the dev machine (.gpu_carry/bins.tar.xz: build/amk, build/amk_old (the same
# with the previous tree's prefill cubin: the A/B of the prompt), build/gpu/test_gpu,
# build/gpu/test_sweep, build/test_llama_gpu).
#   phase a (carry .gpu_carry .model_parts/a): test_gpu (FULL=1: all of it; else its prompt cases),
#            the prompt's bench, BF16 and F16, new and old prefill image
#   phase b (carry .gpu_carry .model_parts/b): all of test_gpu, the builder sweep
#   phase c (carry .gpu_carry .model_parts/c): the golden check (F32) and test_llama's GPU cases;
#            `amk generate` of the real SmolLM2 Q4_1: the default (BF16 activations) against
#            --act-dtype F32, each against the reference VM's text; --dtype F16
#   phase d (carry .gpu_carry): the prompt's three programs and the F16 prompt's vector paths: test
#            cases, the prompt's bench at lengths that pick each program
#   phase e (carry .gpu_carry): the prompt's BF16 bench again and the 8B Q4_K_M's device memory
#   phase f (carry .gpu_carry): the last tree: the tests, the benches, the 8B Q4_K_M on an emulated
#            8 GB (and smaller) GPU
#   phase g (carry .gpu_carry): the smaller prefill sets under AMK_CUDA_MEM_CAP, the prompt's GPU cases
#   phase h (carry .gpu_carry): the prompt attention's tiling, amk builds of other builders (VARIANTS)
# Logs in $OUT; a table last.
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/gpu_lib.sh
. scripts/gpu_lib.sh # run NAME CMD... and rows
gpu_start
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
case "${1:-a}" in
a)
  cp .model_parts/a/part00 /tmp/amk_model_part00
  if [ "${FULL:-0}" = 1 ]; then run test_gpu timeout 900 build/gpu/test_gpu
  else run test_gpu_pf timeout 600 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program; fi
  grep -E "FAIL|failed:" "$OUTD"/test_gpu*.log | head -20
  SH=${SHAPES:-llama3-8b,llama3.2-1b}
  run pf_new timeout 400 build/amk bench --shapes "$SH" --quant BF16,F16 --prefill 128,512,2048
  run pf_old timeout 400 build/amk_old bench --shapes "$SH" --quant BF16,F16 --prefill 128,512,2048
  # a long prompt in longer chunks: what chunks of 1024 and 2048 rows give the 8B's 2048 tokens
  run pf_rows1024 timeout 300 build/amk bench --shapes llama3-8b --prefill 2048 --prefill-rows 1024
  run pf_rows2048 timeout 300 build/amk bench --shapes llama3-8b --prefill 2048 --prefill-rows 2048
  for f in pf_new pf_old pf_rows1024 pf_rows2048; do echo "== $f"; grep -E '^\| [a-z]' "$OUTD/$f.log" | head -20; done
  ;;
b)
  cp .model_parts/b/part01 /tmp/amk_model_part01
  run test_gpu timeout 400 build/gpu/test_gpu
  run test_sweep timeout 500 build/gpu/test_sweep
  grep -E "FAIL|failed:" "$OUTD"/test_gpu.log "$OUTD"/test_sweep.log | head -20
  ;;
c)
  mkdir -p models
  cat /tmp/amk_model_part00 /tmp/amk_model_part01 .model_parts/c/part02 > $M
  sha256sum $M
  run golden env AMK_GOLDEN_FULL=1 timeout 400 build/test_llama_gpu
  grep -E 'golden|FAIL' "$OUTD/golden.log" | head
  long_p=$(for _ in $(seq 46); do printf 'The quick brown fox jumps over the lazy dog. '; done)
  # the default against F32 activations, each against the reference VM with the same dtypes
  run gen_default timeout 120 build/amk generate -m $M -n 64 -p "$long_p"
  run gen_f32 timeout 120 build/amk generate -m $M -n 64 --act-dtype F32 -p "$long_p"
  run gen_f16 timeout 120 build/amk generate -m $M -n 64 --dtype F16 -p "$long_p"
  run gen_bf16 timeout 120 build/amk generate -m $M -n 64 --dtype BF16 -p "$long_p"
  # the reference VM's three at once (a core each)
  timeout 600 build/amk generate --cpu -m $M -n 64 --act-dtype BF16 -p "$long_p" > "$OUTD/cpu_bf16.log" 2>&1 &
  timeout 600 build/amk generate --cpu -m $M -n 64 -p "$long_p" > "$OUTD/cpu_f32.log" 2>&1 &
  timeout 600 build/amk generate --cpu -m $M -n 64 --dtype F16 -p "$long_p" > "$OUTD/cpu_f16.log" 2>&1 &
  wait
  for p in default:cpu_bf16 f32:cpu_f32 f16:cpu_f16; do
    g=gen_${p%%:*}; c=${p##*:}
    a=$(grep -v '^load\|backend\|prompt chunks\|^amk:' "$OUTD/$g.log"); b=$(grep -v '^load\|backend\|prompt chunks\|^amk:' "$OUTD/$c.log")
    [ -n "$b" ] && [ "$a" = "$b" ] && rows+=("$g = $c: same text") || rows+=("$g DIFFERS from $c (or no text)")
  done
  for f in gen_default gen_f32 gen_f16 gen_bf16; do echo "== $f"; grep -E 'activations|tok/s' "$OUTD/$f.log" | cut -c1-300; done
  ;;
d)
  # the prompt's programs of 2048, 512 and 128 rows (amk_llm's default now) and the F16 prompt's
  # vector paths: test_gpu's prompt cases, test_llama's GPU cases (three programs on the GPU),
  # the prompt's bench at lengths that pick each program and the padded longest chunk
  run test_gpu_pf timeout 600 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program test_elementwise
  # its GPU cases that need no model file (the golden check is phase c's)
  for t in test_prefill_cuda test_family_cuda test_auto_dtypes_cuda; do run "llama_$t" env AMK_TEST_ONLY=$t timeout 300 build/test_llama_gpu; done
  run test_sweep timeout 500 build/gpu/test_sweep
  grep -E "FAIL|failed:" "$OUTD"/test_gpu_pf.log "$OUTD"/llama_*.log "$OUTD"/test_sweep.log | head -20
  run pf_8b timeout 400 build/amk bench --shapes llama3-8b --quant BF16 --prefill 128,512,1000,1600,2048,4096
  run pf_f16 timeout 400 build/amk bench --shapes llama3-8b,llama3.2-1b --quant F16,Q4_K_M --prefill 128,512,2048
  run pf_1b timeout 300 build/amk bench --shapes llama3.2-1b --quant BF16 --prefill 128,512,2048
  run pf_128 timeout 300 build/amk bench --shapes llama3-8b --quant BF16 --prefill 128 --prefill-rows 128
  for f in pf_8b pf_f16 pf_1b pf_128; do echo "== $f"; grep -E '^\| [a-z]|a chunk of|per opcode|until the' "$OUTD/$f.log" | cut -c1-400; done
  ;;
e)
  # the binary ops' vector path out of the VM's line (the prefill VM's spills back to before the
  # F16 path): the prompt's BF16 bench against runs 449/452, and the device memory in all of the
  # 8B Q4_K_M with a 4096-token cache (its step and three prefill programs)
  run test_gpu_pf timeout 600 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program test_elementwise
  grep -E "FAIL|failed:" "$OUTD"/test_gpu_pf.log | head
  run pf_bf16 timeout 400 build/amk bench --shapes llama3-8b,llama3.2-1b --quant BF16,F16 --prefill 128,512,2048
  run pf_q4 timeout 400 build/amk bench --shapes llama3-8b --quant Q4_K_M --prefill 512,4096
  # variants of the prompt's attention body where VARIANTS names amk builds (build/amk_V: another
  # prefill cubin), two rounds interleaved with build/amk
  for round in 1 2; do
    for v in "" ${VARIANTS:-}; do
      b=build/amk${v:+_$v}
      [ -x "$b" ] && run "ab_${v:-base}_$round" timeout 200 $b bench --shapes llama3-8b --quant BF16 --prefill 512,2048
    done
  done
  for f in pf_bf16 pf_q4 $(cd "$OUTD" && ls ab_*.log 2>/dev/null | sed 's/\.log$//'); do [ -f "$OUTD/$f.log" ] || continue; echo "== $f"; grep -E '^\| [a-z]|a chunk of|per opcode' "$OUTD/$f.log" | cut -c1-300; done
  ;;
f)
  # the session's last tree: all of test_gpu, the sweep, test_llama's GPU cases; the prompt's
  # bench; decode as before; the 8B Q4_K_M with a 4096-token cache on an emulated smaller GPU
  # (AMK_CUDA_MEM_CAP): which prefill programs it keeps
  run test_gpu timeout 400 build/gpu/test_gpu
  run test_sweep timeout 500 build/gpu/test_sweep
  for t in test_prefill_cuda test_family_cuda test_auto_dtypes_cuda; do run "llama_$t" env AMK_TEST_ONLY=$t timeout 300 build/test_llama_gpu; done
  grep -E "FAIL|failed:" "$OUTD"/test_gpu.log "$OUTD"/llama_*.log "$OUTD"/test_sweep.log | head -20
  run pf timeout 400 build/amk bench --shapes llama3-8b,llama3.2-1b --quant BF16 --prefill 128,512,2048
  run dec timeout 400 build/amk bench --shapes llama3-8b --quant BF16,Q4_K_M --ctx 128 --iters 30
  for cap in 0 8000000000 7500000000 7000000000; do
    c=$cap; [ "$cap" = 0 ] && c=
    run "cap_$cap" env AMK_CUDA_MEM_CAP="$c" timeout 300 build/amk bench --shapes llama3-8b --quant Q4_K_M --prefill 128,512,4096 --iters 2
  done
  for f in pf dec cap_0 cap_8000000000 cap_7500000000 cap_7000000000; do
    echo "== $f"; grep -E '^\| [a-z]|a chunk of|note|amk bench:.*prefill:' "$OUTD/$f.log" | grep -v warm-up | cut -c1-400
  done
  ;;
g)
  # the smaller prefill sets on an emulated smaller GPU, and the GPU cases of the last tree
  run test_gpu_pf timeout 600 build/gpu/test_gpu test_attention_prefill test_fused_gemv_rows test_prefill_program test_elementwise
  for t in test_prefill_cuda test_auto_dtypes_cuda; do run "llama_$t" env AMK_TEST_ONLY=$t timeout 300 build/test_llama_gpu; done
  for cap in 7500000000 7000000000; do
    run "cap_$cap" env AMK_CUDA_MEM_CAP="$cap" timeout 300 build/amk bench --shapes llama3-8b --quant Q4_K_M --prefill 128,512,4096 --iters 2
    echo "== cap_$cap"; grep -E '^\| [a-z]|a chunk of|note' "$OUTD/cap_$cap.log" | grep -v warm-up | cut -c1-600
  done
  ;;
h)
  # the prompt attention's tiles a SM in long chunks (VARIANTS: amk builds of other builders), two
  # rounds interleaved with build/amk
  for round in 1 2; do
    for v in "" ${VARIANTS:-}; do
      b=build/amk${v:+_$v}
      [ -x "$b" ] && run "tiles_${v:-base}_$round" timeout 200 $b bench --shapes llama3-8b,llama3.2-1b --quant BF16 --prefill 2048,4096 --iters 3
    done
  done
  for f in $(cd "$OUTD" && ls tiles_*.log 2>/dev/null | sed 's/\.log$//'); do
    echo "== $f"; grep -E '^\| [a-z]|a chunk of|per opcode' "$OUTD/$f.log" | cut -c1-300
  done
  ;;
esac
echo
printf '%s\n' "${rows[@]}"
