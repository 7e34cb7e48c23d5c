#!/usr/bin/env bash
# Assembles the publishable npm package in dist/npm (the JS API from js/, the wasm and its bindings
# from www/pkg and, for cross-origin isolated pages, www/pkg-threads; the chat-template renderer
# from www/pkg-chat) and packs it: dist/weft-VERSION.tgz, copied to dist/weft.tgz for the consumer test.
# The root package.json is the development package and stays private.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -f www/pkg/weft_bg.wasm ] && [ -f www/pkg-threads/weft_bg.wasm ] && [ -f www/pkg-chat/weft_chat_bg.wasm ] || bash scripts/build-wasm.sh
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

rm -rf dist/npm
mkdir -p dist/npm/js dist/npm/pkg dist/npm/pkg-threads dist/npm/pkg-chat
cp js/index.js js/direct.js js/embed.js js/openai.js js/worker.js js/cpu-worker.js js/index.d.ts js/direct.d.ts dist/npm/js/
cp www/pkg/weft.js www/pkg/weft.d.ts www/pkg/weft_bg.wasm www/pkg/weft_bg.wasm.d.ts dist/npm/pkg/
cp www/pkg-threads/weft.js www/pkg-threads/weft.d.ts www/pkg-threads/weft_bg.wasm www/pkg-threads/weft_bg.wasm.d.ts dist/npm/pkg-threads/
cp www/pkg-chat/weft_chat.js www/pkg-chat/weft_chat.d.ts www/pkg-chat/weft_chat_bg.wasm www/pkg-chat/weft_chat_bg.wasm.d.ts dist/npm/pkg-chat/
cp README.md dist/npm/

node - "$version" <<'JS'
const fs = require('node:fs');
const root = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const pkg = {
  name: 'weft',
  version: process.argv[2],
  description: root.description,
  license: root.license,
  type: 'module',
  main: './js/index.js',
  types: './js/index.d.ts',
  exports: {
    '.': { types: './js/index.d.ts', default: './js/index.js' },
    './direct': { types: './js/direct.d.ts', default: './js/direct.js' },
    './worker.js': './js/worker.js',
    './cpu-worker.js': './js/cpu-worker.js',
    './weft_bg.wasm': './pkg/weft_bg.wasm',
    './threads/weft_bg.wasm': './pkg-threads/weft_bg.wasm',
    './chat/weft_chat_bg.wasm': './pkg-chat/weft_chat_bg.wasm',
    './package.json': './package.json',
  },
  files: [
    'js/index.js', 'js/direct.js', 'js/embed.js', 'js/openai.js', 'js/worker.js', 'js/cpu-worker.js', 'js/index.d.ts', 'js/direct.d.ts',
    'pkg/weft.js', 'pkg/weft.d.ts', 'pkg/weft_bg.wasm', 'pkg/weft_bg.wasm.d.ts',
    'pkg-threads/weft.js', 'pkg-threads/weft.d.ts', 'pkg-threads/weft_bg.wasm', 'pkg-threads/weft_bg.wasm.d.ts',
    'pkg-chat/weft_chat.js', 'pkg-chat/weft_chat.d.ts', 'pkg-chat/weft_chat_bg.wasm', 'pkg-chat/weft_chat_bg.wasm.d.ts',
  ],
  sideEffects: false,
  keywords: ['webgpu', 'wasm', 'llm', 'gguf', 'inference', 'quantization'],
};
fs.writeFileSync('dist/npm/package.json', JSON.stringify(pkg, null, 2) + '\n');
JS

tarball=$(cd dist/npm && npm pack --silent --pack-destination ..)
cp "dist/$tarball" dist/weft.tgz
size=$(stat -c %s "dist/$tarball")
raw=$(stat -c %s www/pkg/weft_bg.wasm)
gz=$(gzip -9 -c www/pkg/weft_bg.wasm | wc -c)
echo "npm package: dist/$tarball, ${size} bytes; wasm ${raw} bytes raw, ${gz} bytes gzipped"
