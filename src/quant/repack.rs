//! GGUF block types whose every weight one of weft's formats holds exactly, and the repacking
//! between them. A Q4_0 block (18 bytes) or Q8_0 block (34 bytes) is not word-aligned, so a GPU
//! lane cannot load one with a vector load; the same levels and f16 scales as weft's
//! `q4_g32_sym` / `q8_g32_sym` (quants in aligned words, scales in their own plane) can, and
//! decode to the same bits: `d · (q - 8)` and `d · q` are `scale · (level - zero)` with zero 8
//! or 128. Weights are repacked once, at upload.
//!
//! The K-quants have no weft twin (a Q4_K weight is `d·sc·q − dmin·m`, two products of codes
//! that no single f16 scale and zero point reproduce), so [`to_planes`] gives them their own
//! GPU form, [`KPlanes`]: the same aligned 4-bit words as `q4_g32_sym` (Q6_K's high bits in two
//! more words a chunk, Q5_K's fifth bits a word a chunk in a plane of their own), and each 256-weight super-block's codes word-aligned
//! in a plane of their own, byte for byte as the file has them. Nothing is widened: the planes
//! hold exactly the file's bytes.
//!
//! Q4_1, Q5_0 and Q5_1 take the same planes with a 32-weight block for a super-block: the
//! nibbles as weft's 4-bit words, the fifth bits as Q5_K's high-bit word, and each block's f16
//! params word-aligned: Q4_1 / Q5_1 `d | m << 16` as one head word (`d · q + m` is the K-quants'
//! `d1 · q − m1` with m1 = −m), Q5_0's lone d two a word in [`KPlanes::d`] (`d · (q − 16)`).

use crate::error::{Error, Result};
use crate::format::GgmlType;

use super::weft::{QuantMatrix, Scheme, WeftQuant};

/// The weft format that holds `ty`'s weights exactly, if there is one.
pub fn weft_equivalent(ty: GgmlType) -> Option<WeftQuant> {
    let bits = match ty {
        GgmlType::Q4_0 => 4,
        GgmlType::Q8_0 => 8,
        _ => return None,
    };
    Some(WeftQuant { bits, group: 32, scheme: Scheme::Sym })
}

/// `bytes` ([rows, cols] of `ty`, row-major) as the weft matrix of [`weft_equivalent`]; None for
/// the other types.
pub fn to_weft(ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<Option<QuantMatrix>> {
    let Some(quant) = weft_equivalent(ty) else { return Ok(None) };
    let block = ty.block_bytes() as usize;
    let blocks = rows.checked_mul(cols / 32).filter(|_| cols.is_multiple_of(32));
    if blocks.and_then(|b| b.checked_mul(block)) != Some(bytes.len()) {
        return Err(Error::Decode {
            ty: ty.name(),
            message: format!("[{rows}, {cols}] needs whole 32-element rows of {block}-byte blocks, got {} bytes", bytes.len()),
        });
    }
    let words_per_chunk = quant.bits as usize;
    let mut words = vec![0u32; bytes.len() / block * words_per_chunk];
    let mut scales = Vec::with_capacity(bytes.len() / block);
    for (b, chunk) in bytes.chunks_exact(block).zip(words.chunks_exact_mut(words_per_chunk)) {
        scales.push(u16::from_le_bytes([b[0], b[1]]));
        let qs = &b[2..];
        for level in 0..32 {
            let q = match ty {
                // Element j is the low nibble of qs[j], element j + 16 the high one.
                GgmlType::Q4_0 => ((qs[level % 16] >> (4 * (level / 16))) & 0xF) as u32,
                // i8 plus the zero point 128: the level is the byte with its top bit flipped.
                _ => (qs[level] ^ 0x80) as u32,
            };
            let per_word = 32 / quant.bits as usize;
            chunk[level / per_word] |= q << ((level % per_word) as u32 * quant.bits);
        }
    }
    Ok(Some(QuantMatrix { quant, rows, cols, words, scales, zeros: Vec::new() }))
}

/// A K-quant matrix in the planes the GPU reads (see [`to_planes`]).
#[derive(Clone, Debug, PartialEq)]
pub struct KPlanes {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// [rows, cols / 32 · chunk_words]: each 32-weight chunk's low four bits in weft's 4-bit
    /// layout (weight l in the nibble at bit 4 (l % 8) of word l / 8), so that a lane loads them
    /// as one vec4; then Q6_K's two high bits a weight in two words (see [`high_bit`]).
    pub words: Vec<u32>,
    /// Q5_K, Q5_0, Q5_1: each chunk's fifth bits in one word (see [`high_bit`]), [rows, cols /
    /// 32], apart from the nibbles so that those stay one aligned vec4; empty for the others.
    pub high: Vec<u32>,
    /// [rows, blocks per row, head_words]: each (super-)block's codes as little-endian words:
    /// Q4_K and Q5_K d | dmin << 16 and the twelve bytes of 6-bit scale and min codes, Q6_K its
    /// sixteen 8-bit scales, Q4_1 and Q5_1 d | m << 16; empty for Q5_0.
    pub heads: Vec<u32>,
    /// Q6_K and Q5_0: each (super-)block's f16 d, [rows, blocks per row]; empty for the others.
    pub d: Vec<u16>,
}

/// Words of a (super-)block's head in [`KPlanes::heads`].
pub fn head_words(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 => 1,
        GgmlType::Q5_0 => 0,
        _ => 4,
    }
}

