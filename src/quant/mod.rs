//! CPU reference decoders: every storage type to f32, bit for bit what the `dequant` kernel
//! produces. The rules (rounding, NaN bits, arithmetic order) are in `docs/DTYPES.md`.

pub mod calibration;
mod ggml;
// The CPU backend's K-quant kernels read the packed scales the way the decoder does.
pub(crate) use ggml::k4_scale_min;
pub mod gptq;
pub mod kcode;
pub mod rans;
pub mod sample;
pub mod scaled;
mod search;
mod scalar;
pub(crate) use scalar::f16_bits;
pub mod repack;
pub mod weft;

use crate::error::{Error, Result};
use crate::format::StorageType;

/// Decodes `elements` values of type `ty` from `bytes` (exactly `ty.bytes_for(elements)` bytes).
/// A partial block, an odd FP4 count or a length mismatch is [`Error::Decode`].
pub fn decode_to_f32(ty: StorageType, bytes: &[u8], elements: usize) -> Result<Vec<f32>> {
    let want = expected_bytes(ty, elements)?;
    if bytes.len() as u64 != want {
        return Err(Error::Decode {
            ty: ty.name(),
            message: format!("{elements} elements need {want} bytes, got {}", bytes.len()),
        });
    }
    Ok(match ty {
        StorageType::Safe(d) => scalar::decode(d, bytes, elements),
        StorageType::Ggml(t) => ggml::decode(t, bytes, elements),
    })
}

/// Bytes that `elements` values of `ty` occupy, or [`Error::Decode`] saying why none fit.
pub fn expected_bytes(ty: StorageType, elements: usize) -> Result<u64> {
    ty.bytes_for(elements as u64).ok_or_else(|| Error::Decode {
        ty: ty.name(),
        message: match ty {
            StorageType::Ggml(t) => format!(
                "{elements} elements are not a whole number of {}-element blocks",
                t.block_elements()
            ),
            StorageType::Safe(_) => format!("{elements} elements do not fill whole bytes"),
        },
    })
}

/// Packs bytes into little-endian 32-bit words for upload, zero-padding the last word.
pub fn pack_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| c.iter().rev().fold(0u32, |acc, &b| (acc << 8) | b as u32))
        .collect()
}

// The `chunks_exact` callers hand these exactly 2, 4 or 8 bytes; a shorter slice reads as zeros
// rather than panicking.
fn le_u16(c: &[u8]) -> u16 {
    c.iter().rev().fold(0u16, |acc, &b| (acc << 8) | b as u16)
}

fn le_u32(c: &[u8]) -> u32 {
    c.iter().rev().fold(0u32, |acc, &b| (acc << 8) | b as u32)
}

fn le_u64(c: &[u8]) -> u64 {
    c.iter().rev().fold(0u64, |acc, &b| (acc << 8) | b as u64)
}

#[cfg(test)]
mod tests;
