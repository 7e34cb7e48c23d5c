# wgpu's shader protections for weft's own kernels (note 75): WEFT_SHADER_CHECKS=all (wgpu's
# defaults: index clamps, loop counters, zeroed workgroup memory), no-zero-init and none, one
# build. The kernel tests under `none` on the H200; qmatmul_bench at the 7B's decode shapes
# (8-bit activations, shapes as constants, cycled through 256 MiB) and weft bench (prompt 128 +
# 128, median of 3, 8-bit activations) of four files, the three settings interleaved, two rounds.
set -uo pipefail
o=$OUT/a; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
tlog="$o/tests.log"
for t in "$bin"/t-*; do
  echo "== $(basename "$t") WEFT_SHADER_CHECKS=none" >>"$tlog"
  WEFT_SHADER_CHECKS=none timeout 200 "$t" 2>&1 | grep -E "^test |test result|panicked|assert" >>"$tlog"
done
stamp tests
glog="$o/gemv.log"
for round in 1 2; do
  for ch in all no-zero-init none; do
    name="$ch-$round"
    echo "== $name" >>"$glog"
    WEFT_SHADER_CHECKS=$ch timeout 90 "$bin/qmatmul_bench" --formats Q4_0,Q8_0,q4_g32_asym,q3_g32_asym,q2_g32_asym \
      --shapes 4096x4096,6144x4096,14336x4096,4096x14336 --seconds 0.2 --rotate-mib 256 --constant-shape --int8 --json \
      >"/tmp/$name.json" 2>>"$glog"
    python3 - "/tmp/$name.json" <<'PY' >>"$glog"
import json, sys
d = json.load(open(sys.argv[1]))
print(f'copy {d["copy"]["read_write_gb_per_s"]:.0f} GB/s')
for r in d["rows"]:
    print(f'{r["format"]:>14} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s')
PY
  done
  stamp "gemv round $round"
done
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000"
stamp models
blog="$o/bench.log"
for round in 1 2; do
  for f in 7b-Q4_0 7b-Q8_0 tinyllama-Q4_0 smollm2-Q4_0; do
    for ch in all no-zero-init none; do
      echo "== $f int8 $ch" >>"$blog"
      WEFT_SHADER_CHECKS=$ch timeout 60 "$bin/weft" bench "$models/$f.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>&1 \
        | grep -E "^(decode|prefill)" >>"$blog"
    done
  done
  stamp "round $round"
done
for ch in all none; do
  echo "== profile 7b-Q4_0 int8 $ch" >>"$blog"
  WEFT_SHADER_CHECKS=$ch timeout 60 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>&1 \
    | grep -v -E "^  load|Weights:" >>"$blog"
done
stamp done
