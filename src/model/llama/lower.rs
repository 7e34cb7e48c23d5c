//! Lowering the forward graph (`forward.rs`) to the GPU's prepared dispatches. Op by op it is
//! one dispatch each; the fusions are rules that match adjacent ops and emit one kernel for
//! several:
//!
//! - Q/K/V stacked at load: the three projections and the RoPE + KV store become one matrix
//!   product into `qkv` and the store reading from it; gate/up stacked: the two projections and
//!   the SwiGLU become one product into `gate_up` and the pairwise SwiGLU.
//! - With `fuse`, in one-token passes with split attention and an f32 or f16 cache, the RoPE + KV
//!   store of a stacked Q/K/V product and the attention after it are one kernel that rotates
//!   and stores as it attends and merges its chunks in the last workgroup (`attention_rope_split`).
//!   Q/K/V kept apart take it too in the decode step with `fuse_norms`: their GEMVs write the
//!   columns of `qkv` the stacked product would, the biases added as one.
//! - Attention of prompt passes (more than one token) by tiles of queries against tiles of the
//!   cache (`prefill_attention`) with `flash_attention`, on adapters where that pays
//!   (`tiled_prefill_pays`: software ones) and the head size and the device's workgroup memory
//!   allow; decode steps keep the per-query and split kernels.
//! - With `fuse`, a residual add followed by an RMSNorm of the sum (captures between them
//!   allowed) is one `add_rms_norm`; in a one-token pass the last row is the stream itself.
//! - In one-token passes (the decode step) with `fuse_norms`, an RMSNorm followed by the projection that reads it
//!   is one GEMV normalising its input (products kept apart, e.g. Q/K/V of different formats,
//!   each normalise it), and a projection followed by the residual add of its
//!   output is one GEMV adding into the stream (8 dispatches a block instead of 10); with
//!   `fuse_glu` the SwiGLU is folded into a GEMV (7 a block) on adapters that run the GPU GEMV
//!   kernel: with `glu_epilogue` the stacked gate/up GEMV's (a lane group holds a gate row and
//!   its up row), else the down GEMV takes it while it stages the gate/up product; with
//!   `int8_activations` those GEMVs quantize their input to 8 bits for integer dot products.

use crate::error::{Error, Result};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};
use crate::ops::attention::{
    attention_masked, attention_rope_split, attention_split_masked, decode_chunk, rope_fuses, AttentionMask, AttentionShape, SPLIT_CHUNK,
};
use crate::ops::elementwise::{
    add_inplace, bias_add, copy, copy_row, gelu_mul, glu_pairs, scale_inplace, silu_mul, softcap_inplace,
};
use crate::ops::norm::{add_rms_norm, rms_norm};
use crate::ops::prefill_attention::{prefill_attention, prefill_attention_fits, tiled_prefill_pays};
use crate::ops::qmatmul::records::{records_shape, RecordOrder};
use crate::ops::qmatmul::{embed, gemv_fused, records_pay, gemv_fuses, gemv_glu, gemv_int8, gemv_swiglu, matmul, GemvFusion, Precision, QWeight};
use crate::ops::rope::{rope_store, rope_store_qkv, RopeShape};
use crate::ops::sample::sample;

use super::super::config::LlamaConfig;
use super::super::graph::{Act, Activation, Ids, LayerWeight as L, NormKind, Op, Pass, Weight};
use super::forward::forward;
use super::options::EngineOptions;
use super::{GateUp, Llama, Qkv};

/// Named snapshots taken during a debug pass: embedding, per block attention output, MLP
/// output and residual, the final norm and the logits.
#[derive(Default)]
pub struct Checkpoints {
    pub names: Vec<String>,
    pub tensors: Vec<GpuTensor>,
}

/// RoPE + KV store over `t` tokens of this model and engine.
pub(super) fn rope_shape(c: &LlamaConfig, o: &EngineOptions, t: usize) -> RopeShape {
    RopeShape {
        n_tokens: t,
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        max_seq: o.max_seq,
        rot_dims: c.rope_dims,
        style: c.rope_style,
        kv: o.kv,
        sinks: o.sinks,
    }
}

