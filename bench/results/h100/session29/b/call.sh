# The call that made this folder (`bash .dev/callB.sh`, carrying .gl, .dev (weft.xz), .whl and
# .llama): Q4_K_M GGUFs with the norms folded into the GEMVs of products kept apart, weft bench
# and llama-bench (built in the call) on the same files.
set -uo pipefail
o=$OUT/b
mkdir -p "$o"
MODEL_SPECS="tinyllama Q4_K_M 2048 5632 22 32 4 32000
7b Q4_K_M 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000" timeout 580 bash bench/gpu/session.sh "$o" "copy models llama"
