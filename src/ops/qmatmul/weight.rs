//! Weights that stay packed on the GPU: the format, the logical shape and the buffers.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::GgmlType;
use crate::gpu::shader::Defines;
use crate::gpu::{GpuContext, GpuTensor};
use crate::quant::weft::{QuantMatrix, Scheme, WeftQuant};
use crate::quant::{self, pack_words};

/// How a weight matrix is stored; the kernels select their decoder from it, model code only
/// passes it along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum WeightFormat {
    /// A GGUF tensor type: F32, F16, BF16 or a block format.
    Ggml(GgmlType),
    /// One of weft's formats (docs/FORMAT.md).
    Weft(WeftQuant),
    /// Plain little-endian f32.
    F32,
}

impl WeightFormat {
    /// `Q4_K`, `F16`, `q4_g32_sym`, `F32`.
    pub fn name(&self) -> String {
        match self {
            Self::Ggml(t) => t.name().to_string(),
            Self::Weft(q) => q.name(),
            Self::F32 => "F32".to_string(),
        }
    }

    /// The inverse of [`WeightFormat::name`]; GGML names are matched first.
    pub fn parse(name: &str) -> Option<Self> {
        if name == "F32" {
            return Some(Self::F32);
        }
        if let Some(t) = GgmlType::ALL.into_iter().find(|t| t.name() == name) {
            return Some(Self::Ggml(t));
        }
        WeftQuant::parse(name).ok().map(Self::Weft)
    }

    /// Every format the kernels handle: the GGML types, then each weft format.
    pub fn all() -> Vec<Self> {
        let mut all: Vec<Self> = GgmlType::ALL.into_iter().map(Self::Ggml).collect();
        for bits in crate::quant::weft::BITS {
            for group in crate::quant::weft::GROUPS {
                for scheme in [Scheme::Sym, Scheme::Asym] {
                    all.push(Self::Weft(WeftQuant { bits, group, scheme }));
                }
            }
        }
        all
    }

    /// What K must be a multiple of for this format (GGML blocks lie along a row).
    pub fn k_multiple(&self) -> usize {
        match self {
            Self::Ggml(t) => t.block_elements() as usize,
            Self::Weft(_) | Self::F32 => 1,
        }
    }

    /// Shader defines that select this format's `w8`.
    pub(crate) fn defines(&self) -> Defines {
        match self {
            Self::Ggml(t) => {
                let ty = crate::format::StorageType::Ggml(*t);
                // Types with a W8_* path read a sub-block's scale and bytes once per eight
                // weights; the rest call the per-element decoder eight times.
                let path = match t {
                    GgmlType::Q4_0 => "W8_Q4_0",
                    GgmlType::Q8_0 => "W8_Q8_0",
                    GgmlType::Q4_K => "W8_Q4_K",
                    GgmlType::Q6_K => "W8_Q6_K",
                    _ => "GENERIC",
                };
                Defines::new().set(super::super::dequant::define(ty), 1).set(path, 1)
            }
            Self::F32 => Self::Ggml(GgmlType::F32).defines(),
            Self::Weft(q) => {
                let d = Defines::new()
                    .set("WEFT", 1)
                    .set("BITS", q.bits)
                    .set("GROUP", q.group)
                    .set(&format!("WB{}", q.bits), 1);
                if q.scheme == Scheme::Asym { d.set("ASYM", 1) } else { d }
            }
        }
    }

    /// The block-native GEMV path of this format (the `B_*` define of its `bdot` in
    /// shaders/qweight.wgsl), if it has one.
    pub fn gemv_block(&self) -> Option<&'static str> {
        match self {
            Self::Ggml(GgmlType::Q4_0) => Some("B_Q4_0"),
            Self::Ggml(GgmlType::Q4_1) => Some("B_Q4_1"),
            Self::Ggml(GgmlType::Q8_0) => Some("B_Q8_0"),
            _ => None,
        }
    }

    /// Storage buffers the weight binds: packed data, then scales and zeros for weft.
    pub(crate) fn weight_bindings(&self) -> usize {
        match self {
            Self::Weft(q) if q.scheme == Scheme::Asym => 3,
            Self::Weft(_) => 2,
            _ => 1,
        }
    }
}

/// A weight matrix W [rows, cols] on the GPU, still in its stored format: rows are output
/// features (N), cols the reduced dimension (K).
pub struct QWeight {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    /// Packed data as u32 words: GGML blocks row after row ([rows · bytes_per_row / 4] words,
    /// rows need not be word-aligned), or weft's [rows, words_per_row].
    pub data: GpuTensor,
    /// weft: f16 scales two per word, [ceil(rows · groups_per_row / 2)] words.
    pub scales: Option<GpuTensor>,
    /// weft asymmetric: f16 zero points, same layout as the scales.
    pub zeros: Option<GpuTensor>,
}

