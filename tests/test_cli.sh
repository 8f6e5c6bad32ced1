#!/usr/bin/env bash
# tests/test_cli.sh - drives the amk command ($AMK, default build/amk) over tests/data/cli:
# exit codes, messages, fmt stability, info fields, runs on the reference VM with safetensors
# in and out (made here byte by byte). Last line: "test_cli.sh: N passed, N failed".
set -u
AMK=${AMK:-build/amk}
DATA=tests/data/cli
TMP=$(mktemp -d "${TMPDIR:-/tmp}/amk-cli.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

# amk ARGS...: runs the tool; sets rc, out (stdout) and err (stderr).
amk() {
  "$AMK" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
  rc=$?
  out=$(cat "$TMP/stdout")
  err=$(cat "$TMP/stderr")
}
pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1" >&2
  printf '  stdout: %s\n  stderr: %s\n' "$(printf '%s' "$out" | head -c 600)" "$(printf '%s' "$err" | head -c 600)" >&2
}
expect_rc() { if [ "$rc" = "$1" ]; then pass; else fail "$2: exit $rc, wanted $1"; fi; }
expect_out() { case "$out" in *"$1"*) pass ;; *) fail "$2: stdout lacks '$1'" ;; esac; }
expect_err() { case "$err" in *"$1"*) pass ;; *) fail "$2: stderr lacks '$1'" ;; esac; }
expect_true() { if eval "$1"; then pass; else fail "$2"; fi; }

