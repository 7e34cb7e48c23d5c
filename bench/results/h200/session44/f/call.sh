# tests/gemv_shape_constants.rs as it now is (each output within the f32 kernels' rounding of
# the other, equal-bit cases counted) on this GPU, with --nocapture for the count.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p "$OUT/f" /tmp/weft-bin
xz -dc .dev/t-gemv_shape_constants.xz >/tmp/weft-bin/t-gemv_shape_constants
chmod +x /tmp/weft-bin/t-gemv_shape_constants
timeout 300 /tmp/weft-bin/t-gemv_shape_constants --nocapture >"$OUT/f/test.log" 2>&1
grep -E "cases gave|test result|panicked" "$OUT/f/test.log"
