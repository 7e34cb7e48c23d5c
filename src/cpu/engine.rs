//! The CPU engine's state: options, weights by role, activation buffers, the KV cache (in the
//! format of `CpuOptions::kv`) and the RoPE table.

use crate::error::{Error, Result};
use crate::model::graph::{Act, LayerWeight as L, Weight};
use crate::model::llama::check_engine;
use crate::model::llama::ring::RopeRing;
use crate::model::{kv_bytes_per_token, LlamaConfig};
use crate::ops::kv::KvFormat;
use crate::ops::sample::SampleParams;

use super::kernels::{BlockQ8, Isa, BLOCK};
use super::matrix::CpuMatrix;

/// How matrix products treat the activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arithmetic {
    /// Each 32-value block of the input quantized to i8 (one f32 scale), integer dot products
    /// with the packed weights; the attention output projection keeps f32 inputs. The default:
    /// faster than F32, at a perplexity cost measured in the README.
    Q8,
    /// The weights decoded to f32 and multiplied with f32 activations (the reference).
    F32,
}

/// Options fixed at load.
#[derive(Clone, Copy, Debug)]
pub struct CpuOptions {
    /// Positions the KV cache holds (the context cap, past it the sliding window).
    pub max_seq: usize,
    /// Attention sinks past `max_seq` (see `EngineOptions::sinks`); capped at `max_seq / 2`.
    pub sinks: usize,
    /// Most tokens one prompt pass processes.
    pub max_batch: usize,
    /// Threads per pass; 0: one per available core.
    pub threads: usize,
    pub arithmetic: Arithmetic,
    /// Storage of the KV cache: the GPU engine's formats and row layout (`ops::kv`).
    pub kv: KvFormat,
}

impl Default for CpuOptions {
    fn default() -> Self {
        Self { max_seq: 2048, sinks: 4, max_batch: 64, threads: 0, arithmetic: Arithmetic::Q8, kv: KvFormat::F32 }
    }
}

/// One block's weights.
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: CpuMatrix,
    pub wk: CpuMatrix,
    pub wv: CpuMatrix,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    /// Per-head norms of queries and keys (Qwen3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub wo: CpuMatrix,
    pub ffn_norm: Vec<f32>,
    /// Norms of the attention and MLP outputs (Gemma 2).
    pub post_attn_norm: Option<Vec<f32>>,
    pub post_ffn_norm: Option<Vec<f32>>,
    pub gate: CpuMatrix,
    pub up: CpuMatrix,
    pub down: CpuMatrix,
}

pub struct CpuWeights {
    pub embedding: CpuMatrix,
    pub layers: Vec<LayerWeights>,
    pub out_norm: Vec<f32>,
    /// None: tied to the embedding.
    pub output: Option<CpuMatrix>,
}

impl CpuWeights {
    pub fn matrix(&self, w: Weight) -> Result<&CpuMatrix> {
        let found = match w {
            Weight::Embedding => Some(&self.embedding),
            Weight::Head => Some(self.output.as_ref().unwrap_or(&self.embedding)),
            Weight::Layer(i, part) => self.layers.get(i).and_then(|l| match part {
                L::Q => Some(&l.wq),
                L::K => Some(&l.wk),
                L::V => Some(&l.wv),
                L::O => Some(&l.wo),
                L::Gate => Some(&l.gate),
                L::Up => Some(&l.up),
                L::Down => Some(&l.down),
                _ => None,
            }),
            Weight::OutNorm => None,
        };
        found.ok_or_else(|| Error::Model(format!("the model has no matrix {w:?}")))
    }

    pub fn vector(&self, w: Weight) -> Result<&[f32]> {
        let found = match w {
            Weight::OutNorm => Some(&self.out_norm),
            Weight::Layer(i, part) => self.layers.get(i).and_then(|l| match part {
                L::AttnNorm => Some(&l.attn_norm),
                L::FfnNorm => Some(&l.ffn_norm),
                L::QBias => l.bq.as_ref(),
                L::KBias => l.bk.as_ref(),
                L::VBias => l.bv.as_ref(),
                L::PostAttnNorm => l.post_attn_norm.as_ref(),
                L::PostFfnNorm => l.post_ffn_norm.as_ref(),
                L::QNorm => l.q_norm.as_ref(),
                L::KNorm => l.k_norm.as_ref(),
                _ => None,
            }),
            _ => None,
        };
        found.map(Vec::as_slice).ok_or_else(|| Error::Model(format!("the model has no vector {w:?}")))
    }

    pub fn bytes(&self) -> u64 {
        let v = |x: &[f32]| 4 * x.len() as u64;
        let ob = |x: &Option<Vec<f32>>| x.as_deref().map_or(0, v);
        let layers: u64 = self
            .layers
            .iter()
            .map(|l| {
                [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down].iter().map(|m| m.bytes()).sum::<u64>()
                    + v(&l.attn_norm)
                    + v(&l.ffn_norm)
                    + ob(&l.bq)
                    + ob(&l.bk)
                    + ob(&l.bv)
                    + ob(&l.q_norm)
                    + ob(&l.k_norm)
                    + ob(&l.post_attn_norm)
                    + ob(&l.post_ffn_norm)
            })
            .sum();
        self.embedding.bytes() + layers + v(&self.out_norm) + self.output.as_ref().map_or(0, |m| m.bytes())
    }
}

