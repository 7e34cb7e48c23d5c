//! Model hyper-parameters, from GGUF metadata or a Hugging Face `config.json`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::gguf::GgufMetadata;
use crate::ops::rope::{RopeScaling, RopeStyle};

use super::hf_config;

/// Decoder-only transformer families weft runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama, SmolLM, TinyLlama, Mistral (no attention biases unless configured).
    Llama,
    /// Qwen2: biases on the q, k and v projections.
    Qwen2,
    /// Qwen3: RMSNorm of each query and key head before RoPE, no biases.
    Qwen3,
    /// Gemma 2: GeGLU, norms before and after attention and MLP, the embedding scaled by
    /// √dim, soft-capped attention scores and logits, sliding-window layers.
    Gemma2,
    /// Gemma 3 (text): Gemma 2's block with per-head q/k norms instead of soft-capping, and
    /// local layers rotating with their own RoPE base.
    Gemma3,
    /// Phi-3 / Phi-3.5: Llama's block with q, k and v in one matrix and gate and up in one
    /// (split at load, `names::split_fused`), and LongRoPE scaling.
    Phi3,
}

impl Arch {
    /// Gemma's block: GeGLU, (1 + w) norms before and after attention and MLP, √dim embedding.
    pub fn is_gemma(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    pub arch: Arch,
    pub vocab: usize,
    pub dim: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
    pub rope_dims: usize,
    pub rope_style: RopeStyle,
    pub rope_scaling: RopeScaling,
    /// Longest context the model was trained for.
    pub context_length: usize,
    /// Biases on q/k/v projections (Qwen2; some Llama variants).
    pub attn_bias: bool,
    /// RMSNorm over each query and key head, before RoPE (Qwen3).
    #[serde(default)]
    pub qk_norm: bool,
    /// Each token attends to itself and the `window - 1` before it (Mistral's `sliding_window`).
    #[serde(default)]
    pub sliding_window: Option<usize>,
    /// Which layers the window applies to; empty: all of them.
    #[serde(default)]
    pub local_layers: Vec<bool>,
    /// The query scale where it is not 1/√head_dim (Gemma's `query_pre_attn_scalar`^-½).
    #[serde(default)]
    pub attn_scale: Option<f32>,
    /// Soft-capping of attention scores and of the final logits (Gemma 2).
    #[serde(default)]
    pub attn_softcap: Option<f32>,
    #[serde(default)]
    pub final_softcap: Option<f32>,
    /// The RoPE base of the windowed layers where it is not `rope_base` (Gemma 3); those
    /// layers rotate without scaling.
    #[serde(default)]
    pub rope_local_base: Option<f32>,
}

/// Largest values weft accepts for each dimension: well above every released model (the
/// largest have 126 layers, hidden size 16,384, a 256k vocabulary), and small enough that every
/// size derived from them fits 64-bit arithmetic and, where it must, a 32-bit `usize`.
pub mod limits {
    pub const MAX_LAYERS: u64 = 1024;
    pub const MAX_DIM: u64 = 1 << 16;
    pub const MAX_HEADS: u64 = 1024;
    pub const MAX_FFN: u64 = 1 << 18;
    /// The same bound as a `tokenizer.json` vocabulary.
    pub const MAX_VOCAB: u64 = 1 << 22;
    pub const MAX_CONTEXT: u64 = 1 << 24;
}

fn unsupported(what: String) -> Error {
    Error::UnsupportedModel {
        what,
        hint: "weft runs llama (Llama 3, SmolLM, TinyLlama, Mistral), qwen2, qwen3, gemma2, gemma3 and phi3 models".into(),
    }
}

fn bad_field(field: &str, problem: impl Into<String>) -> Error {
    Error::BadConfig { field: field.to_string(), problem: problem.into() }
}

/// A dimension as the file gives it, checked against its maximum before it becomes a `usize`.
fn dim(field: &str, value: u64, max: u64) -> Result<usize> {
    if value == 0 || value > max {
        return Err(bad_field(field, format!("= {value} is outside 1..={max}")));
    }
    usize::try_from(value).map_err(|_| bad_field(field, format!("= {value} does not fit this platform")))
}

/// `a * b` for element counts derived from validated dimensions: None where the product would
/// not fit an `isize` (31 bits on wasm32), so no count the engine computes in `usize` wraps.
/// Byte sizes are the memory check's business (`fit`), in u64.
fn product(a: usize, b: usize) -> Option<usize> {
    a.checked_mul(b).filter(|&n| n <= isize::MAX as usize)
}

/// Dimensions as read from a file, before any is trusted.
struct Dims {
    vocab: u64,
    dim: u64,
    n_layers: u64,
    n_heads: u64,
    n_kv_heads: u64,
    head_dim: Option<u64>,
    ffn_dim: u64,
    rope_dims: Option<u64>,
    context_length: u64,
}

/// What is not a dimension.
struct Rest {
    arch: Arch,
    rms_eps: f32,
    rope_base: f32,
    rope_style: RopeStyle,
    rope_scaling: RopeScaling,
    attn_bias: bool,
    qk_norm: bool,
    sliding_window: Option<u64>,
    gemma: Gemma,
}

/// Gemma's settings (all off for other families).
#[derive(Default)]
struct Gemma {
    local_layers: Vec<bool>,
    attn_scale: Option<f32>,
    attn_softcap: Option<f32>,
    final_softcap: Option<f32>,
    rope_local_base: Option<f32>,
}

impl LlamaConfig {
    /// From GGUF metadata. `has_qkv_bias` says whether the file holds `blk.0.attn_q.bias`.
    /// Llama 3 frequency scaling is a tensor there (`rope_freqs.weight`), set afterwards
    /// (`load::rope_freqs`).
    pub fn from_gguf(meta: &GgufMetadata, has_qkv_bias: bool) -> Result<Self> {
        let arch_name = meta.get_str("general.architecture")?;
        let arch = match arch_name {
            "llama" | "mistral" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma2" => Arch::Gemma2,
            "gemma3" => Arch::Gemma3,
            "phi3" => Arch::Phi3,
            other => return Err(unsupported(format!("architecture '{other}'"))),
        };
        let key = |k: &str| format!("{arch_name}.{k}");
        // u64 reads: a value past u32 is out of range, not of the wrong type.
        let get = |k: &str| meta.get_u64(&key(k));
        let opt = |k: &str| -> Result<Option<u64>> {
            Ok(match meta.get(&key(k)) {
                Some(_) => Some(get(k)?),
                None => None,
            })
        };
        let n_heads = get("attention.head_count")?;
        let vocab = match opt("vocab_size")? {
            Some(v) => v,
            None => meta.get_str_array("tokenizer.ggml.tokens")?.len() as u64,
        };
        let rope_scaling = match meta.get_str(&key("rope.scaling.type")) {
            Ok("linear") => RopeScaling::Linear { factor: meta.get_f32(&key("rope.scaling.factor"))? },
            // Phi-3's LongRoPE: the factors are tensors (`load::read_rope_freqs` fills them in).
            Err(_) if arch == Arch::Phi3 && meta.get(&key("rope.scaling.original_context_length")).is_some() => RopeScaling::LongRope {
                short: Vec::new(),
                long: Vec::new(),
                original_context: get("rope.scaling.original_context_length")? as f32,
                attention_factor: meta.get_f32(&key("rope.scaling.attn_factor")).unwrap_or(1.0),
            },
            Ok("none") | Err(_) => RopeScaling::None,
            Ok(other) => return Err(hf_config::unsupported_field(&key("rope.scaling.type"), other)),
        };
        // Keys whose presence changes the arithmetic in ways weft does not implement.
        let sliding_window = match arch {
            Arch::Llama | Arch::Gemma2 | Arch::Gemma3 => opt("attention.sliding_window")?,
            // llama.cpp writes 0 for Phi-3 models without a window.
            Arch::Phi3 => opt("attention.sliding_window")?.filter(|&w| w > 0),
            _ => None,
        };
        let gemma = match arch {
            Arch::Gemma2 | Arch::Gemma3 => {
                let layers = get("block_count")?;
                let width = get("embedding_length")?;
                let cap = |k: &str| meta.get(&key(k)).map(|_| meta.get_f32(&key(k))).transpose();
                // llama.cpp's rules: Gemma 2 even layers local, Gemma 3 five local to one
                // global; its 27B sizes (46 and 62 layers) scale queries by (dim / heads)^-½.
                let (local, big): (fn(u64) -> bool, u64) = match arch {
                    Arch::Gemma2 => (|i| i % 2 == 0, 46),
                    _ => (|i| (i + 1) % 6 != 0, 62),
                };
                Gemma {
                    local_layers: (0..layers.min(limits::MAX_LAYERS)).map(local).collect(),
                    // The file's attention.scale where it has one.
                    attn_scale: match cap("attention.scale")? {
                        Some(s) => Some(s),
                        None => (layers == big).then(|| (width as f32 / n_heads as f32).powf(-0.5)),
                    },
                    attn_softcap: cap("attn_logit_softcapping")?,
                    final_softcap: cap("final_logit_softcapping")?,
                    // llama.cpp's local base for Gemma 3 unless the file says.
                    rope_local_base: match arch {
                        Arch::Gemma3 => Some(cap("rope.freq_base_swa")?.unwrap_or(10000.0)),
                        _ => None,
                    },
                }
            }
            _ => Gemma::default(),
        };
        let handled = |k: &str| match k {
            "attention.sliding_window" => sliding_window.is_some() || arch == Arch::Phi3,
            "attn_logit_softcapping" | "final_logit_softcapping" | "attention.scale" => arch.is_gemma(),
            _ => false,
        };
        let math_keys =
            ["attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "attention.scale", "rope.scaling.yarn_log_multiplier"];
        for k in math_keys {
            if let (Some(v), false) = (meta.get(&key(k)), handled(k)) {
                return Err(hf_config::unsupported_field(&key(k), format!("{v:?}")));
            }
        }
        let dims = Dims {
            vocab,
            dim: get("embedding_length")?,
            n_layers: get("block_count")?,
            n_heads,
            n_kv_heads: opt("attention.head_count_kv")?.unwrap_or(n_heads),
            head_dim: opt("attention.key_length")?,
            ffn_dim: get("feed_forward_length")?,
            rope_dims: opt("rope.dimension_count")?,
            context_length: opt("context_length")?.unwrap_or(2048),
        };
        let rest = Rest {
            arch,
            rms_eps: meta.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            rope_base: meta.get_f32(&key("rope.freq_base")).unwrap_or(10000.0),
            // llama.cpp's converter permutes llama Q/K rows for interleaved pairs; Qwen2 keeps
            // the Hugging Face layout.
            rope_style: match arch {
                Arch::Llama => RopeStyle::Norm,
                Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3 | Arch::Phi3 => RopeStyle::Neox,
            },
            rope_scaling,
            attn_bias: has_qkv_bias,
            qk_norm: matches!(arch, Arch::Qwen3 | Arch::Gemma3),
            sliding_window,
            gemma,
        };
        Self::checked(dims, rest)
    }

    /// From a Hugging Face `config.json`.
    pub fn from_hf_json(json: &str) -> Result<Self> {
        let not_config = |e: serde_json::Error| bad_field("config.json", format!("is not a model configuration: {e}"));
        // The family first: another model's config is unsupported, not malformed.
        #[derive(Deserialize)]
        struct Family {
            model_type: String,
        }
        let family: Family = serde_json::from_str(json).map_err(not_config)?;
        let arch = match family.model_type.as_str() {
            "llama" | "mistral" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma2" => Arch::Gemma2,
            "gemma3_text" => Arch::Gemma3,
            "phi3" => Arch::Phi3,
            other => return Err(unsupported(format!("model_type '{other}'"))),
        };
        let c: HfConfig = serde_json::from_str(json).map_err(not_config)?;
        let value: serde_json::Value = serde_json::from_str(json).map_err(not_config)?;
        let gemma = match arch {
            Arch::Gemma2 | Arch::Gemma3 => hf_config::gemma(&value, arch, c.num_hidden_layers)?,
            _ => {
                hf_config::check_options(&value)?;
                hf_config::GemmaOptions::default()
            }
        };
        let rope = match gemma.global_rope.clone() {
            Some(r) => r,
            None => hf_config::rope(&value)?,
        };
        // Mistral's window; Qwen2's `sliding_window` only counts with `use_sliding_window`
        // (checked above).
        let sliding_window = match (family.model_type.as_str(), value.get("sliding_window")) {
            ("mistral" | "gemma2" | "gemma3_text" | "phi3", Some(w)) if !w.is_null() => {
                Some(w.as_u64().ok_or_else(|| bad_field("sliding_window", format!("= {w} is not a count")))?)
            }
            _ => None,
        };
        let dims = Dims {
            vocab: c.vocab_size,
            dim: c.hidden_size,
            n_layers: c.num_hidden_layers,
            n_heads: c.num_attention_heads,
            n_kv_heads: c.num_key_value_heads.unwrap_or(c.num_attention_heads),
            head_dim: c.head_dim,
            ffn_dim: c.intermediate_size,
            rope_dims: None,
            context_length: c.max_position_embeddings.unwrap_or(2048),
        };
        let rest = Rest {
            arch,
            rms_eps: c.rms_norm_eps,
            rope_base: rope.base,
            rope_style: RopeStyle::Neox,
            rope_scaling: rope.scaling,
            attn_bias: arch == Arch::Qwen2 || c.attention_bias.unwrap_or(false),
            qk_norm: matches!(arch, Arch::Qwen3 | Arch::Gemma3),
            sliding_window,
            gemma: Gemma {
                local_layers: gemma.local_layers,
                attn_scale: gemma.attn_scale,
                attn_softcap: gemma.attn_softcap,
                final_softcap: gemma.final_softcap,
                rope_local_base: gemma.rope_local_base,
            },
        };
        Self::checked(dims, rest)
    }

    /// From the JSON a weft file carries (`weft.config`), checked like the other sources.
    pub fn from_weft_json(json: &str) -> Result<Self> {
        let c: LlamaConfig =
            serde_json::from_str(json).map_err(|e| bad_field("weft.config", format!("is not a model configuration: {e}")))?;
        let dims = Dims {
            vocab: c.vocab as u64,
            dim: c.dim as u64,
            n_layers: c.n_layers as u64,
            n_heads: c.n_heads as u64,
            n_kv_heads: c.n_kv_heads as u64,
            head_dim: Some(c.head_dim as u64),
            ffn_dim: c.ffn_dim as u64,
            rope_dims: Some(c.rope_dims as u64),
            context_length: c.context_length as u64,
        };
        let rest = Rest {
            arch: c.arch,
            rms_eps: c.rms_eps,
            rope_base: c.rope_base,
            rope_style: c.rope_style,
            rope_scaling: c.rope_scaling,
            attn_bias: c.attn_bias,
            qk_norm: c.qk_norm,
            sliding_window: c.sliding_window.map(|w| w as u64),
            gemma: Gemma {
                local_layers: c.local_layers,
                attn_scale: c.attn_scale,
                attn_softcap: c.attn_softcap,
                final_softcap: c.final_softcap,
                rope_local_base: c.rope_local_base,
            },
        };
        Self::checked(dims, rest)
    }

    /// The one check every source goes through: each dimension within its maximum, then the
    /// dimensions against each other, then every size derived from them computed without
    /// overflow, all before anything is sized from them.
    fn checked(d: Dims, r: Rest) -> Result<Self> {
        use limits::*;
        let n_heads = dim("n_heads (attention.head_count, num_attention_heads)", d.n_heads, MAX_HEADS)?;
        let model_dim = dim("dim (embedding_length, hidden_size)", d.dim, MAX_DIM)?;
        let head_dim_field = "head_dim (attention.key_length, head_dim)";
        let head_dim = match d.head_dim {
            Some(h) => h,
            None if !d.dim.is_multiple_of(d.n_heads) => {
                return Err(bad_field(head_dim_field, format!("is not given and dim {} is not a multiple of {n_heads} heads", d.dim)))
            }
            None => d.dim / d.n_heads,
        };
        let max_head_dim = crate::ops::attention::MAX_HEAD_DIM as u64;
        let head_dim = dim(head_dim_field, head_dim, max_head_dim)?;
        let c = Self {
            arch: r.arch,
            vocab: dim("vocab (vocab_size)", d.vocab, MAX_VOCAB)?,
            dim: model_dim,
            n_layers: dim("n_layers (block_count, num_hidden_layers)", d.n_layers, MAX_LAYERS)?,
            n_heads,
            n_kv_heads: dim("n_kv_heads (attention.head_count_kv, num_key_value_heads)", d.n_kv_heads, d.n_heads)?,
            head_dim,
            ffn_dim: dim("ffn_dim (feed_forward_length, intermediate_size)", d.ffn_dim, MAX_FFN)?,
            rms_eps: r.rms_eps,
            rope_base: r.rope_base,
            rope_dims: dim("rope_dims (rope.dimension_count)", d.rope_dims.unwrap_or(head_dim as u64), head_dim as u64)?,
            rope_style: r.rope_style,
            rope_scaling: r.rope_scaling,
            context_length: dim("context_length (context_length, max_position_embeddings)", d.context_length, MAX_CONTEXT)?,
            attn_bias: r.attn_bias,
            qk_norm: r.qk_norm,
            sliding_window: match r.sliding_window {
                Some(w) => Some(dim("sliding_window", w, MAX_CONTEXT)?),
                None => None,
            },
            local_layers: r.gemma.local_layers,
            attn_scale: r.gemma.attn_scale,
            attn_softcap: r.gemma.attn_softcap,
            final_softcap: r.gemma.final_softcap,
            rope_local_base: r.gemma.rope_local_base,
        };
        if c.rope_local_base.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
            return Err(bad_field("rope_local_base_freq", format!("= {:?} is not a finite positive number", c.rope_local_base)));
        }
        if !c.local_layers.is_empty() && (c.local_layers.len() != c.n_layers || c.sliding_window.is_none()) {
            return Err(bad_field("layer_types", format!("has {} entries for {} layers, or no sliding_window", c.local_layers.len(), c.n_layers)));
        }
        for (field, v) in [("attn_scale", c.attn_scale), ("attn_logit_softcapping", c.attn_softcap), ("final_logit_softcapping", c.final_softcap)] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(bad_field(field, format!("= {v:?} is not a finite positive number")));
            }
        }
        if !c.n_heads.is_multiple_of(c.n_kv_heads) {
            return Err(bad_field("n_kv_heads", format!("= {} does not divide n_heads = {}", c.n_kv_heads, c.n_heads)));
        }
        if !c.head_dim.is_multiple_of(2) || !c.rope_dims.is_multiple_of(2) {
            return Err(bad_field("head_dim", format!("= {} with rope_dims = {}: both must be even", c.head_dim, c.rope_dims)));
        }
        if !(c.rms_eps.is_finite() && c.rms_eps >= 0.0) {
            return Err(bad_field("rms_eps", format!("= {} is not a finite non-negative number", c.rms_eps)));
        }
        if !(c.rope_base.is_finite() && c.rope_base > 0.0) {
            return Err(bad_field("rope_base", format!("= {} is not a finite positive number", c.rope_base)));
        }
        let scaling_values = match &c.rope_scaling {
            RopeScaling::None => vec![],
            RopeScaling::Linear { factor } => vec![*factor],
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_context } => {
                vec![*factor, *low_freq_factor, *high_freq_factor, *original_context]
            }
            RopeScaling::Factors(f) => f.clone(),
            RopeScaling::LongRope { short, long, original_context, attention_factor } => {
                let pairs = c.rope_dims / 2;
                if [short.len(), long.len()].iter().any(|&n| n != 0 && n != pairs) {
                    return Err(bad_field("rope short_factor / long_factor", format!("need {pairs} values each, one per rotated pair")));
                }
                [short.as_slice(), long.as_slice(), &[*original_context, *attention_factor]].concat()
            }
        };
        if let Some(bad) = scaling_values.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(bad_field("rope scaling", format!("has {bad}, not a finite positive number")));
        }
        // Every matrix the model holds, as elements; each must be addressable on this platform.
        let q_dim = c.n_heads.checked_mul(c.head_dim);
        let kv_dim = c.n_kv_heads.checked_mul(c.head_dim);
        let matrices = [
            ("vocab x dim", Some(c.vocab), c.dim),
            ("q_dim x dim", q_dim, c.dim),
            ("kv_dim x dim", kv_dim, c.dim),
            ("ffn_dim x dim", Some(c.ffn_dim), c.dim),
            ("q_dim + 2 kv_dim", q_dim.zip(kv_dim).and_then(|(q, kv)| q.checked_add(kv.checked_mul(2)?)), c.dim),
            ("2 ffn_dim x dim", c.ffn_dim.checked_mul(2), c.dim),
            ("context x kv_dim", kv_dim, c.context_length),
        ];
        for (what, rows, cols) in matrices {
            if rows.and_then(|r| product(r, cols)).is_none() {
                return Err(bad_field(what, format!("overflows on this platform ({c:?})")));
            }
        }
        Ok(c)
    }

    /// The positions an engine's KV cache holds and its attention sinks, for the `max_seq` and
    /// `sinks` asked for. A sliding-window model holds at most its window and no sinks: past
    /// the window the cache is a ring of exactly the last `window` positions, which is the
    /// window's attention, so no kernel needs a mask.
    pub fn kv_window(&self, max_seq: usize, sinks: usize) -> (usize, usize) {
        let max_seq = max_seq.min(self.context_length).max(1);
        match self.sliding_window {
            Some(w) if self.local_layers.is_empty() => (max_seq.min(w), 0),
            // Windowed layers beside full ones: the kernels mask, reading positions from slots
            // as only a ring without sinks allows.
            Some(_) => (max_seq, 0),
            None => (max_seq, sinks),
        }
    }

    /// The attention window of layer `layer`, if it has one.
    pub fn window(&self, layer: usize) -> Option<usize> {
        let local = self.local_layers.get(layer).copied().unwrap_or(true);
        self.sliding_window.filter(|_| local)
    }

    /// Whether layer `layer` rotates with the local base (`rope_local_base`).
    pub fn local_rope(&self, layer: usize) -> bool {
        self.rope_local_base.is_some() && self.window(layer).is_some()
    }

    /// What queries are scaled by before the dot products.
    pub fn attention_scale(&self) -> f32 {
        self.attn_scale.unwrap_or(1.0 / (self.head_dim as f32).sqrt())
    }

    /// Heads × head_dim; cannot overflow for a validated configuration.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// KV heads × head_dim; cannot overflow for a validated configuration.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}

#[derive(Deserialize)]
struct HfConfig {
    // u64 rather than usize: the same file reads the same on 32-bit targets, and the range
    // check happens in one place.
    vocab_size: u64,
    hidden_size: u64,
    intermediate_size: u64,
    num_hidden_layers: u64,
    num_attention_heads: u64,
    num_key_value_heads: Option<u64>,
    head_dim: Option<u64>,
    rms_norm_eps: f32,
    max_position_embeddings: Option<u64>,
    attention_bias: Option<bool>,
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
