#!/usr/bin/env bash
# Every test: native (cargo test on the system's Vulkan adapter; lavapipe on a machine without a
# GPU), in headless Chromium (Playwright, WebGPU on SwiftShader), and in Firefox ESR and WebKitGTK
# (Playwright's runner driving them through tests/cross-browser).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Mesa's window-system probing complains without a runtime directory; compute needs none.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# A clean build gains nothing from incremental caches, which take as much disk as the build.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

echo "== native tests (cargo test)"
cargo test 2>&1 | tee "$logs/cargo.log"
echo "== native GPU kernels on the GL fallback backend"
WEFT_BACKEND=gl cargo test --test gpu_kernels 2>&1 | tee -a "$logs/cargo.log"

echo "== wasm build"
bash scripts/build-wasm.sh

echo "== the JS API on Dawn under Node (SwiftShader's Vulkan driver from Debian's chromium): greedy ids against native"
node bench/dawn/run.mjs --dawn-icd /usr/lib/chromium/vk_swiftshader_icd.json --check-only --check 16 \
  --native target/debug/weft tests/fixtures/llama3-tiny/model.gguf

echo "== every shader variant through Dawn's WGSL compiler (Tint, Chrome's), GPU-only kernels included"
node tests/tint/check.mjs --weft target/debug/weft

echo "== browser tests (Playwright, headless Chromium)"
npx playwright test 2>&1 | tee "$logs/playwright.log"

echo "== other engines (tests/cross-browser: Firefox ESR on lavapipe, WebKitGTK without WebGPU)"
npx playwright test -c tests/cross-browser/playwright.config.ts 2>&1 | tee -a "$logs/playwright.log"

native=$(grep -Eo 'test result: ok\. [0-9]+ passed' "$logs/cargo.log" | awk '{s+=$4} END {print s+0}')
browser=$(grep -Eo '^ *[0-9]+ passed' "$logs/playwright.log" | awk '{s+=$1} END {print s+0}')
echo "native: ${native} passed; browser: ${browser} passed"
if [ "$native" -eq 0 ] || [ "$browser" -eq 0 ]; then
  echo "no tests ran on one of the targets" >&2
  exit 1
fi
echo "$((native + browser)) passed, 0 failed"
