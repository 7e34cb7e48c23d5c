//! Decoding stored tensors (every safetensors dtype and GGML type) to f32 on the GPU, bit for bit
//! what [`crate::quant::decode_to_f32`] computes.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{GgmlType, SafeDtype, StorageType};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};
use crate::quant;

use super::grid;

/// The element-wise kernel followed by the shared decoders.
pub const DEQUANT_SHADER: ShaderSource = ShaderSource {
    name: "dequant",
    source: &[wgsl!("dequant.wgsl"), crate::ops::fragments::DECODE],
};

const WG: u32 = 256;

/// Scales (and zero points) applied to decoded codes: `w = scale · (w − zero)`.
pub const RESCALE_SHADER: ShaderSource =
    ShaderSource { name: "rescale", source: &[wgsl!("rescale.wgsl")] };

/// The shader define selecting `ty`'s decoder. GGUF's F32/F16/BF16 decode exactly as the
/// safetensors dtypes of the same name.
pub(crate) fn define(ty: StorageType) -> &'static str {
    match ty {
        StorageType::Safe(d) => match d {
            SafeDtype::F64 => "DT_F64",
            SafeDtype::F32 => "DT_F32",
            SafeDtype::F16 => "DT_F16",
            SafeDtype::BF16 => "DT_BF16",
            SafeDtype::F8E4M3 => "DT_F8_E4M3",
            SafeDtype::F8E5M2 => "DT_F8_E5M2",
            SafeDtype::F4 => "DT_F4",
            SafeDtype::I64 => "DT_I64",
            SafeDtype::I32 => "DT_I32",
            SafeDtype::I16 => "DT_I16",
            SafeDtype::I8 => "DT_I8",
            SafeDtype::U64 => "DT_U64",
            SafeDtype::U32 => "DT_U32",
            SafeDtype::U16 => "DT_U16",
            SafeDtype::U8 => "DT_U8",
            SafeDtype::Bool => "DT_BOOL",
        },
        StorageType::Ggml(t) => match t {
            GgmlType::F32 => "DT_F32",
            GgmlType::F16 => "DT_F16",
            GgmlType::BF16 => "DT_BF16",
            GgmlType::Q4_0 => "DT_Q4_0",
            GgmlType::Q4_1 => "DT_Q4_1",
            GgmlType::Q5_0 => "DT_Q5_0",
            GgmlType::Q5_1 => "DT_Q5_1",
            GgmlType::Q8_0 => "DT_Q8_0",
            GgmlType::Q2_K => "DT_Q2_K",
            GgmlType::Q3_K => "DT_Q3_K",
            GgmlType::Q4_K => "DT_Q4_K",
            GgmlType::Q5_K => "DT_Q5_K",
            GgmlType::Q6_K => "DT_Q6_K",
        },
    }
}

fn defines(ty: StorageType) -> Defines {
    Defines::new().set("WG", WG).set(define(ty), 1)
}

/// Every storage type weft decodes: the safetensors dtypes, then the GGML types.
pub fn all_types() -> Vec<StorageType> {
    SafeDtype::ALL
        .map(StorageType::Safe)
        .into_iter()
        .chain(GgmlType::ALL.map(StorageType::Ggml))
        .collect()
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    let mut all: Vec<Defines> = all_types().into_iter().map(defines).collect();
    all.dedup();
    let mut out: Vec<_> = all.into_iter().map(|d| (DEQUANT_SHADER, d)).collect();
    out.push((RESCALE_SHADER, Defines::new().set("WG", WG)));
    out.push((RESCALE_SHADER, Defines::new().set("WG", WG).set("ZERO", 1)));
    out
}

/// Applies `scales` (and `zeros`) laid out by `layout` to the decoded f32 tensor `w` in place,
/// bit for bit what [`quant::scaled::rescale`] computes on the CPU.
pub async fn rescale(
    ctx: &GpuContext,
    layout: &quant::scaled::ScaleLayout,
    w: &GpuTensor,
    scales: &GpuTensor,
    zeros: Option<&GpuTensor>,
) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "rescale", message };
    let groups = layout.groups();
    let ok = w.dtype == DType::F32
        && w.len() == layout.rows * layout.cols
        && scales.dtype == DType::F32
        && scales.len() == groups
        && zeros.is_none_or(|z| z.dtype == DType::F32 && z.len() == groups)
        && zeros.is_some() == layout.zero
        && layout.group > 0;
    if !ok {
        return Err(fail(format!(
            "w {} with scales {} for {layout:?}",
            w.label_shape(),
            scales.label_shape()
        )));
    }
    let n = u32::try_from(w.len()).map_err(|_| fail(format!("{} elements exceed u32", w.len())))?;
    let words = [layout.cols, layout.group, layout.groups_per_row()].map(u32::try_from);
    let [Ok(cols), Ok(group), Ok(gpr)] = words else {
        return Err(fail(format!("{layout:?} exceeds u32")));
    };
    let mut defines = Defines::new().set("WG", WG);
    let mut tensors = vec![w, scales];
    if let Some(z) = zeros {
        defines = defines.set("ZERO", 1);
        tensors.push(z);
    }
    let pipeline = ctx.pipeline(&RESCALE_SHADER, &defines).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let grid = grid(n.div_ceil(WG), max);
    let params = [n, grid[0] * WG, cols, group, gpr, 0, 0, 0];
    ctx.dispatch(&pipeline, &tensors, Some(bytemuck::cast_slice(&params)), grid)
}

