//! Attention of prompt passes, flash-attention style (shaders/attention_prefill.wgsl): tiles of
//! query rows of one KV head's group against tiles of cache positions staged in workgroup
//! memory, so each K/V row is read once per 16 queries instead of once per query. The same
//! shapes, cache formats, masks and results as [`attention_masked`](super::attention::attention_masked),
//! whose CPU references ([`attention_cpu`](super::attention::attention_cpu),
//! [`attention_masked_cpu`](super::attention::attention_masked_cpu)) it is tested against.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{Dispatch, GpuContext, GpuTensor, Uniform};

use super::attention::{check, dispatch, AttentionMask, AttentionShape, ATTENTION_TOLERANCE};
use super::kv::KvFormat;
use super::Tolerance;

pub const PREFILL_ATTENTION_SHADER: ShaderSource = ShaderSource {
    name: "attention_prefill",
    source: &[wgsl!("attention_prefill.wgsl"), crate::ops::fragments::ATTENTION_COMMON],
};

/// The same f32 dot products, online softmax and weighted sums as the per-query kernel, in
/// another order: the per-query kernel's tolerance.
pub const PREFILL_ATTENTION_TOLERANCE: Tolerance = ATTENTION_TOLERANCE;

/// Query rows a workgroup takes and cache positions a tile stages (the shader's BQ and BK).
const ROWS: usize = 16;
const POSITIONS: usize = 32;
/// Lanes sharing a row pair; each sums DV column groups of four values.
const LANES: usize = 8;
/// The column groups per lane the kernel is compiled for: head_dim up to 32, 64 and 128.
const DVS: [usize; 3] = [1, 2, 4];

/// Largest head_dim the kernel takes; larger heads stay on the per-query kernel.
pub const PREFILL_MAX_HEAD_DIM: usize = 4 * LANES * DVS[DVS.len() - 1];

/// Column groups per lane for `head_dim`, if the kernel takes it.
fn dv(head_dim: usize) -> Option<usize> {
    if head_dim == 0 || !head_dim.is_multiple_of(4) {
        return None;
    }
    DVS.into_iter().find(|&dv| head_dim <= 4 * LANES * dv)
}

/// Bytes of workgroup memory the variant for `dv` declares (padded query and K/V tiles,
/// probabilities, per-lane maxima and sums).
fn workgroup_bytes(dv: usize) -> u32 {
    let stride = LANES * dv + 1;
    (16 * (ROWS + POSITIONS) * stride + 4 * (ROWS * (POSITIONS + 1) + ROWS * LANES)) as u32
}

/// Bytes of workgroup memory the kernel for `head_dim` needs, if it takes that head size.
pub fn prefill_attention_workgroup_bytes(head_dim: usize) -> Option<u32> {
    dv(head_dim).map(workgroup_bytes)
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    DVS.into_iter()
        .flat_map(|dv| KvFormat::ALL.map(|kv| (PREFILL_ATTENTION_SHADER, kv.defines(Defines::new().set("DV", dv)))))
        .collect()
}

/// Whether the tiled kernel is the faster one on this adapter. It reads each cached row once
/// per 16 queries instead of once per query, which is what a CPU-emulated adapter's few cores
/// are short of (lavapipe: 2-3x the prefill at 1,024 tokens). A pass gives it one workgroup per
/// 16 query rows of a KV head, though: 256 for a 128-token pass of the 7B shape, about two per
/// SM of an H100, against the per-query kernel's 4,096; there, at a 4,096-token prompt, it took
/// 5.76 s to the first token against 3.15 s (TinyLlama shape: 1.24 against 1.18 s). So hardware
/// GPUs keep the per-query kernel until the tiles also split the context. In a browser a
/// software adapter takes the CPU backend unless the page insists on WebGPU, so the wasm build
/// leaves the kernel out (about 3 KB of the gzipped module).
pub fn tiled_prefill_pays(ctx: &GpuContext) -> bool {
    !cfg!(target_arch = "wasm32") && ctx.capabilities().is_software
}

/// Whether [`prefill_attention`] runs `s` on this device: more than one token, head_dim a
/// multiple of 4 and at most [`PREFILL_MAX_HEAD_DIM`], and the tiles within the device's
/// workgroup memory (head_dim 128 needs 27,968 bytes, above WebGPU's default 16,384, which
/// head_dim 64 fits).
pub fn prefill_attention_fits(ctx: &GpuContext, s: &AttentionShape) -> bool {
    let limit = ctx.capabilities().limits.max_compute_workgroup_storage_size;
    s.n_tokens > 1 && s.kv.fits(s.head_dim) && prefill_attention_workgroup_bytes(s.head_dim).is_some_and(|b| b <= limit)
}

/// `out[t, h] = softmax(q[t, h] · K^T · scale) · V` with `mask`, as
/// [`attention_masked`](super::attention::attention_masked) computes it, for the passes
/// [`prefill_attention_fits`] accepts.
#[allow(clippy::too_many_arguments)]
pub async fn prefill_attention(
    ctx: &GpuContext,
    s: AttentionShape,
    mask: AttentionMask,
    q: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    out: &GpuTensor,
    scale: f32,
    step: &Uniform,
) -> Result<Dispatch> {
    check(&s, q, k_cache, v_cache, out)?;
    let Some(dv) = dv(s.head_dim).filter(|_| prefill_attention_fits(ctx, &s)) else {
        return Err(Error::Shape { op: "prefill_attention", message: "not a shape prefill_attention_fits accepts".into() });
    };
    let defines = s.kv.defines(Defines::new().set("DV", dv));
    let grid = [(s.n_tokens * (s.n_heads / s.n_kv_heads)).div_ceil(ROWS) as u32, s.n_kv_heads as u32, 1];
    dispatch(ctx, &PREFILL_ATTENTION_SHADER, &defines, &s, mask, [q, k_cache, v_cache, out], scale, 0, step, grid).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_dims_pick_the_smallest_variant() {
        assert_eq!([16, 32, 36, 64, 80, 128].map(dv), [Some(1), Some(1), Some(2), Some(2), Some(4), Some(4)]);
        assert_eq!([0, 30, 132, 256].map(dv), [None; 4]);
        // head_dim 64 fits WebGPU's default 16 KiB of workgroup memory, 128 the 32 KiB browsers offer.
        assert!(workgroup_bytes(2) <= 16_384);
        assert!(workgroup_bytes(4) <= 32_768);
    }
}
