//! A blocked f32 matrix product for passes of many token rows (the encoder's batches):
//! `y[t][n] = bias[n] + Σ_k x[t][k] · w[n][k]` over a range of weight rows `n`, the weights in
//! any stored format decoded once per call into f32 panels.
//!
//! The row-at-a-time product (`matrix.rs`) streams every token row past every weight row: with
//! a thousand token rows of 384-1536 values that is megabytes read per weight row, and the
//! arithmetic waits on memory. Here weight rows are packed 16 at a time, k-major (`[k][16]`),
//! and a 6 × 16 tile of outputs stays in registers while `KC` values of k pass: each weight
//! value loaded feeds six products and each token value broadcast feeds sixteen. Decoding
//! costs one pass over the weights per call, against `t` products per weight. The token rows
//! of each block are copied the same way, six rows k-major (`[k][6]`), so the kernel reads two
//! sequential streams instead of six rows a product apart: that alone doubled the rate measured
//! on the encoder's shapes.
//!
//! The sum for each output runs over k in order (one fused multiply-add per term on AVX2, a
//! product and a sum elsewhere; a `KC` chunk ends by storing the tile, the next reloads it), so
//! results differ from the dot-product path only by rounding.
//!
//! 8-bit symmetric weft weights on a CPU with AVX-512 VNNI are not decoded: their bytes are
//! packed as they are and multiplied by the activations quantized to 8 bits per 32 values
//! (`blocked_int8`, `avx512::gemm_int8`), about 2.5 times the f32 kernel's rate on the
//! encoder's shapes.

use std::ops::Range;

use crate::error::Result;
use crate::quant::weft::QuantMatrix;

use super::encoder::gelu_in_place;
#[cfg(target_arch = "x86_64")]
use super::avx512;
use super::kernels::Isa;
use super::threads::Shared;

/// Outputs per packed panel (two AVX2 registers).
pub const NR: usize = 16;
/// Token rows per register tile.
pub const MR: usize = 6;
/// Values of k per pass: a 384-wide product's whole k, so its outputs are written once; the
/// 16 × 384 weight panel (24 KiB) stays in L1 while the 6 × 384 token tiles (9 KiB each) pass.
const KC: usize = 384;
/// Token rows per block: 192 rows of 384 values (288 KiB) stay in L2 while every panel passes,
/// so a block of a thousand rows reads each panel from L3 five times.
const MC: usize = 192;

/// The token rows a product reads: `t` rows of `k` values.
pub struct Rows<'a> {
    pub x: &'a [f32],
    pub t: usize,
    pub k: usize,
}

/// What a product adds to `bias + x · wᵀ` and applies to it while its outputs are in registers,
/// instead of ops of their own that read and write every output again.
#[derive(Clone, Copy, Default)]
pub struct Epilogue<'a> {
    /// `y += residual` after the sum, `residual` laid out as `y` ([t][n_total]).
    pub residual: Option<&'a Shared<'a, f32>>,
    /// `y = gelu(y)` (erf), after the sum.
    pub gelu: bool,
}

/// Computes `y[t][n]` for `n` in `rows`, `y` being `t` rows of `n_total` values: this thread's
/// columns of every token row.
///
/// # Safety
/// No other thread reads or writes `y`'s columns `rows` of any token row until the caller's
/// next barrier, nor writes the residual's.
#[allow(clippy::too_many_arguments)]
pub unsafe fn product(
    isa: Isa,
    x: &Rows,
    rows: Range<usize>,
    weights: Weights,
    bias: &[f32],
    y: &Shared<f32>,
    n_total: usize,
    epilogue: Epilogue,
) -> Result<()> {
    let out = Out { bias, y, n_total, epilogue };
    match isa {
        // SAFETY (every arm): the variants are only constructed after detecting their features.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => match weights.weft.filter(|m| int8_products(isa, m)) {
            Some(m) => blocked_int8(isa, m, x, rows, &out),
            None => blocked(kernel_avx2, x, rows, weights.decode, &out),
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => blocked(kernel_avx2, x, rows, weights.decode, &out),
        #[allow(unreachable_patterns)]
        _ => blocked(kernel_portable, x, rows, weights.decode, &out),
    }
}

/// A product's weight rows.
#[derive(Clone, Copy)]
pub struct Weights<'a> {
    /// `decode(r, out)` writes row `r` (k values) as f32.
    pub decode: &'a dyn Fn(usize, &mut [f32]) -> Result<()>,
    /// The same rows, where they are stored in a weft format: 8-bit symmetric ones are multiplied
    /// as integers where [`int8_products`] says so.
    pub weft: Option<&'a QuantMatrix>,
}

