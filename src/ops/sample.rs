//! Choosing the next token on the GPU: repetition penalty, greedy or temperature/top-k/top-p
//! sampling with a seeded counter-based generator.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor, Uniform};

pub const SAMPLE_SHADER: ShaderSource =
    ShaderSource { name: "sample", source: &[wgsl!("sample.wgsl"), wgsl!("sample_candidates.wgsl")] };

const WG: usize = 256;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(SAMPLE_SHADER, Defines::new())]
}

/// How to pick the next token. `temperature <= 0` is greedy.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleParams {
    pub temperature: f32,
    /// Keep only the k most likely tokens; 0 keeps all.
    pub top_k: u32,
    /// Keep the most likely tokens whose probability adds up to `top_p`; 1 keeps all.
    pub top_p: f32,
    /// Divides positive (multiplies negative) logits of recently seen tokens; 1 is off.
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at (at most 256).
    pub penalty_window: u32,
    pub seed: u32,
}

impl Default for SampleParams {
    fn default() -> Self {
        Self { temperature: 0.0, top_k: 0, top_p: 1.0, repeat_penalty: 1.0, penalty_window: 64, seed: 0 }
    }
}

impl SampleParams {
    fn words(&self, vocab: u32, max_seq: u32) -> [u32; 8] {
        [
            vocab,
            self.top_k,
            self.penalty_window.min(WG as u32),
            self.seed,
            self.temperature.to_bits(),
            self.top_p.to_bits(),
            self.repeat_penalty.to_bits(),
            max_seq,
        ]
    }
}

/// The sampler's parameter block, rewritable between generations without rebuilding dispatches.
pub fn params_bytes(params: &SampleParams, vocab: usize, max_seq: usize) -> [u8; 32] {
    bytemuck::cast(params.words(vocab as u32, max_seq as u32))
}

/// Samples from `logits` [vocab] (modified in place by the penalty) and writes the token id to
/// `chosen[0]` and to `tokens[(step.pos + step.n_tokens) % max_seq]` (a ring the repetition penalty
/// reads back over). `params` is a uniform block written
/// with [`params_bytes`].
pub async fn sample(
    ctx: &GpuContext,
    logits: &GpuTensor,
    tokens: &GpuTensor,
    chosen: &GpuTensor,
    params: &Uniform,
    step: &Uniform,
) -> Result<Dispatch> {
    let ok = logits.shape.len() == 1
        && logits.dtype == DType::F32
        && tokens.shape.len() == 1
        && tokens.dtype == DType::U32
        && chosen.dtype == DType::U32
        && !chosen.is_empty();
    if !ok {
        return Err(Error::Shape {
            op: "sample",
            message: format!(
                "logits {} tokens {} chosen {}",
                logits.label_shape(),
                tokens.label_shape(),
                chosen.label_shape()
            ),
        });
    }
    let pipeline = ctx.pipeline(&SAMPLE_SHADER, &Defines::new()).await?;
    ctx.dispatch_with(&pipeline, &[logits, tokens, chosen], None, &[params, step], [1, 1, 1])
}

fn pcg(v: u32) -> u32 {
    let state = v.wrapping_mul(747796405).wrapping_add(2891336453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277803737);
    (word >> 22) ^ word
}

/// The uniform draw in [0, 1) for sequence length `end` (the position being filled).
pub fn draw(seed: u32, end: u32) -> f32 {
    (pcg(seed ^ pcg(end)) >> 8) as f32 / 16_777_216.0
}

/// Which way the GPU sampler finds a temperature sample's cut (the draw is the same either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleRoute {
    /// Greedy, or no top-k / top-p: nothing to cut.
    NoCut,
    /// Among at most 1024 candidates sorted in workgroup memory, after this many passes that
    /// count tokens at bounds below the largest logit (for top-k and top-p together, both
    /// cuts' passes).
    Candidates(u32),
    /// Bisection passes over the whole vocabulary (thousands of tokens tied within the
    /// windows' resolution).
    Bisection,
}

/// `narrow` of shaders/sample_candidates.wgsl: passes over twelve bounds until the window
/// around the cut (count at or above it reaching `goal`, or mass) holds at most 1024 tokens.
/// Returns the passes taken, and whether the window reaches the largest logit.
fn narrow(xs: &[f32], m: f32, mn: f32, by_count: bool, goal: f32) -> Option<(u32, bool)> {
    const CAP: f32 = 1024.0;
    const NB: usize = 12;
    const ROUNDS: u32 = 6;
    let mut bound: Vec<f32> = (0..NB).map(|b| m - (b as f32 - 3.0).exp2()).collect();
    let (mut top, mut bottom, mut c_top, mut open) = (m, mn, 0.0f32, true);
    let mut c_bottom = xs.len() as f32;
    for round in 0..ROUNDS {
        let at = |b: f32| {
            let kept = xs.iter().filter(|&&x| x >= b);
            (kept.clone().count() as f32, kept.map(|x| (x - m).exp()).sum::<f32>())
        };
        let stats: Vec<(f32, f32)> = bound.iter().map(|&b| at(b)).collect();
        let b = stats.iter().position(|&(c, s)| if by_count { c >= goal } else { s >= goal }).unwrap_or(NB);
        if b < NB {
            (bottom, c_bottom) = (bound[b], stats[b].0);
        }
        if b > 0 && !(open && c_bottom <= CAP) {
            (top, c_top, open) = (bound[b - 1], stats[b - 1].0, false);
        }
        if c_bottom - c_top <= CAP {
            return Some((round + 1, open));
        }
        let gap = (top - bottom) / (NB + 1) as f32;
        bound = (0..NB).map(|j| top - gap * (j + 1) as f32).collect();
    }
    None
}

