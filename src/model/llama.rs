//! The Llama-family forward pass (Llama, SmolLM, TinyLlama, Qwen2): GQA attention with RoPE,
//! RMSNorm, SwiGLU, tied or separate output head.
//!
//! Everything a step needs — weights, KV cache, activation buffers, uniform blocks and the
//! decode step's dispatches — is made at load. A decode step writes one 16-byte uniform,
//! records the prepared dispatches into one compute pass, copies the sampled token id out in
//! the same command buffer and submits once.
//!
//! Context: the KV cache holds `max_seq` positions. Once a sequence reaches `max_seq`,
//! generation goes on with attention over a sliding window of `max_seq` positions: the first
//! `sinks` positions (attention sinks, which small models lean on: without them the text
//! degenerates as soon as they leave the window) and the most recent `max_seq - sinks`, whose
//! slots are a ring ([`ring_slot`]). K is rotated at its absolute position before it is
//! stored, so slots never need re-rotation; the RoPE table has the same slots, and the row of a
//! position past `max_seq` is computed on the CPU (f64) and written into its slot before the
//! pass that uses it. Past `max_seq` every pass takes one token, so that no query of a batch
//! attends to a slot a later token of the same batch has overwritten.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor, ReadSlot, StepCommands, Uniform};
use crate::ops::attention::{attention, attention_split, partials_shape, split_pays, AttentionShape, SPLIT_CHUNK};
use crate::ops::elementwise::{add_inplace, bias_add, copy, copy_row, silu_mul, silu_mul_pairs};
use crate::ops::kv::KvFormat;
use crate::ops::norm::{add_rms_norm, rms_norm};
use crate::ops::qmatmul::{embed, matmul, tune_gemv, GemvTuning, Precision, QWeight};
use crate::ops::rope::{ring_slot, rope_row, rope_store, rope_store_qkv, rope_table, step_bytes, RopeShape};
use crate::ops::sample::{params_bytes, sample, SampleParams};

use super::config::LlamaConfig;

mod decode;
mod profile;
mod weights;

pub use profile::StepProfile;
pub use weights::{GateUp, LayerWeights, Qkv, Weights};

/// Options fixed at load.
#[derive(Clone, Copy, Debug)]
pub struct EngineOptions {
    /// Positions the KV cache holds: the context cap, and past it the sliding attention window.
    pub max_seq: usize,
    /// Past `max_seq`, how many of the first positions stay in the window (attention sinks);
    /// 0 gives a plain window of the last `max_seq` positions. Capped at `max_seq / 2`.
    pub sinks: usize,
    /// Most tokens one prefill pass processes; longer prompts run in several passes.
    pub max_batch: usize,
    /// Arithmetic of the matrix kernels. F32 by default: the f16 variant rounds weights and
    /// activations to 11 bits, enough to flip near-tied greedy choices against a reference.
    pub precision: Precision,
    /// Storage of the KV cache. Every format works on every adapter: F16 stores
    /// `pack2x16float` pairs in u32 words, so it needs no `shader-f16`.
    pub kv: KvFormat,
    /// Decode attention split across workgroups by context chunks (flash-decoding). `None`
    /// decides by adapter: split on GPUs, not on CPU-emulated adapters.
    pub split_attention: Option<bool>,
    /// Fewer dispatches per token: Q/K/V and gate/up stacked into one matrix each at load,
    /// and each residual add fused into the norm that follows it. Results are the same
    /// either way; off only to measure what the fusion buys.
    pub fuse: bool,
    /// With `fuse`, the decode step's RMSNorms also folded into the GEMVs after them and its
    /// residual adds into the GEMVs before them (8 dispatches a block instead of 10). `None`
    /// decides by adapter: on GPUs, not on CPU-emulated adapters, where every workgroup's own
    /// sum of squares (a barrier tree) cost more than the dispatches it saves (bench/NOTES.md).
    pub fuse_norms: Option<bool>,
    /// Time the GEMV launch shapes on this device at load and use the fastest per weight shape
    /// (GPUs with timestamp queries; elsewhere the measured defaults stay).
    pub tune: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_seq: 2048,
            max_batch: 64,
            precision: Precision::F32,
            kv: KvFormat::F32,
            sinks: 4,
            split_attention: None,
            fuse: true,
            fuse_norms: None,
            tune: true,
        }
    }
}

