//! Options of the engine fixed at load.

use crate::error::{Error, Result};
use crate::gpu::Capabilities;
use crate::ops::kv::KvFormat;
use crate::ops::qmatmul::Precision;

use super::super::config::LlamaConfig;

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
    /// With `fuse_norms`, the SwiGLU folded into a GEMV (one dispatch a block fewer; the same
    /// bits): the stacked gate/up GEMV's epilogue where `glu_epilogue` and the weight allow
    /// it, else the down projection's staging of the gate/up product. Off only to measure it.
    pub fuse_glu: bool,
    /// With `fuse_glu`, the SwiGLU as the gate/up GEMV's epilogue (each lane group holds a gate
    /// row and its up row) rather than in the down GEMV's staging, where every workgroup reads
    /// both halves and takes the exp again. Off only to measure it.
    pub glu_epilogue: bool,
    /// With `fuse` and split attention, the RoPE + KV store of the decode step done by the
    /// attention kernel, which also merges its chunks (two dispatches a block fewer; the same
    /// cache bits). Off only to measure it.
    pub fuse_attention: bool,
    /// Context positions one workgroup of the decode attention kernel covers (one of
    /// [`DECODE_CHUNKS`](crate::ops::attention::DECODE_CHUNKS)): smaller chunks spread a head
    /// over more workgroups, a context of at most one chunk needs no merge. `None` decides by
    /// head size and context length
    /// ([`decode_chunk_plan`](crate::ops::attention::decode_chunk_plan)): the decode step is
    /// prepared at load for each range of lengths that takes its own chunk.
    pub attention_chunk: Option<usize>,
    /// Prompt passes' attention by tiles of queries against tiles of cached positions
    /// (`ops::prefill_attention`) where the adapter gains from it (`tiled_prefill_pays`) and the
    /// head size and the device's workgroup memory allow: each K/V row read once per 16 queries
    /// instead of once per query. Off only to measure it.
    pub flash_attention: bool,
    /// Decode steps queued one ahead: the next step reads the sampled token on the GPU, so it
    /// is submitted before this one's token is read back, and the GPU does not wait for the
    /// CPU between steps. Any other call drops the step queued ahead. Off only to measure it.
    pub pipeline: bool,
    /// The decode step's GEMVs of weft weights (2, 3, 4 and 8 bits; Q4_0/Q8_0 repacked into them
    /// on GPUs) and of the planes GPUs hold of Q4_1, Q5_0, Q5_1 and the K-quants, with their
    /// activations quantized to 8 bits per 32 values and integer dot products
    /// (shaders/gemv_dp4.wgsl): less float work per weight, one 8-bit rounding per activation.
    /// Prompt passes keep f32 activations.
    pub int8_activations: bool,
    /// With `int8_activations` and the SwiGLU epilogue, the gate/up GEMV writes its output as
    /// 8-bit activation records too (`ops::qmatmul::records`), and the down GEMV reads them
    /// rather than quantizing all of its input in every workgroup. The same bits either way.
    pub activation_records: bool,
    /// The decode step's GEMVs compiled with their weight's shape as constants, a pipeline per
    /// weight shape, instead of reading it from a uniform (`GemvFusion::constant_shape`): no
    /// workgroup then waits for the uniform's load before its first weight load. The same
    /// arithmetic either way (a driver may still contract multiply-adds differently in the two
    /// compilations: last-place differences); off only to measure it.
    pub constant_shapes: bool,
    /// Prompt passes' matrix products on the adapter's matrix units (tensor cores: f16
    /// operands, f32 sums; shaders/qgemm_coop.wgsl) where it has them
    /// ([`Capabilities::matrix_f16`](crate::gpu::Capabilities)); elsewhere, and for decode
    /// steps, `precision` holds.
    pub matrix_units: bool,
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
            fuse_glu: true,
            glu_epilogue: true,
            fuse_attention: true,
            attention_chunk: None,
            flash_attention: true,
            pipeline: true,
            int8_activations: false,
            activation_records: true,
            constant_shapes: true,
            matrix_units: true,
            tune: true,
        }
    }
}

impl EngineOptions {
    /// The arithmetic of prompt passes' matrix products with K a multiple of 32 on an adapter
    /// `caps` describes: F16 products (f32 sums) on its matrix units where `matrix_units` and
    /// the adapter allow, else `precision`.
    pub fn prompt_precision(&self, caps: &Capabilities) -> Precision {
        if self.matrix_units && caps.matrix_f16 { Precision::F16 } else { self.precision }
    }
}

/// KV-cache bytes per token of context for `config` stored as `kv` (K and V, every layer).
pub fn kv_bytes_per_token(config: &LlamaConfig, kv: KvFormat) -> u64 {
    (2 * config.n_layers * config.n_kv_heads * kv.row_bytes(config.head_dim)) as u64
}

/// An engine needs one block of weights per configured layer, and room for a token.
pub fn check_engine(config: &LlamaConfig, layers: usize, max_seq: usize, max_batch: usize) -> Result<()> {
    if max_seq == 0 || max_batch == 0 || layers != config.n_layers {
        return Err(Error::Model(format!(
            "{layers} layers of weights for {} in the config; max_seq {max_seq} max_batch {max_batch}",
            config.n_layers
        )));
    }
    Ok(())
}
