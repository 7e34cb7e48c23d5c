# Decode attention with each lane's first sixteen V rows loaded before the softmax (and the
# scores' K rows in one round of sixteen loads): the kernel test on the H200, then weft bench
# before (weft-base, the previous kernel) and after, interleaved twice, f32 and 8-bit
# activations, on Q4_0 GGUFs of the SmolLM2, TinyLlama and 7B shapes; step profiles; the 7B's
# attention chunk sizes.
set -uo pipefail
o=$OUT/a; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
specs="7b Q4_0 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000
smollm2 Q4_0 576 1536 30 9 3 49152"
( while read -r name ty dim ffn layers heads kv vocab; do
    python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.tmp" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null \
      && mv "$models/$name-$ty.tmp" "$models/$name-$ty.gguf"
  done <<<"$specs" ) &
stamp "fused_kernels on this GPU"
timeout 150 "$bin/fused_kernels-h" --test-threads 1 2>&1 | tail -14 | tee -a "$o/session.log"
wait
ls -la "$models" | tee -a "$o/session.log"
for rep in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for v in "" "--int8-activations"; do
      for b in weft-base weft; do
        stamp "$b bench $m ${v:-(f32)} (run $rep)"
        # shellcheck disable=SC2086
        timeout 60 "$bin/$b" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null \
          | grep -E "^(decode|step)" | tee -a "$o/session.log"
      done
    done
  done
done
for m in smollm2 tinyllama 7b; do
  for b in weft-base weft; do
    stamp "$b bench $m --int8-activations --profile"
    timeout 60 "$bin/$b" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>>"$o/weft.err" </dev/null \
      | grep -E "^(decode|step|attention|GPU total)" | tee -a "$o/session.log"
  done
done
for c in 64 128 256; do
  stamp "weft bench 7b --int8-activations --attention-chunk $c"
  timeout 60 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations --attention-chunk $c 2>>"$o/weft.err" </dev/null \
    | grep -E "^(decode|step)" | tee -a "$o/session.log"
done
stamp done
