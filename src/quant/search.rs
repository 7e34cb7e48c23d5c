//! The per-group search for a weft block's scale and zero point: candidates from a clipping grid,
//! each scored after rounding to f16, then weighted least-squares refits of the best one's
//! assignment. With importance weights (one per column, from calibration) every score and fit
//! minimises `Σ_j w_j (x_j - x̂_j)²`, so the grid spends its levels where the inputs are large.

use half::f16;

use super::weft::{dequant_value, Scheme, WeftQuant};

/// Candidate count of the clipping search; each is scored after rounding to f16.
const SEARCH_STEPS: usize = 24;

/// Refits after the grid: assign levels, refit (scale, zero) by weighted least squares, keep it
/// when it scores better. Three were enough on SmolLM2: a fourth changed no group's choice in
/// most matrices.
const REFITS: usize = 3;

fn level(quant: WeftQuant, v: f32, scale: f32, zero: f32) -> f32 {
    let max = (quant.levels() - 1) as f32;
    let q = if scale == 0.0 { zero.round() } else { (v / scale + zero).round() };
    q.clamp(0.0, max)
}

/// Nearest level for each value under (scale, zero); padding values (beyond the row) are 0.0.
pub(super) fn assign(quant: WeftQuant, x: &[f32], scale: f32, zero: f32, qs: &mut [u32]) {
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = level(quant, v, scale, zero) as u32;
    }
}

/// Plain squared error of the group under (scale, zero).
#[cfg(test)]
pub(super) fn sq_error(quant: WeftQuant, x: &[f32], scale: f32, zero: f32) -> f64 {
    weighted_error(quant, x, None, scale, zero)
}

pub(super) fn weighted_error(quant: WeftQuant, x: &[f32], w: Option<&[f32]>, scale: f32, zero: f32) -> f64 {
    x.iter()
        .enumerate()
        .map(|(j, &v)| {
            let d = (v - dequant_value(level(quant, v, scale, zero) as u32, scale, zero)) as f64;
            w.map_or(1.0, |w| w[j] as f64) * d * d
        })
        .sum()
}

/// The (scale, zero) of a group `x` with optional importance weights `w` (same length). A group
/// whose weights are all zero is searched unweighted.
pub(super) fn best_params(quant: WeftQuant, x: &[f32], w: Option<&[f32]>) -> (f16, f16) {
    let w = w.filter(|w| w.iter().any(|&v| v > 0.0));
    let (lo, hi) = x.iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    if x.is_empty() || !(lo.is_finite() && hi.is_finite()) || lo == hi && lo == 0.0 {
        let zero = if quant.scheme == Scheme::Sym { quant.sym_zero() } else { 0.0 };
        return (f16::ZERO, f16::from_f32(zero));
    }
    let sym = quant.scheme == Scheme::Sym;
    // (error, scale, zero) of the best candidate so far.
    let mut best = (f64::INFINITY, f16::ZERO, f16::ZERO);
    let consider = |best: &mut (f64, f16, f16), scale: f32, zero: f32| {
        let (s, z) = (f16::from_f32(scale), f16::from_f32(zero));
        if !s.is_finite() || !z.is_finite() {
            return false;
        }
        let zf = if sym { quant.sym_zero() } else { z.to_f32() };
        let err = weighted_error(quant, x, w, s.to_f32(), zf);
        let better = err < best.0;
        if better {
            *best = (err, s, z);
        }
        better
    };
    let levels = quant.levels() as f32;
    let weight = |j: usize| w.map_or(1.0, |w| w[j] as f64);
    if sym {
        // The level grid runs from -2^(b-1) to 2^(b-1)-1: point the extra negative level at
        // the value of largest magnitude, then shrink the scale to trade clipping for
        // resolution.
        let amax = if hi.abs() >= lo.abs() { hi } else { lo };
        let half = levels / 2.0;
        for step in 0..SEARCH_STEPS {
            let f = 1.0 - 0.5 * step as f32 / SEARCH_STEPS as f32;
            consider(&mut best, -amax * f / half, 0.0);
            consider(&mut best, amax * f / (half - 1.0).max(1.0), 0.0);
        }
        // Weighted least-squares refit of the scale for the best assignment found.
        for _ in 0..REFITS {
            let s = best.1.to_f32();
            if s == 0.0 {
                break;
            }
            let z = quant.sym_zero();
            let (mut num, mut den) = (0f64, 0f64);
            for (j, &v) in x.iter().enumerate() {
                let q = (level(quant, v, s, z) - z) as f64;
                num += weight(j) * v as f64 * q;
                den += weight(j) * q * q;
            }
            if den <= 0.0 || !consider(&mut best, (num / den) as f32, 0.0) {
                break;
            }
        }
    } else {
        let span = hi - lo;
        let n = SEARCH_STEPS / 4;
        for a in 0..n {
            for b in 0..n {
                let l = lo + span * 0.25 * a as f32 / n as f32;
                let h = hi - span * 0.25 * b as f32 / n as f32;
                if h > l {
                    let s = (h - l) / (levels - 1.0);
                    consider(&mut best, s, -l / s);
                }
            }
        }
        // Weighted least-squares refit of x ≈ s*q + m for the best assignment, zero = -m/s.
        for _ in 0..REFITS {
            let (s, z) = (best.1.to_f32(), best.2.to_f32());
            if s == 0.0 {
                break;
            }
            let (mut sw, mut sq, mut sx, mut sqq, mut sqx) = (0f64, 0f64, 0f64, 0f64, 0f64);
            for (j, &v) in x.iter().enumerate() {
                let (wj, q, v) = (weight(j), level(quant, v, s, z) as f64, v as f64);
                sw += wj;
                sq += wj * q;
                sx += wj * v;
                sqq += wj * q * q;
                sqx += wj * q * v;
            }
            let den = sw * sqq - sq * sq;
            if den <= 0.0 {
                break;
            }
            let s2 = (sw * sqx - sq * sx) / den;
            let m2 = (sx - s2 * sq) / sw;
            if s2 <= 0.0 || !consider(&mut best, s2 as f32, (-m2 / s2) as f32) {
                break;
            }
        }
    }
    (best.1, best.2)
}

