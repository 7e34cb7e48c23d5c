# The decode GEMVs with their weight's shape compiled into the pipeline (`SHAPE`, the
# default) against the uniform (`--no-constant-shapes`), one binary, interleaved, two rounds;
# Q4_0 files and the 7B's Q8_0; the greedy ids of both; the step profiles; load times.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 300 bash bench/gpu/session.sh "$OUT/c" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/c/ab.log"
# The bits with and without the constants on this GPU, and the tiny Qwen2's greedy ids with
# every decode-step option (tests/kv_cache.rs, the one test of it whose fixture is tracked).
echo "== test gemv_shape_constants" >>"$log"
timeout 200 "$bin/t-gemv_shape_constants" 2>&1 | grep -E "^test |test result|panicked" >>"$log"
echo "== test kv_cache swiglu_in_a_gemv_and_queued_steps_keep_the_ids" >>"$log"
timeout 200 "$bin/t-kv_cache" swiglu_in_a_gemv_and_queued_steps_keep_the_ids --nocapture 2>&1 \
  | grep -E "^test |test result|panicked|dispatches a step" >>"$log"
for round in 1 2; do
  for f in smollm2-Q4_0 tinyllama-Q4_0 7b-Q4_0 7b-Q8_0; do
    for act in int8 f32; do
      case "$f" in 7b-*) [ "$act" = f32 ] && continue;; esac
      flags=""; [ "$act" = int8 ] && flags="--int8-activations"
      for v in uniform const; do
        extra=""; [ "$v" = uniform ] && extra="--no-constant-shapes"
        echo "== round $round $v $f $act" >>"$log"
        # shellcheck disable=SC2086
        timeout 90 "$bin/weft" bench "/tmp/weft-models/$f.gguf" --prompt-len 128 --gen 128 --reps 3 $flags $extra 2>&1 \
          | grep -E "^(load  |decode|prefill)" >>"$log"
      done
    done
  done
done
for v in uniform const; do
  extra=""; [ "$v" = uniform ] && extra="--no-constant-shapes"
  for f in smollm2-Q4_0 7b-Q4_0; do
    echo "== profile $v $f int8" >>"$log"
    # shellcheck disable=SC2086
    timeout 90 "$bin/weft" bench "/tmp/weft-models/$f.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile $extra 2>&1 \
      | grep -E "^(load|decode|step|qgemv|attention|sample|qembed|GPU)" >>"$log"
  done
done
grep -c "^decode" "$log"
