//! The `k` scheme (`q{b}_g{g}_k`, docs/FORMAT.md): an asymmetric weft format whose group scales
//! and zero points are stored as one byte each instead of two f16 values, which takes a 4-bit
//! group of 32 from 5 to 4.5 bits per weight, a 3-bit one from 4 to 3.5 and a 2-bit one from 3
//! to 2.5.
//!
//! A group's scale is `s · 2^e` (`s` its byte, `e` its row's exponent) and its zero point
//! `z / 8 − 8` (`z` its byte). Both are exact f16 values (at most 8 significant bits, inside
//! f16's range), so a `k` matrix in memory is its asymmetric twin with those f16 scales and zero
//! points: every decoder and kernel of the asymmetric scheme reads it unchanged and bit-exactly.
//! The scale codes follow each row's largest scale (like a K-quant super-block, but per row, so
//! rows of any multiple of the group fit); zero points keep eighths of a level and a scale code
//! is under 1/127 of the row's largest scale, so a grid copied from an asymmetric source
//! (SmolLM2's Q4_1 layers) moves little.

use half::f16;

use crate::error::{Error, Result};

use super::search::weighted_error;
use super::weft::{QuantMatrix, Scheme, WeftQuant};

/// Range of a row's exponent: `255 · 2^7` is the largest scale under f16's maximum, and every
/// f16 value is a multiple of `2^-24`.
const EXP_MIN: i32 = -24;
const EXP_MAX: i32 = 7;

/// Stored bytes of a `k` matrix besides its packed levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KCodes {
    /// `[rows, 1 + groups]`: each row's `e − EXP_MIN`, then its groups' scale codes.
    pub scales: Vec<u8>,
    /// `[rows, groups]`: zero-point codes.
    pub zeros: Vec<u8>,
}

fn pow2(e: i32) -> f32 {
    // 2^e as f32 bits: exact, and the same on every platform.
    f32::from_bits(((e + 127) as u32) << 23)
}

fn zero_of(z: u8) -> f32 {
    z as f32 / 8.0 - 8.0
}

/// The smallest row exponent whose 255 codes reach `max`.
fn exponent_for(max: f32) -> i32 {
    let mut e = EXP_MIN;
    while e < EXP_MAX && max > 255.0 * pow2(e) {
        e += 1;
    }
    e
}

/// Moves the f16 (scale, zero point) of each group of one row onto the `k` grid: the row's
/// exponent from its largest scale, then per group the best of the neighbouring scale codes and
/// zero-point codes (the rounded one, its neighbours and the least-squares zero point for the
/// scale), scored by the group's (importance-weighted) error. `x` is the row padded to whole
/// groups; `quant` the asymmetric twin.
pub(super) fn snap_row(quant: WeftQuant, x: &[f32], imp: Option<&[f32]>, params: &mut [(f16, f16)]) {
    let g = quant.group as usize;
    let max = params.iter().map(|p| p.0.to_f32()).fold(0f32, f32::max);
    let unit = pow2(exponent_for(max));
    let top = (quant.levels() - 1) as f32;
    for (gi, p) in params.iter_mut().enumerate() {
        let xs = &x[gi * g..(gi + 1) * g];
        let w = imp.map(|w| &w[gi * g..(gi + 1) * g]).filter(|w| w.iter().any(|&v| v > 0.0));
        let s0 = (p.0.to_f32() / unit).round().clamp(0.0, 255.0);
        let z0 = ((p.1.to_f32() + 8.0) * 8.0).round().clamp(0.0, 255.0);
        let mut best = (f64::INFINITY, 0f32, 0f32);
        for s in [s0 - 1.0, s0, s0 + 1.0].into_iter().filter(|s| (0.0..=255.0).contains(s)) {
            let scale = s * unit;
            let mut zs = vec![z0 - 1.0, z0, z0 + 1.0];
            if scale > 0.0 {
                // Least-squares zero point for this scale, with the levels of the rounded one.
                let zr = zero_of(z0 as u8);
                let (mut num, mut den) = (0f64, 0f64);
                for (j, &v) in xs.iter().enumerate() {
                    let q = (v / scale + zr).round().clamp(0.0, top);
                    let wj = w.map_or(1.0, |w| w[j] as f64);
                    num += wj * (q - v / scale) as f64;
                    den += wj;
                }
                if den > 0.0 {
                    zs.push((((num / den) as f32 + 8.0) * 8.0).round());
                }
            }
            for z in zs.into_iter().filter(|z| (0.0..=255.0).contains(z)) {
                let err = weighted_error(quant, xs, w, scale, zero_of(z as u8));
                if err < best.0 {
                    best = (err, scale, zero_of(z as u8));
                }
            }
        }
        *p = (f16::from_f32(best.1), f16::from_f32(best.2));
    }
}