/// Whether `isa` multiplies `m` as 8-bit integers by the activations quantized to 8 bits per 32
/// values (`avx512::gemm_int8`): 8-bit symmetric weights, `v - 128` in groups of 32, 64 or 128,
/// with VNNI. Four times the products per instruction of f32 multiply-adds, at the cost of the
/// activations' rounding (half a step of max|x| / 127 per 32 values; q8 embeddings keep a cosine
/// ≥ 0.995 to F32's, tests/embed_quant.rs).
pub fn int8_products(isa: Isa, m: &QuantMatrix) -> bool {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 {
        return m.quant.bits == 8 && m.quant.scheme == crate::quant::weft::Scheme::Sym && m.cols.is_multiple_of(super::kernels::BLOCK);
    }
    let _ = (isa, m);
    false
}

/// Where a product's outputs go and what is applied to them.
struct Out<'a> {
    bias: &'a [f32],
    y: &'a Shared<'a, f32>,
    n_total: usize,
    epilogue: Epilogue<'a>,
}

impl Out<'_> {
    /// Runs `kernel` on the tile of outputs `[tt, tt + mr) × [n0, n0 + width)`: loaded from the
    /// bias on the first chunk of k, from `y` after it; the epilogue applied after the last.
    ///
    /// # Safety
    /// As [`product`]: the caller owns these outputs.
    unsafe fn tile<const MR: usize, const NR: usize>(
        &self,
        tile: &mut [[f32; NR]; MR],
        (tt, mr, n0, width): (usize, usize, usize, usize),
        (first, last): (bool, bool),
        kernel: impl FnOnce(&mut [[f32; NR]; MR]),
    ) {
        // Whole panels copy as fixed-size arrays (inline moves, no memmove call).
        for (i, acc) in tile.iter_mut().enumerate().take(mr) {
            let at = (tt + i) * self.n_total + n0;
            let src = if first { &self.bias[n0..n0 + width] } else { self.y.get(at..at + width) };
            match <&[f32; NR]>::try_from(src) {
                Ok(whole) => *acc = *whole,
                Err(_) => acc[..width].copy_from_slice(src),
            }
        }
        kernel(tile);
        for (i, acc) in tile.iter_mut().enumerate().take(mr) {
            let at = (tt + i) * self.n_total + n0;
            // After the whole sum, as PyTorch adds it: a large residual summed first would round
            // every product added to it.
            if let (true, Some(r)) = (last, self.epilogue.residual) {
                acc.iter_mut().zip(r.get(at..at + width)).for_each(|(a, r)| *a += r);
            }
            if self.epilogue.gelu && last {
                gelu_in_place(&mut acc[..width]);
            }
            let dst = self.y.get_mut(at..at + width);
            match <&mut [f32; NR]>::try_from(&mut *dst) {
                Ok(whole) => *whole = *acc,
                Err(_) => dst.copy_from_slice(&acc[..width]),
            }
        }
    }
}

/// `tile[i][j] += Σ_kk a[kk][i] · panel[kk][j]`, `a` [kc][MR] and `panel` [kc][NR].
type Kernel = unsafe fn(&[f32], &[f32], &mut [[f32; NR]; MR]);

