//! Executing the encoder graph on the CPU with the CPU backend's pieces: packed matrices
//! (`cpu::matrix`) multiplied by the blocked product for many token rows (`cpu::gemm`), the
//! SIMD dot and axpy (`cpu::kernels`), and its threads,
//! which split each op's rows and meet at a barrier after it (`cpu::threads`).

use std::sync::Mutex;

use crate::cpu::kernels::Isa;
use crate::cpu::gemm::{self, Rows};
use crate::cpu::threads::{share, Shared, SpinBarrier};
use crate::error::{Error, Result};
use crate::model::graph::Checkpoint;

use super::config::BertConfig;
use super::forward::{Act, Op, Pooling, ACTS};
use super::weights::BertWeights;

/// The sequences of one pass, packed: sequence `s` is rows `starts[s]..starts[s + 1]`.
pub struct Batch<'a> {
    pub ids: &'a [u32],
    pub starts: &'a [usize],
}

struct Exec<'a> {
    c: &'a BertConfig,
    w: &'a BertWeights,
    isa: Isa,
    threads: usize,
    batch: &'a Batch<'a>,
    acts: Vec<Shared<'a, f32>>,
    barrier: SpinBarrier,
    captures: Mutex<Vec<Checkpoint>>,
    failed: Mutex<Option<Error>>,
}

fn index(a: Act) -> usize {
    ACTS.iter().position(|&b| b == a).unwrap_or(0)
}

/// Runs `ops` over `batch`; returns the pooled rows [sequences, dim] and the checkpoints.
pub fn execute(
    c: &BertConfig,
    w: &BertWeights,
    isa: Isa,
    threads: usize,
    ops: &[Op],
    batch: &Batch,
) -> Result<(Vec<f32>, Vec<Checkpoint>)> {
    let t = batch.ids.len();
    let n_seq = batch.starts.len().saturating_sub(1);
    if batch.starts.first() != Some(&0) || batch.starts.last() != Some(&t) || batch.starts.windows(2).any(|p| p[0] >= p[1]) {
        return Err(Error::Shape {
            op: "encode",
            message: format!("sequence starts {:?} over {t} tokens", batch.starts),
        });
    }
    let longest = batch.starts.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(0);
    if longest > c.max_positions {
        return Err(Error::ContextFull {
            tokens: longest,
            context: c.max_positions,
        });
    }
    let mut bufs: Vec<Vec<f32>> = ACTS
        .iter()
        .map(|&a| vec![0f32; if a == Act::Pooled { n_seq } else { t } * a.width(c)])
        .collect();
    let threads = threads.max(1);
    let exec = Exec {
        c,
        w,
        isa,
        threads,
        batch,
        acts: bufs.iter_mut().map(|v| Shared::new(v)).collect(),
        barrier: SpinBarrier::new(threads),
        captures: Mutex::new(Vec::new()),
        failed: Mutex::new(None),
    };
    // One thread (the browser's) runs in place: wasm32 without atomics has no threads to scope.
    if threads == 1 {
        exec.worker(0, ops);
    } else {
        std::thread::scope(|s| {
            for tid in 1..threads {
                let e = &exec;
                s.spawn(move || e.worker(tid, ops));
            }
            exec.worker(0, ops);
        });
    }
    let captures = exec.captures.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = exec.failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok((std::mem::take(&mut bufs[index(Act::Pooled)]), captures))
}

/// `x · (1 + erf(x / √2)) / 2`, as PyTorch's default `gelu`.
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// Head columns `col` of the row starting at `at`.
///
/// # Safety
/// As [`Shared::get`].
unsafe fn head<'b>(b: &'b Shared<'_, f32>, at: usize, col: &std::ops::Range<usize>) -> &'b [f32] {
    b.get(at + col.start..at + col.end)
}