/// Attention over the cache for `t` tokens of this model and engine.
pub(super) fn attention_shape(c: &LlamaConfig, o: &EngineOptions, t: usize) -> AttentionShape {
    AttentionShape {
        n_tokens: t,
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        max_seq: o.max_seq,
        kv: o.kv,
    }
}

/// In a one-token pass the last row is the stream: `LastRow` goes and its readers read `X`.
fn alias_last_row(ops: &mut Vec<Op>) {
    ops.retain(|op| !matches!(op, Op::LastRow { x: Act::X, out: Act::Last }));
    let swap = |a: &mut Act| {
        if *a == Act::Last {
            *a = Act::X;
        }
    };
    for op in ops.iter_mut() {
        if let Op::Norm { x, .. } | Op::Linear { x, .. } | Op::Capture { x, .. } = op {
            swap(x);
        }
    }
}

/// A group of adjacent ops one stacked matrix computes.
enum Projection<'a> {
    /// Q, K and V projections and the RoPE + KV store (4 ops).
    Qkv { layer: usize, x: Act, w: &'a QWeight, bias: Option<&'a GpuTensor>, q: Act },
    /// The same ops where Q, K and V are kept apart, in a decode step whose GEMVs take
    /// [`GemvFusion::at`]: three products into the columns of `qkv` the stacked product would
    /// write, the three biases as one, then what follows a stacked product.
    QkvApart { layer: usize, x: Act, w: [&'a QWeight; 3], bias: Option<&'a GpuTensor>, q: Act },
    /// Gate and up projections and the gated activation (3 ops).
    GateUp { x: Act, w: &'a QWeight, gelu: bool, out: Act },
    /// One projection (1 op).
    One { x: Act, w: &'a QWeight, bias: Option<&'a GpuTensor>, out: Act },
}

impl Projection<'_> {
    fn ops(&self) -> usize {
        match self {
            Projection::Qkv { .. } | Projection::QkvApart { .. } => 4,
            Projection::GateUp { .. } => 3,
            Projection::One { .. } => 1,
        }
    }

    fn input(&self) -> Act {
        match self {
            Projection::Qkv { x, .. } | Projection::QkvApart { x, .. } | Projection::GateUp { x, .. } | Projection::One { x, .. } => *x,
        }
    }
}

/// One pass being lowered.
struct Lower<'a> {
    m: &'a Llama,
    ctx: &'a GpuContext,
    t: usize,
    /// Residual adds into the norms after them; the last row aliased in one-token passes.
    fuse: bool,
    /// Norms and residual adds into the GEMVs (the decode step).
    norm_gemv: bool,
    /// The decode attention's chunk where the options leave it open (`Llama::lower_decode`).
    chunk: Option<usize>,
}

impl Llama {
    /// Whether the decode step folds norms and residual adds into its GEMVs: every projection
    /// with a GEMV that fuses (stacked or not), f32 arithmetic, and the options asking for it.
    fn norm_gemv_applies(&self) -> bool {
        let o = &self.options;
        if !o.fuse || o.fuse_norms != Some(true) || o.precision != Precision::F32 {
            return false;
        }
        let w = &self.weights;
        // Projections kept apart (Q/K/V or gate/up of different formats, as in Q4_K_M files
        // where V is Q6_K in some layers) are products of their own, each normalising the
        // input again; per-head Q/K norms between them leave the normed input to be read later,
        // which a folded norm never writes.
        let layers = w.layers.iter().all(|l| {
            let qkv = match &l.qkv {
                Qkv::Stacked { w, .. } => vec![w],
                Qkv::Apart { wq, wk, wv, .. } if l.q_norm.is_none() && l.k_norm.is_none() => vec![wq, wk, wv],
                Qkv::Apart { .. } => return false,
            };
            let gate_up = match &l.gate_up {
                GateUp::Stacked(w) => vec![w],
                GateUp::Apart { gate, up } => vec![gate, up],
            };
            qkv.into_iter().chain(gate_up).chain([&l.wo, &l.down]).all(gemv_fuses)
        });
        layers && gemv_fuses(w.output.as_ref().unwrap_or(&w.embedding))
    }

