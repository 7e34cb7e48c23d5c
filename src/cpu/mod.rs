//! The CPU backend: the forward graph of `model::llama::forward` executed with CPU kernels, no
//! GPU context involved. Weights stay packed in their stored formats (`matrix.rs`); products
//! run per 32-weight block on 8-bit-quantized activations or in f32 (`kernels.rs`, with SIMD
//! per instruction set); attention reads a KV cache in f32, f16 or q8 rows as the GPU stores
//! them (`attention.rs`); the sampler is the GPU sampler's CPU reference. Threads split each
//! op's rows (`threads.rs`).

mod attention;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod engine;
pub mod encoder;
mod exec;
pub mod gemm;
pub mod kernels;
mod load;
pub mod matrix;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
mod pool;
mod run;
pub mod selftest;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
mod sync;
#[cfg(test)]
mod tests;
pub mod threads;

pub use engine::{Arithmetic, CpuLlama, CpuOptions, CpuWeights, LayerWeights};
pub use load::{fits_address_space, memory_needed, open, open_folder, open_with, CpuLoaded};
