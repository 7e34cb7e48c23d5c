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

use std::ops::Range;

use crate::error::Result;

use super::encoder::gelu_in_place;
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
/// columns of every token row. `decode(r, out)` writes weight row `r` (k values) as f32.
///
/// # Safety
/// No other thread reads or writes `y`'s columns `rows` of any token row until the caller's
/// next barrier, nor writes the residual's.
#[allow(clippy::too_many_arguments)]
pub unsafe fn product(
    isa: Isa,
    x: &Rows,
    rows: Range<usize>,
    decode: &dyn Fn(usize, &mut [f32]) -> Result<()>,
    bias: &[f32],
    y: &Shared<f32>,
    n_total: usize,
    epilogue: Epilogue,
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
                    let mr = MR.min(t1 - tt);
                    // Whole panels copy as fixed-size arrays (inline moves, no memmove call).
                    for (i, acc) in tile.iter_mut().enumerate().take(mr) {
                        let at = (tt + i) * n_total + n0;
                        let src = if k0 == 0 { &bias[n0..n0 + width] } else { y.get(at..at + width) };
                        match <&[f32; NR]>::try_from(src) {
                            Ok(whole) => *acc = *whole,
                            Err(_) => acc[..width].copy_from_slice(src),
                        }
                    }
                    kernel(isa, a, panel, &mut tile);
                    for (i, acc) in tile.iter_mut().enumerate().take(mr) {
                        let at = (tt + i) * n_total + n0;
                        // After the whole sum, as PyTorch adds it: a large residual summed first
                        // would round every product added to it.
                        if let (true, Some(r)) = (k0 + kc == k, epilogue.residual) {
                            acc.iter_mut().zip(r.get(at..at + width)).for_each(|(a, r)| *a += r);
                        }
                        if epilogue.gelu && k0 + kc == k {
                            gelu_in_place(&mut acc[..width]);
                        }
                        let dst = y.get_mut(at..at + width);
                        match <&mut [f32; NR]>::try_from(&mut *dst) {
                            Ok(whole) => *whole = *acc,
                            Err(_) => dst.copy_from_slice(&acc[..width]),
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// `tile[i][j] += Σ_kk a[kk][i] · panel[kk][j]`, `a` [kc][MR] and `panel` [kc][NR].
fn kernel(isa: Isa, a: &[f32], panel: &[f32], tile: &mut [[f32; NR]; MR]) {
    match isa {
        // SAFETY: `Avx2` is only constructed after detecting AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { kernel_avx2(a, panel, tile) },
        #[allow(unreachable_patterns)]
        _ => kernel_portable(a, panel, tile),
    }
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
                    unsafe { product(isa, &Rows { x: &x, t, k }, rows.clone(), &decode, &bias, &shared, n, epilogue).unwrap() };
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
}
