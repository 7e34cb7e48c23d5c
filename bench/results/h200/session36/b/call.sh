# (b: the reader tuned at load at shapes of its own, and records only where the tuned times of
# the pair say they pay.) The down GEMV reading the SwiGLU epilogue's 8-bit activation records against quantizing its
# input in every workgroup: random-weight Q4_0 files of the SmolLM2, TinyLlama and 7B shapes and a
# Q8_0 7B, weft bench with 8-bit activations (prompt 128 + 128, median of 3): each once profiled
# with and without the records, then two interleaved rounds unprofiled.
set -uo pipefail
o=$OUT/b
mkdir -p "$o"
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
timeout 150 bash bench/gpu/session.sh "$o" "copy" >/dev/null 2>&1; grep "device copy" "$o/session.log"
models=/tmp/weft-models
mkdir -p "$models"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  for v in "--profile --no-activation-records" "--profile" "--no-activation-records" "" "--no-activation-records" ""; do
    stamp "weft bench $name $ty --int8-activations $v"
    # shellcheck disable=SC2086
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations $v 2>>"$o/weft.err" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
