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

use crate::quant::weft::{Scheme, WeftQuant};

use super::budget::{plan_budget, role_weight, Assignment, Candidate, TensorChoices};
use super::config::LlamaConfig;
use super::convert::{budget_formats, is_matrix};
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

/// The header's tensors as the GPU will hold them, for the memory-fit check: a `k` matrix is
/// uploaded as its asymmetric twin (u32 words, f16 scales and zero points), whatever its file
/// holds (8-bit codes, or entropy-coded streams far smaller than what they decode to).
pub fn tensors_as_uploaded(header: &crate::format::ModelHeader) -> Result<Vec<TensorInfo>> {
    let weft = super::load::weft_entries(header)?;
    let mut out = header.tensors().to_vec();
    for (name, e) in weft.iter().filter(|(_, e)| e.quant.scheme == crate::quant::weft::Scheme::K) {
        let [rows, cols] = e.shape.map(|d| d as u64);
        let groups = rows.saturating_mul(e.quant.groups_per_row(cols as usize) as u64);
        let words = rows.saturating_mul(e.quant.words_per_row(cols as usize) as u64);
        for t in out.iter_mut() {
            let (dtype, shape, bytes) = if &t.name == name {
                (SafeDtype::U32, vec![words], words.saturating_mul(4))
            } else if t.name == e.scale.name || e.zero.as_ref().is_some_and(|z| z.name == t.name) {
                (SafeDtype::F16, vec![groups], groups.saturating_mul(2))
            } else {
                continue;
            };
            *t = TensorInfo { name: t.name.clone(), storage: StorageType::Safe(dtype), shape, range: t.range.start..t.range.start.saturating_add(bytes) };
        }
    }
    Ok(out)
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

/// `quantize: 'auto'`: a weft format for every float matrix, chosen from the header alone (the
/// weights are not there yet) so that matrices, the other tensors, KV cache and activations fit
/// the memory budget, spending it where the predicted error falls most per byte
/// ([`super::budget::plan_budget`]). Without a budget every matrix gets 8 bits.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoPlan {
    /// The budget, and what the tensors other than the matrices, the KV cache and the
    /// activations take of it.
    pub budget_bytes: Option<u64>,
    pub fixed_bytes: u64,
    /// What the chosen formats take.
    pub matrix_bytes: u64,
    /// The planner's predicted KL divergence (role sensitivity times predicted relative error).
    pub predicted_error: f64,
    pub assignments: Vec<Assignment>,
}

impl AutoPlan {
    pub fn format_of(&self, name: &str) -> Option<WeftQuant> {
        self.assignments.iter().find(|a| a.name == name).map(|a| a.format)
    }

    /// One line for logs: matrices per format, their bytes, the fixed bytes and the budget.
    pub fn summary(&self) -> String {
        let mut counts = std::collections::BTreeMap::new();
        for a in &self.assignments {
            *counts.entry(a.format.name()).or_insert(0usize) += 1;
        }
        let counts: Vec<String> = counts.iter().map(|(f, n)| format!("{n} {f}")).collect();
        let budget = self.budget_bytes.map_or("none".to_string(), |b| format!("{b} bytes"));
        format!(
            "{}; matrix bytes {}, fixed bytes {}, budget {budget}, predicted KLD {:.4}",
            counts.join(", "),
            self.matrix_bytes,
            self.fixed_bytes,
            self.predicted_error
        )
    }
}

/// What a load's `quantize` option asks for, by name: `none`, `auto`, `q4` (q4_g32_asym),
/// `q8` (q8_g32_asym), `q3` (q3_g32_asym) or a weft format name such as `q4_g64_sym`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantizeChoice {
    None,
    Auto,
    Format(WeftQuant),
}

impl QuantizeChoice {
    pub const NAMES: &'static str = "'q4', 'q8', 'q3', 'auto', 'none' or a weft format such as 'q4_g64_sym'";

    /// None for a name that is no quantization (the caller reports it with [`Self::NAMES`]).
    pub fn parse(name: &str) -> Option<Self> {
        let full = match name {
            "none" => return Some(Self::None),
            "auto" => return Some(Self::Auto),
            "q4" => "q4_g32_asym",
            "q8" => "q8_g32_asym",
            "q3" => "q3_g32_asym",
            other => other,
        };
        WeftQuant::parse(full).ok().map(Self::Format)
    }

