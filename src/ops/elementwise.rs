//! Elementwise kernels.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const ADD_SHADER: ShaderSource =
    ShaderSource { name: "add", source: &[wgsl!("add.wgsl")] };

/// f32 addition is correctly rounded on every conforming GPU, so the result must be exact.
pub const ADD_TOLERANCE: Tolerance = Tolerance::EXACT;

const WG: u32 = 256;

pub const ADD_INPLACE_SHADER: ShaderSource =
    ShaderSource { name: "add_inplace", source: &[wgsl!("add_inplace.wgsl")] };

pub const SILU_MUL_SHADER: ShaderSource =
    ShaderSource { name: "silu_mul", source: &[wgsl!("silu_mul.wgsl")] };

pub const BIAS_ADD_SHADER: ShaderSource =
    ShaderSource { name: "bias_add", source: &[wgsl!("bias_add.wgsl")] };

pub const RELU_SHADER: ShaderSource =
    ShaderSource { name: "relu", source: &[wgsl!("relu.wgsl")] };

/// `max(x, 0)` is exact.
pub const RELU_TOLERANCE: Tolerance = Tolerance::EXACT;

pub const SCALE_CAP_SHADER: ShaderSource =
    ShaderSource { name: "scale_cap", source: &[wgsl!("scale_cap.wgsl")] };

pub const COPY_ROWS_SHADER: ShaderSource =
    ShaderSource { name: "copy_rows", source: &[wgsl!("copy_rows.wgsl")] };

/// One GPU `exp`, a division and a product.
pub const SILU_MUL_TOLERANCE: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    let d = Defines::new().set("WG", WG);
    vec![
        (ADD_SHADER, d.clone()),
        (ADD_INPLACE_SHADER, d.clone()),
        (SILU_MUL_SHADER, d.clone()),
        (SILU_MUL_SHADER, d.clone().set("PAIRS", 1)),
        (SILU_MUL_SHADER, d.clone().set("GELU", 1)),
        (SILU_MUL_SHADER, d.clone().set("PAIRS", 1).set("GELU", 1)),
        (SCALE_CAP_SHADER, d.clone()),
        (SCALE_CAP_SHADER, d.clone().set("SOFTCAP", 1)),
        (BIAS_ADD_SHADER, d.clone()),
        (RELU_SHADER, d.clone()),
        (COPY_ROWS_SHADER, d),
    ]
}

fn flat_f32(op: &'static str, tensors: &[&GpuTensor]) -> Result<u32> {
    let first = tensors[0];
    for t in tensors {
        if t.shape != first.shape || t.dtype != DType::F32 {
            return Err(Error::Shape {
                op,
                message: format!("operands must be equal-shaped F32, got {}", t.label_shape()),
            });
        }
    }
    u32::try_from(first.len())
        .map_err(|_| Error::Shape { op, message: format!("{} elements", first.len()) })
}

async fn elementwise(
    ctx: &GpuContext,
    shader: &ShaderSource,
    tensors: &[&GpuTensor],
) -> Result<Dispatch> {
    let n = flat_f32(shader.name, tensors)?;
    over_elements(ctx, shader, tensors, n, 0).await
}

/// One invocation per element of an `n`-element result; `extra` is the kernel's third
/// parameter word.
async fn over_elements(
    ctx: &GpuContext,
    shader: &ShaderSource,
    tensors: &[&GpuTensor],
    n: u32,
    extra: u32,
) -> Result<Dispatch> {
    over_elements_with(ctx, shader, Defines::new(), tensors, n, extra).await
}

async fn over_elements_with(
    ctx: &GpuContext,
    shader: &ShaderSource,
    defines: Defines,
    tensors: &[&GpuTensor],
    n: u32,
    extra: u32,
) -> Result<Dispatch> {
    let pipeline = ctx.pipeline(shader, &defines.set("WG", WG)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let groups = grid(n.div_ceil(WG), max);
    let params = [n, groups[0] * WG, extra, 0];
    ctx.dispatch(&pipeline, tensors, Some(bytemuck::cast_slice(&params)), groups)
}

/// `x[r, :] += b` for an f32 [rows, cols] and bias [cols].
pub async fn bias_add(ctx: &GpuContext, x: &GpuTensor, b: &GpuTensor) -> Result<Dispatch> {
    let cols = match (&x.shape[..], &b.shape[..]) {
        (&[_, c], &[bc]) if c == bc && c > 0 && x.dtype == DType::F32 && b.dtype == DType::F32 => c,
        _ => {
            return Err(Error::Shape {
                op: "bias_add",
                message: format!("x {} and bias {}", x.label_shape(), b.label_shape()),
            })
        }
    };
    let n = u32::try_from(x.len()).map_err(|_| Error::Shape { op: "bias_add", message: "too large".into() })?;
    over_elements(ctx, &BIAS_ADD_SHADER, &[x, b], n, cols as u32).await
}

/// `x = max(x, 0)` in place, for an f32 tensor of any shape.
pub async fn relu(ctx: &GpuContext, x: &GpuTensor) -> Result<Dispatch> {
    let n = flat_f32("relu", &[x])?;
    over_elements(ctx, &RELU_SHADER, &[x], n, 0).await
}

/// CPU reference for `relu`.
pub fn relu_cpu(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| v.max(0.0) as f64).collect()
}

