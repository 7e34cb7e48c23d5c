# The decode attention's first sixteen K words a lane loaded before the query is staged too (weft)
# against V rows only (weft-v, call a's kernel) and the parent commit's kernel (weft-oldattn),
# interleaved twice; the kernel test on this GPU; a full step profile of each small model.
set -uo pipefail
o=$OUT/c; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
( while read -r name ty dim ffn layers heads kv vocab; do
    f="$models/$name-$ty.gguf"
    [ -f "$f" ] || { python3 bench/gpu/gen_quant_gguf.py "$f.tmp" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null && mv "$f.tmp" "$f"; }
  done <<'SPECS'
7b Q4_0 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000
smollm2 Q4_0 576 1536 30 9 3 49152
SPECS
) &
stamp "fused_kernels on this GPU"
timeout 150 "$bin/fused_kernels-h" --test-threads 1 2>&1 | tail -13 | tee -a "$o/session.log"
wait
for rep in 1 2; do
  for mv in "smollm2|" "smollm2|--int8-activations" "tinyllama|" "tinyllama|--int8-activations" "7b|" "7b|--int8-activations"; do
    m=${mv%%|*}; v=${mv#*|}
    for b in weft-oldattn weft-v weft; do
      stamp "$b bench $m ${v:-(f32)} (run $rep)"
      # shellcheck disable=SC2086
      timeout 60 "$bin/$b" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|step)" | tee -a "$o/session.log"
    done
  done
done
for m in smollm2 tinyllama; do
  stamp "weft bench $m --int8-activations --profile"
  timeout 60 "$bin/weft" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>>"$o/weft.err" </dev/null \
    | grep -vE "^ *tuned" | tee -a "$o/session.log"
done
stamp done
