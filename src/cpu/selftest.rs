//! Every SIMD kernel of this build against the scalar reference on seeded data, as a report: the
//! wasm build exports it (`cpuSelfTest`) so the browser checks the SIMD128 code it actually
//! runs, which `cargo test` on the host never executes.

use serde::Serialize;

use crate::error::Result;
use crate::format::StorageType;
use crate::quant::decode_to_f32;
use crate::quant::sample::random_weights;
use crate::selftest::random_f32;

use crate::ops::kv::KvFormat;

use super::attention::{self, Attend};
use super::kernels::{dot_f32_scalar, dot_q8_scalar, quantize_scalar, BlockFormat, BlockQ8, Isa, BLOCK};

/// One kernel on one instruction set against the scalar reference.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelCheck {
    pub isa: &'static str,
    pub kernel: String,
    /// Largest |simd - scalar| over the outputs (0 for quantization, which must be bit-exact).
    pub max_err: f64,
    /// Allowed: the difference of summation orders, a few f32 ulps per term of the sum of
    /// magnitudes.
    pub tolerance: f64,
    pub ok: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelReport {
    /// The instruction set the engine uses in this build.
    pub isa: &'static str,
    pub checks: Vec<KernelCheck>,
    pub ok: bool,
}

fn tolerance(terms: usize, magnitude: f64) -> f64 {
    4.0 * terms as f64 * f32::EPSILON as f64 * magnitude + 1e-6
}

fn check(isa: Isa, kernel: String, max_err: f64, tolerance: f64) -> KernelCheck {
    KernelCheck { isa: isa.name(), kernel, max_err, tolerance, ok: max_err <= tolerance }
}

/// Checks per SIMD instruction set: quantize, 4 tilings of the 8-bit product per block format,
/// the f32 product of the formats that have one, dot and axpy at 3 lengths, and the KV-cache
/// reads of every cache format.
pub fn checks_per_isa() -> usize {
    1 + 4 * BlockFormat::ALL.len() + BlockFormat::ALL.iter().filter(|f| f.has_f32_kernel()).count() + 6 + KV_CHECKS
}

/// Runs every kernel of every instruction set other than the scalar one on `seed`'s data:
/// quantization (bit-exact), the 8-bit block products of every block format for one row and
/// four rows by one, two and four tokens (a prompt pass's tiles), the f32 block products, and
/// the f32 dot and axpy.
pub fn run(seed: u64) -> Result<KernelReport> {
    // Three K-quant blocks of 256, 24 blocks of 32.
    let cols = BLOCK * 24;
    let mut checks = Vec::new();
    let x: [Vec<f32>; 4] = std::array::from_fn(|t| random_f32(seed + t as u64, cols));
    let xq: [Vec<BlockQ8>; 4] = std::array::from_fn(|t| {
        let mut q = vec![BlockQ8::default(); cols / BLOCK];
        quantize_scalar(&x[t], &mut q);
        q
    });
    for isa in Isa::available().into_iter().filter(|&i| i != Isa::Scalar) {
        let mut q = vec![BlockQ8::default(); cols / BLOCK];
        isa.quantize(&x[0], &mut q);
        let same = q == xq[0];
        checks.push(check(isa, "quantize".into(), if same { 0.0 } else { f64::INFINITY }, 0.0));
        for (n, f) in BlockFormat::ALL.into_iter().enumerate() {
            let g = f.ggml();
            let mut rows: Vec<Vec<u8>> =
                (0..4).map(|r| random_weights(g, seed + 10 * n as u64 + r, cols)).collect::<Result<_>>()?;
            // A zero, a subnormal and (formats with an offset) a negative-zero offset scale: the
            // kernels convert normal scales themselves and hand these to the general conversion.
            let (sb, stored) = (f.stored_bytes(), rows[0].len() / f.stored_bytes());
            let d_at = if f == BlockFormat::Q6_K { 208 } else { 0 };
            rows[1][(2 % stored) * sb + d_at..][..2].copy_from_slice(&[0, 0]);
            rows[2][(5 % stored) * sb + d_at..][..2].copy_from_slice(&[1, 0]);
            if matches!(f, BlockFormat::Q4_1 | BlockFormat::Q5_1 | BlockFormat::Q4_K | BlockFormat::Q5_K) {
                rows[3][(7 % stored) * sb + 2..][..2].copy_from_slice(&[0, 0x80]);
            }
            let rows: [&[u8]; 4] = std::array::from_fn(|r| rows[r].as_slice());
            // Σ |w x| over the largest output of this format's products bounds the rounding of
            // any summation order.
            let mut magnitude = 0f64;
            for row in rows {
                let w = decode_to_f32(StorageType::Ggml(g), row, cols)?;
                for xs in &x {
                    magnitude = magnitude.max(w.iter().zip(xs).map(|(a, b)| (a * b).abs() as f64).sum());
                }
            }
            let tol = tolerance(cols, magnitude);
            let reference: [[f32; 4]; 4] = std::array::from_fn(|t| rows.map(|row| dot_q8_scalar(f, row, &xq[t])));
            let err = |got: &[[f32; 4]]| {
                got.iter().zip(&reference).flat_map(|(g, w)| g.iter().zip(w)).map(|(a, b)| (a - b).abs() as f64).fold(0f64, f64::max)
            };
            let one = isa.dot_q8(f, rows[0], &xq[0]);
            checks.push(check(isa, format!("{f:?} dot_q8"), (one - reference[0][0]).abs() as f64, tol));
            let tile1 = isa.dot_q8_tile(f, rows, [&xq[0]]);
            checks.push(check(isa, format!("{f:?} dot_q8_tile 4x1"), err(&tile1), tol));
            let tile2 = isa.dot_q8_tile(f, rows, [&xq[0], &xq[1]]);
            checks.push(check(isa, format!("{f:?} dot_q8_tile 4x2"), err(&tile2), tol));
            let tile4 = isa.dot_q8_tile(f, rows, [&xq[0], &xq[1], &xq[2], &xq[3]]);
            checks.push(check(isa, format!("{f:?} dot_q8_tile 4x4"), err(&tile4), tol));
            if f.has_f32_kernel() {
                let f32_ref = dot_f32_scalar(f, rows[0], &x[0]);
                let got = isa.dot_f32(f, rows[0], &x[0]);
                checks.push(check(isa, format!("{f:?} dot_f32"), (got - f32_ref).abs() as f64, tol));
            }
        }
        // Lengths that leave a scalar tail after the vector loop.
        for n in [7, 64, 100] {
            let (a, b) = (&x[0][..n], &x[1][..n]);
            let tol = tolerance(n, n as f64);
            let dot_err = (isa.dot(a, b) - Isa::Scalar.dot(a, b)).abs() as f64;
            checks.push(check(isa, format!("dot {n}"), dot_err, tol));
            let (mut y, mut y0) = (b.to_vec(), b.to_vec());
            isa.axpy(0.37, a, &mut y);
            Isa::Scalar.axpy(0.37, a, &mut y0);
            let axpy_err = y.iter().zip(&y0).map(|(u, v)| (u - v).abs() as f64).fold(0f64, f64::max);
            checks.push(check(isa, format!("axpy {n}"), axpy_err, 1e-6));
        }
    }
    for isa in Isa::available().into_iter().filter(|&i| i != Isa::Scalar) {
        checks.extend(kv_checks(isa, seed));
    }
    let ok = checks.iter().all(|c| c.ok);
    Ok(KernelReport { isa: Isa::detect().name(), checks, ok })
}

