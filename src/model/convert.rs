//! Converting a model to weft's formats: every matrix quantized by a plan, everything else kept
//! as f32, written as a self-contained safetensors file (docs/FORMAT.md).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::writer::SafetensorsWriter;
use crate::format::{ModelHeader, SafeDtype, TensorInfo};
use crate::loader::RangeReader;
use crate::quant::calibration::Calibration;
use crate::quant::decode_to_f32;
use crate::quant::gptq::Factor;
use crate::quant::weft::{quantize_weighted, QuantMatrix, Scheme, WeftQuant, Weights};
use crate::tokenizer::Tokenizer;

use super::budget::{relative_sq_error, role_weight, Candidate, TensorChoices};
use super::config::LlamaConfig;
use super::names::{part_of, LayerPart, Part};
use super::{WEFT_CONFIG_KEY, WEFT_TOKENIZER_KEY, WEFT_VERSION_KEY};

/// Keep rules used when none are given and no budget is set: the token embedding (and an untied
/// Hugging Face output head) at 8 bits. On SmolLM2-135M at q4_g32_asym this cut the mean KLD
/// from 0.069 to 0.00025 for 14 MB more; attention values at 8 bits changed nothing
/// (docs/QUALITY.md, "Default keep rules"). Patterns are substrings, so a GGUF's untied
/// `output.weight` is not named here: the pattern would also match every `attn_output.weight`.
pub const DEFAULT_KEEP: &[&str] = &["token_embd=8", "embed_tokens=8", "lm_head=8"];

/// The keep rules a quantization applies: the user's; without any, the defaults, except under a
/// size budget, where the planner decides every tensor (an 8-bit embedding alone is 30 MB of an
/// 85 MB SmolLM2 budget, and the planner prices it by its measured sensitivity anyway).
pub fn keep_rules(user: &[String], no_default_keep: bool, budgeted: bool) -> Vec<String> {
    if user.is_empty() && !no_default_keep && !budgeted {
        DEFAULT_KEEP.iter().map(|s| s.to_string()).collect()
    } else {
        user.to_vec()
    }
}

/// The format matrix `name` gets when quantized to `default` under the default keep rules
/// (what `weft quantize` writes without options); None keeps it in floats.
pub fn default_keep_format(name: &str, default: WeftQuant) -> Result<Option<WeftQuant>> {
    let keep = DEFAULT_KEEP.iter().map(|r| KeepRule::parse(r)).collect::<Result<_>>()?;
    let plan = QuantizePlan::new(default, keep);
    plan.rule(name).map_or(Ok(Some(default)), |r| r.quant(default))
}

/// `PATTERN=BITS`: tensors whose name contains PATTERN get BITS (2, 3, 4, 8 in the plan's group
/// and scheme; 16 or 32 keep them as f16 or f32). `PATTERN=FORMAT` (`q2_g64_sym`) names the
/// whole format.
#[derive(Clone, Debug, PartialEq)]
pub struct KeepRule {
    pub pattern: String,
    pub bits: u32,
    pub format: Option<WeftQuant>,
}

impl KeepRule {
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::Model(format!("'{text}' is not PATTERN=BITS with BITS one of 2, 3, 4, 8, 16, 32, or PATTERN=FORMAT"));
        let (pattern, what) = text.rsplit_once('=').ok_or_else(bad)?;
        if pattern.is_empty() {
            return Err(bad());
        }
        if let Ok(format) = WeftQuant::parse(what) {
            return Ok(Self::format(pattern, format));
        }
        let bits: u32 = what.parse().map_err(|_| bad())?;
        if ![2, 3, 4, 8, 16, 32].contains(&bits) {
            return Err(bad());
        }
        Ok(Self { pattern: pattern.to_string(), bits, format: None })
    }

    /// A rule fixing a whole weft format.
    pub fn format(pattern: &str, format: WeftQuant) -> Self {
        Self { pattern: pattern.to_string(), bits: format.bits, format: Some(format) }
    }

    /// The weft format this rule gives a matrix (None: a float rule).
    pub fn quant(&self, default: WeftQuant) -> Result<Option<WeftQuant>> {
        match (self.format, self.bits) {
            (Some(f), _) => Ok(Some(f)),
            (None, bits @ (2 | 3 | 4 | 8)) => {
                // The `k` scheme's zero-point codes stop at 4 bits: 8 bits keep f16 parameters.
                let scheme = if default.scheme == Scheme::K && bits > 4 { Scheme::Asym } else { default.scheme };
                Ok(Some(WeftQuant::new(bits, default.group, scheme)?))
            }
            _ => Ok(None),
        }
    }
}

