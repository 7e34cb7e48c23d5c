# Prompts of 4,096 tokens (the issue's time to first token at 4k) under the default (`auto`:
# none on Vulkan) and WEFT_SHADER_CHECKS=all, one build, interleaved: weft bench, 16 generated,
# median of 2, 8-bit activations, the 7B and TinyLlama Q4_0 files of call b (same machine).
set -uo pipefail
o=$OUT/c; source bench/gpu/setup.sh
blog="$o/bench.log"
for f in tinyllama-Q4_0 7b-Q4_0; do
  for ch in "" all; do
    echo "== $f int8 prompt 4096 ${ch:-default}" >>"$blog"
    WEFT_SHADER_CHECKS=$ch timeout 80 "$bin/weft" bench "$models/$f.gguf" --prompt-len 4096 --gen 16 --reps 2 --int8-activations 2>&1 \
      | grep -E "^(checks|decode|prefill|ttft|error|Error)" >>"$blog"
  done
done
stamp done
