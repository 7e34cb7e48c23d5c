//! Measuring a model on text: perplexity and, against a base model's logits, KL divergence.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;

use super::Llama;

pub mod kld;

/// Log-probabilities of one row of logits, in f64.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let m = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let z: f64 = logits.iter().map(|&l| (l as f64 - m).exp()).sum();
    let log_z = m + z.ln();
    logits.iter().map(|&l| l as f64 - log_z).collect()
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Perplexity {
    pub perplexity: f64,
    /// Tokens whose probability was scored (each window's first token has no context).
    pub scored: usize,
    pub tokens: usize,
    pub windows: usize,
}

/// Receives each scored position: (position, next token id, logits).
pub type ScoreFn<'a> = dyn FnMut(usize, u32, &[f32]) -> Result<()> + 'a;

/// Runs `ids` in consecutive windows of `window` tokens, each starting from an empty cache, and
/// hands every scored position to `score(position, next_id, logits)`: every token but a
/// window's first is scored. Returns the number of windows run.
pub async fn score_windows(
    llama: &mut Llama,
    ctx: &GpuContext,
    ids: &[u32],
    window: usize,
    score: &mut ScoreFn<'_>,
) -> Result<usize> {
    if ids.len() < 2 || window < 2 {
        return Err(Error::Model("perplexity needs at least two tokens and a window of two".into()));
    }
    let vocab = llama.config.vocab;
    let mut windows = 0usize;
    for (w, chunk) in ids.chunks(window).enumerate() {
        if chunk.len() < 2 {
            continue;
        }
        llama.reset();
        let logits = llama.logits(ctx, chunk, None).await?;
        for (i, &next) in chunk.iter().enumerate().skip(1) {
            score(w * window + i - 1, next, &logits[(i - 1) * vocab..i * vocab])?;
        }
        windows += 1;
    }
    Ok(windows)
}

/// Perplexity of `ids` in consecutive windows of `window` tokens (see [`score_windows`]).
pub async fn perplexity(llama: &mut Llama, ctx: &GpuContext, ids: &[u32], window: usize) -> Result<Perplexity> {
    let (mut nll, mut scored) = (0f64, 0usize);
    let windows = score_windows(llama, ctx, ids, window, &mut |_, next, row| {
        nll -= log_softmax(row)[next as usize];
        scored += 1;
        Ok(())
    })
    .await?;
    Ok(Perplexity { perplexity: (nll / scored as f64).exp(), scored, tokens: ids.len(), windows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_normalises() {
        let l = log_softmax(&[1.0, 2.0, 3.0, 1000.0]);
        let total: f64 = l.iter().map(|v| v.exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!(l[3] > -1e-12 && l[0] < -998.0);
    }
}