/// Decodes `packed` (the stored bytes as little-endian u32 words, see [`quant::pack_words`]) of
/// type `ty` into the f32 tensor `out`, whose element count says how many values to decode.
pub async fn dequant(
    ctx: &GpuContext,
    ty: StorageType,
    packed: &GpuTensor,
    out: &GpuTensor,
) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "dequant", message };
    if packed.dtype != DType::U32 || out.dtype != DType::F32 {
        return Err(fail(format!(
            "packed must be U32 words and out F32, got {} and {}",
            packed.label_shape(),
            out.label_shape()
        )));
    }
    let elements = out.len();
    let bytes = quant::expected_bytes(ty, elements)?;
    let words = bytes.div_ceil(4);
    if (packed.len() as u64) < words {
        return Err(fail(format!(
            "{elements} {} elements need {bytes} bytes ({words} words), packed holds {} words",
            ty.name(),
            packed.len()
        )));
    }
    let n = u32::try_from(elements).map_err(|_| fail(format!("{elements} elements exceed u32")))?;
    let pipeline = ctx.pipeline(&DEQUANT_SHADER, &defines(ty)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let groups = grid(n.div_ceil(WG), max);
    let params = [n, groups[0] * WG, 0, 0];
    ctx.dispatch(&pipeline, &[packed, out], Some(bytemuck::cast_slice(&params)), groups)
}

/// Names a storage type: a safetensors dtype name (`F16`, `F8_E4M3`, ...), a GGML type name
/// (`Q4_K`, ...), or `gguf:NAME` for GGUF's own F32/F16/BF16.
pub fn storage_type_from_name(name: &str) -> Option<StorageType> {
    if let Some(ggml) = name.strip_prefix("gguf:") {
        return GgmlType::ALL.into_iter().find(|t| t.name() == ggml).map(StorageType::Ggml);
    }
    SafeDtype::from_name(name)
        .map(StorageType::Safe)
        .or_else(|| GgmlType::ALL.into_iter().find(|t| t.name() == name).map(StorageType::Ggml))
}

/// One element where GPU and CPU disagree, as f32 bit patterns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    pub index: usize,
    pub cpu: u32,
    pub gpu: u32,
}

/// Outcome of decoding seeded random data on both sides.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DequantReport {
    #[serde(rename = "type")]
    pub ty: String,
    pub elements: usize,
    pub seed: u64,
    /// Elements whose f32 bits differ (NaN bits included).
    pub mismatches: usize,
    pub first_mismatch: Option<Mismatch>,
    /// NaN and infinite values in the reference: evidence that the data reached the edge cases.
    pub nan: usize,
    pub infinite: usize,
}

/// Decodes [`quant::sample::random_bytes`] for `ty` on the CPU and on the GPU and compares the
/// bits of every element.
pub async fn self_test(
    ctx: &GpuContext,
    ty: StorageType,
    seed: u64,
    elements: usize,
) -> Result<DequantReport> {
    let bytes = quant::sample::random_bytes(ty, seed, elements)?;
    let want = quant::decode_to_f32(ty, &bytes, elements)?;
    let got = gpu_decode(ctx, ty, &bytes, elements).await?;
    let mut report = DequantReport {
        ty: ty.name().to_string(),
        elements,
        seed,
        mismatches: 0,
        first_mismatch: None,
        nan: want.iter().filter(|v| v.is_nan()).count(),
        infinite: want.iter().filter(|v| v.is_infinite()).count(),
    };
    if got.len() != want.len() {
        report.mismatches = want.len().abs_diff(got.len()).max(1);
    }
    for (index, (g, w)) in got.iter().zip(&want).enumerate() {
        if g.to_bits() != w.to_bits() {
            report.mismatches += 1;
            if report.first_mismatch.is_none() {
                report.first_mismatch = Some(Mismatch { index, cpu: w.to_bits(), gpu: g.to_bits() });
            }
        }
    }
    Ok(report)
}

/// Uploads `bytes`, decodes them on the GPU and reads the f32 values back.
pub async fn gpu_decode(
    ctx: &GpuContext,
    ty: StorageType,
    bytes: &[u8],
    elements: usize,
) -> Result<Vec<f32>> {
    let words = quant::pack_words(bytes);
    let packed = ctx.upload_u32("dequant packed", &[words.len()], &words)?;
    let out = ctx.zeros("dequant out", &[elements], DType::F32)?;
    let d = dequant(ctx, ty, &packed, &out).await?;
    ctx.run(&[&d]);
    ctx.read_f32(&out).await
}
