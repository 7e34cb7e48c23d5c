# (c) Why the decode attention is 2-3x slower with its caches cold (call b): the caches
# rotated through 256 MiB at the usual size (max_seq 257) and padded to 4097 positions (each
# copy 16x the bytes, the rows used the same), and through 24 MiB (under the L2 cache's 50 MB);
# then weft bench on the SmolLM2 and 7B Q4_0 files at --max-seq 257 (the default for prompt
# 128 + 128) and 4096.
set -uo pipefail
o=$OUT/c
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
7b Q4_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
a="$bin/attention_bench --reps 400 --heads 9/3/64,32/4/64,32/8/128 --contexts 128,192,256,1024 --chunks 64,256"
for v in "--rotate-mib 256" "--rotate-mib 256 --max-seq 4097" "--rotate-mib 24" "--rotate-mib 24 --max-seq 4097" "--rotate-mib 256"; do
  stamp "attention_bench $v"
  # shellcheck disable=SC2086
  timeout 200 $a $v 2>&1 | tee -a "$o/session.log"
done
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  for v in "" "--max-seq 4096" "" "--max-seq 4096"; do
    stamp "weft bench $name $ty --int8-activations $v"
    # shellcheck disable=SC2086
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations $v 2>>"$o/weft.err" | grep -E "decode|prefill" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
echo "== done" | tee -a "$o/session.log"
