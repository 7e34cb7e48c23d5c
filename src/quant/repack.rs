//! GGUF block types whose every weight one of weft's formats holds exactly, and the repacking
//! between them. A Q4_0 block (18 bytes) or Q8_0 block (34 bytes) is not word-aligned, so a GPU
//! lane cannot load one with a vector load; the same levels and f16 scales as weft's
//! `q4_g32_sym` / `q8_g32_sym` (quants in aligned words, scales in their own plane) can, and
//! decode to the same bits: `d · (q - 8)` and `d · q` are `scale · (level - zero)` with zero 8
//! or 128. Weights are repacked once, at upload.

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
    fn other_types_and_ragged_rows() {
        assert!(to_weft(GgmlType::Q4_1, 1, 32, &[0; 20]).unwrap().is_none());
        assert!(to_weft(GgmlType::Q4_0, 2, 32, &[0; 18]).is_err());
        assert!(to_weft(GgmlType::Q4_0, 1, 48, &[0; 27]).is_err());
    }
}
