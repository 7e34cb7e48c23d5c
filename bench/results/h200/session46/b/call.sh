# The GEMVs' f16 scales by unpack2x16float where the device's probe finds it exact, and no
# row-end clamps where tiles divide a row (note 71), as built: the GEMV tests on this GPU (the
# subnormal-scale test with the probe's choice and with the integer widening), the probe's
# verdict, qmatmul_bench and weft bench of this build against the build before (`*_old`, d365cff),
# interleaved, two rounds (f32
# activations in the first GEMV round only, and not for the 7B's decode).
set -uo pipefail
o=$OUT/b; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
tlog="$o/tests.log"
"$bin/weft" caps 2>&1 | grep -E "adapterName|f16UnpackExact" >>"$tlog"
for t in gemv_f16_scales gemv_int8 gemv_shape_constants; do
  echo "== test $t" >>"$tlog"
  timeout 120 "$bin/t-$t" 2>&1 | grep -E "^test |test result|panicked|equal bits" >>"$tlog"
done
echo "== test kv_cache swiglu_in_a_gemv_and_queued_steps_keep_the_ids" >>"$tlog"
timeout 120 "$bin/t-kv_cache" swiglu_in_a_gemv_and_queued_steps_keep_the_ids 2>&1 | grep -E "^test |test result|panicked" >>"$tlog"
stamp tests
log="$o/gemv.log"
for round in 1 2; do
  for act in --int8 ""; do
    [ "$round" = 2 ] && [ -z "$act" ] && continue
    for b in qmatmul_bench_old qmatmul_bench; do
      name="$b${act:-f32}-$round"
      echo "== $name" >>"$log"
      # shellcheck disable=SC2086
      timeout 60 "$bin/$b" --formats Q4_0,Q4_K,Q8_0,q4_g32_asym,q3_g32_asym,q2_g32_asym \
        --shapes 8192x8192,4096x14336,14336x4096 --seconds 0.2 --rotate-mib 256 --constant-shape $act --json >"/tmp/$name.json" 2>>"$log"
      python3 - "/tmp/$name.json" <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
print(f'copy {d["copy"]["read_write_gb_per_s"]:.0f} GB/s')
for r in d["rows"]:
    print(f'{r["format"]:>28} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s {r["fraction_of_copy"]:6.3f} {"F16_UNPACK" if "F16_UNPACK" in r["kernel"] else ""}')
PY
    done
  done
  stamp "gemv round $round"
done
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
stamp models
blog="$o/bench.log"
for round in 1 2; do
  for f in smollm2-Q4_0 tinyllama-Q4_0 7b-Q4_0; do
    for act in int8 f32; do
      [ "$f" = 7b-Q4_0 ] && [ "$act" = f32 ] && continue
      flags=""; [ "$act" = int8 ] && flags="--int8-activations"
      for b in weft_old weft; do
        echo "== round $round $b $f $act" >>"$blog"
        # shellcheck disable=SC2086
        timeout 60 "$bin/$b" bench "$models/$f.gguf" --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 \
          | grep -E "^(load  |decode|prefill)" >>"$blog"
      done
    done
  done
  stamp "bench round $round"
done
for b in weft_old weft; do
  echo "== profile $b 7b-Q4_0 int8" >>"$blog"
  timeout 60 "$bin/$b" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>&1 \
    | grep -E "^(decode|step|GPU)" >>"$blog"
done
stamp done