/// KV-cache bytes per token of context for `config` stored as `kv` (K and V, every layer).
pub fn kv_bytes_per_token(config: &LlamaConfig, kv: KvFormat) -> u64 {
    (2 * config.n_layers * config.n_kv_heads * kv.row_bytes(config.head_dim)) as u64
}


/// Activation buffers sized for `max_batch` tokens, viewed at each batch's size.
struct Buffers {
    x: GpuTensor,        // [B, dim] the residual stream
    h: GpuTensor,        // [B, dim] normed
    q: GpuTensor,        // [B, q_dim]
    k: GpuTensor,        // [B, kv_dim]
    v: GpuTensor,        // [B, kv_dim]
    attn: GpuTensor,     // [B, q_dim]
    o: GpuTensor,        // [B, dim]
    qkv: GpuTensor,      // [B, q_dim + 2 * kv_dim] stacked projections
    gate_up: GpuTensor,  // [B, 2 * ffn] stacked projections
    gate: GpuTensor,     // [B, ffn]
    up: GpuTensor,       // [B, ffn]
    act: GpuTensor,      // [B, ffn]
    down: GpuTensor,     // [B, dim]
    last: GpuTensor,     // [1, dim]
    last_norm: GpuTensor, // [1, dim]
    logits: GpuTensor,   // [B, vocab]
    ids: GpuTensor,      // [B] u32
    partials: GpuTensor, // [1, n_heads, chunks, head_dim + 2] split decode attention
}

/// Named snapshots taken during a debug pass: embedding, per block attention output, MLP
/// output and residual, the final norm and the logits.
#[derive(Default)]
pub struct Checkpoints {
    pub names: Vec<String>,
    pub tensors: Vec<GpuTensor>,
}

/// A prepared forward pass over `n_tokens` tokens.
struct Graph {
    dispatches: Vec<Dispatch>,
}

pub struct Llama {
    pub config: LlamaConfig,
    pub weights: Weights,
    pub options: EngineOptions,
    /// GEMV launch shapes measured at load (empty where nothing was tuned).
    pub gemv_tuning: Vec<GemvTuning>,
    k_cache: Vec<GpuTensor>, // per layer [kv_heads, max_seq, kv.row_words(head_dim)] by ring_slot
    v_cache: Vec<GpuTensor>, // per layer [kv_heads, max_seq, kv.row_words(head_dim)] by ring_slot
    rope: GpuTensor,         // [max_seq, rope_dims / 2, 2] by ring_slot
    /// The position whose cos/sin row each slot of `rope` holds.
    rope_slots: Vec<usize>, // [max_seq]
    /// One table row computed on the CPU, reused.
    rope_scratch: Vec<f32>, // [rope_dims]
    tokens: GpuTensor,      // [max_seq] u32, the sequence so far, position p at p % max_seq
    chosen: GpuTensor,       // [1] u32, the last sampled token
    step: Uniform,
    sampling: Uniform,
    slot: ReadSlot,
    buffers: Buffers,
    decode: Graph,
    /// The next decode step, recorded while the previous one ran.
    recorded: Option<StepCommands>,
    prefill: HashMap<usize, Graph>,
    /// Tokens in the KV cache.
    pos: usize,
}


/// Milliseconds from a monotonic clock (profiling only).
#[cfg(not(target_arch = "wasm32"))]
fn web_time_now() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

#[cfg(target_arch = "wasm32")]
fn web_time_now() -> f64 {
    js_sys::Date::now()
}