/// Copies all of `x` into the equal-sized `out` (snapshots of activations for debugging).
pub async fn copy(ctx: &GpuContext, x: &GpuTensor, out: &GpuTensor) -> Result<Dispatch> {
    if x.len() != out.len() || x.dtype != DType::F32 || out.dtype != DType::F32 {
        return Err(Error::Shape {
            op: "copy",
            message: format!("{} into {}", x.label_shape(), out.label_shape()),
        });
    }
    let n = u32::try_from(x.len()).map_err(|_| Error::Shape { op: "copy", message: "too large".into() })?;
    over_elements(ctx, &COPY_ROWS_SHADER, &[x, out], n, 0).await
}

/// Copies row `row` of an f32 [rows, cols] into `out` [1, cols].
pub async fn copy_row(ctx: &GpuContext, x: &GpuTensor, row: usize, out: &GpuTensor) -> Result<Dispatch> {
    match (&x.shape[..], &out.shape[..]) {
        (&[rows, c], &[1, oc]) if c == oc && row < rows && x.dtype == DType::F32 && out.dtype == DType::F32 => {
            over_elements(ctx, &COPY_ROWS_SHADER, &[x, out], c as u32, (row * c) as u32).await
        }
        _ => Err(Error::Shape {
            op: "copy_row",
            message: format!("row {row} of {} into {}", x.label_shape(), out.label_shape()),
        }),
    }
}

/// `out[r, :] = silu(gu[r, :cols]) * gu[r, cols:]` for `gu` [rows, 2 * cols], the output of
/// the gate and up projections stacked into one matrix.
pub async fn silu_mul_pairs(ctx: &GpuContext, gu: &GpuTensor, out: &GpuTensor) -> Result<Dispatch> {
    glu_pairs(ctx, false, gu, out).await
}

/// [`silu_mul_pairs`] with the tanh-approximate GELU (`gelu`) or SiLU.
pub async fn glu_pairs(ctx: &GpuContext, gelu: bool, gu: &GpuTensor, out: &GpuTensor) -> Result<Dispatch> {
    match (&gu.shape[..], &out.shape[..]) {
        (&[rows, c2], &[orows, cols]) if rows == orows && c2 == 2 * cols && cols > 0
            && gu.dtype == DType::F32 && out.dtype == DType::F32 =>
        {
            let n = u32::try_from(out.len())
                .map_err(|_| Error::Shape { op: "silu_mul_pairs", message: "too large".into() })?;
            let defines = Defines::new().set("PAIRS", 1);
            let defines = if gelu { defines.set("GELU", 1) } else { defines };
            over_elements_with(ctx, &SILU_MUL_SHADER, defines, &[gu, gu, out], n, cols as u32).await
        }
        _ => Err(Error::Shape {
            op: "silu_mul_pairs",
            message: format!("gate|up {} into {}: need [rows, 2 * cols] and [rows, cols]", gu.label_shape(), out.label_shape()),
        }),
    }
}

/// `x += y` (the residual connection).
pub async fn add_inplace(ctx: &GpuContext, x: &GpuTensor, y: &GpuTensor) -> Result<Dispatch> {
    elementwise(ctx, &ADD_INPLACE_SHADER, &[x, y]).await
}

/// `out = silu(gate) * up` (SwiGLU).
pub async fn silu_mul(
    ctx: &GpuContext,
    gate: &GpuTensor,
    up: &GpuTensor,
    out: &GpuTensor,
) -> Result<Dispatch> {
    elementwise(ctx, &SILU_MUL_SHADER, &[gate, up, out]).await
}

/// `out = gelu_tanh(gate) * up` (GeGLU).
pub async fn gelu_mul(ctx: &GpuContext, gate: &GpuTensor, up: &GpuTensor, out: &GpuTensor) -> Result<Dispatch> {
    let n = flat_f32("gelu_mul", &[gate, up, out])?;
    over_elements_with(ctx, &SILU_MUL_SHADER, Defines::new().set("GELU", 1), &[gate, up, out], n, 0).await
}

/// `x *= by`, in place.
pub async fn scale_inplace(ctx: &GpuContext, x: &GpuTensor, by: f32) -> Result<Dispatch> {
    let n = flat_f32("scale", &[x])?;
    over_elements_with(ctx, &SCALE_CAP_SHADER, Defines::new(), &[x], n, by.to_bits()).await
}

/// `x = cap * tanh(x / cap)`, in place (soft-capping).
pub async fn softcap_inplace(ctx: &GpuContext, x: &GpuTensor, cap: f32) -> Result<Dispatch> {
    let n = flat_f32("softcap", &[x])?;
    over_elements_with(ctx, &SCALE_CAP_SHADER, Defines::new().set("SOFTCAP", 1), &[x], n, cap.to_bits()).await
}

/// CPU reference for `silu_mul`.
pub fn silu_mul_cpu(gate: &[f32], up: &[f32]) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| g as f64 / (1.0 + (-(g as f64)).exp()) * u as f64)
        .collect()
}

/// `out = a + b` for same-shaped f32 tensors.
pub async fn add(
    ctx: &GpuContext,
    a: &GpuTensor,
    b: &GpuTensor,
    out: &GpuTensor,
) -> Result<Dispatch> {
    elementwise(ctx, &ADD_SHADER, &[a, b, out]).await
}

/// CPU reference.
pub fn add_cpu(a: &[f32], b: &[f32]) -> Vec<f64> {
    a.iter().zip(b).map(|(&x, &y)| (x + y) as f64).collect()
}
