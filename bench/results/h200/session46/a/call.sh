# The scale's f16 widened by unpack2x16float instead of the exact integer widening, and no row-end
# clamps or selects where the tiles divide a row's chunks (variants.py; the weft and qmatmul_bench
# of this call are the build of d365cff with diag-hook.patch, which reads a shader's source from
# WEFT_DIAG_DIR): the issue's GEMV shapes, shapes as constants, calls cycled through 256 MiB, the
# variants interleaved; then decode of the SmolLM2 and 7B Q4_0 files with and without.
set -uo pipefail
o=$OUT/a; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
dv=$PWD/.dev/dv
log="$o/gemv.log"
for spec in base,--int8 unpack,--int8 unpack_nosel,--int8 nosel,--int8 base, unpack_nosel, base,--int8 unpack_nosel,--int8; do
  v=${spec%%,*}; act=${spec#*,}
  dir=/nonexistent; [ "$v" = base ] || dir="$dv/$v"
  name="$v${act:-f32}"
  echo "== $name" >>"$log"
  # shellcheck disable=SC2086
  WEFT_DIAG_DIR=$dir timeout 60 "$bin/qmatmul_bench" --formats Q4_0,Q4_K,Q8_0,q4_g32_asym,q3_g32_asym,q2_g32_asym \
    --shapes 8192x8192,4096x14336,14336x4096 --seconds 0.2 --rotate-mib 256 --constant-shape $act --json >"$o/$name.json" 2>>"$log"
  python3 - "$o/$name.json" <<'PY' >>"$log"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(f'{r["format"]:>28} {r["n"]:>6}x{r["k"]:<6} {r["us_per_call"]:8.2f} us {r["gb_per_s"]:7.0f} GB/s {r["fraction_of_copy"]:6.3f}')
PY
  stamp "$name"
done
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  stamp "$f written"
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
7b Q4_0 4096 14336 32 32 8 32000"
blog="$o/bench.log"
for round in 1 2; do
  for f in smollm2-Q4_0 7b-Q4_0; do
    for act in int8 f32; do
      [ "$f" = 7b-Q4_0 ] && [ "$act" = f32 ] && continue
      flags=""; [ "$act" = int8 ] && flags="--int8-activations"
      for v in base unpack_nosel; do
        dir=/nonexistent; [ "$v" = base ] || dir="$dv/$v"
        echo "== round $round $v $f $act" >>"$blog"
        # shellcheck disable=SC2086
        WEFT_DIAG_DIR=$dir timeout 60 "$bin/weft" bench "$models/$f.gguf" --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 \
          | grep -E "^(load  |decode|prefill)" >>"$blog"
      done
    done
  done
  stamp "bench round $round"
done
for v in base unpack_nosel; do
  dir=/nonexistent; [ "$v" = base ] || dir="$dv/$v"
  echo "== profile $v 7b-Q4_0 int8" >>"$blog"
  WEFT_DIAG_DIR=$dir timeout 60 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>&1 \
    | grep -E "^(decode|step|qgemv|attention|GPU)" >>"$blog"
done
stamp done