#[derive(Clone, Debug)]
pub struct QuantizePlan {
    pub default: WeftQuant,
    pub keep: Vec<KeepRule>,
    /// Input statistics that weigh each column's rounding error (`weft calibrate`).
    pub calibration: Option<Calibration>,
    /// With a calibration: also compensate each row's rounding error along the mean input
    /// (`quant::search::compensate`).
    pub compensate: bool,
    /// With a calibration that has Hessians: round by GPTQ (`quant::gptq`).
    pub gptq: bool,
    /// Store `k` matrices entropy-coded (`quant::kcode::encode_coded`): smaller files, decoded
    /// at load.
    pub entropy: bool,
}

impl QuantizePlan {
    pub fn new(default: WeftQuant, keep: Vec<KeepRule>) -> Self {
        Self { default, keep, calibration: None, compensate: false, gptq: false, entropy: false }
    }

    fn rule(&self, name: &str) -> Option<&KeepRule> {
        self.keep.iter().find(|r| name.contains(&r.pattern))
    }

    /// The GPTQ factor of matrix `name` of `cols` columns, when the plan rounds by GPTQ and the
    /// calibration has its input's Hessian (computed once per matrix: every candidate format of
    /// the budget planner reuses it).
    fn factor(&self, name: &str, cols: usize) -> Result<Option<Factor>> {
        let Some(cal) = self.calibration.as_ref().filter(|_| self.gptq) else { return Ok(None) };
        match cal.stats_for(name, cols)?.and_then(|s| s.hessian.as_ref()) {
            Some(h) => Factor::new(h, cols).map(Some),
            None => Ok(None),
        }
    }

    /// The calibration's column statistics for matrix `name` of `cols` columns, if it has them
    /// (statistics of another width are an error: they were measured on another model).
    fn importance<'a>(&'a self, name: &str, cols: usize, factor: Option<&'a Factor>) -> Result<Option<Weights<'a>>> {
        let Some(cal) = &self.calibration else { return Ok(None) };
        Ok(cal.stats_for(name, cols)?.map(|stats| Weights {
            mean_sq: &stats.mean_sq,
            mean: self.compensate.then_some(&stats.mean[..]),
            gptq: factor,
        }))
    }
}

