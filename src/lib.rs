//! weft: quantized neural networks on WebGPU, in the browser (wasm32) and natively (Vulkan, GL).
//!
//! Layout by concern: [`gpu`] owns the device, buffers, shader preprocessing and the pipeline
//! cache; [`ops`] holds one module per kernel family (shape checks, dispatch, CPU reference);
//! `web` is the only wasm-bindgen facade.

// The threaded wasm build (already on RUSTC_BOOTSTRAP for -Z build-std) parks the CPU
// backend's pool workers with `memory.atomic.wait32`, whose intrinsics are still unstable.
#![cfg_attr(all(target_arch = "wasm32", target_feature = "atomics"), feature(stdarch_wasm_atomic_wait))]

/// A shader of shaders/, as build.rs copied it into OUT_DIR (without its comments for wasm32).
macro_rules! wgsl {
    ($file:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/shaders/", $file))
    };
}

pub mod cpu;
pub mod error;
pub mod format;
pub mod model;
pub mod gpu;
pub mod loader;
pub mod ops;
mod order;
pub mod quant;
pub mod selftest;
pub mod tokenizer;

#[cfg(target_arch = "wasm32")]
mod web;

pub use error::{Error, Result};
