//! Quantizing float matrices (F32, F16, BF16) to weft's block formats on the GPU, bit for bit
//! what the CPU reference [`crate::quant::weft::quantize`] computes: the same candidate search,
//! in the same order, on integer bit patterns (shaders/quantize.wgsl says why). A load uploads a
//! matrix's stored bytes, quantizes them into the weight's own buffers and drops the upload.
//!
//! Non-finite input: a group holding NaN or an infinity is left unquantized and its tensor is
//! reported by [`Quantizer::check`] as [`Error::NonFiniteWeights`]; the CPU reference would
//! quantize such a group to levels that decode to nothing like the input.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{GgmlType, SafeDtype, StorageType};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{GpuContext, Pipeline};
use crate::quant::weft::{QuantMatrix, Scheme, WeftQuant};

use super::grid;
use super::qmatmul::{binding_limit, QWeight};

pub const QUANTIZE_SHADER: ShaderSource =
    ShaderSource { name: "quantize", source: &[wgsl!("quantize.wgsl")] };

const WG: u32 = 64;

/// Groups per dispatch: each is a few milliseconds of work on a GPU, and a browser's watchdog
/// ends a submission that runs for seconds.
const GROUPS_PER_DISPATCH: usize = 1 << 16;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(QUANTIZE_SHADER, Defines::new().set("WG", WG))]
}

/// The kernel's code for a stored element type it reads, and the bytes of one element; None for
/// the types it does not read (the load decodes those on the CPU).
pub fn source_type(storage: StorageType) -> Option<(u32, usize)> {
    match storage {
        StorageType::Safe(SafeDtype::F32) | StorageType::Ggml(GgmlType::F32) => Some((0, 4)),
        StorageType::Safe(SafeDtype::F16) | StorageType::Ggml(GgmlType::F16) => Some((1, 2)),
        StorageType::Safe(SafeDtype::BF16) | StorageType::Ggml(GgmlType::BF16) => Some((2, 2)),
        _ => None,
    }
}

/// The quantize pipeline of one load, and which tensors it was given: a group that could not be
/// quantized records its tensor in a status word that [`Quantizer::check`] reads once, at the
/// end, so quantizing never waits for the GPU.
pub struct Quantizer {
    pipeline: Arc<Pipeline>,
    status: crate::gpu::GpuTensor,
    /// Bound as the zero points of symmetric formats, which have none (two writable bindings
    /// may not share a buffer).
    spare: crate::gpu::GpuTensor,
    names: RefCell<Vec<String>>,
}

