#!/usr/bin/env bash
# The JS API's decode in headless Chromium on this machine's GPU: bench/dawn/page.js (the
# protocol of bench/dawn/run.mjs, through js/index.js, its worker and the wasm build in www/pkg)
# served by bench/dawn/serve.py, which needs only Python, so the GPU machine runs it without
# Node. One JSON line per model in OUT (bench/dawn/protocol.js's keys), and Chromium's log
# beside it (OUT.chromium.log).
#
#   bash bench/dawn/chromium.sh CHROMIUM OUT MODEL.gguf...   (the models in one folder)
#
# Environment: PROMPT_LEN, GEN, REPS (128, 128, 3), CHECK (greedy ids to report, 16), PROFILE
# (1: the step's profile too, from a wasm build with WEFT_WASM_FEATURES=web-profile), PORT
# (4392), TIMEOUT (seconds for all models, 900), CHROMIUM_FLAGS (default: WebGPU on the
# GPU's Vulkan driver without a display; VK_DRIVER_FILES names the driver).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: bash bench/dawn/chromium.sh CHROMIUM OUT MODEL.gguf..." >&2; exit 2; }
cd "$(dirname "$0")/../.."
chromium=$1 out=$2
shift 2
port=${PORT:-4392}
mdir=$(dirname "$(readlink -f "$1")")
models=$(for m in "$@"; do printf '/m/%s,' "$(basename "$m")"; done)
flags=${CHROMIUM_FLAGS:---enable-unsafe-webgpu --enable-features=Vulkan --use-angle=vulkan --use-vulkan=native --disable-vulkan-surface --ignore-gpu-blocklist --disable-gpu-sandbox}
python3 bench/dawn/serve.py "$port" "$out" /=www /js=js /bench=bench/dawn "/m=$mdir" &
server=$!
profile=$(mktemp -d)
trap 'kill $server ${browser:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$profile"' EXIT
url="http://127.0.0.1:$port/bench/page.html?models=${models%,}&promptLen=${PROMPT_LEN:-128}&gen=${GEN:-128}&reps=${REPS:-3}&check=${CHECK:-16}&profile=${PROFILE:-0}"
# A Chromium started first on the GPU machine sometimes finds no WebGPU adapter, and the next one
# does (bench/NOTES.md, note 60): then the page's line is that error alone, and it runs once more.
for attempt in 1 2; do
  rm -f "$out" "$out.done"
  # shellcheck disable=SC2086
  "$chromium" --headless=new --no-sandbox --user-data-dir="$profile" --no-first-run --disable-sync --disable-dev-shm-usage \
    --disable-background-networking --disable-component-update --enable-logging=stderr --v=0 $flags "$url" \
    >"$out.chromium.log" 2>&1 &
  browser=$!
  for _ in $(seq $(( ${TIMEOUT:-900} * 2 ))); do
    [ -e "$out.done" ] && break
    kill -0 $browser 2>/dev/null || { echo "Chromium exited (status: see $out.chromium.log)" >&2; break; }
    sleep 0.5
  done
  kill $browser 2>/dev/null; wait $browser 2>/dev/null
  [ -e "$out.done" ] || echo "no result within ${TIMEOUT:-900} s" >&2
  rm -f "$out.done"
  [ "$attempt" = 1 ] && [ "$(wc -l <"$out" 2>/dev/null)" = 1 ] && grep -q 'no GPU adapter found' "$out" || break
  echo "no WebGPU adapter in this Chromium: once more" >&2
  rm -rf "$profile"; profile=$(mktemp -d)
done
[ -s "$out" ] && ! grep -q '"error"' "$out"
