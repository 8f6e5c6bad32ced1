#!/usr/bin/env bash
# scripts/gpu_generate_sweep.sh - `amk generate` with the real SmolLM2 on prompts of 1, 100, 460,
# 1000, 2000 and 3000 tokens in each weight dtype (F32, BF16, F16) on the GPU, and in BF16 on the
# reference VM (--cpu) too; whether each run succeeds, its time, and whether the BF16 GPU text is
# the BF16 reference VM's (issue 38, item 1's acceptance). The F32 GPU runs from 100 tokens run a
# second time with the prompt a token at a time (--prefill-rows off): their text must equal the
# prefilled run's (issue 40's correctness point). Prints a short table last; logs, the prompts and
# each run's text go to $OUT (or /tmp/amk-generate-sweep). Exit status: nonzero if a run failed, a
# GPU run did not run on the GPU, a prompt's length is off, or a compared text differs.
#
#   scripts/gpu_generate_sweep.sh [AMK]      AMK: the amk binary (default $AMK, else build-gpu/amk),
#                                            built with the device image (`make BUILD=build-gpu build-gpu/amk`)
#   MODEL=path.gguf        the model (default models/SmolLM2-135M-Instruct.Q4_1.gguf; context 8192)
#   LENGTHS="1 100 460 1000 2000 3000"  the prompt lengths, in tokens of AMK's tokenizer
#   DTYPES="F32 BF16 F16"  the GPU runs' --dtype       N=16  the tokens generated (-n)
#   CPU_MAX=460            the longest prompt also run on the reference VM (--cpu, BF16); longer
#                          ones are skipped (see below). why: the reference VM ran a prompt a
#                          token at a time on one core, 2.4-3.4 tokens/s for SmolLM2 on the 2-core
#                          dev machine (its 36 ATTENTION_O tasks a layer each recompute their kv
#                          head's attention up to 512 rows: 460 tokens ~3 times the cost a token
#                          at the end); so 460 tokens take ~2-4 minutes, 1000 ~4-7, 3000 ~15-25;
#                          the --cpu runs go in parallel, started first (its chunks of the prefill
#                          program now run the prompt ~3x faster: bench/NOTES.md session "chunks")
#   CPU_TIMEOUT=340        seconds a --cpu run may take (then rc 124)   GPU_TIMEOUT=180  a GPU run's
#   PROMPTS_ONLY=1         make and count the prompts, run nothing (needs no GPU; kept in $OUT and
#                          reused by a later run when their counts still hold)
#   RUN=0                  run nothing: the table and the comparison of what $OUT holds
#
# The longer reference texts need no GPU: run them on any x86-64 machine with the same amk and
# model (the reference VM is deterministic C), e.g. `OUT=dir DTYPES= LENGTHS="1000 3000"
# CPU_MAX=3000 CPU_TIMEOUT=3600 scripts/gpu_generate_sweep.sh build/amk`, put the GPU run's
# gpu_BF16_* files of the same prompts beside them and compare with `RUN=0 OUT=dir ...`. A result
# left in $OUT by an earlier invocation is marked "(earlier)" in the table.
#
# Prompt lengths: each prompt is a prefix of an English text (its sentences cycled, each cycle
# numbered) padded with the one-token word " the" up to the length, counted by amk itself: `amk
# generate --ctx 1 -n 1` refuses a prompt that does not fit and names its length in tokens
# ("the prompt (N tokens) ..."), after tokenizing it and before running any step.
set -u
cd "$(dirname "$0")/.." || exit 2
AMK=${1:-${AMK:-build-gpu/amk}}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
LENGTHS=${LENGTHS:-1 100 460 1000 2000 3000}
DTYPES=${DTYPES-F32 BF16 F16} # set and empty: no GPU runs (the reference VM's alone)
N=${N:-16}
CPU_MAX=${CPU_MAX:-460}
CPU_TIMEOUT=${CPU_TIMEOUT:-340}
RUN=${RUN:-1}
GPU_TIMEOUT=${GPU_TIMEOUT:-180}
LOG=${OUT:-/tmp/amk-generate-sweep}
mkdir -p "$LOG"
fail=0
T_START=$(date +%s.%N)

for f in "$AMK" "$MODEL"; do
  [ -e "$f" ] || { echo "gpu_generate_sweep: $f not found"; exit 2; }
done

