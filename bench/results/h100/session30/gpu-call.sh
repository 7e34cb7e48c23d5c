# GEMV timed by GPU timestamps: calls cycling through copies of each weight (512 MiB) beside the
# same shapes read from one copy (the L2 cache may hold it); the per-call floor at small shapes.
set -uo pipefail
o=$OUT/r; mkdir -p "$o"
QFORMATS=Q4_0,Q4_1,Q4_K,Q6_K,Q8_0 QCONFIGS="256,2,32" QROTATE=512 QINT8=1 \
QSHAPES=576x576,2048x2048,14336x4096,4096x14336,16384x16384 timeout 330 bash bench/gpu/session.sh "$o" "copy gemv"
o=$OUT/s; mkdir -p "$o"
QFORMATS=Q4_0,Q4_1,Q4_K,Q6_K,Q8_0 QCONFIGS="256,2,32" \
QSHAPES=2048x2048,14336x4096,4096x14336,16384x16384 timeout 200 bash bench/gpu/session.sh "$o" "gemv"
