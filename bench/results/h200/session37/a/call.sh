# (a) The decode attention kernel alone: µs a call at the SmolLM2 (9/3/64), TinyLlama (32/4/64)
# and 7B (32/8/128) head layouts, contexts 1 to 4096, chunks of 64, 128 and 256 positions.
set -uo pipefail
o=$OUT/a
. bench/gpu/setup.sh
stamp "attention_bench"
timeout 200 "$bin/attention_bench" --reps 400 2>&1 | tee -a "$o/session.log"
echo "== done" | tee -a "$o/session.log"
