# Where the decode attention kernel's time goes at one position and at 256: diagnostic builds of
# examples/attention_bench.rs whose shaders/attention_decode.wgsl has parts removed
# (variants.py here writes them from the kernel as it is; their outputs are wrong, they are only
# timed): empty (returns at once: the cost of a dependent dispatch of this kernel), nov (no V
# rows loaded), norope (q and the new K row read without rotation), nosoftmax (no statistics:
# m = 0, l = 1, one barrier), nomerge (no sum of the position groups through workgroup memory),
# nostore (no cache store), all (the five together). Caches hot, 400 dependent calls, two rounds
# in turn; then the 576x576 and 960x576 GEMVs (qmatmul_bench) for the floor of a GEMV call.
set -uo pipefail
bash bench/gpu/session.sh "$OUT/c" "none" >/dev/null 2>&1  # unpacks .dev and the driver libraries
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/c/diag.log"
for round in 1 2; do
  for v in base empty nov norope nosoftmax nomerge nostore all; do
    echo "== round $round $v" >>"$log"
    timeout 40 "$bin/ab-$v" --heads 9/3/64,32/8/128 --contexts 1,256 --chunks 64,256 >>"$log" 2>&1
  done
done
echo "== qmatmul_bench" >>"$log"
timeout 60 "$bin/qmatmul_bench" --formats q4_g32_sym --shapes 576x576,960x576,2048x2048 --wg 256 --rows 1 --lanes 32 \
  --seconds 0.3 >>"$log" 2>&1
timeout 60 "$bin/qmatmul_bench" --formats q4_g32_sym --shapes 576x576,960x576,2048x2048 --wg 256 --rows 1 --lanes 32 \
  --seconds 0.3 --int8 >>"$log" 2>&1
grep -c "^== round" "$log"
