# The decode attention's chunk for heads of 64 dimensions, now that a lane's V rows are loaded
# before the softmax: chunks of 64, 128 and 256 positions (one workgroup a head at 256, the
# default) on the SmolLM2 and TinyLlama Q4_0 files, f32 and 8-bit activations, interleaved twice.
set -uo pipefail
o=$OUT/d; mkdir -p "$o"
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
tinyllama Q4_0 2048 5632 22 32 4 32000
smollm2 Q4_0 576 1536 30 9 3 49152
SPECS
for rep in 1 2; do
  for mv in "smollm2|" "smollm2|--int8-activations" "tinyllama|" "tinyllama|--int8-activations"; do
    m=${mv%%|*}; v=${mv#*|}
    for c in 64 128 256; do
      stamp "weft bench $m ${v:-(f32)} --attention-chunk $c (run $rep)"
      # shellcheck disable=SC2086
      timeout 60 "$bin/weft" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $v --attention-chunk $c 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|step)" | tee -a "$o/session.log"
    done
  done
done
stamp done
