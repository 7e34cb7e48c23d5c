# Cheaper staging, timed before it is built (the diagnostic build of call b): each lane keeps the
# eight values it read for its quarter's maximum in registers for the rounding (`keep`: x, the
# norm's weight and GLU's exp read once, not twice; 4 and 8 bits, one quarter a lane), and
# `keepmagic` also rounds by adding 1.5 * 2^23 (the float's low byte is the rounded integer)
# instead of round() and a conversion; against the kernel as it is, interleaved twice, at the
# tuned set's shapes, for the SmolLM2, TinyLlama and 7B matrices.
set -uo pipefail
o=$OUT/e
. bench/gpu/setup.sh
for round in 1 2; do
  for cfg in "256 2 32" "256 4 32" "128 2 32"; do
    set -- $cfg
    for v in base keep keepmagic; do
      stamp "$v wg $1 rows $2 lanes $3 (round $round)"
      WEFT_DIAG_DIR=$PWD/.dev/diag/$v timeout 60 "$bin/qmb-diag" --formats q4_g32_sym,q4_g32_asym,q8_g32_sym \
        --shapes 960x576,3072x576,576x1536,2560x2048,11264x2048,2048x5632,4096x4096,4096x14336,28672x4096,8192x8192 \
        --wg $1 --rows $2 --lanes $3 --int8 --rotate-mib 512 --seconds 0.15 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | cut -c1-80 >>"$o/session.log"
    done
  done
done
stamp done
