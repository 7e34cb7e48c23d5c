//! KL divergence of a model's next-token distributions from a base model's, read back from a
//! file of the base's log-probabilities.
//!
//! File layout (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `weftlogp` |
//! | 4 × 6 | u32 version (1), dtype (0 = f32, 1 = f16), vocab, window, tokens, rows |
//! | 4 × tokens | u32 token ids of the text |
//! | rows × vocab × 4 or 2 | log-probabilities of every scored position, in order |
//!
//! A position is scored when its next token is in the same window (see `score_windows`), so
//! `rows = tokens - windows`.

use std::io::{Read, Write};

use half::f16;
use serde::Serialize;

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"weftlogp";
const VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogitsDtype {
    F32,
    F16,
}

impl LogitsDtype {
    fn bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LogitsHeader {
    pub dtype: LogitsDtype,
    pub vocab: usize,
    pub window: usize,
    pub ids: Vec<u32>,
    pub rows: usize,
}

fn io(e: std::io::Error) -> Error {
    Error::Model(format!("log-probability file: {e}"))
}

impl LogitsHeader {
    /// An error unless the file was made from the same tokens, window and vocabulary.
    pub fn check(&self, ids: &[u32], window: usize, vocab: usize) -> Result<()> {
        if self.vocab != vocab {
            return Err(Error::Model(format!("the base logits have a vocabulary of {}, the model {vocab}", self.vocab)));
        }
        if self.ids != ids {
            let first = self.ids.iter().zip(ids).position(|(a, b)| a != b).unwrap_or(self.ids.len().min(ids.len()));
            return Err(Error::Model(format!(
                "the base logits are of another text: {} tokens against {}, first difference at token {first}",
                self.ids.len(),
                ids.len()
            )));
        }
        if self.window != window {
            return Err(Error::Model(format!("the base logits used windows of {} tokens, this run {window}", self.window)));
        }
        Ok(())
    }

    pub fn write(&self, out: &mut impl Write) -> Result<()> {
        let dtype = match self.dtype {
            LogitsDtype::F32 => 0u32,
            LogitsDtype::F16 => 1,
        };
        out.write_all(MAGIC).map_err(io)?;
        for v in [VERSION, dtype, self.vocab as u32, self.window as u32, self.ids.len() as u32, self.rows as u32] {
            out.write_all(&v.to_le_bytes()).map_err(io)?;
        }
        out.write_all(bytemuck::cast_slice(&self.ids)).map_err(io)
    }

    pub fn read(input: &mut impl Read) -> Result<Self> {
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic).map_err(io)?;
        if &magic != MAGIC {
            return Err(Error::Model("not a weft log-probability file".into()));
        }
        let mut fields = [0u8; 24];
        input.read_exact(&mut fields).map_err(io)?;
        let f: Vec<u32> = fields.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if f[0] != VERSION {
            return Err(Error::Model(format!("log-probability file version {}, expected {VERSION}", f[0])));
        }
        let dtype = match f[1] {
            0 => LogitsDtype::F32,
            1 => LogitsDtype::F16,
            other => return Err(Error::Model(format!("log-probability file: unknown dtype {other}"))),
        };
        let (vocab, window, tokens, rows) = (f[2] as usize, f[3] as usize, f[4] as usize, f[5] as usize);
        if vocab == 0 || rows >= tokens.max(1) || tokens > 1 << 26 {
            return Err(Error::Model(format!("log-probability file: bad sizes (vocab {vocab}, {tokens} tokens, {rows} rows)")));
        }
        let mut bytes = vec![0u8; tokens * 4];
        input.read_exact(&mut bytes).map_err(io)?;
        Ok(Self { dtype, vocab, window, ids: bytemuck::pod_collect_to_vec(&bytes), rows })
    }
}

/// Writes one row of log-probabilities in the header's dtype.
pub fn write_row(out: &mut impl Write, dtype: LogitsDtype, log_probs: &[f64]) -> Result<()> {
    let bytes: Vec<u8> = match dtype {
        LogitsDtype::F32 => log_probs.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        LogitsDtype::F16 => log_probs.iter().flat_map(|&v| f16::from_f64(v).to_le_bytes()).collect(),
    };
    out.write_all(&bytes).map_err(io)
}

