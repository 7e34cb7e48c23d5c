//! Weights that stay packed on the GPU: the format, the logical shape and the buffers.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::GgmlType;
use crate::gpu::shader::Defines;
use crate::gpu::{DType, GpuContext, GpuTensor};
use crate::quant::repack::{head_words, KPlanes};
use crate::quant::weft::{QuantMatrix, Scheme, WeftQuant};
use crate::quant;

/// How a weight matrix is stored; the kernels select their decoder from it, model code only
/// passes it along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum WeightFormat {
    /// A GGUF tensor type: F32, F16, BF16 or a block format.
    Ggml(GgmlType),
    /// One of weft's formats (docs/FORMAT.md).
    Weft(WeftQuant),
    /// A GGUF K-quant, Q4_1, Q5_0 or Q5_1 repacked at upload into aligned planes
    /// ([`quant::repack::KPlanes`]):
    /// what the GPU holds of such a tensor where [`QWeight::repacks`] says so.
    Repacked(GgmlType),
    /// Plain little-endian f32.
    F32,
}

impl WeightFormat {
    /// `Q4_K`, `F16`, `q4_g32_sym`, `F32`; `Q4_K_R` for the repacked form.
    pub fn name(&self) -> String {
        match self {
            Self::Ggml(t) => t.name().to_string(),
            Self::Repacked(t) => format!("{}_R", t.name()),
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
        if let Some(t) = GgmlType::ALL.into_iter().find(|&t| quant::repack::has_planes(t) && name.strip_suffix("_R") == Some(t.name())) {
            return Some(Self::Repacked(t));
        }
        WeftQuant::parse(name).ok().map(Self::Weft)
    }

    /// Every format the kernels handle: the GGML types, then each weft format.
    pub fn all() -> Vec<Self> {
        let mut all: Vec<Self> = GgmlType::ALL.into_iter().map(Self::Ggml).collect();
        all.extend(GgmlType::ALL.into_iter().filter(|&t| quant::repack::has_planes(t)).map(Self::Repacked));
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
            Self::Ggml(t) | Self::Repacked(t) => t.block_elements() as usize,
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
            // Chunks of weft's 4-bit words (and the high bits' words), with the super-blocks'
            // heads in place of scales: K4 / K5 / K6 select the arithmetic, WB4 / WB5 / WB6 the
            // chunk's words (BITS: how many); KL a 32-weight block's head (Q4_1, Q5_1), KL0 its
            // lone d (Q5_0).
            Self::Repacked(t) => {
                let bits = quant::repack::level_bits(*t);
                let cw = quant::repack::chunk_words(*t) as u32;
                let d = Defines::new().set("KQ", 1).set(&format!("K{bits}"), 1).set(&format!("WB{bits}"), 1).set("BITS", cw).set("GROUP", 32);
                match t {
                    GgmlType::Q5_0 => d.set("KL", 1).set("KL0", 1),
                    t if quant::repack::is_legacy(*t) => d.set("KL", 1),
                    _ => d,
                }
            }
            Self::Weft(q) => {
                let d = Defines::new()
                    .set("WEFT", 1)
                    .set("BITS", q.bits)
                    .set("GROUP", q.group)
                    .set(&format!("WB{}", q.bits), 1);
                if q.has_zero() { d.set("ASYM", 1) } else { d }
            }
        }
    }

    /// The block-native GEMV path of this format (the `B_*` define of its `bdot` in
    /// shaders/qblock.wgsl), if it has one.
    pub fn gemv_block(&self) -> Option<&'static str> {
        match self {
            Self::Weft(_) => Some("B_WEFT"),
            Self::Ggml(GgmlType::Q4_0) => Some("B_Q4_0"),
            Self::Ggml(GgmlType::Q4_1) => Some("B_Q4_1"),
            Self::Ggml(GgmlType::Q8_0) => Some("B_Q8_0"),
            Self::Ggml(GgmlType::Q2_K) => Some("B_Q2_K"),
            Self::Ggml(GgmlType::Q3_K) => Some("B_Q3_K"),
            Self::Ggml(GgmlType::Q4_K) => Some("B_Q4_K"),
            Self::Ggml(GgmlType::Q5_K) => Some("B_Q5_K"),
            Self::Ggml(GgmlType::Q6_K) => Some("B_Q6_K"),
            _ => None,
        }
    }

    /// Storage buffers the weight binds: packed data, then scales and zeros for weft.
    pub(crate) fn weight_bindings(&self) -> usize {
        match self {
            Self::Weft(q) if q.has_zero() => 3,
            // Q6_K's d, in a plane of f16 pairs (Q5_0's takes the heads' place); the 5-bit
            // types' high words.
            Self::Repacked(t) if *t == GgmlType::Q6_K || quant::repack::level_bits(*t) == 5 => 3,
            Self::Weft(_) | Self::Repacked(_) => 2,
            _ => 1,
        }
    }
}