/// Greedy rounding compensation of one row. With input columns of means `mean` and variances
/// `var`, the expected squared output error of a row error `d` is
/// `Σ_j var_j d_j² + (Σ_j mean_j d_j)²`: nearest rounding minimises the first sum alone, while
/// the errors' projection on the mean adds up across the whole row. This moves single levels one
/// step (the largest decrease of the whole objective first) while the objective falls.
/// `scales` and `zeros` are per group (f32 values as decoded).
pub(super) fn compensate(quant: WeftQuant, x: &[f32], qs: &mut [u32], scales: &[f32], zeros: &[f32], var: &[f32], mean: &[f32]) {
    let g = quant.group as usize;
    let max = quant.levels() - 1;
    let err = |j: usize, q: u32| (x[j] - dequant_value(q, scales[j / g], zeros[j / g])) as f64;
    let mut along: f64 = (0..x.len()).map(|j| mean[j] as f64 * err(j, qs[j])).sum();
    // Each step changes one level; a row rarely needs more than a few dozen.
    for _ in 0..x.len() / 4 {
        // (change of the objective, column, new level)
        let mut best = (0f64, usize::MAX, 0u32);
        for j in 0..x.len() {
            let d = err(j, qs[j]);
            for q in [qs[j].wrapping_sub(1), qs[j] + 1] {
                if q > max {
                    continue;
                }
                let d2 = err(j, q);
                let moved = along + mean[j] as f64 * (d2 - d);
                let change = var[j] as f64 * (d2 * d2 - d * d) + moved * moved - along * along;
                if change < best.0 {
                    best = (change, j, q);
                }
            }
        }
        if best.1 == usize::MAX {
            break;
        }
        let j = best.1;
        along += mean[j] as f64 * (err(j, best.2) - err(j, qs[j]));
        qs[j] = best.2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::random_f32;

    /// With weights, the weighted error is no worse than the unweighted search's under the same
    /// weights, and strictly better somewhere when a few columns dominate.
    #[test]
    fn weights_lower_the_weighted_error() {
        let x = random_f32(21, 64 * 32);
        let mut w: Vec<f32> = random_f32(22, 32).iter().map(|v| 0.05 + v.abs()).collect();
        w[3] = 40.0;
        w[17] = 25.0;
        for name in ["q2_g32_asym", "q3_g32_asym", "q2_g32_sym", "q3_g32_sym", "q4_g32_asym"] {
            let q = WeftQuant::parse(name).unwrap();
            let (mut plain, mut weighted) = (0f64, 0f64);
            for g in x.chunks(32) {
                let zf = |z: f16| if q.scheme == Scheme::Sym { q.sym_zero() } else { z.to_f32() };
                let (s, z) = best_params(q, g, None);
                plain += weighted_error(q, g, Some(&w), s.to_f32(), zf(z));
                let (s, z) = best_params(q, g, Some(&w));
                weighted += weighted_error(q, g, Some(&w), s.to_f32(), zf(z));
            }
            assert!(weighted < plain * 0.97, "{name}: weighted {weighted} plain {plain}");
        }
        // All-zero weights fall back to the plain search.
        let q = WeftQuant::parse("q3_g32_asym").unwrap();
        assert_eq!(best_params(q, &x[..32], Some(&[0.0; 32])), best_params(q, &x[..32], None));
    }

    /// The objective `Σ var d² + (Σ mean d)²` after compensation is below nearest rounding's
    /// whenever the row's error along the mean is not already small.
    #[test]
    fn compensation_lowers_the_expected_output_error() {
        let (cols, g) = (256, 32);
        let x = random_f32(31, cols);
        let mean: Vec<f32> = random_f32(32, cols).iter().map(|v| 0.5 + v).collect();
        let var: Vec<f32> = random_f32(33, cols).iter().map(|v| 0.1 + v.abs()).collect();
        let q = WeftQuant::parse("q2_g32_asym").unwrap();
        let (mut scales, mut zeros, mut qs) = (vec![0f32; cols / g], vec![0f32; cols / g], vec![0u32; cols]);
        for gi in 0..cols / g {
            let (s, z) = best_params(q, &x[gi * g..(gi + 1) * g], None);
            (scales[gi], zeros[gi]) = (s.to_f32(), z.to_f32());
            assign(q, &x[gi * g..(gi + 1) * g], scales[gi], zeros[gi], &mut qs[gi * g..(gi + 1) * g]);
        }
        let objective = |qs: &[u32]| {
            let d: Vec<f64> = (0..cols).map(|j| (x[j] - dequant_value(qs[j], scales[j / g], zeros[j / g])) as f64).collect();
            let along: f64 = d.iter().zip(&mean).map(|(d, m)| d * *m as f64).sum();
            d.iter().zip(&var).map(|(d, v)| d * d * *v as f64).sum::<f64>() + along * along
        };
        let before = objective(&qs);
        let nearest = qs.clone();
        compensate(q, &x, &mut qs, &scales, &zeros, &var, &mean);
        let after = objective(&qs);
        assert!(after < before * 0.9, "after {after} before {before}");
        assert!(qs.iter().all(|&v| v < 4));
        // Levels move by at most one step each, and only a few of them.
        let moved = qs.iter().zip(&nearest).filter(|(a, b)| a != b).count();
        assert!(moved > 0 && moved < cols / 4, "{moved} moved");
    }
}
