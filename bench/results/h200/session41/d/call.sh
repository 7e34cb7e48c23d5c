# The decode attention's latency chain shortened where call c found it (one call): the RoPE
# prologue split over three lanes a word (q, K, V), the subgroups' softmax statistics combined
# by two subgroup reductions, the position groups' merge with four loads in flight. The
# kernel's tests on this GPU (its subgroups of 32 take the new combine, lavapipe's of 8 do
# not), the new build profiled once by session.sh, the kernel alone (attention_bench of the
# build before and this one, hot, two rounds), and weft bench of both builds interleaved twice,
# f32 and 8-bit activations, random-weight Q4_0 files, prompt 128 + 128, median of 3.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/d" "copy models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/d/ab.log"
for t in fused_kernels kv_cache decode_chunks; do
  echo "== test $t" >>"$log"
  filter=; [ "$t" = fused_kernels ] && filter=attention_with_rope
  # shellcheck disable=SC2086
  timeout 120 "$bin/t-$t" $filter 2>&1 | grep -E "^test |test result" >>"$log"
done
for round in 1 2; do
  for b in attention_bench-base attention_bench; do
    echo "== round $round $b" >>"$log"
    timeout 40 "$bin/$b" --heads 9/3/64,32/4/64,32/8/128 --contexts 1,128,192,256 --chunks 64,256 >>"$log" 2>&1
  done
done
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
grep -c "^decode" "$log"
