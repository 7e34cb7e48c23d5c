//! Mixed precision under a size budget: each matrix gets the bit width that buys the most
//! predicted quality per byte, greedily, until the file would exceed the budget.
//!
//! The predicted error of a tensor at a bit width is a proxy for the KL divergence it adds to
//! the model's output: its relative squared quantization error `|W - Q(W)|² / |W|²` times a
//! weight for its role (attention value, MLP down, ...); errors of different tensors are taken to
//! add up.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::quant::weft::WeftQuant;

use super::names::{part_of, LayerPart, Part};

/// One way to store a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Candidate {
    pub format: WeftQuant,
    pub bytes: u64,
    /// Predicted contribution to the output's KL divergence.
    pub error: f64,
}

/// A tensor and its candidates.
#[derive(Clone, Debug)]
pub struct TensorChoices {
    pub name: String,
    pub candidates: Vec<Candidate>,
}

/// What the plan picked for one tensor.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assignment {
    pub name: String,
    pub format: WeftQuant,
    pub bytes: u64,
    pub error: f64,
}

/// KL divergence per unit of relative squared error of each role. The embedding is also the
/// output head when the model ties them.
pub fn role_weight(name: &str) -> f64 {
    match part_of(name) {
        Some(Part::Embedding) => ROLE_WEIGHTS[0],
        Some(Part::Output) => ROLE_WEIGHTS[0],
        Some(Part::Layer(_, LayerPart::Q)) => ROLE_WEIGHTS[1],
        Some(Part::Layer(_, LayerPart::K)) => ROLE_WEIGHTS[2],
        Some(Part::Layer(_, LayerPart::V)) => ROLE_WEIGHTS[3],
        Some(Part::Layer(_, LayerPart::AttnOut)) => ROLE_WEIGHTS[4],
        Some(Part::Layer(_, LayerPart::Gate)) => ROLE_WEIGHTS[5],
        Some(Part::Layer(_, LayerPart::Up)) => ROLE_WEIGHTS[6],
        Some(Part::Layer(_, LayerPart::Down)) => ROLE_WEIGHTS[7],
        _ => 1.0,
    }
}

/// [embedding/output, q, k, v, attn_output, gate, up, down]: KLD per unit of summed relative
/// squared error, measured on SmolLM2-135M by quantizing one role at a time to q2_g32_asym
/// (docs/QUALITY.md, "Sensitivity by role"; scripts/quality/rows.sh's `role:` rows). The
/// embedding matters about ten times as much per unit of error as attention values.
const ROLE_WEIGHTS: [f64; 8] = [12.133, 0.2388, 0.1377, 1.1611, 0.1390, 0.2128, 0.3454, 0.7235];

/// Relative squared error `|a - b|² / |a|²` (0 for an all-zero tensor decoded exactly).
pub fn relative_sq_error(original: &[f32], decoded: &[f32]) -> f64 {
    let (mut err, mut norm) = (0f64, 0f64);
    for (&a, &b) in original.iter().zip(decoded) {
        err += ((a - b) as f64).powi(2);
        norm += (a as f64).powi(2);
    }
    if norm == 0.0 {
        if err == 0.0 { 0.0 } else { f64::INFINITY }
    } else {
        err / norm
    }
}