/// A weight matrix W [rows, cols] on the GPU, still in its stored format: rows are output
/// features (N), cols the reduced dimension (K). Stored as one part, or as several runs of
/// whole rows when its packed bytes exceed what one storage binding may hold.
pub struct QWeight {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    /// Consecutive row ranges covering all rows, in order.
    pub parts: Vec<QPart>,
}

/// Rows `row0 .. row0 + rows` of a [`QWeight`] in their own buffers.
pub struct QPart {
    pub row0: usize,
    pub rows: usize,
    /// Packed data as u32 words: GGML blocks row after row ([rows · bytes_per_row / 4] words,
    /// rows need not be word-aligned), or weft's [rows, words_per_row].
    pub data: GpuTensor,
    /// weft: f16 scales two per word, [ceil(rows · groups_per_row / 2)] words; repacked
    /// types: the (super-)blocks' heads, [rows · blocks_per_row · head_words] words, or
    /// Q5_0's f16 d two per word.
    pub scales: Option<GpuTensor>,
    /// weft asymmetric: f16 zero points, same layout as the scales; repacked Q6_K: the
    /// super-blocks' f16 d, two per word; repacked 5-bit types: the chunks' high words,
    /// [rows · cols / 32].
    pub zeros: Option<GpuTensor>,
}

impl QPart {
    /// The storage bindings in kernel order: data, then scales and zeros where present.
    pub fn tensors(&self) -> Vec<&GpuTensor> {
        [Some(&self.data), self.scales.as_ref(), self.zeros.as_ref()].into_iter().flatten().collect()
    }
}

/// The most bytes one storage binding may hold on this device.
pub(crate) fn binding_limit(ctx: &GpuContext) -> u64 {
    let limits = &ctx.capabilities().limits;
    limits.max_storage_buffer_binding_size.min(limits.max_buffer_size) / 4 * 4
}

/// Row ranges of at most as many rows as fit the binding limit when each row takes
/// `row_bytes` in the largest of its buffers (at least one row per part: a single row over the
/// limit fails at upload, naming the tensor and the limit).
fn row_ranges(ctx: &GpuContext, rows: usize, row_bytes: u64) -> Vec<(usize, usize)> {
    let per = (binding_limit(ctx) / row_bytes.max(1)).clamp(1, rows as u64) as usize;
    (0..rows).step_by(per).map(|r0| (r0, per.min(rows - r0))).collect()
}