/// The largest `e` with every value an integer multiple of `2^e` (values are exact f16s).
fn common_exponent(values: impl Iterator<Item = f32>) -> i32 {
    values
        .filter(|&v| v > 0.0)
        .map(|v| {
            let bits = v.to_bits();
            let mant = (bits & 0x7f_ffff) | 0x80_0000;
            ((bits >> 23) & 0xff) as i32 - 150 + mant.trailing_zeros() as i32
        })
        .min()
        .unwrap_or(EXP_MIN)
        .clamp(EXP_MIN, EXP_MAX)
}

/// The stored codes of a `k` matrix (as [`super::weft::quantize_weighted`] makes it), or
/// [`Error::Decode`] when a scale or zero point is off the `k` grid.
pub fn encode(m: &QuantMatrix) -> Result<KCodes> {
    let gpr = m.quant.groups_per_row(m.cols);
    let off = |what: &str, r: usize| Error::Decode {
        ty: "weft",
        message: format!("row {r}: a {what} is not on the 8-bit grid of {}_k", m.quant.name().trim_end_matches("_asym")),
    };
    let mut codes = KCodes { scales: Vec::with_capacity(m.rows * (gpr + 1)), zeros: Vec::with_capacity(m.rows * gpr) };
    for r in 0..m.rows {
        let scales: Vec<f32> = m.scales[r * gpr..(r + 1) * gpr].iter().map(|&h| f16::from_bits(h).to_f32()).collect();
        let e = common_exponent(scales.iter().copied());
        codes.scales.push((e - EXP_MIN) as u8);
        for &v in &scales {
            let s = v / pow2(e);
            if !(0.0..=255.0).contains(&s) || s.fract() != 0.0 {
                return Err(off("scale", r));
            }
            codes.scales.push(s as u8);
        }
        for &h in &m.zeros[r * gpr..(r + 1) * gpr] {
            let z = (f16::from_bits(h).to_f32() + 8.0) * 8.0;
            if !(0.0..=255.0).contains(&z) || z.fract() != 0.0 {
                return Err(off("zero point", r));
            }
            codes.zeros.push(z as u8);
        }
    }
    Ok(codes)
}

/// A `k` matrix from its stored bytes, as its asymmetric twin with exact f16 scales and zero
/// points. Lengths are checked; a row exponent out of range is [`Error::Decode`].
pub fn decode(quant: WeftQuant, rows: usize, cols: usize, words: Vec<u32>, scales: &[u8], zeros: &[u8]) -> Result<QuantMatrix> {
    let gpr = quant.groups_per_row(cols);
    let bad = |message: String| Error::Decode { ty: "weft", message };
    if scales.len() != rows * (gpr + 1) || zeros.len() != rows * gpr || words.len() != rows * quant.words_per_row(cols) {
        return Err(bad(format!(
            "{} [{rows}, {cols}]: {} words, {} scale bytes, {} zero bytes do not match the format",
            quant.name(),
            words.len(),
            scales.len(),
            zeros.len()
        )));
    }
    let twin = WeftQuant { scheme: Scheme::Asym, ..quant };
    let mut m = QuantMatrix { quant: twin, rows, cols, words, scales: Vec::with_capacity(rows * gpr), zeros: Vec::with_capacity(rows * gpr) };
    for (row, z) in scales.chunks_exact(gpr + 1).zip(zeros.chunks_exact(gpr.max(1))) {
        let e = row[0] as i32 + EXP_MIN;
        if e > EXP_MAX {
            return Err(bad(format!("{}: row exponent {e} is over {EXP_MAX}", quant.name())));
        }
        m.scales.extend(row[1..].iter().map(|&s| f16::from_f32(s as f32 * pow2(e)).to_bits()));
        m.zeros.extend(z.iter().take(gpr).map(|&z| f16::from_f32(zero_of(z)).to_bits()));
    }
    Ok(m)
}

