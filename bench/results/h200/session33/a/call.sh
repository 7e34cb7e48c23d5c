# 8-bit activations (DP4) at 2 and 3 bits: the GEMV rates of the issue's six formats with f32 and
# with 8-bit activations, rotated through 512 MiB (int8, f32, int8 again for the spread), then
# decode of TinyLlama- and SmolLM2-shape F16 files quantized at load to q3_g32_asym and
# q2_g32_asym, f32 and 8-bit activations; the device's copy rate.
set -uo pipefail
o=$OUT/a; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
# The F16 files are written in the background while the GEMVs run.
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 F16 576 1536 30 9 3 49152
tinyllama F16 2048 5632 22 32 4 32000
SPECS
touch "$models/.done") &
gemv() {
  stamp "GEMV $*"
  timeout 150 "$bin/qmatmul_bench" --formats Q4_0,Q8_0,Q4_K,q4_g32_asym,q3_g32_asym,q2_g32_asym \
    --shapes 8192x8192,4096x14336,14336x4096,16384x16384 --wg 256 --rows 2 --lanes 32 \
    --rotate-mib 512 --seconds 0.3 "$@" 2>>"$o/qmatmul.err" | tee -a "$o/session.log"
}
gemv --int8
gemv
gemv --int8
while [ ! -f "$models/.done" ]; do sleep 2; done
for m in smollm2 tinyllama; do
  for qv in "q3_g32_asym|" "q3_g32_asym|--int8-activations" "q2_g32_asym|" "q2_g32_asym|--int8-activations" "q4_g32_asym|" "q4_g32_asym|--int8-activations"; do
    qf=${qv%%|*}; v=${qv#*|}
    stamp "weft bench $m F16 --quantize $qf ${v:-(f32)}"
    # shellcheck disable=SC2086
    timeout 90 "$bin/weft" bench "$models/$m-F16.gguf" --quantize "$qf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null \
      | grep -E "^(load|decode|step|prefill)" | tee -a "$o/session.log"
  done
done
timeout 60 bash bench/gpu/session.sh "$o" copy >/dev/null 2>&1; grep -i "copy" "$o/session.log" | tail -3
stamp done
