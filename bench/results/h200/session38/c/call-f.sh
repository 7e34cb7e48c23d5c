# (c, call after call-e.sh, no carry) call-e.sh's two Chromium runs found no WebGPU adapter with
# --enable-webgpu-developer-features added; three more with bench/dawn/chromium.sh's default
# flags and the profile (timestamps rounded by Chrome to 100 µs, the worker's clock to 100 µs).
o=$OUT/cf; mkdir -p $o; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; m=/tmp/weft-models
for r in 1 2 3; do
  LD_LIBRARY_PATH=/tmp/cr/chromium/lib PROFILE=1 TIMEOUT=150 bash bench/dawn/chromium.sh /tmp/cr/chromium/chromium $o/chromium$r.jsonl $m/smollm2-Q4_0.gguf $m/tinyllama-Q4_0.gguf > /dev/null 2>&1
  grep -a -i -E "vulkan|adapter|gpu_init|GpuProcess|webgpu" $o/chromium$r.jsonl.chromium.log | grep -v dbus | cut -c1-300 | head -8 > $o/gpu$r.txt
  python3 -c "
import json,sys
for d in map(json.loads, open(sys.argv[1])):
    p=d.get('profile') or {}
    print(sys.argv[2], d.get('model'), d.get('decode_tok_s'), d.get('error','')[:60], p.get('dispatches'), p.get('record_submit_ms'), p.get('wait_ms'), (p.get('kernels_us') or [])[:4])" $o/chromium$r.jsonl $r
done
rm -f $o/*.chromium.log
