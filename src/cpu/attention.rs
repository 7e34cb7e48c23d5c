//! Attention over the CPU backend's KV cache in every [`KvFormat`]. The cache has the GPU's
//! layout, [n_kv_heads, max_seq, row_words] per layer, and its rows are written by the format's
//! own reference (`KvFormat::encode_into`), so both backends store the same words. Reading a row
//! is two kernels per format — a query's dot product with a key row and a weighted value row
//! added to the output — with AVX2 natively (`attention/avx2.rs`, F16C for f16) and SIMD128 in
//! wasm (`attention/simd128.rs`); the scalar versions below are the reference they are checked
//! against (`selftest.rs`, the tests below).
//!
//! A Q8 row's scale is taken out of the sum: Σ q_d x_d once, times the scale, where decoding
//! each value first would multiply every term by it.

use crate::ops::kv::KvFormat;

use super::kernels::Isa;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;

/// Value `d` of an F16 row (two per word, low half first).
#[inline]
fn f16_at(row: &[u32], d: usize) -> f32 {
    half::f16::from_bits((row[d / 2] >> (16 * (d % 2))) as u16).to_f32()
}

/// Integer `d` of a Q8 row's values (the words after the scale, lowest byte first).
#[inline]
fn q8_at(values: &[u32], d: usize) -> f32 {
    ((values[d / 4] >> (8 * (d % 4))) as u8 as i8) as f32
}

/// A row's words as the f32 values of an F32 row.
#[inline]
fn as_f32(row: &[u32]) -> &[f32] {
    bytemuck::cast_slice(row)
}

/// Σ x_d · row_d over the `x.len()` values of one cache row.
pub fn dot(isa: Isa, kv: KvFormat, x: &[f32], row: &[u32]) -> f32 {
    match kv {
        KvFormat::F32 => isa.dot(x, &as_f32(row)[..x.len()]),
        KvFormat::F16 => match isa {
            Isa::Scalar => x.iter().enumerate().map(|(d, v)| v * f16_at(row, d)).sum(),
            // SAFETY: `Isa::detect` chose AVX2 only where AVX2, FMA and F16C run.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { avx2::dot_f16(x, row) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::dot_f16(x, row),
        },
        KvFormat::Q8 => {
            let (scale, values) = (f32::from_bits(row[0]), &row[1..]);
            let sum = match isa {
                Isa::Scalar => x.iter().enumerate().map(|(d, v)| v * q8_at(values, d)).sum(),
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 | Isa::Avx512 => unsafe { avx2::dot_q8(x, values) },
                #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
                Isa::Simd128 => simd128::dot_q8(x, values),
            };
            sum * scale
        }
    }
}

/// y += a · row over the `y.len()` values of one cache row.
pub fn axpy(isa: Isa, kv: KvFormat, a: f32, row: &[u32], y: &mut [f32]) {
    match kv {
        KvFormat::F32 => isa.axpy(a, &as_f32(row)[..y.len()], y),
        KvFormat::F16 => match isa {
            Isa::Scalar => y.iter_mut().enumerate().for_each(|(d, y)| *y += a * f16_at(row, d)),
            // SAFETY: as in `dot`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { avx2::axpy_f16(a, row, y) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::axpy_f16(a, row, y),
        },
        KvFormat::Q8 => {
            // The integers are exact in f32, so a · scale once is the decoded value's weight.
            let (a, values) = (a * f32::from_bits(row[0]), &row[1..]);
            match isa {
                Isa::Scalar => y.iter_mut().enumerate().for_each(|(d, y)| *y += a * q8_at(values, d)),
                // SAFETY: as in `dot`.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 | Isa::Avx512 => unsafe { avx2::axpy_q8(a, values, y) },
                #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
                Isa::Simd128 => simd128::axpy_q8(a, values, y),
            }
        }
    }
}

/// How one layer's attention reads its cache.
#[derive(Clone, Copy, Debug)]
pub struct Attend {
    pub isa: Isa,
    pub kv: KvFormat,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax.
    pub scale: f32,
    /// Gemma 2's attention soft-capping: `cap · tanh(s / cap)` of each scaled score.
    pub softcap: Option<f32>,
}