/// Reads the next row into `row` (resized to the vocabulary).
pub fn read_row(input: &mut impl Read, header: &LogitsHeader, row: &mut Vec<f32>) -> Result<()> {
    let mut bytes = vec![0u8; header.vocab * header.dtype.bytes()];
    input.read_exact(&mut bytes).map_err(io)?;
    row.clear();
    match header.dtype {
        LogitsDtype::F32 => row.extend(bytes.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        LogitsDtype::F16 => row.extend(bytes.chunks(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())),
    }
    Ok(())
}

/// KL(base ‖ model) = Σ p_base · (log p_base − log p_model) for one position.
pub fn kl_divergence(base: &[f32], model: &[f64]) -> f64 {
    base.iter()
        .zip(model)
        .map(|(&b, &m)| {
            let p = (b as f64).exp();
            if p == 0.0 { 0.0 } else { p * (b as f64 - m) }
        })
        .sum::<f64>()
        .max(0.0)
}

fn argmax<T: PartialOrd + Copy>(v: &[T]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// Sums over positions; [`Self::finish`] gives the statistics.
#[derive(Default)]
pub struct KldAccumulator {
    klds: Vec<f64>,
    agree: usize,
    nll: f64,
    base_nll: f64,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct KldStats {
    pub scored: usize,
    pub perplexity: f64,
    pub base_perplexity: f64,
    pub mean_kld: f64,
    pub median_kld: f64,
    pub p99_kld: f64,
    pub max_kld: f64,
    /// Share of positions where both models rank the same token first.
    pub top1_agreement: f64,
}

impl KldAccumulator {
    /// One position: the base's and the model's log-probabilities, and the token that came next.
    pub fn add(&mut self, base: &[f32], model: &[f64], next: u32) {
        self.klds.push(kl_divergence(base, model));
        self.agree += usize::from(argmax(base) == argmax(model));
        self.nll -= model.get(next as usize).copied().unwrap_or(f64::NEG_INFINITY);
        self.base_nll -= base.get(next as usize).map_or(f64::NEG_INFINITY, |&v| v as f64);
    }

    pub fn finish(mut self) -> Result<KldStats> {
        let n = self.klds.len();
        if n == 0 {
            return Err(Error::Model("no positions were scored".into()));
        }
        self.klds.sort_unstable_by(f64::total_cmp);
        let quantile = |q: f64| self.klds[((n - 1) as f64 * q).round() as usize];
        Ok(KldStats {
            scored: n,
            perplexity: (self.nll / n as f64).exp(),
            base_perplexity: (self.base_nll / n as f64).exp(),
            mean_kld: self.klds.iter().sum::<f64>() / n as f64,
            median_kld: quantile(0.5),
            p99_kld: quantile(0.99),
            max_kld: self.klds[n - 1],
            top1_agreement: self.agree as f64 / n as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::log_softmax;
    use super::*;
    use crate::selftest::random_f32;

    fn as_f32(v: &[f64]) -> Vec<f32> {
        v.iter().map(|&x| x as f32).collect()
    }

    #[test]
    fn identical_distributions_have_zero_divergence() {
        let logits = random_f32(3, 1000).iter().map(|v| v * 8.0).collect::<Vec<_>>();
        let lp = log_softmax(&logits);
        assert!(kl_divergence(&as_f32(&lp), &lp) < 1e-6);
        let mut acc = KldAccumulator::default();
        acc.add(&as_f32(&lp), &lp, 7);
        let s = acc.finish().unwrap();
        assert_eq!(s.top1_agreement, 1.0);
        assert!((s.perplexity - s.base_perplexity).abs() < 1e-4 * s.perplexity);
    }

    #[test]
    fn known_values() {
        // KL((0.5, 0.5) ‖ (0.9, 0.1)) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1)
        let base = [0.5f32.ln(), 0.5f32.ln()];
        let model = [0.9f64.ln(), 0.1f64.ln()];
        let expected = 0.5 * (0.5f64 / 0.9).ln() + 0.5 * 5f64.ln();
        assert!((kl_divergence(&base, &model) - expected).abs() < 1e-7);
        // Three positions: divergences 0, expected, and the reverse pair.
        let mut acc = KldAccumulator::default();
        acc.add(&base, &[0.5f64.ln(), 0.5f64.ln()], 0);
        let swapped = [0.1f64.ln(), 0.9f64.ln()];
        acc.add(&base, &swapped, 1);
        let reverse = 0.9 * (0.9f64 / 0.5).ln() + 0.1 * (0.1f64 / 0.5).ln();
        acc.add(&[0.9f32.ln(), 0.1f32.ln()], &[0.5f64.ln(), 0.5f64.ln()], 1);
        let s = acc.finish().unwrap();
        assert!((s.mean_kld - (expected + reverse) / 3.0).abs() < 1e-6, "{}", s.mean_kld);
        assert!((s.max_kld - expected.max(reverse)).abs() < 1e-6);
        // Only position 1 disagrees on the top token (a 0.5/0.5 tie resolves to token 0).
        assert!((s.top1_agreement - 2.0 / 3.0).abs() < 1e-12);
        // The model's probabilities of the next tokens: 0.5, 0.9, 0.5.
        assert!((s.perplexity - (0.5f64 * 0.9 * 0.5).powf(-1.0 / 3.0)).abs() < 1e-6);
    }

    #[test]
    fn file_round_trips_and_rejects_other_texts() {
        for dtype in [LogitsDtype::F32, LogitsDtype::F16] {
            let header = LogitsHeader { dtype, vocab: 5, window: 4, ids: vec![1, 2, 3, 4, 0], rows: 3 };
            let rows: Vec<Vec<f64>> = (0..3).map(|r| log_softmax(&random_f32(r, 5))).collect();
            let mut bytes = Vec::new();
            header.write(&mut bytes).unwrap();
            for r in &rows {
                write_row(&mut bytes, dtype, r).unwrap();
            }
            let mut input = bytes.as_slice();
            let back = LogitsHeader::read(&mut input).unwrap();
            assert_eq!(back, header);
            let tolerance = if dtype == LogitsDtype::F32 { 1e-6 } else { 4e-3 };
            let mut row = Vec::new();
            for r in &rows {
                read_row(&mut input, &back, &mut row).unwrap();
                assert!(row.iter().zip(r).all(|(&a, &b)| (a as f64 - b).abs() < tolerance), "{dtype:?}");
            }
            assert!(input.is_empty());
            back.check(&[1, 2, 3, 4, 0], 4, 5).unwrap();
            assert!(back.check(&[1, 2, 3, 4, 9], 4, 5).is_err());
            assert!(back.check(&[1, 2, 3, 4], 4, 5).is_err());
            assert!(back.check(&[1, 2, 3, 4, 0], 3, 5).is_err());
            assert!(back.check(&[1, 2, 3, 4, 0], 4, 6).is_err());
        }
        assert!(LogitsHeader::read(&mut &b"notweft!"[..]).is_err());
    }
}