/// Whether [`to_planes`] repacks `ty`.
pub fn has_planes(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
}

/// Whether `ty`'s planes have a block of 32 weights (one chunk) where the K-quants have a
/// super-block of 256.
pub fn is_legacy(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1)
}

/// Words of a 32-weight chunk in [`KPlanes::words`].
pub fn chunk_words(ty: GgmlType) -> usize {
    if ty == GgmlType::Q6_K { 6 } else { 4 }
}

/// Bits of a level of `ty`'s planes: 4, 5 (a word of fifth bits a chunk in [`KPlanes::high`])
/// or 6.
pub fn level_bits(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::Q6_K => 6,
        GgmlType::Q5_K | GgmlType::Q5_0 | GgmlType::Q5_1 => 5,
        _ => 4,
    }
}

/// Where the high bits of weight l (0..32) of a chunk lie, as (word after the four low ones, or
/// of the chunk's high word for the 5-bit types, bit). The kernels read the low nibbles masked in place, at place values 1, 16, 256, 4096 for
/// the four weights that meet one vec4 of activations; the high bits sit at the same place values
/// (times 2^b for the b-th weight sharing a nibble), so they are read the same way. Q6_K: two
/// bits, word l / 16, at bit 16 a + 4 c + 2 b for l = 16 (l / 16) + 8 a + 4 b + c; Q5_K: one
/// bit, at bit 16 a + 4 c + b for l = 16 a + 4 b + c (Q5_0 and Q5_1 alike).
pub fn high_bit(ty: GgmlType, l: usize) -> (usize, u32) {
    let c = (l % 4) as u32;
    match ty {
        GgmlType::Q6_K => (l / 16, 16 * ((l / 8) % 2) as u32 + 4 * c + 2 * ((l / 4) % 2) as u32),
        _ => (0, 16 * (l / 16) as u32 + 4 * c + ((l / 4) % 4) as u32),
    }
}

