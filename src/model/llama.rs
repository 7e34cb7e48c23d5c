//! The Llama-family engine on the GPU (Llama, SmolLM, TinyLlama, Qwen2): GQA attention with
//! RoPE, RMSNorm, SwiGLU, tied or separate output head. The forward pass itself is the graph of
//! `forward.rs`; `lower.rs` turns it into dispatches, `run.rs` runs them.
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

use crate::error::Result;
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor, ReadSlot, StepCommands, Uniform};
use crate::ops::attention::{decode_chunk_plan, rope_fuses, split_pays};
use crate::ops::qmatmul::{gemv_swiglu, tune_gemv, GemvTuning, QWeight};
use crate::ops::sample::{params_bytes, SampleParams};

use super::config::LlamaConfig;
use super::graph::Pass;
use super::load_times::{LoadClock, LoadPhase, LoadTimes};

mod buffers;
pub mod forward;
mod lower;
mod options;
mod profile;
pub mod ring;
mod run;
mod weights;

use buffers::Buffers;
use lower::{attention_shape, rope_shape};
use ring::RopeRing;
use run::Ahead;
pub use lower::Checkpoints;
pub use options::{check_engine, kv_bytes_per_token, EngineOptions};
pub use profile::StepProfile;
pub use weights::{GateUp, LayerWeights, Quantized, Qkv, Weights};

pub struct Llama {
    pub config: LlamaConfig,
    pub weights: Weights,
    pub options: EngineOptions,
    /// GEMV launch shapes measured at load (empty where nothing was tuned).
    pub gemv_tuning: Vec<GemvTuning>,
    /// Where the load went: the weights' phases, then stacking, tuning and compiling here.
    pub load_times: LoadTimes,
    k_cache: Vec<GpuTensor>, // per layer [kv_heads, max_seq, kv.row_words(head_dim)] by ring_slot
    v_cache: Vec<GpuTensor>, // per layer [kv_heads, max_seq, kv.row_words(head_dim)] by ring_slot
    rope: GpuTensor,         // [max_seq, rope_dims / 2, 2] by ring_slot
    /// The position whose cos/sin row each slot of `rope` holds.
    ring: RopeRing,
    /// The local layers' table and ring where they rotate with their own base (Gemma 3).
    rope_local: Option<(GpuTensor, RopeRing)>,
    tokens: GpuTensor,      // [max_seq] u32, the sequence so far, position p at p % max_seq
    chosen: GpuTensor,       // [1] u32, the last sampled token
    step: Uniform,
    sampling: Uniform,
    /// Token readback, one slot for each of the two decode steps that may be in flight.
    slots: [ReadSlot; 2],
    buffers: Buffers,
    /// The decode step's dispatches, prepared at load, for each range of context lengths that
    /// takes its own decode attention chunk: (largest context, dispatches), increasing.
    decode: Vec<(usize, Vec<Dispatch>)>,
    /// Decode steps recorded while earlier ones ran, by readback slot, with the index of the
    /// `decode` range they were recorded from.
    recorded: [Option<(usize, StepCommands)>; 2],
    /// The decode step submitted ahead of its turn (`EngineOptions::pipeline`).
    ahead: Option<Ahead>,
    /// Prompt passes' dispatches by token count, prepared on first use.
    prefill: HashMap<usize, Vec<Dispatch>>,
    /// Tokens in the KV cache.
    pos: usize,
    /// The ids at positions `0..pos` and the last sampled one, kept for LongRoPE, whose cache
    /// is computed again when the sequence goes past the original context.
    history: Vec<u32>,
    last: u32,
}


/// Milliseconds from a monotonic clock (profiling only).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn web_time_now() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

/// `performance.now()` where the global has it (windows, workers, Node: fractions of a
/// millisecond), else `Date.now()` (whole milliseconds, too coarse for one decode step).
#[cfg(target_arch = "wasm32")]
pub(crate) fn web_time_now() -> f64 {
    use wasm_bindgen::JsCast;
    let perf = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).ok();
    let now = perf.as_ref().and_then(|p| js_sys::Reflect::get(p, &"now".into()).ok());
    match (perf, now.as_ref().and_then(|n| n.dyn_ref::<js_sys::Function>())) {
        (Some(p), Some(f)) => f.call0(&p).ok().and_then(|v| v.as_f64()).unwrap_or_else(js_sys::Date::now),
        _ => js_sys::Date::now(),
    }
}

