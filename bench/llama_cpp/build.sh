#!/usr/bin/env bash
# Builds llama.cpp's `llama-imatrix` and `llama-quantize` (CPU only) from the source vendored in
# llama-cpp-python's sdist, into target/llama.cpp (ignored). Idempotent: the sdist is downloaded
# once, and a build that is up to date does nothing. Prints the directory of the binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
DIR=$(realpath -m target/llama.cpp)
PYTHON=${PYTHON:-python3}
mkdir -p "$DIR"
SDIST="$DIR/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
  # --no-binary for this package only: its build dependencies (cmake, ninja) may come as wheels.
  "$PYTHON" -m pip download --no-binary llama-cpp-python --no-deps "llama-cpp-python==$VERSION" -d "$DIR" >&2
fi
SRC="$DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  tar -xzf "$SDIST" -C "$DIR" "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
if ! command -v cmake >/dev/null; then
  "$PYTHON" -m pip install cmake >&2
fi
BUILD="$DIR/build-$VERSION"
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >&2
nice -n 10 cmake --build "$BUILD" --target llama-imatrix llama-quantize -j "${JOBS:-2}" >&2
echo "$BUILD/bin"