/// Every graph tensor, in buffer order.
pub(super) const ACTS: [Act; 17] = [
    Act::X,
    Act::H,
    Act::Q,
    Act::K,
    Act::V,
    Act::Attn,
    Act::O,
    Act::Gate,
    Act::Up,
    Act::Act,
    Act::Down,
    Act::Last,
    Act::LastNorm,
    Act::Logits,
    Act::QProj,
    Act::KProj,
    Act::Post,
];

pub(super) fn act_index(a: Act) -> usize {
    ACTS.iter().position(|&b| b == a).unwrap_or(0)
}

/// What passes read and write.
pub(super) struct State {
    /// One buffer per graph tensor ([`ACTS`] order), `max_batch` rows.
    pub acts: Vec<Vec<f32>>,
    /// Blocks of one thread's 8-bit copy of a matrix input (each pass's threads hold their own).
    pub xq_blocks: usize,
    /// Per layer [n_kv_heads, max_seq, row_words] words of `CpuOptions::kv` rows, rows at
    /// `ring_slot(position)`.
    pub k_cache: Vec<Vec<u32>>,
    pub v_cache: Vec<Vec<u32>>,
    /// [max_seq, rope_dims / 2, 2] cos/sin by slot.
    pub rope: Vec<f32>,
    /// The same for the local layers where they rotate with their own base (Gemma 3); empty
    /// otherwise.
    pub rope_local: Vec<f32>,
}

pub struct CpuLlama {
    pub config: LlamaConfig,
    pub options: CpuOptions,
    pub weights: CpuWeights,
    pub isa: Isa,
    pub(super) state: State,
    pub(super) ring: RopeRing,
    pub(super) ring_local: Option<RopeRing>,
    /// Every token fed so far (the repetition penalty's window).
    pub(super) history: Vec<u32>,
    /// The last sampled token, the next decode step's input.
    pub(super) sampled: u32,
    pub(super) sampling: SampleParams,
    pub(super) pos: usize,
}

impl CpuLlama {
    pub fn new(config: LlamaConfig, weights: CpuWeights, options: CpuOptions) -> Result<Self> {
        let c = &config;
        check_engine(c, weights.layers.len(), options.max_seq, options.max_batch)?;
        options.kv.check_fits(c.head_dim)?;
        let threads = match options.threads {
            0 => super::threads::available(),
            n => n,
        };
        let options = CpuOptions { sinks: options.sinks.min(options.max_seq / 2), threads, ..options };
        let b = options.max_batch;
        let acts = ACTS.iter().map(|a| vec![0f32; a.rows(b) * a.width(c)]).collect();
        let widest = [c.dim, c.q_dim(), c.ffn_dim].into_iter().max().unwrap_or(0);
        let row_words = options.kv.row_words(c.head_dim);
        let cache = || (0..c.n_layers).map(|_| vec![0u32; c.n_kv_heads * options.max_seq * row_words]).collect();
        let ring = RopeRing::new(c, options.max_seq, options.sinks);
        let ring_local = RopeRing::local(c, options.max_seq, options.sinks);
        let state = State {
            rope_local: ring_local.as_ref().map(RopeRing::table).unwrap_or_default(),
            acts,
            xq_blocks: b * widest.div_ceil(BLOCK),
            k_cache: cache(),
            v_cache: cache(),
            rope: ring.table(),
        };
        Ok(Self {
            isa: Isa::detect(),
            state,
            ring,
            ring_local,
            history: Vec::new(),
            sampled: 0,
            sampling: SampleParams::default(),
            pos: 0,
            config,
            options,
            weights,
        })
    }

    /// Tokens in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Forgets the sequence.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.history.clear();
        self.ring.reset();
        if let Some(ring) = &mut self.ring_local {
            ring.reset();
        }
    }

    /// Keeps the first `len` tokens of the cache (see `Llama::truncate`).
    pub fn truncate(&mut self, len: usize) -> bool {
        if len > self.pos || self.pos > self.options.max_seq {
            return false;
        }
        self.pos = len;
        self.history.truncate(len);
        true
    }

    pub fn set_sampling(&mut self, params: &SampleParams) {
        self.sampling = *params;
    }

    /// KV-cache bytes per token of context (K and V, every layer) in the cache's format.
    pub fn kv_bytes_per_token(&self) -> u64 {
        kv_bytes_per_token(&self.config, self.options.kv)
    }

    /// Bytes of the KV cache held: `kv_bytes_per_token` for each of `max_seq` positions.
    pub fn kv_bytes(&self) -> u64 {
        let s = &self.state;
        s.k_cache.iter().chain(&s.v_cache).map(|v| 4 * v.len() as u64).sum()
    }

    /// The KV cache of `layer` as stored: K and V, [n_kv_heads, max_seq, row_words] words each.
    pub fn kv_cache(&self, layer: usize) -> (&[u32], &[u32]) {
        (&self.state.k_cache[layer], &self.state.v_cache[layer])
    }

    /// Bytes held: weights, KV cache, activations.
    pub fn bytes(&self) -> u64 {
        let s = &self.state;
        let f = |v: &Vec<f32>| 4 * v.len() as u64;
        self.weights.bytes()
            + self.kv_bytes()
            + s.acts.iter().map(f).sum::<u64>()
            + (self.options.threads.max(1) * s.xq_blocks * std::mem::size_of::<BlockQ8>()) as u64
    }
}
