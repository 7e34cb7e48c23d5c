# The call that made this folder (run from the repository root as `bash .dev/callA.sh`, carrying
# .gl, .dev (weft.xz), .whl and .llama): Q4_K_M and Q4_0 GGUFs, weft bench and llama-bench (built
# in the call) on the same files; while the build finishes, the GPU/CPU repack greedy-id check
# and the bf16 folder loads.
set -uo pipefail
o=$OUT/a
mkdir -p "$o"
(
  while ! grep -q 'waiting for the llama-bench build' "$o/session.log" 2>/dev/null; do sleep 2; done
  c=$o/checks.log
  for m in tinyllama-Q4_K_M 7b-Q4_0; do
    for on in gpu cpu; do
      echo "== generate $m --quantize-on $on" >>"$c"
      timeout 60 /tmp/weft-bin/weft generate /tmp/weft-models/$m.gguf --prompt "The" --max-tokens 24 --ids --verbose \
        --quantize-on $on >/tmp/ids-$m-$on.txt 2>>"$c"
      cat /tmp/ids-$m-$on.txt >>"$c"
    done
    cmp -s /tmp/ids-$m-gpu.txt /tmp/ids-$m-cpu.txt && echo "$m: greedy ids equal" >>"$c" || echo "$m: greedy ids DIFFER" >>"$c"
  done
  f=$o/folder.txt
  timeout 100 python3 bench/gpu/make_models.py /tmp/folders tinyllama-1.1b >>"$f" 2>&1
  for run in cold warm; do
    echo "== tinyllama-1.1b bf16 folder --quantize q4 ($run)" >>"$f"
    timeout 60 /tmp/weft-bin/weft bench /tmp/folders/tinyllama-1.1b --quantize q4 --gen 4 --prompt-len 8 --reps 1 >>"$f" 2>&1
  done
  echo checks-done >>"$c"
) &
MODEL_SPECS="tinyllama Q4_K_M 2048 5632 22 32 4 32000
7b Q4_K_M 4096 14336 32 32 8 32000
7b Q4_0 4096 14336 32 32 8 32000" timeout 570 bash bench/gpu/session.sh "$o" "copy models llama"
wait
