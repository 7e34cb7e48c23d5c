//! GGUF Q4_0 / Q8_0 matrices repacked on the GPU into the weft format that holds them exactly,
//! the words and scales [`crate::quant::repack::to_weft`] (the CPU reference) computes, bit for
//! bit. A load uploads the stored blocks and the kernel writes the weight's own buffers, so the
//! CPU only reads the file: the CPU repack ran at ~450 MB/s on an H100 machine's cores.
//!
//! The blocks go up in runs of [`BLOCKS_PER_DISPATCH`], each its own buffer, dropped once its
//! dispatch is queued (wgpu frees it when the kernel has run): beside the weight, a load holds
//! one run's raw bytes, never a second copy of the matrix.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::GgmlType;
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{GpuContext, Pipeline};
use crate::quant::repack::weft_equivalent;

use super::fragments::DECODE;
use super::grid;
use super::qmatmul::{binding_limit, QWeight};

pub const REPACK_SHADER: ShaderSource =
    ShaderSource { name: "repack", source: &[wgsl!("repack.wgsl"), DECODE] };

const WG: u32 = 64;

/// Blocks per dispatch and upload (even: each run starts on a scale word of its own). 2^18
/// blocks are 4.7 MB of Q4_0, 8.9 MB of Q8_0.
pub const BLOCKS_PER_DISPATCH: usize = 1 << 18;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(REPACK_SHADER, Defines::new().set("WG", WG))]
}

/// Whether `bytes` are whole rows of `ty`'s 32-weight blocks for a [rows, cols] matrix.
pub fn whole_blocks(ty: GgmlType, rows: usize, cols: usize, bytes: usize) -> bool {
    let row_bytes = cols / 32 * ty.block_bytes() as usize;
    cols.is_multiple_of(32) && rows.checked_mul(row_bytes) == Some(bytes)
}

/// The repack pipeline of one load.
pub struct Repacker {
    pipeline: Arc<Pipeline>,
}

impl Repacker {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self { pipeline: ctx.pipeline(&REPACK_SHADER, &Defines::new().set("WG", WG)).await? })
    }

    /// Queues the repack of `bytes` ([rows, cols] of Q4_0 or Q8_0, row-major) into a new weight
    /// laid out as [`QWeight::from_weft`] lays out [`to_weft`](crate::quant::repack::to_weft)'s
    /// matrix.
    pub fn repack(&self, ctx: &GpuContext, name: &str, ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<QWeight> {
        let fail = |message: String| Error::Shape { op: "repack", message: format!("{name}: {message}") };
        let quant = weft_equivalent(ty).ok_or_else(|| fail(format!("{} has no weft equivalent", ty.name())))?;
        if !whole_blocks(ty, rows, cols, bytes.len()) {
            return Err(fail(format!("{} bytes are not [{rows}, {cols}] in whole rows of {} blocks", bytes.len(), ty.name())));
        }
        let weight = QWeight::weft_zeroed(ctx, name, quant, rows, cols)?;
        let (gpr, block) = (cols / 32, ty.block_bytes() as usize);
        // Within one storage binding too, kept even.
        let per = BLOCKS_PER_DISPATCH.min(binding_limit(ctx) as usize / block / 2 * 2).max(2);
        let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
        let u32_of = |v: usize| u32::try_from(v).map_err(|_| fail(format!("{v} exceeds u32")));
        for part in &weight.parts {
            let scales = part.scales.as_ref().ok_or_else(|| fail("a weft weight without scales".into()))?;
            let (first, blocks) = (part.row0 * gpr, part.rows * gpr);
            for b0 in (0..blocks).step_by(per) {
                let n = per.min(blocks - b0);
                let at = (first + b0) * block;
                // Padded to whole words by the upload.
                let src = ctx.upload_bytes_as_u32(&format!("{name} blocks"), &bytes[at..at + n * block])?;
                let grid = grid(u32_of(n.div_ceil(2))?.div_ceil(WG), max);
                let params = [u32_of(n)?, quant.bits, u32_of(b0)?, grid[0] * WG];
                let d = ctx.dispatch(&self.pipeline, &[&src, &part.data, scales], Some(bytemuck::cast_slice(&params)), grid)?;
                ctx.run(&[&d]);
            }
        }
        Ok(weight)
    }
}