    /// The load's weight options: float matrices quantized under `weft quantize`'s default keep
    /// rules, or planned for `budget_mb` with `auto`.
    pub fn weight_options(self, budget_mb: Option<u64>) -> WeightOptions {
        WeightOptions {
            quantize: match self {
                Self::Format(q) => Some(q),
                _ => None,
            },
            auto: self == Self::Auto,
            default_keep: true,
            memory_budget_mb: budget_mb,
            ..WeightOptions::default()
        }
    }
}

/// Relative squared error of `format` on weights drawn from a normal distribution, the data-free
/// prediction of what a group's grid costs: step² / 12 over unit variance, the step spanning the
/// expected range of a group (asymmetric) or twice its expected largest magnitude (symmetric).
pub fn predicted_error(format: WeftQuant) -> f64 {
    // Expected largest of n standard normal draws.
    let expected_max = |n: u32| match n {
        0..=32 => 2.070,
        33..=64 => 2.336,
        65..=128 => 2.580,
        _ => 2.807,
    };
    let levels = (1u64 << format.bits) as f64;
    let step = match format.scheme {
        Scheme::Asym | Scheme::K => 2.0 * expected_max(format.group) / (levels - 1.0),
        Scheme::Sym => expected_max(2 * format.group) / (levels / 2.0),
    };
    step * step / 12.0
}

/// GPU bytes of a [rows, cols] matrix in `format`: packed words, then f16 scales (and zero
/// points), as `QWeight` stores them.
pub(crate) fn weft_bytes(format: WeftQuant, rows: u64, cols: u64) -> u64 {
    let groups = rows.saturating_mul(format.groups_per_row(cols as usize) as u64);
    let halves = if format.has_zero() { 2 } else { 1 };
    rows.saturating_mul(format.words_per_row(cols as usize) as u64 * 4).saturating_add(groups * 2 * halves)
}

