//! Converting a model to weft's formats: every matrix quantized by a plan, everything else kept
//! as f32, written as a self-contained safetensors file (docs/FORMAT.md).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::writer::SafetensorsWriter;
use crate::format::{ModelHeader, SafeDtype, TensorInfo};
use crate::loader::RangeReader;
use crate::quant::decode_to_f32;
use crate::quant::weft::{quantize, Scheme, WeftQuant};
use crate::tokenizer::Tokenizer;

use super::budget::{relative_sq_error, role_weight, Candidate, TensorChoices};
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

/// Whether the tensor is one of the model's weight matrices (the tensors weft quantizes).
pub fn is_matrix(name: &str) -> bool {
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

/// The candidates of the budget planner: for each matrix not fixed by a keep rule, its bytes
/// and predicted error at every weft bit width in the plan's group and scheme; and the bytes of
/// everything else (float tensors, matrices a keep rule fixes).
pub async fn budget_choices<R: RangeReader>(
    reader: &R,
    header: &ModelHeader,
    plan: &QuantizePlan,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<TensorChoices>, u64)> {
    let tensors: Vec<&TensorInfo> = header.tensors().iter().filter(|t| part_of(&t.name).is_some()).collect();
    let (mut choices, mut fixed) = (Vec::new(), 0u64);
    for (i, t) in tensors.iter().enumerate() {
        let kept = plan.keep.iter().find(|r| t.name.contains(&r.pattern)).map(|r| r.bits);
        match (&t.shape[..], is_matrix(&t.name), kept) {
            (&[rows, cols], true, None) => {
                let (rows, cols) = (rows as usize, cols as usize);
                let values = decode_to_f32(t.storage, &reader.read_range(t.range.clone()).await?, rows * cols)?;
                let mut candidates = Vec::new();
                for bits in crate::quant::weft::BITS {
                    let q = WeftQuant::new(bits, plan.default.group, plan.default.scheme)?;
                    let m = quantize(q, &values, rows, cols)?;
                    let error = role_weight(&t.name) * relative_sq_error(&values, &m.dequantize());
                    candidates.push(Candidate { bits, bytes: m.bytes() as u64, error });
                }
                choices.push(TensorChoices { name: t.name.clone(), candidates });
            }
            (&[rows, cols], true, Some(bits @ (2 | 3 | 4 | 8))) => {
                let q = WeftQuant::new(bits, plan.default.group, plan.default.scheme)?;
                let (rows, cols) = (rows as usize, cols as usize);
                fixed += (rows * q.words_per_row(cols) * 4) as u64
                    + (rows * q.groups_per_row(cols) * if q.scheme == Scheme::Asym { 4 } else { 2 }) as u64;
            }
            (_, true, Some(16)) => fixed += t.elements() * 2,
            _ => fixed += t.elements() * 4,
        }
        progress(i + 1, tensors.len());
    }
    Ok((choices, fixed))
}

/// Decodes every tensor of a model file to f32 under its original name (a weft matrix `W`
/// stored as `W.weft_q`, `W.weft_scale`, `W.weft_zero` becomes `W`), keeping a safetensors
/// file's metadata except the `weft.q.*` entries, which no longer apply.
pub async fn dequantize_model<R: RangeReader>(
    reader: &R,
    header: &ModelHeader,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<SafetensorsWriter> {
    let entries = super::load::weft_entries(header)?;
    let mut out = SafetensorsWriter::default();
    if let ModelHeader::Safetensors(st) = header {
        out.metadata.extend(st.metadata.iter().filter(|(k, _)| !k.starts_with("weft.q.")).map(|(k, v)| (k.clone(), v.clone())));
    }
    let companions: std::collections::HashSet<&str> =
        entries.values().flat_map(|e| std::iter::once(&e.scale).chain(&e.zero)).map(|t| t.name.as_str()).collect();
    let tensors: Vec<&TensorInfo> = header.tensors().iter().filter(|t| !companions.contains(t.name.as_str())).collect();
    for (i, t) in tensors.iter().enumerate() {
        let bytes = reader.read_range(t.range.clone()).await?;
        match entries.get(&t.name) {
            Some(e) => {
                let scales = reader.read_range(e.scale.range.clone()).await?;
                let zeros = match &e.zero {
                    Some(z) => Some(reader.read_range(z.range.clone()).await?),
                    None => None,
                };
                let m = e.matrix(&t.name, &bytes, &scales, zeros.as_deref())?;
                let name = t.name.trim_end_matches(".weft_q");
                out.add(name, SafeDtype::F32, &[m.rows as u64, m.cols as u64], floats(&m.dequantize()))?;
            }
            None => {
                let values = decode_to_f32(t.storage, &bytes, t.elements() as usize)?;
                out.add(&t.name, SafeDtype::F32, &t.shape, floats(&values))?;
            }
        }
        progress(i + 1, tensors.len());
    }
    Ok(out)
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
