//! Executing one pass of the forward graph on the CPU: every thread walks the op list, does its
//! share of each op (rows of a product, heads of attention, each row's share of element-wise
//! ops) and meets the others at a barrier where `sync.rs` says an op needs one.

use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::model::graph::{Act, Activation, Checkpoint, Ids, NormKind, Op, Pass};
use crate::model::llama::forward::forward;
use crate::model::LlamaConfig;
use crate::ops::kv::KvFormat;
use crate::ops::rope::{ring_slot, RopeStyle};
use crate::ops::sample::{sample_cpu, SampleParams};

use super::attention::Attend;
use super::engine::{act_index, Arithmetic, CpuLlama, CpuWeights};
use super::kernels::{BlockQ8, Isa, BLOCK};
use super::matrix::Input;
use super::sync::barriers;
use super::threads::{share, Shared, SpinBarrier};

/// What a pass hands back: the sampled token (passes that sample) and the checkpoints taken.
#[derive(Default)]
pub(super) struct PassOut {
    pub sampled: Option<u32>,
    pub captures: Vec<Checkpoint>,
}

struct Exec<'a> {
    c: &'a LlamaConfig,
    w: &'a CpuWeights,
    isa: Isa,
    q8: bool,
    threads: usize,
    max_seq: usize,
    sinks: usize,
    kv: KvFormat,
    t: usize,
    pos: usize,
    ids: &'a [u32],
    sampled_in: u32,
    history: &'a [u32],
    sampling: &'a SampleParams,
    acts: Vec<Shared<'a, f32>>,
    k: Vec<Shared<'a, u32>>,
    v: Vec<Shared<'a, u32>>,
    rope: &'a [f32],
    rope_local: &'a [f32],
    barrier: SpinBarrier,
    out: Mutex<PassOut>,
    failed: Mutex<Option<Error>>,
}

/// The tensor an op writes.
fn written(op: &Op) -> Option<Act> {
    match op {
        Op::Embed { out, .. } | Op::Norm { out, .. } | Op::Linear { out, .. } => Some(*out),
        Op::Attention { out, .. } | Op::Glu { out, .. } | Op::LastRow { out, .. } => Some(*out),
        Op::RopeStore { q, .. } => Some(*q),
        Op::Add { x, .. } | Op::Scale { x, .. } | Op::SoftCap { x, .. } => Some(*x),
        Op::Sample { .. } | Op::Capture { .. } => None,
    }
}

/// Thread `tid`'s part of element-wise work over `rows` rows of `width`: its `share` of each
/// row, the same elements a matrix product gives it when writing those rows (`sync.rs`).
fn row_shares(rows: usize, width: usize, tid: usize, n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let part = share(width, tid, n);
    (0..rows).map(move |r| r * width + part.start..r * width + part.end)
}

/// Rotates the first `table.len()` dimensions of one head vector by a table row's cos/sin.
fn rotate(x: &mut [f32], table: &[f32], style: RopeStyle) {
    let half = table.len() / 2;
    for i in 0..half {
        let (a, b) = match style {
            RopeStyle::Norm => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        };
        let (cos, sin) = (table[2 * i], table[2 * i + 1]);
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0 * cos - x1 * sin;
        x[b] = x0 * sin + x1 * cos;
    }
}

