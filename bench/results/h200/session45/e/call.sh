# Four chunks a lane per tile for the 2- and 3-bit GEMVs on 8-bit activations (C4, note 70):
# qmatmul_bench of this build against the build before (qmatmul_bench_old), interleaved, two
# launch shapes, the shape as constants, calls cycled through 256 MiB; Q4_0 and q4_g32_asym
# (unchanged) as controls.
set -uo pipefail
timeout 40 bash bench/gpu/session.sh "$OUT/e" "copy"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/e/gemv.log"
for c in 256,2,32 256,4,32; do
  for b in qmatmul_bench_old qmatmul_bench; do
    IFS=, read -r wg rows lanes <<<"$c"
    echo "== $b $c" >>"$log"
    timeout 50 "$bin/$b" --formats Q4_0,q4_g32_asym,q3_g32_asym,q2_g32_asym --shapes 8192x8192,4096x14336,14336x4096 \
      --seconds 0.2 --rotate-mib 256 --int8 --constant-shape --wg "$wg" --rows "$rows" --lanes "$lanes" --json \
      >"$OUT/e/$b-$wg-$rows-$lanes.json" 2>>"$log"
    python3 - "$OUT/e/$b-$wg-$rows-$lanes.json" <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(f'{r["format"]:>28} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s x{r["copies"]} {"C4" if "C4=1" in r["kernel"] else ""}')
for s in d["skipped"]:
    print("skipped:", s)
PY
  done
done
grep -c "GB/s" "$log"
