# (d: as c, with the GPU kept busy for 250 ms of its time before the tuning sweeps, and the
# f32-activation decode of the 7B Q4_0 file too.) The down GEMV reading the SwiGLU epilogue's
# 8-bit activation records against quantizing its input in every workgroup: weft bench with
# 8-bit activations (prompt 128 + 128, median of 3), with and without the records, interleaved.
set -uo pipefail
o=$OUT/d
mkdir -p "$o"
export MODEL_SPECS="tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
models=/tmp/weft-models
mkdir -p "$models"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  runs=("--int8-activations --no-activation-records" "--int8-activations" "--int8-activations --no-activation-records" "--int8-activations" "--int8-activations --no-activation-records" "--int8-activations")
  [ "$name-$ty" = 7b-Q4_0 ] && runs+=("" "")
  for v in "${runs[@]}"; do
    stamp "weft bench $name $ty $v"
    # shellcheck disable=SC2086
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
