//! GPTQ: rounding with compensation through the inputs' full second-moment matrix `H = E[x xᵀ]`.
//! Columns are rounded in order; each column's rounding error is spread over the columns not yet
//! rounded so that the expected squared output error `(w - ŵ)ᵀ H (w - ŵ)` stays as small as the
//! remaining freedom allows (Frantar et al., 2022). A group's scale and zero point are searched
//! (`search::best_params`, weighted by H's diagonal) on the weights as updated when the group is
//! reached, so the stored format is any weft block format, unchanged.
//!
//! The update needs the upper Cholesky factor `U` of `H⁻¹` (`H⁻¹ = Uᵀ U`): with `H = V Vᵀ`, V
//! upper triangular, `U = V⁻¹`. V is the ordinary (lower) Cholesky factor of H with its index
//! order reversed, so one factorization and one triangular inverse give it.

use half::f16;

use crate::error::{Error, Result};

use super::search::{assign, best_params};
use super::weft::{dequant_value, Scheme, WeftQuant};

/// Damping added to H's diagonal, as a share of its mean diagonal: keeps the factorization
/// defined when inputs are collinear or a column never varies (the usual GPTQ choice).
const DAMPING: f64 = 0.01;

/// What GPTQ needs of one input: `U`, and H's diagonal (the per-column importance of the group
/// search).
#[derive(Clone, Debug)]
pub struct Factor {
    cols: usize,
    /// Upper triangular, [cols, cols] row-major.
    u: Vec<f32>,
    diag: Vec<f32>,
}

impl Factor {
    /// Factors `hessian` ([cols, cols], symmetric). Dead columns (zero diagonal) get a unit
    /// diagonal; when damping is not enough for a positive definite matrix it is raised tenfold.
    pub fn new(hessian: &[f32], cols: usize) -> Result<Self> {
        if hessian.len() != cols * cols {
            return Err(Error::Shape { op: "gptq", message: format!("a Hessian of {} values for {cols} columns", hessian.len()) });
        }
        let diag: Vec<f32> = (0..cols).map(|i| hessian[i * cols + i]).collect();
        let mean = diag.iter().map(|&d| d as f64).sum::<f64>() / cols.max(1) as f64;
        let mut damping = DAMPING * if mean > 0.0 { mean } else { 1.0 };
        for _ in 0..6 {
            // H reversed: a[i][j] = H[n-1-i][n-1-j].
            let r = |i: usize| cols - 1 - i;
            let mut a: Vec<f64> = (0..cols * cols).map(|ij| hessian[r(ij / cols) * cols + r(ij % cols)] as f64).collect();
            for i in 0..cols {
                if a[i * cols + i] <= 0.0 {
                    a[i * cols + i] = 1.0;
                }
                a[i * cols + i] += damping;
            }
            if cholesky_lower(&mut a, cols) {
                let m = lower_inverse(&a, cols);
                let u = (0..cols * cols).map(|ij| m[r(ij / cols) * cols + r(ij % cols)] as f32).collect();
                return Ok(Self { cols, u, diag });
            }
            damping *= 10.0;
        }
        Err(Error::Shape { op: "gptq", message: "the Hessian is not positive definite even with damping".into() })
    }

    pub fn cols(&self) -> usize {
        self.cols
    }
}

/// In-place lower Cholesky factor of `a` ([n, n], symmetric positive definite), row by row, its
/// upper part zeroed; false when a pivot is not positive.
fn cholesky_lower(a: &mut [f64], n: usize) -> bool {
    for i in 0..n {
        let (done, rest) = a.split_at_mut(i * n);
        let row = &mut rest[..n];
        for j in 0..i {
            let s: f64 = row[..j].iter().zip(&done[j * n..j * n + j]).map(|(x, y)| x * y).sum();
            row[j] = (row[j] - s) / done[j * n + j];
        }
        let d = row[i] - row[..i].iter().map(|v| v * v).sum::<f64>();
        if d.is_nan() || d <= 0.0 {
            return false;
        }
        row[i] = d.sqrt();
        row[i + 1..].iter_mut().for_each(|v| *v = 0.0);
    }
    true
}

/// Inverse of a lower triangular `l` ([n, n]), lower triangular too.
fn lower_inverse(l: &[f64], n: usize) -> Vec<f64> {
    let mut m = vec![0f64; n * n];
    // Row by row: M[i][j] = (δ_ij - Σ_{j<=k<i} L[i][k] M[k][j]) / L[i][i].
    for i in 0..n {
        let lii = l[i * n + i];
        m[i * n + i] = 1.0 / lii;
        let (above, row) = m.split_at_mut(i * n);
        let row = &mut row[..n];
        for k in 0..i {
            let lik = l[i * n + k];
            if lik != 0.0 {
                for (r, &v) in row[..=k].iter_mut().zip(&above[k * n..k * n + k + 1]) {
                    *r -= lik * v;
                }
            }
        }
        for r in row[..i].iter_mut() {
            *r /= lii;
        }
    }
    m
}