impl Attend {
    /// One query head over the first `keys.len() / row_words` rows of its KV head: softmax of
    /// the scaled scores of the rows `seen` keeps, then the weighted sum of their values, into
    /// `out` (`head_dim` values). `scores` has room for a score per row.
    pub fn head(&self, q: &[f32], keys: &[u32], values: &[u32], seen: impl Fn(usize) -> bool, scores: &mut [f32], out: &mut [f32]) {
        let words = self.kv.row_words(self.head_dim);
        let ctx = keys.len() / words;
        let mut max = f32::NEG_INFINITY;
        for (j, (s, key)) in scores[..ctx].iter_mut().zip(keys.chunks_exact(words)).enumerate() {
            *s = match (seen(j), self.softcap) {
                (false, _) => f32::NEG_INFINITY,
                (true, None) => dot(self.isa, self.kv, q, key) * self.scale,
                (true, Some(cap)) => cap * (dot(self.isa, self.kv, q, key) * self.scale / cap).tanh(),
            };
            max = max.max(*s);
        }
        let mut sum = 0f32;
        for s in scores[..ctx].iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        out.fill(0.0);
        for (s, value) in scores[..ctx].iter().zip(values.chunks_exact(words)) {
            // Rows outside the window weigh exactly 0: skip their reads.
            if *s > 0.0 {
                axpy(self.isa, self.kv, s / sum, value, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::random_f32;

    /// Seeded K/V rows of `hd` values in each format, with a few large values so that Q8's
    /// scale differs from row to row.
    fn rows(seed: u64, ctx: usize, hd: usize) -> Vec<f32> {
        let mut v = random_f32(seed, ctx * hd);
        v.iter_mut().step_by(13).for_each(|x| *x *= 4.0);
        v
    }

    /// The scalar kernels read each format's rows as `KvFormat::decode_row` does: against an f64
    /// sum over the reference's decoded values.
    #[test]
    fn scalar_kernels_follow_the_row_reference() {
        let hd = 68;
        let x = random_f32(1, hd);
        for kv in KvFormat::ALL {
            let stored = rows(2, 1, hd);
            let row = kv.encode_row(&stored);
            let decoded = kv.decode_row(&row, hd);
            let want: f64 = x.iter().zip(&decoded).map(|(a, b)| *a as f64 * *b as f64).sum();
            let magnitude: f64 = x.iter().zip(&decoded).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
            let got = dot(Isa::Scalar, kv, &x, &row) as f64;
            assert!((got - want).abs() <= 4.0 * hd as f64 * f32::EPSILON as f64 * magnitude, "{kv} dot {got} vs {want}");
            let mut y = x.clone();
            axpy(Isa::Scalar, kv, 0.37, &row, &mut y);
            for ((got, x0), v) in y.iter().zip(&x).zip(&decoded) {
                let want = *x0 as f64 + 0.37 * *v as f64;
                assert!((*got as f64 - want).abs() <= 4.0 * f32::EPSILON as f64 * (1.0 + want.abs()), "{kv} axpy");
            }
        }
    }

    /// Every instruction set's attention over each format's cache against an f64 softmax over
    /// the decoded rows, with a window hiding some rows.
    #[test]
    fn attention_follows_an_f64_reference_in_every_format() {
        let (hd, ctx) = (64, 41);
        let q = random_f32(3, hd);
        let (k, v) = (rows(4, ctx, hd), rows(5, ctx, hd));
        let seen = |j: usize| j % 7 != 3;
        for kv in KvFormat::ALL {
            let (kw, vw) = (kv.encode_cache(&k, hd), kv.encode_cache(&v, hd));
            let (kd, vd) = (kv.decode_cache(&kw, hd), kv.decode_cache(&vw, hd));
            let scale = 0.125f64;
            let s: Vec<f64> = (0..ctx)
                .map(|j| match seen(j) {
                    true => scale * q.iter().zip(&kd[j * hd..(j + 1) * hd]).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>(),
                    false => f64::NEG_INFINITY,
                })
                .collect();
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = p.iter().sum();
            let want: Vec<f64> =
                (0..hd).map(|d| (0..ctx).map(|j| p[j] / total * vd[j * hd + d] as f64).sum()).collect();
            for isa in Isa::available() {
                let attend = Attend { isa, kv, head_dim: hd, scale: scale as f32, softcap: None };
                let (mut scores, mut out) = (vec![0f32; ctx], vec![0f32; hd]);
                attend.head(&q, &kw, &vw, seen, &mut scores, &mut out);
                let err = out.iter().zip(&want).map(|(a, b)| (*a as f64 - b).abs()).fold(0f64, f64::max);
                assert!(err < 1e-5, "{} {kv}: max error {err}", isa.name());
            }
        }
    }
}
