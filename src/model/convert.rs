//! Converting a model to weft's formats: every matrix quantized by a plan, everything else kept
//! as f32, written as a self-contained safetensors file (docs/FORMAT.md).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::writer::SafetensorsWriter;
use crate::format::{ModelHeader, SafeDtype, TensorInfo};
use crate::loader::RangeReader;
use crate::quant::decode_to_f32;
use crate::quant::weft::{quantize, WeftQuant};
use crate::tokenizer::Tokenizer;

use super::config::LlamaConfig;
use super::names::{part_of, LayerPart, Part};
use super::{WEFT_CONFIG_KEY, WEFT_TOKENIZER_KEY, WEFT_VERSION_KEY};

/// `PATTERN=BITS`: tensors whose name contains PATTERN get BITS (2, 3, 4, 8; 16 or 32 keep
/// them as f16 or f32).
#[derive(Clone, Debug, PartialEq)]
pub struct KeepRule {
    pub pattern: String,
    pub bits: u32,
}

impl KeepRule {
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::Model(format!("'{text}' is not PATTERN=BITS with BITS one of 2, 3, 4, 8, 16, 32"));
        let (pattern, bits) = text.rsplit_once('=').ok_or_else(bad)?;
        let bits: u32 = bits.parse().map_err(|_| bad())?;
        if pattern.is_empty() || ![2, 3, 4, 8, 16, 32].contains(&bits) {
            return Err(bad());
        }
        Ok(Self { pattern: pattern.to_string(), bits })
    }
}

#[derive(Clone, Debug)]
pub struct QuantizePlan {
    pub default: WeftQuant,
    pub keep: Vec<KeepRule>,
}

/// What became of one tensor.
#[derive(Clone, Debug, Serialize)]
pub struct TensorReport {
    pub name: String,
    pub format: String,
    pub elements: u64,
    pub bytes: u64,
    pub bits_per_weight: f64,
    /// Root-mean-square difference between the source values and what weft decodes.
    pub rms_error: f64,
}

fn is_matrix(name: &str) -> bool {
    matches!(
        part_of(name),
        Some(Part::Embedding | Part::Output)
            | Some(Part::Layer(
                _,
                LayerPart::Q | LayerPart::K | LayerPart::V | LayerPart::AttnOut | LayerPart::Gate | LayerPart::Up | LayerPart::Down
            ))
    )
}

fn rms(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    (sum / a.len().max(1) as f64).sqrt()
}

fn floats(values: &[f32]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

/// Quantizes every tensor of the model read through `reader` and returns the file to write
/// and a report per tensor. `progress(done, total)` counts tensors.
pub async fn quantize_model<R: RangeReader>(
    reader: &R,
    header: &ModelHeader,
    config: &LlamaConfig,
    tokenizer: &Tokenizer,
    plan: &QuantizePlan,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(SafetensorsWriter, Vec<TensorReport>)> {
    let mut out = SafetensorsWriter::default();
    let mut reports = Vec::new();
    let tensors: Vec<&TensorInfo> = header.tensors().iter().filter(|t| part_of(&t.name).is_some()).collect();
    for (i, t) in tensors.iter().enumerate() {
        let elements = t.elements();
        let values = decode_to_f32(t.storage, &reader.read_range(t.range.clone()).await?, elements as usize)?;
        let bits = plan.keep.iter().find(|r| t.name.contains(&r.pattern)).map_or(plan.default.bits, |r| r.bits);
        let (format, bytes, decoded) = match (&t.shape[..], is_matrix(&t.name), bits) {
            (&[rows, cols], true, 2 | 3 | 4 | 8) => {
                let (rows, cols) = (rows as usize, cols as usize);
                let q = WeftQuant::new(bits, plan.default.group, plan.default.scheme)?;
                let m = quantize(q, &values, rows, cols)?;
                let decoded = m.dequantize();
                let meta = serde_json::json!({ "format": q.name(), "shape": [rows, cols] });
                out.metadata.insert(format!("weft.q.{}", t.name), meta.to_string());
                let words = m.words.len() as u64;
                let groups = m.scales.len() as u64;
                out.add(&format!("{}.weft_q", t.name), SafeDtype::U32, &[rows as u64, words / rows as u64], bytemuck::cast_slice(&m.words).to_vec())?;
                out.add(&format!("{}.weft_scale", t.name), SafeDtype::F16, &[rows as u64, groups / rows as u64], bytemuck::cast_slice(&m.scales).to_vec())?;
                if !m.zeros.is_empty() {
                    out.add(&format!("{}.weft_zero", t.name), SafeDtype::F16, &[rows as u64, groups / rows as u64], bytemuck::cast_slice(&m.zeros).to_vec())?;
                }
                (q.name(), m.bytes() as u64, decoded)
            }
            (_, true, 16) => {
                let halves: Vec<u16> = values.iter().map(|&v| half::f16::from_f32(v).to_bits()).collect();
                let decoded: Vec<f32> = halves.iter().map(|&h| half::f16::from_bits(h).to_f32()).collect();
                out.add(&t.name, SafeDtype::F16, &t.shape, bytemuck::cast_slice(&halves).to_vec())?;
                ("F16".to_string(), elements * 2, decoded)
            }
            _ => {
                out.add(&t.name, SafeDtype::F32, &t.shape, floats(&values))?;
                ("F32".to_string(), elements * 4, values.clone())
            }
        };
        reports.push(TensorReport {
            name: t.name.clone(),
            format,
            elements,
            bytes,
            bits_per_weight: bytes as f64 * 8.0 / elements.max(1) as f64,
            rms_error: rms(&values, &decoded),
        });
        progress(i + 1, tensors.len());
    }
    let mut spec = tokenizer.spec().clone();
    spec.eos = tokenizer.eos;
    out.metadata.insert(WEFT_VERSION_KEY.into(), "1".into());
    out.metadata.insert(WEFT_CONFIG_KEY.into(), serde_json::to_string(config).map_err(|e| Error::Model(e.to_string()))?);
    out.metadata.insert(WEFT_TOKENIZER_KEY.into(), serde_json::to_string(&spec).map_err(|e| Error::Model(e.to_string()))?);
    Ok((out, reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_rules_parse() {
        assert_eq!(KeepRule::parse("token_embd=8").unwrap(), KeepRule { pattern: "token_embd".into(), bits: 8 });
        assert!(KeepRule::parse("x=5").is_err());
        assert!(KeepRule::parse("=4").is_err());
        assert!(KeepRule::parse("attn").is_err());
    }
}
