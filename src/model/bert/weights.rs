//! The encoder's weights from a Hugging Face BERT safetensors file, read through a
//! `RangeReader` (file, HTTP Range requests, the browser's cached fetch). Float matrices may be
//! quantized to a weft format while loading, as the LLM loader does; embeddings, LayerNorms
//! and biases stay f32.

use std::collections::HashMap;

use crate::cpu::matrix::CpuMatrix;
use crate::error::{Error, Result};
use crate::format::{ModelHeader, TensorInfo};
use crate::loader::{read_header, RangeReader};
use crate::model::convert::KeepRule;
use crate::quant::decode_to_f32;
use crate::quant::weft::{quantize, WeftQuant};

use super::config::BertConfig;
use super::forward::{LayerWeight, Weight};

/// A matrix and its bias, or a LayerNorm's scale and shift.
pub struct Affine<M> {
    pub w: M,
    pub b: Vec<f32>,
}

pub struct BertWeights {
    /// [vocab, dim], [max_positions, dim], [type_vocab, dim].
    pub word: CpuMatrix,
    pub position: Vec<f32>,
    pub token_type: Vec<f32>,
    pub norms: HashMap<Weight, Affine<Vec<f32>>>,
    pub linears: HashMap<Weight, Affine<CpuMatrix>>,
}

impl BertWeights {
    pub fn norm(&self, w: Weight) -> Result<&Affine<Vec<f32>>> {
        self.norms.get(&w).ok_or_else(|| Error::Model(format!("no LayerNorm {w:?}")))
    }

    pub fn linear(&self, w: Weight) -> Result<&Affine<CpuMatrix>> {
        self.linears.get(&w).ok_or_else(|| Error::Model(format!("no matrix {w:?}")))
    }

    /// Bits a weight of the block matrices take in their formats (32 for f32).
    pub fn matrix_bits(&self) -> f64 {
        let weights: usize = self.linears.values().map(|a| a.w.rows * a.w.cols).sum();
        let bytes: u64 = self.linears.values().map(|a| a.w.bytes()).sum();
        8.0 * bytes as f64 / weights.max(1) as f64
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        let floats = self.position.len() + self.token_type.len();
        let norms: usize = self.norms.values().map(|a| a.w.len() + a.b.len()).sum();
        let biases: usize = self.linears.values().map(|a| a.b.len()).sum();
        let matrices: u64 = self.linears.values().map(|a| a.w.bytes()).sum();
        self.word.bytes() + matrices + 4 * (floats + norms + biases) as u64
    }
}

/// The Hugging Face name of a layer part (without the `bert.` prefix some checkpoints add).
fn layer_name(l: usize, part: LayerWeight) -> String {
    let p = match part {
        LayerWeight::Q => "attention.self.query",
        LayerWeight::K => "attention.self.key",
        LayerWeight::V => "attention.self.value",
        LayerWeight::O => "attention.output.dense",
        LayerWeight::AttnNorm => "attention.output.LayerNorm",
        LayerWeight::Up => "intermediate.dense",
        LayerWeight::Down => "output.dense",
        LayerWeight::OutNorm => "output.LayerNorm",
    };
    format!("encoder.layer.{l}.{p}")
}

pub async fn load<R: RangeReader>(
    reader: &R,
    c: &BertConfig,
    quant: Option<WeftQuant>,
    keep: &[KeepRule],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<BertWeights> {
    let header = read_header(reader).await?.header;
    let ModelHeader::Safetensors(st) = &header else {
        return Err(Error::Model(format!("{}: an encoder is read from model.safetensors", reader.name())));
    };
    let infos: HashMap<&str, &TensorInfo> =
        st.tensors.iter().map(|t| (t.name.strip_prefix("bert.").unwrap_or(&t.name), t)).collect();
    let total = reader.len();
    let mut loaded = 0u64;
    let mut read = async |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
        let t = infos.get(name).ok_or_else(|| Error::MissingTensor { name: name.to_string() })?;
        let want: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        if t.shape != want {
            return Err(Error::TensorShape { name: t.name.clone(), shape: t.shape.clone(), expected: want });
        }
        let bytes = reader.read_range(t.range.clone()).await?;
        loaded += bytes.len() as u64;
        progress(loaded, total);
        decode_to_f32(t.storage, &bytes, shape.iter().product())
    };
    let (d, f) = (c.dim, c.ffn_dim);
    let word = read("embeddings.word_embeddings.weight", &[c.vocab, d]).await?;
    let position = read("embeddings.position_embeddings.weight", &[c.max_positions, d]).await?;
    let token_type = read("embeddings.token_type_embeddings.weight", &[c.type_vocab, d]).await?;
    let mut norms = HashMap::new();
    let mut linears = HashMap::new();
    norms.insert(
        Weight::EmbedNorm,
        Affine { w: read("embeddings.LayerNorm.weight", &[d]).await?, b: read("embeddings.LayerNorm.bias", &[d]).await? },
    );
    for l in 0..c.n_layers {
        for (part, rows, cols) in [
            (LayerWeight::Q, d, d),
            (LayerWeight::K, d, d),
            (LayerWeight::V, d, d),
            (LayerWeight::O, d, d),
            (LayerWeight::Up, f, d),
            (LayerWeight::Down, d, f),
        ] {
            let name = layer_name(l, part);
            let w = read(&format!("{name}.weight"), &[rows, cols]).await?;
            let b = read(&format!("{name}.bias"), &[rows]).await?;
            let format = match (quant, keep.iter().find(|r| name.contains(&r.pattern))) {
                (Some(q), Some(rule)) => rule.quant(q)?,
                (q, _) => q,
            };
            let w = match format {
                Some(q) => CpuMatrix::from_weft(quantize(q, &w, rows, cols)?),
                None => CpuMatrix::from_f32(rows, cols, &w),
            };
            linears.insert(Weight::Layer(l, part), Affine { w, b });
        }
        for part in [LayerWeight::AttnNorm, LayerWeight::OutNorm] {
            let name = layer_name(l, part);
            let w = read(&format!("{name}.weight"), &[d]).await?;
            let b = read(&format!("{name}.bias"), &[d]).await?;
            norms.insert(Weight::Layer(l, part), Affine { w, b });
        }
    }
    Ok(BertWeights { word: CpuMatrix::from_f32(c.vocab, d, &word), position, token_type, norms, linears })
}
