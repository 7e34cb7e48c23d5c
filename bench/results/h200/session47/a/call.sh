# Whether a GEMV gains from finding its weight in the L2 cache: qmatmul_bench (its kernels
# those of 93661d7) at the 7B's decode shapes (Q/K/V 6144x4096, O 4096x4096, gate or up 14336x4096, down
# 4096x14336), 8-bit activations, shapes as constants, one copy (read from the L2 cache after the
# first call, up to its 50 MB) against copies cycled through 256 MiB (read from memory), two
# rounds interleaved.
set -uo pipefail
o=$OUT/a; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
log="$o/gemv.log"
for round in 1 2; do
  for rot in 0 256; do
    name="rot$rot-$round"
    echo "== $name" >>"$log"
    timeout 90 "$bin/qmatmul_bench" --formats Q4_0,Q8_0,q4_g32_asym,q3_g32_asym --shapes 4096x4096,6144x4096,14336x4096,4096x14336 \
      --seconds 0.2 --rotate-mib $rot --constant-shape --int8 --json >"/tmp/$name.json" 2>>"$log"
    python3 - "/tmp/$name.json" <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
print(f'copy {d["copy"]["read_write_gb_per_s"]:.0f} GB/s')
for r in d["rows"]:
    print(f'{r["format"]:>14} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s copies {r.get("copies", 1)}')
PY
  done
  stamp "round $round"
done
