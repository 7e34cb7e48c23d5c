//! Whether a model fits the device, decided from its validated configuration and its header
//! before a single weight is fetched: the bytes of weights, KV cache and activation buffers,
//! against the buffers the device allows and an optional memory budget.
//!
//! WebGPU reports no memory size, so without a budget only the per-buffer limits are checked;
//! the total is what a page would pass as its budget (`memoryBudgetMB`).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{GgmlType, SafeDtype, StorageType, TensorInfo};
use crate::gpu::GpuContext;
use crate::ops::attention::SPLIT_CHUNK;

use super::config::LlamaConfig;
use super::llama::EngineOptions;
use super::load::WeightOptions;
use super::names::part_of;

/// What the device allows, and how much of it the caller lets the model use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceMemory {
    /// Largest buffer the device creates.
    pub max_buffer_bytes: u64,
    /// Largest buffer a shader may bind as storage.
    pub max_binding_bytes: u64,
    /// The most the model may occupy in total; None checks only the per-buffer limits.
    pub budget_bytes: Option<u64>,
}

impl DeviceMemory {
    /// The limits of `ctx`'s device, with an optional budget in MB (10^6 bytes).
    pub fn of(ctx: &GpuContext, budget_mb: Option<u64>) -> Self {
        let limits = &ctx.capabilities().limits;
        Self {
            max_buffer_bytes: limits.max_buffer_size,
            max_binding_bytes: limits.max_storage_buffer_binding_size,
            budget_bytes: budget_mb.map(|mb| mb.saturating_mul(1_000_000)),
        }
    }
}

/// Bytes a model occupies on the GPU with given engine options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryNeeds {
    pub weights: u64,
    pub kv_cache: u64,
    /// Activation buffers, the RoPE table and the token ring.
    pub activations: u64,
    /// The largest buffer that cannot be split (a layer's K or V cache, the logits, ...).
    pub largest_buffer: u64,
    /// What that buffer holds.
    pub largest_buffer_name: &'static str,
}

impl MemoryNeeds {
    pub fn total(&self) -> u64 {
        self.weights.saturating_add(self.kv_cache).saturating_add(self.activations)
    }
}