/// A `k` matrix's three entropy-coded blobs (docs/FORMAT.md, "Entropy-coded `k` matrices"): its
/// levels, group after group as they are packed, with one table per rounded zero point; its
/// rows' exponent bytes followed by its scale codes; its zero-point codes. Each stream is
/// [`super::rans`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KCoded {
    pub levels: Vec<u8>,
    pub scales: Vec<u8>,
    pub zeros: Vec<u8>,
}

/// Entropy-codes a `k` matrix (as [`super::weft::quantize_weighted`] makes it): lossless, so
/// [`decode_coded`] gives back `m` bit for bit.
pub fn encode_coded(m: &QuantMatrix) -> Result<KCoded> {
    let codes = encode(m)?;
    let gpr = m.quant.groups_per_row(m.cols);
    let g = m.quant.group as usize;
    let wpg = m.quant.words_per_group();
    let mut levels = Vec::with_capacity(m.rows * gpr * g);
    for gi in 0..m.rows * gpr {
        let words = &m.words[gi * wpg..(gi + 1) * wpg];
        levels.extend((0..g).map(|j| super::weft::get_q(words, m.quant.bits, j) as u8));
    }
    let exponents: Vec<u8> = codes.scales.chunks_exact(gpr + 1).map(|r| r[0]).collect();
    let scale_codes: Vec<u8> = codes.scales.chunks_exact(gpr + 1).flat_map(|r| r[1..].to_vec()).collect();
    let mut scales = exponents;
    scales.extend(super::rans::encode_plain(&scale_codes, 256));
    let contexts = level_contexts(m.quant, &codes.zeros);
    Ok(KCoded {
        levels: super::rans::encode(&levels, m.quant.levels() as usize, &contexts, m.quant.levels() as usize, g)?,
        scales,
        zeros: super::rans::encode_plain(&codes.zeros, 256),
    })
}

/// Each group's context for its levels: its zero point rounded to a level (half up, in integer
/// arithmetic from the code) and clamped to the grid. A group's levels cluster around the level
/// its zero maps to, so one table per zero point codes them in about 0.1 bit a weight less
/// (SmolLM2 at 4 bits: 3.76 bits against 3.86 with one table).
fn level_contexts(quant: WeftQuant, zero_codes: &[u8]) -> Vec<u8> {
    let top = quant.levels() as i32 - 1;
    // zero = z / 8 − 8, so round(zero) = floor((z − 64 + 4) / 8).
    zero_codes.iter().map(|&z| (z as i32 - 60).div_euclid(8).clamp(0, top) as u8).collect()
}