/// Picks a candidate per tensor so that `fixed_bytes` plus the chosen bytes stay within
/// `budget` bytes: everything starts at its smallest candidate, then the upgrade with the
/// largest error reduction per extra byte that still fits is taken, until none fits or none
/// reduces the error. Ties go to the earlier tensor and the smaller upgrade, so the plan is
/// deterministic.
pub fn plan_budget(tensors: &[TensorChoices], fixed_bytes: u64, budget: u64) -> Result<Vec<Assignment>> {
    let mut sorted: Vec<Vec<Candidate>> = Vec::with_capacity(tensors.len());
    for t in tensors {
        if t.candidates.is_empty() {
            return Err(Error::Model(format!("{}: no candidate formats", t.name)));
        }
        let mut c = t.candidates.clone();
        crate::order::sort_by_key(&mut c, |a| (a.bytes, a.format.bits.into()));
        sorted.push(c);
    }
    let mut choice = vec![0usize; tensors.len()];
    let mut total = fixed_bytes + sorted.iter().map(|c| c[0].bytes).sum::<u64>();
    if total > budget {
        return Err(Error::Model(format!(
            "the budget of {budget} bytes is below the smallest plan ({total} bytes at the lowest bit width)"
        )));
    }
    loop {
        // (gain per byte, tensor, candidate)
        let mut best: Option<(f64, usize, usize)> = None;
        for (i, cands) in sorted.iter().enumerate() {
            let now = cands[choice[i]];
            for (j, c) in cands.iter().enumerate().skip(choice[i] + 1) {
                let extra = c.bytes - now.bytes;
                let gain = now.error - c.error;
                if gain <= 0.0 || total + extra > budget {
                    continue;
                }
                let rate = if extra == 0 { f64::INFINITY } else { gain / extra as f64 };
                if best.is_none_or(|(r, _, _)| rate > r) {
                    best = Some((rate, i, j));
                }
            }
        }
        let Some((_, i, j)) = best else { break };
        total = total + sorted[i][j].bytes - sorted[i][choice[i]].bytes;
        choice[i] = j;
    }
    Ok(tensors
        .iter()
        .zip(&sorted)
        .zip(&choice)
        .map(|((t, c), &k)| Assignment { name: t.name.clone(), format: c[k].format, bytes: c[k].bytes, error: c[k].error })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::weft::Scheme;
    use crate::selftest::random_f32;

    fn q(bits: u32) -> WeftQuant {
        WeftQuant::new(bits, 32, Scheme::Asym).unwrap()
    }

    /// Tensors of random sizes whose error falls by 4x per extra bit, scaled by a random weight.
    fn synthetic(n: usize, seed: u64) -> Vec<TensorChoices> {
        let r = random_f32(seed, 2 * n);
        (0..n)
            .map(|i| {
                let weights = 1000 + (r[2 * i].abs() * 100_000.0) as u64;
                let sensitivity = 0.1 + r[2 * i + 1].abs() as f64;
                let candidates = [2u32, 3, 4, 8]
                    .iter()
                    .map(|&bits| Candidate {
                        format: q(bits),
                        bytes: weights * (bits as u64 + 1) / 8,
                        error: sensitivity * 4f64.powi(-(bits as i32)),
                    })
                    .collect();
                TensorChoices { name: format!("t{i}"), candidates }
            })
            .collect()
    }

    fn bytes(plan: &[Assignment]) -> u64 {
        plan.iter().map(|a| a.bytes).sum()
    }

    fn error(plan: &[Assignment]) -> f64 {
        plan.iter().map(|a| a.error).sum()
    }

    #[test]
    fn respects_the_budget_and_spends_it() {
        let t = synthetic(40, 3);
        let min: u64 = t.iter().map(|c| c.candidates[0].bytes).sum();
        let max: u64 = t.iter().map(|c| c.candidates[3].bytes).sum();
        for budget in [min, min + (max - min) / 3, (min + max) / 2, max] {
            let plan = plan_budget(&t, 500, budget + 500).unwrap();
            assert!(bytes(&plan) <= budget, "{} > {budget}", bytes(&plan));
            // What is left is smaller than the cheapest remaining upgrade.
            let left = budget - bytes(&plan);
            let cheapest = plan
                .iter()
                .zip(&t)
                .flat_map(|(a, c)| c.candidates.iter().filter(|x| x.bytes > a.bytes).map(|x| x.bytes - a.bytes))
                .min();
            assert!(cheapest.is_none_or(|c| c > left), "left {left} bytes, an upgrade costs {cheapest:?}");
        }
        assert!(plan_budget(&t, 0, max).unwrap().iter().all(|a| a.format.bits == 8));
        assert!(plan_budget(&t, 0, min).unwrap().iter().all(|a| a.format.bits == 2));
        assert!(plan_budget(&t, 1, min).is_err());
    }

    #[test]
    fn more_budget_never_predicts_more_error() {
        let t = synthetic(30, 11);
        let min: u64 = t.iter().map(|c| c.candidates[0].bytes).sum();
        let mut last = f64::INFINITY;
        for step in 0..20 {
            let plan = plan_budget(&t, 0, min + step * 5_000).unwrap();
            assert!(error(&plan) <= last + 1e-15, "step {step}: {} after {last}", error(&plan));
            last = error(&plan);
        }
    }

    #[test]
    fn deterministic_and_favours_sensitive_tensors() {
        let t = synthetic(25, 5);
        let min: u64 = t.iter().map(|c| c.candidates[0].bytes).sum();
        assert_eq!(plan_budget(&t, 0, min + 40_000).unwrap(), plan_budget(&t, 0, min + 40_000).unwrap());
        // Two equal tensors but for sensitivity: the sensitive one is upgraded first.
        let cand = |s: f64| -> Vec<Candidate> {
            [2u32, 4].iter().map(|&b| Candidate { format: q(b), bytes: 100 * b as u64, error: s / b as f64 }).collect()
        };
        let two = vec![
            TensorChoices { name: "calm".into(), candidates: cand(1.0) },
            TensorChoices { name: "sensitive".into(), candidates: cand(5.0) },
        ];
        let plan = plan_budget(&two, 0, 600).unwrap();
        assert_eq!((plan[0].format.bits, plan[1].format.bits), (2, 4));
    }

    /// An embedding-sized, sensitive tensor and a small calm one with the budget planner's mixed
    /// formats: at the smallest budget both take the smallest format (2.25 bits/weight,
    /// symmetric, groups of 64), whatever the plan's default; with more budget the sensitive one
    /// is upgraded first, and nothing keeps it at 8 bits unless the budget pays for it.
    #[test]
    fn small_budgets_decide_every_tensor_in_every_format() {
        let formats = ["q2_g64_sym", "q2_g32_asym", "q3_g64_sym", "q3_g32_asym", "q4_g32_asym", "q8_g32_asym"];
        let cands = |weights: u64, sensitivity: f64| -> Vec<Candidate> {
            formats
                .iter()
                .map(|f| {
                    let format = WeftQuant::parse(f).unwrap();
                    let bytes = (weights as f64 * format.bits_per_weight() / 8.0) as u64;
                    Candidate { format, bytes, error: sensitivity * 4f64.powi(-(format.bits as i32)) }
                })
                .collect()
        };
        let t = vec![
            TensorChoices { name: "token_embd.weight".into(), candidates: cands(28_000, 12.0) },
            TensorChoices { name: "blk.0.attn_k.weight".into(), candidates: cands(2_000, 0.14) },
        ];
        let min: u64 = t.iter().map(|c| c.candidates[0].bytes).sum();
        let plan = plan_budget(&t, 0, min).unwrap();
        assert!(plan.iter().all(|a| a.format.name() == "q2_g64_sym"), "{plan:?}");
        let plan = plan_budget(&t, 0, min + 3_600).unwrap();
        assert!(plan[0].format.bits > 2 && plan[1].format.bits == 2, "{plan:?}");
        assert!(plan[0].format.bits < 8);
        let all8: u64 = t.iter().map(|c| c.candidates[5].bytes).sum();
        assert!(plan_budget(&t, 0, all8).unwrap().iter().all(|a| a.format.bits == 8));
    }

    #[test]
    fn relative_error_is_scale_free() {
        let a = random_f32(1, 100);
        let b: Vec<f32> = a.iter().map(|v| v * 1.1).collect();
        let e = relative_sq_error(&a, &b);
        assert!((e - 0.01).abs() < 1e-6, "{e}");
        let a10: Vec<f32> = a.iter().map(|v| v * 10.0).collect();
        let b10: Vec<f32> = b.iter().map(|v| v * 10.0).collect();
        assert!((relative_sq_error(&a10, &b10) - e).abs() < 1e-6);
        assert_eq!(relative_sq_error(&[0.0; 4], &[0.0; 4]), 0.0);
    }
}