/// The float matrices `quantize` applies to.
pub(crate) fn is_float_matrix(t: &TensorInfo) -> bool {
    let float = matches!(
        t.storage,
        StorageType::Safe(_) | StorageType::Ggml(GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
    );
    float && t.shape.len() == 2 && is_matrix(&t.name)
}

/// Plans `quantize: 'auto'` for `config`'s model stored as `tensors` against `device`'s budget:
/// [`Error::ModelTooLarge`] when even the smallest formats do not fit.
pub fn plan_auto(config: &LlamaConfig, tensors: &[TensorInfo], engine: &EngineOptions, device: &DeviceMemory) -> Result<AutoPlan> {
    let (matrices, rest): (Vec<TensorInfo>, Vec<TensorInfo>) = tensors.iter().cloned().partition(is_float_matrix);
    let fixed = memory_needs(config, &rest, engine, &WeightOptions::default()).total();
    // `k` formats save file bytes only: in GPU memory they are their asymmetric twins.
    let formats: Vec<WeftQuant> =
        budget_formats(WeftQuant { bits: 4, group: 32, scheme: Scheme::Asym }).into_iter().filter(|q| q.scheme != Scheme::K).collect();
    let choices: Vec<TensorChoices> = matrices
        .iter()
        .map(|t| TensorChoices {
            name: t.name.clone(),
            candidates: formats
                .iter()
                .map(|&format| Candidate {
                    format,
                    bytes: weft_bytes(format, t.shape[0], t.shape[1]),
                    error: role_weight(&t.name) * predicted_error(format),
                })
                .collect(),
        })
        .collect();
    let smallest: u64 = choices.iter().map(|c| c.candidates.iter().map(|x| x.bytes).min().unwrap_or(0)).sum();
    let budget = device.budget_bytes.unwrap_or(u64::MAX);
    if fixed.saturating_add(smallest) > budget {
        return Err(Error::ModelTooLarge {
            what: format!("the smallest quantization of the matrices ({smallest}), the other tensors, KV cache and activations ({fixed})"),
            needed: fixed.saturating_add(smallest),
            available: budget,
            hint: "raise the memory budget, pick a smaller model, or use a smaller maximum context (maxContext) or KV format (kv: 'q8')".into(),
        });
    }
    let assignments = plan_budget(&choices, fixed, budget)?;
    Ok(AutoPlan {
        budget_bytes: device.budget_bytes,
        fixed_bytes: fixed,
        matrix_bytes: assignments.iter().map(|a| a.bytes).sum(),
        predicted_error: assignments.iter().map(|a| a.error).sum(),
        assignments,
    })
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

    #[test]
    fn quantize_names_parse_as_loadmodel_documents() {
        let format = |name: &str| match QuantizeChoice::parse(name) {
            Some(QuantizeChoice::Format(q)) => q.name(),
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!((format("q4"), format("q8"), format("q3")), ("q4_g32_asym".into(), "q8_g32_asym".into(), "q3_g32_asym".into()));
        assert_eq!(format("q4_g64_sym"), "q4_g64_sym");
        assert_eq!(QuantizeChoice::parse("auto"), Some(QuantizeChoice::Auto));
        assert_eq!(QuantizeChoice::parse("none"), Some(QuantizeChoice::None));
        assert_eq!(QuantizeChoice::parse("q5"), None);
        let auto = QuantizeChoice::Auto.weight_options(Some(300));
        assert!(auto.auto && auto.quantize.is_none() && auto.memory_budget_mb == Some(300));
        let q8 = QuantizeChoice::parse("q8").unwrap().weight_options(None);
        assert!(!q8.auto && q8.default_keep && q8.quantize.map(|q| q.bits) == Some(8));
    }

    /// SmolLM2's matrices as F32 in the header: a smaller budget gives a smaller plan within it,
    /// of mixed formats, with a larger predicted error; too small a budget is ModelTooLarge.
    #[test]
    fn auto_plans_shrink_with_the_budget() {
        use crate::format::TensorInfo;
        let c = smollm2_shape();
        let f32s = StorageType::Safe(SafeDtype::F32);
        let mut tensors = vec![TensorInfo { name: "model.embed_tokens.weight".into(), storage: f32s, shape: vec![49152, 576], range: 0..0 }];
        for l in 0..30 {
            for (part, rows, cols) in [("self_attn.q_proj", 576, 576), ("self_attn.k_proj", 192, 576), ("self_attn.v_proj", 192, 576),
                ("self_attn.o_proj", 576, 576), ("mlp.gate_proj", 1536, 576), ("mlp.up_proj", 1536, 576), ("mlp.down_proj", 576, 1536)] {
                tensors.push(TensorInfo { name: format!("model.layers.{l}.{part}.weight"), storage: f32s, shape: vec![rows, cols], range: 0..0 });
            }
            tensors.push(TensorInfo { name: format!("model.layers.{l}.input_layernorm.weight"), storage: f32s, shape: vec![576], range: 0..0 });
        }
        let engine = EngineOptions { max_seq: 512, ..Default::default() };
        let roomy = plan_auto(&c, &tensors, &engine, &device(None)).unwrap();
        assert!(roomy.assignments.iter().all(|a| a.format.bits == 8), "no budget: 8 bits everywhere");
        assert_eq!(roomy.assignments.len(), 211);
        let (big, small) = (plan_auto(&c, &tensors, &engine, &device(Some(150))).unwrap(), plan_auto(&c, &tensors, &engine, &device(Some(90))).unwrap());
        for p in [&big, &small] {
            assert!(p.fixed_bytes + p.matrix_bytes <= p.budget_bytes.unwrap(), "{} + {} over the budget", p.fixed_bytes, p.matrix_bytes);
        }
        assert!(small.matrix_bytes < big.matrix_bytes && big.matrix_bytes < roomy.matrix_bytes);
        assert!(small.predicted_error > big.predicted_error && big.predicted_error > roomy.predicted_error);
        // Mixed formats: the budget is spent where the error falls most per byte.
        let formats: std::collections::BTreeSet<String> = small.assignments.iter().map(|a| a.format.name()).collect();
        assert!(formats.len() >= 2, "{formats:?}");
        assert!(matches!(plan_auto(&c, &tensors, &engine, &device(Some(40))), Err(Error::ModelTooLarge { .. })));
    }
}
