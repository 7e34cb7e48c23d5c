//! LayerNorm with the residual connection before it (BERT's post-LayerNorm blocks):
//! `x = layer_norm(x + (r + rb)) * w + b` per row, in place.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const LAYERNORM_SHADER: ShaderSource =
    ShaderSource { name: "layernorm", source: &[wgsl!("layernorm.wgsl")] };

/// Sums of a row in another order and a GPU `sqrt`: a few ULP of the normalised value, times
/// the scale.
pub const LAYERNORM_TOLERANCE: Tolerance = Tolerance { abs: 2e-6, rel: 1e-5 };

const WG: u32 = 128;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(LAYERNORM_SHADER, Defines::new().set("WG", WG))]
}

/// `x[i, :] = layer_norm(x[i, :] + (r[i, :] + rb)) * w + b` for f32 x and r [rows, cols] and
/// rb, w, b [cols]. `rb` is the bias of the product that made `r` (or the token-type row added
/// to the position rows), so the product needs no separate bias pass.
pub async fn add_layer_norm(
    ctx: &GpuContext,
    x: &GpuTensor,
    r: &GpuTensor,
    rb: &GpuTensor,
    w: &GpuTensor,
    b: &GpuTensor,
    eps: f32,
) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "add_layer_norm", message };
    let &[rows, cols] = &x.shape[..] else {
        return Err(fail(format!("x must be [rows, cols], got {}", x.label_shape())));
    };
    let vectors = [rb, w, b];
    if r.shape != x.shape || vectors.iter().any(|v| v.shape != [cols]) || [x, r, rb, w, b].iter().any(|t| t.dtype != DType::F32) {
        return Err(fail(format!(
            "x {} r {} rb {} w {} b {}: need f32 [rows, cols] twice and [cols] three times",
            x.label_shape(), r.label_shape(), rb.label_shape(), w.label_shape(), b.label_shape()
        )));
    }
    let rows = u32::try_from(rows).map_err(|_| fail(format!("{rows} rows")))?;
    let groups = grid(rows, ctx.capabilities().limits.max_compute_workgroups_per_dimension);
    let pipeline = ctx.pipeline(&LAYERNORM_SHADER, &Defines::new().set("WG", WG)).await?;
    let params: [u32; 4] = [rows, cols as u32, eps.to_bits(), groups[0]];
    ctx.dispatch(&pipeline, &[x, r, rb, w, b], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference in f64 (the sum `x + (r + rb)` rounded to f32 first, as the kernel stores it).
pub fn add_layer_norm_cpu(x: &[f32], r: &[f32], rb: &[f32], w: &[f32], b: &[f32], eps: f32) -> Vec<f64> {
    let cols = w.len();
    let mut out = Vec::with_capacity(x.len());
    for (xs, rs) in x.chunks(cols).zip(r.chunks(cols)) {
        let s: Vec<f64> = xs.iter().zip(rs).zip(rb).map(|((&x, &r), &rb)| (x + (r + rb)) as f64).collect();
        let mean = s.iter().sum::<f64>() / cols as f64;
        let var = s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
        let scale = 1.0 / (var + eps as f64).sqrt();
        out.extend(s.iter().zip(w).zip(b).map(|((v, &w), &b)| (v - mean) * scale * w as f64 + b as f64));
    }
    out
}
