# The call that made this folder (`bash .dev/callC.sh`, carrying .gl, .dev (weft.xz, qmatmul_bench.xz), .whl and .llama).
# GEMV of every GGUF type on the fast path, and Q4_1 models (the default model's format) beside
# llama-bench (built here) on the same files.
set -uo pipefail
o=$OUT/c
mkdir -p "$o"
QFORMATS=Q4_0,Q4_1,Q5_0,Q5_1,Q4_K,Q5_K,Q6_K,Q8_0 QCONFIGS="256,2,32 256,4,32" \
MODEL_SPECS="smollm2 Q4_1 576 1536 30 9 3 49152
tinyllama Q4_1 2048 5632 22 32 4 32000" timeout 580 bash bench/gpu/session.sh "$o" "copy gemv models llama"
