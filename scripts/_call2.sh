set -u
B=build-gpu; MK="make -j16 BUILD=$B WARN=-Wall"; O=$OUT
mkdir -p models && cat /tmp/amk_model_part00 .model_parts/b/part01 > models/SmolLM2-135M-Instruct.Q4_1.gguf
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
$MK $B/amk > $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
timeout 240 $MK test-gpu-llama > $O/golden.log 2>&1; echo "golden rc=$?"; grep -E 'golden|passed' $O/golden.log
for c in 1 16; do $B/amk generate -m $M -n 200 --ctx 256 --chain $c -p "The history of the printing press" > $O/gen$c.txt 2> $O/gen$c.err; echo "chain $c rc=$? $(tail -1 $O/gen$c.err)"; done
tail -c 400 $O/gen16.txt; echo
cmp $O/gen1.txt $O/gen16.txt && echo "chain 1 and 16: the same text"
$B/amk generate -m $M -n 64 --chat --chain 16 -p "What is the capital of France? Answer in one sentence." > $O/chat.txt 2>&1; echo "chat rc=$?"; cat $O/chat.txt | tail -3
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 99 $B/amk generate -q -m $M -n 5 --chain 4 -p "Hello" > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -3 $O/memcheck.log
timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 $B/amk generate -q --timeout 180000 -m $M -n 3 --chain 2 -p "Hi" > $O/racecheck.log 2>&1; echo "racecheck rc=$?"; tail -3 $O/racecheck.log
