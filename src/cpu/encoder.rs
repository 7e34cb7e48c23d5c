//! The encoder's elementwise, LayerNorm and attention loops, written so the compiler
//! vectorizes them: each is compiled twice, for AVX2 + FMA (picked where detected) and plainly
//! (wasm builds: SIMD128 through the module's target feature). Sums run in eight lanes (an f32
//! sum in order does not vectorize), selects replace branches, and float-to-integer steps are
//! bit operations (Rust's saturating `as i32` keeps loops scalar).
//!
//! GELU (erf): libm's `erff` is a branchy scalar call, and an encoder MLP applies it to every one
//! of t × 1536 values per block.
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

/// Defines `pub fn NAME` whose body runs compiled for AVX2 + FMA where the CPU has them, and as
/// plain code elsewhere.
macro_rules! vectorized {
    ($(#[$m:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        pub fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $body
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the features were just detected.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body
        }
    };
}

vectorized! {
    /// `x · (1 + erf(x / √2)) / 2`, as PyTorch's default `gelu`, within 2e-7 · (1 + |x|) of the
    /// exact value.
    pub fn gelu_in_place(xs: &mut [f32]) {
        for x in xs {
            *x = gelu(*x);
        }
    }
}

vectorized! {
    /// `out = (x - mean) / sqrt(var + eps) · w + b` over one row (PyTorch's biased variance,
    /// taken around the mean in a second pass as it does).
    pub fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        let n = x.len() as f32;
        let mean = lanes_sum(x, |v| v) / n;
        let var = lanes_sum(x, |v| (v - mean) * (v - mean)) / n;
        let scale = 1.0 / (var + eps).sqrt();
        for (((o, x), w), b) in out.iter_mut().zip(x).zip(w).zip(b) {
            *o = (x - mean) * scale * w + b;
        }
    }
}

/// Σ f(x) over `xs` in eight interleaved lanes, then the lanes.
#[inline(always)]
fn lanes_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += f(v);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The largest of `values` (−∞ for none), in eight lanes.
#[inline(always)]
fn lanes_max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder().iter().fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = if v > *l { v } else { *l };
        }
    }
    lanes.iter().fold(tail, |m, &v| if v > m { v } else { m })
}

/// `e^y` for y ≤ 0.
#[inline(always)]
fn exp_neg(y: f32) -> f32 {
    // y ≤ 0; below -87 e^y is under f32's normal range and the result is 0.
    let y = y.max(-87.0);
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Round to nearest by the 1.5 · 2^23 trick (no rounding call, which may not vectorize):
    // `shifted`'s low mantissa bits then hold n itself, as a two's complement integer.
    const MAGIC: f32 = 12_582_912.0;
    let shifted = y * LOG2E + MAGIC;
    let n = shifted - MAGIC;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // 2^n, n in [-126, 0]: n + 127 into the exponent field.
    let scale = f32::from_bits(shifted.to_bits().wrapping_sub(MAGIC.to_bits()).wrapping_add(127) << 23);
    p * scale
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152 + t * 1.061_405_4))));
    let erfc = poly * exp_neg(-z * z);
    0.5 * x * if x >= 0.0 { 2.0 - erfc } else { erfc }
}

/// Query rows attention takes together: each key or value loaded serves four rows, and the four
/// rows' sums are independent chains (one row's sum over the head would wait on each addition).
pub const ATTENTION_ROWS: usize = 4;

vectorized! {
    /// Bidirectional attention of one head over one sequence of `len` rows:
    /// `out_i = Σ_j softmax_j(q_i · k_j · scale) v_j`, with `q`, `v` and `out` packed [len, hd]
    /// and the keys transposed, `kt` [hd, lp] with `lp` = len rounded up to 8 and the padding
    /// columns zero. Scores are then `hd` products vectorized over eight keys at a time, not
    /// `len` dot products each ending in a sum across lanes; every loop runs over whole groups of
    /// eight (the compiler leaves a loop of fewer than 32 values scalar). `scores` holds
    /// `ATTENTION_ROWS · lp` values.
    pub fn attention_head(q: &[f32], kt: &[f32], v: &[f32], hd: usize, scale: f32, scores: &mut [f32], out: &mut [f32]) {
        let lp = kt.len() / hd;
        for (q, o) in q.chunks(ATTENTION_ROWS * hd).zip(out.chunks_mut(ATTENTION_ROWS * hd)) {
            if q.len() == ATTENTION_ROWS * hd {
                attention_rows::<ATTENTION_ROWS>(q, kt, v, hd, lp, scale, scores, o);
            } else {
                for (q, o) in q.chunks_exact(hd).zip(o.chunks_exact_mut(hd)) {
                    attention_rows::<1>(q, kt, v, hd, lp, scale, scores, o);
                }
            }
        }
    }
}

