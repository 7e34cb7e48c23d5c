# The 7B shape at 2, 3 and 4 bits: an F16 file quantized at load (q2_g32_asym, q3_g32_asym,
# q4_g32_asym), decode with f32 and with 8-bit activations, two interleaved rounds. At this width
# the GEMVs are the 4096x14336 / 14336x4096 matrices of call a's sweep, where 8-bit activations
# read 1.34-1.53x (q3) and 1.11-1.21x (q2) the f32 rate.
set -uo pipefail
o=$OUT/e; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
stamp "write 7b F16"
python3 bench/gpu/gen_quant_gguf.py "$models/7b-F16.gguf" F16 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1 </dev/null
stamp "written"
for round in 1 2; do
  for qv in "q3_g32_asym|" "q3_g32_asym|--int8-activations" "q2_g32_asym|" "q2_g32_asym|--int8-activations" "q4_g32_asym|" "q4_g32_asym|--int8-activations"; do
    qf=${qv%%|*}; v=${qv#*|}
    [ $(( $(date +%s) - t0 )) -lt 540 ] || break 2
    stamp "weft bench 7b F16 --quantize $qf ${v:-(f32)} (round $round)"
    # shellcheck disable=SC2086
    timeout 60 "$bin/weft" bench "$models/7b-F16.gguf" --quantize "$qf" --prompt-len 128 --gen 128 --reps 3 $v 2>/dev/null </dev/null \
      | grep -E "^(load|decode|step|weights)" | tee -a "$o/session.log"
  done
done
stamp done
