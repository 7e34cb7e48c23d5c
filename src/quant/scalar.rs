//! Scalar storage types. Every conversion is written with integer operations on bit patterns so
//! that the WGSL kernel can reproduce it exactly: GPUs may flush subnormals in float arithmetic and
//! their integer-to-float conversions need not round to nearest even.

use super::{le_u16, le_u32, le_u64};
use crate::format::SafeDtype;

/// The f32 quiet-NaN bit. Every NaN leaving the decoder has it set (see `docs/DTYPES.md`).
pub(crate) const QUIET: u32 = 0x0040_0000;
const INF: u32 = 0x7F80_0000;
const MANT: u32 = 0x007F_FFFF;

/// Widens a finite small float (exponent field `e`, `mbits`-bit mantissa `m`, bias `bias`) to f32
/// bits. Every such value is a normal f32, so subnormal sources are renormalised here.
pub(crate) fn widen_finite(sign: u32, e: u32, m: u32, mbits: u32, bias: u32) -> u32 {
    let s = sign << 31;
    if e != 0 {
        return s | ((e + 127 - bias) << 23) | (m << (23 - mbits));
    }
    if m == 0 {
        return s;
    }
    let p = 31 - m.leading_zeros();
    s | ((128 + p - mbits - bias) << 23) | ((m << (23 - p)) & MANT)
}

/// IEEE binary16 to f32 bits; NaN keeps sign and payload, gains the quiet bit.
pub(crate) fn f16_bits(h: u32) -> u32 {
    let sign = (h >> 15) & 1;
    let e = (h >> 10) & 0x1F;
    let m = h & 0x3FF;
    if e == 0x1F {
        let nan = if m != 0 { QUIET | (m << 13) } else { 0 };
        return (sign << 31) | INF | nan;
    }
    widen_finite(sign, e, m, 10, 15)
}

pub(crate) fn f16_to_f32(h: u16) -> f32 {
    f32::from_bits(f16_bits(h as u32))
}

/// Sets the quiet bit of an f32 NaN, leaves every other pattern alone.
pub(crate) fn quiet(bits: u32) -> u32 {
    if bits & 0x7FFF_FFFF > INF {
        bits | QUIET
    } else {
        bits
    }
}

/// FP8 E4M3 "fn": no infinities; S.1111.111 is the only NaN, decoded as the canonical quiet NaN.
pub(crate) fn e4m3_bits(b: u32) -> u32 {
    let sign = (b >> 7) & 1;
    let e = (b >> 3) & 0xF;
    let m = b & 7;
    if e == 0xF && m == 7 {
        return (sign << 31) | INF | QUIET;
    }
    widen_finite(sign, e, m, 3, 7)
}

/// FP8 E5M2 is the top byte of an IEEE binary16.
pub(crate) fn e5m2_bits(b: u32) -> u32 {
    f16_bits(b << 8)
}

/// FP4 E2M1: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no infinities or NaN.
pub(crate) fn e2m1_bits(n: u32) -> u32 {
    widen_finite((n >> 3) & 1, (n >> 1) & 3, n & 1, 1, 1)
}

/// `q + 1` when dropping the low `s` bits of `full` (1..=63) rounds up under nearest-even.
fn round_up(full: u64, s: u32) -> u32 {
    let rem = full & ((1u64 << s) - 1);
    let half = 1u64 << (s - 1);
    let q = full >> s;
    u32::from(rem > half || (rem == half && q & 1 == 1))
}