impl Quantizer {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let pipeline = ctx.pipeline(&QUANTIZE_SHADER, &Defines::new().set("WG", WG)).await?;
        let status = ctx.upload_u32("quantize status", &[4], &[u32::MAX; 4])?;
        let spare = ctx.zeros("quantize spare", &[1], crate::gpu::DType::U32)?;
        Ok(Self { pipeline, status, spare, names: RefCell::new(Vec::new()) })
    }

    /// Queues the quantization of `bytes` (a [rows, cols] matrix stored as `storage`, which
    /// [`source_type`] accepts) to `quant`, into a new weight laid out as
    /// [`QWeight::from_weft`] lays it out.
    #[allow(clippy::too_many_arguments)]
    pub fn quantize(
        &self,
        ctx: &GpuContext,
        name: &str,
        quant: WeftQuant,
        storage: StorageType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<QWeight> {
        let fail = |message: String| Error::Shape { op: "quantize", message: format!("{name}: {message}") };
        if quant.scheme == Scheme::K {
            return Err(fail(format!("{} is quantized on the CPU: the GPU quantizer has no 8-bit scale grid", quant.name())));
        }
        let (dtype, size) = source_type(storage).ok_or_else(|| fail(format!("{} is not F32, F16 or BF16", storage.name())))?;
        if rows.checked_mul(cols).and_then(|n| n.checked_mul(size)) != Some(bytes.len()) {
            return Err(fail(format!("{} bytes do not hold [{rows}, {cols}] {}", bytes.len(), storage.name())));
        }
        let weight = QWeight::weft_zeroed(ctx, name, quant, rows, cols)?;
        let gpr = quant.groups_per_row(cols);
        let row_bytes = cols * size;
        // Rows per upload: within one storage binding and one dispatch's share of groups.
        let per = ((binding_limit(ctx) as usize / row_bytes).min(GROUPS_PER_DISPATCH / gpr)).max(1);
        let tensor = {
            let mut names = self.names.borrow_mut();
            names.push(name.to_string());
            (names.len() - 1) as u32
        };
        let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
        let u32_of = |v: usize| u32::try_from(v).map_err(|_| fail(format!("{v} exceeds u32")));
        for part in &weight.parts {
            let zeros = part.zeros.as_ref().unwrap_or(&self.spare);
            let scales = part.scales.as_ref().ok_or_else(|| fail("a weft weight without scales".into()))?;
            for r0 in (part.row0..part.row0 + part.rows).step_by(per) {
                let n = per.min(part.row0 + part.rows - r0);
                let src = ctx.upload_bytes_as_u32(&format!("{name} source"), &bytes[r0 * row_bytes..(r0 + n) * row_bytes])?;
                let groups = u32_of(n * gpr)?;
                let grid = grid(groups.div_ceil(WG), max);
                let params = [
                    u32_of(n)?,
                    u32_of(cols)?,
                    u32_of(gpr)?,
                    grid[0] * WG,
                    quant.bits,
                    quant.group,
                    u32::from(quant.scheme == Scheme::Asym),
                    dtype,
                    u32_of((r0 - part.row0) * gpr)?,
                    tensor,
                    0,
                    0,
                ];
                let tensors = [&src, &part.data, scales, zeros, &self.status];
                let d = ctx.dispatch(&self.pipeline, &tensors, Some(bytemuck::cast_slice(&params)), grid)?;
                ctx.run(&[&d]);
            }
        }
        Ok(weight)
    }

    /// Waits for every quantization queued so far; the first tensor that held NaN or an
    /// infinity is [`Error::NonFiniteWeights`].
    pub async fn check(&self, ctx: &GpuContext) -> Result<()> {
        let status = ctx.read_u32(&self.status).await?;
        match self.names.borrow().get(status[0] as usize) {
            Some(name) => Err(Error::NonFiniteWeights { name: name.clone() }),
            None => Ok(()),
        }
    }
}

/// A weft weight's packed words, scales and zero points read back from the GPU, as the CPU
/// quantizer returns them (for digests and tests: a load never reads its weights back).
pub async fn read_back(ctx: &GpuContext, weight: &QWeight) -> Result<QuantMatrix> {
    let crate::ops::qmatmul::WeightFormat::Weft(quant) = weight.format else {
        return Err(Error::Shape { op: "quantize", message: format!("{} is not a weft format", weight.format.name()) });
    };
    let gpr = quant.groups_per_row(weight.cols);
    let mut m = QuantMatrix { quant, rows: weight.rows, cols: weight.cols, words: Vec::new(), scales: Vec::new(), zeros: Vec::new() };
    let halves = |words: Vec<u32>, n: usize| -> Vec<u16> {
        words.iter().flat_map(|w| [*w as u16, (w >> 16) as u16]).take(n).collect()
    };
    for part in &weight.parts {
        let groups = part.rows * gpr;
        m.words.extend(ctx.read_u32(&part.data).await?.into_iter().take(part.rows * quant.words_per_row(weight.cols)));
        if let Some(s) = &part.scales {
            m.scales.extend(halves(ctx.read_u32(s).await?, groups));
        }
        if let Some(z) = &part.zeros {
            m.zeros.extend(halves(ctx.read_u32(z).await?, groups));
        }
    }
    Ok(m)
}
