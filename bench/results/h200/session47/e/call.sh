# Sixty-four lanes a row (one tile a row at k = 4096, where 32 lanes take two): qmatmul_bench
# (its kernels those of 93661d7) with Q4_0 at the 7B's and TinyLlama's decode shapes, 8-bit
# activations, shapes as constants, copies cycled through 256 MiB, at the default 256-2-32 and
# at shapes of 64 lanes, two rounds interleaved. wg-rows-lanes.
set -uo pipefail
o=$OUT/e; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
log="$o/gemv.log"
for round in 1 2; do
  for cfg in 256-2-32 256-1-32 256-2-64 256-1-64 128-1-64 256-4-64; do
    IFS=- read -r wg rows lanes <<<"$cfg"
    echo "== $cfg round $round" >>"$log"
    timeout 90 "$bin/qmatmul_bench" --formats Q4_0 --shapes 4096x4096,6144x4096,14336x4096,4096x14336,2048x2048,2560x2048 \
      --seconds 0.2 --rotate-mib 256 --constant-shape --int8 --wg "$wg" --rows "$rows" --lanes "$lanes" --json >"/tmp/g.json" 2>>"$log"
    python3 - /tmp/g.json <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(f'{r["format"]:>14} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s {r.get("config", "")}')
PY
  done
  stamp "round $round"
done
