# (f: the warm-up before tuning in rounds of 2048 timed dispatches rather than 256, to cut its
# CPU round trips.) Load phases (tuning's share) and the tuned shapes of the SmolLM2, TinyLlama
# and 7B Q4_0 files, weft bench with 8-bit activations (prompt 128 + 128, median of 3), twice each.
set -uo pipefail
o=$OUT/f
mkdir -p "$o"
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  for v in "--int8-activations" "--int8-activations"; do
    stamp "weft bench $name $ty $v"
    # shellcheck disable=SC2086
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
