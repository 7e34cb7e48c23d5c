# The fourth call: the SwiGLU epilogue at a launch shape tuned for it at load (the tuned
# "(SwiGLU epilogue)" lines), against the down GEMV's staging, interleaved twice, f32 and 8-bit
# activations, on the 7B and TinyLlama Q4_0 files and the 7B Q4_K_M file.
set -uo pipefail
o=$OUT/d; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
xz -dc .dev/weft.xz >"$bin/weft" && chmod +x "$bin/weft"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
  for rep in 1 2; do
    for v in "" "--glu-in-down" "--int8-activations" "--int8-activations --glu-in-down"; do
      stamp "weft bench $name $ty ${v:-(defaults)} (run $rep)"
      # shellcheck disable=SC2086
      timeout 60 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|step|  tuned)" | tee -a "$o/session.log"
    done
  done
done <<'SPECS'
7b Q4_0 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_K_M 4096 14336 32 32 8 32000
SPECS
stamp done
