# Where the JS API's decode step goes on Dawn with 8-bit activations against f32: the web-profile
# wasm build (`profileStep(20)`: the step's CPU recording, its wait, each kernel's GPU time in a
# pass of its own) beside native `weft bench --profile` with the same activations, the 7B and
# TinyLlama Q4_0 files, prompt 128 + 128, median of 3.
set -uo pipefail
o=$OUT/e; source bench/gpu/setup.sh
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  stamp "$f written"
done <<<"tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
DAWN_TIMEOUT=150 DAWN_ARGS="--check 16 --profile --activations int8" NATIVE_ARGS="--int8-activations --profile" timeout 270 bash bench/gpu/session.sh "$o/int8" "dawn"
DAWN_TIMEOUT=150 DAWN_ARGS="--check 16 --profile" NATIVE_ARGS="--profile" timeout 240 bash bench/gpu/session.sh "$o/f32" "dawn"
stamp done