/// The blocked product of weights decoded to f32, with `MR × NR` register tiles.
///
/// # Safety
/// As [`product`], and the CPU runs `kernel`.
unsafe fn blocked(
    kernel: Kernel,
    x: &Rows,
    rows: Range<usize>,
    decode: &dyn Fn(usize, &mut [f32]) -> Result<()>,
    out: &Out,
) -> Result<()> {
    let (t, k) = (x.t, x.k);
    if rows.is_empty() || t == 0 {
        return Ok(());
    }
    let panels = (rows.len()).div_ceil(NR);
    // [panel][k][NR], rows past the range zero.
    let mut packed = vec![0f32; panels * k * NR];
    let mut row = vec![0f32; k];
    for (i, r) in rows.clone().enumerate() {
        decode(r, &mut row)?;
        let (p, j) = (i / NR, i % NR);
        let panel = &mut packed[p * k * NR..(p + 1) * k * NR];
        for (kk, v) in row.iter().enumerate() {
            panel[kk * NR + j] = *v;
        }
    }
    // A block of token rows, tile by tile, k-major within each tile ([tile][kc][MR]), so the
    // kernel reads one stream; rows past `t` zero.
    let mut tokens = vec![0f32; MC * KC];
    let mut tile = [[0f32; NR]; MR];
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        for t0 in (0..t).step_by(MC) {
            let t1 = (t0 + MC).min(t);
            let tiles = (t1 - t0).div_ceil(MR);
            for (ti, block) in tokens.chunks_exact_mut(kc * MR).take(tiles).enumerate() {
                for i in 0..MR {
                    let r = t0 + ti * MR + i;
                    if r < t1 {
                        for (kk, v) in x.x[r * k + k0..r * k + k0 + kc].iter().enumerate() {
                            block[kk * MR + i] = *v;
                        }
                    } else {
                        (0..kc).for_each(|kk| block[kk * MR + i] = 0.0);
                    }
                }
            }
            for p in 0..panels {
                let n0 = rows.start + p * NR;
                let width = NR.min(rows.end - n0);
                let panel = &packed[p * k * NR + k0 * NR..p * k * NR + (k0 + kc) * NR];
                for (ti, a) in tokens.chunks_exact(kc * MR).take(tiles).enumerate() {
                    let tt = t0 + ti * MR;
                    let place = (tt, MR.min(t1 - tt), n0, width);
                    out.tile(&mut tile, place, (k0 == 0, k0 + kc == k), |tile| kernel(a, panel, tile));
                }
            }
        }
    }
    Ok(())
}

/// The blocked product of [`int8_products`] weights: the whole of k per pass (a 32-row panel
/// of 1536 bytes a row is 48 KiB, read from L2 at a fraction of the kernel's rate), so every
/// output is written once.
///
/// # Safety
/// As [`product`], and the CPU has AVX-512 BW and VNNI (`Isa::Avx512`).
#[cfg(target_arch = "x86_64")]
unsafe fn blocked_int8(isa: Isa, m: &QuantMatrix, x: &Rows, rows: Range<usize>, out: &Out) -> Result<()> {
    use super::kernels::{BlockQ8, BLOCK};
    use avx512::{INT8_MR as MR, INT8_NR as NR};
    use half::f16;
    let (t, k) = (x.t, x.k);
    if rows.is_empty() || t == 0 {
        return Ok(());
    }
    let groups = k / BLOCK;
    let per_group = m.quant.group as usize / BLOCK;
    let (row_bytes, scales_per_row) = (4 * m.quant.words_per_row(m.cols), m.quant.groups_per_row(m.cols));
    let bytes: &[u8] = bytemuck::cast_slice(&m.words);
    // Weights [panel][group][k / 4 within it][NR][4 values] (a register's 16 lanes take 4
    // values of k each) and their scales [panel][group][NR]; rows past the range scale 0.
    let panels = rows.len().div_ceil(NR);
    let mut wq = vec![0u8; panels * k * NR];
    let mut ws = vec![0f32; panels * groups * NR];
    for (i, r) in rows.clone().enumerate() {
        let (p, j) = (i / NR, i % NR);
        let row = &bytes[r * row_bytes..r * row_bytes + k];
        for g in 0..groups {
            ws[(p * groups + g) * NR + j] = f16::from_bits(m.scales[r * scales_per_row + g / per_group]).to_f32();
            for (s, four) in row[g * BLOCK..(g + 1) * BLOCK].chunks_exact(4).enumerate() {
                let at = (((p * groups + g) * BLOCK / 4 + s) * NR + j) * 4;
                wq[at..at + 4].copy_from_slice(four);
            }
        }
    }
    let mut xq = vec![BlockQ8::default(); t * groups];
    isa.quantize(&x.x[..t * k], &mut xq);
    // A block of token rows, tile by tile: values [tile][group][k / 4][MR][4], and per
    // [tile][group][MR] the scale d and what the weights' zero point (128) takes away,
    // -128 · d · Σq; rows past `t` zero.
    let mc = MC / MR * MR;
    let mut tq = vec![0u8; mc * k];
    let mut td = vec![0f32; mc * groups];
    let mut tz = vec![0f32; mc * groups];
    let mut tile = [[0f32; NR]; MR];
    for t0 in (0..t).step_by(mc) {
        let t1 = (t0 + mc).min(t);
        let tiles = (t1 - t0).div_ceil(MR);
        for ti in 0..tiles {
            for i in 0..MR {
                let r = t0 + ti * MR + i;
                for g in 0..groups {
                    let b = if r < t1 { xq[r * groups + g] } else { BlockQ8::default() };
                    let at = (ti * groups + g) * MR + i;
                    (td[at], tz[at]) = (b.d, -128.0 * b.s);
                    for (s, four) in b.q.chunks_exact(4).enumerate() {
                        let at = (((ti * groups + g) * BLOCK / 4 + s) * MR + i) * 4;
                        for (d, &v) in tq[at..at + 4].iter_mut().zip(four) {
                            *d = v as u8;
                        }
                    }
                }
            }
        }
        for p in 0..panels {
            let n0 = rows.start + p * NR;
            let width = NR.min(rows.end - n0);
            let (w, scales) = (&wq[p * k * NR..(p + 1) * k * NR], &ws[p * groups * NR..(p + 1) * groups * NR]);
            for ti in 0..tiles {
                let tt = t0 + ti * MR;
                let a = avx512::Int8Tokens {
                    q: &tq[ti * k * MR..(ti + 1) * k * MR],
                    d: &td[ti * groups * MR..(ti + 1) * groups * MR],
                    zero: &tz[ti * groups * MR..(ti + 1) * groups * MR],
                };
                out.tile(&mut tile, (tt, MR.min(t1 - tt), n0, width), (true, true), |tile| avx512::gemm_int8(&a, w, scales, tile));
            }
        }
    }
    Ok(())
}

