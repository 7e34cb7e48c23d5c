# The GEMV at the issue's shapes on the H200 with weft's kernels compiled without wgpu's shader
# checks (note 75's default): call session45/a again, qmatmul_bench at the adapter's default
# launch shape, f32 and 8-bit activations, the shape from the uniform and as constants; the calls
# cycled through 256 MiB of copies of each weight and, for two variants, one buffer.
set -uo pipefail
timeout 60 bash bench/gpu/session.sh "$OUT/d" "copy"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/d/gemv.log"
for run in "256|" "256|--constant-shape" "256|--int8" "256|--int8 --constant-shape" "0|" "0|--int8 --constant-shape"; do
  rot=${run%%|*}; v=${run#*|}
  name="gemv-rot$rot$(echo "$v" | tr -d ' ')"
  echo "== rotate $rot MiB $v" >>"$log"
  # shellcheck disable=SC2086
  timeout 150 "$bin/qmatmul_bench" --formats Q4_0,Q4_K,Q8_0,q4_g32_asym,q3_g32_asym,q2_g32_asym \
    --shapes 8192x8192,14336x4096,4096x14336 --seconds 0.3 --rotate-mib "$rot" --json $v >"$OUT/d/$name.json" 2>>"$log"
  python3 - "$OUT/d/$name.json" <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
print(f'copy {d["copy"]["read_write_gb_per_s"]:.0f} GB/s (qmatmul_bench, 256 MiB)')
for r in d["rows"]:
    print(f'{r["format"]:>28} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s {r["fraction_of_copy"]:6.3f} x{r["copies"]} {r["kernel"]}')
for s in d["skipped"]:
    print("skipped:", s)
PY
done
grep -c "GB/s" "$log"