/// Rounds one row `w` (`factor.cols()` values, updated in place as the errors spread) into `qs`
/// (one level per column, padded to whole groups with the level of 0.0) and the groups'
/// (scale, zero) into `params`.
pub(super) fn quantize_row(quant: WeftQuant, factor: &Factor, w: &mut [f32], qs: &mut [u32], params: &mut [(f16, f16)]) {
    let (g, cols) = (quant.group as usize, factor.cols);
    let zero_of = |z: f16| if quant.scheme == Scheme::Sym { quant.sym_zero() } else { z.to_f32() };
    for (gi, p) in params.iter_mut().enumerate() {
        let (start, end) = (gi * g, (gi * g + g).min(cols));
        *p = best_params(quant, &w[start..end], Some(&factor.diag[start..end]));
        let (scale, zero) = (p.0.to_f32(), zero_of(p.1));
        for j in start..end {
            assign(quant, &w[j..j + 1], scale, zero, &mut qs[j..j + 1]);
            let err = (w[j] - dequant_value(qs[j], scale, zero)) / factor.u[j * cols + j];
            let u = &factor.u[j * cols + j + 1..(j + 1) * cols];
            for (v, &uk) in w[j + 1..].iter_mut().zip(u) {
                *v -= err * uk;
            }
        }
        // Padding beyond the row decodes as zero weights.
        let pad = [0f32; 128];
        assign(quant, &pad[..start + g - end], scale, zero, &mut qs[end..start + g]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::random_f32;

    /// `Uᵀ U` is `H⁻¹` (of the damped H).
    #[test]
    fn factor_inverts_the_damped_hessian() {
        let n = 37;
        let x = random_f32(5, 80 * n);
        let mut h = vec![0f32; n * n];
        for r in x.chunks(n) {
            for i in 0..n {
                for j in 0..n {
                    h[i * n + j] += r[i] * r[j] / 80.0;
                }
            }
        }
        let f = Factor::new(&h, n).unwrap();
        let mean = (0..n).map(|i| h[i * n + i] as f64).sum::<f64>() / n as f64;
        for i in 0..n {
            for j in 0..n {
                // (Uᵀ U H_damped)[i][j] = δ_ij
                let mut v = 0f64;
                for k in 0..n {
                    let hk = h[k * n + j] as f64 + if k == j { DAMPING * mean } else { 0.0 };
                    let utu: f64 = (0..n).map(|m| f.u[m * n + i] as f64 * f.u[m * n + k] as f64).sum();
                    v += utu * hk;
                }
                assert!((v - if i == j { 1.0 } else { 0.0 }).abs() < 1e-3, "{i},{j}: {v}");
                if j < i {
                    assert_eq!(f.u[i * n + j], 0.0);
                }
            }
        }
    }

    /// On correlated inputs GPTQ's expected output error `(w-ŵ)ᵀ H (w-ŵ)` is well below that of
    /// rounding each group to its importance-weighted best alone.
    #[test]
    fn gptq_lowers_the_output_error_on_correlated_inputs() {
        let (n, rows, samples) = (64, 24, 400);
        // Inputs with a shared component along a direction that is not constant within a group
        // (a group's zero point would absorb that): strongly correlated columns.
        let (base, dir) = (random_f32(7, samples), random_f32(6, n));
        let noise = random_f32(8, samples * n);
        let x: Vec<f32> = (0..samples * n).map(|i| base[i / n] * dir[i % n] + 0.3 * noise[i]).collect();
        let mut h = vec![0f32; n * n];
        for r in x.chunks(n) {
            for i in 0..n {
                for j in 0..n {
                    h[i * n + j] += r[i] * r[j] / samples as f32;
                }
            }
        }
        let f = Factor::new(&h, n).unwrap();
        let w = random_f32(9, rows * n);
        let err = |d: &[f64]| -> f64 {
            (0..n).map(|i| (0..n).map(|j| d[i] * h[i * n + j] as f64 * d[j]).sum::<f64>()).sum()
        };
        for name in ["q3_g32_asym", "q2_g32_asym", "q3_g64_sym"] {
            let q = WeftQuant::parse(name).unwrap();
            let (mut plain, mut gptq) = (0f64, 0f64);
            for row in w.chunks(n) {
                let mut qs = vec![0u32; n];
                let mut params = vec![(f16::ZERO, f16::ZERO); n / q.group as usize];
                let mut updated = row.to_vec();
                quantize_row(q, &f, &mut updated, &mut qs, &mut params);
                let zero = |p: (f16, f16)| if q.scheme == Scheme::Sym { q.sym_zero() } else { p.1.to_f32() };
                let d: Vec<f64> = (0..n)
                    .map(|j| {
                        let p = params[j / q.group as usize];
                        (row[j] - dequant_value(qs[j], p.0.to_f32(), zero(p))) as f64
                    })
                    .collect();
                gptq += err(&d);
                let mut d = Vec::new();
                for (gi, grp) in row.chunks(q.group as usize).enumerate() {
                    let start = gi * q.group as usize;
                    let p = best_params(q, grp, Some(&f.diag[start..start + grp.len()]));
                    let mut gq = vec![0u32; grp.len()];
                    assign(q, grp, p.0.to_f32(), zero(p), &mut gq);
                    d.extend(grp.iter().zip(gq).map(|(&v, l)| (v - dequant_value(l, p.0.to_f32(), zero(p))) as f64));
                }
                plain += err(&d);
            }
            assert!(gptq < plain * 0.5, "{name}: gptq {gptq} plain {plain}");
        }
    }
}