# The text prompts are cut from: sentences of everyday English, cycled; each cycle starts with its
# number, so no stretch of the prompt repeats the one before word for word.
SENTENCES=(
  "The river that runs through the old town is wide and slow, and in summer children swim near the stone bridge."
  "Most bakeries open before dawn, because bread needs hours to rise and people want it fresh for breakfast."
  "A good map shows not only the roads but also the hills, the forests and the small villages between them."
  "When the wind comes from the north, the harbour fills with fishing boats waiting for calmer water."
  "Learning a new language takes patience, since every word has to be heard many times before it feels familiar."
  "The library keeps its oldest books in a cool room where the light is low and the air is dry."
  "Farmers in the valley grow apples, pears and plums, and they sell most of the fruit at the weekly market."
  "Every spring the birds return from the south and build their nests under the roofs of the barns."
  "An engineer checks the bridge each year, measuring how much the steel has moved since the last visit."
  "The museum has a large hall full of paintings of the sea, some calm and bright, others dark with storms."
  "Cooking rice well is simple: wash it, use the right amount of water, and do not lift the lid too soon."
  "On clear nights you can see thousands of stars above the mountains, far from the lights of the city."
  "The train to the coast leaves every hour, and the journey takes a little less than two hours."
  "Teachers often say that the best way to understand something is to explain it to someone else."
  "In the autumn the leaves turn red and gold, and the paths in the park disappear under them."
  "The small shop on the corner sells newspapers, stamps, sweets and the strongest coffee in the street."
  "Scientists study the weather by collecting measurements from ships, balloons, satellites and stations on land."
  "A careful gardener waters the plants in the evening, when the sun is low and less water is lost."
  "The castle on the hill was built to watch the road, and from its towers you can see three countries."
  "Writing a letter by hand is slower than sending a message, but many people still enjoy it."
)
base_text() {
  local cycle s out=""
  for cycle in 1 2 3 4 5 6 7 8; do
    out+="Part $cycle. "
    for s in "${SENTENCES[@]}"; do out+="$s "; done
  done
  printf '%s' "$out"
}

# count TEXT: its length in tokens, as amk tokenizes a prompt (empty when amk did not say)
count() {
  "$AMK" generate -m "$MODEL" -p "$1" -n 1 --ctx 1 --cpu -q 2>&1 >/dev/null |
    sed -n 's/.*the prompt (\([0-9]*\) tokens).*/\1/p' | head -n 1
}

