# The decode attention's scores by rows of head_dim / 4 lanes (KL) against the build before
# (weft-base: the same code without the KL path), one call: random-weight Q4_0 files of the
# SmolLM2, TinyLlama and 7B shapes; the new build profiled once by session.sh, then both
# builds interleaved, two rounds, f32 and 8-bit activations, prompt 128 + 128, median of 3;
# then the kernel alone (examples/attention_bench.rs of each build), caches hot and cycled
# through 256 MiB.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/a" "copy models"
bin=/tmp/weft-bin
log="$OUT/a/ab.log"
echo "== weft-base bench smollm2 --profile" >>"$log"
"$bin/weft-base" bench /tmp/weft-models/smollm2-Q4_0.gguf --prompt-len 128 --gen 128 --reps 3 --profile >>"$log" 2>&1
for round in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for act in "" "--int8-activations"; do
      for b in weft-base weft; do
        echo "== round $round $b $m ${act:-f32}" >>"$log"
        # shellcheck disable=SC2086
        timeout 60 "$bin/$b" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $act 2>&1 \
          | grep -E "^(decode|prefill)" >>"$log"
      done
    done
  done
done
for rot in 0 256; do
  for b in attention_bench-base attention_bench; do
    echo "== $b --rotate-mib $rot" >>"$log"
    timeout 60 "$bin/$b" --heads 9/3/64,32/4/64,32/8/128 --contexts 1,128,192,256 --chunks 64,256 \
      --rotate-mib "$rot" >>"$log" 2>&1
  done
done
grep -c "^decode" "$log"
