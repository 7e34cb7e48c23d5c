#!/usr/bin/env bash
# Sets up (fetching the default model), builds the wasm and serves the chat demo on
# http://127.0.0.1:8080/ with HTTP Range support. The page imports the JS API from js/ and the
# wasm from www/pkg; the model is served from models/.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build-wasm.sh
mkdir -p models
echo "[demo] chat demo on http://127.0.0.1:${PORT:-8080}/"
# --coop: cross-origin isolation, so that the CPU backend runs its threaded build.
exec node scripts/serve.mjs --root www --mount /js=js --mount /models=models --port "${PORT:-8080}" --coop
