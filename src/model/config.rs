//! Model hyper-parameters, from GGUF metadata or a Hugging Face `config.json`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::gguf::GgufMetadata;
use crate::ops::rope::{RopeScaling, RopeStyle};

/// Decoder-only transformer families weft runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama, SmolLM, TinyLlama, Mistral (no attention biases unless configured).
    Llama,
    /// Qwen2: biases on the q, k and v projections.
    Qwen2,
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
}

fn bad(message: String) -> Error {
    Error::Model(message)
}

impl LlamaConfig {
    /// From GGUF metadata. `has_qkv_bias` says whether the file holds `blk.0.attn_q.bias`.
    pub fn from_gguf(meta: &GgufMetadata, has_qkv_bias: bool) -> Result<Self> {
        let arch_name = meta.get_str("general.architecture")?;
        let arch = match arch_name {
            "llama" | "mistral" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            other => return Err(bad(format!("architecture '{other}' is not supported (llama, qwen2)"))),
        };
        let key = |k: &str| format!("{arch_name}.{k}");
        let n_heads = meta.get_u32(&key("attention.head_count"))? as usize;
        let dim = meta.get_u32(&key("embedding_length"))? as usize;
        let n_kv_heads = match meta.get(&key("attention.head_count_kv")) {
            Some(_) => meta.get_u32(&key("attention.head_count_kv"))? as usize,
            None => n_heads,
        };
        let head_dim = match meta.get(&key("attention.key_length")) {
            Some(_) => meta.get_u32(&key("attention.key_length"))? as usize,
            None => dim / n_heads.max(1),
        };
        let vocab = match meta.get(&key("vocab_size")) {
            Some(_) => meta.get_u32(&key("vocab_size"))? as usize,
            None => meta.get_str_array("tokenizer.ggml.tokens")?.len(),
        };
        let rope_scaling = match meta.get_str(&key("rope.scaling.type")) {
            Ok("linear") => RopeScaling::Linear { factor: meta.get_f32(&key("rope.scaling.factor"))? },
            Ok("none") | Err(_) => RopeScaling::None,
            Ok(other) => return Err(bad(format!("rope scaling '{other}' is not supported"))),
        };
        let config = Self {
            arch,
            vocab,
            dim,
            n_layers: meta.get_u32(&key("block_count"))? as usize,
            n_heads,
            n_kv_heads,
            head_dim,
            ffn_dim: meta.get_u32(&key("feed_forward_length"))? as usize,
            rms_eps: meta.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            rope_base: meta.get_f32(&key("rope.freq_base")).unwrap_or(10000.0),
            rope_dims: match meta.get(&key("rope.dimension_count")) {
                Some(_) => meta.get_u32(&key("rope.dimension_count"))? as usize,
                None => head_dim,
            },
            // llama.cpp's converter permutes llama Q/K rows for interleaved pairs; Qwen2 keeps
            // the Hugging Face layout.
            rope_style: match arch {
                Arch::Llama => RopeStyle::Norm,
                Arch::Qwen2 => RopeStyle::Neox,
            },
            rope_scaling,
            context_length: meta.get_u32(&key("context_length")).unwrap_or(2048) as usize,
            attn_bias: has_qkv_bias,
        };
        config.validate()
    }

    /// From a Hugging Face `config.json`.
    pub fn from_hf_json(json: &str) -> Result<Self> {
        let c: HfConfig = serde_json::from_str(json).map_err(|e| bad(format!("config.json: {e}")))?;
        let arch = match c.model_type.as_str() {
            "llama" | "mistral" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            other => return Err(bad(format!("model_type '{other}' is not supported (llama, qwen2)"))),
        };
        let head_dim = c.head_dim.unwrap_or(c.hidden_size / c.num_attention_heads.max(1));
        let rope_scaling = match &c.rope_scaling {
            Some(s) if s.kind() == "linear" => RopeScaling::Linear { factor: s.factor.unwrap_or(1.0) },
            Some(s) if s.kind() == "default" => RopeScaling::None,
            Some(s) => return Err(bad(format!("rope scaling '{}' is not supported", s.kind()))),
            None => RopeScaling::None,
        };
        let config = Self {
            arch,
            vocab: c.vocab_size,
            dim: c.hidden_size,
            n_layers: c.num_hidden_layers,
            n_heads: c.num_attention_heads,
            n_kv_heads: c.num_key_value_heads.unwrap_or(c.num_attention_heads),
            head_dim,
            ffn_dim: c.intermediate_size,
            rms_eps: c.rms_norm_eps,
            rope_base: c.rope_theta.unwrap_or(10000.0),
            rope_dims: head_dim,
            rope_style: RopeStyle::Neox,
            rope_scaling,
            context_length: c.max_position_embeddings.unwrap_or(2048),
            attn_bias: arch == Arch::Qwen2 || c.attention_bias.unwrap_or(false),
        };
        config.validate()
    }

    fn validate(self) -> Result<Self> {
        let ok = self.vocab > 0
            && self.dim > 0
            && self.n_layers > 0
            && self.n_heads > 0
            && self.n_kv_heads > 0
            && self.n_heads.is_multiple_of(self.n_kv_heads)
            && self.head_dim > 0
            && self.head_dim.is_multiple_of(2)
            && self.head_dim <= crate::ops::attention::MAX_HEAD_DIM
            && self.rope_dims <= self.head_dim
            && self.rope_dims.is_multiple_of(2)
            && self.ffn_dim > 0
            && self.rms_eps.is_finite()
            && self.rope_base > 0.0;
        if !ok {
            return Err(bad(format!("inconsistent model configuration: {self:?}")));
        }
        Ok(self)
    }

    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}

#[derive(Deserialize)]
struct HfConfig {
    model_type: String,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    rms_norm_eps: f32,
    rope_theta: Option<f32>,
    rope_scaling: Option<HfRopeScaling>,
    max_position_embeddings: Option<usize>,
    attention_bias: Option<bool>,
}

#[derive(Deserialize)]
struct HfRopeScaling {
    #[serde(rename = "type")]
    kind: Option<String>,
    rope_type: Option<String>,
    factor: Option<f32>,
}

impl HfRopeScaling {
    fn kind(&self) -> &str {
        self.rope_type.as_deref().or(self.kind.as_deref()).unwrap_or("default")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_config_for_a_qwen2_shape() {
        let json = r#"{"model_type":"qwen2","vocab_size":151936,"hidden_size":896,
            "intermediate_size":4864,"num_hidden_layers":24,"num_attention_heads":14,
            "num_key_value_heads":2,"rms_norm_eps":1e-6,"rope_theta":1000000.0,
            "max_position_embeddings":32768,"tie_word_embeddings":true}"#;
        let c = LlamaConfig::from_hf_json(json).unwrap();
        assert_eq!((c.arch, c.head_dim, c.kv_dim(), c.rope_style), (Arch::Qwen2, 64, 128, RopeStyle::Neox));
        assert!(c.attn_bias);
    }

    #[test]
    fn inconsistent_configs_are_errors() {
        let json = r#"{"model_type":"llama","vocab_size":10,"hidden_size":64,"intermediate_size":128,
            "num_hidden_layers":2,"num_attention_heads":3,"num_key_value_heads":2,"rms_norm_eps":1e-5}"#;
        assert!(LlamaConfig::from_hf_json(json).is_err());
        assert!(LlamaConfig::from_hf_json(r#"{"model_type":"gpt2"}"#).is_err());
    }
}
