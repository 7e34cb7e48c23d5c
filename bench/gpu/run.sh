#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the image's PyTorch: build random-weight models of real
# shapes, then weft (release binary, Vulkan) and PyTorch transformers on the same GPU.
#   WEFT=path/to/weft QBENCH=path/to/qmatmul_bench bash bench/gpu/run.sh OUT_DIR
set -uo pipefail
out=${1:?output folder}
mkdir -p "$out"
weft=${WEFT:-target/release/weft}
models=${MODELS:-/tmp/weft-models}
shapes=${SHAPES:-smollm2-135m tinyllama-1.1b}
quants=${QUANTS:-q4_g32_sym q8_g32_sym}
gen=${GEN:-128}
prompt=${PROMPT:-128}
python3 bench/gpu/make_models.py "$models" $shapes 2>&1 | tee "$out/make_models.log"
if [ -n "${QBENCH:-}" ]; then
  echo "== qmatmul_bench"
  "$QBENCH" --formats ${QFORMATS:-Q4_0,Q8_0,Q4_K,q4_g32_sym,q8_g32_sym} --shapes 8192x8192 --seconds 1 --json \
    2>"$out/qmatmul.err" | tee "$out/qmatmul.json"
  # Launch shapes load-time tuning may choose besides the default (src/ops/qmatmul/tune.rs).
  for c in ${QCONFIGS:-256,4,32 128,8,32}; do
    IFS=, read -r wg rows lanes <<<"$c"
    "$QBENCH" --formats ${QFORMATS:-Q4_0,Q8_0,Q4_K,q4_g32_sym,q8_g32_sym} --shapes 8192x8192 --seconds 0.5 --json \
      --wg "$wg" --rows "$rows" --lanes "$lanes" 2>>"$out/qmatmul.err" >"$out/qmatmul-$wg-$rows-$lanes.json"
  done
fi
for s in $shapes; do
  for q in $quants; do
    echo "== weft $s $q"
    "$weft" bench "$models/$s" --quantize "$q" --prompt-len "$prompt" --gen "$gen" --reps 3 --json --profile \
      ${WEFT_BENCH_ARGS:-} 2>"$out/weft-$s-$q.err" | tee "$out/weft-$s-$q.json"
    tail -3 "$out/weft-$s-$q.err"
  done
  [ "${TORCH:-1}" = 1 ] || continue
  echo "== torch $s"
  python3 bench/gpu/torch_generate.py "$models/$s" --prompt-len "$prompt" --gen "$gen" 2>"$out/torch-$s.err" \
    | tee "$out/torch-$s.jsonl"
  tail -3 "$out/torch-$s.err"
done