impl Exec<'_> {
    fn worker(&self, tid: usize, ops: &[Op]) {
        let longest = self.batch.starts.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(0);
        let mut scores = vec![0f32; longest];
        for op in ops {
            if let Err(e) = self.op(tid, op, &mut scores) {
                self.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
            self.barrier.wait();
        }
    }

    fn buf(&self, a: Act) -> &Shared<'_, f32> {
        &self.acts[index(a)]
    }

    /// The sequence holding token row `tok`.
    fn sequence_of(&self, tok: usize) -> usize {
        self.batch.starts.partition_point(|&s| s <= tok) - 1
    }

    /// SAFETY (every `get`/`get_mut`/`set`): between two barriers a tensor is only read, or
    /// written in row ranges (`share`) that no two threads share, and never read while written.
    fn op(&self, tid: usize, op: &Op, scores: &mut [f32]) -> Result<()> {
        let (c, n) = (self.c, self.threads);
        let t = self.batch.ids.len();
        let d = c.dim;
        match op {
            Op::Embed { out } => {
                let o = self.buf(*out);
                for tok in share(t, tid, n) {
                    let id = self.batch.ids[tok] as usize;
                    if id >= self.w.word.rows {
                        return Err(Error::Model(format!(
                            "token id {id} is outside the vocabulary of {}",
                            c.vocab
                        )));
                    }
                    let pos = tok - self.batch.starts[self.sequence_of(tok)];
                    let row = unsafe { o.get_mut(tok * d..(tok + 1) * d) };
                    self.w.word.decode_row(id, row)?;
                    let (p, ty) = (&self.w.position[pos * d..(pos + 1) * d], &self.w.token_type[..d]);
                    for ((y, a), b) in row.iter_mut().zip(p).zip(ty) {
                        *y += a + b;
                    }
                }
            }
            Op::LayerNorm { x, w, out } => {
                let norm = self.w.norm(*w)?;
                for tok in share(t, tid, n) {
                    let xs = unsafe { self.buf(*x).get(tok * d..(tok + 1) * d) };
                    let mean = xs.iter().sum::<f32>() / d as f32;
                    let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
                    let scale = 1.0 / (var + c.eps).sqrt();
                    let ys = unsafe { self.buf(*out).get_mut(tok * d..(tok + 1) * d) };
                    for (i, y) in ys.iter_mut().enumerate() {
                        *y = (xs[i] - mean) * scale * norm.w[i] + norm.b[i];
                    }
                }
            }
            Op::Linear { w, x, out } => {
                let lin = self.w.linear(*w)?;
                let m = &lin.w;
                let rows = Rows { x: unsafe { self.buf(*x).get(0..t * m.cols) }, t, k: m.cols };
                let decode = |r: usize, row: &mut [f32]| m.decode_row(r, row);
                // SAFETY: this thread's share of the matrix rows is its own columns of `out`.
                unsafe { gemm::product(self.isa, &rows, share(m.rows, tid, n), &decode, &lin.b, self.buf(*out), m.rows)? };
            }
            Op::Attention { q, k, v, out } => {
                let hd = c.head_dim();
                let scale = 1.0 / (hd as f32).sqrt();
                let (qb, kb, vb) = (self.buf(*q), self.buf(*k), self.buf(*v));
                for item in (tid..t * c.n_heads).step_by(n) {
                    let (tok, h) = (item / c.n_heads, item % c.n_heads);
                    let s = self.sequence_of(tok);
                    let (start, end) = (self.batch.starts[s], self.batch.starts[s + 1]);
                    let col = h * hd..(h + 1) * hd;
                    let row = |b, r: usize| unsafe { head(b, r * d, &col) };
                    let qh = row(qb, tok);
                    let scores = &mut scores[..end - start];
                    let mut max = f32::NEG_INFINITY;
                    for (j, sc) in scores.iter_mut().enumerate() {
                        *sc = self.isa.dot(qh, row(kb, start + j)) * scale;
                        max = max.max(*sc);
                    }
                    let mut sum = 0f32;
                    for sc in scores.iter_mut() {
                        *sc = (*sc - max).exp();
                        sum += *sc;
                    }
                    let o = unsafe { self.buf(*out).get_mut(tok * d + col.start..tok * d + col.end) };
                    o.fill(0.0);
                    for (j, sc) in scores.iter().enumerate() {
                        self.isa.axpy(sc / sum, row(vb, start + j), o);
                    }
                }
            }
            Op::GeluErf { x } => {
                let range = share(t * x.width(c), tid, n);
                for v in unsafe { self.buf(*x).get_mut(range) } {
                    *v = gelu_erf(*v);
                }
            }
            Op::Add { x, y, out } => {
                let range = share(t * d, tid, n);
                let (a, b) = unsafe { (self.buf(*x).get(range.clone()), self.buf(*y).get(range.clone())) };
                for ((o, a), b) in unsafe { self.buf(*out).get_mut(range) }.iter_mut().zip(a).zip(b) {
                    *o = a + b;
                }
            }
            Op::Pool { pooling, x, out } => {
                for s in share(self.batch.starts.len() - 1, tid, n) {
                    let (start, end) = (self.batch.starts[s], self.batch.starts[s + 1]);
                    let o = unsafe { self.buf(*out).get_mut(s * d..(s + 1) * d) };
                    let rows = unsafe { self.buf(*x).get(start * d..end * d) };
                    match pooling {
                        Pooling::Cls => o.copy_from_slice(&rows[..d]),
                        Pooling::Mean => {
                            o.fill(0.0);
                            for r in rows.chunks_exact(d) {
                                self.isa.axpy(1.0, r, o);
                            }
                            let inv = 1.0 / (end - start) as f32;
                            o.iter_mut().for_each(|v| *v *= inv);
                        }
                    }
                }
            }
            Op::L2Normalize { x } => {
                for s in share(self.batch.starts.len() - 1, tid, n) {
                    let o = unsafe { self.buf(*x).get_mut(s * d..(s + 1) * d) };
                    // sentence-transformers' Normalize: x / max(|x|, 1e-12).
                    let norm = o.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                    o.iter_mut().for_each(|v| *v /= norm);
                }
            }
            Op::Capture { name, x } if tid == 0 => {
                let width = x.width(c);
                let values = unsafe { self.buf(*x).get(0..t * width) }.to_vec();
                self.captures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((name.clone(), vec![t, width], values));
            }
            Op::Capture { .. } => {}
        }
        Ok(())
    }
}