/// Checks per instruction set of the KV-cache reads: dot, axpy and a head's attention for each
/// cache format.
const KV_CHECKS: usize = 3 * KvFormat::ALL.len();

/// The KV-cache kernels of `isa` (`attention.rs`) against the scalar ones on seeded rows of 68
/// values (a tail after the vector loops) in every format: a query's dot products with 37 key
/// rows, a weighted value row added to an output, and one head's attention over them.
fn kv_checks(isa: Isa, seed: u64) -> Vec<KernelCheck> {
    let (hd, ctx) = (68, 37);
    let q = random_f32(seed + 100, hd);
    let y0 = random_f32(seed + 101, hd);
    // Some values four times the others, so that each Q8 row has its own scale.
    let rows = |s: u64| -> Vec<f32> { random_f32(s, ctx * hd).iter().enumerate().map(|(i, v)| if i % 13 == 0 { 4.0 * v } else { *v }).collect() };
    let (k, v) = (rows(seed + 102), rows(seed + 103));
    let mut checks = Vec::new();
    for kv in KvFormat::ALL {
        let (kw, vw) = (kv.encode_cache(&k, hd), kv.encode_cache(&v, hd));
        let words = kv.row_words(hd);
        let decoded = kv.decode_cache(&kw, hd);
        let (mut dot_err, mut dot_tol) = (0f64, 0f64);
        for (key, values) in kw.chunks_exact(words).zip(decoded.chunks_exact(hd)) {
            let err = (attention::dot(isa, kv, &q, key) - attention::dot(Isa::Scalar, kv, &q, key)).abs() as f64;
            dot_err = dot_err.max(err);
            dot_tol = dot_tol.max(tolerance(hd, q.iter().zip(values).map(|(a, b)| (a * b).abs() as f64).sum()));
        }
        checks.push(check(isa, format!("kv {kv} dot"), dot_err, dot_tol));
        let (mut y, mut y_ref) = (y0.clone(), y0.clone());
        attention::axpy(isa, kv, 0.37, &vw[..words], &mut y);
        attention::axpy(Isa::Scalar, kv, 0.37, &vw[..words], &mut y_ref);
        let axpy_err = y.iter().zip(&y_ref).map(|(a, b)| (a - b).abs() as f64).fold(0f64, f64::max);
        checks.push(check(isa, format!("kv {kv} axpy"), axpy_err, 4e-6));
        // A score moved by the dot product's rounding moves the softmax weights by as much
        // (relative); the weighted sum of values of magnitude up to 4 then moves by that much,
        // plus its own rounding over ctx terms.
        let scale = 1.0 / (hd as f32).sqrt();
        let seen = |j: usize| j % 5 != 2;
        let out = |isa: Isa| {
            let attend = Attend { isa, kv, head_dim: hd, scale, softcap: None };
            let (mut scores, mut o) = (vec![0f32; ctx], vec![0f32; hd]);
            attend.head(&q, &kw, &vw, seen, &mut scores, &mut o);
            o
        };
        let (got, want) = (out(isa), out(Isa::Scalar));
        let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs() as f64).fold(0f64, f64::max);
        let tol = 4.0 * (2.0 * dot_tol * scale as f64 + tolerance(ctx, 1.0));
        checks.push(check(isa, format!("kv {kv} attention"), err, tol));
    }
    checks
}
