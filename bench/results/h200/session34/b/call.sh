# Where a 4-bit GEMV's time goes: qmatmul_bench built with the kernel's source read from
# .dev/diag/V (a build not kept: the one hook is WEFT_DIAG_DIR), the DP4 kernel as it is (base),
# without its integer products (nodot: one xor of the loaded words a chunk), without the
# activations' quantization (nostage: raw bits staged, no maxima, no inner barrier), both, and
# with no barriers at all (nobar, bothnobar). Results are wrong in all but base: times only.
set -uo pipefail
o=$OUT/b
. bench/gpu/setup.sh
for cfg in "256 2 32" "256 4 16"; do
  set -- $cfg
  for v in base nodot nostage both nobar bothnobar; do
    stamp "$v wg $1 rows $2 lanes $3"
    WEFT_DIAG_DIR=$PWD/.dev/diag/$v timeout 60 "$bin/qmb-diag" --formats q4_g32_sym,q4_g32_asym,q8_g32_sym \
      --shapes 8192x8192,4096x14336,16384x16384 --wg $1 --rows $2 --lanes $3 --int8 \
      --rotate-mib 512 --seconds 0.3 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | cut -c1-80 | tee -a "$o/session.log"
  done
done
stamp done
