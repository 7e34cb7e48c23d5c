# The folded decode attention's test on the H200 (tests/fused_kernels.rs,
# attention_with_rope_folded_in_equals_rope_store_then_split_attention), built with its
# tolerance assertion replaced by a line per case (`DEV ok|OUT ...`, run with --nocapture) so
# that every case is seen: fkbase, the kernel before call d's change; fknew, with it; fkfix,
# with it and the f16 round trip kept (kv_stored). Each binary carried xz-compressed in .dev.
set -uo pipefail
bash bench/gpu/session.sh /tmp/x none >/dev/null 2>&1  # unpacks .dev and the driver libraries
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p "$OUT/e"
for b in fkbase fknew fkfix; do
  [ -x "/tmp/weft-bin/$b" ] && /tmp/weft-bin/$b attention_with_rope --nocapture >"$OUT/e/$b.log" 2>&1
done
grep -c "DEV ok" "$OUT"/e/*.log
grep -c "DEV OUT" "$OUT"/e/*.log
