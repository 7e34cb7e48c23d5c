# weft's JS API on Dawn (bench/dawn/run.mjs over .dev/weft-dawn.txz: the wasm build of 2820f4a,
# whose code is e792d6d's) beside a native weft bench of the same file right before it, on the
# SmolLM2, TinyLlama and 7B Q4_0 files; the greedy ids of the tiny fixture against native first.
set -uo pipefail
o=$OUT/f; mkdir -p "$o"
models=/tmp/weft-models; mkdir -p "$models"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
SPECS
DAWN_TIMEOUT=150 timeout 480 bash bench/gpu/session.sh "$o" dawn
