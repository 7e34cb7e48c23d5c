#!/usr/bin/env bash
# Fetches Dawn for Node, the npm package `webgpu` at a pinned version, through `npm pack` (its
# postinstall would download again), checks the tarball's SHA-256, and keeps the three files
# bench/dawn/run.mjs loads in target/dawn/webgpu: index.js, package.json, dist/linux-x64/dawn.node.
# Idempotent: nothing is fetched when they are there.
#
#   bash bench/dawn/fetch-webgpu.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.6.2
SHA256=77a6be6513b9f7c2e94425620ce603efb38cdc5d0393e1b31a1b0c8479330ffd
dest=${1:-target/dawn/webgpu}
[ -f "$dest/dist/linux-x64/dawn.node" ] && [ -f "$dest/index.js" ] && [ -f "$dest/package.json" ] && exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "webgpu@$VERSION" >/dev/null)
echo "$SHA256  $work/webgpu-$VERSION.tgz" | sha256sum -c --quiet
tar -xzf "$work/webgpu-$VERSION.tgz" -C "$work" package/index.js package/package.json package/dist/linux-x64/dawn.node
mkdir -p "$dest"
cp -r "$work/package/." "$dest/"
echo "webgpu $VERSION in $dest"
