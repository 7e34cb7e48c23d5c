# Call b again in the other order (f32 first, then 8-bit activations), for the spread between
# processes: the JS API on Dawn (Node) beside native wgpu, random-weight Q4_0 files of the
# SmolLM2, TinyLlama and 7B shapes, prompt 128 + 128, greedy, median of 3; 16 greedy ids of each
# file against `weft generate` with the same activations.
set -uo pipefail
o=$OUT/c; source bench/gpu/setup.sh
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  stamp "$f written"
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
DAWN_TIMEOUT=150 DAWN_ARGS="--check 16" timeout 240 bash bench/gpu/session.sh "$o/f32" "dawn"
DAWN_TIMEOUT=150 DAWN_ARGS="--check 16 --activations int8" NATIVE_ARGS=--int8-activations timeout 270 bash bench/gpu/session.sh "$o/int8" "dawn"
stamp done