/// f64 to f32 with round-to-nearest-even; overflow gives ±inf, f64 subnormals give ±0, NaN keeps
/// sign and the top 22 payload bits and gains the quiet bit.
pub(crate) fn f64_bits(v: u64) -> u32 {
    let s = ((v >> 32) as u32) & 0x8000_0000;
    let e = ((v >> 52) & 0x7FF) as i32;
    let m = v & ((1u64 << 52) - 1);
    if e == 0x7FF {
        let nan = if m != 0 { QUIET | (m >> 29) as u32 } else { 0 };
        return s | INF | nan;
    }
    if e == 0 {
        return s;
    }
    let biased = e - 896;
    if biased >= 255 {
        return s | INF;
    }
    let full = m | (1u64 << 52);
    let shift = if biased >= 1 { 29 } else { (30 - biased) as u32 };
    if shift >= 54 {
        // Below half the smallest f32 subnormal.
        return s;
    }
    let q = (full >> shift) as u32;
    let base = if biased >= 1 { ((biased as u32 - 1) << 23) + q } else { q };
    // A carry out of the mantissa correctly bumps the exponent, up to infinity.
    s | (base + round_up(full, shift))
}

/// u64 to f32 with round-to-nearest-even (what Rust's `as f32` does).
pub(crate) fn u64_bits(v: u64) -> u32 {
    if v == 0 {
        return 0;
    }
    let p = 63 - v.leading_zeros();
    if p <= 23 {
        return ((p + 127) << 23) | (((v << (23 - p)) as u32) & MANT);
    }
    let s = p - 23;
    ((p + 126) << 23) + (v >> s) as u32 + round_up(v, s)
}

pub(crate) fn i64_bits(v: i64) -> u32 {
    let sign = if v < 0 { 0x8000_0000 } else { 0 };
    sign | u64_bits(v.unsigned_abs())
}

/// Decodes `elements` values of a safetensors dtype; the caller has checked the byte length.
pub(crate) fn decode(dtype: SafeDtype, bytes: &[u8], elements: usize) -> Vec<f32> {
    let bits: Vec<u32> = match dtype {
        SafeDtype::F64 => bytes.chunks_exact(8).map(|c| f64_bits(le_u64(c))).collect(),
        SafeDtype::F32 => bytes.chunks_exact(4).map(|c| quiet(le_u32(c))).collect(),
        SafeDtype::F16 => bytes.chunks_exact(2).map(|c| f16_bits(le_u16(c) as u32)).collect(),
        SafeDtype::BF16 => bytes.chunks_exact(2).map(|c| quiet((le_u16(c) as u32) << 16)).collect(),
        SafeDtype::F8E4M3 => bytes.iter().map(|&b| e4m3_bits(b as u32)).collect(),
        SafeDtype::F8E5M2 => bytes.iter().map(|&b| e5m2_bits(b as u32)).collect(),
        SafeDtype::F4 => bytes
            .iter()
            .flat_map(|&b| [e2m1_bits(b as u32 & 0xF), e2m1_bits(b as u32 >> 4)])
            .take(elements)
            .collect(),
        SafeDtype::I64 => bytes.chunks_exact(8).map(|c| i64_bits(le_u64(c) as i64)).collect(),
        SafeDtype::U64 => bytes.chunks_exact(8).map(|c| u64_bits(le_u64(c))).collect(),
        SafeDtype::I32 => {
            bytes.chunks_exact(4).map(|c| i64_bits(le_u32(c) as i32 as i64)).collect()
        }
        SafeDtype::U32 => bytes.chunks_exact(4).map(|c| u64_bits(le_u32(c) as u64)).collect(),
        SafeDtype::I16 => {
            bytes.chunks_exact(2).map(|c| i64_bits(le_u16(c) as i16 as i64)).collect()
        }
        SafeDtype::U16 => bytes.chunks_exact(2).map(|c| u64_bits(le_u16(c) as u64)).collect(),
        SafeDtype::I8 => bytes.iter().map(|&b| i64_bits(b as i8 as i64)).collect(),
        SafeDtype::U8 => bytes.iter().map(|&b| u64_bits(b as u64)).collect(),
        SafeDtype::Bool => bytes.iter().map(|&b| if b != 0 { 1.0f32.to_bits() } else { 0 }).collect(),
    };
    bits.into_iter().map(f32::from_bits).collect()
}