# le64 N: N as 8 little-endian bytes.
le64() {
  local i
  for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"; done
}
# mk_st OUT HEADER: a safetensors file with the header padded to 8 bytes; data bytes from stdin.
mk_st() {
  local out=$1 header=$2
  while [ $(((8 + ${#header}) % 8)) != 0 ]; do header="$header "; done
  { le64 ${#header}; printf '%s' "$header"; cat; } >"$out"
}
# rep PATTERN COUNT: printf PATTERN COUNT times.
rep() { local i; for ((i = 0; i < $2; i++)); do printf "$1"; done; }
F32_ONE='\x00\x00\x80\x3f'
F16_ONE='\x00\x3c'
# first_values NAME: the values printed for output NAME by `amk run` without -o.
first_values() { printf '%s\n' "$out" | sed -n "s/^$1: [^=]*= //p"; }

# ---- help and usage ----------------------------------------------------------------------
amk --help
expect_rc 0 "amk --help"
for c in validate fmt info run build generate; do expect_out "  $c " "amk --help lists $c"; done
for c in validate fmt info run; do
  amk "$c" --help
  expect_rc 0 "amk $c --help"
  expect_out "usage: amk $c" "amk $c --help"
done
amk help run
expect_rc 0 "amk help run"
expect_out "--order-seed" "amk help run"
amk
expect_rc 2 "amk without a command"
amk frobnicate
expect_rc 2 "unknown command"
expect_err "unknown command 'frobnicate'" "unknown command"
amk bench --pos x
expect_rc 2 "bench bad --pos"
expect_err "bad --pos 'x'" "bench bad --pos"
amk bench --quant Q4_K_M,Q9
expect_rc 2 "bench bad --quant"
expect_err "bad --quant 'Q9'" "bench bad --quant"

# ---- validate ------------------------------------------------------------------------------
amk validate "$DATA/valid.json"
expect_rc 0 "validate valid"
expect_out "accepted: 0 errors" "validate valid"
amk validate "$DATA/race.json"
expect_rc 1 "validate race"
expect_out "RACE_READ" "validate race"
expect_out "rejected: " "validate race"
amk validate "$DATA/malformed.json"
expect_rc 2 "validate malformed"
expect_err "malformed.json:7:" "validate malformed names FILE:LINE"
expect_err "/buffers/0/shape" "validate malformed names the JSON path"
amk validate "$TMP/does-not-exist.json"
expect_rc 2 "validate missing file"
amk validate --bogus "$DATA/valid.json"
expect_rc 2 "validate unknown flag"
expect_err "unknown option '--bogus'" "validate unknown flag"
expect_err "usage: amk validate" "validate unknown flag prints usage"
amk validate "$DATA/valid.json" "$DATA/race.json"
expect_rc 2 "validate two files"

# ---- fmt -----------------------------------------------------------------------------------
"$AMK" fmt "$DATA/valid.json" >"$TMP/fmt1.json" 2>"$TMP/stderr"
rc=$?
expect_rc 0 "fmt valid"
"$AMK" fmt "$TMP/fmt1.json" >"$TMP/fmt2.json" 2>"$TMP/stderr"
expect_true 'cmp -s "$TMP/fmt1.json" "$TMP/fmt2.json" && [ -s "$TMP/fmt1.json" ]' "fmt of fmt output is byte-identical"
amk fmt "$DATA/valid.json" -o "$TMP/fmt3.json"
expect_rc 0 "fmt -o"
expect_true 'cmp -s "$TMP/fmt1.json" "$TMP/fmt3.json"' "fmt -o writes what stdout gets"
amk validate "$TMP/fmt1.json"
expect_rc 0 "fmt output still validates"
amk fmt "$DATA/malformed.json"
expect_rc 2 "fmt malformed"
amk fmt "$DATA/valid.json" -o
expect_rc 2 "fmt -o without a value"

# ---- info ----------------------------------------------------------------------------------
amk info "$DATA/valid.json"
expect_rc 0 "info valid"
expect_out "tasks: 3 (RMSNORM 1, GEMV_TILE 1, ADD 1)" "info tasks"
expect_out "buffers: 6 (WEIGHT 2, ACTIVATION 2, IO_INPUT 1, IO_OUTPUT 1)" "info buffers"
expect_out "counters: 3" "info counters"
expect_out "weight_bytes: 576 (576 B)" "info weight bytes"
expect_out "critical_path: 3" "info critical path"
expect_out "sms_used: unassigned" "info sms"
expect_out "validation: accepted: 0 errors" "info validation"
amk info "$DATA/race.json"
expect_rc 0 "info race"
expect_out "validation: rejected: " "info race validation"
amk info "$DATA/malformed.json"
expect_rc 2 "info malformed"
amk info "$DATA/paged.json"
expect_rc 0 "info paged"
expect_out "target: h100 (sm_90, 132 SMs)" "info paged target"
expect_out "sms_used: 2 of 132" "info paged sms"
expect_out "pages: 2 (128 bytes: scratch 128, on-chip 0)" "info paged pages"
expect_out "scratch_bytes: 128" "info paged scratch"
expect_out "validation: accepted: 0 errors" "info paged validation"

# ---- run: weights and inputs from files -------------------------------------------------------
rep "$F32_ONE" 16 | mk_st "$TMP/x.st" '{"x":{"dtype":"F32","shape":[1,16],"data_offsets":[0,64]}}'
{ rep "$F32_ONE" 16; rep "$F16_ONE" 256; } | mk_st "$TMP/w.st" \
  '{"__metadata__":{"format":"pt"},"norm.weight":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"proj.weight":{"dtype":"F16","shape":[16,16],"data_offsets":[64,576]}}'
amk run "$DATA/valid.json" --weights "$TMP/w.st" --inputs "$TMP/x.st"
expect_rc 0 "run with files"
# out = x + W @ rmsnorm(x) = 1 + 16 / sqrt(1 + 1e-5)
expect_out "out: F32 [1, 16] = 16.9999 16.9999" "run with files computes the residual"

# a missing weight names it, its buffer and the file
rep "$F32_ONE" 16 | mk_st "$TMP/w_partial.st" '{"norm.weight":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}}'
amk run "$DATA/valid.json" --weights "$TMP/w_partial.st" --inputs "$TMP/x.st"
expect_rc 2 "run missing weight"
expect_err "weight 'proj.weight' (buffer 2) not found in $TMP/w_partial.st" "run missing weight message"
amk run "$DATA/valid.json" --inputs "$TMP/x.st"
expect_rc 2 "run without weights"
expect_err "not found: no --weights file given" "run without weights message"

# dtype and shape mismatches name both sides
rep "$F16_ONE" 16 | mk_st "$TMP/x16.st" '{"x":{"dtype":"F16","shape":[1,16],"data_offsets":[0,32]}}'
amk run "$DATA/valid.json" --weights "$TMP/w.st" --inputs "$TMP/x16.st"
expect_rc 2 "run dtype mismatch"
expect_err "input 'x': file has F16 [1, 16], buffer wants F32 [1, 16]" "run dtype mismatch message"
rep "$F32_ONE" 32 | mk_st "$TMP/x32.st" '{"x":{"dtype":"F32","shape":[1,32],"data_offsets":[0,128]}}'
amk run "$DATA/valid.json" --weights "$TMP/w.st" --inputs "$TMP/x32.st"
expect_rc 2 "run shape mismatch"
expect_err "input 'x': file has F32 [1, 32], buffer wants F32 [1, 16]" "run shape mismatch message"

# a file that is not safetensors is a bad input file, named
amk run "$DATA/valid.json" --weights "$DATA/valid.json" --random 1
expect_rc 2 "run with a corrupt weights file"
expect_err "$DATA/valid.json" "corrupt weights file is named"

# ---- run: random fill, output files, determinism ----------------------------------------------
amk run "$DATA/valid.json" --random 1 -o "$TMP/r1.st"
expect_rc 0 "run --random -o"
expect_out "wrote 1 tensor to $TMP/r1.st" "run --random -o"
amk run "$DATA/valid.json" --random 1 --order-seed 7 -o "$TMP/r2.st"
expect_rc 0 "run --order-seed"
expect_true 'cmp -s "$TMP/r1.st" "$TMP/r2.st" && [ -s "$TMP/r1.st" ]' "same seed, any order: identical output"
amk run "$DATA/paged.json" --random 1 -o "$TMP/r4.st"
expect_true 'cmp -s "$TMP/r1.st" "$TMP/r4.st"' "the paged, SM-assigned program computes the same"
amk run "$DATA/valid.json" --random 2 -o "$TMP/r3.st"
expect_true '! cmp -s "$TMP/r1.st" "$TMP/r3.st"' "another seed: other values"
amk run "$DATA/valid.json" --random 1 -o "$TMP/no-such-dir/r.st"
expect_rc 1 "run -o into a missing directory"

# ---- run --expect: the outputs against a file -----------------------------------------------------
amk run "$DATA/valid.json" --random 1 --expect "$TMP/r1.st"
expect_rc 0 "run --expect its own output"
expect_out ": ok" "run --expect its own output"
amk run "$DATA/valid.json" --random 2 --expect "$TMP/r1.st"
expect_rc 1 "run --expect other values"
expect_out "MISMATCH" "run --expect other values"
expect_err "1 of 1 expected tensor differ" "run --expect other values"
amk run "$DATA/valid.json" --random 2 --expect "$TMP/r1.st" --rtol 1e30
expect_rc 0 "run --expect within a huge --rtol"
amk run "$DATA/valid.json" --random 1 --rtol 1e-4
expect_rc 2 "run --rtol without --expect"
amk run "$DATA/valid.json" --random 1 --expect "$TMP/r1.st" --rtol -1
expect_rc 2 "run --rtol negative"
amk run "$DATA/valid.json" --random 1 --expect "$TMP/s_missing.st"
expect_rc 2 "run --expect a missing file"

# ---- run: the KV cache carries over from one step to the next -----------------------------------
amk run "$DATA/kv_step0.json" --random 5 -o "$TMP/s0.st"
expect_rc 0 "kv step 0 writes its state"
expect_out "wrote 1 tensor" "kv step 0 writes its state"
amk run "$DATA/kv_step0.json" --random 5
step0=$(first_values k_cache)
amk run "$DATA/kv_step1.json" --random 6 --kv "$TMP/s0.st"
expect_rc 0 "kv step 1 reads the state"
step1=$(first_values k_cache)
row0_0=$(echo "$step0" | cut -d' ' -f1-4)
row0_1=$(echo "$step1" | cut -d' ' -f1-4)
row1_0=$(echo "$step0" | cut -d' ' -f5-8)
row1_1=$(echo "$step1" | cut -d' ' -f5-8)
expect_true '[ -n "$row0_0" ] && [ "$row0_0" != "0 0 0 0" ] && [ "$row0_0" = "$row0_1" ]' \
  "kv row 0 carried over ('$row0_0' vs '$row0_1')"
expect_true '[ "$row1_0" = "0 0 0 0" ] && [ -n "$row1_1" ] && [ "$row1_1" != "0 0 0 0" ]' \
  "kv row 1 written by step 1 ('$row1_0' -> '$row1_1')"
amk run "$DATA/kv_step1.json" --random 6
expect_true '[ "$(first_values k_cache | cut -d" " -f1-4)" = "0 0 0 0" ]' "without --kv the cache starts at zero"

# ---- run: rejected programs and bad arguments ---------------------------------------------------
amk run "$DATA/race.json" --random 1
expect_rc 1 "run rejected program"
expect_err "rejected: " "run rejected program"
amk run "$DATA/malformed.json" --random 1
expect_rc 2 "run malformed program"
amk run "$DATA/valid.json" --random 12x
expect_rc 2 "run --random 12x"
expect_err "--random wants an unsigned integer seed, not '12x'" "run --random 12x"
amk run "$DATA/valid.json" --random -1
expect_rc 2 "run --random -1"
amk run "$DATA/valid.json" --random 1 --order-seed 99999999999999999999999
expect_rc 2 "run --order-seed overflow"
amk run "$DATA/valid.json" --weight "$TMP/w.st"
expect_rc 2 "run unknown flag"
expect_err "usage: amk run" "run unknown flag prints usage"
amk run "$DATA/valid.json" --random 1 --random 2
expect_rc 2 "run option given twice"

# ---- build and generate (the Llama path; random weights, no model file needed) --------------------
for c in build generate; do
  amk "$c" --help
  expect_rc 0 "amk $c --help"
  expect_out "usage: amk $c" "amk $c --help"
done
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 -o "$TMP/step.json"
expect_rc 0 "build from a config.json"
expect_err "2 layers" "build summary"
amk validate "$TMP/step.json"
expect_rc 0 "the built step validates"
amk info "$TMP/step.json"
expect_out "ATTENTION_O" "info of the built step (fused; the tiny shape's default is ATTENTION_O)"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --kv-splits 2 --spec-ops -o "$TMP/step_spec.json"
expect_rc 0 "build with the spec's opcodes only"
amk info "$TMP/step_spec.json"
expect_out "ATTENTION_COMBINE" "info of the spec-ops step"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --mlp-steps 1 -o "$TMP/step_mlp1.json"
expect_rc 0 "build with the one-step MLP"
amk info "$TMP/step_mlp1.json"
expect_out "RMSNORM_MLP" "info of the one-step MLP step"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --mlp-steps 2 -o "$TMP/step_mlp2.json"
expect_rc 0 "build with the two-step MLP"
amk info "$TMP/step_mlp2.json"
expect_out "RMSNORM_SWIGLU" "info of the two-step MLP step"
amk build --random-weights "$DATA/tiny_config.json" --mlp-steps 3
expect_rc 2 "--mlp-steps other than 1 or 2 is a usage error"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --prefill 8 -o "$TMP/prefill.json"
expect_rc 0 "build the prefill program of 8 rows"
expect_err "(prefill)" "the prefill build's summary"
amk validate "$TMP/prefill.json"
expect_rc 0 "the prefill program validates"
amk info "$TMP/prefill.json"
expect_out "ATTENTION_PREFILL" "info of the prefill program"
amk build --random-weights "$DATA/tiny_config.json" --ctx 32 --prefill 33
expect_rc 1 "a prefill chunk longer than the cache"
expect_err "longer than the cache" "the long chunk's message"
amk build --random-weights "$DATA/tiny_config.json" --prefill 0
expect_rc 2 "--prefill 0 is a usage error"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --attn-steps 2 -o "$TMP/step_attn2.json"
expect_rc 0 "build with attention and O in two steps"
amk info "$TMP/step_attn2.json"
expect_out "ATTENTION_DECODE" "info of the two-step attention step"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --attn-steps 1 --mlp-steps 2 -o "$TMP/step_attn1.json"
expect_rc 0 "build with ATTENTION_O and the two-step MLP"
amk info "$TMP/step_attn1.json"
expect_out "ATTENTION_O" "info of the ATTENTION_O step"
amk generate --random-weights "$DATA/tiny_config.json" --cpu -n 6 --attn-steps 1 --mlp-steps 2
expect_rc 0 "generate with ATTENTION_O"
amk build --random-weights "$DATA/tiny_config.json" --attn-steps 0
expect_rc 2 "--attn-steps other than 1 or 2 is a usage error"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --attn-steps 1 --mlp-steps 1 --qkv-fold 1 -o "$TMP/step_fold.json"
expect_rc 0 "build with the folded Q/K/V"
expect_true 'grep -q "\"qkv_fold\"" "$TMP/step_fold.json" && grep -q "amk.qkv_fold.0" "$TMP/step_fold.json"' "the folded step's meta and W_cat"
amk validate "$TMP/step_fold.json"
expect_rc 0 "the folded step validates"
amk build --random-weights "$DATA/tiny_config.json" --sms 4 --ctx 32 --attn-steps 2 --qkv-fold 1 -o "$TMP/step_nofold.json"
expect_rc 0 "--qkv-fold 1 without ATTENTION_O builds the step unfolded"
expect_true '! grep -q "qkv_fold" "$TMP/step_nofold.json"' "the unfolded step has no fold"
amk generate --random-weights "$DATA/tiny_config.json" --cpu -n 8 --attn-steps 1 --mlp-steps 1 --qkv-fold 0
expect_rc 0 "generate unfolded"
unfolded=$out
amk generate --random-weights "$DATA/tiny_config.json" --cpu -n 8 --attn-steps 1 --mlp-steps 1 --qkv-fold 1
expect_rc 0 "generate folded"
expect_true '[ -n "$out" ] && [ "$out" = "$unfolded" ]' "folded and unfolded random weights give the same tokens"
amk build --random-weights "$DATA/tiny_config.json" --qkv-fold 2
expect_rc 2 "--qkv-fold other than 0 or 1 is a usage error"
expect_err "bad --qkv-fold '2'" "--qkv-fold's usage error names it"
amk build --random-weights "$DATA/tiny_config.json" --kv-splits 9
expect_rc 2 "--kv-splits above 8 and not a multiple of 8 is a usage error"
amk build --random-weights "$DATA/tiny_config.json" --kv-splits 72
expect_rc 2 "--kv-splits above 64 is a usage error"
amk build --random-weights "$DATA/tiny_config.json" --ctx 64 --kv-splits 16 -o "$TMP/step16.json"
expect_rc 0 "--kv-splits 16: stacked partial sets"
expect_true 'grep -q "\"name\": \"attn_part.0.7\", \"kind\": \"ACTIVATION\", \"dtype\": \"F32\", \"shape\": \[8, 10\]" "$TMP/step16.json"' \
  "16 splits: 8 partial buffers of 2 sets of 4 heads"
amk build --random-weights "$DATA/tiny_config.json" --ctx 64 --kv-splits 16 --spec-ops
expect_rc 2 "--kv-splits 16 with the spec's opcodes (no stacked sets) is refused"
expect_err "the spec's opcodes take 1..8" "--kv-splits 16 --spec-ops says why"
amk build --random-weights gpt-9
expect_rc 2 "build with an unknown shape"
expect_err "unknown shape 'gpt-9'" "build with an unknown shape"
amk build -m "$TMP/nope.gguf"
expect_rc 2 "build with a missing model"
amk build -m x --random-weights smollm2-135m
expect_rc 2 "build with two model sources"
amk generate --random-weights "$DATA/tiny_config.json" -n 5 --ctx 16 --sms 2 -q
expect_rc 0 "generate with random weights"
expect_true '[ "$(printf "%s" "$out" | wc -w)" = 5 ]' "generate prints 5 token ids"
first=$out
amk generate --random-weights "$DATA/tiny_config.json" -n 5 --ctx 16 --sms 2 -q
expect_true '[ "$out" = "$first" ]' "greedy generation is deterministic"
amk generate --random-weights "$DATA/tiny_config.json" -n 5 --ctx 16 --sms 2 -q --temp 1.0 --seed 3
expect_rc 0 "sampled generation"
amk generate --random-weights "$DATA/tiny_config.json" -n 40 --ctx 16 -q
expect_rc 1 "a context longer than the KV cache"
expect_err "does not fit the context of 16 tokens" "context overflow message"
# without --ctx the KV cache fits the prompt plus -n (the real model, on the reference VM)
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$SMOL" ]; then
  amk generate --cpu -m "$SMOL" -n 3 -p "The capital of France is"
  expect_rc 0 "generate with the default model"
  p_tok=$(printf '%s\n' "$err" | sed -n 's/.*| prompt \([0-9]*\) tokens.*/\1/p')
  ctx=$(printf '%s\n' "$err" | sed -n 's/.*, context \([0-9]*\)$/\1/p')
  expect_true '[ -n "$p_tok" ] && [ "$ctx" = "$((p_tok + 3))" ]' "default context = prompt + n ($ctx, $p_tok + 3)"
  amk generate --cpu -m "$SMOL" -n 3 --ctx 64 -p "The capital of France is"
  expect_err "context 64" "--ctx still sets the context"
  expect_err "(Q4_1 210, Q8_0 1, F32 61)" "generate runs the quantized tensors as stored (the weight buffers a dtype)"
  expect_err "activations F32, backend cpu" "the reference VM's default activations are F32, and the summary says so"
  amk generate --cpu -m "$SMOL" -n 1 --ctx 64 --act-dtype BF16 -p "Hi"
  expect_err "activations BF16, backend cpu" "--act-dtype BF16 on the reference VM"
  # the quantized tensors as stored by default; --dtype F32 converts every matrix
  amk build -m "$SMOL" --ctx 64 -o "$TMP/smol.json"
  expect_rc 0 "build the default model as stored"
  expect_err "96.6 MB of weights a token (Q4_1 210, Q8_0 1, F32 61)" "build's summary: the bytes a token and the dtypes"
  expect_true 'grep -q "\"Q4_1\"" "$TMP/smol.json" && grep -q "\"as stored\"" "$TMP/smol.json"' "the step has Q4_1 buffers and meta weights"
  amk info "$TMP/smol.json"
  expect_out "weight_dtypes: Q4_1 210, Q8_0 1, F32 61" "info: the weight buffers a dtype"
  expect_out "weight_bytes_read: 96576768" "info: the weight bytes a token reads"
  amk build -m "$SMOL" --ctx 64 --dtype F32 -o "$TMP/smol_f32.json"
  expect_rc 0 "build the default model converted to F32"
  expect_true '! grep -q "\"Q4_1\"" "$TMP/smol_f32.json" && ! grep -q "\"Q8_0\"" "$TMP/smol_f32.json"' "--dtype F32: no block buffers"
  # --act-dtype BF16: the blocks as stored; its prefill program dequantizes them for the tensor cores
  amk build -m "$SMOL" --ctx 64 --act-dtype BF16 --prefill 32 -o "$TMP/smol_pf.json"
  expect_rc 0 "build a prefill program with BF16 activations, blocks as stored"
  amk info "$TMP/smol_pf.json"
  expect_true 'printf "%s" "$out" | grep -q "weight_dtypes: Q4_1 210, Q8_0 1, F32 61" &&
               printf "%s" "$out" | grep -q "COPY [1-9]"' "--act-dtype BF16: Q4_1 as stored, COPY tasks dequantize it"
  amk build -m "$SMOL" --ctx 64 --prefill 32 -o "$TMP/smol_pf32.json"
  amk info "$TMP/smol_pf32.json"
  expect_true '! printf "%s" "$out" | grep -q "COPY"' "F32 activations: no COPY (the row tiles read the blocks)"
  amk build -m "$SMOL" --act-dtype I8
  expect_rc 2 "--act-dtype I8"
  expect_err "bad --act-dtype 'I8' (F32, BF16 or F16)" "--act-dtype I8 names the choices"
else
  fail "$SMOL missing (make model)"
fi
amk generate -m "$TMP/nope.gguf"
expect_rc 2 "generate without -p"
amk generate --random-weights "$DATA/tiny_config.json" --top-p 0
expect_rc 2 "generate --top-p 0"

# ---- misuse (issue 38): refused as bad input (exit 2), the message naming the file and the cause ----
printf 'XXXXjunk' >"$TMP/x.gguf"
amk generate -m "$TMP/x.gguf" -p hi
expect_rc 2 "a .gguf with a bad magic"
expect_err "x.gguf': not a GGUF file (magic 0x58585858, expected 'GGUF')" "a .gguf with a bad magic"
amk generate -m /dev/null -p hi
expect_rc 2 "-m /dev/null"
expect_err "'/dev/null': empty file" "-m /dev/null"
amk generate -m "$DATA/valid.json" -p hi
expect_rc 2 "-m a program's JSON"
expect_err "valid.json': not a safetensors index (no weight_map object" "-m a program's JSON"
mkdir -p "$TMP/emptydir"
amk generate -m "$TMP/emptydir" -p hi
expect_rc 2 "-m a directory without config.json"
expect_err "emptydir': a directory without config.json" "-m a directory without config.json"
amk generate --random-weights "$DATA/tiny_config.json" --system "be brief" -n 2
expect_rc 2 "--system without --chat"
expect_err "--system needs --chat" "--system without --chat"
amk generate --random-weights "$DATA/tiny_config.json" --ctx 65 -n 2 -q
expect_rc 2 "generate --ctx above the model's context"
expect_err "--ctx 65 is longer than the model's context of 64 tokens" "generate --ctx above the model's context"
amk build --random-weights "$DATA/tiny_config.json" --ctx 65 -o "$TMP/step65.json"
expect_rc 2 "build --ctx above the model's context"
sed 's/"rms_norm_eps": 1e-05/"rms_norm_eps": 1e300/' "$DATA/tiny_config.json" >"$TMP/eps.json"
amk generate --random-weights "$TMP/eps.json" --cpu -n 2 -q
expect_rc 2 "rms_norm_eps 1e300"
expect_err "'rms_norm_eps' is 1e+300, outside a float's range" "rms_norm_eps 1e300"
# a context whose KV cache (2 TB) no host holds: refused before it is allocated
sed -e 's/"num_hidden_layers": 2/"num_hidden_layers": 8, "head_dim": 256/' -e 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' \
    -e 's/"max_position_embeddings": 64/"max_position_embeddings": 16777216/' "$DATA/tiny_config.json" >"$TMP/bigctx.json"
amk generate --random-weights "$TMP/bigctx.json" --cpu --ctx 16777216 -n 1 -q
expect_rc 2 "a KV cache larger than the host's memory"
expect_err "the KV cache of a 16777216-token context needs 1099.5 GB" "a KV cache larger than the host's memory"
amk generate --random-weights "$DATA/tiny_config.json" --cpu --ctx 16 -n 0
expect_rc 0 "-n 0"
expect_err "decode 0 tokens" "-n 0 decodes nothing"
expect_true '[ -z "$out" ]' "-n 0 prints no token"
if [ -f "$SMOL" ]; then
  amk generate --cpu -m "$SMOL" -n 2 -p ""
  expect_rc 0 "the empty prompt starts from BOS"
  expect_err "prompt 1 tokens" "the empty prompt starts from BOS"
  # a long prompt on the reference VM shows its progress on a terminal (script(1) gives it one):
  # ~60 tokens run for more than the second before the first report, even on a fast CPU
  if command -v script >/dev/null 2>&1; then
    long="$(rep 'The printing press changed how books were made. ' 7)"
    out=$(script -qec "$AMK generate --cpu -m '$SMOL' -n 1 -p '$long'" /dev/null 2>&1); rc=$?
    expect_rc 0 "prompt progress on a terminal"
    expect_true 'printf "%s" "$out" | grep -Eq "prompt [0-9]+/[0-9]+ tokens, [0-9.]+ tok/s"' "prompt progress on a terminal"
  fi
fi
# a tiny safetensors model (1 layer, hidden 32, vocab 8, zero weights) with its own tokenizer.json:
# no BOS anywhere, so the empty prompt is refused; a tokenizer larger than the embedding is refused
M="$TMP/tinyst"
mkdir -p "$M"
printf '%s' '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
 "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 8, "max_position_embeddings": 64, "rms_norm_eps": 1e-05, "tie_word_embeddings": true,
 "hidden_act": "silu"}' >"$M/config.json"
hdr='{'; off=0; sep=''
for t in "model.embed_tokens.weight 8 32" "model.norm.weight 32" "model.layers.0.input_layernorm.weight 32" \
         "model.layers.0.self_attn.q_proj.weight 32 32" "model.layers.0.self_attn.k_proj.weight 16 32" \
         "model.layers.0.self_attn.v_proj.weight 16 32" "model.layers.0.self_attn.o_proj.weight 32 32" \
         "model.layers.0.post_attention_layernorm.weight 32" "model.layers.0.mlp.gate_proj.weight 64 32" \
         "model.layers.0.mlp.up_proj.weight 64 32" "model.layers.0.mlp.down_proj.weight 32 64"; do
  set -- $t
  n=$((4 * $2 * ${3:-1})); shape=$2; [ -n "${3:-}" ] && shape="$2, $3"
  hdr="$hdr$sep\"$1\": {\"dtype\": \"F32\", \"shape\": [$shape], \"data_offsets\": [$off, $((off + n))]}"
  off=$((off + n)); sep=', '
done
head -c "$off" /dev/zero | mk_st "$M/model.safetensors" "$hdr}"
vocab() { local i s='' sep=''; for ((i = 0; i < $1; i++)); do s="$s$sep\"$(printf "\\x$(printf %02x $((97 + i)))")\": $i"; sep=', '; done; printf '%s' "$s"; }
tok_json() {
  printf '{"model": {"type": "BPE", "vocab": {%s}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}, "added_tokens": []}' "$(vocab "$1")" >"$M/tokenizer.json"
}
tok_json 8
amk generate --cpu -m "$M" -n 2 -p "abc" -q
expect_rc 0 "the tiny safetensors model runs"
amk generate --cpu -m "$M" -n 2 -p "" -q
expect_rc 2 "the empty prompt without a BOS token"
expect_err "the prompt is empty and the model has no BOS token" "the empty prompt without a BOS token"
tok_json 12
amk generate --cpu -m "$M" -n 2 -p "abc" -q
expect_rc 2 "a tokenizer larger than the embedding"
expect_err "the tokenizer has 12 tokens, more than the 8 rows of the embedding" "a tokenizer larger than the embedding"
tok_json 5
amk generate --cpu -m "$M" -n 2 -p "abc" -q
expect_rc 0 "a tokenizer smaller than the embedding (HF pads embeddings)"

echo "test_cli.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