/// The reference: plain products and sums, which a wasm build with SIMD128 vectorizes.
pub fn kernel_portable(a: &[f32], panel: &[f32], tile: &mut [[f32; NR]; MR]) {
    for (xs, w) in a.chunks_exact(MR).zip(panel.chunks_exact(NR)) {
        for (acc, &v) in tile.iter_mut().zip(xs) {
            for (acc, w) in acc.iter_mut().zip(w) {
                *acc += v * w;
            }
        }
    }
}

/// # Safety
/// AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2(a: &[f32], panel: &[f32], tile: &mut [[f32; NR]; MR]) {
    use std::arch::x86_64::*;
    let kc = a.len() / MR;
    assert!(panel.len() >= kc * NR);
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    for (a, t) in acc.iter_mut().zip(tile.iter()) {
        a[0] = _mm256_loadu_ps(t.as_ptr());
        a[1] = _mm256_loadu_ps(t.as_ptr().add(8));
    }
    let (mut x, mut w) = (a.as_ptr(), panel.as_ptr());
    for _ in 0..kc {
        let w0 = _mm256_loadu_ps(w);
        let w1 = _mm256_loadu_ps(w.add(8));
        for (i, acc) in acc.iter_mut().enumerate() {
            let v = _mm256_broadcast_ss(&*x.add(i));
            acc[0] = _mm256_fmadd_ps(v, w0, acc[0]);
            acc[1] = _mm256_fmadd_ps(v, w1, acc[1]);
        }
        x = x.add(MR);
        w = w.add(NR);
    }
    for (a, t) in acc.iter().zip(tile.iter_mut()) {
        _mm256_storeu_ps(t.as_mut_ptr(), a[0]);
        _mm256_storeu_ps(t.as_mut_ptr().add(8), a[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instruction set against a plain f64 product, on shapes that leave partial panels,
    /// tiles, token blocks and k chunks, and a row range that starts mid-matrix; with and without
    /// each part of the epilogue.
    #[test]
    fn product_matches_the_plain_sum() {
        let (t, k, n) = (MC + 13, KC + 44, 45);
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let x: Vec<f32> = (0..t * k).map(val).collect();
        let w: Vec<f32> = (0..n * k).map(|i| val(i + 17)).collect();
        let bias: Vec<f32> = (0..n).map(|i| val(i + 3)).collect();
        let mut residual: Vec<f32> = (0..t * n).map(|i| 4.0 * val(i + 29)).collect();
        let decode = |r: usize, out: &mut [f32]| {
            out.copy_from_slice(&w[r * k..(r + 1) * k]);
            Ok(())
        };
        let gelu = |v: f64| 0.5 * v * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2));
        let res = Shared::new(&mut residual);
        for isa in Isa::available() {
            for (with_residual, with_gelu) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut y = vec![f32::NAN; t * n];
                let rows = 3..n;
                {
                    let shared = Shared::new(&mut y);
                    let epilogue = Epilogue { residual: with_residual.then_some(&res), gelu: with_gelu };
                    let weights = Weights { decode: &decode, weft: None };
                    unsafe { product(isa, &Rows { x: &x, t, k }, rows.clone(), weights, &bias, &shared, n, epilogue).unwrap() };
                }
                for tok in 0..t {
                    for r in 0..n {
                        let got = y[tok * n + r];
                        if !rows.contains(&r) {
                            assert!(got.is_nan(), "{} wrote outside its rows", isa.name());
                            continue;
                        }
                        let mut want: f64 = bias[r] as f64
                            + (0..k).map(|i| x[tok * k + i] as f64 * w[r * k + i] as f64).sum::<f64>();
                        if with_residual {
                            want += unsafe { res.get(tok * n + r..tok * n + r + 1) }[0] as f64;
                        }
                        if with_gelu {
                            want = gelu(want);
                        }
                        let what = format!("{} residual {with_residual} gelu {with_gelu} [{tok}, {r}]", isa.name());
                        assert!((got as f64 - want).abs() < 1e-3, "{what}: {got} vs {want}");
                    }
                }
            }
        }
    }

    /// 8-bit symmetric weft weights (groups of 32, 64 and 128) on every instruction set: where
    /// [`int8_products`] holds, against the f64 sum of the weights' values times the activations
    /// as quantized per 32 values (the kernel's integer sums are exact); elsewhere against the
    /// f64 sum with the f32 activations. A block and a partial one of token rows, partial panels
    /// and tiles, a row range that starts mid-matrix, with and without the epilogue.
    #[test]
    fn int8_products_match_the_quantized_sum() {
        use crate::cpu::kernels::{quantize_scalar, BlockQ8, BLOCK};
        use crate::quant::weft::{quantize, WeftQuant};
        let (t, k, n) = (MC + 13, 2 * KC, 45);
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let x: Vec<f32> = (0..t * k).map(|i| val(i) * (1 + i % 7) as f32).collect();
        let mut xq = vec![BlockQ8::default(); t * k / BLOCK];
        quantize_scalar(&x, &mut xq);
        let x8: Vec<f32> = xq.iter().flat_map(|b| b.q.map(|q| q as f32 * b.d)).collect();
        let w: Vec<f32> = (0..n * k).map(|i| val(i + 17)).collect();
        let bias: Vec<f32> = (0..n).map(|i| val(i + 3)).collect();
        let mut residual: Vec<f32> = (0..t * n).map(|i| 4.0 * val(i + 29)).collect();
        let gelu = |v: f64| 0.5 * v * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2));
        let res = Shared::new(&mut residual);
        let mut int8_runs = 0;
        for name in ["q8_g32_sym", "q8_g64_sym", "q8_g128_sym"] {
            let m = quantize(WeftQuant::parse(name).unwrap(), &w, n, k).unwrap();
            let mut wd = vec![0f32; n * k];
            for (r, row) in wd.chunks_exact_mut(k).enumerate() {
                m.dequantize_row(r, row);
            }
            let decode = |r: usize, out: &mut [f32]| {
                out.copy_from_slice(&wd[r * k..(r + 1) * k]);
                Ok(())
            };
            for isa in Isa::available() {
                let int8 = int8_products(isa, &m);
                int8_runs += usize::from(int8);
                let acts = if int8 { &x8 } else { &x };
                for with_epilogue in [false, true] {
                    let mut y = vec![f32::NAN; t * n];
                    let rows = 3..n;
                    {
                        let shared = Shared::new(&mut y);
                        let epilogue = Epilogue { residual: with_epilogue.then_some(&res), gelu: with_epilogue };
                        let weights = Weights { decode: &decode, weft: Some(&m) };
                        unsafe { product(isa, &Rows { x: &x, t, k }, rows.clone(), weights, &bias, &shared, n, epilogue).unwrap() };
                    }
                    for tok in 0..t {
                        for r in 0..n {
                            let got = y[tok * n + r];
                            if !rows.contains(&r) {
                                assert!(got.is_nan(), "{name} {} wrote outside its rows", isa.name());
                                continue;
                            }
                            let terms = (0..k).map(|i| acts[tok * k + i] as f64 * wd[r * k + i] as f64);
                            let mut want = bias[r] as f64 + terms.sum::<f64>();
                            if with_epilogue {
                                want = gelu(want + unsafe { res.get(tok * n + r..tok * n + r + 1) }[0] as f64);
                            }
                            let what = format!("{name} {} int8 {int8} epilogue {with_epilogue} [{tok}, {r}]", isa.name());
                            assert!((got as f64 - want).abs() < 1e-3 * (1.0 + want.abs()), "{what}: {got} vs {want}");
                        }
                    }
                }
            }
        }
        // Where the CPU has the integer kernel, it ran for each format.
        let has = Isa::available().into_iter().any(|isa| isa.name() == "avx512");
        assert_eq!(int8_runs, if has { 3 } else { 0 });
    }
}
