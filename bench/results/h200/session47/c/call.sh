# The L2 prefetch at small caps (note 72): weft bench of the 7B Q4_0 at 8-bit activations with
# --prefetch-mb 0, 2 and 4 interleaved, two rounds (call b measured 0, 8, 16 and 32). Run in
# the same device call as a's script, after it.
set -uo pipefail
o=$OUT/c; source bench/gpu/setup.sh
f="$models/7b-Q4_0.gguf"
[ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" Q4_0 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1
stamp models
blog="$o/bench.log"
for round in 1 2; do
  for mb in 0 2 4; do
    echo "== 7b-Q4_0 int8 prefetch $mb" >>"$blog"
    timeout 60 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations --prefetch-mb $mb 2>&1 | grep -E "^(decode|prefill)" >>"$blog"
  done
  stamp "round $round"
done
