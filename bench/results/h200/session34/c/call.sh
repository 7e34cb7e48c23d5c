# Matrices of few rows (the 7B's O and down projections, 4096 rows) give the GEMV few workgroups
# and each lane few loads in flight. Launch shapes with 64 lanes a row (two subgroups, summed in
# workgroup memory), which no candidate has yet, against the tuned set's, 8-bit activations,
# rotated through 512 MiB (qmatmul_bench of call b without WEFT_DIAG_DIR: the kernel as built).
set -uo pipefail
o=$OUT/c
. bench/gpu/setup.sh
for cfg in "256 2 32" "256 1 32" "64 1 32" "128 2 32" "256 4 32" "256 1 64" "256 2 64" "256 4 64" "128 1 64" "128 2 64" "64 1 64" "256 1 128" "256 2 128"; do
  set -- $cfg
  stamp "wg $1 rows $2 lanes $3"
  timeout 60 "$bin/qmb-diag" --formats q4_g32_sym,q4_g32_asym,q8_g32_sym,q3_g32_asym,q2_g32_asym \
    --shapes 4096x4096,4096x14336,6144x4096,28672x4096 --wg $1 --rows $2 --lanes $3 --int8 \
    --rotate-mib 512 --seconds 0.2 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | cut -c1-80 | tee -a "$o/session.log"
done
stamp done
