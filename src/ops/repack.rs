//! GGUF matrices repacked on the GPU into the layouts quant/repack.rs computes on the CPU, bit
//! for bit: Q4_0 / Q8_0 into the weft format that holds them exactly ([`to_weft`]), Q4_1,
//! Q5_0, Q5_1 and the K-quants Q4_K, Q5_K, Q6_K into their planes ([`to_planes`]). A load
//! uploads the stored blocks and the kernel writes the weight's own buffers, so the CPU only
//! reads the file: the CPU repack ran at ~450 MB/s (Q4_0) on an H100 machine's cores, and on
//! one core in the browser.
//!
//! The blocks go up in runs of [`BLOCKS_PER_DISPATCH`] 32-weight chunks, each its own buffer,
//! dropped once its dispatch is queued (wgpu frees it when the kernel has run): beside the
//! weight, a load holds one run's raw bytes, never a second copy of the matrix.
//!
//! [`to_weft`]: crate::quant::repack::to_weft
//! [`to_planes`]: crate::quant::repack::to_planes

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::GgmlType;
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{GpuContext, Pipeline};
use crate::gpu::{DType, GpuTensor};
use crate::quant::repack::{chunk_words, has_planes, head_words, weft_equivalent, KPlanes};

use super::fragments::DECODE;
use super::grid;
use super::qmatmul::{binding_limit, plane_tensors, QWeight};

pub const REPACK_SHADER: ShaderSource =
    ShaderSource { name: "repack", source: &[wgsl!("repack.wgsl"), DECODE] };

const WG: u32 = 64;

/// 32-weight chunks per dispatch and upload, in whole blocks and an even number of them (each
/// run starts on an f16 word of its own). 2^18 chunks are 4.7 MB of Q4_0 or Q4_K, 8.9 MB of
/// Q8_0, 6.9 MB of Q6_K.
pub const BLOCKS_PER_DISPATCH: usize = 1 << 18;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(REPACK_SHADER, Defines::new().set("WG", WG))]
}

/// Whether the GPU repacks `ty`: the types with a weft equivalent or planes.
pub fn repacks(ty: GgmlType) -> bool {
    weft_equivalent(ty).is_some() || has_planes(ty)
}

/// Whether `bytes` are whole rows of `ty`'s blocks for a [rows, cols] matrix.
pub fn whole_blocks(ty: GgmlType, rows: usize, cols: usize, bytes: usize) -> bool {
    let be = ty.block_elements() as usize;
    let row_bytes = cols / be * ty.block_bytes() as usize;
    cols.is_multiple_of(be) && rows.checked_mul(row_bytes) == Some(bytes)
}

/// The repack pipeline of one load.
pub struct Repacker {
    pipeline: Arc<Pipeline>,
}

