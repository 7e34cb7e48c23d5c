//! The encoder's elementwise and attention loops in straight-line arithmetic the compiler
//! vectorizes (with AVX2 and FMA where detected).
//!
//! GELU (erf): libm's `erff` is a branchy scalar call, and an encoder MLP applies it to every one
//! of t × 1536 values per block (a quarter of a CPU pass when measured).
//!
//! `erfc(z)` for z ≥ 0 is Abramowitz and Stegun's 7.1.26, `t · P(t) · e^(-z²)` with
//! `t = 1 / (1 + p z)`, absolute error below 1.5e-7; `e^y` is a Cody-Waite reduction to
//! `2^n · e^r`, |r| ≤ ln 2 / 2, with a degree-6 Taylor polynomial (relative error ~2e-8).
//! Then `gelu(x) = x/2 · (2 - erfc(x/√2))` for x ≥ 0 and `x/2 · erfc(-x/√2)` below, so the
//! small negative tail keeps its relative precision.
//!
//! Also the encoder's row decoder for weft's formats (`decode_weft_row`).

use half::f16;

use crate::quant::weft::{dequant_value, QuantMatrix, Scheme};

/// `x · (1 + erf(x / √2)) / 2`, as PyTorch's default `gelu`, within 2e-7 · (1 + |x|) of the
/// exact value.
pub fn gelu_in_place(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the features were just detected.
        return unsafe { gelu_avx2(xs) };
    }
    gelu_portable(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_avx2(xs: &mut [f32]) {
    gelu_portable(xs)
}

#[inline(always)]
fn gelu_portable(xs: &mut [f32]) {
    for x in xs {
        *x = gelu(*x);
    }
}

/// A dot product in eight lanes (an f32 sum in order would not vectorize).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for ((l, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *l += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `e^y` for y ≤ 0.
#[inline(always)]
fn exp_neg(y: f32) -> f32 {
    // y ≤ 0; below -87 e^y is under f32's normal range and the result is 0.
    let y = y.max(-87.0);
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Round to nearest by the 1.5 · 2^23 trick (no rounding call, which may not vectorize).
    const MAGIC: f32 = 12_582_912.0;
    let n = (y * LOG2E + MAGIC) - MAGIC;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 127) << 23) as u32);
    p * scale
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152 + t * 1.061_405_4))));
    let erfc = poly * exp_neg(-z * z);
    let half = 0.5 * x;
    if x >= 0.0 {
        half * (2.0 - erfc)
    } else {
        half * erfc
    }
}

/// Bidirectional attention of one head over one sequence of `len` rows, each of `q`, `k`, `v`
/// and `out` packed [len, hd]: `out_i = Σ_j softmax_j(q_i · k_j · scale) v_j`. `scores` holds
/// `len` values.
pub fn attention_head(q: &[f32], k: &[f32], v: &[f32], hd: usize, scale: f32, scores: &mut [f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the features were just detected.
        return unsafe { attention_avx2(q, k, v, hd, scale, scores, out) };
    }
    attention_portable(q, k, v, hd, scale, scores, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attention_avx2(q: &[f32], k: &[f32], v: &[f32], hd: usize, scale: f32, scores: &mut [f32], out: &mut [f32]) {
    attention_portable(q, k, v, hd, scale, scores, out)
}

#[inline(always)]
fn attention_portable(q: &[f32], k: &[f32], v: &[f32], hd: usize, scale: f32, scores: &mut [f32], out: &mut [f32]) {
    let len = q.len() / hd;
    let scores = &mut scores[..len];
    for (qi, oi) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)) {
        let mut max = f32::NEG_INFINITY;
        for (s, kj) in scores.iter_mut().zip(k.chunks_exact(hd)) {
            *s = dot(qi, kj) * scale;
            max = max.max(*s);
        }
        let mut sum = 0f32;
        for s in scores.iter_mut() {
            *s = exp_neg(*s - max);
            sum += *s;
        }
        oi.fill(0.0);
        let inv = 1.0 / sum;
        for (s, vj) in scores.iter().zip(v.chunks_exact(hd)) {
            let p = s * inv;
            for (o, x) in oi.iter_mut().zip(vj) {
                *o += p * x;
            }
        }
    }
}

