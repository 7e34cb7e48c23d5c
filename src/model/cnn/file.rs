//! A CNN's safetensors file: the network description under `weft.cnn`, and each parameter in
//! whatever storage the file chose — a plain dtype, a dtype with scales (`weft.scaled.*`,
//! docs/MNIST.md) or a weft block format (`weft.q.*`, docs/FORMAT.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::CnnConfig;
use crate::error::{Error, Result};
use crate::format::writer::SafetensorsWriter;
use crate::format::{parse_safetensors, SafeDtype, StorageType, TensorInfo};
use crate::quant::decode_to_f32;
use crate::quant::scaled::{self, ScaleLayout, Scaled};
use crate::quant::weft::{QuantMatrix, Scheme, WeftQuant};

/// The metadata key holding the network description.
pub const CONFIG_KEY: &str = "weft.cnn";
/// Prefix of the metadata keys that describe a scaled tensor.
pub const SCALED_PREFIX: &str = "weft.scaled.";

/// One parameter as stored.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredTensor {
    /// A dtype's codes, the value itself unless `scale` maps them.
    Plain { dtype: SafeDtype, shape: Vec<usize>, bytes: Vec<u8>, scale: Option<Scaled> },
    /// A weft block format over the tensor viewed as [shape[0], rest].
    Weft { shape: Vec<usize>, matrix: QuantMatrix },
}

impl StoredTensor {
    pub fn shape(&self) -> &[usize] {
        match self {
            Self::Plain { shape, .. } | Self::Weft { shape, .. } => shape,
        }
    }

    pub fn elements(&self) -> usize {
        self.shape().iter().product()
    }

    /// `F16`, `I8`, `q4_g32_sym`.
    pub fn storage_name(&self) -> String {
        match self {
            Self::Plain { dtype, .. } => dtype.name().to_string(),
            Self::Weft { matrix, .. } => matrix.quant.name(),
        }
    }

    /// The CPU reference decode to f32, bit for bit what the GPU produces.
    pub fn decode_cpu(&self) -> Result<Vec<f32>> {
        match self {
            Self::Plain { scale: Some(s), .. } => s.decode(),
            Self::Plain { dtype, bytes, .. } => decode_to_f32(StorageType::Safe(*dtype), bytes, self.elements()),
            Self::Weft { matrix, .. } => Ok(matrix.dequantize()),
        }
    }

    /// `x` (shape `shape`) stored as `dtype`, with scales laid out by `granularity` if given.
    pub fn from_f32(
        x: &[f32],
        shape: &[usize],
        dtype: SafeDtype,
        granularity: Option<scaled::Granularity>,
    ) -> Result<Self> {
        let shape = shape.to_vec();
        Ok(match granularity {
            None => Self::Plain { dtype, bytes: scaled::encode(dtype, x)?, shape, scale: None },
            Some(g) => {
                let s = scaled::quantize(dtype, x, g.layout(dtype, &shape))?;
                Self::Plain { dtype, bytes: s.codes.clone(), shape, scale: Some(s) }
            }
        })
    }

    /// `x` in a weft format, rows = shape[0].
    pub fn from_f32_weft(x: &[f32], shape: &[usize], quant: WeftQuant) -> Result<Self> {
        let (rows, cols) = matrix_dims(shape);
        let matrix = crate::quant::weft::quantize(quant, x, rows, cols)?;
        Ok(Self::Weft { shape: shape.to_vec(), matrix })
    }
}

/// A tensor viewed as [shape[0], rest] (a 1-D tensor is one row).
pub fn matrix_dims(shape: &[usize]) -> (usize, usize) {
    let n: usize = shape.iter().product();
    match shape {
        [rows, _, ..] if *rows > 0 => (*rows, n / rows),
        _ => (1, n),
    }
}

#[derive(Serialize, Deserialize)]
struct WeftMeta {
    format: String,
    shape: [usize; 2],
}

/// A whole CNN file, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct CnnFile {
    pub config: CnnConfig,
    pub tensors: BTreeMap<String, StoredTensor>,
}

fn model_err(message: String) -> Error {
    Error::Model(message)
}

fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

