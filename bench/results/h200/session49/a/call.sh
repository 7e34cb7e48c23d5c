# weft beside llama.cpp's CUDA backend on the same GGUF files, the release build with weft's
# kernels compiled without wgpu's shader checks on Vulkan (note 75): the device copy rate,
# random-weight Q4_0 and Q8_0 files of the SmolLM2, TinyLlama and 7B shapes, weft bench with f32
# and 8-bit activations (the first profiled) and llama-bench (built here from the
# llama-cpp-python 0.3.36 sdist's llama.cpp, CUDA, sm_90), prompt 128 + 128, median of 3.
set -uo pipefail
WEFT_VARIANTS="|--int8-activations" timeout 590 bash bench/gpu/session.sh "$OUT/a" "copy models llama"