/// The formats the budget planner chooses among: every bit width in the plan's group and scheme,
/// the symmetric group-64 formats at 2 and 3 bits (2.25 and 3.25 bits/weight, the smallest
/// grids that divide 576- and 960-wide rows), which take SmolLM2-135M down to ~40 MB, and the
/// `k` formats at 2, 3 and 4 bits in the plan's group (0.5 bits/weight less than `asym` at
/// group 32, on nearly the same grid).
pub fn budget_formats(default: WeftQuant) -> Vec<WeftQuant> {
    let mut out: Vec<WeftQuant> =
        crate::quant::weft::BITS.iter().filter_map(|&b| WeftQuant::new(b, default.group, default.scheme).ok()).collect();
    let extra = [(2, 64, Scheme::Sym), (3, 64, Scheme::Sym), (2, default.group, Scheme::K), (3, default.group, Scheme::K), (4, default.group, Scheme::K)];
    for (bits, group, scheme) in extra {
        if let Ok(q) = WeftQuant::new(bits, group, scheme) {
            if !out.contains(&q) {
                out.push(q);
            }
        }
    }
    out
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
        let rule = plan.rule(&t.name);
        let bits = rule.map_or(plan.default.bits, |r| r.bits);
        let quant = match rule {
            Some(r) => r.quant(plan.default)?,
            None => Some(plan.default),
        };
        let (format, bytes, decoded) = match (&t.shape[..], is_matrix(&t.name), quant) {
            (&[rows, cols], true, Some(q)) => {
                let (rows, cols) = (rows as usize, cols as usize);
                let factor = plan.factor(&t.name, cols)?;
                let m = quantize_weighted(q, &values, rows, cols, plan.importance(&t.name, cols, factor.as_ref())?)?;
                let decoded = m.dequantize();
                let bytes = write_matrix(&mut out, &t.name, q, &m, plan.entropy)?;
                (q.name(), bytes, decoded)
            }
            (_, true, None) if bits == 16 => {
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
/// and predicted error in every [`budget_formats`] format (quantized with the calibration when the
/// plan has one); and the bytes of everything else (float tensors, matrices a keep rule fixes).
pub async fn budget_choices<R: RangeReader>(
    reader: &R,
    header: &ModelHeader,
    plan: &QuantizePlan,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<TensorChoices>, u64)> {
    let tensors: Vec<&TensorInfo> = header.tensors().iter().filter(|t| part_of(&t.name).is_some()).collect();
    let (mut choices, mut fixed) = (Vec::new(), 0u64);
    for (i, t) in tensors.iter().enumerate() {
        let rule = plan.rule(&t.name);
        let kept = rule.map(|r| r.quant(plan.default)).transpose()?;
        match (&t.shape[..], is_matrix(&t.name), kept) {
            (&[rows, cols], true, None) => {
                let (rows, cols) = (rows as usize, cols as usize);
                let values = decode_to_f32(t.storage, &reader.read_range(t.range.clone()).await?, rows * cols)?;
                let factor = plan.factor(&t.name, cols)?;
                let importance = plan.importance(&t.name, cols, factor.as_ref())?;
                let mut candidates = Vec::new();
                for q in budget_formats(plan.default) {
                    let m = quantize_weighted(q, &values, rows, cols, importance)?;
                    // The role weights were measured per unit of plain relative error, so the
                    // prediction uses that error even when the quantization is weighted: with the
                    // weighted error the tied embedding (weighted for its head use only) looked
                    // 10x cheaper to round than it is, and a 69 MB plan put it at 2 bits.
                    let error = role_weight(&t.name) * relative_sq_error(&values, &m.dequantize());
                    candidates.push(Candidate { format: q, bytes: stored_bytes(q, &m, plan.entropy)?, error });
                }
                choices.push(TensorChoices { name: t.name.clone(), candidates });
            }
            (&[rows, cols], true, Some(Some(q))) => {
                let (rows, cols) = (rows as usize, cols as usize);
                // Packed size: with --entropy a kept `k` matrix may take less, never more.
                fixed += q.file_bytes(rows, cols) as u64;
            }
            (_, true, Some(None)) if rule.is_some_and(|r| r.bits == 16) => fixed += t.elements() * 2,
            _ => fixed += t.elements() * 4,
        }
        progress(i + 1, tensors.len());
    }
    Ok((choices, fixed))
}

/// Bytes matrix `m` takes in a file in format `q`: entropy-coded where `entropy` and that is
/// smaller (`write_matrix`), else packed.
fn stored_bytes(q: WeftQuant, m: &QuantMatrix, entropy: bool) -> Result<u64> {
    let packed = q.file_bytes(m.rows, m.cols) as u64;
    if q.scheme != Scheme::K || !entropy {
        return Ok(packed);
    }
    let c = crate::quant::kcode::encode_coded(m)?;
    Ok(packed.min((c.levels.len() + c.scales.len() + c.zeros.len()) as u64))
}

/// Writes matrix `name` in format `q` as packed levels with its scales and zero points (`k`: one
/// byte each, the row's exponent leading its scales); returns the bytes written.
fn write_packed(out: &mut SafetensorsWriter, name: &str, q: WeftQuant, m: &QuantMatrix) -> Result<u64> {
    let meta = serde_json::json!({ "format": q.name(), "shape": [m.rows, m.cols] });
    out.metadata.insert(format!("weft.q.{name}"), meta.to_string());
    let (rows, words, groups) = (m.rows as u64, m.words.len() as u64, m.scales.len() as u64);
    out.add(&format!("{name}.weft_q"), SafeDtype::U32, &[rows, words / rows], bytemuck::cast_slice(&m.words).to_vec())?;
    if q.scheme == Scheme::K {
        let codes = crate::quant::kcode::encode(m)?;
        out.add(&format!("{name}.weft_scale"), SafeDtype::U8, &[rows, groups / rows + 1], codes.scales)?;
        out.add(&format!("{name}.weft_zero"), SafeDtype::U8, &[rows, groups / rows], codes.zeros)?;
    } else {
        out.add(&format!("{name}.weft_scale"), SafeDtype::F16, &[rows, groups / rows], bytemuck::cast_slice(&m.scales).to_vec())?;
        if !m.zeros.is_empty() {
            out.add(&format!("{name}.weft_zero"), SafeDtype::F16, &[rows, groups / rows], bytemuck::cast_slice(&m.zeros).to_vec())?;
        }
    }
    Ok(q.file_bytes(m.rows, m.cols) as u64)
}

/// Writes matrix `name` in format `q`: a `k` matrix with `entropy` as its three entropy-coded
/// streams (each a 1-D U8 tensor under the packed format's names, `"coding": "rans"` in its
/// entry) where that is smaller, else packed. Returns the bytes written.
fn write_matrix(out: &mut SafetensorsWriter, name: &str, q: WeftQuant, m: &QuantMatrix, entropy: bool) -> Result<u64> {
    if q.scheme != Scheme::K || !entropy {
        return write_packed(out, name, q, m);
    }
    let c = crate::quant::kcode::encode_coded(m)?;
    let bytes = (c.levels.len() + c.scales.len() + c.zeros.len()) as u64;
    // The coding tables cost up to a few hundred bytes: a small matrix may be smaller packed.
    if bytes >= q.file_bytes(m.rows, m.cols) as u64 {
        return write_packed(out, name, q, m);
    }
    let meta = serde_json::json!({ "format": q.name(), "shape": [m.rows, m.cols], "coding": "rans" });
    out.metadata.insert(format!("weft.q.{name}"), meta.to_string());
    for (part, blob) in [("weft_q", c.levels), ("weft_scale", c.scales), ("weft_zero", c.zeros)] {
        out.add(&format!("{name}.{part}"), SafeDtype::U8, &[blob.len() as u64], blob)?;
    }
    Ok(bytes)
}

/// Rewrites a weft file with every packed `k` matrix entropy-coded (`weft quantize --entropy`'s
/// storage), the rest as it is: lossless, for files made without it (or tuned after).
pub async fn entropy_code_model<R: RangeReader>(reader: &R, header: &ModelHeader) -> Result<SafetensorsWriter> {
    let entries = super::load::weft_entries(header)?;
    let ModelHeader::Safetensors(st) = header else {
        return Err(Error::Model("entropy coding rewrites weft safetensors files only".into()));
    };
    let mut out = SafetensorsWriter::default();
    out.metadata.extend(st.metadata.iter().map(|(k, v)| (k.clone(), v.clone())));
    let recoded: std::collections::HashMap<&str, &super::load::WeftEntry> =
        entries.iter().filter(|(_, e)| e.quant.scheme == Scheme::K && !e.coded).map(|(k, e)| (k.as_str(), e)).collect();
    let companions: std::collections::HashSet<&str> =
        recoded.values().flat_map(|e| std::iter::once(&e.scale).chain(&e.zero)).map(|t| t.name.as_str()).collect();
    for t in header.tensors().iter().filter(|t| !companions.contains(t.name.as_str())) {
        let bytes = reader.read_range(t.range.clone()).await?;
        match recoded.get(t.name.as_str()) {
            Some(e) => {
                let scales = reader.read_range(e.scale.range.clone()).await?;
                let zeros = match &e.zero {
                    Some(z) => Some(reader.read_range(z.range.clone()).await?),
                    None => None,
                };
                let m = e.matrix(&t.name, &bytes, &scales, zeros.as_deref())?;
                write_matrix(&mut out, t.name.trim_end_matches(".weft_q"), e.quant, &m, true)?;
            }
            None => {
                let crate::format::StorageType::Safe(dtype) = t.storage else {
                    return Err(Error::Model(format!("{}: not a safetensors dtype", t.name)));
                };
                out.add(&t.name, dtype, &t.shape, bytes)?;
            }
        }
    }
    Ok(out)
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
        assert_eq!(KeepRule::parse("token_embd=8").unwrap(), KeepRule { pattern: "token_embd".into(), bits: 8, format: None });
        let q = WeftQuant::new(2, 64, Scheme::Sym).unwrap();
        assert_eq!(KeepRule::parse("blk.0.attn_v.weight=q2_g64_sym").unwrap(), KeepRule::format("blk.0.attn_v.weight", q));
        assert!(KeepRule::parse("x=q5_g64_sym").is_err());
        assert!(KeepRule::parse("x=5").is_err());
        assert!(KeepRule::parse("=4").is_err());
        assert!(KeepRule::parse("attn").is_err());
    }

    /// Under a budget only the user's keep rules bind: the defaults (an 8-bit embedding) do not,
    /// so the planner decides the embedding like every other matrix.
    #[test]
    fn default_keep_rules_do_not_bind_a_budget() {
        let defaults: Vec<String> = DEFAULT_KEEP.iter().map(|s| s.to_string()).collect();
        assert_eq!(keep_rules(&[], false, false), defaults);
        assert!(keep_rules(&[], false, true).is_empty());
        assert!(keep_rules(&[], true, false).is_empty());
        let user = vec!["attn_v=8".to_string()];
        assert_eq!(keep_rules(&user, false, true), user);
        assert_eq!(keep_rules(&user, false, false), user);
    }

    #[test]
    fn budget_formats_reach_below_two_and_a_half_bits() {
        let formats = budget_formats(WeftQuant::new(4, 32, Scheme::Asym).unwrap());
        assert_eq!(formats[..4].iter().map(|q| q.bits).collect::<Vec<_>>(), vec![2, 3, 4, 8]);
        assert!(formats.iter().all(|q| q.group == 32 && q.scheme != Scheme::Sym || q.group == 64 && q.scheme == Scheme::Sym));
        assert_eq!(formats.iter().filter(|q| q.scheme == Scheme::K).map(|q| q.bits).collect::<Vec<_>>(), vec![2, 3, 4]);
        let smallest = formats.iter().map(|q| q.bits_per_weight()).fold(f64::MAX, f64::min);
        assert_eq!(smallest, 2.25);
    }
}
