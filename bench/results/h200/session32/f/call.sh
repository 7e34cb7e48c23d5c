# weft beside llama.cpp's CUDA backend with the decode attention of note 40: llama-bench built
# here (CUDA, sm_90, niced in the background) while weft bench runs f32 and 8-bit activations on
# Q4_0 and Q8_0 GGUFs of the three shapes, then llama-bench on the same files; the built
# llama-bench comes back xz-compressed for later calls.
set -uo pipefail
o=$OUT/f; mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/l && tar -xJf .llama/llama.tar.xz -C /tmp/l
(cd /tmp/l/llama.cpp && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
  >/tmp/l/cmake.log 2>&1 && nice -n 19 cmake --build build --target llama-bench -j 12 >/tmp/l/build.log 2>&1; echo "built: $?" >>/tmp/l/build.log) &
building=$!
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
xz -dc .dev/weft.xz >"$bin/weft" && chmod +x "$bin/weft"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
files="smollm2-Q4_0 tinyllama-Q4_0 tinyllama-Q8_0 7b-Q4_0 7b-Q8_0"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
  for v in "" "--int8-activations"; do
    stamp "weft bench $name-$ty ${v:-(f32)}"
    # shellcheck disable=SC2086
    timeout 60 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null | grep -E "^(prefill|decode|step)" | tee -a "$o/session.log"
  done
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
tinyllama Q8_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000
SPECS
stamp "waiting for the llama-bench build"
wait "$building"; tail -2 /tmp/l/build.log | tee -a "$o/session.log"
for m in $files; do
  stamp "llama-bench $m"
  timeout 45 /tmp/l/llama.cpp/build/bin/llama-bench -m "$models/$m.gguf" -p 128 -n 128 -r 3 -ngl 99 -o md 2>>"$o/llama.err" | tee -a "$o/session.log"
done
b=/tmp/l/llama.cpp/build/bin/llama-bench
[ -x "$b" ] && { ls -la "$b"; xz -T8 -9 -c "$b" >"$o/llama-bench.xz"; ls -la "$o/llama-bench.xz"; ldd "$b" | grep -iE "cuda|cublas" ; } | tee -a "$o/session.log"
stamp done
