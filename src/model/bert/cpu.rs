//! Executing the encoder graph on the CPU with the CPU backend's pieces: packed matrices
//! (`cpu::matrix`) multiplied by the blocked product for many token rows (`cpu::gemm`), the
//! SIMD dot and axpy (`cpu::kernels`), and its threads,
//! which split each op's rows and meet at a barrier after it (`cpu::threads`: OS threads
//! natively, the page's worker pool in a wasm build with shared memory).

use std::sync::Mutex;

use crate::cpu::kernels::Isa;
use crate::cpu::encoder;
use crate::cpu::gemm::{self, Epilogue, Rows};
use crate::cpu::threads::{self, share, Shared, SpinBarrier};
use crate::error::{Error, Result};
use crate::model::graph::Checkpoint;

use super::config::BertConfig;
use super::forward::{Act, LayerWeight, Op, Pooling, Weight, ACTS};
use super::weights::BertWeights;

/// The sequences of one pass, packed: sequence `s` is rows `starts[s]..starts[s + 1]`.
pub struct Batch<'a> {
    pub ids: &'a [u32],
    pub starts: &'a [usize],
}

impl Batch<'_> {
    /// The longest sequence's length, after checking that the starts cover the ids in
    /// non-empty sequences no longer than the position table, and every id is in the vocabulary.
    pub fn check(&self, c: &BertConfig) -> Result<usize> {
        let t = self.ids.len();
        if self.starts.first() != Some(&0) || self.starts.last() != Some(&t) || self.starts.windows(2).any(|p| p[0] >= p[1]) {
            return Err(Error::Shape {
                op: "encode",
                message: format!("sequence starts {:?} over {t} tokens", self.starts),
            });
        }
        let longest = self.starts.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(0);
        if longest > c.max_positions {
            return Err(Error::ContextFull { tokens: longest, context: c.max_positions });
        }
        if let Some(id) = self.ids.iter().find(|&&id| id as usize >= c.vocab) {
            return Err(Error::Model(format!("token id {id} is outside the vocabulary of {}", c.vocab)));
        }
        Ok(longest)
    }
}

/// Wall time per phase of CPU passes (`weft bench-embed --profile`). Thread 0 times each op
/// from its start to the barrier after it, so a phase includes the wait for its slowest thread:
/// what the phase costs the pass.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub phases: Vec<Phase>,
}

#[derive(Clone, Debug)]
pub struct Phase {
    pub name: String,
    pub seconds: f64,
    pub calls: u64,
    /// Floating-point operations of the matrix products (0 elsewhere).
    pub flops: f64,
}

impl Profile {
    pub fn add(&mut self, name: &str, seconds: f64, flops: f64) {
        match self.phases.iter_mut().find(|p| p.name == name) {
            Some(p) => {
                p.seconds += seconds;
                p.calls += 1;
                p.flops += flops;
            }
            None => self.phases.push(Phase { name: name.to_string(), seconds, calls: 1, flops }),
        }
    }
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
    profile: Option<&'a Mutex<Profile>>,
}

/// One thread's working rows for attention: one head of the longest sequence each (`k`
/// transposed, its length rounded up to 8).
struct Scratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    o: Vec<f32>,
    scores: Vec<f32>,
}

fn index(a: Act) -> usize {
    ACTS.iter().position(|&b| b == a).unwrap_or(0)
}

/// Runs `ops` over `batch`; returns the pooled rows [sequences, dim] and the checkpoints. With
/// `profile` (native builds: it reads `std::time::Instant`), adds each op's time to it.
pub fn execute(
    c: &BertConfig,
    w: &BertWeights,
    isa: Isa,
    threads: usize,
    ops: &[Op],
    batch: &Batch,
    profile: Option<&Mutex<Profile>>,
) -> Result<(Vec<f32>, Vec<Checkpoint>)> {
    let t = batch.ids.len();
    let n_seq = batch.starts.len().saturating_sub(1);
    batch.check(c)?;
    let mut bufs: Vec<Vec<f32>> = ACTS
        .iter()
        .map(|&a| vec![0f32; if a == Act::Pooled { n_seq } else { t } * a.width(c)])
        .collect();
    // As the LLM passes: at most the threads there are (a wasm page's joined pool workers).
    let threads = threads.clamp(1, threads::available());
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
        profile,
    };
    threads::run(threads, &|tid| exec.worker(tid, ops));
    let captures = exec.captures.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = exec.failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok((std::mem::take(&mut bufs[index(Act::Pooled)]), captures))
}

