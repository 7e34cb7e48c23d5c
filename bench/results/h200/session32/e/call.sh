# After the repack shader's fix (its first run here, with the previous build, failed on Dawn:
# "mixing '|' and '<<' requires parenthesis"): every shader variant through Dawn's Tint on the
# H200 (f16 and subgroups there), then weft's JS API on Dawn (bench/dawn/run.mjs from
# .dev/weft-dawn.txz, this commit's wasm build) beside native wgpu on the SmolLM2, TinyLlama and
# 7B Q4_0 files.
set -uo pipefail
o=$OUT/e; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
models=/tmp/weft-models; mkdir -p "$models"
( while read -r name ty dim ffn layers heads kv vocab; do
    f="$models/$name-$ty.gguf"
    [ -f "$f" ] || { python3 bench/gpu/gen_quant_gguf.py "$f.tmp" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null && mv "$f.tmp" "$f"; }
  done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
SPECS
) &
mkdir -p /tmp/weft-bin && xz -dc .dev/weft.xz >/tmp/weft-bin/weft && chmod +x /tmp/weft-bin/weft
tar -xJf .dev/weft-dawn.txz -C /tmp
echo "== tint on the H200" | tee -a "$o/session.log"
timeout 120 /tmp/weft-dawn/node tests/tint/check.mjs --weft /tmp/weft-bin/weft --webgpu /tmp/weft-dawn/target/dawn/webgpu \
  --icd "$VK_DRIVER_FILES" 2>&1 | tail -8 | tee -a "$o/session.log"
wait
DAWN_TIMEOUT=150 timeout 480 bash bench/gpu/session.sh "$o" dawn
