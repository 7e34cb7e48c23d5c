# Launch shapes for the 2- and 3-bit GEMVs beside Q4_0 (note 69: at the default shape they take as
# long as the 4-bit ones): qmatmul_bench with 8-bit activations and the shape as constants, calls
# cycled through 256 MiB, by launch shape wg-rows-lanes.
set -uo pipefail
timeout 40 bash bench/gpu/session.sh "$OUT/d" "copy"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/d/gemv.log"
for c in 256,2,32 256,4,32 256,4,16 256,2,16 256,4,8 128,4,32; do
  IFS=, read -r wg rows lanes <<<"$c"
  echo "== $c" >>"$log"
  timeout 60 "$bin/qmatmul_bench" --formats Q4_0,q4_g32_asym,q3_g32_asym,q2_g32_asym --shapes 8192x8192,4096x14336 \
    --seconds 0.25 --rotate-mib 256 --int8 --constant-shape --wg "$wg" --rows "$rows" --lanes "$lanes" --json \
    >"$OUT/d/gemv-$wg-$rows-$lanes.json" 2>>"$log"
  python3 - "$OUT/d/gemv-$wg-$rows-$lanes.json" <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(f'{r["format"]:>28} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s x{r["copies"]}')
for s in d["skipped"]:
    print("skipped:", s)
PY
done
grep -c "GB/s" "$log"
