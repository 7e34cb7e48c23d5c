#!/usr/bin/env bash
# Builds the release wasm and its JS bindings: www/pkg (one thread) and www/pkg-threads (shared
# memory, for the CPU backend's worker pool in cross-origin isolated pages), of which `init()`
# picks one, and www/pkg-chat (the chat-template renderer, crates/weft-chat), which the JS API
# loads on the first chat. THREADS=0 builds only the single-thread one and the renderer.
set -euo pipefail
cd "$(dirname "$0")/.."

# binaryen from npm (Debian's build produces broken output for this module). The feature flags
# match what rustc enables by default for wasm32-unknown-unknown, plus SIMD128 (.cargo/config.toml).
opt() {
  node_modules/.bin/wasm-opt -O3 --enable-simd "$@" \
    --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue
}
size() {
  echo "$1: $(stat -c %s "$2") bytes raw, $(gzip -9 -c "$2" | wc -c) bytes gzipped"
}

# Cargo's own CARGO_TARGET_DIR is honoured, so a clone may share a build cache.
T="${CARGO_TARGET_DIR:-target}"
# LLVM inlines a call without an #[inline] hint only where that costs no code: the async bodies
# of the JS entry points otherwise take in whole loaders, each its own copy (58 KB gzipped of
# the module). Hinted and #[inline(always)] functions (the CPU kernels' helpers, std's
# iterators) are inlined as before, and the decode and prefill speeds in Chromium did not
# change. Passed to the final crate only (`cargo rustc`), which runs the whole-program (LTO)
# optimization, so no dependency is rebuilt for it.
# Panic messages without file names and lines (`-Z location-detail=none`, weft's own code only):
# 596,457 against 603,815 bytes gzipped. weft reports bad input as typed errors; a panic is a
# bug, and its message still says what failed. -Z needs RUSTC_BOOTSTRAP=1, which is set for every
# build here so that they share one set of compiled dependencies.
# The final crate at opt-level 2 instead of 3: 588,955 against 606,433 bytes gzipped, and the CPU
# backend in Chromium as fast (one thread, SmolLM2 Q4_1, prompt 64 + 16: prefill 73.3 / decode
# 36.5 tok/s, against 70.9 / 35.6 measured at level 3 before); opt-level "s" was 576,090 but
# decoded at 20.2.
export RUSTC_BOOTSTRAP=1
SMALL=(-C llvm-args=-inline-threshold=0 -Z location-detail=none -C opt-level=2)
# WEFT_WASM_FEATURES (e.g. web-profile, see Cargo.toml) adds cargo features to both modules.
FEATURES=(${WEFT_WASM_FEATURES:+--features "$WEFT_WASM_FEATURES"})
cargo rustc --release --target wasm32-unknown-unknown --lib "${FEATURES[@]}" -- "${SMALL[@]}"
wasm-bindgen --target web --out-dir www/pkg "$T"/wasm32-unknown-unknown/release/weft.wasm
opt www/pkg/weft_bg.wasm -o www/pkg/weft_bg.wasm
size wasm www/pkg/weft_bg.wasm

cargo build --release --target wasm32-unknown-unknown -p weft-chat
wasm-bindgen --target web --out-dir www/pkg-chat "$T"/wasm32-unknown-unknown/release/weft_chat.wasm
opt www/pkg-chat/weft_chat_bg.wasm -o www/pkg-chat/weft_chat_bg.wasm
size "wasm (chat renderer)" www/pkg-chat/weft_chat_bg.wasm

[ "${THREADS:-1}" = 0 ] && exit 0
# Shared memory needs std built with atomics: -Z build-std, which RUSTC_BOOTSTRAP=1 allows on the
# stable toolchain (with `rustup component add rust-src`). The memory may grow to wasm32's 4 GiB
# (the linker's default maximum for shared memory is 1 GiB). Its own target dir: other flags.
# The link arguments (shared, imported memory; the TLS symbols wasm-bindgen sets up per thread)
# go to the final crate only, through `cargo rustc`, so that changing them rebuilds nothing else.
RUSTC_BOOTSTRAP=1 \
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+simd128,+atomics,+bulk-memory" \
  cargo rustc --release --target wasm32-unknown-unknown --lib "${FEATURES[@]}" --target-dir "$T"/threads -Z build-std=std,panic_abort -- \
  -C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
  -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size -C link-arg=--export=__tls_align \
  -C link-arg=--export=__tls_base "${SMALL[@]}"
wasm-bindgen --target web --out-dir www/pkg-threads "$T"/threads/wasm32-unknown-unknown/release/weft.wasm
opt --enable-threads www/pkg-threads/weft_bg.wasm -o www/pkg-threads/weft_bg.wasm
size "wasm (threads)" www/pkg-threads/weft_bg.wasm