/// RoPE + KV store over `t` tokens of this model and engine.
fn rope_shape(c: &LlamaConfig, o: &EngineOptions, t: usize) -> RopeShape {
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
fn attention_shape(c: &LlamaConfig, o: &EngineOptions, t: usize) -> AttentionShape {
    AttentionShape {
        n_tokens: t,
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        max_seq: o.max_seq,
        kv: o.kv,
    }
}

fn zeros(ctx: &GpuContext, label: &str, shape: &[usize]) -> Result<GpuTensor> {
    ctx.zeros(label, shape, DType::F32)
}

impl Llama {
    pub async fn new(ctx: &GpuContext, config: LlamaConfig, mut weights: Weights, options: EngineOptions) -> Result<Self> {
        let c = &config;
        if options.max_seq == 0 || options.max_batch == 0 || weights.layers.len() != c.n_layers {
            return Err(Error::Model(format!(
                "{} layers of weights for {} in the config; max_seq {} max_batch {}",
                weights.layers.len(),
                c.n_layers,
                options.max_seq,
                options.max_batch
            )));
        }
        if options.fuse {
            // One layer at a time, so the separate buffers of a layer go before the next stacks.
            let layers = std::mem::take(&mut weights.layers);
            for (i, l) in layers.into_iter().enumerate() {
                weights.layers.push(l.stacked(ctx, i)?);
            }
        }
        let gemv_tuning = if options.tune {
            let mut mats: Vec<&QWeight> = Vec::new();
            for l in &weights.layers {
                match &l.qkv {
                    Qkv::Stacked { w, .. } => mats.push(w),
                    Qkv::Apart { wq, wk, wv, .. } => mats.extend([wq, wk, wv]),
                }
                match &l.gate_up {
                    GateUp::Stacked(w) => mats.push(w),
                    GateUp::Apart { gate, up } => mats.extend([gate, up]),
                }
                mats.extend([&l.wo, &l.down]);
            }
            mats.push(weights.output.as_ref().unwrap_or(&weights.embedding));
            tune_gemv(ctx, &mats, options.precision).await?
        } else {
            Vec::new()
        };
        let split = options.split_attention.unwrap_or_else(|| split_pays(ctx));
        let fuse_norms = options.fuse_norms.unwrap_or(!ctx.capabilities().is_software);
        let options = EngineOptions {
            sinks: options.sinks.min(options.max_seq / 2),
            split_attention: Some(split),
            fuse_norms: Some(fuse_norms),
            ..options
        };
        let b = options.max_batch;
        let decode_shape = attention_shape(c, &options, 1);
        if !options.kv.fits(c.head_dim) {
            return Err(Error::Model(format!("a {} KV cache cannot hold rows of head_dim {}", options.kv, c.head_dim)));
        }
        let cache_shape = [c.n_kv_heads, options.max_seq, options.kv.row_words(c.head_dim)];
        let mut k_cache = Vec::with_capacity(c.n_layers);
        let mut v_cache = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            k_cache.push(ctx.zeros(&format!("k cache {i}"), &cache_shape, options.kv.dtype())?);
            v_cache.push(ctx.zeros(&format!("v cache {i}"), &cache_shape, options.kv.dtype())?);
        }
        let table = rope_table(options.max_seq, c.rope_dims, c.rope_base, c.rope_scaling);
        let rope = ctx.upload_f32("rope table", &[options.max_seq, c.rope_dims / 2, 2], &table)?;
        let buffers = Buffers {
            x: zeros(ctx, "x", &[b, c.dim])?,
            h: zeros(ctx, "h", &[b, c.dim])?,
            q: zeros(ctx, "q", &[b, c.q_dim()])?,
            k: zeros(ctx, "k", &[b, c.kv_dim()])?,
            v: zeros(ctx, "v", &[b, c.kv_dim()])?,
            attn: zeros(ctx, "attn", &[b, c.q_dim()])?,
            o: zeros(ctx, "o", &[b, c.dim])?,
            qkv: zeros(ctx, "qkv", &[b, c.q_dim() + 2 * c.kv_dim()])?,
            gate_up: zeros(ctx, "gate_up", &[b, 2 * c.ffn_dim])?,
            gate: zeros(ctx, "gate", &[b, c.ffn_dim])?,
            up: zeros(ctx, "up", &[b, c.ffn_dim])?,
            act: zeros(ctx, "act", &[b, c.ffn_dim])?,
            down: zeros(ctx, "down", &[b, c.dim])?,
            last: zeros(ctx, "last", &[1, c.dim])?,
            last_norm: zeros(ctx, "last norm", &[1, c.dim])?,
            logits: zeros(ctx, "logits", &[b, c.vocab])?,
            ids: ctx.zeros("ids", &[b], DType::U32)?,
            partials: zeros(ctx, "attention partials", &partials_shape(&decode_shape, SPLIT_CHUNK))?,
        };
        let rope_scratch = vec![0.0; c.rope_dims];
        let mut model = Self {
            tokens: ctx.zeros("tokens", &[options.max_seq], DType::U32)?,
            chosen: ctx.zeros("chosen", &[1], DType::U32)?,
            step: ctx.uniform_block("step", 16),
            sampling: ctx.uniform_block("sampling", 32),
            slot: ctx.read_slot("token readback", 4),
            config,
            weights,
            options,
            gemv_tuning,
            k_cache,
            v_cache,
            rope,
            rope_slots: (0..options.max_seq).collect(),
            rope_scratch,
            buffers,
            decode: Graph { dispatches: Vec::new() },
            recorded: None,
            prefill: HashMap::new(),
            pos: 0,
        };
        model.decode = match model.build_fused_decode(ctx).await? {
            Some(graph) => graph,
            None => model.build(ctx, 1, true, false, None).await?,
        };
        model.set_sampling(ctx, &SampleParams::default());
        Ok(model)
    }

    /// Dispatches one decode step records.
    pub fn decode_dispatches(&self) -> usize {
        self.decode.dispatches.len()
    }

    /// Tokens in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Forgets the sequence (the cache is overwritten as new tokens arrive).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// GPU bytes held: weights, KV cache and activations.
    pub fn gpu_bytes(&self) -> u64 {
        let caches: u64 = self.k_cache.iter().chain(&self.v_cache).map(|t| t.bytes()).sum();
        let b = &self.buffers;
        let acts: u64 = [&b.x, &b.h, &b.q, &b.k, &b.v, &b.attn, &b.o, &b.qkv, &b.gate_up, &b.gate, &b.up, &b.act, &b.down, &b.logits]
            .iter()
            .map(|t| t.bytes())
            .sum();
        self.weights.bytes() + caches + acts + self.rope.bytes() + self.tokens.bytes()
    }

    /// KV-cache bytes per token of context.
    pub fn kv_bytes_per_token(&self) -> u64 {
        kv_bytes_per_token(&self.config, self.options.kv)
    }

    pub fn set_sampling(&self, ctx: &GpuContext, params: &SampleParams) {
        ctx.write_uniform(&self.sampling, &params_bytes(params, self.config.vocab, self.options.max_seq));
    }

    /// Builds the dispatches for a pass over `t` tokens. `decode` reads the token id the last
    /// sample wrote; otherwise ids come from the `ids` buffer. `all_logits` computes logits for
    /// every token (perplexity, debugging) instead of sampling from the last.
    async fn build(
        &self,
        ctx: &GpuContext,
        t: usize,
        decode: bool,
        all_logits: bool,
        mut capture: Option<&mut Checkpoints>,
    ) -> Result<Graph> {
        let c = &self.config;
        let b = &self.buffers;
        let x = b.x.view(&[t, c.dim])?;
        let h = b.h.view(&[t, c.dim])?;
        let q = b.q.view(&[t, c.q_dim()])?;
        let k = b.k.view(&[t, c.kv_dim()])?;
        let v = b.v.view(&[t, c.kv_dim()])?;
        let attn = b.attn.view(&[t, c.q_dim()])?;
        let o = b.o.view(&[t, c.dim])?;
        let gate = b.gate.view(&[t, c.ffn_dim])?;
        let up = b.up.view(&[t, c.ffn_dim])?;
        let act = b.act.view(&[t, c.ffn_dim])?;
        let down = b.down.view(&[t, c.dim])?;
        let heads = |x: &GpuTensor, n: usize| x.view(&[t, n, c.head_dim]);
        let rs = rope_shape(c, &self.options, t);
        let shape = attention_shape(c, &self.options, t);
        let scale = 1.0 / (c.head_dim as f32).sqrt();
        let w = &self.weights;
        let p = self.options.precision;
        if p == Precision::F16 && !ctx.capabilities().shader_f16 {
            return Err(Error::Model("f16 precision needs shader-f16, which this adapter lacks".into()));
        }

        let mut d = Vec::with_capacity(16 * c.n_layers + 8);
        let ids = if decode { self.chosen.view(&[1])? } else { b.ids.view(&[t])? };
        d.push(embed(ctx, &w.embedding, &ids, &x).await?);
        self.capture_into(ctx, &mut d, capture.as_deref_mut(), "embedding".into(), &x).await?;
        let fuse = self.options.fuse;
        let qkv = b.qkv.view(&[t, c.q_dim() + 2 * c.kv_dim()])?;
        let gate_up = b.gate_up.view(&[t, 2 * c.ffn_dim])?;
        for (i, l) in w.layers.iter().enumerate() {
            if i == 0 || !fuse {
                d.push(rms_norm(ctx, &x, &l.attn_norm, &h, c.rms_eps).await?);
            }
            let (q3, a3) = (heads(&q, c.n_heads)?, heads(&attn, c.n_heads)?);
            let (kc, vc) = (&self.k_cache[i], &self.v_cache[i]);
            match &l.qkv {
                Qkv::Stacked { w, bias } => {
                    d.push(matmul(ctx, w, &h, &qkv, p, p).await?);
                    if let Some(bias) = bias {
                        d.push(bias_add(ctx, &qkv, bias).await?);
                    }
                    let qkv3 = heads(&qkv, c.n_heads + 2 * c.n_kv_heads)?;
                    d.push(rope_store_qkv(ctx, rs, &qkv3, &q3, kc, vc, &self.rope, &self.step).await?);
                }
                Qkv::Apart { wq, wk, wv, bq, bk, bv } => {
                    d.push(matmul(ctx, wq, &h, &q, p, p).await?);
                    d.push(matmul(ctx, wk, &h, &k, p, p).await?);
                    d.push(matmul(ctx, wv, &h, &v, p, p).await?);
                    for (bias, out) in [(bq, &q), (bk, &k), (bv, &v)] {
                        if let Some(bias) = bias {
                            d.push(bias_add(ctx, out, bias).await?);
                        }
                    }
                    let (k3, v3) = (heads(&k, c.n_kv_heads)?, heads(&v, c.n_kv_heads)?);
                    d.push(rope_store(ctx, rs, &q3, &k3, &v3, kc, vc, &self.rope, &self.step).await?);
                }
            }
            if t == 1 && self.options.split_attention == Some(true) {
                let b = &self.buffers.partials;
                d.extend(attention_split(ctx, shape, &q3, kc, vc, b, &a3, scale, &self.step, SPLIT_CHUNK).await?);
            } else {
                d.push(attention(ctx, shape, &q3, kc, vc, &a3, scale, &self.step).await?);
            }
            d.push(matmul(ctx, &l.wo, &attn, &o, p, p).await?);
            self.capture_into(ctx, &mut d, capture.as_deref_mut(), format!("blk.{i}.attn_out"), &o).await?;
            if fuse {
                d.push(add_rms_norm(ctx, &x, &o, &l.ffn_norm, &h, c.rms_eps).await?);
            } else {
                d.push(add_inplace(ctx, &x, &o).await?);
                d.push(rms_norm(ctx, &x, &l.ffn_norm, &h, c.rms_eps).await?);
            }
            match &l.gate_up {
                GateUp::Stacked(w) => {
                    d.push(matmul(ctx, w, &h, &gate_up, p, p).await?);
                    d.push(silu_mul_pairs(ctx, &gate_up, &act).await?);
                }
                GateUp::Apart { gate: wg, up: wu } => {
                    d.push(matmul(ctx, wg, &h, &gate, p, p).await?);
                    d.push(matmul(ctx, wu, &h, &up, p, p).await?);
                    d.push(silu_mul(ctx, &gate, &up, &act).await?);
                }
            }
            d.push(matmul(ctx, &l.down, &act, &down, p, p).await?);
            self.capture_into(ctx, &mut d, capture.as_deref_mut(), format!("blk.{i}.mlp_out"), &down).await?;
            // The norm that follows: the next block's, or for a decode step the final one.
            let next_norm = match w.layers.get(i + 1) {
                Some(next) => Some((&next.attn_norm, &h)),
                None if t == 1 && !all_logits => Some((&w.out_norm, &b.last_norm)),
                None => None,
            };
            match next_norm.filter(|_| fuse) {
                Some((norm, out)) => d.push(add_rms_norm(ctx, &x, &down, norm, out, c.rms_eps).await?),
                None => d.push(add_inplace(ctx, &x, &down).await?),
            }
            self.capture_into(ctx, &mut d, capture.as_deref_mut(), format!("blk.{i}.residual"), &x).await?;
        }
        let head = w.output.as_ref().unwrap_or(&w.embedding);
        if all_logits {
            let logits = b.logits.view(&[t, c.vocab])?;
            d.push(rms_norm(ctx, &x, &w.out_norm, &h, c.rms_eps).await?);
            self.capture_into(ctx, &mut d, capture.as_deref_mut(), "final_norm".into(), &h).await?;
            d.push(matmul(ctx, head, &h, &logits, p, p).await?);
            self.capture_into(ctx, &mut d, capture, "logits".into(), &logits).await?;
        } else {
            let logits = b.logits.view(&[1, c.vocab])?;
            if !(fuse && t == 1) {
                d.push(copy_row(ctx, &x, t - 1, &b.last).await?);
                d.push(rms_norm(ctx, &b.last, &w.out_norm, &b.last_norm, c.rms_eps).await?);
            }
            d.push(matmul(ctx, head, &b.last_norm, &logits, p, p).await?);
            let flat = b.logits.view(&[c.vocab])?;
            d.push(sample(ctx, &flat, &self.tokens, &self.chosen, &self.sampling, &self.step).await?);
        }
        Ok(Graph { dispatches: d })
    }

    /// In a debug pass, copies `src` into a fresh tensor after the dispatches so far.
    async fn capture_into(
        &self,
        ctx: &GpuContext,
        d: &mut Vec<Dispatch>,
        capture: Option<&mut Checkpoints>,
        name: String,
        src: &GpuTensor,
    ) -> Result<()> {
        if let Some(cp) = capture {
            let dst = ctx.zeros(&name, &src.shape, DType::F32)?;
            d.push(copy(ctx, src, &dst).await?);
            cp.names.push(name);
            cp.tensors.push(dst);
        }
        Ok(())
    }

    /// Tokens the next pass takes out of `remaining`: up to `max_batch` while the positions stay
    /// below `max_seq` (no slot is reused), one at a time past it.
    fn pass_len(&self, remaining: usize) -> usize {
        let room = self.options.max_seq.saturating_sub(self.pos);
        if room == 0 {
            1
        } else {
            remaining.min(self.options.max_batch).min(room)
        }
    }

    /// Makes the RoPE table's slots for positions `pos .. pos + n` hold those positions' rows.
    /// Only positions past `max_seq` (or again below it after a reset) write anything.
    fn prepare_rope(&mut self, ctx: &GpuContext, n: usize) -> Result<()> {
        let c = &self.config;
        for p in self.pos..self.pos + n {
            let slot = ring_slot(p, self.options.max_seq, self.options.sinks);
            if self.rope_slots[slot] != p {
                rope_row(p, c.rope_dims, c.rope_base, c.rope_scaling, &mut self.rope_scratch);
                let row = c.rope_dims / 2 * 2;
                ctx.write_tensor(&self.rope, slot * row, bytemuck::cast_slice(&self.rope_scratch[..row]))?;
                self.rope_slots[slot] = p;
            }
        }
        Ok(())
    }

    /// Queues a pass's ids, the step uniform and the RoPE rows it needs. `ids` never crosses
    /// the end of the rings (see [`Self::pass_len`]).
    fn write_ids(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<()> {
        ctx.write_tensor(&self.buffers.ids, 0, bytemuck::cast_slice(ids))?;
        ctx.write_tensor(&self.tokens, self.pos % self.options.max_seq, bytemuck::cast_slice(ids))?;
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, ids.len() as u32));
        self.prepare_rope(ctx, ids.len())
    }

    /// Positions fit the step uniform's u32.
    fn check_position(&self, n: usize) -> Result<()> {
        if self.pos + n > u32::MAX as usize {
            return Err(Error::Model(format!("{} positions exceed the engine's u32 positions", self.pos + n)));
        }
        Ok(())
    }

    /// Runs the prompt through the model (in passes of at most `max_batch` tokens) and
    /// returns the first sampled token.
    pub async fn prefill(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<u32> {
        if ids.is_empty() {
            return Err(Error::Model("an empty prompt".into()));
        }
        self.check_position(ids.len())?;
        let mut next = 0;
        let mut done = 0;
        while done < ids.len() {
            let t = self.pass_len(ids.len() - done);
            let chunk = &ids[done..done + t];
            if !self.prefill.contains_key(&t) {
                let graph = self.build(ctx, t, false, false, None).await?;
                self.prefill.insert(t, graph);
            }
            self.write_ids(ctx, chunk)?;
            let graph = &self.prefill[&t];
            next = ctx.run_and_read_u32(&graph.dispatches, &self.chosen, &self.slot).await?[0];
            self.pos += t;
            done += t;
        }
        Ok(next)
    }

    /// One decode step: feeds the last sampled token and returns the next.
    pub async fn step(&mut self, ctx: &GpuContext) -> Result<u32> {
        self.check_position(1)?;
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, 1));
        self.prepare_rope(ctx, 1)?;
        let steps = &self.decode.dispatches;
        let commands = match self.recorded.take() {
            Some(c) => c,
            None => ctx.encode_step(steps, &self.chosen, &self.slot),
        };
        let submitted = ctx.submit_step(commands);
        // The next step's commands are the same and read their inputs (the token, the position
        // uniform) on the GPU, so they are recorded while this step runs.
        self.recorded = Some(ctx.encode_step(steps, &self.chosen, &self.slot));
        let next = ctx.read_step(&self.slot, submitted).await?[0];
        self.pos += 1;
        Ok(next)
    }

    /// Runs `ids` (at most `max_batch`) from the current position and returns every checkpoint
    /// as (name, shape, values): embedding, each block's attention output, MLP output and
    /// residual, the final norm and the logits.
    pub async fn checkpoints(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<Vec<(String, Vec<usize>, Vec<f32>)>> {
        let mut cp = Checkpoints::default();
        self.logits(ctx, ids, Some(&mut cp)).await?;
        let mut out = Vec::with_capacity(cp.names.len());
        for (name, t) in cp.names.into_iter().zip(&cp.tensors) {
            out.push((name, t.shape.clone(), ctx.read_f32(t).await?));
        }
        Ok(out)
    }

    /// Logits for every token of `ids` (appended to the cache), [len, vocab], read back in
    /// passes of `max_batch`. `capture` snapshots the checkpoints of a single pass.
    pub async fn logits(
        &mut self,
        ctx: &GpuContext,
        ids: &[u32],
        mut capture: Option<&mut Checkpoints>,
    ) -> Result<Vec<f32>> {
        self.check_position(ids.len())?;
        if capture.is_some() && self.pass_len(ids.len()) < ids.len() {
            return Err(Error::Model(format!(
                "a debug pass takes at most {} tokens, within the first {} positions",
                self.options.max_batch, self.options.max_seq
            )));
        }
        let mut out = Vec::with_capacity(ids.len() * self.config.vocab);
        let mut done = 0;
        while done < ids.len() {
            let t = self.pass_len(ids.len() - done);
            let chunk = &ids[done..done + t];
            done += t;
            let graph = self.build(ctx, t, false, true, capture.as_deref_mut()).await?;
            self.write_ids(ctx, chunk)?;
            ctx.run(&graph.dispatches.iter().collect::<Vec<_>>());
            let logits = self.buffers.logits.view(&[t, self.config.vocab])?;
            let mut all = ctx.read_f32(&logits).await?;
            all.truncate(t * self.config.vocab);
            out.extend_from_slice(&all);
            self.pos += t;
        }
        Ok(out)
    }
}
