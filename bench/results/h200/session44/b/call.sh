# The GEMVs' shape parameters (n, k, words and groups a row, grid width, row offsets) as
# constants of the pipeline instead of reads of the uniform, whose load every weight address
# waits for at the start of each dispatch. A diagnostic build switched by WEFT_DIAG_CP
# (constant-params.patch): the same binary both ways, interleaved, two rounds.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/b" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/b/ab.log"
for m in smollm2 7b; do
  timeout 60 "$bin/weft" generate "/tmp/weft-models/$m-Q4_0.gguf" --prompt "The capital of France is" --max-tokens 32 --ids >"$OUT/b/ids-$m-uniform.txt" 2>/dev/null
  WEFT_DIAG_CP=1 timeout 60 "$bin/weft" generate "/tmp/weft-models/$m-Q4_0.gguf" --prompt "The capital of France is" --max-tokens 32 --ids >"$OUT/b/ids-$m-const.txt" 2>/dev/null
  if cmp -s "$OUT/b/ids-$m-uniform.txt" "$OUT/b/ids-$m-const.txt"; then echo "== ids $m equal" >>"$log"; else echo "== ids $m DIFFER" >>"$log"; fi
done
for round in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for act in int8 f32; do
      [ "$m" = 7b ] && [ "$act" = f32 ] && continue
      flags=""; [ "$act" = int8 ] && flags="--int8-activations"
      for v in uniform const; do
        echo "== round $round $v $m $act" >>"$log"
        # shellcheck disable=SC2086
        if [ "$v" = const ]; then export WEFT_DIAG_CP=1; else unset WEFT_DIAG_CP; fi
        timeout 60 "$bin/weft" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 \
          | grep -E "^(decode|prefill)" >>"$log"
      done
    done
  done
done
unset WEFT_DIAG_CP
for v in uniform const; do
  if [ "$v" = const ]; then export WEFT_DIAG_CP=1; else unset WEFT_DIAG_CP; fi
  for m in smollm2 7b; do
    echo "== profile $v $m int8" >>"$log"
    timeout 60 "$bin/weft" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>&1 \
      | grep -E "^(decode|step|qgemv|attention|sample|qembed|GPU)" >>"$log"
  done
done
grep -c "^decode" "$log"