/// `R` query rows of [`attention_head`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attention_rows<const R: usize>(q: &[f32], kt: &[f32], v: &[f32], hd: usize, lp: usize, scale: f32, scores: &mut [f32], out: &mut [f32]) {
    let len = v.len() / hd;
    let group = |xs: &[f32], at: usize| -> [f32; 8] { xs[at..at + 8].try_into().expect("eight values") };
    for g in (0..lp).step_by(8) {
        let mut acc = [[0f32; 8]; R];
        for c in 0..hd {
            let k8 = group(kt, c * lp + g);
            for (i, a) in acc.iter_mut().enumerate() {
                let qc = q[i * hd + c];
                for (a, k) in a.iter_mut().zip(k8) {
                    *a += qc * k;
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            for (s, a) in scores[i * lp + g..i * lp + g + 8].iter_mut().zip(a) {
                *s = a * scale;
            }
        }
    }
    let mut inv = [0f32; R];
    for (i, inv) in inv.iter_mut().enumerate() {
        let s = &mut scores[i * lp..(i + 1) * lp];
        let max = lanes_max(&s[..len]);
        for s in s.iter_mut() {
            *s = exp_neg(*s - max);
        }
        s[len..].fill(0.0);
        *inv = 1.0 / lanes_sum(s, |s| s);
    }
    for c in (0..hd - hd % 8).step_by(8) {
        let mut acc = [[0f32; 8]; R];
        for j in 0..len {
            let v8 = group(v, j * hd + c);
            for (i, a) in acc.iter_mut().enumerate() {
                let p = scores[i * lp + j];
                for (a, x) in a.iter_mut().zip(v8) {
                    *a += p * x;
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            for (o, a) in out[i * hd + c..i * hd + c + 8].iter_mut().zip(a) {
                *o = a * inv[i];
            }
        }
    }
    for c in hd - hd % 8..hd {
        for i in 0..R {
            let sum: f32 = (0..len).map(|j| scores[i * lp + j] * v[j * hd + c]).sum();
            out[i * hd + c] = sum * inv[i];
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
            Scheme::Asym | Scheme::K => f16::from_bits(m.zeros[grp]).to_f32(),
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

    /// Against the f64 formula, on rows of a model's width, odd widths and a large mean.
    #[test]
    fn layer_norm_matches_the_f64_formula() {
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 250.0) - 2.0;
        for (cols, offset) in [(384usize, 0.0f32), (100, 0.0), (7, 3.0), (1536, 40.0)] {
            let x: Vec<f32> = (0..cols).map(|i| val(i) + offset).collect();
            let (w, b): (Vec<f32>, Vec<f32>) = ((0..cols).map(|i| val(i + 3)).collect(), (0..cols).map(|i| val(i + 11)).collect());
            let mut out = vec![0f32; cols];
            super::layer_norm(&x, &w, &b, 1e-12, &mut out);
            let mean = x.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
            for i in 0..cols {
                let want = (x[i] as f64 - mean) / (var + 1e-12).sqrt() * w[i] as f64 + b[i] as f64;
                assert!((out[i] as f64 - want).abs() < 2e-5 * (1.0 + want.abs()), "{cols} [{i}]: {} vs {want}", out[i]);
            }
        }
    }

    /// Against the softmax of f64 dot products, for lengths 1 to 40 (partial groups of eight
    /// keys), at a head width of whole groups and one with a remainder.
    #[test]
    fn attention_matches_the_plain_softmax() {
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 250.0) - 2.0;
        for (hd, len) in [32, 20].into_iter().flat_map(|hd| (1..=40).map(move |len| (hd, len))) {
            let (q, k, v): (Vec<f32>, Vec<f32>, Vec<f32>) =
                ((0..len * hd).map(val).collect(), (0..len * hd).map(|i| val(i + 5)).collect(), (0..len * hd).map(|i| val(i + 9)).collect());
            let mut out = vec![0f32; len * hd];
            let lp = len.div_ceil(8) * 8;
            let kt: Vec<f32> = (0..hd * lp).map(|i| if i % lp < len { k[(i % lp) * hd + i / lp] } else { 0.0 }).collect();
            super::attention_head(&q, &kt, &v, hd, 0.25, &mut vec![0f32; super::ATTENTION_ROWS * lp], &mut out);
            for i in 0..len {
                let s: Vec<f64> = (0..len)
                    .map(|j| (0..hd).map(|c| q[i * hd + c] as f64 * k[j * hd + c] as f64).sum::<f64>() * 0.25)
                    .collect();
                let max = s.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..hd {
                    let want: f64 = (0..len).map(|j| e[j] / sum * v[j * hd + c] as f64).sum();
                    assert!((out[i * hd + c] as f64 - want).abs() < 1e-5, "hd {hd} len {len} [{i}, {c}]");
                }
            }
        }
    }
}
