//! Choosing the next token on the GPU: repetition penalty, greedy or temperature/top-k/top-p
//! sampling with a seeded counter-based generator.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor, Uniform};

pub const SAMPLE_SHADER: ShaderSource =
    ShaderSource { name: "sample", source: &[wgsl!("sample.wgsl")] };

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

/// CPU reference of the GPU sampler, step for step in f32 (only `exp` may differ in the last
/// place, so a draw that lands within rounding of a boundary can pick a neighbour).
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
    let mut threshold = xs.iter().cloned().fold(f32::MAX, f32::min);
    if p.top_k > 0 && (p.top_k as usize) < vocab {
        let (mut lo, mut hi) = (threshold, m);
        for _ in 0..32 {
            let mid = lo + (hi - lo) * 0.5;
            if xs.iter().filter(|&&x| x >= mid).count() >= p.top_k as usize {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        threshold = lo;
    }
    let chunk = vocab.div_ceil(WG);
    let chunk_mass = |thr: f32| -> Vec<f32> {
        xs.chunks(chunk)
            .map(|c| c.iter().filter(|&&x| x >= thr).map(|&x| (x - m).exp()).fold(0.0f32, |a, e| a + e))
            .collect()
    };
    let tree_sum = |v: &[f32]| -> f32 {
        let mut v = v.to_vec();
        v.resize(WG, 0.0);
        let mut s = WG / 2;
        while s > 0 {
            for i in 0..s {
                v[i] += v[i + s];
            }
            s /= 2;
        }
        v[0]
    };
    if p.top_p < 1.0 {
        let target = tree_sum(&chunk_mass(threshold)) * p.top_p;
        let (mut lo, mut hi) = (threshold, m);
        for _ in 0..32 {
            let mid = lo + (hi - lo) * 0.5;
            if tree_sum(&chunk_mass(mid)) >= target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        threshold = lo;
    }
    let masses = chunk_mass(threshold);
    let mut starts = Vec::with_capacity(masses.len());
    let mut total = 0.0f32;
    for &ms in &masses {
        starts.push(total);
        total += ms;
    }
    let goal = draw(p.seed, end as u32) * total;
    for (c, (&start, &ms)) in starts.iter().zip(&masses).enumerate() {
        let rel = goal - start;
        if ms > 0.0 && rel >= 0.0 && rel < ms {
            let mut acc = 0.0f32;
            for (i, &x) in xs.iter().enumerate().skip(c * chunk).take(chunk) {
                if x >= threshold {
                    acc += (x - m).exp();
                    if rel < acc {
                        return i as u32;
                    }
                }
            }
        }
    }
    xs.iter().rposition(|&x| x >= threshold).unwrap_or(0) as u32
}
