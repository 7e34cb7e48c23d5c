# (d, first of five calls, as session38/c/call-a.sh; the next three carry .crB-.crD and run
# `cp .crX/part-x /tmp/crp/`, the last runs call-e.sh) Carries the first part of the Chromium
# archive of session38/b (.crA) beside the Vulkan loader, weft's release build and the gguf wheel:
# copies the part to /tmp/crp (carried folders are not kept between calls; /tmp is, while the
# machine stays warm), makes the SmolLM2, TinyLlama and 7B shaped Q4_0 GGUFs.
set -uo pipefail
o=$OUT/da
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
mkdir -p /tmp/crp && cp .crA/part-a /tmp/crp/
while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
done <<<"$MODEL_SPECS"
ls -la /tmp/crp "$models" | tee -a "$o/session.log"
