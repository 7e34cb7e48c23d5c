# SmolLM2 on Dawn runs steadily slow in some processes and fast in others (note 54: a process's
# three reps agree, processes differ). Eight processes of bench/dawn/run.mjs with --profile (the
# web-profile wasm build of 859114c's code) on SmolLM2 Q4_0, prompt 128 + 128, median of 3: each
# one's decode rate beside its step profile (the GPU time of each kernel and the CPU's record +
# submit and wait), to see which part differs between slow and fast processes.
set -uo pipefail
o=$OUT/k; mkdir -p "$o"
models=/tmp/weft-models; mkdir -p "$models"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
python3 bench/gpu/gen_quant_gguf.py "$models/smollm2-Q4_0.gguf" Q4_0 576 1536 30 9 3 49152 >>"$o/models.log" 2>&1 </dev/null
tar -xJf .dev/weft-dawn.txz -C /tmp
d=/tmp/weft-dawn
for p in 1 2 3 4 5 6 7 8; do
  echo "== process $p" | tee -a "$o/session.log"
  timeout 60 $d/node $d/bench/dawn/run.mjs --webgpu $d/target/dawn/webgpu --check 0 --profile "$models/smollm2-Q4_0.gguf" 2>"$o/run-$p.err" \
    | tee -a "$o/run.jsonl" | python3 -c "import sys,json
for l in sys.stdin:
    r=json.loads(l); print('decode', r.get('decode_tok_s'), r.get('error',''))" | tee -a "$o/session.log"
  grep '^profile' "$o/run-$p.err" | tee -a "$o/session.log"
done