# make_prompt LEN FILE: a prompt of exactly LEN tokens into FILE (0 when made)
make_prompt() {
  local want=$1 file=$2 words c text pad
  read -r -a W <<< "$BASE"
  words=$(( want * BASE_WORDS / BASE_TOKENS ))          # the base's words a token, scaled
  [ "$words" -lt 1 ] && words=1                          # why: a word, not the empty prompt (BOS alone)
  [ "$words" -gt "${#W[@]}" ] && words=${#W[@]}
  for _ in 1 2 3 4 5 6; do                               # a prefix of the base no longer than LEN
    text="${W[*]:0:$words}"
    c=$(count "$text")
    [ -n "$c" ] || { echo "  cannot count a prompt: $AMK says nothing of its length" >&2; return 1; }
    [ "$c" -le "$want" ] && break
    words=$(( words - (c - want) - 1 ))
    [ "$words" -lt 0 ] && words=0
  done
  [ "$c" -le "$want" ] || return 1
  for _ in 1 2 3; do                                     # padded with " the", one token each
    pad=""
    [ "$c" -lt "$want" ] && pad=$(printf ' the%.0s' $(seq 1 $(( want - c ))))
    text="$text$pad"
    c=$(count "$text")
    [ "$c" = "$want" ] && { printf '%s' "$text" > "$file"; return 0; }
    [ "$c" -gt "$want" ] && return 1
  done
  return 1
}

# make_prompts: every length's prompt into $LOG/prompt_LEN.txt (kept when it still counts right)
make_prompts() {
  echo "== prompts (counted by $AMK)"
  BASE=$(base_text)
  BASE_WORDS=$(wc -w <<< "$BASE")
  BASE_TOKENS=$(count "$BASE")
  [ -n "$BASE_TOKENS" ] || { echo "gpu_generate_sweep: $AMK did not count the prompt's tokens"; exit 1; }
  echo "   the base text: $BASE_WORDS words, $BASE_TOKENS tokens"
  for len in $LENGTHS; do
    if [ -s "$LOG/prompt_$len.txt" ] && [ "$(count "$(cat "$LOG/prompt_$len.txt")")" = "$len" ]; then
      echo "   $len tokens: $LOG/prompt_$len.txt (kept)"
    elif make_prompt "$len" "$LOG/prompt_$len.txt"; then
      echo "   $len tokens: $LOG/prompt_$len.txt"
    else
      echo "   $len tokens: could not make the prompt"; fail=1; rm -f "$LOG/prompt_$len.txt"
    fi
  done
}

# run NAME TIMEOUT ARGS...: amk generate ARGS into $LOG/NAME.{out,err}; its rc and wall time into
# $LOG/NAME.rc and $LOG/NAME.time
run() {
  local name=$1 to=$2 t0 t1 rc; shift 2
  t0=$(date +%s.%N)
  timeout "$to" "$AMK" generate -m "$MODEL" -n "$N" "$@" > "$LOG/$name.out" 2> "$LOG/$name.err"; rc=$?
  t1=$(date +%s.%N)
  echo "$rc" > "$LOG/$name.rc"
  awk "BEGIN{printf \"%.1f\", $t1 - $t0}" > "$LOG/$name.time"
}

# run_all: the reference VM's runs first, in the background (each on one core), then the GPU's one
# by one; $made lists them
run_all() {
  cpu_pids=()
  for len in $LENGTHS; do
    if [ ! -s "$LOG/prompt_$len.txt" ] || [ "$len" -gt "$CPU_MAX" ]; then continue; fi
    rm -f "$LOG/cpu_BF16_$len".*
    made+="cpu_BF16_$len "
    run "cpu_BF16_$len" "$CPU_TIMEOUT" --dtype BF16 --cpu -p "$(cat "$LOG/prompt_$len.txt")" &
    cpu_pids+=($!)
  done
  echo "== GPU runs"
  for len in $LENGTHS; do
    [ -s "$LOG/prompt_$len.txt" ] || continue
    for dt in $DTYPES; do
      made+="gpu_${dt}_$len "
      run "gpu_${dt}_$len" "$GPU_TIMEOUT" --dtype "$dt" -p "$(cat "$LOG/prompt_$len.txt")"
      echo "   $len tokens $dt: rc $(cat "$LOG/gpu_${dt}_$len.rc"), $(cat "$LOG/gpu_${dt}_$len.time") s"
      if [ "$dt" = F32 ] && [ "$len" -ge 100 ]; then # the same prompt a token at a time
        made+="steps_F32_$len "
        run "steps_F32_$len" "$GPU_TIMEOUT" --dtype F32 --prefill-rows off -p "$(cat "$LOG/prompt_$len.txt")"
        echo "   $len tokens F32 a token at a time: rc $(cat "$LOG/steps_F32_$len.rc"), $(cat "$LOG/steps_F32_$len.time") s"
      fi
    done
  done
  echo "== waiting for the reference VM's runs"
  for p in "${cpu_pids[@]}"; do wait "$p"; done
}

made=" "
if [ "$RUN" = 1 ]; then
  make_prompts
  [ "${PROMPTS_ONLY:-0}" = 1 ] && exit $fail
  run_all
fi

# stat FILE.err: the summary line's numbers: "prompt N tokens, R tok/s | decode ..."
stat_of() { grep -o 'prompt [0-9]* tokens, [0-9.]* tok/s | decode [0-9]* tokens, [0-9.]* tok/s' "$1" 2>/dev/null | tail -n 1; }
ptoks() { stat_of "$1" | sed -n 's/^prompt [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p'; }
backend_of() { sed -n 's/.*tok\/s (\([a-z]*\))$/\1/p' "$1" 2>/dev/null | tail -n 1; }

rows=()
for len in $LENGTHS; do
  for name in $(for dt in $DTYPES; do echo "gpu_${dt}_$len"; done) "cpu_BF16_$len"; do
    side=${name%%_*}
    if [ ! -f "$LOG/$name.rc" ]; then
      why="no run"
      [ "$len" -gt "$CPU_MAX" ] && why="prompt over CPU_MAX=$CPU_MAX tokens (see the header)"
      [ "$side" = cpu ] && rows+=("$(printf '%5s %-5s %-4s %-8s %s' "$len" BF16 cpu skipped "$why")")
      [ "$side" = gpu ] && { rows+=("$(printf '%5s %-5s %-4s %-8s' "$len" "$(cut -d_ -f2 <<< "$name")" gpu "no run")"); fail=1; }
      continue
    fi
    rc=$(cat "$LOG/$name.rc"); st=$(stat_of "$LOG/$name.err"); be=$(backend_of "$LOG/$name.err")
    ntok=$(sed -n 's/^prompt \([0-9]*\) tokens.*/\1/p' <<< "$st")
    note="$st"
    [[ "$made" == *" $name "* ]] || note="(earlier) $note"
    [ "$rc" = 0 ] || { fail=1; note="$(tail -n 1 "$LOG/$name.err" | cut -c1-90)"; }
    [ "$rc" = 0 ] && [ "$ntok" != "$len" ] && { fail=1; note="prompt of $ntok tokens, not $len: $note"; }
    [ "$rc" = 0 ] && [ "$side" = gpu ] && [ "$be" != cuda ] && { fail=1; note="ran on '$be', not the GPU: $note"; }
    rows+=("$(printf '%5s %-5s %-4s rc %-3s %6s s  %s' "$len" "$(cut -d_ -f2 <<< "$name")" "$side" "$rc" "$(cat "$LOG/$name.time")" "$note")")
  done
done

same=()
for len in $LENGTHS; do
  g="$LOG/gpu_BF16_$len.out" c="$LOG/cpu_BF16_$len.out"
  missing="the GPU"
  [ -f "$LOG/gpu_BF16_$len.rc" ] && missing="the reference VM"
  if [ ! -f "$LOG/cpu_BF16_$len.rc" ] || [ ! -f "$LOG/gpu_BF16_$len.rc" ]; then
    same+=("$len: not compared (no run on $missing)")
  elif [ "$(cat "$LOG/cpu_BF16_$len.rc")" != 0 ] || [ "$(cat "$LOG/gpu_BF16_$len.rc")" != 0 ]; then
    same+=("$len: not compared (a run failed)")
  elif cmp -s "$g" "$c"; then
    gen=$(( $(wc -c < "$g") - $(wc -c < "$LOG/prompt_$len.txt") ))
    same+=("$len: same ($gen bytes generated)")
  else
    fail=1
    at=$(cmp "$g" "$c" 2>/dev/null | sed -n 's/.*byte \([0-9]*\).*/\1/p')
    skip=$(( $(wc -c < "$LOG/prompt_$len.txt") + 1 ))
    gt=$(tail -c +"$skip" "$g" | tr '\n' ' ' | cut -c1-60)
    ct=$(tail -c +"$skip" "$c" | tr '\n' ' ' | cut -c1-60)
    same+=("$len: DIFFERENT from byte $at: GPU '$gt' vs reference VM '$ct'")
  fi
done

echo
echo "== amk generate: $MODEL, -n $N, logs in $LOG ($(awk "BEGIN{printf \"%.0f\", $(date +%s.%N) - $T_START}") s in all)"
echo "  len dtype side rc      time  prompt and decode"
printf '%s\n' "${rows[@]}"
pre=()
for len in $LENGTHS; do # the prefilled F32 text against the same prompt a token at a time
  g="$LOG/gpu_F32_$len.out" c="$LOG/steps_F32_$len.out"
  [ -f "$LOG/steps_F32_$len.rc" ] && [ -f "$LOG/gpu_F32_$len.rc" ] || continue
  if [ "$(cat "$LOG/steps_F32_$len.rc")" != 0 ] || [ "$(cat "$LOG/gpu_F32_$len.rc")" != 0 ]; then
    fail=1; pre+=("$len: a run failed")
  elif cmp -s "$g" "$c"; then
    pre+=("$len: same (prompt $(ptoks "$LOG/gpu_F32_$len.err") tok/s in chunks, $(ptoks "$LOG/steps_F32_$len.err") a token at a time)")
  else
    fail=1; pre+=("$len: DIFFERENT from byte $(cmp "$g" "$c" 2>/dev/null | sed -n 's/.*byte \([0-9]*\).*/\1/p')")
  fi
done
echo "== BF16 text, GPU vs reference VM"
printf '  %s\n' "${same[@]}"
echo "== F32 text on the GPU, the prompt in chunks vs a token at a time"
printf '  %s\n' "${pre[@]}"
exit $fail
