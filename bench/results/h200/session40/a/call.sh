# The Q/K/V GEMV's KV prefetch (shaders/kv_prefetch.wgsl), on and off in the same process order,
# the release build of this commit: random-weight Q4_0 files of the SmolLM2, TinyLlama and 7B
# shapes, weft bench with f32 and 8-bit activations, each with and without --no-kv-prefetch,
# two rounds interleaved (the first run and the first --no-kv-prefetch run profiled), prompt
# 128 + 128, median of 3.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="|--no-kv-prefetch --profile|--int8-activations|--int8-activations --no-kv-prefetch||--no-kv-prefetch|--int8-activations|--int8-activations --no-kv-prefetch" \
  timeout 590 bash bench/gpu/session.sh "$OUT/a" "copy models"
