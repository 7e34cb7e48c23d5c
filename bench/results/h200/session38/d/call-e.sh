# (d, last call) What Dawn's robustness checks and workgroup-memory zeroing cost in Chromium:
# the web-profile wasm build (carried as www/pkg), the JS API's protocol and `profileStep(20)` on
# the three files, with bench/dawn/chromium.sh's default flags and then with
# --enable-dawn-features=disable_robustness,disable_workgroup_init (which no page gets: a
# diagnostic of what the kernels lose to them); native `weft bench` of the 7B beside.
set -uo pipefail
o=$OUT/de; mkdir -p "$o"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
cr=/tmp/cr; mkdir -p "$cr"
cat /tmp/crp/part-a /tmp/crp/part-b /tmp/crp/part-c /tmp/crp/part-d .crE/part-e | xz -dc | tar -x -C "$cr" 2>&1 | tail -3 | tee -a "$o/session.log"
files="$models/smollm2-Q4_0.gguf $models/tinyllama-Q4_0.gguf $models/7b-Q4_0.gguf"
base="--enable-unsafe-webgpu --enable-features=Vulkan --use-angle=vulkan --use-vulkan=native --disable-vulkan-surface --ignore-gpu-blocklist --disable-gpu-sandbox"
for v in default unchecked default unchecked; do
  flags=$base; [ $v = unchecked ] && flags="$base --enable-dawn-features=disable_robustness,disable_workgroup_init"
  n=$(ls "$o"/*.jsonl 2>/dev/null | wc -l); f=$o/chromium$((n + 1))-$v.jsonl
  stamp "chromium.sh, profile, $v"
  LD_LIBRARY_PATH=$cr/chromium/lib PROFILE=1 TIMEOUT=200 CHROMIUM_FLAGS="$flags" \
    bash bench/dawn/chromium.sh "$cr/chromium/chromium" "$f" $files >/dev/null 2>&1
  python3 - "$f" <<'PY' | tee -a "$o/session.log"
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    p = d.get("profile") or {}
    ks = p.get("kernels_us") or []
    print(d.get("model"), "decode", d.get("decode_tok_s"), "error", (d.get("error") or "")[:70],
          "| record+submit ms", p.get("record_submit_ms"), "| kernels us", round(sum(k[1] for k in ks), 1))
    for k in ks[:5]:
        print("   ", k[0][:60], round(k[1], 1), k[2])
PY
done
stamp "weft bench --profile 7b-Q4_0.gguf"
timeout 150 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --profile 2>>"$o/weft.err" | grep -E "^(prefill|decode|step|attention|qgemv|sample)" | cut -c1-160 | tee -a "$o/session.log"
rm -f "$o"/*.chromium.log
echo "== done" | tee -a "$o/session.log"
