# Which GEMVs give other bits with the shape compiled in (call c: tests/gemv_shape_constants.rs
# failed on this GPU, passed on lavapipe): every case's count of differing outputs.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p "$OUT/d" /tmp/weft-bin
xz -dc .dev/t-gemv_shape_constants.xz >/tmp/weft-bin/t-gemv_shape_constants
chmod +x /tmp/weft-bin/t-gemv_shape_constants
timeout 300 /tmp/weft-bin/t-gemv_shape_constants >"$OUT/d/test.log" 2>&1
grep -E "cases:|differ|test result" "$OUT/d/test.log" | head -100
