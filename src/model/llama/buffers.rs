//! The GPU engine's activation buffers: one per graph tensor (`Act`) plus the stacked
//! projections' outputs, each sized for `max_batch` tokens and viewed at a pass's size.

use crate::error::Result;
use crate::gpu::{DType, GpuContext, GpuTensor};
use crate::ops::attention::{partials_shape, AttentionShape, SPLIT_CHUNK};
use crate::ops::qmatmul::records::records_shape;

use super::super::config::LlamaConfig;
use super::super::graph::Act;

pub(super) struct Buffers {
    x: GpuTensor,
    h: GpuTensor,
    q: GpuTensor,
    k: GpuTensor,
    v: GpuTensor,
    attn: GpuTensor,
    o: GpuTensor,
    gate: GpuTensor,
    up: GpuTensor,
    act: GpuTensor,
    down: GpuTensor,
    last: GpuTensor,
    last_norm: GpuTensor,
    logits: GpuTensor,
    /// Only models with per-head q/k norms use these; others hold one value each.
    q_proj: GpuTensor,
    k_proj: GpuTensor,
    /// Only models with post-norms (Gemma 2) use this.
    post: GpuTensor,
    /// [B, q_dim + 2 * kv_dim]: a stacked Q/K/V projection's output.
    pub qkv: GpuTensor,
    /// [B, 2 * ffn]: a stacked gate/up projection's output.
    pub gate_up: GpuTensor,
    /// [B] u32: a pass's input ids.
    pub ids: GpuTensor,
    /// [1, n_heads, chunks, head_dim + 2]: split decode attention's partial results.
    pub partials: GpuTensor,
    /// [n_heads] u32: workgroups of each head done with decode attention fused with RoPE (zero
    /// between dispatches).
    pub arrivals: GpuTensor,
    /// [1, ffn / 32, 12] u32: the decode step's SwiGLU output as 8-bit activation records
    /// (`ops::qmatmul::records`), written by the gate/up GEMV's epilogue for the down GEMV.
    pub records: GpuTensor,
}

fn zeros(ctx: &GpuContext, label: &str, shape: &[usize]) -> Result<GpuTensor> {
    ctx.zeros(label, shape, DType::F32)
}

impl Buffers {
    pub fn new(ctx: &GpuContext, c: &LlamaConfig, max_batch: usize, decode: &AttentionShape) -> Result<Self> {
        let b = max_batch;
        let of = |act: Act, label: &str| zeros(ctx, label, &[act.rows(b), act.width(c)]);
        Ok(Self {
            x: of(Act::X, "x")?,
            h: of(Act::H, "h")?,
            q: of(Act::Q, "q")?,
            k: of(Act::K, "k")?,
            v: of(Act::V, "v")?,
            attn: of(Act::Attn, "attn")?,
            o: of(Act::O, "o")?,
            gate: of(Act::Gate, "gate")?,
            up: of(Act::Up, "up")?,
            act: of(Act::Act, "act")?,
            down: of(Act::Down, "down")?,
            last: of(Act::Last, "last")?,
            last_norm: of(Act::LastNorm, "last norm")?,
            logits: of(Act::Logits, "logits")?,
            q_proj: if c.qk_norm { of(Act::QProj, "q proj")? } else { zeros(ctx, "q proj", &[1])? },
            k_proj: if c.qk_norm { of(Act::KProj, "k proj")? } else { zeros(ctx, "k proj", &[1])? },
            post: if c.arch.is_gemma() { of(Act::Post, "post")? } else { zeros(ctx, "post", &[1])? },
            qkv: zeros(ctx, "qkv", &[b, c.q_dim() + 2 * c.kv_dim()])?,
            gate_up: zeros(ctx, "gate_up", &[b, 2 * c.ffn_dim])?,
            ids: ctx.zeros("ids", &[b], DType::U32)?,
            partials: zeros(ctx, "attention partials", &partials_shape(decode, SPLIT_CHUNK))?,
            arrivals: ctx.zeros("attention arrivals", &[decode.n_heads], DType::U32)?,
            records: ctx.zeros("activation records", &records_shape(1, c.ffn_dim), DType::U32)?,
        })
    }

    /// The whole buffer of a graph tensor.
    pub fn of(&self, act: Act) -> &GpuTensor {
        match act {
            Act::X => &self.x,
            Act::H => &self.h,
            Act::Q => &self.q,
            Act::K => &self.k,
            Act::V => &self.v,
            Act::Attn => &self.attn,
            Act::O => &self.o,
            Act::Gate => &self.gate,
            Act::Up => &self.up,
            Act::Act => &self.act,
            Act::Down => &self.down,
            Act::Last => &self.last,
            Act::LastNorm => &self.last_norm,
            Act::Logits => &self.logits,
            Act::QProj => &self.q_proj,
            Act::KProj => &self.k_proj,
            Act::Post => &self.post,
        }
    }

    /// `act` viewed as [rows, width].
    pub fn view(&self, c: &LlamaConfig, act: Act, rows: usize) -> Result<GpuTensor> {
        self.of(act).view(&[rows, act.width(c)])
    }

    /// Bytes of the activations a model reports as its own (the stream, projections, logits).
    pub fn bytes(&self) -> u64 {
        [
            &self.x, &self.h, &self.q, &self.k, &self.v, &self.attn, &self.o, &self.qkv, &self.gate_up, &self.gate,
            &self.up, &self.act, &self.down, &self.logits, &self.q_proj, &self.k_proj, &self.post, &self.records,
        ]
        .iter()
        .map(|t| t.bytes())
        .sum()
    }
}
