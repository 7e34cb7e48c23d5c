//! Each CPU kernel on every instruction set this machine has, against the scalar reference and
//! an f64 product of the reference decoder's weights, on seeded data.

use crate::format::{GgmlType, StorageType};
use crate::quant::decode_to_f32;
use crate::quant::sample::random_weights;
use crate::selftest::random_f32;

use super::kernels::{block_q, block_scales, dot_f32_scalar, dot_q8_scalar, quantize_scalar, BlockFormat, BlockQ8, Isa, BLOCK};
use super::matrix::{CpuMatrix, Input};

/// f32 products of k terms against an f64 sum: a few units in the last place per term, scaled
/// by the sum of magnitudes.
fn f32_tolerance(k: usize, magnitude: f64) -> f64 {
    4.0 * k as f64 * f32::EPSILON as f64 * magnitude + 1e-6
}

fn quantized(x: &[f32]) -> Vec<BlockQ8> {
    let mut q = vec![BlockQ8::default(); x.len() / BLOCK];
    quantize_scalar(x, &mut q);
    q
}

/// The most an 8-bit input can move a product with `w`: half a quantization step per value.
fn half_steps(w: &[f32], xq: &[BlockQ8]) -> f64 {
    w.chunks_exact(BLOCK).zip(xq).map(|(ws, b)| ws.iter().map(|v| v.abs() as f64).sum::<f64>() * b.d as f64 * 0.5).sum()
}

#[test]
fn quantize_is_the_same_on_every_isa_and_within_half_a_step() {
    let x = random_f32(7, 32 * 40);
    let reference = quantized(&x);
    for isa in Isa::available() {
        let mut q = vec![BlockQ8::default(); 40];
        isa.quantize(&x, &mut q);
        assert_eq!(q, reference, "{}", isa.name());
    }
    for (b, xs) in reference.iter().zip(x.chunks_exact(BLOCK)) {
        let sum: i32 = b.q.iter().map(|&q| q as i32).sum();
        assert_eq!(b.s, b.d * sum as f32);
        for (&q, &v) in b.q.iter().zip(xs) {
            assert!((q as f32 * b.d - v).abs() <= b.d * 0.5 * (1.0 + 1e-5), "{q} {v} {}", b.d);
        }
    }
}

/// The kernels' view of a block (integers, half factors, scale, offset) gives the reference
/// decoder's weights, up to the rounding of the offset form (q d + m for (q - 8) d).
#[test]
fn block_views_give_the_reference_decoders_weights() {
    let cols = 256 * 2;
    for (seed, f) in BlockFormat::ALL.into_iter().enumerate() {
        let row = random_weights(f.ggml(), 60 + seed as u64, cols).unwrap();
        let w = decode_to_f32(StorageType::Ggml(f.ggml()), &row, cols).unwrap();
        assert_eq!(f.blocks_in(row.len()), cols / BLOCK, "{f:?}");
        for i in 0..cols / BLOCK {
            let (s, q) = (block_scales(f, &row, i), block_q(f, &row, i));
            for (j, &q) in q.iter().enumerate() {
                let scaled = q as f32 * s.d * s.half[j / 16] as f32;
                let ulp = 2.0 * f32::EPSILON * (scaled.abs() + s.m.abs());
                let want = w[i * BLOCK + j];
                assert!((scaled + s.m - want).abs() <= ulp, "{f:?} block {i} weight {j}: {} vs {want}", scaled + s.m);
            }
        }
    }
}

#[test]
fn block_dot_products_match_the_reference_decoder() {
    let cols = 32 * 24;
    for (seed, f) in BlockFormat::ALL.into_iter().enumerate() {
        let g = f.ggml();
        let row = random_weights(g, 11 + seed as u64, cols).unwrap();
        let w = decode_to_f32(StorageType::Ggml(g), &row, cols).unwrap();
        let x = random_f32(100 + seed as u64, cols);
        let exact: f64 = w.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
        let magnitude: f64 = w.iter().zip(&x).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
        let tol = f32_tolerance(cols, magnitude);
        let xq = quantized(&x);
        let q8_scalar = dot_q8_scalar(f, &row, &xq) as f64;
        // The 8-bit input differs from x by at most half a step (d/2) per value.
        let step = half_steps(&w, &xq);
        assert!((q8_scalar - exact).abs() <= step + tol, "{f:?} scalar q8 {q8_scalar} vs {exact} (bound {step})");
        for isa in Isa::available() {
            let got = isa.dot_q8(f, &row, &xq) as f64;
            assert!((got - q8_scalar).abs() <= tol, "{f:?} {} q8 {got} vs scalar {q8_scalar}", isa.name());
        }
        if !f.has_f32_kernel() {
            continue;
        }
        let scalar = dot_f32_scalar(f, &row, &x) as f64;
        assert!((scalar - exact).abs() <= tol, "{f:?} scalar f32 {scalar} vs {exact}");
        for isa in Isa::available() {
            let got = isa.dot_f32(f, &row, &x) as f64;
            assert!((got - scalar).abs() <= tol, "{f:?} {} f32 {got} vs scalar {scalar}", isa.name());
        }
    }
}