impl CnnFile {
    /// Parses a complete file held in memory.
    pub fn parse(file: &[u8]) -> Result<Self> {
        let header = parse_safetensors(file, Some(file.len() as u64))?;
        let mut by_name: BTreeMap<&str, &TensorInfo> = BTreeMap::new();
        for t in &header.tensors {
            by_name.insert(t.name.as_str(), t);
        }
        let bytes_of = |name: &str| -> Result<(&TensorInfo, &[u8])> {
            let t = by_name.get(name).ok_or_else(|| model_err(format!("no tensor '{name}' in the file")))?;
            let range = (t.range.start as usize)..(t.range.end as usize);
            let b = file.get(range).ok_or_else(|| model_err(format!("{name}: data beyond the file")))?;
            Ok((t, b))
        };
        let config_json = header
            .metadata
            .get(CONFIG_KEY)
            .ok_or_else(|| model_err(format!("no '{CONFIG_KEY}' network description in __metadata__")))?;
        let config: CnnConfig =
            serde_json::from_str(config_json).map_err(|e| model_err(format!("{CONFIG_KEY}: {e}")))?;
        let mut tensors = BTreeMap::new();
        for (name, shape) in config.parameters()? {
            let elements: usize = shape.iter().product();
            let stored = if let Some(meta) = header.metadata.get(&format!("weft.q.{name}")) {
                let meta: WeftMeta =
                    serde_json::from_str(meta).map_err(|e| model_err(format!("weft.q.{name}: {e}")))?;
                let quant = WeftQuant::parse(&meta.format)?;
                let (rows, cols) = matrix_dims(&shape);
                if meta.shape != [rows, cols] {
                    return Err(model_err(format!("{name}: weft shape {:?}, expected [{rows}, {cols}]", meta.shape)));
                }
                let halves = |suffix: &str| -> Result<Vec<u16>> {
                    let (_, b) = bytes_of(&format!("{name}.{suffix}"))?;
                    Ok(b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect())
                };
                let (_, words) = bytes_of(&format!("{name}.weft_q"))?;
                let matrix = QuantMatrix {
                    quant,
                    rows,
                    cols,
                    words: words.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
                    scales: halves("weft_scale")?,
                    zeros: if quant.scheme == Scheme::Asym { halves("weft_zero")? } else { Vec::new() },
                };
                let groups = rows * quant.groups_per_row(cols);
                if matrix.words.len() != rows * quant.words_per_row(cols)
                    || matrix.scales.len() != groups
                    || (quant.scheme == Scheme::Asym && matrix.zeros.len() != groups)
                {
                    return Err(model_err(format!(
                        "{name}: packed sizes do not match {} [{rows}, {cols}]",
                        meta.format
                    )));
                }
                StoredTensor::Weft { shape, matrix }
            } else {
                let (info, bytes) = bytes_of(&name)?;
                let StorageType::Safe(dtype) = info.storage else {
                    return Err(model_err(format!("{name}: not a safetensors dtype")));
                };
                if info.elements() != elements as u64 {
                    return Err(model_err(format!("{name}: shape {:?}, the network needs {shape:?}", info.shape)));
                }
                let scale = match header.metadata.get(&format!("{SCALED_PREFIX}{name}")) {
                    None => None,
                    Some(meta) => {
                        let layout: ScaleLayout =
                            serde_json::from_str(meta).map_err(|e| model_err(format!("{SCALED_PREFIX}{name}: {e}")))?;
                        if layout.rows.checked_mul(layout.cols) != Some(elements) || layout.group == 0 {
                            return Err(model_err(format!("{name}: {layout:?} does not fit {shape:?}")));
                        }
                        let floats = |suffix: &str| -> Result<Vec<f32>> {
                            let (t, b) = bytes_of(&format!("{name}.{suffix}"))?;
                            if t.storage != StorageType::Safe(SafeDtype::F32) || t.elements() != layout.groups() as u64
                            {
                                return Err(model_err(format!("{name}.{suffix} must be F32 [{}]", layout.groups())));
                            }
                            Ok(f32_values(b))
                        };
                        let zeros = if layout.zero { floats("zero")? } else { Vec::new() };
                        Some(Scaled { dtype, layout, codes: bytes.to_vec(), scales: floats("scale")?, zeros })
                    }
                };
                StoredTensor::Plain { dtype, shape, bytes: bytes.to_vec(), scale }
            };
            tensors.insert(name, stored);
        }
        Ok(Self { config, tensors })
    }

    /// The file's bytes: header with `weft.cnn` (and the `weft.scaled.*` / `weft.q.*` entries),
    /// then the tensors.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = SafetensorsWriter::default();
        let config = serde_json::to_string(&self.config).map_err(|e| model_err(e.to_string()))?;
        w.metadata.insert(CONFIG_KEY.into(), config);
        let dims = |s: &[usize]| s.iter().map(|&d| d as u64).collect::<Vec<_>>();
        let f32_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        for (name, t) in &self.tensors {
            match t {
                StoredTensor::Plain { dtype, shape, bytes, scale } => {
                    w.add(name, *dtype, &dims(shape), bytes.clone())?;
                    if let Some(s) = scale {
                        let meta = serde_json::to_string(&s.layout).map_err(|e| model_err(e.to_string()))?;
                        w.metadata.insert(format!("{SCALED_PREFIX}{name}"), meta);
                        let g = [s.layout.rows as u64, s.layout.groups_per_row() as u64];
                        w.add(&format!("{name}.scale"), SafeDtype::F32, &g, f32_bytes(&s.scales))?;
                        if s.layout.zero {
                            w.add(&format!("{name}.zero"), SafeDtype::F32, &g, f32_bytes(&s.zeros))?;
                        }
                    }
                }
                StoredTensor::Weft { matrix: m, .. } => {
                    let meta = WeftMeta { format: m.quant.name(), shape: [m.rows, m.cols] };
                    let meta = serde_json::to_string(&meta).map_err(|e| model_err(e.to_string()))?;
                    w.metadata.insert(format!("weft.q.{name}"), meta);
                    w.metadata.insert("weft.version".into(), "1".into());
                    let wpr = m.quant.words_per_row(m.cols) as u64;
                    let gpr = m.quant.groups_per_row(m.cols) as u64;
                    let words = m.words.iter().flat_map(|x| x.to_le_bytes()).collect();
                    w.add(&format!("{name}.weft_q"), SafeDtype::U32, &[m.rows as u64, wpr], words)?;
                    let halves = |h: &[u16]| h.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
                    w.add(&format!("{name}.weft_scale"), SafeDtype::F16, &[m.rows as u64, gpr], halves(&m.scales))?;
                    if m.quant.scheme == Scheme::Asym {
                        w.add(&format!("{name}.weft_zero"), SafeDtype::F16, &[m.rows as u64, gpr], halves(&m.zeros))?;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(w.data_len() as usize + 4096);
        w.write(&mut out).map_err(|e| model_err(format!("writing the file: {e}")))?;
        Ok(out)
    }
}
