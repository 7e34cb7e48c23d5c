#!/usr/bin/env bash
# Packs what bench/dawn/run.mjs needs on a machine without Node into one file for the GPU
# machine's carry folder: this machine's node binary, Dawn's three files (fetch-webgpu.sh), the
# wasm build (www/pkg: run scripts/build-wasm.sh first), js/, scripts/serve.mjs, bench/dawn and
# the tiny Llama fixture (greedy ids against native).
# bench/gpu/session.sh's `dawn` step unpacks it. Idempotent: an archive newer than every input
# is kept as it is. Fails when the archive is over LIMIT_MB (default 30).
#
#   bash bench/dawn/pack.sh [OUT]     (default .dev/weft-dawn.txz; not *.xz, which session.sh
#                                      unpacks as a single binary)
set -euo pipefail
cd "$(dirname "$0")/../.."

out=${1:-.dev/weft-dawn.txz}
node=$(readlink -f "${NODE:-$(command -v node)}")
limit_mb=${LIMIT_MB:-30}
bash bench/dawn/fetch-webgpu.sh
[ -f www/pkg/weft_bg.wasm ] || { echo "no www/pkg/weft_bg.wasm: run scripts/build-wasm.sh first" >&2; exit 1; }

fixture=tests/fixtures/llama3-tiny/model.gguf
inputs=("$node" target/dawn/webgpu www/pkg/weft.js www/pkg/weft_bg.wasm js scripts/serve.mjs bench/dawn "$fixture")
if [ -f "$out" ] && [ -z "$(find "${inputs[@]}" -newer "$out" -print -quit)" ]; then
  echo "$out is up to date ($(stat -c %s "$out") bytes)"
  exit 0
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/weft-dawn
mkdir -p "$root/www/pkg" "$root/scripts" "$root/bench" "$root/target/dawn" "$root/$(dirname "$fixture")"
# Symbols and debug info off both binaries: 2.5 MB less in the archive (29.6 -> 27.1 MB). The dynamic symbols
# stay (the addon links against node's N-API ones).
strip -o "$root/node" "$node"
cp -r target/dawn/webgpu "$root/target/dawn/"
strip --strip-unneeded "$root/target/dawn/webgpu/dist/linux-x64/dawn.node"
cp www/pkg/weft.js www/pkg/weft_bg.wasm "$root/www/pkg/"
cp -r js "$root/"
cp scripts/serve.mjs "$root/scripts/"
cp -r bench/dawn "$root/bench/"
cp "$fixture" "$root/$fixture"
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - weft-dawn | xz -9 -T2 >"$out.tmp"
mv "$out.tmp" "$out"
bytes=$(stat -c %s "$out")
echo "$out: $bytes bytes (node $("$node" --version), webgpu $(sed -n 's/.*"version": "\(.*\)".*/\1/p' target/dawn/webgpu/package.json))"
if [ "$bytes" -gt $((limit_mb * 1024 * 1024)) ]; then
  echo "$out is over $limit_mb MiB" >&2
  exit 1
fi