impl QWeight {
    /// From a GGUF tensor's bytes. GGUF lists the dims as [K, N]; the bytes are row-major
    /// [N, K] with K contiguous, so `rows` = N and `cols` = K. On GPUs, types that a weft format
    /// holds exactly are stored in it ([`quant::repack`]): `format` says what the GPU holds.
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
        if Self::repacks(ctx, ty) {
            if let Some(m) = quant::repack::to_weft(ty, rows, cols, bytes)? {
                return Self::from_weft(ctx, name, &m);
            }
            if let Some(m) = quant::repack::to_planes(ty, rows, cols, bytes)? {
                return Self::from_planes(ctx, name, &m);
            }
        }
        let row_bytes = bytes.len() / rows;
        let ranges = row_ranges(ctx, rows, row_bytes as u64);
        let parts = ranges
            .iter()
            .map(|&(row0, n)| {
                let label = part_label(name, row0, ranges.len());
                let data = ctx.upload_bytes_as_u32(&label, &bytes[row0 * row_bytes..(row0 + n) * row_bytes])?;
                Ok(QPart { row0, rows: n, data, scales: None, zeros: None })
            })
            .collect::<Result<_>>()?;
        Ok(Self { format, rows, cols, parts })
    }

    /// Whether [`QWeight::from_ggml`] repacks `ty` on this adapter: on GPUs, Q4_0 and Q8_0 into
    /// the weft format that holds them exactly, the K-quants with planes into those
    /// ([`WeightFormat::Repacked`]), all word-aligned for shaders/qgemv_gpu.wgsl
    /// (src/quant/repack.rs). CPU-emulated adapters keep the stored blocks, whose kernels were
    /// measured best there. A loader may repack itself (on several threads) and call
    /// [`QWeight::from_weft`] or [`QWeight::from_planes`], or on the GPU
    /// ([`crate::ops::repack::Repacker`]): the same buffers.
    pub fn repacks(ctx: &GpuContext, ty: GgmlType) -> bool {
        !ctx.capabilities().is_software
            && (quant::repack::weft_equivalent(ty).is_some() || quant::repack::has_planes(ty))
    }

    /// From a K-quant's planes ([`quant::repack::to_planes`]), as [`WeightFormat::Repacked`],
    /// in runs of rows within a storage binding like every other weight.
    pub fn from_planes(ctx: &GpuContext, name: &str, m: &KPlanes) -> Result<Self> {
        let (wpr, hpr, dpr, hipr) = plane_words(m.ty, m.cols);
        if m.words.len() != m.rows * wpr || m.heads.len() != m.rows * hpr || m.d.len() != m.rows * dpr || m.high.len() != m.rows * hipr {
            return Err(Error::Shape {
                op: "qweight",
                message: format!("{name}: {} [{}, {}] needs {} words, {} high words, {} head words and {} d, has {}, {}, {} and {}",
                    WeightFormat::Repacked(m.ty).name(), m.rows, m.cols, m.rows * wpr, m.rows * hipr, m.rows * hpr, m.rows * dpr, m.words.len(), m.high.len(), m.heads.len(), m.d.len()),
            });
        }
        let w = Self::planes_zeroed(ctx, name, m.ty, m.rows, m.cols)?;
        for part in &w.parts {
            let (r0, r1) = (part.row0, part.row0 + part.rows);
            let [heads, halves, high] = plane_tensors(m.ty, part);
            let words = [(Some(&part.data), &m.words, wpr), (heads, &m.heads, hpr), (high, &m.high, hipr)];
            for (tensor, v, per) in words {
                if let Some(t) = tensor {
                    ctx.write_tensor(t, 0, bytemuck::cast_slice(&v[r0 * per..r1 * per]))?;
                }
            }
            if let Some(t) = halves {
                ctx.write_tensor(t, 0, bytemuck::cast_slice(&pack_halves(&m.d[r0 * dpr..r1 * dpr])))?;
            }
        }
        Ok(w)
    }

    /// A [`WeightFormat::Repacked`] weight of zero planes, in the parts every such weight has:
    /// what [`QWeight::from_planes`] fills from the CPU and `ops::repack` from a kernel.
    pub(crate) fn planes_zeroed(ctx: &GpuContext, name: &str, ty: GgmlType, rows: usize, cols: usize) -> Result<Self> {
        let format = WeightFormat::Repacked(ty);
        check_shape(name, format, rows, cols)?;
        let (wpr, hpr, dpr, hipr) = plane_words(ty, cols);
        let ranges = row_ranges(ctx, rows, wpr as u64 * 4);
        let parts = ranges
            .iter()
            .map(|&(row0, n)| {
                let label = part_label(name, row0, ranges.len());
                let plane = |what: &str, len: usize| match len {
                    0 => Ok(None),
                    _ => ctx.zeros(&format!("{label}.{what}"), &[len], DType::U32).map(Some),
                };
                let data = ctx.zeros(&format!("{label}.q"), &[n * wpr], DType::U32)?;
                let (heads, d, high) = (plane("heads", n * hpr)?, plane("d", (n * dpr).div_ceil(2))?, plane("high", n * hipr)?);
                // Q5_0 has no head: its d takes the heads' binding.
                let (scales, zeros) = if heads.is_none() { (d, high) } else { (heads, d.or(high)) };
                Ok(QPart { row0, rows: n, data, scales, zeros })
            })
            .collect::<Result<_>>()?;
        Ok(Self { format, rows, cols, parts })
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
        let ranges = row_ranges(ctx, rows, cols as u64 * 4);
        let parts = ranges
            .iter()
            .map(|&(row0, n)| {
                let values = &w[row0 * cols..(row0 + n) * cols];
                let label = part_label(name, row0, ranges.len());
                let data = ctx.upload_u32(&label, &[values.len()], bytemuck::cast_slice(values))?;
                Ok(QPart { row0, rows: n, data, scales: None, zeros: None })
            })
            .collect::<Result<_>>()?;
        Ok(Self { format: WeightFormat::F32, rows, cols, parts })
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
        // One part: the buffer already exists, so it was within the device's limits.
        Ok(Self { format: WeightFormat::F32, rows, cols, parts: vec![QPart { row0: 0, rows, data, scales: None, zeros: None }] })
    }

    /// From a weft [`QuantMatrix`]. A tensor larger than the adapter's storage binding limit is
    /// split into runs of rows; a single row over the limit is [`Error::BufferTooLarge`] naming
    /// `name` and the limit.
    pub fn from_weft(ctx: &GpuContext, name: &str, m: &QuantMatrix) -> Result<Self> {
        let (wpr, gpr) = (m.quant.words_per_row(m.cols), m.quant.groups_per_row(m.cols));
        let wants = [
            (m.words.len(), m.rows * wpr, "packed words"),
            (m.scales.len(), m.rows * gpr, "scales"),
            (m.zeros.len(), if m.quant.has_zero() { m.rows * gpr } else { 0 }, "zeros"),
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
        let w = Self::weft_zeroed(ctx, name, m.quant, m.rows, m.cols)?;
        for part in &w.parts {
            let (r0, n) = (part.row0, part.rows);
            ctx.write_tensor(&part.data, 0, bytemuck::cast_slice(&m.words[r0 * wpr..(r0 + n) * wpr]))?;
            let halves = [(&part.scales, &m.scales), (&part.zeros, &m.zeros)];
            for (tensor, h) in halves {
                if let Some(t) = tensor {
                    ctx.write_tensor(t, 0, bytemuck::cast_slice(&pack_halves(&h[r0 * gpr..(r0 + n) * gpr])))?;
                }
            }
        }
        Ok(w)
    }

    /// The same buffers under a second handle, to read a weight back after handing it on.
    pub(crate) fn alias(&self) -> Result<Self> {
        let view = |t: &GpuTensor| t.view(&t.shape);
        let parts = self
            .parts
            .iter()
            .map(|p| {
                let (scales, zeros) = (p.scales.as_ref().map(view).transpose()?, p.zeros.as_ref().map(view).transpose()?);
                Ok(QPart { row0: p.row0, rows: p.rows, data: view(&p.data)?, scales, zeros })
            })
            .collect::<Result<_>>()?;
        Ok(Self { format: self.format, rows: self.rows, cols: self.cols, parts })
    }

    /// A weft weight of zero words, scales and zero points, in the parts (runs of rows within a
    /// storage binding) that every weft weight has: what [`QWeight::from_weft`] fills from the
    /// CPU and `ops::quantize` from a kernel.
    pub(crate) fn weft_zeroed(ctx: &GpuContext, name: &str, quant: WeftQuant, rows: usize, cols: usize) -> Result<Self> {
        let format = WeightFormat::Weft(quant);
        check_shape(name, format, rows, cols)?;
        let (wpr, gpr) = (quant.words_per_row(cols), quant.groups_per_row(cols));
        let ranges = row_ranges(ctx, rows, (wpr as u64 * 4).max(gpr as u64 * 2));
        let parts = ranges
            .iter()
            .map(|&(row0, n)| {
                let label = part_label(name, row0, ranges.len());
                let data = ctx.zeros(&format!("{label}.weft_q"), &[n * wpr], DType::U32)?;
                let halves = |what: &str| ctx.zeros(&format!("{label}.{what}"), &[(n * gpr).div_ceil(2)], DType::U32);
                let scales = Some(halves("weft_scale")?);
                let zeros = match quant.scheme {
                    Scheme::Asym | Scheme::K => Some(halves("weft_zero")?),
                    Scheme::Sym => None,
                };
                Ok(QPart { row0, rows: n, data, scales, zeros })
            })
            .collect::<Result<_>>()?;
        Ok(Self { format, rows, cols, parts })
    }

    /// The rows of `weights` stacked into one matrix [sum of rows, cols] in one buffer per
    /// binding, so that one dispatch computes all their outputs (Q/K/V, gate/up). None when
    /// they differ in format or K, one of them is split in parts, a buffer boundary would fall
    /// inside a word, or the result would exceed a storage binding: the caller keeps them
    /// apart then.
    pub fn stack(ctx: &GpuContext, name: &str, weights: &[&QWeight]) -> Result<Option<QWeight>> {
        let Some(first) = weights.first() else { return Ok(None) };
        let same = weights.iter().all(|w| w.format == first.format && w.cols == first.cols && w.parts.len() == 1);
        if !same {
            return Ok(None);
        }
        let (wpr, gpr) = first.row_layout();
        // Words each weight contributes to each binding: data, then scales and zeros.
        let words = |w: &QWeight| -> Option<Vec<usize>> {
            let part = &w.parts[0];
            match w.format {
                WeightFormat::Weft(_) => {
                    let halves = w.rows * gpr as usize;
                    let packed = halves.is_multiple_of(2).then_some(halves / 2)?;
                    let mut v = vec![w.rows * wpr as usize, packed];
                    if part.zeros.is_some() {
                        v.push(packed);
                    }
                    Some(v)
                }
                WeightFormat::F32 => Some(vec![w.rows * w.cols]),
                WeightFormat::Repacked(t) => {
                    let mut v = vec![w.rows * wpr as usize];
                    if head_words(t) > 0 {
                        v.push(w.rows * gpr as usize * head_words(t));
                    }
                    if matches!(t, GgmlType::Q6_K | GgmlType::Q5_0) {
                        let halves = w.rows * gpr as usize;
                        v.push(halves.is_multiple_of(2).then_some(halves / 2)?);
                    }
                    if quant::repack::level_bits(t) == 5 {
                        v.push(w.rows * w.cols / 32);
                    }
                    Some(v)
                }
                WeightFormat::Ggml(ty) => {
                    let bytes = quant::expected_bytes(crate::format::StorageType::Ggml(ty), w.rows * w.cols).ok()?;
                    bytes.is_multiple_of(4).then_some(vec![bytes as usize / 4])
                }
            }
        };
        let mut per_weight = Vec::with_capacity(weights.len());
        for (i, w) in weights.iter().enumerate() {
            // The last weight may end inside a word: nothing follows it.
            match words(w) {
                Some(v) => per_weight.push(v),
                None if i + 1 == weights.len() => per_weight.push(w.parts[0].tensors().iter().map(|t| t.len()).collect()),
                None => return Ok(None),
            }
        }
        let bindings = per_weight[0].len();
        let limit = binding_limit(ctx) as usize / 4;
        for b in 0..bindings {
            if per_weight.iter().map(|v| v[b]).sum::<usize>() > limit {
                return Ok(None);
            }
        }
        let mut stacked = Vec::with_capacity(bindings);
        for b in 0..bindings {
            let parts: Vec<(&GpuTensor, usize)> =
                weights.iter().zip(&per_weight).map(|(w, v)| (w.parts[0].tensors()[b], v[b])).collect();
            let label = format!("{name}.{}", ["data", "scales", "zeros"][b]);
            stacked.push(ctx.concat_words(&label, &parts)?);
        }
        let rows = weights.iter().map(|w| w.rows).sum();
        let mut it = stacked.into_iter();
        let data = it.next().ok_or_else(|| Error::Shape { op: "stack", message: name.to_string() })?;
        let (scales, zeros) = (it.next(), it.next());
        Ok(Some(QWeight { format: first.format, rows, cols: first.cols, parts: vec![QPart { row0: 0, rows, data, scales, zeros }] }))
    }

    /// Bytes a full pass over the weight reads (packed data, scales, zeros).
    pub fn bytes(&self) -> u64 {
        self.parts.iter().flat_map(|p| p.tensors()).map(|t| t.len() as u64 * 4).sum()
    }

    /// Words each weft row occupies and groups per row; for repacked types, words and
    /// (super-)blocks per row (zero for other formats).
    pub(crate) fn row_layout(&self) -> (u32, u32) {
        match self.format {
            WeightFormat::Weft(q) => {
                (q.words_per_row(self.cols) as u32, q.groups_per_row(self.cols) as u32)
            }
            WeightFormat::Repacked(t) => {
                ((self.cols / 32 * quant::repack::chunk_words(t)) as u32, (self.cols / t.block_elements() as usize) as u32)
            }
            _ => (0, 0),
        }
    }
}