/// Row `r` of a weft matrix decoded into `out` (`cols` values), bit for bit as
/// `QuantMatrix::dequantize_row` does (the same `scale * (q - zero)`), a group at a time: the
/// reference converts each value's scale and zero from f16 and finds its word again, which
/// costs a CPU encoder pass more than its products at 4 and 8 bits. 3-bit rows go to the
/// reference.
pub fn decode_weft_row(m: &QuantMatrix, r: usize, out: &mut [f32]) {
    let q = m.quant;
    if q.bits == 3 {
        return m.dequantize_row(r, out);
    }
    let (g, wpg, gpr) = (q.group as usize, q.words_per_group(), q.groups_per_row(m.cols));
    let per_word = (32 / q.bits) as usize;
    let mask = (1u32 << q.bits) - 1;
    let sym_zero = (1u32 << (q.bits - 1)) as f32;
    for (gi, chunk) in out[..m.cols].chunks_mut(g).enumerate() {
        let grp = r * gpr + gi;
        let scale = f16::from_bits(m.scales[grp]).to_f32();
        let zero = match q.scheme {
            Scheme::Sym => sym_zero,
            Scheme::Asym => f16::from_bits(m.zeros[grp]).to_f32(),
        };
        let words = &m.words[grp * wpg..(grp + 1) * wpg];
        for (j, o) in chunk.iter_mut().enumerate() {
            let v = (words[j / per_word] >> ((j % per_word) as u32 * q.bits)) & mask;
            *o = dequant_value(v, scale, zero);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Against the libm form over the range activations take, densely, and far out.
    #[test]
    fn matches_the_erf_reference() {
        let reference = |x: f32| 0.5 * x as f64 * (1.0 + libm::erf(x as f64 * std::f64::consts::FRAC_1_SQRT_2));
        let mut xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 1e-4).collect();
        xs.extend([-100.0, -30.0, -12.0, 12.0, 30.0, 100.0, 0.0, -0.0]);
        let mut got = xs.clone();
        super::gelu_in_place(&mut got);
        for (x, g) in xs.iter().zip(&got) {
            let want = reference(*x);
            let err = (*g as f64 - want).abs();
            assert!(err <= 2e-7 * (1.0 + x.abs() as f64), "gelu({x}) = {g}, want {want}");
        }
    }

    /// Every 2-, 4- and 8-bit weft format, bit for bit against the reference decoder, on rows
    /// that end mid-group.
    #[test]
    fn weft_rows_decode_as_the_reference() {
        use crate::quant::weft::{quantize, WeftQuant};
        let (rows, cols) = (3, 200);
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect();
        for name in ["q2_g32_sym", "q4_g32_asym", "q4_g64_sym", "q8_g32_sym", "q8_g128_asym", "q3_g32_sym"] {
            let m = quantize(WeftQuant::parse(name).unwrap(), &x, rows, cols).unwrap();
            for r in 0..rows {
                let (mut a, mut b) = (vec![0f32; cols], vec![0f32; cols]);
                m.dequantize_row(r, &mut a);
                super::decode_weft_row(&m, r, &mut b);
                assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{name} row {r}");
            }
        }
    }

    /// Against the softmax of f64 dot products, for lengths 1 to 40.
    #[test]
    fn attention_matches_the_plain_softmax() {
        let hd = 32;
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 250.0) - 2.0;
        for len in 1..=40 {
            let (q, k, v): (Vec<f32>, Vec<f32>, Vec<f32>) =
                ((0..len * hd).map(val).collect(), (0..len * hd).map(|i| val(i + 5)).collect(), (0..len * hd).map(|i| val(i + 9)).collect());
            let mut out = vec![0f32; len * hd];
            super::attention_head(&q, &k, &v, hd, 0.25, &mut vec![0f32; len], &mut out);
            for i in 0..len {
                let s: Vec<f64> = (0..len)
                    .map(|j| (0..hd).map(|c| q[i * hd + c] as f64 * k[j * hd + c] as f64).sum::<f64>() * 0.25)
                    .collect();
                let max = s.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..hd {
                    let want: f64 = (0..len).map(|j| e[j] / sum * v[j * hd + c] as f64).sum();
                    assert!((out[i * hd + c] as f64 - want).abs() < 1e-5, "len {len} [{i}, {c}]");
                }
            }
        }
    }
}
