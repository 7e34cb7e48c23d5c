//! The exact (erf) GELU of BERT-family encoders, with the bias of the product before it.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const GELU_SHADER: ShaderSource = ShaderSource { name: "gelu", source: &[wgsl!("gelu.wgsl")] };

/// The erfc approximation's 1.5e-7 (times |x| / 2) and a GPU `exp` of a few ULP.
pub const GELU_TOLERANCE: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };

const WG: u32 = 256;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(GELU_SHADER, Defines::new().set("WG", WG))]
}

/// `x[r, :] = gelu(x[r, :] + b)` for an f32 x [rows, cols] and b [cols], in place.
pub async fn bias_gelu(ctx: &GpuContext, x: &GpuTensor, b: &GpuTensor) -> Result<Dispatch> {
    let cols = match (&x.shape[..], &b.shape[..]) {
        (&[_, c], &[bc]) if c == bc && c > 0 && x.dtype == DType::F32 && b.dtype == DType::F32 => c,
        _ => {
            return Err(Error::Shape {
                op: "bias_gelu",
                message: format!("x {} and bias {}: need f32 [rows, cols] and [cols]", x.label_shape(), b.label_shape()),
            })
        }
    };
    let n = u32::try_from(x.len()).map_err(|_| Error::Shape { op: "bias_gelu", message: format!("{} elements", x.len()) })?;
    let groups = grid(n.div_ceil(WG), ctx.capabilities().limits.max_compute_workgroups_per_dimension);
    let pipeline = ctx.pipeline(&GELU_SHADER, &Defines::new().set("WG", WG)).await?;
    let params = [n, groups[0] * WG, cols as u32, 0];
    ctx.dispatch(&pipeline, &[x, b], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference in f64: `gelu(x + b)` with libm's `erf` (the sum rounded to f32 first, as
/// the kernel forms it).
pub fn bias_gelu_cpu(x: &[f32], b: &[f32]) -> Vec<f64> {
    x.chunks(b.len())
        .flat_map(|row| row.iter().zip(b).map(|(&x, &b)| (x + b) as f64))
        .map(|v| 0.5 * v * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2)))
        .collect()
}