/// GPU bytes of one stored tensor: block-quantized and float GGML types are uploaded as they
/// are stored; other safetensors dtypes are decoded to f32; float matrices become `quantize`'s
/// format when it is set.
fn gpu_bytes(t: &TensorInfo, weights: &WeightOptions) -> u64 {
    let elements = t.elements();
    let float = matches!(
        t.storage,
        StorageType::Safe(_) | StorageType::Ggml(GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
    );
    if let (true, Some(q), [rows, cols]) = (float, weights.quantize, t.shape.as_slice()) {
        let bits = q.bits_per_weight();
        return ((*rows as f64) * (*cols as f64) * bits / 8.0).ceil() as u64;
    }
    match t.storage {
        StorageType::Ggml(_) | StorageType::Safe(SafeDtype::F32 | SafeDtype::F16 | SafeDtype::BF16) => t.byte_len(),
        StorageType::Safe(_) => elements.saturating_mul(4),
    }
}

/// What `config`'s model, stored as `tensors`, needs on the GPU with `engine`'s options. All
/// arithmetic is in u64 and saturates, so any configuration gives an answer.
pub fn memory_needs(config: &LlamaConfig, tensors: &[TensorInfo], engine: &EngineOptions, weights: &WeightOptions) -> MemoryNeeds {
    let c = config;
    let w = |n: usize| n as u64;
    let weight_bytes = tensors
        .iter()
        .filter(|t| {
            let base = ["_q", "_scale", "_zero"].iter().fold(t.name.as_str(), |n, s| n.trim_end_matches(&format!(".weft{s}")));
            part_of(base).is_some()
        })
        .fold(0u64, |sum, t| sum.saturating_add(gpu_bytes(t, weights)));
    // As the engine sizes itself at load (model::build).
    let max_seq = w(c.kv_window(engine.max_seq, engine.sinks).0);
    let batch = w(engine.max_batch.max(1));
    let (dim, q, kv, ffn, vocab) = (w(c.dim), w(c.q_dim()), w(c.kv_dim()), w(c.ffn_dim), w(c.vocab));
    let kv_layer = w(c.n_kv_heads).saturating_mul(max_seq).saturating_mul(w(engine.kv.row_bytes(c.head_dim)));
    let kv_cache = kv_layer.saturating_mul(2 * w(c.n_layers));
    // Buffers: x, h, o, down (dim); q, attn (q); k, v (kv); stacked qkv; stacked gate/up; gate,
    // up, act (ffn); logits (vocab); ids — per token of a batch, f32 or u32.
    let per_token = (4 * dim)
        .saturating_add(2 * q + 2 * kv)
        .saturating_add(q + 2 * kv)
        .saturating_add(5 * ffn)
        .saturating_add(vocab)
        .saturating_add(1);
    let logits = batch.saturating_mul(vocab).saturating_mul(4);
    let gate_up = batch.saturating_mul(2 * ffn).saturating_mul(4);
    let rope = max_seq.saturating_mul(w(c.rope_dims)).saturating_mul(4);
    let partials = w(c.n_heads).saturating_mul(max_seq.div_ceil(w(SPLIT_CHUNK).max(1))).saturating_mul(w(c.head_dim) + 2).saturating_mul(4);
    let activations = batch
        .saturating_mul(per_token)
        .saturating_mul(4)
        .saturating_add(2 * dim * 4)
        .saturating_add(rope)
        .saturating_add(max_seq * 4)
        .saturating_add(partials);
    let (largest_buffer, largest_buffer_name) = [
        (kv_layer, "one layer's K or V cache"),
        (logits, "the logits of a batch"),
        (gate_up, "the gate/up activations of a batch"),
        (rope, "the RoPE table"),
        (partials, "the split-attention partials"),
    ]
    .into_iter()
    .fold((0, ""), |best, b| if b.0 > best.0 { b } else { best });
    MemoryNeeds { weights: weight_bytes, kv_cache, activations, largest_buffer, largest_buffer_name }
}

/// [`memory_needs`] checked against `device`: a buffer the device cannot create, or a total over
/// the budget, is [`Error::ModelTooLarge`] with what to change. Call it before fetching weights.
pub fn check_memory_fit(
    config: &LlamaConfig,
    tensors: &[TensorInfo],
    engine: &EngineOptions,
    weights: &WeightOptions,
    device: &DeviceMemory,
) -> Result<MemoryNeeds> {
    let needs = memory_needs(config, tensors, engine, weights);
    let buffer_limit = device.max_buffer_bytes.min(device.max_binding_bytes);
    let smaller_context = "use a smaller maximum context (maxContext, --max-seq), a smaller KV format (kv: 'q8'), \
                           or a smaller batch";
    if needs.largest_buffer > buffer_limit {
        return Err(Error::ModelTooLarge {
            what: needs.largest_buffer_name.to_string(),
            needed: needs.largest_buffer,
            available: buffer_limit,
            hint: format!("that is one GPU buffer, and this device's largest is {buffer_limit} bytes; {smaller_context}"),
        });
    }
    if let Some(budget) = device.budget_bytes {
        if needs.total() > budget {
            return Err(Error::ModelTooLarge {
                what: format!(
                    "weights ({}), KV cache ({}) and activations ({})",
                    needs.weights, needs.kv_cache, needs.activations
                ),
                needed: needs.total(),
                available: budget,
                hint: format!("raise the memory budget, pick a smaller model or quantization, or {smaller_context}"),
            });
        }
    }
    Ok(needs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::kv::KvFormat;

    fn smollm2_shape() -> LlamaConfig {
        let json = r#"{"model_type":"llama","vocab_size":49152,"hidden_size":576,"intermediate_size":1536,
            "num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,"rms_norm_eps":1e-5,
            "max_position_embeddings":8192}"#;
        LlamaConfig::from_hf_json(json).unwrap()
    }

    fn device(budget_mb: Option<u64>) -> DeviceMemory {
        DeviceMemory { max_buffer_bytes: 1 << 30, max_binding_bytes: 1 << 28, budget_bytes: budget_mb.map(|m| m * 1_000_000) }
    }

    #[test]
    fn kv_cache_follows_the_readme_table() {
        let c = smollm2_shape();
        let engine = EngineOptions { max_seq: 2048, kv: KvFormat::F32, ..Default::default() };
        let needs = memory_needs(&c, &[], &engine, &WeightOptions::default());
        // 46,080 bytes per token in f32 (README, "KV cache").
        assert_eq!(needs.kv_cache, 46_080 * 2048);
        let q8 = memory_needs(&c, &[], &EngineOptions { kv: KvFormat::Q8, ..engine }, &WeightOptions::default());
        assert_eq!(q8.kv_cache, 12_240 * 2048);
    }

    #[test]
    fn a_budget_or_a_buffer_limit_is_a_typed_error() {
        let c = smollm2_shape();
        let engine = EngineOptions { max_seq: 8192, ..Default::default() };
        let opts = WeightOptions::default();
        assert!(check_memory_fit(&c, &[], &engine, &opts, &device(None)).is_ok());
        let needs = check_memory_fit(&c, &[], &engine, &opts, &device(Some(1000))).unwrap();
        match check_memory_fit(&c, &[], &engine, &opts, &device(Some(100))) {
            Err(Error::ModelTooLarge { needed, available, .. }) => {
                assert_eq!((needed, available), (needs.total(), 100_000_000))
            }
            other => panic!("expected ModelTooLarge, got {other:?}"),
        }
        let tiny = DeviceMemory { max_buffer_bytes: 1 << 20, max_binding_bytes: 1 << 20, budget_bytes: None };
        match check_memory_fit(&c, &[], &engine, &opts, &tiny) {
            Err(Error::ModelTooLarge { needed, available, .. }) => assert!(needed > available && available == 1 << 20),
            other => panic!("expected ModelTooLarge, got {other:?}"),
        }
    }
}