impl CpuLlama {
    /// Runs one pass over `ids` (or the last sampled token) at the current position. The caller
    /// has fed `history` and the RoPE table for it.
    pub(super) fn execute(&mut self, pass: Pass, ids: &[u32]) -> Result<PassOut> {
        let graph = forward(&self.config, pass);
        let threads = self.options.threads.max(1);
        // In the browser the pool may still be starting: the threads that have joined.
        #[cfg(target_arch = "wasm32")]
        let threads = threads.min(super::threads::available());
        let state = &mut self.state;
        let exec = Exec {
            c: &self.config,
            w: &self.weights,
            isa: self.isa,
            q8: self.options.arithmetic == Arithmetic::Q8,
            threads,
            max_seq: self.options.max_seq,
            sinks: self.options.sinks,
            kv: self.options.kv,
            t: pass.n_tokens,
            pos: self.pos,
            ids,
            sampled_in: self.sampled,
            history: &self.history,
            sampling: &self.sampling,
            acts: state.acts.iter_mut().map(|v| Shared::new(v)).collect(),
            k: state.k_cache.iter_mut().map(|v| Shared::new(v)).collect(),
            v: state.v_cache.iter_mut().map(|v| Shared::new(v)).collect(),
            rope: &state.rope,
            rope_local: &state.rope_local,
            barrier: SpinBarrier::new(threads),
            out: Mutex::new(PassOut::default()),
            failed: Mutex::new(None),
        };
        let meet = barriers(&graph.ops);
        super::threads::run(exec.threads, &|tid| exec.worker(tid, &graph.ops, &meet));
        if let Some(e) = exec.failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        Ok(exec.out.into_inner().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A thread's own buffers: attention scores over the cache, and a rotated K row before it is
/// stored in the cache's format.
struct Scratch {
    scores: Vec<f32>,
    row: Vec<f32>,
}

impl Exec<'_> {
    fn worker(&self, tid: usize, ops: &[Op], meet: &[bool]) {
        let mut scratch = Scratch { scores: vec![0f32; self.max_seq], row: vec![0f32; self.c.head_dim] };
        // This thread's 8-bit copy of a product's input, and which tensor it holds.
        let mut xq = Vec::new();
        let mut quantized = None;
        for (op, &meet) in ops.iter().zip(meet) {
            if meet {
                self.barrier.wait();
            }
            if let Err(e) = self.op(tid, op, (&mut quantized, &mut xq), &mut scratch) {
                self.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
            if written(op).is_some() && written(op) == quantized {
                quantized = None;
            }
        }
    }

    fn buf(&self, a: Act) -> &Shared<'_, f32> {
        &self.acts[act_index(a)]
    }

    /// SAFETY (for every `get`/`get_mut`/`set` below): between two barriers a tensor is either
    /// only read, or written in parts that no two threads share (thread 0 alone, or `share`
    /// ranges), and no thread reads what another writes (`sync.rs` places the barriers from
    /// how each op below divides its work; the two must agree).
    fn op(&self, tid: usize, op: &Op, q8: (&mut Option<Act>, &mut Vec<BlockQ8>), scratch: &mut Scratch) -> Result<()> {
        let (quantized, xq) = q8;
        let (c, t, n) = (self.c, self.t, self.threads);
        let first = tid == 0;
        match op {
            Op::Embed { ids, out } if first => {
                let width = out.width(c);
                for tok in 0..t {
                    let id = match ids {
                        Ids::Input => self.ids[tok],
                        Ids::Sampled => self.sampled_in,
                    } as usize;
                    if id >= self.w.embedding.rows {
                        return Err(Error::Model(format!("token id {id} is outside the vocabulary of {}", c.vocab)));
                    }
                    let row = unsafe { self.buf(*out).get_mut(tok * width..(tok + 1) * width) };
                    self.w.embedding.decode_row(id, row)?;
                }
            }
            Op::Norm { kind, x, w, bias, group, eps, out } if first => {
                let width = x.width(c);
                let g = group.unwrap_or(width);
                let (w, bias) = (self.w.vector(*w)?, bias.map(|b| self.w.vector(b)).transpose()?);
                let rows = x.rows(t) * width / g;
                let src = unsafe { self.buf(*x).get(0..rows * g) }.to_vec();
                let dst = unsafe { self.buf(*out).get_mut(0..rows * g) };
                for (xs, ys) in src.chunks_exact(g).zip(dst.chunks_exact_mut(g)) {
                    let mean = match kind {
                        NormKind::Rms => 0.0,
                        NormKind::Layer => xs.iter().sum::<f32>() / g as f32,
                    };
                    let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / g as f32;
                    let scale = 1.0 / (var + eps).sqrt();
                    for (i, (y, v)) in ys.iter_mut().zip(xs).enumerate() {
                        *y = (v - mean) * scale * w[i % w.len()] + bias.map_or(0.0, |b| b[i % b.len()]);
                    }
                }
            }
            Op::Linear { w, bias, x, out } => {
                let m = self.w.matrix(*w)?;
                let rows_in = x.rows(t);
                // The attention output stays f32: quantizing it to 8 bits per block costs the most
                // accuracy (Apache-2.0 perplexity +0.53 % with it, +0.16 % without; README).
                let use_q8 = self.q8 && m.block_format().is_some() && *x != Act::Attn;
                let blocks = rows_in * m.cols / BLOCK;
                // Every thread quantizes the whole input for itself: a few microseconds, where
                // one thread doing it for all would need the others to wait for it.
                if use_q8 && *quantized != Some(*x) {
                    if xq.len() < blocks {
                        xq.resize(blocks, BlockQ8::default());
                    }
                    let src = unsafe { self.buf(*x).get(0..rows_in * m.cols) };
                    self.isa.quantize(src, &mut xq[..blocks]);
                    *quantized = Some(*x);
                }
                let input = Input {
                    x: unsafe { self.buf(*x).get(0..rows_in * m.cols) },
                    xq: if use_q8 { Some(&xq[..blocks]) } else { None },
                    t: rows_in,
                };
                let bias = bias.map(|b| self.w.vector(b)).transpose()?;
                let y = self.buf(*out);
                m.product(self.isa, &input, share(m.rows, tid, n), &mut |tok, r, v| {
                    let v = v + bias.map_or(0.0, |b| b[r]);
                    unsafe { y.set(tok * m.rows + r, v) }
                })?;
            }
            Op::RopeStore { layer, q, k, v } => {
                let hd = c.head_dim;
                let row = c.rope_dims / 2 * 2;
                let words = self.kv.row_words(hd);
                let (qb, kb, vb) = (self.buf(*q), self.buf(*k), self.buf(*v));
                let (kc, vc) = (&self.k[*layer], &self.v[*layer]);
                // One item per query head and per KV head of every token, so that a decode step's
                // single token is shared out too.
                let heads = c.n_heads + c.n_kv_heads;
                for item in (tid..t * heads).step_by(n) {
                    let (tok, h) = (item / heads, item % heads);
                    let slot = ring_slot(self.pos + tok, self.max_seq, self.sinks);
                    let rope = if c.local_rope(*layer) { self.rope_local } else { self.rope };
                    let table = &rope[slot * row..(slot + 1) * row];
                    if h < c.n_heads {
                        let at = tok * c.q_dim() + h * hd;
                        rotate(unsafe { qb.get_mut(at..at + hd) }, table, c.rope_style);
                        continue;
                    }
                    let g = h - c.n_heads;
                    let at = (g * self.max_seq + slot) * words;
                    let src = tok * c.kv_dim() + g * hd;
                    // K is rotated before it is rounded to the cache's format, as on the GPU.
                    let kd = &mut scratch.row;
                    kd.copy_from_slice(unsafe { kb.get(src..src + hd) });
                    rotate(kd, table, c.rope_style);
                    self.kv.encode_into(kd, unsafe { kc.get_mut(at..at + words) });
                    self.kv.encode_into(unsafe { vb.get(src..src + hd) }, unsafe { vc.get_mut(at..at + words) });
                }
            }
            Op::Attention { layer, q, out } => {
                let hd = c.head_dim;
                let words = self.kv.row_words(hd);
                let group = c.n_heads / c.n_kv_heads.max(1);
                let attend =
                    Attend { isa: self.isa, kv: self.kv, head_dim: hd, scale: c.attention_scale(), softcap: c.attn_softcap };
                let window = c.window(*layer);
                let (kc, vc) = (&self.k[*layer], &self.v[*layer]);
                for item in (tid..t * c.n_heads).step_by(n) {
                    let (tok, h) = (item / c.n_heads, item % c.n_heads);
                    // Below max_seq slot = position, so the causal prefix is slots 0..=p; past it
                    // (one token per pass) every slot holds a position of the window.
                    let ctx = (self.pos + tok + 1).min(self.max_seq);
                    // A window reads positions from slots: slot j holds P - (P - j) % max_seq
                    // (windowed models keep no sinks).
                    let p = self.pos + tok;
                    let seen = |j: usize| window.is_none_or(|w| (p - j) % self.max_seq < w);
                    let base = (h / group) * self.max_seq * words;
                    let qh = unsafe { self.buf(*q).get(tok * c.q_dim() + h * hd..tok * c.q_dim() + (h + 1) * hd) };
                    let (keys, values) = unsafe { (kc.get(base..base + ctx * words), vc.get(base..base + ctx * words)) };
                    let o = unsafe { self.buf(*out).get_mut(tok * c.q_dim() + h * hd..tok * c.q_dim() + (h + 1) * hd) };
                    attend.head(qh, keys, values, seen, &mut scratch.scores, o);
                }
            }
            Op::Glu { act, gate, up, out } => {
                for range in row_shares(out.rows(t), out.width(c), tid, n) {
                    let (g, u) = unsafe { (self.buf(*gate).get(range.clone()), self.buf(*up).get(range.clone())) };
                    let o = unsafe { self.buf(*out).get_mut(range) };
                    for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
                        *o = match act {
                            Activation::Silu => g / (1.0 + (-g).exp()) * u,
                            Activation::GeluTanh => {
                                0.5 * g * (1.0 + (0.797_884_6 * (g + 0.044_715 * g * g * g)).tanh()) * u
                            }
                        };
                    }
                }
            }
            Op::Add { x, y } => {
                for range in row_shares(x.rows(t), x.width(c), tid, n) {
                    let ys = unsafe { self.buf(*y).get(range.clone()) };
                    for (a, b) in unsafe { self.buf(*x).get_mut(range) }.iter_mut().zip(ys) {
                        *a += b;
                    }
                }
            }
            Op::Scale { x, by } => {
                for range in row_shares(x.rows(t), x.width(c), tid, n) {
                    unsafe { self.buf(*x).get_mut(range) }.iter_mut().for_each(|v| *v *= by);
                }
            }
            Op::SoftCap { x, cap } => {
                for range in row_shares(x.rows(t), x.width(c), tid, n) {
                    unsafe { self.buf(*x).get_mut(range) }.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
                }
            }
            Op::LastRow { x, out } if first => {
                let width = x.width(c);
                let src = unsafe { self.buf(*x).get((t - 1) * width..t * width) };
                unsafe { self.buf(*out).get_mut(0..width) }.copy_from_slice(src);
            }
            Op::Sample { logits } if first => {
                let row = unsafe { self.buf(*logits).get(0..c.vocab) };
                let id = sample_cpu(row, self.history, self.history.len(), self.sampling);
                self.out.lock().unwrap_or_else(|p| p.into_inner()).sampled = Some(id);
            }
            Op::Capture { name, x } if first => {
                let (rows, width) = (x.rows(t), x.width(c));
                let values = unsafe { self.buf(*x).get(0..rows * width) }.to_vec();
                self.out.lock().unwrap_or_else(|p| p.into_inner()).captures.push((name.clone(), vec![rows, width], values));
            }
            _ => {}
        }
        Ok(())
    }
}
