//! Models: configuration, the mapping of file tensor names to model parts, and the forward
//! pass. Model code builds on `ops` and never touches wgpu directly.

pub mod config;
pub mod names;

pub use config::{Arch, LlamaConfig};
