# The build of e0acc97 (warm tuning, activation records) on the five files of session35/e:
# random-weight Q4_0 and Q8_0 GGUFs of the SmolLM2, TinyLlama and 7B shapes, weft bench with f32
# and with 8-bit activations, twice each, interleaved (prompt 128 + 128, median of 3), and the
# device copy rate.
set -uo pipefail
o=$OUT/e
mkdir -p "$o"
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
tinyllama Q8_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
timeout 150 bash bench/gpu/session.sh "$o" "copy" >/dev/null 2>&1; grep "device copy" "$o/session.log"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  for v in "" "--int8-activations" "" "--int8-activations"; do
    stamp "weft bench $name $ty $v"
    # shellcheck disable=SC2086
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
