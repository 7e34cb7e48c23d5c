# (c, last call) Where a decode step goes in Chromium: the wasm build with the web-profile
# feature (carried as www/pkg), the JS API's protocol and then `profileStep(20)` (the step's
# recording and submission on the worker's clock, the wait for its result, each kernel's GPU time
# in a pass of its own; `--enable-webgpu-developer-features` for timestamps Chrome does not round
# to 100 µs) on the SmolLM2 and TinyLlama shaped files, twice; native `weft bench --profile` of
# the same files beside.
set -uo pipefail
o=$OUT/ce; mkdir -p "$o"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
cr=/tmp/cr; mkdir -p "$cr"
cat /tmp/crp/part-a /tmp/crp/part-b /tmp/crp/part-c /tmp/crp/part-d .crE/part-e | xz -dc | tar -x -C "$cr" 2>&1 | tail -3 | tee -a "$o/session.log"
files="$models/smollm2-Q4_0.gguf $models/tinyllama-Q4_0.gguf"
for r in 1 2; do
  stamp "chromium.sh, profile, round $r"
  LD_LIBRARY_PATH=$cr/chromium/lib PROFILE=1 TIMEOUT=200 \
    CHROMIUM_FLAGS="--enable-unsafe-webgpu --enable-features=Vulkan --use-angle=vulkan --use-vulkan=native --disable-vulkan-surface --ignore-gpu-blocklist --disable-gpu-sandbox --enable-webgpu-developer-features" \
    bash bench/dawn/chromium.sh "$cr/chromium/chromium" "$o/chromium$r.jsonl" $files >/dev/null 2>&1
  python3 - "$o/chromium$r.jsonl" <<'PY' | tee -a "$o/session.log"
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    p = d.get("profile") or {}
    print(d.get("model"), "decode", d.get("decode_tok_s"), "error", d.get("error"),
          "| profile: dispatches", p.get("dispatches"), "record+submit ms", p.get("record_submit_ms"), "wait ms", p.get("wait_ms"))
    for k in (p.get("kernels_us") or [])[:8]:
        print("   ", k)
PY
done
for f in $files; do
  stamp "weft bench --profile $(basename "$f")"
  timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --profile 2>>"$o/weft.err" | grep -v "^weights" | head -24 | tee -a "$o/session.log"
done
rm -f "$o"/*.chromium.log
echo "== done" | tee -a "$o/session.log"
