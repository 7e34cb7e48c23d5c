# (b) The JS API in headless Chromium on the H200, in the order the calls ran. Chromium
# (Debian's 156.0.8078.108: its files and the libraries it links beside glibc, 121,190,208 bytes
# as one tar.xz) does not fit a call's carry (64 MiB with the working tree's ~32 MB: 25 MB of
# carry passed beside .gl/.dev/.whl, 29.8 MB did not), and a carried folder is not kept on the
# machine for the next call (call 3 found no .crA). So each call carried one part of the archive
# and copied it to /tmp/crp, which stays while the machine is warm (calls follow each other
# within its 30 s idle time):
#   1. carry .gl .dev .whl .crA (first 15 MB):  du -sb . ...   (what travels: 74.4 MB there, .git included)
#   2. carry .gl .dev .whl .crA (bytes 0-25 MB): du -sb .crA
#   3. carry .crB (bytes 25-54 MB):  du -sb .crA .crB           (.crA: no such file)
#   4. carry .crB:  mkdir -p /tmp/crp && cp .crB/part-b /tmp/crp/
#   5. carry .crC (54-83 MB):  cp .crC/part-c /tmp/crp/
#   6. carry .crD (83-112 MB): cp .crD/part-d /tmp/crp/
#   7. carry .crA (0-25 MB):   cp .crA/part-a /tmp/crp/
#   8. carry .gl .dev .whl .crE (112 MB-end) www/pkg:
#        bash call-models.sh; bash call-chromium.sh          -> b1/, b4/
#   9. no carry: two more rounds of Chromium and native weft bench (below)    -> b5/
set -uo pipefail
o=$OUT/b5; mkdir -p $o
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=/tmp/cr/chromium/lib
m=/tmp/weft-models
for r in 1 2; do
  TIMEOUT=200 bash bench/dawn/chromium.sh /tmp/cr/chromium/chromium $o/chromium$r.jsonl $m/smollm2-Q4_0.gguf $m/tinyllama-Q4_0.gguf $m/7b-Q4_0.gguf >/dev/null 2>&1
  for f in smollm2 tinyllama 7b; do
    echo "native $f $(/tmp/weft-bin/weft bench $m/$f-Q4_0.gguf --prompt-len 128 --gen 128 --reps 3 2>/dev/null | grep -E '^decode')" | tee -a $o/session.log
  done
done
rm -f $o/*.chromium.log
