//! A BERT-family encoder's configuration, from a Hugging Face `config.json`.

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab: usize,
    pub dim: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub ffn_dim: usize,
    /// Position embeddings: the longest sequence the model reads.
    pub max_positions: usize,
    pub type_vocab: usize,
    pub eps: f32,
}

impl BertConfig {
    pub fn head_dim(&self) -> usize {
        self.dim / self.n_heads
    }

    pub fn from_hf_json(text: &str) -> Result<Self> {
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::BadConfig { field: "config.json".into(), problem: e.to_string() })?;
        let model_type = doc["model_type"].as_str().unwrap_or("");
        if model_type != "bert" {
            return Err(Error::UnsupportedModel {
                what: format!("encoder model_type '{model_type}'"),
                hint: "only model_type \"bert\" is implemented".into(),
            });
        }
        let act = doc["hidden_act"].as_str().unwrap_or("gelu");
        if act != "gelu" {
            return Err(Error::UnsupportedModel { what: format!("hidden_act '{act}'"), hint: "BERT encoders use gelu (erf)".into() });
        }
        if let Some(p) = doc["position_embedding_type"].as_str().filter(|p| *p != "absolute") {
            return Err(Error::UnsupportedModel { what: format!("position_embedding_type '{p}'"), hint: "only absolute".into() });
        }
        let size = |key: &str| -> Result<usize> {
            let v = doc[key].as_u64().ok_or_else(|| Error::BadConfig { field: key.into(), problem: "is missing".into() })?;
            if v == 0 || v > 1 << 20 {
                return Err(Error::BadConfig { field: key.into(), problem: format!("is {v}") });
            }
            Ok(v as usize)
        };
        let c = Self {
            vocab: size("vocab_size")?,
            dim: size("hidden_size")?,
            n_layers: size("num_hidden_layers")?,
            n_heads: size("num_attention_heads")?,
            ffn_dim: size("intermediate_size")?,
            max_positions: size("max_position_embeddings")?,
            type_vocab: doc["type_vocab_size"].as_u64().unwrap_or(2).max(1) as usize,
            eps: doc["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
        };
        if !c.dim.is_multiple_of(c.n_heads) {
            return Err(Error::BadConfig {
                field: "hidden_size".into(),
                problem: format!("{} is not a multiple of num_attention_heads {}", c.dim, c.n_heads),
            });
        }
        Ok(c)
    }
}
