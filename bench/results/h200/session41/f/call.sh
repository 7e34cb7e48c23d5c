# The output head's GEMV (SmolLM2 49152x576, TinyLlama and the 7B 32000x2048 / 32000x4096, q4_g32_sym
# as Q4_0 files hold it) at launch shapes tuning does not try: its tuned choice, 64-2-4, read
# 16 MB in 15.4 us (about 1 TB/s) in call d. qmatmul_bench, f32 and 8-bit activations,
# rotated through 256 MiB, one shape a run.
set -uo pipefail
bash bench/gpu/session.sh /tmp/x none >/dev/null 2>&1  # unpacks .dev and the driver libraries
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p "$OUT/f"
log="$OUT/f/sweep.log"
for int8 in "" "--int8"; do
  for shape in 64-2-4 64-4-4 128-2-4 128-4-4 256-4-4 256-8-4 64-2-8 128-4-8 256-4-8 256-2-8 256-8-8 128-2-16 256-4-16 128-1-16; do
    IFS=- read -r wg rows lanes <<<"$shape"
    # shellcheck disable=SC2086
    timeout 30 /tmp/weft-bin/qmatmul_bench --formats q4_g32_sym --shapes 49152x576,32000x2048,32000x4096 \
      --wg "$wg" --rows "$rows" --lanes "$lanes" --seconds 0.2 --rotate-mib 256 $int8 2>&1 \
      | grep "^q4_g32_sym" | sed "s/^/$shape ${int8:-f32} /" >>"$log"
  done
done
wc -l "$log"
