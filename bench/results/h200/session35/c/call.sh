# Where the O projection epilogue's time goes (a diagnostic build, oproj-diag.patch: WEFT_ODIAG
# cuts the epilogue short): SmolLM2 Q4_0, 8-bit activations, prompt 128 + 128, the step
# profile and the decode rate with the epilogue off, whole, without the cross-head sum (1),
# with only the weights loaded (2), and with nothing but the head's output kept (3); two rounds.
set -uo pipefail
o=$OUT/c
. bench/gpu/setup.sh
python3 bench/gpu/gen_quant_gguf.py "$models/smollm2-Q4_0.gguf" Q4_0 576 1536 30 9 3 49152 >>"$o/models.log" 2>&1 </dev/null
for round in 1 2; do
  for v in off on 1 2 3; do
    e=on; [ "$v" = off ] && e=off
    d=""; case $v in 1|2|3) d=$v;; esac
    stamp "profile $v (round $round)"
    WEFT_ODIAG=$d timeout 90 "$bin/weft-new" bench "$models/smollm2-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations --o-epilogue $e --profile >"$o/profile-$v-$round.txt" 2>>"$o/weft.err" </dev/null
    grep -E "^decode|^step|attention_decode|GPU total" "$o/profile-$v-$round.txt" | tee -a "$o/session.log"
  done
done
stamp done
