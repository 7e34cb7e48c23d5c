//! GGML block types, following the block layouts of ggml's `ggml-common.h` and the arithmetic
//! order of its reference dequantisers, in f32. Every product here is exact (an f16 scale times an
//! integer below 2^13), so the only rounding is the final add or subtract, and whether a compiler
//! fuses it into an FMA cannot change a bit; `docs/DTYPES.md` has the argument.

use super::scalar::f16_to_f32;
use crate::format::GgmlType;

fn half(b: &[u8], at: usize) -> f32 {
    match b.get(at..at + 2) {
        Some(&[lo, hi]) => f16_to_f32(u16::from_le_bytes([lo, hi])),
        _ => 0.0,
    }
}

/// The byte at `at` of a block whose length the caller has checked; 0 past the end keeps this
/// total without a panic path.
fn byte(b: &[u8], at: usize) -> u32 {
    b.get(at).copied().unwrap_or(0) as u32
}

/// Decodes whole blocks; `bytes` holds exactly `elements / block_elements` blocks.
pub(crate) fn decode(ty: GgmlType, bytes: &[u8], elements: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(elements);
    match ty {
        GgmlType::F32 => {
            out.extend(bytes.chunks_exact(4).map(|c| f32::from_bits(super::scalar::quiet(super::le_u32(c)))))
        }
        GgmlType::F16 => out.extend(bytes.chunks_exact(2).map(|c| f16_to_f32(super::le_u16(c)))),
        GgmlType::BF16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|c| f32::from_bits(super::scalar::quiet((super::le_u16(c) as u32) << 16))),
        ),
        _ => {
            let size = ty.block_bytes() as usize;
            for block in bytes.chunks_exact(size) {
                match ty {
                    GgmlType::Q4_0 => q4_0(block, &mut out),
                    GgmlType::Q4_1 => q4_1(block, &mut out),
                    GgmlType::Q5_0 => q5_0(block, &mut out),
                    GgmlType::Q5_1 => q5_1(block, &mut out),
                    GgmlType::Q8_0 => q8_0(block, &mut out),
                    GgmlType::Q2_K => q2_k(block, &mut out),
                    GgmlType::Q3_K => q3_k(block, &mut out),
                    GgmlType::Q4_K => q4_k(block, &mut out),
                    GgmlType::Q5_K => q5_k(block, &mut out),
                    GgmlType::Q6_K => q6_k(block, &mut out),
                    GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {}
                }
            }
        }
    }
    out
}

// Q4_0: d f16, qs[16]; element j is the low nibble of qs[j], element j+16 the high one, minus 8.
fn q4_0(b: &[u8], out: &mut Vec<f32>) {
    let d = half(b, 0);
    for shift in [0, 4] {
        out.extend((0..16).map(|j| ((byte(b, 2 + j) >> shift & 0xF) as i32 - 8) as f32 * d));
    }
}

// Q4_1: d f16, m f16, qs[16]; y = q*d + m.
fn q4_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (half(b, 0), half(b, 2));
    for shift in [0, 4] {
        out.extend((0..16).map(|j| (byte(b, 4 + j) >> shift & 0xF) as f32 * d + m));
    }
}

/// Fifth bit of element `i` of a Q5 block: bit i of the little-endian u32 `qh`.
fn q5_high(qh: u32, i: usize) -> u32 {
    ((qh >> i) & 1) << 4
}

// Q5_0: d f16, qh u32, qs[16]; q = nibble | high bit << 4, minus 16.
fn q5_0(b: &[u8], out: &mut Vec<f32>) {
    let d = half(b, 0);
    let qh = (0..4).fold(0u32, |acc, k| acc | byte(b, 2 + k) << (8 * k));
    for (shift, base) in [(0, 0), (4, 16)] {
        out.extend((0..16).map(|j| {
            let q = (byte(b, 6 + j) >> shift & 0xF) | q5_high(qh, base + j);
            (q as i32 - 16) as f32 * d
        }));
    }
}

// Q5_1: d f16, m f16, qh u32, qs[16]; y = q*d + m.
fn q5_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (half(b, 0), half(b, 2));
    let qh = (0..4).fold(0u32, |acc, k| acc | byte(b, 4 + k) << (8 * k));
    for (shift, base) in [(0, 0), (4, 16)] {
        out.extend((0..16).map(|j| {
            let q = (byte(b, 8 + j) >> shift & 0xF) | q5_high(qh, base + j);
            q as f32 * d + m
        }));
    }
}

