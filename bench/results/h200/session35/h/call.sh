# Which change made SmolLM2's decode on Dawn fall (note 53): the JS API on Dawn with three wasm
# builds in one call, interleaved, two rounds: 276a0f4 (session 32's, 0.75 of native there),
# c80a606 (before the subgroup softmax of note 51) and this code (the web-profile build of
# b410177's code, .dev/weft-dawn.txz); SmolLM2 and TinyLlama Q4_0, prompt 128 + 128, median of
# 3, no id check; a native weft bench of each file first.
set -uo pipefail
o=$OUT/h; mkdir -p "$o"
models=/tmp/weft-models; mkdir -p "$models"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
SPECS
xz -dc .dev/weft.xz >/tmp/weft && chmod +x /tmp/weft
tar -xJf .dev/weft-dawn.txz -C /tmp
d=/tmp/weft-dawn
for c in 276a0f4 c80a606; do
  mkdir -p /tmp/old-$c && tar -xzf .dev/old-$c.tgz -C /tmp/old-$c && ln -sfn $d/target /tmp/old-$c/target
done
for m in smollm2 tinyllama; do
  echo "== native $m" | tee -a "$o/session.log"
  /tmp/weft bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 2>/dev/null | grep -E "^decode|^prefill" | tee -a "$o/session.log"
done
for round in 1 2; do
  for m in smollm2 tinyllama; do
    for b in 276a0f4 c80a606 current; do
      dir=/tmp/old-$b; [ $b = current ] && dir=$d
      echo "== dawn $b $m (round $round)" | tee -a "$o/session.log"
      timeout 150 $d/node $dir/bench/dawn/run.mjs --webgpu $d/target/dawn/webgpu --check 0 "$models/$m-Q4_0.gguf" 2>>"$o/run.err" \
        | tee -a "$o/run.jsonl" | python3 -c "import sys,json
for l in sys.stdin:
    r=json.loads(l); print('decode', r.get('decode_tok_s_median'), 'prefill', r.get('prefill_tok_s_median'), r.get('error',''))" | tee -a "$o/session.log"
    done
  done
done
