//! Elementwise kernels.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const ADD_SHADER: ShaderSource =
    ShaderSource { name: "add", source: include_str!("../../shaders/add.wgsl") };

/// f32 addition is correctly rounded on every conforming GPU, so the result must be exact.
pub const ADD_TOLERANCE: Tolerance = Tolerance::EXACT;

const WG: u32 = 256;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(ADD_SHADER, Defines::new().set("WG", WG))]
}

/// `out = a + b` for same-shaped f32 tensors.
pub async fn add(
    ctx: &GpuContext,
    a: &GpuTensor,
    b: &GpuTensor,
    out: &GpuTensor,
) -> Result<Dispatch> {
    for t in [a, b, out] {
        if t.shape != a.shape || t.dtype != DType::F32 {
            return Err(Error::Shape {
                op: "add",
                message: format!("operands must be equal-shaped F32, got {}", t.label_shape()),
            });
        }
    }
    let n = u32::try_from(a.len())
        .map_err(|_| Error::Shape { op: "add", message: format!("{} elements", a.len()) })?;
    let pipeline = ctx.pipeline(&ADD_SHADER, &Defines::new().set("WG", WG)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let groups = grid(n.div_ceil(WG), max);
    let params = [n, groups[0] * WG];
    ctx.dispatch(&pipeline, &[a, b, out], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference.
pub fn add_cpu(a: &[f32], b: &[f32]) -> Vec<f64> {
    a.iter().zip(b).map(|(&x, &y)| (x + y) as f64).collect()
}