// Q8_0: d f16, qs[32] as i8.
fn q8_0(b: &[u8], out: &mut Vec<f32>) {
    let d = half(b, 0);
    out.extend((0..32).map(|j| byte(b, 2 + j) as u8 as i8 as f32 * d));
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d f16, dmin f16.
// Element order: two halves of 128; in each, four 2-bit planes of 32 bytes, 16 per sub-block.
fn q2_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (half(b, 80), half(b, 82));
    for n in 0..2 {
        for j in 0..4 {
            for sub in 0..2 {
                let sc = byte(b, n * 8 + j * 2 + sub);
                let dl = d * (sc & 0xF) as f32;
                let ml = dmin * (sc >> 4) as f32;
                out.extend((0..16).map(|l| {
                    let q = byte(b, 16 + n * 32 + sub * 16 + l) >> (2 * j) & 3;
                    dl * q as f32 - ml
                }));
            }
        }
    }
}

/// 6-bit scale `j` (0..16) of a Q3_K block, minus 32: low four bits from bytes 0..8 (low nibbles
/// first), high two bits from bytes 8..12.
fn q3_k_scale(scales: &[u8], j: usize) -> i32 {
    let low = if j < 8 { byte(scales, j) & 0xF } else { byte(scales, j - 8) >> 4 };
    let high = byte(scales, 8 + j % 4) >> (2 * (j / 4)) & 3;
    (low | high << 4) as i32 - 32
}

// Q3_K: hmask[32], qs[64], scales[12], d f16. q = 2 low bits - (4 if the hmask bit is clear).
fn q3_k(b: &[u8], out: &mut Vec<f32>) {
    let d = half(b, 108);
    let scales = b.get(96..108).unwrap_or(&[]);
    for n in 0..2 {
        for j in 0..4 {
            for sub in 0..2 {
                let dl = d * q3_k_scale(scales, n * 8 + j * 2 + sub) as f32;
                let bit = n * 4 + j;
                out.extend((0..16).map(|l| {
                    let low = (byte(b, 32 + n * 32 + sub * 16 + l) >> (2 * j) & 3) as i32;
                    let high = if byte(b, sub * 16 + l) >> bit & 1 != 0 { 0 } else { 4 };
                    dl * (low - high) as f32
                }));
            }
        }
    }
}

/// Scale and min `j` (0..8) of the 12 packed 6-bit pairs shared by Q4_K and Q5_K.
pub(crate) fn k4_scale_min(s: &[u8], j: usize) -> (u32, u32) {
    if j < 4 {
        (byte(s, j) & 63, byte(s, j + 4) & 63)
    } else {
        (
            (byte(s, j + 4) & 0xF) | (byte(s, j - 4) >> 6) << 4,
            (byte(s, j + 4) >> 4) | (byte(s, j) >> 6) << 4,
        )
    }
}

// Q4_K: d f16, dmin f16, scales[12], qs[128]; four chunks of 64: low nibbles then high nibbles.
fn q4_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let scales = b.get(4..16).unwrap_or(&[]);
    for c in 0..4 {
        for hi in 0..2 {
            let (sc, m) = k4_scale_min(scales, 2 * c + hi);
            let (d1, m1) = (d * sc as f32, dmin * m as f32);
            out.extend((0..32).map(|l| {
                let q = byte(b, 16 + 32 * c + l) >> (4 * hi) & 0xF;
                d1 * q as f32 - m1
            }));
        }
    }
}

// Q5_K: d, dmin, scales[12], qh[32], qs[128]; the fifth bit of chunk c, half hi is bit 2c+hi of qh[l].
fn q5_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let scales = b.get(4..16).unwrap_or(&[]);
    for c in 0..4 {
        for hi in 0..2 {
            let (sc, m) = k4_scale_min(scales, 2 * c + hi);
            let (d1, m1) = (d * sc as f32, dmin * m as f32);
            out.extend((0..32).map(|l| {
                let low = byte(b, 48 + 32 * c + l) >> (4 * hi) & 0xF;
                let high = (byte(b, 16 + l) >> (2 * c + hi) & 1) << 4;
                d1 * (low | high) as f32 - m1
            }));
        }
    }
}

// Q6_K: ql[128], qh[64], scales[16] as i8, d f16; y = (d * scale) * (q - 32).
fn q6_k(b: &[u8], out: &mut Vec<f32>) {
    let d = half(b, 208);
    for n in 0..2 {
        for k in 0..4 {
            out.extend((0..32).map(|l| {
                let low = byte(b, n * 64 + (k & 1) * 32 + l) >> (4 * (k >> 1)) & 0xF;
                let high = (byte(b, 128 + n * 32 + l) >> (2 * k) & 3) << 4;
                let sc = byte(b, 192 + n * 8 + l / 16 + 2 * k) as u8 as i8;
                d * sc as f32 * ((low | high) as i32 - 32) as f32
            }));
        }
    }
}
