# (b, call 8, second part; calls.sh says how the calls ran) Chromium from the five parts (four in
# /tmp/crp from calls 4-7, the last carried as .crE), unpacked outside / with its libraries on
# LD_LIBRARY_PATH; bench/dawn/chromium.sh runs the JS API's protocol (bench/dawn/protocol.js)
# on each model (the wasm build carried as www/pkg), then native greedy ids of the same prompt.
# If Chromium gives no result with the default flags, once more with ANGLE left to choose.
set -uo pipefail
o=$OUT/b4; mkdir -p "$o"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
ls -la /tmp/crp .crE www/pkg "$models" 2>&1 | tee -a "$o/session.log"
cr=/tmp/cr; mkdir -p "$cr"
cat /tmp/crp/part-a /tmp/crp/part-b /tmp/crp/part-c /tmp/crp/part-d .crE/part-e | xz -dc | tar -x -C "$cr" 2>&1 | tail -3 | tee -a "$o/session.log"
export LD_LIBRARY_PATH=$cr/chromium/lib
stamp "libraries Chromium does not find"
ldd "$cr/chromium/chromium" | grep "not found" | tee -a "$o/session.log"
"$cr/chromium/chromium" --version 2>&1 | tee -a "$o/session.log"
files="$models/smollm2-Q4_0.gguf $models/tinyllama-Q4_0.gguf $models/7b-Q4_0.gguf"
stamp "chromium.sh (default flags)"
TIMEOUT=200 bash bench/dawn/chromium.sh "$cr/chromium/chromium" "$o/chromium.jsonl" $files 2>&1 | tail -20 | tee -a "$o/session.log"
if ! grep -q decode_tok_s_median "$o/chromium.jsonl" 2>/dev/null; then
  stamp "chromium.sh (ANGLE's default backend)"
  CHROMIUM_FLAGS="--enable-unsafe-webgpu --enable-features=Vulkan --ignore-gpu-blocklist --disable-gpu-sandbox" TIMEOUT=120 \
    bash bench/dawn/chromium.sh "$cr/chromium/chromium" "$o/chromium2.jsonl" $files 2>&1 | tail -20 | tee -a "$o/session.log"
fi
for f in $files; do
  echo "native ids: $(timeout 60 "$bin/weft" generate "$f" --prompt "The capital of France is" --max-tokens 16 --ids 2>>"$o/weft.err")" | tee -a "$o/session.log"
done
grep -E "GPU|WebGPU|Vulkan|vulkan|gpu_init|ERROR" "$o"/chromium*.jsonl.chromium.log 2>/dev/null | head -40 | tee -a "$o/session.log"
echo "== done" | tee -a "$o/session.log"
