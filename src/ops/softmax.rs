//! Row softmax.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const SOFTMAX_SHADER: ShaderSource =
    ShaderSource { name: "softmax", source: &[wgsl!("softmax.wgsl")] };

/// GPU `exp` may be a few ULP off (Vulkan allows 3 + 2|x| ULP), then a sum and a product.
pub const SOFTMAX_TOLERANCE: Tolerance = Tolerance { abs: 1e-7, rel: 2e-5 };

const WG: u32 = 64;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![
        (SOFTMAX_SHADER, Defines::new().set("WG", 64)),
        (SOFTMAX_SHADER, Defines::new().set("WG", 256)),
    ]
}

/// Softmax over the last dimension of an f32 tensor, written to `y` (same shape).
pub async fn softmax(ctx: &GpuContext, x: &GpuTensor, y: &GpuTensor) -> Result<Dispatch> {
    let shape_err = |message: String| Error::Shape { op: "softmax", message };
    if x.shape != y.shape || x.dtype != DType::F32 || y.dtype != DType::F32 {
        return Err(shape_err(format!(
            "x and y must be equal-shaped F32, got {} and {}",
            x.label_shape(),
            y.label_shape()
        )));
    }
    let Some((&cols, outer)) = x.shape.split_last() else {
        return Err(shape_err("x has no dimensions".into()));
    };
    let rows: usize = outer.iter().product();
    let (Ok(rows), Ok(cols)) = (u32::try_from(rows), u32::try_from(cols)) else {
        return Err(shape_err(format!("shape {:?} exceeds u32", x.shape)));
    };
    let pipeline = ctx.pipeline(&SOFTMAX_SHADER, &Defines::new().set("WG", WG)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let groups = grid(rows, max);
    let params = [rows, cols, groups[0], 0];
    ctx.dispatch(&pipeline, &[x, y], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference in f64 over rows of length `cols`.
pub fn softmax_cpu(x: &[f32], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let m = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}
