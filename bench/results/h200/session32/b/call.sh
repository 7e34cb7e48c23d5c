# Call a's speed-up, separated from everything else the two binaries differ in: weft-oldattn is
# the same build as weft with shaders/attention_decode.wgsl of the parent commit. Three binaries
# interleaved twice (weft-base: the previous call's baseline); then the GEMV rates with 8-bit
# activations (rotated through 512 MiB; call b of the previous session ran out of its time
# before them) and the device's copy rate.
set -uo pipefail
o=$OUT/b; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
7b Q4_0 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000
smollm2 Q4_0 576 1536 30 9 3 49152
SPECS
for rep in 1 2; do
  for mv in "smollm2|" "smollm2|--int8-activations" "tinyllama|" "tinyllama|--int8-activations" "7b|--int8-activations"; do
    m=${mv%%|*}; v=${mv#*|}
    for b in weft-base weft-oldattn weft; do
      stamp "$b bench $m ${v:-(f32)} (run $rep)"
      # shellcheck disable=SC2086
      timeout 60 "$bin/$b" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|step)" | tee -a "$o/session.log"
    done
  done
done
stamp "GEMV, 8-bit activations"
timeout 200 "$bin/qmatmul_bench" --formats Q4_0,Q8_0,Q4_K,q4_g32_asym --shapes 8192x8192,4096x14336,14336x4096,16384x16384 \
  --wg 256 --rows 2 --lanes 32 --int8 --rotate-mib 512 --seconds 0.3 2>>"$o/qmatmul.err" | tee -a "$o/session.log"
timeout 60 bash bench/gpu/session.sh "$o" copy >/dev/null 2>&1; grep -i "copy" "$o/session.log" | tail -3
stamp done
