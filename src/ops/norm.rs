//! RMSNorm.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::Tolerance;

pub const RMSNORM_SHADER: ShaderSource =
    ShaderSource { name: "rmsnorm", source: &[wgsl!("rmsnorm.wgsl")] };

/// A sum of squares in a different order and a GPU `sqrt`: a few ULP per element.
pub const RMSNORM_TOLERANCE: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };

const WG: u32 = 256;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![
        (RMSNORM_SHADER, Defines::new().set("WG", WG)),
        (RMSNORM_SHADER, Defines::new().set("WG", WG).set("RESIDUAL", 1)),
    ]
}

/// `y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w` for every row of an f32 [rows, cols].
pub async fn rms_norm(
    ctx: &GpuContext,
    x: &GpuTensor,
    w: &GpuTensor,
    y: &GpuTensor,
    eps: f32,
) -> Result<Dispatch> {
    norm_dispatch(ctx, x, None, w, y, eps).await
}

/// `x += r`, then `y = rms_norm(x) * w`: the residual connection fused with the next norm.
pub async fn add_rms_norm(
    ctx: &GpuContext,
    x: &GpuTensor,
    r: &GpuTensor,
    w: &GpuTensor,
    y: &GpuTensor,
    eps: f32,
) -> Result<Dispatch> {
    norm_dispatch(ctx, x, Some(r), w, y, eps).await
}

async fn norm_dispatch(
    ctx: &GpuContext,
    x: &GpuTensor,
    r: Option<&GpuTensor>,
    w: &GpuTensor,
    y: &GpuTensor,
    eps: f32,
) -> Result<Dispatch> {
    let shape_err = |message: String| Error::Shape { op: "rms_norm", message };
    if let Some(r) = r {
        if r.shape != x.shape || r.dtype != DType::F32 {
            return Err(shape_err(format!("residual {} must match x {}", r.label_shape(), x.label_shape())));
        }
    }
    let (&[rows, cols], &[wc]) = (&x.shape[..], &w.shape[..]) else {
        return Err(shape_err(format!("x must be [rows, cols] and w [cols]; got {:?}, {:?}", x.shape, w.shape)));
    };
    if wc != cols || y.shape != x.shape || [x, w, y].iter().any(|t| t.dtype != DType::F32) {
        return Err(shape_err(format!("{} {} {}", x.label_shape(), w.label_shape(), y.label_shape())));
    }
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension as usize;
    if rows > max {
        return Err(shape_err(format!("{rows} rows exceed {max} workgroups")));
    }
    let defines = Defines::new().set("WG", WG);
    let params: [u32; 4] = [rows as u32, cols as u32, eps.to_bits(), 0];
    let params = Some(bytemuck::cast_slice(&params[..]));
    match r {
        None => ctx.dispatch(&ctx.pipeline(&RMSNORM_SHADER, &defines).await?, &[x, w, y], params, [rows as u32, 1, 1]),
        Some(r) => {
            let pipeline = ctx.pipeline(&RMSNORM_SHADER, &defines.set("RESIDUAL", 1)).await?;
            ctx.dispatch(&pipeline, &[x, w, y, r], params, [rows as u32, 1, 1])
        }
    }
}

/// CPU reference in f64.
pub fn rms_norm_cpu(x: &[f32], w: &[f32], eps: f32) -> Vec<f64> {
    let cols = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
        let scale = 1.0 / (ms + eps as f64).sqrt();
        out.extend(row.iter().zip(w).map(|(&v, &g)| v as f64 * scale * g as f64));
    }
    out
}