impl Llama {
    pub async fn new(ctx: &GpuContext, config: LlamaConfig, mut weights: Weights, options: EngineOptions) -> Result<Self> {
        let c = &config;
        check_engine(c, weights.layers.len(), options.max_seq, options.max_batch)?;
        let clock = LoadClock::new(weights.load_times);
        if options.fuse {
            // One layer at a time, so the separate buffers of a layer go before the next stacks.
            let start = LoadClock::start();
            let layers = std::mem::take(&mut weights.layers);
            for (i, l) in layers.into_iter().enumerate() {
                weights.layers.push(l.stacked(ctx, i)?);
            }
            clock.add(LoadPhase::Stack, start);
        }
        let start = LoadClock::start();
        let fuse_norms = options.fuse_norms.unwrap_or(!ctx.capabilities().is_software);
        // The stacked gate/up weights whose decode GEMV may take the SwiGLU epilogue (Gemma's
        // GeGLU never does) are also tuned as that product.
        let epilogue = options.fuse && fuse_norms && options.fuse_glu && options.glu_epilogue && !c.arch.is_gemma();
        let gemv_tuning = if options.tune {
            let mut mats: Vec<&QWeight> = Vec::new();
            let mut swiglu: Vec<&QWeight> = Vec::new();
            // The pairs whose decode step may pass activation records (`EngineOptions::activation_records`).
            let mut records: Vec<(&QWeight, &QWeight)> = Vec::new();
            let recording = options.int8_activations && options.activation_records;
            for l in &weights.layers {
                match &l.qkv {
                    Qkv::Stacked { w, .. } => mats.push(w),
                    Qkv::Apart { wq, wk, wv, .. } => mats.extend([wq, wk, wv]),
                }
                match &l.gate_up {
                    GateUp::Stacked(w) => {
                        mats.push(w);
                        if epilogue && gemv_swiglu(ctx, w) {
                            swiglu.push(w);
                            if recording {
                                records.push((w, &l.down));
                            }
                        }
                    }
                    GateUp::Apart { gate, up } => mats.extend([gate, up]),
                }
                mats.extend([&l.wo, &l.down]);
            }
            mats.push(weights.output.as_ref().unwrap_or(&weights.embedding));
            tune_gemv(ctx, &mats, &swiglu, options.precision, options.int8_activations, &records).await?
        } else {
            Vec::new()
        };
        clock.add(LoadPhase::Tune, start);
        let split = options.split_attention.unwrap_or_else(|| split_pays(ctx));
        let options = EngineOptions {
            sinks: options.sinks.min(options.max_seq / 2),
            split_attention: Some(split),
            fuse_norms: Some(fuse_norms),
            ..options
        };
        let b = options.max_batch;
        let decode_shape = attention_shape(c, &options, 1);
        options.kv.check_fits(c.head_dim)?;
        let cache_shape = [c.n_kv_heads, options.max_seq, options.kv.row_words(c.head_dim)];
        let mut k_cache = Vec::with_capacity(c.n_layers);
        let mut v_cache = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            k_cache.push(ctx.zeros(&format!("k cache {i}"), &cache_shape, options.kv.dtype())?);
            v_cache.push(ctx.zeros(&format!("v cache {i}"), &cache_shape, options.kv.dtype())?);
        }
        let ring = RopeRing::new(c, options.max_seq, options.sinks);
        let rope = ctx.upload_f32("rope table", &[options.max_seq, c.rope_dims / 2, 2], &ring.table())?;
        let rope_local = match RopeRing::local(c, options.max_seq, options.sinks) {
            Some(r) => Some((ctx.upload_f32("local rope table", &[options.max_seq, c.rope_dims / 2, 2], &r.table())?, r)),
            None => None,
        };
        let buffers = Buffers::new(ctx, c, b, &decode_shape)?;
        let mut model = Self {
            tokens: ctx.zeros("tokens", &[options.max_seq], DType::U32)?,
            chosen: ctx.zeros("chosen", &[1], DType::U32)?,
            step: ctx.uniform_block("step", 16),
            sampling: ctx.uniform_block("sampling", 32),
            slots: [ctx.read_slot("token readback 0", 4), ctx.read_slot("token readback 1", 4)],
            config,
            weights,
            options,
            gemv_tuning,
            load_times: LoadTimes::default(),
            k_cache,
            v_cache,
            rope,
            ring,
            rope_local,
            buffers,
            decode: Vec::new(),
            recorded: [None, None],
            ahead: None,
            prefill: HashMap::new(),
            pos: 0,
            history: Vec::new(),
            last: 0,
        };
        let start = LoadClock::start();
        model.decode = model.lower_decode(ctx).await?;
        clock.add(LoadPhase::Compile, start);
        model.set_sampling(ctx, &SampleParams::default());
        // What the load queued (uploads, stacking copies) done, so that its time is the load's
        // rather than the first pass's.
        let start = LoadClock::start();
        ctx.wait_idle().await?;
        clock.add(LoadPhase::Finish, start);
        model.load_times = clock.times();
        Ok(model)
    }

    /// The decode step's dispatches for each range of context lengths whose decode attention
    /// takes a chunk of its own (`decode_chunk_plan`; one range where the options fix the chunk
    /// or the step does not split its attention), as (largest context, dispatches).
    async fn lower_decode(&self, ctx: &GpuContext) -> Result<Vec<(usize, Vec<Dispatch>)>> {
        let o = &self.options;
        // The conditions under which the lowering folds the step's attention into one kernel.
        let folded = o.split_attention == Some(true) && o.fuse && o.fuse_attention && rope_fuses(&rope_shape(&self.config, o, 1));
        if o.attention_chunk.is_some() || !folded {
            return Ok(vec![(o.max_seq, self.lower(ctx, Pass::decode(), None).await?)]);
        }
        let mut steps = Vec::new();
        for (upto, chunk) in decode_chunk_plan(self.config.head_dim, o.max_seq) {
            steps.push((upto, self.lower_with(ctx, Pass::decode(), None, Some(chunk)).await?));
        }
        Ok(steps)
    }

    /// Dispatches one decode step records.
    pub fn decode_dispatches(&self) -> usize {
        self.decode_at(self.pos).1.len()
    }

    /// The kernel (name and defines) of each dispatch of the decode step at the current position.
    pub fn decode_kernels(&self) -> Vec<&str> {
        self.decode_at(self.pos).1.iter().map(|d| d.name()).collect()
    }

    /// The decode step for the token at `pos` (its context is pos + 1 positions, at most
    /// max_seq): the index of its range in `decode` and its dispatches.
    fn decode_at(&self, pos: usize) -> (usize, &[Dispatch]) {
        let context = (pos + 1).min(self.options.max_seq);
        let i = self.decode.iter().position(|(upto, _)| context <= *upto).unwrap_or(self.decode.len() - 1);
        (i, &self.decode[i].1)
    }

    /// Tokens in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Forgets the sequence (the cache is overwritten as new tokens arrive).
    pub fn reset(&mut self) {
        self.ahead = None;
        self.pos = 0;
        self.history.clear();
        self.ring.reset();
    }

    /// Keeps the first `len` tokens of the cache, so that a sequence sharing them goes on from
    /// there. False (nothing changed) when the cache does not hold them as positions
    /// `0..len`: past `max_seq` the ring has overwritten slots.
    pub fn truncate(&mut self, len: usize) -> bool {
        if len > self.pos || self.pos > self.options.max_seq {
            return false;
        }
        // A step queued ahead wrote only the position after the sequence, which the next pass
        // overwrites.
        self.ahead = None;
        self.pos = len;
        self.history.truncate(len);
        true
    }

    /// GPU bytes held: weights, KV cache and activations.
    pub fn gpu_bytes(&self) -> u64 {
        let caches: u64 = self.k_cache.iter().chain(&self.v_cache).map(|t| t.bytes()).sum();
        let acts = self.buffers.bytes();
        let local = self.rope_local.as_ref().map_or(0, |(t, _)| t.bytes());
        self.weights.bytes() + caches + acts + self.rope.bytes() + local + self.tokens.bytes()
    }

    /// KV-cache bytes per token of context.
    pub fn kv_bytes_per_token(&self) -> u64 {
        kv_bytes_per_token(&self.config, self.options.kv)
    }

    /// Sampling parameters from the next token on (a step queued ahead under the old ones is
    /// dropped).
    pub fn set_sampling(&mut self, ctx: &GpuContext, params: &SampleParams) {
        self.ahead = None;
        ctx.write_uniform(&self.sampling, &params_bytes(params, self.config.vocab, self.options.max_seq));
    }
}
