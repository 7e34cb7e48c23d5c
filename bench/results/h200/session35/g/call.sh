# SmolLM2's decode on Dawn fell from 0.75 of native (session 32) to 0.50 (call f): with a wasm
# build with the web-profile feature (THREADS=0 WEFT_WASM_FEATURES=web-profile
# scripts/build-wasm.sh, the code of b410177), SmolLM2 and TinyLlama Q4_0 on Dawn twice without
# the profile and once with it, each beside a native weft bench; then native's step profile.
set -uo pipefail
o=$OUT/g; mkdir -p "$o"
models=/tmp/weft-models; mkdir -p "$models"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
SPECS
for r in 1 2; do
  DAWN_MODELS="smollm2-Q4_0 tinyllama-Q4_0" DAWN_TIMEOUT=150 timeout 200 bash bench/gpu/session.sh "$o/r$r" dawn
done
DAWN_ARGS=--profile DAWN_MODELS="smollm2-Q4_0 tinyllama-Q4_0" DAWN_TIMEOUT=150 timeout 200 bash bench/gpu/session.sh "$o/profile" dawn
xz -dc .dev/weft.xz >/tmp/weft && chmod +x /tmp/weft
VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /tmp/weft bench "$models/smollm2-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --profile 2>/dev/null >"$o/native-profile.txt"
