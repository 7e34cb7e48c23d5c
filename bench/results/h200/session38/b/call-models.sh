# (b, call 8, first part; calls.sh says how the calls ran) The machine, the three random-weight
# GGUFs (Q4_0, SmolLM2 / TinyLlama / 7B shapes) and native weft bench of each (f32 activations,
# the JS API's default; prompt 128 + 128, median of 3).
set -uo pipefail
o=$OUT/b1
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
{ head -2 /etc/os-release; ldd --version | head -1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ls -la .crA; } 2>&1 | tee -a "$o/session.log"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  stamp "weft bench $name $ty"
  timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 2>>"$o/weft.err" | grep -E "decode|prefill" | tee -a "$o/session.log"
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