    /// The dispatches of one pass of the forward graph.
    pub(super) async fn lower(&self, ctx: &GpuContext, pass: Pass, capture: Option<&mut Checkpoints>) -> Result<Vec<Dispatch>> {
        self.lower_with(ctx, pass, capture, None).await
    }

    pub(super) async fn lower_with(&self, ctx: &GpuContext, pass: Pass, mut capture: Option<&mut Checkpoints>, chunk: Option<usize>) -> Result<Vec<Dispatch>> {
        if self.options.precision == Precision::F16 && !ctx.capabilities().shader_f16 {
            return Err(Error::Model("f16 precision needs shader-f16, which this adapter lacks".into()));
        }
        let mut graph = forward(&self.config, pass);
        let fuse = self.options.fuse;
        if fuse && pass.n_tokens == 1 {
            alias_last_row(&mut graph.ops);
        }
        let l = Lower {
            m: self,
            ctx,
            t: pass.n_tokens,
            fuse,
            norm_gemv: pass.n_tokens == 1 && !pass.capture && self.norm_gemv_applies(),
            chunk,
        };
        let mut d = Vec::with_capacity(graph.ops.len());
        let mut i = 0;
        while i < graph.ops.len() {
            i += l.rule(&graph.ops[i..], &mut d, capture.as_deref_mut()).await?;
        }
        Ok(d)
    }
}

fn unsupported(op: &Op) -> Error {
    Error::Model(format!("the GPU backend has no kernel for {op:?}"))
}