/// Words a row of `ty`'s planes takes in each: chunk words, head words, f16 d (halves, for Q6_K
/// and Q5_0) and high words (the 5-bit types).
fn plane_words(ty: GgmlType, cols: usize) -> (usize, usize, usize, usize) {
    let spr = cols / ty.block_elements() as usize;
    let d = if matches!(ty, GgmlType::Q6_K | GgmlType::Q5_0) { spr } else { 0 };
    let high = if quant::repack::level_bits(ty) == 5 { cols / 32 } else { 0 };
    (cols / 32 * quant::repack::chunk_words(ty), spr * head_words(ty), d, high)
}

/// A part of a [`WeightFormat::Repacked`] weight's planes by what they hold: heads, f16 d two a
/// word, high words (the bindings [`QWeight::planes_zeroed`] gives them).
pub(crate) fn plane_tensors(ty: GgmlType, part: &QPart) -> [Option<&GpuTensor>; 3] {
    let (scales, zeros) = (part.scales.as_ref(), part.zeros.as_ref());
    match ty {
        GgmlType::Q5_0 => [None, scales, zeros],
        GgmlType::Q6_K => [scales, zeros, None],
        _ => [scales, None, zeros],
    }
}

/// The tensor's name, with its first row when it is stored in several parts.
fn part_label(name: &str, row0: usize, parts: usize) -> String {
    if parts > 1 { format!("{name}[rows {row0}..]") } else { name.to_string() }
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
