# Launch shapes at 2 and 3 bits with 8-bit activations: every format of call a's DP4 rows read
# 3.3-4.7 G weights per ms at 16384x16384, so the narrower the weight the fewer bytes a lane has
# in flight a tile. More rows a lane group (4) or fewer lanes a row (16) put more of them in
# flight. q2, q3, q4 (asym) and q8 (sym) weft weights, three shapes, rotated through 512 MiB.
set -uo pipefail
o=$OUT/d; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; mkdir -p "$bin"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
for shape in "256 2 32" "256 4 32" "256 4 16" "128 4 16" "256 1 32"; do
  set -- $shape
  stamp "wg $1 rows $2 lanes $3"
  timeout 100 "$bin/qmatmul_bench" --formats q2_g32_asym,q3_g32_asym,q4_g32_asym,q8_g32_sym \
    --shapes 4096x14336,14336x4096,16384x16384 --wg "$1" --rows "$2" --lanes "$3" --int8 \
    --rotate-mib 512 --seconds 0.3 2>>"$o/qmatmul.err" | grep -E "^[Qq]" \
    | awk '{printf "%-18s %-12s %8s us %8s GB/s\n", $1, $2, $4, $5}' | tee -a "$o/session.log"
done
stamp done