/// A prompt pass's tiles (4 rows by 1, 2, 4 and 8 tokens) on every instruction set equal the
/// scalar product of each row and token.
#[test]
fn tiles_match_the_scalar_reference() {
    let cols = 256 * 3;
    let x: Vec<Vec<BlockQ8>> = (0..8).map(|t| quantized(&random_f32(200 + t, cols))).collect();
    for (seed, f) in BlockFormat::ALL.into_iter().enumerate() {
        let rows: Vec<Vec<u8>> = (0..4).map(|r| random_weights(f.ggml(), 300 + 10 * seed as u64 + r, cols).unwrap()).collect();
        let rows: [&[u8]; 4] = std::array::from_fn(|r| rows[r].as_slice());
        let want: Vec<[f32; 4]> = x.iter().map(|x| rows.map(|row| dot_q8_scalar(f, row, x))).collect();
        for isa in Isa::available() {
            let tile8 = isa.dot_q8_tile::<4, 8>(f, rows, std::array::from_fn(|t| &x[t][..]));
            let tile4 = isa.dot_q8_tile::<4, 4>(f, rows, std::array::from_fn(|t| &x[t][..]));
            let tile2 = isa.dot_q8_tile::<4, 2>(f, rows, std::array::from_fn(|t| &x[t][..]));
            let tile1 = isa.dot_q8_tile::<4, 1>(f, rows, [&x[0][..]]);
            let got = tile8.iter().chain(&tile4).chain(&tile2).chain(&tile1);
            let want = want.iter().chain(&want[..4]).chain(&want[..2]).chain(&want[..1]);
            for (g, w) in got.zip(want) {
                for (a, b) in g.iter().zip(w) {
                    assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{f:?} {}: {a} vs {b}", isa.name());
                }
            }
        }
    }
}

#[test]
fn float_dot_and_axpy_match_scalar() {
    for n in [1, 7, 8, 31, 64, 100] {
        let (a, b) = (random_f32(3, n), random_f32(4, n));
        let magnitude: f64 = a.iter().zip(&b).map(|(&x, &y)| (x * y).abs() as f64).sum();
        let scalar = Isa::Scalar.dot(&a, &b) as f64;
        for isa in Isa::available() {
            assert!((isa.dot(&a, &b) as f64 - scalar).abs() <= f32_tolerance(n, magnitude), "{} dot {n}", isa.name());
            let (mut y, mut y0) = (b.clone(), b.clone());
            isa.axpy(0.37, &a, &mut y);
            Isa::Scalar.axpy(0.37, &a, &mut y0);
            for (u, v) in y.iter().zip(&y0) {
                assert!((u - v).abs() <= 1e-6, "{} axpy {n}", isa.name());
            }
        }
    }
}

/// Every format through `CpuMatrix::product`: block formats with and without 8-bit inputs,
/// K-quants and floats decoded per row; a share of the rows computes exactly those rows.
#[test]
fn matrix_products_match_the_decoded_matrix() {
    // Fifteen tokens: a tile of each width.
    let (rows, cols, t) = (9, 256, 15);
    let types = [
        GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K,
        GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::F16,
    ];
    let x = random_f32(21, t * cols);
    let xq = quantized(&x);
    for (seed, g) in types.into_iter().enumerate() {
        let bytes = random_weights(g, 40 + seed as u64, rows * cols).unwrap();
        let w = decode_to_f32(StorageType::Ggml(g), &bytes, rows * cols).unwrap();
        let m = CpuMatrix::from_storage("w", StorageType::Ggml(g), rows, cols, bytes).unwrap();
        for isa in Isa::available() {
            for q8 in [false, true] {
                let input = Input { x: &x, xq: q8.then_some(xq.as_slice()), t };
                let mut got = vec![f32::NAN; t * rows];
                m.product(isa, &input, 2..rows, &mut |tok, r, v| got[tok * rows + r] = v).unwrap();
                for tok in 0..t {
                    for r in 0..rows {
                        let v = got[tok * rows + r];
                        if r < 2 {
                            assert!(v.is_nan(), "row {r} is outside the share");
                            continue;
                        }
                        let (ws, xs) = (&w[r * cols..(r + 1) * cols], &x[tok * cols..(tok + 1) * cols]);
                        let exact: f64 = ws.iter().zip(xs).map(|(&a, &b)| a as f64 * b as f64).sum();
                        let magnitude: f64 = ws.iter().zip(xs).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
                        let tol = f32_tolerance(cols, magnitude);
                        let bound = if q8 && m.block_format().is_some() { tol + half_steps(ws, &xq[tok * cols / BLOCK..]) } else { tol };
                        assert!((v as f64 - exact).abs() <= bound, "{g:?} {} q8 {q8}: {v} vs {exact}", isa.name());
                    }
                }
            }
        }
    }
}

/// The report the wasm build exports (`cpuSelfTest`) passes on this machine's SIMD kernels too,
/// with every kernel checked for every instruction set beside the scalar one.
#[test]
fn the_self_test_report_covers_every_kernel_and_passes() {
    let report = super::selftest::run(5).unwrap();
    let failing: Vec<_> = report.checks.iter().filter(|c| !c.ok).collect();
    assert!(report.ok && failing.is_empty(), "{failing:?}");
    assert_eq!(report.checks.len(), (Isa::available().len() - 1) * super::selftest::checks_per_isa());
    for f in BlockFormat::ALL {
        let named = report.checks.iter().filter(|c| c.kernel.starts_with(&format!("{f:?} "))).count();
        assert_eq!(named, (Isa::available().len() - 1) * (4 + usize::from(f.has_f32_kernel())), "{f:?}");
    }
    assert_eq!(report.isa, Isa::detect().name());
}
