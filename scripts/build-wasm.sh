#!/usr/bin/env bash
# Builds the release wasm and its JS bindings into www/pkg.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --target wasm32-unknown-unknown --lib
wasm-bindgen --target web --out-dir www/pkg target/wasm32-unknown-unknown/release/weft.wasm
# binaryen from npm (Debian's build produces broken output for this module). The feature flags
# match what rustc enables by default for wasm32-unknown-unknown, plus SIMD128 (.cargo/config.toml).
node_modules/.bin/wasm-opt -O3 --enable-simd \
  --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  www/pkg/weft_bg.wasm -o www/pkg/weft_bg.wasm
raw=$(stat -c %s www/pkg/weft_bg.wasm)
gz=$(gzip -9 -c www/pkg/weft_bg.wasm | wc -c)
echo "wasm: ${raw} bytes raw, ${gz} bytes gzipped"
