# One H100/H200 call: the GEMV kernel tests on the GPU; the decode step with the SwiGLU as the
# gate/up GEMV's epilogue (default) against the down GEMV's staging (--glu-in-down), f32 and 8-bit
# activations, on Q4_0/Q8_0 GGUFs of three shapes; GEMV rates rotated through 512 MiB with two
# and four chunks a lane; llama-bench (CUDA, built in this call) on the same files.
set -uo pipefail
o=$OUT/a; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/l && tar -xJf .llama/llama.tar.xz -C /tmp/l
(cd /tmp/l/llama.cpp && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
  >/tmp/l/cmake.log 2>&1 && nice -n 19 cmake --build build --target llama-bench -j 12 >/tmp/l/build.log 2>&1; echo "built: $?" >>/tmp/l/build.log) &
building=$!
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
# copy + the kernel tests (fused_kernels on this GPU), then the models with the variants.
timeout 90 bash bench/gpu/session.sh "$o" "copy tests"
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$models"
export PYTHONPATH=/tmp/site
all="|--glu-in-down|--int8-activations|--int8-activations --glu-in-down"
while read -r name ty dim ffn layers heads kv vocab variants; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
  [ "$variants" = all ] && variants=$all
  IFS='|' read -r -a vs <<<"$variants"
  first=--profile
  for v in "${vs[@]}"; do
    stamp "weft bench $name $ty ${v:-(defaults)}"
    # shellcheck disable=SC2086
    timeout 60 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $first $v 2>>"$o/weft-$name-$ty.err" </dev/null | tee -a "$o/session.log"
    first=
  done
done <<'SPECS'
7b Q4_0 4096 14336 32 32 8 32000 all
tinyllama Q4_0 2048 5632 22 32 4 32000 all
smollm2 Q4_0 576 1536 30 9 3 49152 |--glu-in-down|--int8-activations
tinyllama Q8_0 2048 5632 22 32 4 32000 |--glu-in-down|--int8-activations
7b Q8_0 4096 14336 32 32 8 32000 |--glu-in-down|--int8-activations
7b Q4_K_M 4096 14336 32 32 8 32000 |--glu-in-down|--int8-activations
tinyllama Q4_K_M 2048 5632 22 32 4 32000 |--int8-activations
SPECS
stamp "decode with four chunks a lane"
for m in 7b-Q4_0 tinyllama-Q4_0 smollm2-Q4_0; do
  for v in "" "--int8-activations"; do
    stamp "WEFT_GEMV_CHUNKS=4 weft bench $m ${v:-(defaults)}"
    # shellcheck disable=SC2086
    WEFT_GEMV_CHUNKS=4 timeout 60 "$bin/weft" bench "$models/$m.gguf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft-c4.err" | grep -E "^(decode|prefill|step)" | tee -a "$o/session.log"
  done
done
stamp "GEMV, two chunks a lane then four"
for c in 2 4; do
  WEFT_GEMV_CHUNKS=$c QFORMATS=Q4_0,Q8_0,Q4_K,q4_g32_asym,q3_g32_asym,q2_g32_asym QCONFIGS="256,2,32" QROTATE=512 QINT8=1 \
  QSHAPES=4096x4096,8192x8192,14336x4096,4096x14336,16384x16384 timeout 100 bash bench/gpu/session.sh "$o/c$c" "gemv"
done
stamp "waiting for the llama-bench build"
wait "$building"; tail -2 /tmp/l/build.log | tee -a "$o/session.log"
for m in 7b-Q4_0 tinyllama-Q4_0 smollm2-Q4_0 tinyllama-Q8_0 7b-Q8_0 7b-Q4_K_M tinyllama-Q4_K_M; do
  stamp "llama-bench $m"
  timeout 60 /tmp/l/llama.cpp/build/bin/llama-bench -m "$models/$m.gguf" -p 128 -n 128 -r 3 -ngl 99 -o md 2>>"$o/llama.err" | tee -a "$o/session.log"
done
stamp done
