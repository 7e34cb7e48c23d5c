//! Seeded test weights in every format, the f64 CPU reference of dequant(W) · x, the named
//! tolerances, and the self-test shared by the native tests and the browser facade.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde::Serialize;

use super::{embed, gemm, gemv, Precision, QWeight, WeightFormat};
use crate::error::Result;
use crate::format::{GgmlType, StorageType};
use crate::gpu::{DType, GpuContext};
use crate::quant::weft::{QuantMatrix, Scheme};
use crate::quant::{self, sample};
use crate::selftest::random_f32;

/// Error bound of the f32 kernels, as a fraction of Σ_k |w_k · x_k| of the output (the scale
/// that rounding errors of a dot product are proportional to, whatever the cancellation). The
/// dequantized weights are exact, so only the products (one rounding of 2^-24 each) and the
/// additions round. A worst case would be K · 2^-24, but the kernels add in short chains (a
/// thread's strided sum, then a tree) and the roundings are independent, so their sum grows like
/// sqrt(K): 4 · sqrt(K) + 16 units of 2^-24 leaves a wide margin over the measured errors while
/// still catching a single wrong weight (which costs about 1 / K of Σ|w·x|, orders above this).
pub fn f32_tolerance(k: usize) -> f64 {
    (4.0 * (k as f64).sqrt() + 16.0) * f64::powi(2.0, -24)
}

/// Error bound of the f16 variants, same scale. Each term's weight and activation round to f16
/// (2^-11 each), their product and the three additions of a four-term f16 dot product round
/// again (at most 4 · 2^-11 of that dot product's Σ|w·x|), so no term can be off by more than
/// 6 · 2^-11 of its size; the f32 sums add at most the f32 bound. A deterministic bound, not a
/// statistical one.
pub fn f16_tolerance(k: usize) -> f64 {
    6.0 * f64::powi(2.0, -11) + f32_tolerance(k)
}

/// The stored form of a test weight.
#[derive(Clone, Debug)]
pub enum TestData {
    /// GGML tensor bytes, row-major [rows, cols].
    Ggml(Vec<u8>),
    Weft(QuantMatrix),
    F32(Vec<f32>),
}

/// A seeded random weight in one format, with its CPU-side storage.
#[derive(Clone, Debug)]
pub struct TestWeight {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    pub data: TestData,
}

impl TestWeight {
    pub fn upload(&self, ctx: &GpuContext, name: &str) -> Result<QWeight> {
        match &self.data {
            TestData::Ggml(bytes) => match self.format {
                WeightFormat::Ggml(t) => QWeight::from_ggml(ctx, name, t, self.rows, self.cols, bytes),
                // Repacked here whatever the adapter: the planes' kernels are tested on all.
                WeightFormat::Repacked(t) => match quant::repack::to_planes(t, self.rows, self.cols, bytes)? {
                    Some(m) => QWeight::from_planes(ctx, name, &m),
                    None => QWeight::from_ggml(ctx, name, t, self.rows, self.cols, bytes),
                },
                _ => QWeight::from_ggml(ctx, name, GgmlType::F32, self.rows, self.cols, bytes),
            },
            TestData::Weft(m) => QWeight::from_weft(ctx, name, m),
            TestData::F32(w) => QWeight::from_f32(ctx, name, self.rows, self.cols, w),
        }
    }

    /// The CPU reference decoders' values, [rows, cols].
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        match (&self.data, self.format) {
            (TestData::Ggml(bytes), WeightFormat::Ggml(t) | WeightFormat::Repacked(t)) => {
                quant::decode_to_f32(StorageType::Ggml(t), bytes, self.rows * self.cols)
            }
            (TestData::Ggml(bytes), _) => {
                quant::decode_to_f32(StorageType::Ggml(GgmlType::F32), bytes, self.rows * self.cols)
            }
            (TestData::Weft(m), _) => Ok(m.dequantize()),
            (TestData::F32(w), _) => Ok(w.clone()),
        }
    }
}

/// Random weights of `format`, [rows, cols], from `seed`: random levels with moderate scales
/// (see [`sample::random_weights`]); weft zero points anywhere in the level range, fractional.
pub fn test_weight(format: WeightFormat, seed: u64, rows: usize, cols: usize) -> Result<TestWeight> {
    let data = match format {
        WeightFormat::Ggml(t) | WeightFormat::Repacked(t) => TestData::Ggml(sample::random_weights(t, seed, rows * cols)?),
        WeightFormat::F32 => TestData::F32(random_f32(seed, rows * cols)),
        WeightFormat::Weft(q) => {
            let mut rng = SmallRng::seed_from_u64(seed);
            let groups = rows * q.groups_per_row(cols);
            let max_level = ((1u32 << q.bits) - 1) as f32;
            let zeros = match q.scheme {
                Scheme::Sym => Vec::new(),
                Scheme::Asym | Scheme::K => (0..groups)
                    .map(|_| half::f16::from_f32(rng.random_range(0.0..max_level)).to_bits())
                    .collect(),
            };
            TestData::Weft(QuantMatrix {
                quant: q,
                rows,
                cols,
                words: (0..rows * q.words_per_row(cols)).map(|_| rng.random()).collect(),
                scales: (0..groups).map(|_| sample::moderate_scale(&mut rng)).collect(),
                zeros,
            })
        }
    };
    Ok(TestWeight { format, rows, cols, data })
}

