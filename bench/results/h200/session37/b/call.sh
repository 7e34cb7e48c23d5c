# (b) The decode attention kernel with its caches cycled through 256 MiB of distinct copies (a
# step's layers find their K/V rows in memory, not in the L2 cache) against one copy, as it is
# and with the K words loaded before the query is ready (KPRE, kpre.patch here, switched by WEFT_DIAG_KPRE in
# this build only); then weft bench on the 7B and SmolLM2 Q4_0 files with and without it.
set -uo pipefail
o=$OUT/b
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
7b Q4_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
for rot in 256 0; do
  for v in base kpre; do
    stamp "attention_bench --rotate-mib $rot $v"
    if [ $v = kpre ]; then export WEFT_DIAG_KPRE=1; else unset WEFT_DIAG_KPRE; fi
    timeout 200 "$bin/attention_bench" --reps 400 --contexts 1,128,192,256,1024,4096 --rotate-mib $rot 2>&1 | tee -a "$o/session.log"
  done
done
unset WEFT_DIAG_KPRE
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  for v in base kpre base kpre; do
    if [ $v = kpre ]; then export WEFT_DIAG_KPRE=1; else unset WEFT_DIAG_KPRE; fi
    stamp "weft bench $name $ty --int8-activations $v"
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>>"$o/weft.err" | grep -E "decode|prefill" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