impl Exec<'_> {
    fn worker(&self, tid: usize, ops: &[Op]) {
        let longest = self.batch.starts.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(0);
        let padded = longest.div_ceil(8) * 8;
        let head = longest * self.c.head_dim();
        let mut scratch = Scratch {
            q: vec![0f32; head],
            k: vec![0f32; padded * self.c.head_dim()],
            v: vec![0f32; head],
            o: vec![0f32; head],
            scores: vec![0f32; encoder::ATTENTION_ROWS * padded],
        };
        let profile = self.profile.filter(|_| tid == 0);
        for op in ops {
            let start = profile.map(|_| std::time::Instant::now());
            if let Err(e) = self.op(tid, op, &mut scratch) {
                self.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
            self.barrier.wait();
            if let (Some(p), Some(start)) = (profile, start) {
                let (name, flops) = self.phase(op);
                p.lock().unwrap_or_else(|p| p.into_inner()).add(&name, start.elapsed().as_secs_f64(), flops);
            }
        }
    }

    /// The profile's name for `op`, and its floating-point operations where it is a product.
    fn phase(&self, op: &Op) -> (String, f64) {
        let name = match op {
            Op::Embed { .. } => "embeddings",
            Op::LayerNorm { .. } => "layernorm",
            Op::Linear { w, gelu, .. } => {
                let (rows, cols) = self.w.linear(*w).map_or((0, 0), |l| (l.w.rows, l.w.cols));
                let flops = 2.0 * (self.batch.ids.len() * rows * cols) as f64;
                let part = match w {
                    Weight::Layer(_, LayerWeight::Q | LayerWeight::K | LayerWeight::V) => "gemm q/k/v",
                    Weight::Layer(_, LayerWeight::O) => "gemm attention output",
                    Weight::Layer(_, LayerWeight::Up) if *gelu => "gemm up + gelu",
                    Weight::Layer(_, LayerWeight::Up) => "gemm up",
                    Weight::Layer(_, LayerWeight::Down) => "gemm down",
                    _ => "gemm",
                };
                return (part.to_string(), flops);
            }
            Op::Attention { .. } => "attention",
            Op::Pool { .. } => "pooling",
            Op::L2Normalize { .. } => "normalize",
            Op::Capture { .. } => "capture",
        };
        (name.to_string(), 0.0)
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
    fn op(&self, tid: usize, op: &Op, scratch: &mut Scratch) -> Result<()> {
        let (c, n) = (self.c, self.threads);
        let t = self.batch.ids.len();
        let d = c.dim;
        match op {
            Op::Embed { out } => {
                let o = self.buf(*out);
                for tok in share(t, tid, n) {
                    // In the vocabulary: `Batch::check`.
                    let id = self.batch.ids[tok] as usize;
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
                    let ys = unsafe { self.buf(*out).get_mut(tok * d..(tok + 1) * d) };
                    encoder::layer_norm(xs, &norm.w, &norm.b, c.eps, ys);
                }
            }
            Op::Linear { w, x, out, residual, gelu } => {
                let lin = self.w.linear(*w)?;
                let m = &lin.w;
                let rows = Rows { x: unsafe { self.buf(*x).get(0..t * m.cols) }, t, k: m.cols };
                let decode = |r: usize, row: &mut [f32]| match m.weft() {
                    Some(q) => {
                        encoder::decode_weft_row(q, r, row);
                        Ok(())
                    }
                    None => m.decode_row(r, row),
                };
                let weights = gemm::Weights { decode: &decode, weft: m.weft() };
                // SAFETY: this thread's share of the matrix rows is its own columns of `out`.
                let epilogue = Epilogue { residual: residual.map(|r| self.buf(r)), gelu: *gelu };
                unsafe { gemm::product(self.isa, &rows, share(m.rows, tid, n), weights, &lin.b, self.buf(*out), m.rows, epilogue)? };
            }
            Op::Attention { q, k, v, out } => {
                let hd = c.head_dim();
                let scale = 1.0 / (hd as f32).sqrt();
                let (qb, kb, vb, ob) = (self.buf(*q), self.buf(*k), self.buf(*v), self.buf(*out));
                let n_seq = self.batch.starts.len() - 1;
                // One (sequence, head) at a time: its rows gathered into packed copies (the keys
                // transposed, [hd, len]), so the kernel reads contiguous memory and no row sees
                // another sequence's (BERT's padding mask, without the padding).
                for item in (tid..n_seq * c.n_heads).step_by(n) {
                    let (s, h) = (item / c.n_heads, item % c.n_heads);
                    let rows = self.batch.starts[s]..self.batch.starts[s + 1];
                    let (len, lp) = (rows.len(), rows.len().div_ceil(8) * 8);
                    let col = h * hd;
                    let kt = &mut scratch.k[..hd * lp];
                    kt.fill(0.0);
                    for (i, r) in rows.clone().enumerate() {
                        let at = r * d + col..r * d + col + hd;
                        scratch.q[i * hd..(i + 1) * hd].copy_from_slice(unsafe { qb.get(at.clone()) });
                        scratch.v[i * hd..(i + 1) * hd].copy_from_slice(unsafe { vb.get(at.clone()) });
                        for (j, &kv) in unsafe { kb.get(at) }.iter().enumerate() {
                            kt[j * lp + i] = kv;
                        }
                    }
                    let (qs, kt, vs) = (&scratch.q[..len * hd], &scratch.k[..hd * lp], &scratch.v[..len * hd]);
                    encoder::attention_head(qs, kt, vs, hd, scale, &mut scratch.scores, &mut scratch.o[..len * hd]);
                    for (i, r) in rows.enumerate() {
                        unsafe { ob.get_mut(r * d + col..r * d + col + hd) }.copy_from_slice(&scratch.o[i * hd..(i + 1) * hd]);
                    }
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
