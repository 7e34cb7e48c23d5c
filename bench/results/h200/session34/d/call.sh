# What reading pre-quantized activations would give: the kernel with each lane reading its
# chunks' records (8 words of int8 activations, the scale and sums: three vec4, `global`; two,
# `global2`) straight from device memory instead of every workgroup quantizing the whole x into
# workgroup memory between barriers (x's bytes stand in for the records: times only), against
# the kernel as it is (base), at the tuned set's shapes and those with fewer rows a workgroup.
set -uo pipefail
o=$OUT/d
. bench/gpu/setup.sh
for cfg in "256 2 32" "256 4 32" "256 1 32" "128 1 32" "64 1 32"; do
  set -- $cfg
  for v in base global global2; do
    stamp "$v wg $1 rows $2 lanes $3"
    WEFT_DIAG_DIR=$PWD/.dev/diag/$v timeout 60 "$bin/qmb-diag" --formats q4_g32_sym,q4_g32_asym,q8_g32_sym,q3_g32_asym,q2_g32_asym \
      --shapes 4096x4096,4096x14336,8192x8192,28672x4096,16384x16384 --wg $1 --rows $2 --lanes $3 --int8 \
      --rotate-mib 512 --seconds 0.2 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | cut -c1-80 >>"$o/session.log"
  done
done
stamp done
