//! Model file formats: safetensors and GGUF headers, parsed from a byte prefix and validated,
//! and the storage types of their tensors; and the `.npy` arrays of activations and decoded tensors.
//!
//! Parsers take the first bytes of a file (and its length when known) and either return a
//! header or [`FormatError::NeedMore`] saying how many bytes to fetch, so a remote loader reads
//! just the header with Range requests.

pub mod dtype;
mod error;
pub mod gguf;
pub mod npy;
pub mod writer;
pub mod safetensors;

use std::ops::Range;

use serde::Serialize;

pub use dtype::{GgmlType, SafeDtype, StorageType};
pub use error::FormatError;
pub use gguf::{parse_gguf, GgufArray, GgufHeader, GgufMetadata, GgufValue};
pub use safetensors::{parse_safetensors, SafetensorsHeader};

/// One tensor as both formats describe it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorInfo {
    pub name: String,
    pub storage: StorageType,
    /// Dimensions, outermost first (row-major), for both formats.
    pub shape: Vec<u64>,
    /// Absolute byte range of the tensor's data in the file.
    pub range: Range<u64>,
}

impl TensorInfo {
    /// Number of elements (the product of the shape; validated not to overflow when parsed).
    pub fn elements(&self) -> u64 {
        self.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).unwrap_or(u64::MAX)
    }

    pub fn byte_len(&self) -> u64 {
        self.range.end.saturating_sub(self.range.start)
    }

    /// Storage cost in bits per weight (NaN for an empty tensor).
    pub fn bits_per_weight(&self) -> f64 {
        self.byte_len() as f64 * 8.0 / self.elements() as f64
    }
}

/// A parsed header of either format.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum ModelHeader {
    Safetensors(SafetensorsHeader),
    Gguf(GgufHeader),
}

impl ModelHeader {
    pub fn format_name(&self) -> &'static str {
        match self {
            Self::Safetensors(_) => "safetensors",
            Self::Gguf(_) => "GGUF",
        }
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        match self {
            Self::Safetensors(h) => &h.tensors,
            Self::Gguf(h) => &h.tensors,
        }
    }

    /// The tensor entries, for a model whose fused matrices are split into their parts.
    pub fn tensors_mut(&mut self) -> &mut Vec<TensorInfo> {
        match self {
            Self::Safetensors(h) => &mut h.tensors,
            Self::Gguf(h) => &mut h.tensors,
        }
    }

    /// Absolute offset where tensor data begins.
    pub fn data_start(&self) -> u64 {
        match self {
            Self::Safetensors(h) => h.data_start,
            Self::Gguf(h) => h.data_start,
        }
    }
}

/// Recognises the format from its first bytes and parses the header.
///
/// GGUF starts with `GGUF`; safetensors with a little-endian length followed by `{`.
pub fn detect_and_parse(prefix: &[u8], file_len: Option<u64>) -> Result<ModelHeader, FormatError> {
    if prefix.starts_with(b"GGUF") {
        return parse_gguf(prefix, file_len).map(ModelHeader::Gguf);
    }
    const DETECT_BYTES: u64 = 9;
    match prefix.get(8) {
        Some(b'{') => parse_safetensors(prefix, file_len).map(ModelHeader::Safetensors),
        Some(_) => Err(FormatError::BadMagic {
            format: "GGUF or safetensors",
            message: "neither the GGUF magic nor a safetensors JSON header".to_string(),
        }),
        None => match file_len {
            Some(file_len) if file_len < DETECT_BYTES => Err(FormatError::BadMagic {
                format: "GGUF or safetensors",
                message: format!("only {file_len} bytes long"),
            }),
            _ => Err(FormatError::NeedMore { needed: DETECT_BYTES, have: prefix.len() as u64 }),
        },
    }
}
