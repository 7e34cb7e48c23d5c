//! Every SIMD kernel of this build against the scalar reference on seeded data, as a report: the
//! wasm build exports it (`cpuSelfTest`) so the browser checks the SIMD128 code it actually
//! runs, which `cargo test` on the host never executes.

use serde::Serialize;

use crate::error::Result;
use crate::format::GgmlType;
use crate::quant::sample::random_weights;
use crate::selftest::random_f32;

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

const FORMATS: [(BlockFormat, GgmlType); 3] =
    [(BlockFormat::Q4_0, GgmlType::Q4_0), (BlockFormat::Q4_1, GgmlType::Q4_1), (BlockFormat::Q8_0, GgmlType::Q8_0)];

fn tolerance(terms: usize, magnitude: f64) -> f64 {
    4.0 * terms as f64 * f32::EPSILON as f64 * magnitude + 1e-6
}

fn check(isa: Isa, kernel: String, max_err: f64, tolerance: f64) -> KernelCheck {
    KernelCheck { isa: isa.name(), kernel, max_err, tolerance, ok: max_err <= tolerance }
}

/// Runs every kernel of every instruction set other than the scalar one on `seed`'s data:
/// quantization (bit-exact), the 8-bit block products of one row, four rows and four rows by
/// two tokens, the f32 block product of each format, and the f32 dot and axpy.
pub fn run(seed: u64) -> Result<KernelReport> {
    let cols = BLOCK * 24;
    let mut checks = Vec::new();
    let x: [Vec<f32>; 2] = [random_f32(seed, cols), random_f32(seed + 1, cols)];
    let xq: [Vec<BlockQ8>; 2] = std::array::from_fn(|t| {
        let mut q = vec![BlockQ8::default(); cols / BLOCK];
        quantize_scalar(&x[t], &mut q);
        q
    });
    for isa in Isa::available().into_iter().filter(|&i| i != Isa::Scalar) {
        let mut q = vec![BlockQ8::default(); cols / BLOCK];
        isa.quantize(&x[0], &mut q);
        let same = q == xq[0];
        checks.push(check(isa, "quantize".into(), if same { 0.0 } else { f64::INFINITY }, 0.0));
        for (n, (f, g)) in FORMATS.into_iter().enumerate() {
            let mut rows: Vec<Vec<u8>> =
                (0..4).map(|r| random_weights(g, seed + 10 * n as u64 + r, cols)).collect::<Result<_>>()?;
            // A zero, a subnormal and (Q4_1's offset) a negative-zero scale: the SIMD128 kernel
            // converts normal scales itself and hands these to the general conversion.
            let bb = f.block_bytes();
            rows[1][2 * bb..2 * bb + 2].copy_from_slice(&[0, 0]);
            rows[2][5 * bb..5 * bb + 2].copy_from_slice(&[1, 0]);
            if f == BlockFormat::Q4_1 {
                rows[3][7 * bb + 2..7 * bb + 4].copy_from_slice(&[0, 0x80]);
            }
            let rows: [&[u8]; 4] = std::array::from_fn(|r| rows[r].as_slice());
            // Σ |w x| over the largest output of this format's products bounds the rounding of
            // any summation order.
            let magnitude = rows
                .iter()
                .flat_map(|r| x.iter().map(move |xs| (r, xs)))
                .map(|(r, xs)| {
                    (0..cols)
                        .map(|j| {
                            let b = &r[(j / BLOCK) * f.block_bytes()..(j / BLOCK + 1) * f.block_bytes()];
                            (super::kernels::block_weight(f, b, j % BLOCK) * xs[j]).abs() as f64
                        })
                        .sum::<f64>()
                })
                .fold(0f64, f64::max);
            let tol = tolerance(cols, magnitude);
            let reference: [[f32; 4]; 2] = std::array::from_fn(|t| rows.map(|row| dot_q8_scalar(f, row, &xq[t])));
            let err = |got: &[f32], want: &[f32]| got.iter().zip(want).map(|(a, b)| (a - b).abs() as f64).fold(0f64, f64::max);
            let one = isa.dot_q8(f, rows[0], &xq[0]);
            checks.push(check(isa, format!("{f:?} dot_q8"), err(&[one], &reference[0][..1]), tol));
            let four = isa.dot_q8_4(f, rows, &xq[0]);
            checks.push(check(isa, format!("{f:?} dot_q8_4"), err(&four, &reference[0]), tol));
            let tile = isa.dot_q8_4x2(f, rows, [&xq[0], &xq[1]]);
            let tile_err = err(&tile[0], &reference[0]).max(err(&tile[1], &reference[1]));
            checks.push(check(isa, format!("{f:?} dot_q8_4x2"), tile_err, tol));
            let f32_ref = dot_f32_scalar(f, rows[0], &x[0]);
            checks.push(check(isa, format!("{f:?} dot_f32"), err(&[isa.dot_f32(f, rows[0], &x[0])], &[f32_ref]), tol));
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
    let ok = checks.iter().all(|c| c.ok);
    Ok(KernelReport { isa: Isa::detect().name(), checks, ok })
}
