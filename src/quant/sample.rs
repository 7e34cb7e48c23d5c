//! Seeded test data for the decoders, shared by the native tests and the in-browser self-test:
//! random bit patterns with the edge cases of each type forced in (the first elements are always
//! the type's special values, then they recur at random), never an all-zero buffer.

use rand::{rngs::SmallRng, Rng, SeedableRng};

use super::expected_bytes;
use crate::error::Result;
use crate::format::{GgmlType, SafeDtype, StorageType};

const F16_SPECIAL: [u64; 12] =
    [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x0001, 0x03FF, 0x8001, 0x7BFF, 0xFBFF];
const BF16_SPECIAL: [u64; 10] =
    [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0001, 0x007F, 0x7F7F, 0xFFFF];
const F32_SPECIAL: [u64; 10] = [
    0, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000, 0x7F80_0001, 0xFFFF_FFFF, 1,
    0x807F_FFFF, 0x7F7F_FFFF,
];
const F64_SPECIAL: [u64; 14] = [
    0,
    0x8000_0000_0000_0000,
    0x7FF0_0000_0000_0000,
    0xFFF0_0000_0000_0000,
    0x7FF8_0000_0000_0000,
    0x7FF0_0000_0000_0001,
    0xFFF7_FFFF_FFFF_FFFF,
    0x47EF_FFFF_E000_0000, // f32::MAX
    0x47EF_FFFF_F000_0000, // halfway between f32::MAX and 2^128: rounds to infinity
    0x47EF_FFFF_EFFF_FFFF, // just below that: stays f32::MAX
    0x36A0_0000_0000_0000, // 2^-149, the smallest f32 subnormal
    0x3690_0000_0000_0000, // 2^-150, a tie that rounds to zero
    0x3698_0000_0000_0000, // 1.5 * 2^-150: rounds up to 2^-149
    0x0000_0000_0000_0001, // f64 subnormal
];
const E4M3_SPECIAL: [u64; 9] = [0x7F, 0xFF, 0x7E, 0xFE, 0x00, 0x80, 0x01, 0x07, 0x08];
const E5M2_SPECIAL: [u64; 10] = [0x7C, 0xFC, 0x7D, 0x7E, 0x7F, 0x00, 0x80, 0x01, 0x03, 0x7B];
const INT_SPECIAL: [u64; 9] = [
    0,
    1,
    u64::MAX,                // -1 when signed
    0x8000_0000_0000_0000,   // i64::MIN
    0x7FFF_FFFF_FFFF_FFFF,   // i64::MAX
    (1 << 24) + 1,           // a tie: rounds down to even
    (1 << 24) + 3,           // a tie: rounds up to even
    0xFFFF_FF80_0000_0000,   // a tie that carries into the exponent when unsigned
    0x8000_0080_0000_0000,   // a tie when signed 64-bit or unsigned
];

/// `elements` values of `ty` as their stored bytes, from `seed`.
pub fn random_bytes(ty: StorageType, seed: u64, elements: usize) -> Result<Vec<u8>> {
    let len = expected_bytes(ty, elements)? as usize;
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len);
    match ty {
        StorageType::Safe(d) => safe(d, elements, &mut rng, &mut out),
        StorageType::Ggml(GgmlType::F32) => safe(SafeDtype::F32, elements, &mut rng, &mut out),
        StorageType::Ggml(GgmlType::F16) => safe(SafeDtype::F16, elements, &mut rng, &mut out),
        StorageType::Ggml(GgmlType::BF16) => safe(SafeDtype::BF16, elements, &mut rng, &mut out),
        StorageType::Ggml(t) => blocks(t, len, &mut rng, &mut out),
    }
    out.truncate(len);
    if !out.is_empty() && out.iter().all(|&b| b == 0) {
        out[0] = 1;
    }
    Ok(out)
}