/// y[t, n] = Σ_k w[n, k] · x[t, k] in f64, and Σ_k |w[n, k] · x[t, k]| (the error scale).
pub fn cpu_reference(w: &[f32], x: &[f32], n: usize, k: usize, t: usize) -> (Vec<f64>, Vec<f64>) {
    let mut y = vec![0f64; t * n];
    let mut scale = vec![0f64; t * n];
    for ti in 0..t {
        let xr = &x[ti * k..(ti + 1) * k];
        for ni in 0..n {
            let wr = &w[ni * k..(ni + 1) * k];
            let (mut s, mut a) = (0f64, 0f64);
            for (&wv, &xv) in wr.iter().zip(xr) {
                let p = wv as f64 * xv as f64;
                s += p;
                a += p.abs();
            }
            y[ti * n + ni] = s;
            scale[ti * n + ni] = a;
        }
    }
    (y, scale)
}

/// One kernel's largest error, relative to Σ|w·x| of its output.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelReport {
    pub kernel: &'static str,
    pub precision: Precision,
    pub max_error: f64,
    pub worst_index: usize,
    pub tolerance: f64,
    pub passed: bool,
}

/// Every kernel on one weight: GEMV and GEMM at each precision the adapter has, and the
/// embedding lookup compared bit for bit.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QMatmulReport {
    pub format: String,
    pub n: usize,
    pub k: usize,
    pub t: usize,
    pub seed: u64,
    pub kernels: Vec<KernelReport>,
    /// Embedded values whose f32 bits differ from the CPU decoder's (one id is out of range and
    /// must give zeros).
    pub embed_mismatches: usize,
    pub passed: bool,
}

fn relative_error(got: &[f32], want: &[f64], scale: &[f64]) -> (f64, usize) {
    let mut worst = (if got.len() == want.len() { 0.0 } else { f64::INFINITY }, 0);
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (g as f64 - w).abs();
        let rel = if err == 0.0 { 0.0 } else if s > 0.0 && err.is_finite() { err / s } else { f64::INFINITY };
        if rel > worst.0 || rel.is_nan() {
            worst = (if rel.is_nan() { f64::INFINITY } else { rel }, i);
        }
    }
    worst
}

/// Runs every kernel on seeded weights of `format` [n, k] and activations [t, k].
pub async fn self_test(
    ctx: &GpuContext,
    format: WeightFormat,
    seed: u64,
    n: usize,
    k: usize,
    t: usize,
) -> Result<QMatmulReport> {
    let tw = test_weight(format, seed, n, k)?;
    let w = tw.upload(ctx, "qmatmul test weight")?;
    let dense = tw.dequantize()?;
    let x = random_f32(seed.wrapping_add(1), t * k);
    let (want, scale) = cpu_reference(&dense, &x, n, k, t);
    let xt = ctx.upload_f32("qmatmul test x", &[t, k], &x)?;
    let mut precisions = vec![Precision::F32];
    if ctx.capabilities().shader_f16 {
        precisions.push(Precision::F16);
    }
    let mut kernels = Vec::new();
    for precision in precisions {
        for kernel in ["gemv", "gemm"] {
            let y = ctx.zeros("qmatmul test y", &[t, n], DType::F32)?;
            let d = match kernel {
                "gemv" => gemv(ctx, &w, &xt, &y, precision).await?,
                _ => gemm(ctx, &w, &xt, &y, precision).await?,
            };
            ctx.run(&[&d]);
            let got = ctx.read_f32(&y).await?;
            let (max_error, worst_index) = relative_error(&got, &want, &scale);
            let tolerance = match precision {
                Precision::F32 => f32_tolerance(k),
                Precision::F16 => f16_tolerance(k),
            };
            let passed = max_error <= tolerance;
            kernels.push(KernelReport { kernel, precision, max_error, worst_index, tolerance, passed });
        }
    }
    // Rows in a scrambled order, repeats allowed, and one id past the end.
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_add(2));
    let mut ids: Vec<u32> = (0..t).map(|_| rng.random_range(0..n as u32)).collect();
    ids.push(n as u32);
    let idt = ctx.upload_u32("qmatmul test ids", &[ids.len()], &ids)?;
    let out = ctx.zeros("qmatmul test rows", &[ids.len(), k], DType::F32)?;
    let d = embed(ctx, &w, &idt, &out).await?;
    ctx.run(&[&d]);
    let got = ctx.read_f32(&out).await?;
    let expected = ids.iter().flat_map(|&id| match dense.get(id as usize * k..(id as usize + 1) * k) {
        Some(row) => row.to_vec(),
        None => vec![0.0; k],
    });
    let embed_mismatches = expected
        .zip(got.iter().chain(std::iter::repeat(&f32::NAN)))
        .filter(|(e, g)| e.to_bits() != g.to_bits())
        .count();
    let passed = embed_mismatches == 0 && kernels.iter().all(|r| r.passed);
    Ok(QMatmulReport { format: format.name(), n, k, t, seed, kernels, embed_mismatches, passed })
}
