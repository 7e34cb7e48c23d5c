//! Model file formats: safetensors and GGUF headers, parsed from a byte prefix and validated,
//! and the storage types of their tensors.

pub mod dtype;
mod error;

pub use dtype::{GgmlType, SafeDtype, StorageType};
pub use error::FormatError;
