#!/usr/bin/env bash
# Sets up, builds the wasm and serves the demo page (with HTTP Range support).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build-wasm.sh
mkdir -p models
exec node scripts/serve.mjs --root www --mount /models=models --port "${PORT:-8080}"
