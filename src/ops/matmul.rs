//! Dense f32 matrix multiply with shared-memory tiles.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::Tolerance;

pub const MATMUL_SHADER: ShaderSource =
    ShaderSource { name: "matmul", source: &[wgsl!("matmul.wgsl")] };

/// Tolerance for a K-long f32 dot product of unit-sized inputs against the f64 reference: the
/// rounding error of sequential f32 summation grows linearly with K (about K · 2^-24 · the
/// partial sums' size), so the absolute bound scales with K.
pub fn matmul_tolerance(k: usize) -> Tolerance {
    Tolerance { abs: 2e-7 * k.max(16) as f64, rel: 1e-5 }
}

const TILE: u32 = 16;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    let f32 = Defines::new().set("ELEM", "f32");
    vec![
        (MATMUL_SHADER, f32.clone().set("TILE", 16)),
        (MATMUL_SHADER, f32.set("TILE", 8)),
        (MATMUL_SHADER, Defines::new().set("ELEM", "f16").set("F16", 1).set("TILE", 16)),
    ]
}

/// `c[m, n] = a[m, k] · b[k, n]`, all f32.
pub async fn matmul(
    ctx: &GpuContext,
    a: &GpuTensor,
    b: &GpuTensor,
    c: &GpuTensor,
) -> Result<Dispatch> {
    let shape_err = |message: String| Error::Shape { op: "matmul", message };
    let (&[m, k], &[k2, n], &[cm, cn]) = (&a.shape[..], &b.shape[..], &c.shape[..]) else {
        return Err(shape_err(format!(
            "expected 2-D a, b, c; got {:?}, {:?}, {:?}",
            a.shape, b.shape, c.shape
        )));
    };
    if k != k2 || cm != m || cn != n {
        return Err(shape_err(format!("[{m}, {k}] · [{k2}, {n}] -> [{cm}, {cn}] does not fit")));
    }
    if [a, b, c].iter().any(|t| t.dtype != DType::F32) {
        return Err(shape_err("all operands must be F32".into()));
    }
    let dims = [m, k, n].map(u32::try_from);
    let [Ok(m), Ok(k), Ok(n)] = dims else {
        return Err(shape_err("a dimension exceeds u32".into()));
    };
    let defines = Defines::new().set("ELEM", "f32").set("TILE", TILE);
    let pipeline = ctx.pipeline(&MATMUL_SHADER, &defines).await?;
    let params = [m, k, n, 0];
    let groups = [n.div_ceil(TILE), m.div_ceil(TILE), 1];
    ctx.dispatch(&pipeline, &[a, b, c], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference in f64: `a` is [m, k], `b` is [k, n].
pub fn matmul_cpu(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j] as f64;
            }
        }
    }
    c
}
