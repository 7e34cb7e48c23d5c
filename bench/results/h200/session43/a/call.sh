# The normalising GEMVs' sum of squares by subgroup shuffles and one barrier (the shared-memory
# tree took log2(WG) + 2 barriers on the decode step's critical path), and no barrier before a
# GEMV's first tile. The build before (weft-base) and this one interleaved, two rounds.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/a" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/a/ab.log"
for t in "$bin"/t-*; do
  echo "== test $(basename "$t")" >>"$log"
  timeout 120 "$t" 2>&1 | grep -E "^test |test result" >>"$log"
done
for round in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for act in int8 f32; do
      [ "$m" = 7b ] && [ "$act" = f32 ] && continue
      flags=""; [ "$act" = int8 ] && flags="--int8-activations"
      for b in weft-base weft; do
        echo "== round $round $b $m greedy $act" >>"$log"
        # shellcheck disable=SC2086
        timeout 60 "$bin/$b" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 \
          | grep -E "^(decode|prefill)" >>"$log"
      done
    done
  done
done
for b in weft-base weft; do
  echo "== profile $b smollm2 int8" >>"$log"
  timeout 60 "$bin/$b" bench /tmp/weft-models/smollm2-Q4_0.gguf --prompt-len 128 --gen 32 --reps 1 --int8-activations --profile 2>&1 \
    | grep -E "^(decode|step|qgemv|attention|sample|qembed|GPU)" >>"$log"
done
grep -c "^decode" "$log"