/// A `k` matrix from its entropy-coded blobs, as its asymmetric twin ([`decode`]'s result).
/// Damaged or mis-sized streams are [`Error::Decode`].
pub fn decode_coded(quant: WeftQuant, rows: usize, cols: usize, levels: &[u8], scales: &[u8], zeros: &[u8]) -> Result<QuantMatrix> {
    let gpr = quant.groups_per_row(cols);
    let g = quant.group as usize;
    let groups = rows.checked_mul(gpr).filter(|&n| n.checked_mul(g).is_some());
    let Some(groups) = groups.filter(|_| scales.len() >= rows) else {
        return Err(Error::Decode { ty: "weft", message: format!("{} [{rows}, {cols}]: the scale blob has no row exponents", quant.name()) });
    };
    let scale_codes = super::rans::decode_plain(&scales[rows..], 256, groups)?;
    let zero_codes = super::rans::decode_plain(zeros, 256, groups)?;
    let contexts = level_contexts(quant, &zero_codes);
    let levels = super::rans::decode(levels, quant.levels() as usize, groups * g, &contexts, quant.levels() as usize, g)?;
    let mut packed = Vec::with_capacity(rows * (gpr + 1));
    for r in 0..rows {
        packed.push(scales[r]);
        packed.extend_from_slice(&scale_codes[r * gpr..(r + 1) * gpr]);
    }
    let mut words = vec![0u32; rows * quant.words_per_row(cols)];
    if quant.bits == 3 {
        // Chunks of 32 levels in three words: the low bit pairs of 16 levels, twice, then the
        // 32 high bits.
        for (lv, w) in levels.chunks_exact(32).zip(words.chunks_exact_mut(3)) {
            for (j, &q) in lv.iter().enumerate() {
                w[j / 16] |= (q as u32 & 3) << (2 * (j % 16));
                w[2] |= ((q as u32 >> 2) & 1) << j;
            }
        }
    } else {
        let per_word = (32 / quant.bits) as usize;
        for (lv, w) in levels.chunks_exact(per_word).zip(words.iter_mut()) {
            *w = lv.iter().rev().fold(0u32, |acc, &q| (acc << quant.bits) | q as u32);
        }
    }
    decode(quant, rows, cols, words, &packed, &zero_codes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::weft::{quantize, quantize_weighted, Weights};
    use crate::selftest::random_f32;

    fn rms(a: &[f32], b: &[f32]) -> f64 {
        (a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum::<f64>() / a.len() as f64).sqrt()
    }

    #[test]
    fn codes_round_trip_and_decode_exactly() {
        // Rows of very different magnitudes: the row exponent follows each.
        let (rows, cols) = (6, 96);
        let mut x = random_f32(21, rows * cols);
        for (i, v) in x.iter_mut().enumerate() {
            *v *= [1e-4f32, 0.02, 1.0, 40.0, 3.0, 0.5][i / cols];
        }
        for bits in [2, 3, 4] {
            let k = WeftQuant::new(bits, 32, Scheme::K).unwrap();
            let m = quantize(k, &x, rows, cols).unwrap();
            assert_eq!(m.quant.scheme, Scheme::Asym, "in memory a k matrix is its asymmetric twin");
            let codes = encode(&m).unwrap();
            assert_eq!(codes.scales.len() + codes.zeros.len() + m.words.len() * 4, k.file_bytes(rows, cols));
            let back = decode(k, rows, cols, m.words.clone(), &codes.scales, &codes.zeros).unwrap();
            assert_eq!(back, m, "{bits} bits");
        }
    }

    #[test]
    fn k_costs_little_against_f16_parameters() {
        let (rows, cols) = (16, 576);
        let x = random_f32(3, rows * cols);
        for bits in [2, 3, 4] {
            let asym = quantize(WeftQuant::new(bits, 32, Scheme::Asym).unwrap(), &x, rows, cols).unwrap();
            let k = quantize(WeftQuant::new(bits, 32, Scheme::K).unwrap(), &x, rows, cols).unwrap();
            let (ea, ek) = (rms(&x, &asym.dequantize()), rms(&x, &k.dequantize()));
            assert!(ek < ea * 1.03, "{bits} bits: k {ek} asym {ea}");
        }
    }

    #[test]
    fn an_asymmetric_grid_is_kept_nearly_exactly() {
        // Values on a 4-bit asymmetric grid per group of 32, as in a Q4_1 file, with scales
        // within a factor of three of each other: the k format at 4 bits keeps the levels, and
        // the coded scale and zero point move no value by more than 0.15 of a step.
        let (rows, cols) = (8, 64);
        let r = random_f32(8, rows * cols * 2);
        let mut x = vec![0f32; rows * cols];
        for (gi, grp) in x.chunks_mut(32).enumerate() {
            let d = 0.01 + 0.02 * r[gi].abs();
            let m = -8.3 * d + 0.1 * d * r[gi + 100];
            for (j, v) in grp.iter_mut().enumerate() {
                *v = d * ((j * 7 + gi) % 16) as f32 + m;
            }
        }
        let k = quantize(WeftQuant::new(4, 32, Scheme::K).unwrap(), &x, rows, cols).unwrap();
        let y = k.dequantize();
        for (gi, (a, b)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let d = 0.01 + 0.02 * r[gi].abs();
            let worst = a.iter().zip(b).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
            assert!(worst <= d * 0.15, "group {gi}: error {worst} step {d}");
        }
    }

    #[test]
    fn importance_weights_steer_the_grid() {
        let (rows, cols) = (4, 64);
        let x = random_f32(5, rows * cols);
        let mut imp = vec![0.01f32; cols];
        imp[..8].iter_mut().for_each(|v| *v = 100.0);
        let k = WeftQuant::new(2, 32, Scheme::K).unwrap();
        let weighted = quantize_weighted(k, &x, rows, cols, Some(Weights { mean_sq: &imp, mean: None, gptq: None })).unwrap();
        let plain = quantize(k, &x, rows, cols).unwrap();
        let err = |m: &QuantMatrix| -> f64 {
            let y = m.dequantize();
            (0..rows * cols).map(|i| imp[i % cols] as f64 * ((x[i] - y[i]) as f64).powi(2)).sum()
        };
        assert!(err(&weighted) < err(&plain), "weighted {} plain {}", err(&weighted), err(&plain));
        encode(&weighted).unwrap();
    }

    #[test]
    fn entropy_coded_matrices_decode_bit_for_bit_and_are_smaller() {
        // Rows of 96 columns (three groups) and of 80 (a padded last group), every width.
        for (rows, cols) in [(24, 96), (9, 80)] {
            let x = random_f32(31, rows * cols);
            for bits in [2, 3, 4] {
                let k = WeftQuant::new(bits, 32, Scheme::K).unwrap();
                let m = quantize(k, &x, rows, cols).unwrap();
                let coded = encode_coded(&m).unwrap();
                let back = decode_coded(k, rows, cols, &coded.levels, &coded.scales, &coded.zeros).unwrap();
                assert_eq!(back, m, "{bits} bits, [{rows}, {cols}]");
            }
        }
        // Bell-shaped weights (a sum of four uniform draws) use the middle levels most: the coded
        // levels take fewer bits than the packed ones.
        let (rows, cols) = (64, 576);
        let u: Vec<Vec<f32>> = (0..4).map(|s| random_f32(40 + s, rows * cols)).collect();
        let x: Vec<f32> = (0..rows * cols).map(|i| u.iter().map(|v| v[i]).sum()).collect();
        let m = quantize(WeftQuant::new(4, 32, Scheme::K).unwrap(), &x, rows, cols).unwrap();
        let coded = encode_coded(&m).unwrap();
        assert!(coded.levels.len() < m.words.len() * 4 * 99 / 100, "{} against {}", coded.levels.len(), m.words.len() * 4);
    }

    #[test]
    fn damaged_entropy_coded_matrices_are_errors() {
        let (rows, cols) = (8, 64);
        let k = WeftQuant::new(3, 32, Scheme::K).unwrap();
        let m = quantize(k, &random_f32(6, rows * cols), rows, cols).unwrap();
        let c = encode_coded(&m).unwrap();
        assert!(decode_coded(k, rows + 1, cols, &c.levels, &c.scales, &c.zeros).is_err(), "more rows than coded");
        assert!(decode_coded(k, rows, cols, &c.levels, &c.scales[..3], &c.zeros).is_err(), "no exponents");
        assert!(decode_coded(k, rows, cols, &c.levels[..c.levels.len() - 1], &c.scales, &c.zeros).is_err());
        assert!(decode_coded(k, rows, cols, &c.levels, &c.scales, &c.zeros[..c.zeros.len() - 2]).is_err());
        let mut exps = c.scales.clone();
        exps[0] = 200;
        assert!(decode_coded(k, rows, cols, &c.levels, &exps, &c.zeros).is_err(), "row exponent out of range");
        assert!(decode_coded(k, usize::MAX / 2, cols, &c.levels, &c.scales, &c.zeros).is_err());
    }

    #[test]
    fn off_grid_values_and_bad_lengths_are_errors() {
        let k = WeftQuant::new(3, 32, Scheme::K).unwrap();
        let mut m = quantize(k, &random_f32(2, 64), 1, 64).unwrap();
        m.zeros[0] = f16::from_f32(0.3).to_bits();
        assert!(encode(&m).is_err());
        assert!(decode(k, 1, 64, vec![0; 6], &[0; 2], &[0; 2]).is_err());
        assert!(decode(k, 1, 64, vec![0; 6], &[40, 0, 0], &[0; 2]).is_err());
        assert!(WeftQuant::new(8, 32, Scheme::K).is_err());
        assert_eq!(WeftQuant::parse("q3_g32_k").unwrap(), k);
        assert_eq!(k.bits_per_weight(), 3.5);
    }
}