/// `bytes` ([rows, cols] of `ty`, row-major) as [`KPlanes`]; None for the types without planes.
pub fn to_planes(ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<Option<KPlanes>> {
    if !has_planes(ty) {
        return Ok(None);
    }
    let (block, be) = (ty.block_bytes() as usize, ty.block_elements() as usize);
    let blocks = rows.checked_mul(cols / be).filter(|_| cols.is_multiple_of(be));
    if blocks.and_then(|b| b.checked_mul(block)) != Some(bytes.len()) {
        return Err(Error::Decode {
            ty: ty.name(),
            message: format!("[{rows}, {cols}] needs whole {be}-element rows of {block}-byte blocks, got {} bytes", bytes.len()),
        });
    }
    let n = bytes.len() / block;
    let (cw, chunks) = (chunk_words(ty), be / 32);
    let mut words = vec![0u32; n * chunks * cw];
    let fifth = level_bits(ty) == 5;
    let mut high = vec![0u32; if fifth { n * chunks } else { 0 }];
    let mut heads = Vec::with_capacity(n * head_words(ty));
    let mut d = Vec::new();
    let le = |w: &[u8]| u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    for (i, (b, sb)) in bytes.chunks_exact(block).zip(words.chunks_exact_mut(chunks * cw)).enumerate() {
        let head = match ty {
            GgmlType::Q6_K => {
                d.push(u16::from_le_bytes([b[208], b[209]]));
                &b[192..208]
            }
            GgmlType::Q5_0 => {
                d.push(u16::from_le_bytes([b[0], b[1]]));
                &b[..0]
            }
            GgmlType::Q4_1 | GgmlType::Q5_1 => &b[..4],
            _ => &b[..16],
        };
        heads.extend(head.chunks_exact(4).map(le));
        for (j, chunk) in sb.chunks_exact_mut(cw).enumerate() {
            for l in 0..32 {
                // The level's six, five or four bits, as ggml's decoders read them.
                let q = match ty {
                    GgmlType::Q6_K => {
                        let (n, k) = (j / 4, j % 4);
                        let low = (b[64 * n + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0xF;
                        let high = (b[128 + 32 * n + l] >> (2 * k)) & 3;
                        (low | high << 4) as u32
                    }
                    GgmlType::Q5_K => {
                        let low = (b[48 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
                        let high = (b[16 + l] >> j) & 1;
                        (low | high << 4) as u32
                    }
                    // Element l: the low nibble of qs[l] for l < 16, else the high one of
                    // qs[l - 16]; its fifth bit is bit l of the little-endian qh.
                    GgmlType::Q4_1 => ((b[4 + l % 16] >> (4 * (l / 16))) & 0xF) as u32,
                    GgmlType::Q5_0 | GgmlType::Q5_1 => {
                        let qh = if ty == GgmlType::Q5_0 { 2 } else { 4 };
                        let low = (b[qh + 4 + l % 16] >> (4 * (l / 16))) & 0xF;
                        let high = (b[qh + l / 8] >> (l % 8)) & 1;
                        (low | high << 4) as u32
                    }
                    _ => ((b[16 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) as u32,
                };
                chunk[l / 8] |= (q & 0xF) << (4 * (l % 8));
                let (w, bit) = high_bit(ty, l);
                if cw > 4 {
                    chunk[4 + w] |= (q >> 4) << bit;
                } else if fifth {
                    high[i * chunks + j] |= (q >> 4) << bit;
                }
            }
        }
    }
    Ok(Some(KPlanes { ty, rows, cols, words, high, heads, d }))
}

impl KPlanes {
    /// (Super-)blocks per row.
    pub fn blocks_per_row(&self) -> usize {
        self.cols / self.ty.block_elements() as usize
    }

    /// Level l (0..32) of chunk c (of all the matrix's chunks), read back from the planes.
    fn level(&self, c: usize, l: usize) -> u32 {
        let cw = chunk_words(self.ty);
        let chunk = &self.words[c * cw..][..cw];
        let low = (chunk[l / 8] >> (4 * (l % 8))) & 0xF;
        let (w, bit) = high_bit(self.ty, l);
        match level_bits(self.ty) {
            6 => low | ((chunk[4 + w] >> bit) & 3) << 4,
            5 => low | ((self.high[c] >> bit) & 1) << 4,
            _ => low,
        }
    }

    /// The CPU reference of the planes: what the GGUF decoder gives for the file's bytes, to the
    /// bit, computed the way the kernels read the planes.
    pub fn dequantize(&self) -> Vec<f32> {
        let half = |h: u32| super::scalar::f16_to_f32(h as u16);
        let mut out = Vec::with_capacity(self.rows * self.cols);
        if is_legacy(self.ty) {
            // The decoder's expressions: q · d + m, or (q − 16) · d for Q5_0.
            for b in 0..self.words.len() / chunk_words(self.ty) {
                if self.ty == GgmlType::Q5_0 {
                    let d = half(self.d[b] as u32);
                    out.extend((0..32).map(|l| (self.level(b, l) as i32 - 16) as f32 * d));
                } else {
                    let (d, m) = (half(self.heads[b] & 0xFFFF), half(self.heads[b] >> 16));
                    out.extend((0..32).map(|l| self.level(b, l) as f32 * d + m));
                }
            }
            return out;
        }
        for (sb, head) in self.heads.chunks_exact(head_words(self.ty)).enumerate() {
            let codes: Vec<u8> = head.iter().flat_map(|w| w.to_le_bytes()).collect();
            for j in 0..8 {
                let chunk = sb * 8 + j;
                if self.ty == GgmlType::Q6_K {
                    // Scale 2j for the chunk's first sixteen weights, 2j + 1 for the others.
                    let d = half(self.d[sb] as u32);
                    out.extend((0..32).map(|l| {
                        let sc = codes[2 * j + l / 16] as i8;
                        d * sc as f32 * (self.level(chunk, l) as i32 - 32) as f32
                    }));
                } else {
                    let (d, dmin) = (half(head[0] & 0xFFFF), half(head[0] >> 16));
                    let (sc, m) = super::k4_scale_min(&codes[4..], j);
                    let (d1, m1) = (d * sc as f32, dmin * m as f32);
                    out.extend((0..32).map(|l| d1 * self.level(chunk, l) as f32 - m1));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::StorageType;
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    /// Random blocks with finite f16 scales (subnormal ones included), every level present.
    fn blocks(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let n = rows * cols / 32;
        let mut out = Vec::new();
        for i in 0..n {
            let d = match i % 5 {
                0 => 0x0003u16, // subnormal
                1 => 0x8400,    // negative
                _ => rng.random_range(0x0400u16..0x7800),
            };
            out.extend(d.to_le_bytes());
            out.extend((0..ty.block_bytes() - 2).map(|_| rng.random::<u8>()));
        }
        out
    }

    #[test]
    fn repacked_blocks_decode_to_the_same_bits() {
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
            let (rows, cols) = (7, 96);
            let bytes = blocks(ty, rows, cols, 11);
            let want = crate::quant::decode_to_f32(StorageType::Ggml(ty), &bytes, rows * cols).unwrap();
            let m = to_weft(ty, rows, cols, &bytes).unwrap().unwrap();
            let got = m.dequantize();
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{} element {i}: {g} against {w}", ty.name());
            }
        }
    }

    #[test]
    fn k_planes_decode_to_the_same_bits() {
        // A K that is a multiple of 256 over several super-blocks, an odd row count, the
        // test weights' random codes and scales.
        for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
            let (rows, cols) = (5, 768);
            let bytes = crate::quant::sample::random_weights(ty, 3, rows * cols).unwrap();
            planes_decode_to_the_decoders_bits(ty, rows, cols, &bytes);
        }
    }

    /// `ty`'s planes of `bytes` hold the file's bytes, no more, in the planes' sizes, and decode
    /// to the GGUF decoder's bits.
    fn planes_decode_to_the_decoders_bits(ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) {
        let want = crate::quant::decode_to_f32(StorageType::Ggml(ty), bytes, rows * cols).unwrap();
        let m = to_planes(ty, rows, cols, bytes).unwrap().unwrap();
        let (chunks, blocks) = (rows * cols / 32, rows * cols / ty.block_elements() as usize);
        assert_eq!((m.words.len(), m.heads.len()), (chunks * chunk_words(ty), blocks * head_words(ty)), "{}", ty.name());
        assert_eq!(m.high.len(), if level_bits(ty) == 5 { chunks } else { 0 }, "{}", ty.name());
        assert_eq!((m.words.len() + m.high.len() + m.heads.len()) * 4 + m.d.len() * 2, bytes.len(), "{}", ty.name());
        let got = m.dequantize();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{} element {i}: {g} against {w}", ty.name());
        }
    }

    #[test]
    fn legacy_planes_decode_to_the_same_bits() {
        // Every class of f16 for d and m in turn (subnormal, negative, zero, infinite, NaN,
        // largest), then random ones; the other bytes random, so every level and fifth bit.
        let special = [0x0003u16, 0x8001, 0x8400, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E01, 0xFD00, 0x7BFF];
        for ty in [GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1] {
            let (rows, cols) = (7, 96);
            let mut rng = SmallRng::seed_from_u64(5);
            let mut bytes = Vec::new();
            for i in 0..rows * cols / 32 {
                let pick = |k: usize, rng: &mut SmallRng| special.get(k).copied().unwrap_or_else(|| rng.random_range(0u16..0x7C00) | (rng.random::<u16>() & 0x8000));
                let (d, m) = (pick(i % 16, &mut rng), pick((i + 3) % 16, &mut rng));
                bytes.extend(d.to_le_bytes());
                if ty != GgmlType::Q5_0 {
                    bytes.extend(m.to_le_bytes());
                }
                let head = if ty == GgmlType::Q5_0 { 2 } else { 4 };
                bytes.extend((head..ty.block_bytes() as usize).map(|_| rng.random::<u8>()));
            }
            planes_decode_to_the_decoders_bits(ty, rows, cols, &bytes);
        }
    }

    #[test]
    fn k_planes_other_types_and_ragged_rows() {
        assert!(to_planes(GgmlType::Q4_0, 1, 32, &[0; 18]).unwrap().is_none());
        assert!(to_planes(GgmlType::Q4_K, 1, 256, &[0; 143]).is_err());
        assert!(to_planes(GgmlType::Q4_K, 1, 512, &[0; 144]).is_err());
        assert!(to_planes(GgmlType::Q4_1, 1, 48, &[0; 30]).is_err());
        assert!(to_planes(GgmlType::Q5_0, 2, 32, &[0; 22]).is_err());
    }

    #[test]
    fn other_types_and_ragged_rows() {
        assert!(to_weft(GgmlType::Q4_1, 1, 32, &[0; 20]).unwrap().is_none());
        assert!(to_weft(GgmlType::Q4_0, 2, 32, &[0; 18]).is_err());
        assert!(to_weft(GgmlType::Q4_0, 1, 48, &[0; 27]).is_err());
    }
}
