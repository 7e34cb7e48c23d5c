# The JS API on Dawn (Node, the npm package `webgpu`) beside native wgpu with the kernels of note
# 68 (the wasm build compiles the decode GEMVs' shapes as constants too): random-weight Q4_0 files
# of the SmolLM2 and TinyLlama shapes (the 7B left out: the call had about seven minutes of device
# time), prompt 128 + 128, greedy, median of 3, f32 activations on both sides (the JS API's
# default). The files are written first, without the models step's own benches.
set -uo pipefail
o=$OUT/b; source bench/gpu/setup.sh
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  stamp "$f written"
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000"
DAWN_TIMEOUT=150 timeout 330 bash bench/gpu/session.sh "$o" "dawn"
stamp done