impl QWeight {
    /// From a GGUF tensor's bytes. GGUF lists the dims as [K, N]; the bytes are row-major
    /// [N, K] with K contiguous, so `rows` = N and `cols` = K.
    pub fn from_ggml(
        ctx: &GpuContext,
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self> {
        let format = WeightFormat::Ggml(ty);
        let elements = check_shape(name, format, rows, cols)?;
        let want = quant::expected_bytes(crate::format::StorageType::Ggml(ty), elements)?;
        if bytes.len() as u64 != want {
            return Err(Error::Shape {
                op: "qweight",
                message: format!(
                    "{name}: [{rows}, {cols}] {} needs {want} bytes, got {}",
                    ty.name(),
                    bytes.len()
                ),
            });
        }
        let words = pack_words(bytes);
        let data = ctx.upload_u32(name, &[words.len()], &words)?;
        Ok(Self { format, rows, cols, data, scales: None, zeros: None })
    }

    /// From plain f32 values, row-major [rows, cols].
    pub fn from_f32(ctx: &GpuContext, name: &str, rows: usize, cols: usize, w: &[f32]) -> Result<Self> {
        let elements = check_shape(name, WeightFormat::F32, rows, cols)?;
        if w.len() != elements {
            return Err(Error::Shape {
                op: "qweight",
                message: format!("{name}: [{rows}, {cols}] needs {elements} values, got {}", w.len()),
            });
        }
        let data = ctx.upload_u32(name, &[w.len()], bytemuck::cast_slice(w))?;
        Ok(Self { format: WeightFormat::F32, rows, cols, data, scales: None, zeros: None })
    }

    /// From f32 values already on the GPU, row-major [rows, cols] (a weight decoded there).
    pub fn from_gpu_f32(name: &str, rows: usize, cols: usize, w: GpuTensor) -> Result<Self> {
        let elements = check_shape(name, WeightFormat::F32, rows, cols)?;
        if w.dtype != crate::gpu::DType::F32 || w.len() != elements {
            return Err(Error::Shape {
                op: "qweight",
                message: format!("{name}: [{rows}, {cols}] needs {elements} f32 values, got {}", w.label_shape()),
            });
        }
        // The kernels read F32 weights as raw words.
        let data = GpuTensor { buffer: w.buffer, shape: vec![elements], dtype: crate::gpu::DType::U32 };
        Ok(Self { format: WeightFormat::F32, rows, cols, data, scales: None, zeros: None })
    }

    /// From a weft [`QuantMatrix`]. A tensor larger than the adapter's storage binding limit is
    /// [`Error::BufferTooLarge`] naming `name` and the limit.
    pub fn from_weft(ctx: &GpuContext, name: &str, m: &QuantMatrix) -> Result<Self> {
        let format = WeightFormat::Weft(m.quant);
        check_shape(name, format, m.rows, m.cols)?;
        let groups = m.rows * m.quant.groups_per_row(m.cols);
        let wants = [
            (m.words.len(), m.rows * m.quant.words_per_row(m.cols), "packed words"),
            (m.scales.len(), groups, "scales"),
            (m.zeros.len(), if m.quant.scheme == Scheme::Asym { groups } else { 0 }, "zeros"),
        ];
        for (got, want, what) in wants {
            if got != want {
                return Err(Error::Shape {
                    op: "qweight",
                    message: format!("{name}: {} [{}, {}] needs {want} {what}, has {got}",
                        m.quant.name(), m.rows, m.cols),
                });
            }
        }
        let data = ctx.upload_u32(&format!("{name}.weft_q"), &[m.words.len()], &m.words)?;
        let halves = |label: &str, h: &[u16]| {
            let words = pack_halves(h);
            ctx.upload_u32(&format!("{name}.{label}"), &[words.len()], &words)
        };
        let scales = Some(halves("weft_scale", &m.scales)?);
        let zeros = match m.quant.scheme {
            Scheme::Asym => Some(halves("weft_zero", &m.zeros)?),
            Scheme::Sym => None,
        };
        Ok(Self { format, rows: m.rows, cols: m.cols, data, scales, zeros })
    }

    /// Bytes a full pass over the weight reads (packed data, scales, zeros).
    pub fn bytes(&self) -> u64 {
        [Some(&self.data), self.scales.as_ref(), self.zeros.as_ref()]
            .into_iter()
            .flatten()
            .map(|t| t.len() as u64 * 4)
            .sum()
    }

    /// The storage bindings in kernel order: data, then scales and zeros where present.
    pub(crate) fn tensors(&self) -> Vec<&GpuTensor> {
        [Some(&self.data), self.scales.as_ref(), self.zeros.as_ref()].into_iter().flatten().collect()
    }

    /// Words each weft row occupies and groups per row (zero for other formats).
    pub(crate) fn row_layout(&self) -> (u32, u32) {
        match self.format {
            WeightFormat::Weft(q) => {
                (q.words_per_row(self.cols) as u32, q.groups_per_row(self.cols) as u32)
            }
            _ => (0, 0),
        }
    }
}

/// f16 bit patterns two per little-endian word, the first in the low half.
fn pack_halves(h: &[u16]) -> Vec<u32> {
    h.chunks(2).map(|c| c[0] as u32 | c.get(1).map_or(0, |&v| (v as u32) << 16)).collect()
}

/// Rows and cols must be positive, K a whole number of blocks, and every element index within
/// u32 (the kernels index with u32).
fn check_shape(name: &str, format: WeightFormat, rows: usize, cols: usize) -> Result<usize> {
    let fail = |message: String| Error::Shape { op: "qweight", message: format!("{name}: {message}") };
    if rows == 0 || cols == 0 {
        return Err(fail(format!("empty shape [{rows}, {cols}]")));
    }
    if !cols.is_multiple_of(format.k_multiple()) {
        return Err(fail(format!(
            "{} needs K a multiple of {}, got {cols}",
            format.name(),
            format.k_multiple()
        )));
    }
    let padded = match format {
        WeightFormat::Weft(q) => q.groups_per_row(cols) * q.group as usize,
        _ => cols,
    };
    match rows.checked_mul(padded).filter(|&e| e <= u32::MAX as usize / 4) {
        Some(_) => Ok(rows * cols),
        None => Err(fail(format!("[{rows}, {cols}] is too large to index with 32 bits"))),
    }
}
