# Weights loaded a tile ahead in qgemv_gpu (20345f7) against the build before it (74a5c27):
# GEMVs with 8-bit activations, rotated through 512 MiB, the two builds interleaved twice; then
# decode of the 7B, TinyLlama and SmolLM2 shapes, Q4_0 files, 8-bit activations, interleaved.
set -uo pipefail
o=$OUT/a
. bench/gpu/setup.sh
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
SPECS
touch "$models/.done") &
for round in 1 2; do
  for b in base new; do
    stamp "GEMV --int8 $b (round $round)"
    timeout 80 "$bin/qmb-$b" --formats q4_g32_asym,q4_g32_sym,q8_g32_sym,q3_g32_asym,q2_g32_asym \
      --shapes 8192x8192,4096x14336,16384x16384 --wg 256 --rows 2 --lanes 32 --int8 \
      --rotate-mib 512 --seconds 0.3 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | cut -c1-80 | tee -a "$o/session.log"
  done
done
while [ ! -f "$models/.done" ]; do sleep 2; done
for round in 1 2; do
  for m in 7b tinyllama smollm2; do
    for b in base new; do
      [ $(( $(date +%s) - t0 )) -lt 520 ] || break 3
      stamp "weft-$b bench $m Q4_0 --int8-activations (round $round)"
      timeout 60 "$bin/weft-$b" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|prefill|step)" | tee -a "$o/session.log"
    done
  done
done
stamp done
