# Call b: the rates of Q4_0, Q8_0 and Q4_K (and Q4_K's planes built on the CPU) moved by up to 3x
# between rounds of one process, while q4_g32_sym and q8_g32_sym (the same kernel, the same
# words) repeated to 0.5 %. Is it the format or where in the run it comes? The same six with the
# order reversed within each pair, three rounds in one process; then each format alone in a
# process of its own, twice. 8-bit activations, rotated through 512 MiB.
set -uo pipefail
o=$OUT/c; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; mkdir -p "$bin"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
q() {
  timeout 100 "$bin/qmatmul_bench" --formats "$1" --shapes "$2" --wg 256 --rows 2 --lanes 32 --int8 \
    --rotate-mib 512 --seconds 0.3 2>>"$o/qmatmul.err" | grep -E "^[Qq]" | tee -a "$o/session.log"
}
for round in 1 2 3; do
  stamp "one process, round $round"
  q q4_g32_sym,Q4_0,q8_g32_sym,Q8_0,Q4_K_R,Q4_K 4096x14336,16384x16384
done
for round in 1 2; do
  for f in Q4_0 q4_g32_sym Q8_0 Q4_K Q4_K_R; do
    stamp "$f alone, round $round"
    q "$f" 4096x14336,16384x16384
  done
done
stamp done
