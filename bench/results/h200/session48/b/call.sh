# The default after note 75 (WEFT_SHADER_CHECKS unset: `auto`, none on Vulkan) against
# WEFT_SHADER_CHECKS=all, one build: weft bench (prompt 128 + 128, median of 3, 8-bit
# activations) of three Q4_0 files, interleaved, one round.
set -uo pipefail
o=$OUT/b; source bench/gpu/setup.sh
nvidia-smi --query-gpu=name,driver_version --format=csv >>"$o/session.log"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
stamp models
blog="$o/bench.log"
for round in 1; do
  for f in 7b-Q4_0 tinyllama-Q4_0 smollm2-Q4_0; do
    for ch in "" all; do
      echo "== $f int8 ${ch:-default}" >>"$blog"
      WEFT_SHADER_CHECKS=$ch timeout 60 "$bin/weft" bench "$models/$f.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>&1 \
        | grep -E "^(checks|decode|prefill)" >>"$blog"
    done
  done
  stamp "round $round"
done
