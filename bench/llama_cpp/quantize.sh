#!/usr/bin/env bash
# usage: quantize.sh TYPE OUT.gguf [SOURCE.gguf]
# llama.cpp's own pipeline with an importance matrix: `llama-imatrix` over data/calibration.txt
# (the text weft calibrates on; made once per source, target/llama.cpp/imatrix-NAME.gguf), then
# `llama-quantize --allow-requantize --imatrix` to TYPE (Q2_K, Q3_K_S, IQ3_XXS, ...). Tensors
# whose rows are not a whole number of 256-weight super-blocks fall back to the types
# llama-quantize picks for them, as it does for any user. Prints llama-quantize's log to stderr.
set -euo pipefail
TYPE=$1
OUT=$(realpath -m "$2")
cd "$(dirname "$0")/../.."
SOURCE=$(realpath "${3:-models/SmolLM2-135M-Instruct.Q4_1.gguf}")
BIN=$(bash bench/llama_cpp/build.sh)
IMATRIX=target/llama.cpp/imatrix-$(basename "$SOURCE" .gguf).gguf
if [ ! -f "$IMATRIX" ]; then
  # Windows of 512 tokens, as `weft calibrate` reads the text.
  nice -n 10 "$BIN/llama-imatrix" -m "$SOURCE" -f data/calibration.txt -o "$IMATRIX.tmp.gguf" \
    -c 512 -t "${THREADS:-2}" >&2
  mv "$IMATRIX.tmp.gguf" "$IMATRIX"
fi
nice -n 10 "$BIN/llama-quantize" --allow-requantize --imatrix "$IMATRIX" "$SOURCE" "$OUT" "$TYPE" \
  "${THREADS:-2}" >&2