impl<'a> Lower<'a> {
    fn c(&self) -> &'a LlamaConfig {
        &self.m.config
    }

    /// `act` viewed at `rows` rows.
    fn view(&self, act: Act, rows: usize) -> Result<GpuTensor> {
        self.m.buffers.view(self.c(), act, rows)
    }

    /// The RoPE table layer `layer` rotates with.
    fn rope_table(&self, layer: usize) -> &'a GpuTensor {
        match &self.m.rope_local {
            Some((table, _)) if self.c().local_rope(layer) => table,
            _ => &self.m.rope,
        }
    }

    /// Whether this pass's attention is split over the context (decode steps, where it pays).
    fn split(&self) -> bool {
        self.t == 1 && self.m.options.split_attention == Some(true)
    }

    /// `act` at this pass's size.
    fn at(&self, act: Act) -> Result<GpuTensor> {
        self.view(act, act.rows(self.t))
    }

    /// `act` as [t, heads, head_dim].
    fn heads(&self, act: Act, n: usize) -> Result<GpuTensor> {
        self.m.buffers.of(act).view(&[self.t, n, self.c().head_dim])
    }

    fn matrix(&self, w: Weight) -> Result<&'a QWeight> {
        let ws = &self.m.weights;
        let found = match w {
            Weight::Embedding => Some(&ws.embedding),
            Weight::Head => Some(ws.output.as_ref().unwrap_or(&ws.embedding)),
            Weight::Layer(i, part) => ws.layers.get(i).and_then(|l| match (part, &l.qkv, &l.gate_up) {
                (L::Q, Qkv::Apart { wq, .. }, _) => Some(wq),
                (L::K, Qkv::Apart { wk, .. }, _) => Some(wk),
                (L::V, Qkv::Apart { wv, .. }, _) => Some(wv),
                (L::O, _, _) => Some(&l.wo),
                (L::Gate, _, GateUp::Apart { gate, .. }) => Some(gate),
                (L::Up, _, GateUp::Apart { up, .. }) => Some(up),
                (L::Down, _, _) => Some(&l.down),
                _ => None,
            }),
            Weight::OutNorm => None,
        };
        found.ok_or_else(|| Error::Model(format!("no GPU matrix for {w:?} (stacked, or not a matrix)")))
    }

    fn vector(&self, w: Weight) -> Result<&'a GpuTensor> {
        let ws = &self.m.weights;
        let found = match w {
            Weight::OutNorm => Some(&ws.out_norm),
            Weight::Layer(i, part) => ws.layers.get(i).and_then(|l| match (part, &l.qkv) {
                (L::AttnNorm, _) => Some(&l.attn_norm),
                (L::FfnNorm, _) => Some(&l.ffn_norm),
                (L::QBias, Qkv::Apart { bq, .. }) => bq.as_ref(),
                (L::KBias, Qkv::Apart { bk, .. }) => bk.as_ref(),
                (L::VBias, Qkv::Apart { bv, .. }) => bv.as_ref(),
                (L::PostAttnNorm, _) => l.post_attn_norm.as_ref(),
                (L::PostFfnNorm, _) => l.post_ffn_norm.as_ref(),
                (L::QNorm, _) => l.q_norm.as_ref(),
                (L::KNorm, _) => l.k_norm.as_ref(),
                _ => None,
            }),
            _ => None,
        };
        found.ok_or_else(|| Error::Model(format!("no GPU vector for {w:?}")))
    }

    /// The projection group starting at `ops[0]`, if one matrix computes it.
    fn projection(&self, ops: &[Op]) -> Option<Projection<'a>> {
        let layers = &self.m.weights.layers;
        match ops {
            [Op::Linear { w: Weight::Layer(l, L::Q), bias: bq, x, out: q }, Op::Linear { w: Weight::Layer(lk, L::K), x: xk, out: k, .. }, Op::Linear { w: Weight::Layer(lv, L::V), x: xv, out: v, .. }, Op::RopeStore { layer, q: rq, k: rk, v: rv }, ..]
                if (l, l, l) == (lk, lv, layer) && (x, x) == (xk, xv) && (q, k, v) == (rq, rk, rv) =>
            {
                match &layers.get(*l)?.qkv {
                    Qkv::Stacked { w, bias } if bias.is_some() == bq.is_some() => {
                        Some(Projection::Qkv { layer: *l, x: *x, w, bias: bias.as_ref(), q: *q })
                    }
                    // Only GEMVs write at a column offset; `norm_gemv` holds only where every
                    // product here takes the fused GEMV.
                    Qkv::Apart { wq, wk, wv, bq: b, bk, bv, bqkv } if self.norm_gemv => {
                        let biases = match (bq.is_some(), b, bk, bv, bqkv) {
                            (true, .., Some(bqkv)) => Some(bqkv),
                            (false, None, None, None, _) => None,
                            _ => return None,
                        };
                        Some(Projection::QkvApart { layer: *l, x: *x, w: [wq, wk, wv], bias: biases, q: *q })
                    }
                    _ => None,
                }
            }
            [Op::Linear { w: Weight::Layer(l, L::Gate), bias: None, x, out: g }, Op::Linear { w: Weight::Layer(lu, L::Up), bias: None, x: xu, out: u }, Op::Glu { act, gate, up, out }, ..]
                if l == lu && x == xu && (g, u) == (gate, up) =>
            {
                let gelu = *act == Activation::GeluTanh;
                match &layers.get(*l)?.gate_up {
                    GateUp::Stacked(w) => Some(Projection::GateUp { x: *x, w, gelu, out: *out }),
                    GateUp::Apart { .. } => None,
                }
            }
            _ => None,
        }
    }

    /// `fusion` as the engine's options ask: 8-bit activations where `w`'s GEMV takes them, and
    /// the weight's shape compiled into its pipeline.
    fn with_options<'f>(&self, w: &QWeight, fusion: GemvFusion<'f>) -> GemvFusion<'f> {
        let o = &self.m.options;
        GemvFusion { int8: o.int8_activations && gemv_int8(self.ctx, w), constant_shape: o.constant_shapes, ..fusion }
    }

    /// A projection's matrix product: a GEMV with `fusion` folded in, or the plain product.
    async fn product(&self, w: &QWeight, x: &GpuTensor, y: &GpuTensor, fusion: Option<GemvFusion<'_>>) -> Result<Dispatch> {
        let p = self.m.options.precision;
        let prompt = if w.cols.is_multiple_of(32) { self.m.options.prompt_precision(self.ctx.capabilities()) } else { p };
        match fusion {
            Some(f) => gemv_fused(self.ctx, w, x, y, self.with_options(w, f)).await,
            None => matmul(self.ctx, w, x, y, p, prompt).await,
        }
    }

    /// Emits a projection group reading `x` (the stream itself when a norm is folded in);
    /// returns how many ops of `rest` (the ops after the group) it lowered too.
    async fn project(
        &self,
        proj: &Projection<'_>,
        x: Act,
        fusion: Option<GemvFusion<'_>>,
        rest: &[Op],
        d: &mut Vec<Dispatch>,
    ) -> Result<usize> {
        let (c, b, ctx) = (self.c(), &self.m.buffers, self.ctx);
        let xv = self.at(x)?;
        match proj {
            Projection::Qkv { layer, w, bias, q, .. } => {
                let qkv = b.qkv.view(&[self.t, c.q_dim() + 2 * c.kv_dim()])?;
                d.push(self.product(w, &xv, &qkv, fusion).await?);
                if let Some(bias) = bias {
                    d.push(bias_add(ctx, &qkv, bias).await?);
                }
                return self.rope_store_attend(*layer, *q, rest, d).await;
            }
            Projection::QkvApart { layer, w, bias, q, .. } => {
                let qkv = b.qkv.view(&[self.t, c.q_dim() + 2 * c.kv_dim()])?;
                let f = fusion.unwrap_or_default();
                for (w, at) in w.iter().zip([0, c.q_dim(), c.q_dim() + c.kv_dim()]) {
                    d.push(self.product(w, &xv, &qkv, Some(GemvFusion { at: Some(at), ..f })).await?);
                }
                if let Some(bias) = bias {
                    d.push(bias_add(ctx, &qkv, bias).await?);
                }
                return self.rope_store_attend(*layer, *q, rest, d).await;
            }
            Projection::GateUp { w, gelu, out, .. } => {
                let gate_up = b.gate_up.view(&[self.t, 2 * c.ffn_dim])?;
                d.push(self.product(w, &xv, &gate_up, fusion).await?);
                d.push(glu_pairs(ctx, *gelu, &gate_up, &self.at(*out)?).await?);
            }
            Projection::One { w, bias, out, .. } => {
                let y = self.view(*out, xv.shape[0])?;
                d.push(self.product(w, &xv, &y, fusion).await?);
                if let Some(bias) = bias {
                    d.push(bias_add(ctx, &y, bias).await?);
                }
            }
        }
        Ok(0)
    }

    /// The RoPE + KV store of layer `layer` reading the stacked `qkv` buffer, with the attention
    /// at the head of `rest` in the same kernel where it fuses; returns the ops of `rest` lowered.
    async fn rope_store_attend(&self, layer: usize, q: Act, rest: &[Op], d: &mut Vec<Dispatch>) -> Result<usize> {
        let (c, b, ctx) = (self.c(), &self.m.buffers, self.ctx);
        let qkv3 = b.qkv.view(&[self.t, c.n_heads + 2 * c.n_kv_heads, c.head_dim])?;
        let (kc, vc) = (&self.m.k_cache[layer], &self.m.v_cache[layer]);
        let rs = rope_shape(c, &self.m.options, self.t);
        let table = self.rope_table(layer);
        if let Some(Op::Attention { layer: al, q: aq, out }) = rest.first() {
            if (*al, *aq) == (layer, q) && self.split() && self.fuse && self.m.options.fuse_attention && rope_fuses(&rs) {
                let mask = AttentionMask { window: c.window(layer), softcap: c.attn_softcap };
                let (caches, scratch) = ([kc, vc], [&b.partials, &b.arrivals]);
                let out = self.heads(*out, c.n_heads)?;
                let scale = c.attention_scale();
                let step = &self.m.step;
                let chunk = self.m.options.attention_chunk.or(self.chunk).unwrap_or(decode_chunk(c.head_dim));
                d.push(attention_rope_split(ctx, rs, mask, &qkv3, caches, table, scratch, &out, scale, step, chunk).await?);
                return Ok(1);
            }
        }
        d.push(rope_store_qkv(ctx, rs, &qkv3, &self.heads(q, c.n_heads)?, kc, vc, table, &self.m.step).await?);
        Ok(0)
    }

    /// The stacked gate/up GEMV followed by the down projection and its residual add (`rest`
    /// starts after the SwiGLU): the down GEMV takes the SwiGLU while it stages the gate/up
    /// product, so the activation is not a dispatch of its own. Returns the ops of `rest` it
    /// consumed, or `None` (nothing emitted) where the rule does not apply.
    async fn gate_up_into_down(
        &self,
        p: &Projection<'_>,
        x: Act,
        fusion: GemvFusion<'_>,
        rest: &[Op],
        d: &mut Vec<Dispatch>,
    ) -> Result<Option<usize>> {
        let Projection::GateUp { w, out: act, gelu, .. } = p else { return Ok(None) };
        let [Op::Linear { w: down, bias: None, x: dx, out: dy }, Op::Add { x: acc, y }, ..] = rest else { return Ok(None) };
        let down = self.matrix(*down)?;
        let o = &self.m.options;
        if !o.fuse_glu || *gelu || dx != act || y != dy {
            return Ok(None);
        }
        let residual = GemvFusion { residual: true, ..Default::default() };
        if o.glu_epilogue && gemv_swiglu(self.ctx, w) && gemv_fuses(down) {
            let act = self.at(*act)?;
            let down_fusion = self.with_options(down, residual);
            // The epilogue quantizes its output once for the down GEMV's integer products.
            // Where tuning timed the pair both ways, only if records took less time.
            let recorded = o.activation_records && down_fusion.int8 && self.t == 1 && self.c().ffn_dim.is_multiple_of(32)
                && records_pay(self.ctx, w, down);
            if let Some(order) = RecordOrder::of(&down.format).filter(|_| recorded) {
                let records = self.m.buffers.records.view(&records_shape(1, self.c().ffn_dim))?;
                let swiglu = GemvFusion { swiglu: true, records_out: Some((&records, order)), ..fusion };
                d.push(self.product(w, &self.at(x)?, &act, Some(swiglu)).await?);
                let down_fusion = GemvFusion { records_in: true, ..down_fusion };
                d.push(gemv_fused(self.ctx, down, &records, &self.at(*acc)?, down_fusion).await?);
                return Ok(Some(2));
            }
            d.push(self.product(w, &self.at(x)?, &act, Some(GemvFusion { swiglu: true, ..fusion })).await?);
            d.push(gemv_fused(self.ctx, down, &act, &self.at(*acc)?, down_fusion).await?);
            return Ok(Some(2));
        }
        if !gemv_glu(self.ctx, down) {
            return Ok(None);
        }
        let gate_up = self.m.buffers.gate_up.view(&[1, 2 * self.c().ffn_dim])?;
        d.push(self.product(w, &self.at(x)?, &gate_up, Some(fusion)).await?);
        let glu = GemvFusion { glu: true, ..residual };
        d.push(gemv_fused(self.ctx, down, &gate_up, &self.at(*acc)?, self.with_options(down, glu)).await?);
        Ok(Some(2))
    }

    /// Lowers the ops at the head of `ops` by the first rule that matches; returns how many
    /// ops it consumed.
    async fn rule(&self, ops: &[Op], d: &mut Vec<Dispatch>, capture: Option<&mut Checkpoints>) -> Result<usize> {
        if self.norm_gemv {
            // RMSNorm + the projection reading it: the GEMV normalises its input itself.
            if let Op::Norm { kind: NormKind::Rms, x, w, bias: None, group: None, eps, out } = &ops[0] {
                let proj = match (self.projection(&ops[1..]), ops.get(1)) {
                    (Some(p), _) => Some(p),
                    (None, Some(Op::Linear { w, bias, x, out })) => Some(Projection::One {
                        x: *x,
                        w: self.matrix(*w)?,
                        bias: bias.map(|b| self.vector(b)).transpose()?,
                        out: *out,
                    }),
                    _ => None,
                };
                if let Some(p) = proj.filter(|p| p.input() == *out) {
                    let fusion = GemvFusion { norm: Some((self.vector(*w)?, *eps)), ..Default::default() };
                    if let Some(n) = self.gate_up_into_down(&p, *x, fusion, &ops[1 + p.ops()..], d).await? {
                        return Ok(1 + p.ops() + n);
                    }
                    let more = self.project(&p, *x, Some(fusion), &ops[1 + p.ops()..], d).await?;
                    let mut used = 1 + p.ops() + more;
                    // The other products apart that read the normed input (the norm is never
                    // written): each GEMV normalises the stream itself.
                    if matches!(p, Projection::One { .. }) {
                        while let Some(Op::Linear { w, bias, x: lx, out: lo }) = ops.get(used) {
                            if lx != out {
                                break;
                            }
                            let one = Projection::One { x: *lx, w: self.matrix(*w)?, bias: bias.map(|b| self.vector(b)).transpose()?, out: *lo };
                            used += 1 + self.project(&one, *x, Some(fusion), &ops[used + 1..], d).await?;
                        }
                    }
                    return Ok(used);
                }
            }
            // A projection + the residual add of its output: the GEMV adds into the stream.
            if let [Op::Linear { w, bias: None, x, out }, Op::Add { x: acc, y }, ..] = ops {
                if y == out {
                    let fusion = GemvFusion { residual: true, ..Default::default() };
                    let m = self.matrix(*w)?;
                    d.push(gemv_fused(self.ctx, m, &self.at(*x)?, &self.at(*acc)?, self.with_options(m, fusion)).await?);
                    return Ok(2);
                }
            }
        }
        if let Some(p) = self.projection(ops) {
            let more = self.project(&p, p.input(), None, &ops[p.ops()..], d).await?;
            return Ok(p.ops() + more);
        }
        if self.fuse {
            // A residual add + the norm of the sum.
            if let Op::Add { x, y } = &ops[0] {
                let captures = ops[1..].iter().take_while(|op| matches!(op, Op::Capture { .. })).count();
                if let Some(Op::Norm { kind: NormKind::Rms, x: nx, w, bias: None, group: None, eps, out }) = ops.get(1 + captures) {
                    if nx == x {
                        d.push(add_rms_norm(self.ctx, &self.at(*x)?, &self.at(*y)?, self.vector(*w)?, &self.at(*out)?, *eps).await?);
                        let mut capture = capture;
                        for op in &ops[1..1 + captures] {
                            self.single(op, d, capture.as_deref_mut()).await?;
                        }
                        return Ok(2 + captures);
                    }
                }
            }
        }
        self.single(&ops[0], d, capture).await?;
        Ok(1)
    }

    /// One op, one kernel (split attention: two).
    async fn single(&self, op: &Op, d: &mut Vec<Dispatch>, capture: Option<&mut Checkpoints>) -> Result<()> {
        let (c, m, ctx) = (self.c(), self.m, self.ctx);
        match op {
            Op::Embed { ids, out } => {
                let ids = match ids {
                    Ids::Sampled => m.chosen.view(&[1])?,
                    Ids::Input => m.buffers.ids.view(&[self.t])?,
                };
                d.push(embed(ctx, &m.weights.embedding, &ids, &self.at(*out)?).await?);
            }
            Op::Norm { kind: NormKind::Rms, x, w, bias: None, group: None, eps, out } => {
                d.push(rms_norm(ctx, &self.at(*x)?, self.vector(*w)?, &self.at(*out)?, *eps).await?);
            }
            // Per-group norms (each query or key head): the same kernel over rows of `g`.
            Op::Norm { kind: NormKind::Rms, x, w, bias: None, group: Some(g), eps, out } if x.width(c) % g == 0 => {
                let rows = x.rows(self.t) * x.width(c) / g;
                let (xv, yv) = (m.buffers.of(*x).view(&[rows, *g])?, m.buffers.of(*out).view(&[rows, *g])?);
                d.push(rms_norm(ctx, &xv, self.vector(*w)?, &yv, *eps).await?);
            }
            Op::Linear { w, bias, x, out } => {
                let p = Projection::One { x: *x, w: self.matrix(*w)?, bias: bias.map(|b| self.vector(b)).transpose()?, out: *out };
                self.project(&p, *x, None, &[], d).await?;
            }
            Op::RopeStore { layer, q, k, v } => {
                let rs = rope_shape(c, &m.options, self.t);
                let (q3, k3, v3) = (self.heads(*q, c.n_heads)?, self.heads(*k, c.n_kv_heads)?, self.heads(*v, c.n_kv_heads)?);
                let table = self.rope_table(*layer);
                d.push(rope_store(ctx, rs, &q3, &k3, &v3, &m.k_cache[*layer], &m.v_cache[*layer], table, &m.step).await?);
            }
            Op::Attention { layer, q, out } => {
                let shape = attention_shape(c, &m.options, self.t);
                let scale = c.attention_scale();
                let mask = AttentionMask { window: c.window(*layer), softcap: c.attn_softcap };
                let (q3, a3) = (self.heads(*q, c.n_heads)?, self.heads(*out, c.n_heads)?);
                let (kc, vc) = (&m.k_cache[*layer], &m.v_cache[*layer]);
                if self.split() {
                    let b = &m.buffers.partials;
                    d.extend(attention_split_masked(ctx, shape, mask, &q3, kc, vc, b, &a3, scale, &m.step, SPLIT_CHUNK).await?);
                } else if m.options.flash_attention && tiled_prefill_pays(ctx) && prefill_attention_fits(ctx, &shape) {
                    d.push(prefill_attention(ctx, shape, mask, &q3, kc, vc, &a3, scale, &m.step).await?);
                } else {
                    d.push(attention_masked(ctx, shape, mask, &q3, kc, vc, &a3, scale, &m.step).await?);
                }
            }
            Op::Glu { act: Activation::Silu, gate, up, out } => {
                d.push(silu_mul(ctx, &self.at(*gate)?, &self.at(*up)?, &self.at(*out)?).await?);
            }
            Op::Glu { act: Activation::GeluTanh, gate, up, out } => {
                d.push(gelu_mul(ctx, &self.at(*gate)?, &self.at(*up)?, &self.at(*out)?).await?);
            }
            Op::Scale { x, by } => d.push(scale_inplace(ctx, &self.at(*x)?, *by).await?),
            Op::SoftCap { x, cap } => d.push(softcap_inplace(ctx, &self.at(*x)?, *cap).await?),
            Op::Add { x, y } => d.push(add_inplace(ctx, &self.at(*x)?, &self.at(*y)?).await?),
            Op::LastRow { x, out } => d.push(copy_row(ctx, &self.at(*x)?, self.t - 1, &self.at(*out)?).await?),
            Op::Sample { logits } => {
                let flat = m.buffers.of(*logits).view(&[logits.width(c)])?;
                d.push(sample(ctx, &flat, &m.tokens, &m.chosen, &m.sampling, &m.step).await?);
            }
            Op::Capture { name, x } => {
                if let Some(cp) = capture {
                    let src = self.at(*x)?;
                    let dst = ctx.zeros(name, &src.shape, DType::F32)?;
                    d.push(copy(ctx, &src, &dst).await?);
                    cp.names.push(name.clone());
                    cp.tensors.push(dst);
                }
            }
            Op::Norm { .. } => return Err(unsupported(op)),
        }
        Ok(())
    }
}
