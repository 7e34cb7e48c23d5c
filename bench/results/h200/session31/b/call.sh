# The second call of the session: the first found no Vulkan adapter on the H200 (the NVIDIA
# ICD's library needs libglvnd's, carried here in .gl beside libvulkan1). The GEMV kernel tests
# on the GPU; the decode step with the SwiGLU as the gate/up GEMV's epilogue (default) against
# the down GEMV's staging (--glu-in-down), f32 and 8-bit activations, on the GGUFs of the first
# call's llama-bench runs; GEMV rates rotated through 512 MiB with two and four chunks a lane.
set -uo pipefail
o=$OUT/b; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
# The Vulkan loader and the driver's ICD: where this machine keeps them.
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] || icd=$(find / -name 'nvidia_icd*.json' -not -path '/proc/*' 2>/dev/null | head -1)
export VK_DRIVER_FILES=$icd __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
{ echo "icd: $icd"; cat "$icd"; ldconfig -p | grep -E 'vulkan|GLdispatch|GLX_nvidia|nvidia-glcore' ; } 2>&1 | tee "$o/vulkan.log"
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
# copy + the kernel tests (fused_kernels on this GPU), then the models with the variants.
xz -dc .dev/weft.xz >/tmp/weft-probe && chmod +x /tmp/weft-probe
if ! VK_LOADER_DEBUG=error,warn /tmp/weft-probe bench tests/fixtures/llama3-tiny/model.gguf --prompt-len 8 --gen 8 --reps 1 >>"$o/vulkan.log" 2>&1; then
  tail -30 "$o/vulkan.log"; echo "no adapter: stopping"; exit 1
fi
tail -12 "$o/vulkan.log"
timeout 60 bash bench/gpu/session.sh "$o" "copy tests"
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$models"
export PYTHONPATH=/tmp/site
all="|--glu-in-down|--int8-activations|--int8-activations --glu-in-down"
while read -r name ty dim ffn layers heads kv vocab variants; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
  [ "$variants" = all ] && variants=$all
  IFS='|' read -r -a vs <<<"$variants"
  first=--profile
  for v in "${vs[@]}"; do
    stamp "weft bench $name $ty ${v:-(defaults)}"
    # shellcheck disable=SC2086
    timeout 60 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $first $v 2>>"$o/weft-$name-$ty.err" </dev/null | tee -a "$o/session.log"
    first=
  done
done <<'SPECS'
7b Q4_0 4096 14336 32 32 8 32000 all
tinyllama Q4_0 2048 5632 22 32 4 32000 |--glu-in-down|--int8-activations|--int8-activations --glu-in-down
smollm2 Q4_0 576 1536 30 9 3 49152 |--glu-in-down|--int8-activations
tinyllama Q8_0 2048 5632 22 32 4 32000 |--glu-in-down|--int8-activations
7b Q8_0 4096 14336 32 32 8 32000 |--glu-in-down|--int8-activations
7b Q4_K_M 4096 14336 32 32 8 32000 |--glu-in-down|--int8-activations
tinyllama Q4_K_M 2048 5632 22 32 4 32000 |--int8-activations
SPECS
stamp "decode with four chunks a lane"
for m in 7b-Q4_0 tinyllama-Q4_0 smollm2-Q4_0; do
  for v in "" "--int8-activations"; do
    stamp "WEFT_GEMV_CHUNKS=4 weft bench $m ${v:-(defaults)}"
    # shellcheck disable=SC2086
    WEFT_GEMV_CHUNKS=4 timeout 60 "$bin/weft" bench "$models/$m.gguf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft-c4.err" | grep -E "^(decode|prefill|step)" | tee -a "$o/session.log"
  done
done
stamp "GEMV, two chunks a lane then four"
for c in 2 4; do
  WEFT_GEMV_CHUNKS=$c QFORMATS=Q4_0,Q8_0,Q4_K,q4_g32_asym,q3_g32_asym,q2_g32_asym QCONFIGS="256,2,32" QROTATE=512 QINT8=1 \
  QSHAPES=4096x4096,8192x8192,14336x4096,4096x14336,16384x16384 timeout 100 bash bench/gpu/session.sh "$o/c$c" "gemv"
done
stamp done