impl Repacker {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self { pipeline: ctx.pipeline(&REPACK_SHADER, &Defines::new().set("WG", WG)).await? })
    }

    /// Queues the repack of `bytes` ([rows, cols] of `ty`, row-major, a type [`repacks`] takes)
    /// into a new weight laid out as [`QWeight::from_weft`] lays out
    /// [`to_weft`](crate::quant::repack::to_weft)'s matrix, or [`QWeight::from_planes`]
    /// [`to_planes`](crate::quant::repack::to_planes)'s planes.
    pub fn repack(&self, ctx: &GpuContext, name: &str, ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<QWeight> {
        let fail = |message: String| Error::Shape { op: "repack", message: format!("{name}: {message}") };
        if !repacks(ty) {
            return Err(fail(format!("{} has no weft equivalent or planes", ty.name())));
        }
        if !whole_blocks(ty, rows, cols, bytes.len()) {
            return Err(fail(format!("{} bytes are not [{rows}, {cols}] in whole rows of {} blocks", bytes.len(), ty.name())));
        }
        let (block, block_chunks) = (ty.block_bytes() as usize, ty.block_elements() as usize / 32);
        let weight = match weft_equivalent(ty) {
            Some(quant) => QWeight::weft_zeroed(ctx, name, quant, rows, cols)?,
            None => QWeight::planes_zeroed(ctx, name, ty, rows, cols)?,
        };
        let u32_of = |v: usize| u32::try_from(v).map_err(|_| fail(format!("{v} exceeds u32")));
        // What the kernel reads of a block: its words a chunk, the head it copies, and where its
        // f16 d lies (the weft types' scale; none: u32::MAX).
        let (chunk, head, head_at, d_at) = match ty {
            GgmlType::Q8_0 => (8, 0, 0, 0),
            GgmlType::Q4_0 | GgmlType::Q5_0 => (4, 0, 0, 0),
            GgmlType::Q6_K => (chunk_words(ty), head_words(ty), 192, 208),
            _ => (chunk_words(ty), head_words(ty), 0, u32::MAX as usize),
        };
        // Blocks per run: even, and within one storage binding too.
        let per = (BLOCKS_PER_DISPATCH / block_chunks).min(binding_limit(ctx) as usize / block / 2 * 2).max(2);
        let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
        let bpr = cols / ty.block_elements() as usize;
        // The bindings a type has no plane for take a word of their own: a writable buffer bound
        // twice in one dispatch is a usage conflict.
        let spare = |what: &str| ctx.zeros(&format!("{name} no {what}"), &[1], DType::U32);
        let spares = [spare("heads")?, spare("halves")?, spare("high")?];
        for part in &weight.parts {
            let planes = match weft_equivalent(ty) {
                Some(_) => [None, part.scales.as_ref(), None],
                None => plane_tensors(ty, part),
            };
            let [heads, halves, high] = [0, 1, 2].map(|i| planes[i].unwrap_or(&spares[i]));
            let (first, blocks) = (part.row0 * bpr, part.rows * bpr);
            for b0 in (0..blocks).step_by(per) {
                let n = per.min(blocks - b0);
                let at = (first + b0) * block;
                // Padded to whole words by the upload.
                let src = ctx.upload_bytes_as_u32(&format!("{name} blocks"), &bytes[at..at + n * block])?;
                let chunks = u32_of(n * block_chunks)?;
                let grid = grid(chunks.div_ceil(WG), max);
                let params = [chunks, ty.id(), u32_of(b0 * block_chunks)?, grid[0] * WG]
                    .into_iter()
                    .chain([block, block_chunks, chunk, head, head_at, d_at].map(|v| v as u32))
                    .collect::<Vec<u32>>();
                let tensors = [&src, &part.data, heads, halves, high];
                let d = ctx.dispatch(&self.pipeline, &tensors, Some(bytemuck::cast_slice(&params)), grid)?;
                ctx.run(&[&d]);
            }
        }
        Ok(weight)
    }
}

/// A [`WeightFormat::Repacked`](super::qmatmul::WeightFormat::Repacked) weight's planes read
/// back from the GPU, as [`to_planes`](crate::quant::repack::to_planes) returns them (for tests,
/// as [`read_back`](super::quantize::read_back) is for weft weights).
pub async fn read_back_planes(ctx: &GpuContext, weight: &QWeight) -> Result<KPlanes> {
    let super::qmatmul::WeightFormat::Repacked(ty) = weight.format else {
        return Err(Error::Shape { op: "repack", message: format!("{} has no planes", weight.format.name()) });
    };
    let (cols, bpr) = (weight.cols, weight.cols / ty.block_elements() as usize);
    let mut m = KPlanes { ty, rows: weight.rows, cols, words: Vec::new(), high: Vec::new(), heads: Vec::new(), d: Vec::new() };
    for part in &weight.parts {
        let [heads, halves, high] = plane_tensors(ty, part);
        m.words.extend(read(ctx, &part.data, part.rows * cols / 32 * chunk_words(ty)).await?);
        if let Some(t) = heads {
            m.heads.extend(read(ctx, t, part.rows * bpr * head_words(ty)).await?);
        }
        if let Some(t) = halves {
            let words = read(ctx, t, (part.rows * bpr).div_ceil(2)).await?;
            m.d.extend(words.iter().flat_map(|w| [*w as u16, (w >> 16) as u16]).take(part.rows * bpr));
        }
        if let Some(t) = high {
            m.high.extend(read(ctx, t, part.rows * cols / 32).await?);
        }
    }
    Ok(m)
}

/// The first `n` words of `t`.
async fn read(ctx: &GpuContext, t: &GpuTensor, n: usize) -> Result<Vec<u32>> {
    Ok(ctx.read_u32(t).await?.into_iter().take(n).collect())
}
