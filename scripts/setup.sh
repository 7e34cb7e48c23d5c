#!/usr/bin/env bash
# Installs everything the build, the demo and the tests need. Idempotent: each step is skipped
# when its result is already present, so rerunning costs seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen pin in Cargo.toml

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

packages=()
[ -x /usr/bin/chromium ] || packages+=(chromium)
compgen -G '/usr/share/vulkan/icd.d/lvp_icd*.json' >/dev/null || packages+=(mesa-vulkan-drivers)
# The other engines of tests/cross-browser: Firefox ESR (WebGPU by prefs), WebKitGTK's driver and
# MiniBrowser, and a virtual X display for MiniBrowser.
[ -x /usr/bin/firefox-esr ] || packages+=(firefox-esr)
[ -x /usr/bin/WebKitWebDriver ] || packages+=(webkit2gtk-driver)
command -v Xvfb >/dev/null || packages+=(xvfb)
if [ ${#packages[@]} -gt 0 ]; then
  say "apt-get install ${packages[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${packages[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
# The threaded wasm build rebuilds std with atomics (-Z build-std): it needs std's source.
if ! rustup component list --installed | grep -q '^rust-src'; then
  say "rustup component add rust-src"
  rustup component add rust-src
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q " ${WASM_BINDGEN_VERSION}\$"; then
  say "cargo install wasm-bindgen-cli ${WASM_BINDGEN_VERSION} (a few minutes, once)"
  cargo install wasm-bindgen-cli --version "${WASM_BINDGEN_VERSION}"
fi

# npm ci only when the lockfile changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
fi
# The folder-loading spec writes the default model as a Hugging Face folder with these.
if ! python3 -c 'import numpy, safetensors' 2>/dev/null; then
  say "pip install numpy safetensors"
  python3 -m pip install --quiet "numpy>=1.26" "safetensors>=0.4"
fi
bash scripts/fetch-model.sh
bash scripts/fetch-embed-model.sh
bash scripts/fetch-tokenizers.sh
bash scripts/fetch-llama-vocab.sh
# Dawn for Node (npm `webgpu`): the JS API's check in scripts/test.sh and bench/dawn.
bash bench/dawn/fetch-webgpu.sh
say "ready"
