# Call a's GEMV sweep gave the GGUF types (repacked on the GPU at upload) rates that moved by up
# to 4x from one run to the next while the weft formats uploaded as they are held repeated to
# 0.5 %. Here the same matrices both ways, three rounds: Q4_0 / Q8_0 / Q4_K repacked on the GPU
# against q4_g32_sym / q8_g32_sym (what Q4_0 / Q8_0 become) and Q4_K_R (its planes built on the
# CPU), 8-bit activations, rotated through 512 MiB; then decode of the 7B and TinyLlama Q4_0
# files with the blocks repacked on the GPU (default) and on the CPU, interleaved twice.
set -uo pipefail
o=$OUT/b; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
SPECS
touch "$models/.done") &
for round in 1 2 3; do
  stamp "GEMV --int8 round $round"
  timeout 100 "$bin/qmatmul_bench" --formats Q4_0,q4_g32_sym,Q8_0,q8_g32_sym,Q4_K,Q4_K_R \
    --shapes 8192x8192,4096x14336,16384x16384 --wg 256 --rows 2 --lanes 32 --int8 \
    --rotate-mib 512 --seconds 0.3 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | tee -a "$o/session.log"
done
while [ ! -f "$models/.done" ]; do sleep 2; done
for round in 1 2; do
  for m in 7b tinyllama; do
    for on in gpu cpu; do
      stamp "weft bench $m Q4_0 --int8-activations --quantize-on $on (round $round)"
      timeout 90 "$bin/weft" bench "$models/$m-Q4_0.gguf" --quantize-on "$on" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>>"$o/weft.err" </dev/null \
        | grep -E "^(load|decode|step)" | tee -a "$o/session.log"
    done
  done
done
stamp done