fn safe(d: SafeDtype, elements: usize, rng: &mut SmallRng, out: &mut Vec<u8>) {
    let width = (d.bits() / 8).max(1) as usize;
    let specials: &[u64] = match d {
        SafeDtype::F64 => &F64_SPECIAL,
        SafeDtype::F32 => &F32_SPECIAL,
        SafeDtype::F16 => &F16_SPECIAL,
        SafeDtype::BF16 => &BF16_SPECIAL,
        SafeDtype::F8E4M3 => &E4M3_SPECIAL,
        SafeDtype::F8E5M2 => &E5M2_SPECIAL,
        SafeDtype::I64 | SafeDtype::U64 | SafeDtype::I32 | SafeDtype::U32 => &INT_SPECIAL,
        _ => &[],
    };
    // FP4 packs two values per byte: draw whole random bytes, which cover all 16 codes quickly.
    let count = if d == SafeDtype::F4 { elements / 2 } else { elements };
    for i in 0..count {
        let v = match specials.get(i) {
            Some(&s) => s,
            None if !specials.is_empty() && rng.random_range(0..8) == 0 => {
                specials[rng.random_range(0..specials.len())]
            }
            None => random_value(d, rng),
        };
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
}

fn random_value(d: SafeDtype, rng: &mut SmallRng) -> u64 {
    let bits: u64 = rng.random();
    match d {
        // Mostly exponents near the f32 range (fully random f64 bits are nearly all far outside
        // it), a quarter of them exact rounding ties.
        SafeDtype::F64 if rng.random_range(0..4) != 0 => {
            let e: u64 = rng.random_range(1023 - 152..=1023 + 129);
            let mut m = bits & ((1 << 52) - 1);
            if rng.random_range(0..4) == 0 {
                m = (m & !((1 << 29) - 1)) | (1 << 28);
            }
            (bits & (1 << 63)) | (e << 52) | m
        }
        // Every magnitude, and ties at the rounding position.
        SafeDtype::I64 | SafeDtype::U64 | SafeDtype::I32 | SafeDtype::U32 => {
            let width = d.bits() as u32;
            let mut v = (bits >> rng.random_range(0..64)) & (u64::MAX >> (64 - width));
            let top = 63 - v.leading_zeros().min(63);
            if top > 24 && rng.random_range(0..4) == 0 {
                let s = top - 24;
                v = (v & !((1u64 << s) - 1)) | (1u64 << (s - 1));
            }
            v
        }
        SafeDtype::Bool => rng.random_range(0..3u64).min(1) * (bits & 0xFF).max(1),
        _ => bits,
    }
}

/// Offsets of the f16 scale fields in one block.
fn scale_offsets(t: GgmlType) -> &'static [usize] {
    match t {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => &[],
    }
}

/// A finite f16: zero, subnormal or normal of either sign.
pub(crate) fn random_scale(rng: &mut SmallRng) -> u16 {
    let sign = if rng.random() { 0x8000 } else { 0 };
    let mant: u16 = rng.random_range(0..0x400);
    match rng.random_range(0..8) {
        0 => sign,
        1 => sign | mant.max(1),
        _ => sign | rng.random_range(1..31u16) << 10 | mant,
    }
}

fn blocks(t: GgmlType, len: usize, rng: &mut SmallRng, out: &mut Vec<u8>) {
    let size = t.block_bytes() as usize;
    out.resize(len, 0);
    rng.fill(out.as_mut_slice());
    for block in out.chunks_exact_mut(size) {
        for &at in scale_offsets(t) {
            if let Some(field) = block.get_mut(at..at + 2) {
                field.copy_from_slice(&random_scale(rng).to_le_bytes());
            }
        }
    }
}

/// A matrix of `elements` GGML weights that behaves like a model's: random levels, but scales
/// (and block minimums) of moderate size, 2^-7 to 2^-1 with either sign, where
/// [`random_bytes`] draws any finite f16. Dequantized values then stay far inside f16's range,
/// so f16 kernels can be compared with f32 ones. F32, F16 and BF16 get uniform values in [-1, 1).
pub fn random_weights(t: GgmlType, seed: u64, elements: usize) -> Result<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x2545_F491_4F6C_DD1D);
    let floats = || crate::selftest::random_f32(seed, elements);
    match t {
        GgmlType::F32 => return Ok(floats().iter().flat_map(|v| v.to_le_bytes()).collect()),
        GgmlType::F16 => {
            return Ok(floats().iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect())
        }
        GgmlType::BF16 => {
            return Ok(floats().iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect())
        }
        _ => {}
    }
    let mut out = random_bytes(StorageType::Ggml(t), seed, elements)?;
    for block in out.chunks_exact_mut(t.block_bytes() as usize) {
        for &at in scale_offsets(t) {
            if let Some(field) = block.get_mut(at..at + 2) {
                field.copy_from_slice(&moderate_scale(&mut rng).to_le_bytes());
            }
        }
    }
    Ok(out)
}

/// An f16 of magnitude in [2^-7, 2^-1) with a random sign and mantissa.
pub(crate) fn moderate_scale(rng: &mut SmallRng) -> u16 {
    let sign = if rng.random() { 0x8000 } else { 0 };
    sign | rng.random_range(8..14u16) << 10 | rng.random_range(0..0x400u16)
}

