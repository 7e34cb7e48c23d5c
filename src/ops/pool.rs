//! Pooling a packed batch's token rows into one row per sequence (mean or first row), with
//! optional L2 normalisation: the end of a sentence encoder.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const POOL_SHADER: ShaderSource = ShaderSource { name: "pool", source: &[wgsl!("pool.wgsl")] };

/// A mean over up to a few hundred rows in f32, and a norm.
pub const POOL_TOLERANCE: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };

const WG: u32 = 128;

fn defines(cls: bool, normalize: bool) -> Defines {
    let d = Defines::new().set("WG", WG);
    let d = if cls { d.set("CLS", 1) } else { d };
    if normalize { d.set("NORMALIZE", 1) } else { d }
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    [(false, false), (false, true), (true, false), (true, true)].into_iter().map(|(c, n)| (POOL_SHADER, defines(c, n))).collect()
}

/// `out[s] = mean of x's rows starts[s]..starts[s + 1]` (with `cls`, the first of them), then
/// with `normalize` `out[s] /= max(|out[s]|, 1e-12)`. x f32 [t, cols], starts U32 [n + 1],
/// out f32 [n, cols]; every sequence must have a row.
pub async fn pool(ctx: &GpuContext, x: &GpuTensor, starts: &GpuTensor, out: &GpuTensor, cls: bool, normalize: bool) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "pool", message };
    let (&[_, cols], &[n, oc], &[ns]) = (&x.shape[..], &out.shape[..], &starts.shape[..]) else {
        return Err(fail(format!("x {} starts {} out {}", x.label_shape(), starts.label_shape(), out.label_shape())));
    };
    if oc != cols || ns != n + 1 || x.dtype != DType::F32 || out.dtype != DType::F32 || starts.dtype != DType::U32 {
        return Err(fail(format!("x {} starts {} out {}: need f32 [t, cols], u32 [n + 1], f32 [n, cols]",
            x.label_shape(), starts.label_shape(), out.label_shape())));
    }
    let n = u32::try_from(n).map_err(|_| fail(format!("{n} sequences")))?;
    let groups = grid(n, ctx.capabilities().limits.max_compute_workgroups_per_dimension);
    let pipeline = ctx.pipeline(&POOL_SHADER, &defines(cls, normalize)).await?;
    let params = [n, cols as u32, groups[0], 0];
    ctx.dispatch(&pipeline, &[x, starts, out], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference in f64.
pub fn pool_cpu(x: &[f32], starts: &[usize], cols: usize, cls: bool, normalize: bool) -> Vec<f64> {
    let mut out = Vec::new();
    for p in starts.windows(2) {
        let mut row: Vec<f64> = if cls {
            x[p[0] * cols..(p[0] + 1) * cols].iter().map(|&v| v as f64).collect()
        } else {
            let mut acc = vec![0f64; cols];
            for r in p[0]..p[1] {
                acc.iter_mut().zip(&x[r * cols..(r + 1) * cols]).for_each(|(a, &v)| *a += v as f64);
            }
            acc.iter().map(|a| a / (p[1] - p[0]) as f64).collect()
        };
        if normalize {
            let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
            row.iter_mut().for_each(|v| *v /= norm);
        }
        out.extend(row);
    }
    out
}
