# Launch shapes tuned with 8-bit activations: the 7B shape quantized at load to q3_g32_asym,
# q2_g32_asym and q4_g32_asym, decode with 8-bit activations, the build of call e (shapes tuned
# with f32 activations: weft-c9e340c) and this one (weft) interleaved; the tuned shapes printed.
set -uo pipefail
o=$OUT/f; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
python3 bench/gpu/gen_quant_gguf.py "$models/7b-F16.gguf" F16 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1 </dev/null
stamp "written"
for qf in q3_g32_asym q2_g32_asym q4_g32_asym; do
  for b in weft-c9e340c weft; do
    [ $(( $(date +%s) - t0 )) -lt 400 ] || break 2
    stamp "$b bench 7b F16 --quantize $qf --int8-activations"
    timeout 60 "$bin/$b" bench "$models/7b-F16.gguf" --quantize "$qf" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>/dev/null </dev/null \
      | grep -E "^(decode|  tuned)" | tee -a "$o/session.log"
  done
done
stamp done