/// The route shaders/sample_candidates.wgsl takes for these logits (after any repetition
/// penalty), in f32 (the GPU sums masses in another order, so a bound within rounding of a
/// top-p goal can be chosen differently).
pub fn sample_route(logits: &[f32], p: &SampleParams) -> SampleRoute {
    let k_on = p.top_k > 0 && (p.top_k as usize) < logits.len();
    let p_on = p.top_p < 1.0;
    if p.temperature <= 0.0 || (!k_on && !p_on) {
        return SampleRoute::NoCut;
    }
    let inv_t = 1.0 / p.temperature;
    let xs: Vec<f32> = logits.iter().map(|&l| l * inv_t).collect();
    let m = xs.iter().cloned().fold(f32::MIN, f32::max);
    let mn = xs.iter().cloned().fold(f32::MAX, f32::min);
    let mass_from = |cut: f32| xs.iter().filter(|&&x| x >= cut).map(|x| (x - m).exp()).sum::<f32>();
    let mut passes = 0;
    let mut top_mass = mass_from(mn);
    let mut open = true;
    if k_on {
        let Some((n, o)) = narrow(&xs, m, mn, true, p.top_k as f32) else { return SampleRoute::Bisection };
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        top_mass = mass_from(sorted[p.top_k as usize - 1]);
        (passes, open) = (n, o);
    }
    if p_on && !(k_on && open) {
        let Some((n, _)) = narrow(&xs, m, mn, false, top_mass * p.top_p) else { return SampleRoute::Bisection };
        passes += n;
    }
    SampleRoute::Candidates(passes)
}

/// CPU reference of the GPU sampler: what it keeps and draws (the GPU sums masses in f32 in
/// another order and its `exp` may differ in the last place, so a draw or a top-p cut that lands
/// within rounding of a boundary can pick a neighbour).
pub fn sample_cpu(logits: &[f32], tokens: &[u32], end: usize, p: &SampleParams) -> u32 {
    let vocab = logits.len();
    let mut logits = logits.to_vec();
    let window = (p.penalty_window as usize).min(WG).min(end);
    if p.repeat_penalty != 1.0 {
        let recent = &tokens[end - window..end];
        for (i, &tok) in recent.iter().enumerate() {
            if !recent[..i].contains(&tok) && (tok as usize) < vocab {
                let l = logits[tok as usize];
                logits[tok as usize] = if l > 0.0 { l / p.repeat_penalty } else { l * p.repeat_penalty };
            }
        }
    }
    if p.temperature <= 0.0 {
        let mut best = 0;
        for (i, &l) in logits.iter().enumerate() {
            if l > logits[best] {
                best = i;
            }
        }
        return best as u32;
    }
    let inv_t = 1.0 / p.temperature;
    let xs: Vec<f32> = logits.iter().map(|&l| l * inv_t).collect();
    let m = xs.iter().cloned().fold(f32::MIN, f32::max);
    // Masses in f32 as the GPU computes them, summed in f64 (a sum of a large vocabulary in f32,
    // one term after another, drifts by whole tokens from the GPU's sums by chunks).
    let weight = |i: usize| (xs[i] - m).exp() as f64;
    // top-k: the logits at or above the k-th largest.
    let mut kept: Vec<usize> = (0..vocab).collect();
    if p.top_k > 0 && (p.top_k as usize) < vocab {
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[p.top_k as usize - 1];
        kept.retain(|&i| xs[i] >= kth);
    }
    // top-p: largest first (ties by index), the first whose running mass reaches top_p of the
    // kept mass sets the cut; its ties stay.
    if p.top_p < 1.0 {
        let mut order = kept.clone();
        order.sort_by(|&a, &b| xs[b].total_cmp(&xs[a]).then(a.cmp(&b)));
        let target = order.iter().map(|&i| weight(i)).sum::<f64>() * p.top_p as f64;
        let mut run = 0.0f64;
        if let Some(&at) = order.iter().find(|&&i| {
            run += weight(i);
            run >= target
        }) {
            let cut = xs[at];
            kept.retain(|&i| xs[i] >= cut);
        }
    }
    // The draw: the kept tokens in index order, the first whose running mass passes the goal.
    let total: f64 = kept.iter().map(|&i| weight(i)).sum();
    let goal = draw(p.seed, end as u32) as f64 * total;
    let mut run = 0.0f64;
    for &i in &kept {
        run += weight(i);
        if goal < run {
            return i as u32;
        }
    }
    kept.last().copied().unwrap_or(0) as u32
}
