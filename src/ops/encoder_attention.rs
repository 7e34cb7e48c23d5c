//! Bidirectional attention of an encoder over a packed batch of sequences: each query row sees
//! the keys of its own sequence only (BERT's padding mask, without padding rows).

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::Tolerance;

pub const ENCODER_ATTENTION_SHADER: ShaderSource =
    ShaderSource { name: "encoder_attention", source: &[wgsl!("encoder_attention.wgsl")] };

/// f32 dot products of head width, a GPU `exp` and a weighted sum over up to `MAX_KEYS` rows.
pub const ENCODER_ATTENTION_TOLERANCE: Tolerance = Tolerance { abs: 1e-5, rel: 1e-4 };

/// The longest sequence one workgroup's shared scores hold: BERT-family encoders read at most
/// 512 positions.
pub const MAX_KEYS: usize = 512;
/// The widest head the shared query row holds.
pub const MAX_HEAD_DIM: usize = 256;

const WG: u32 = 64;

fn defines() -> Defines {
    Defines::new().set("WG", WG).set("MAX_KEYS", MAX_KEYS).set("MAX_HD", MAX_HEAD_DIM)
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(ENCODER_ATTENTION_SHADER, defines())]
}

/// The key span of every row of a packed batch whose sequence `s` is rows
/// `starts[s]..starts[s + 1]`: `[start, end]` per row, [t, 2] flattened.
pub fn spans(starts: &[usize]) -> Vec<u32> {
    starts.windows(2).flat_map(|p| (p[0]..p[1]).flat_map(move |_| [p[0] as u32, p[1] as u32])).collect()
}

/// `out[i, head] = Σ_j softmax_j(q_i · k_j · scale) v_j` over the keys of row i's span, for
/// `qkv` [t, 3 · dim] (q, k, v side by side), `spans` U32 [2t] (see [`spans`]), out [t, dim].
pub async fn encoder_attention(
    ctx: &GpuContext,
    qkv: &GpuTensor,
    spans: &GpuTensor,
    out: &GpuTensor,
    heads: usize,
    longest: usize,
) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "encoder_attention", message };
    let &[t, dim] = &out.shape[..] else {
        return Err(fail(format!("out must be [t, dim], got {}", out.label_shape())));
    };
    if qkv.shape != [t, 3 * dim] || spans.shape != [2 * t] || qkv.dtype != DType::F32 || out.dtype != DType::F32 || spans.dtype != DType::U32 {
        return Err(fail(format!(
            "qkv {} spans {} out {}: need f32 [t, 3 dim], u32 [2 t], f32 [t, dim]",
            qkv.label_shape(), spans.label_shape(), out.label_shape()
        )));
    }
    if heads == 0 || !dim.is_multiple_of(heads) || dim / heads > MAX_HEAD_DIM {
        return Err(fail(format!("{heads} heads over {dim} columns (at most {MAX_HEAD_DIM} a head)")));
    }
    if longest > MAX_KEYS {
        return Err(Error::ContextFull { tokens: longest, context: MAX_KEYS });
    }
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension as usize;
    if t > max || heads > max {
        return Err(fail(format!("{t} rows × {heads} heads exceed {max} workgroups a dimension")));
    }
    let hd = dim / heads;
    let params: [u32; 4] = [t as u32, dim as u32, hd as u32, (1.0 / (hd as f32).sqrt()).to_bits()];
    let pipeline = ctx.pipeline(&ENCODER_ATTENTION_SHADER, &defines()).await?;
    ctx.dispatch(&pipeline, &[qkv, spans, out], Some(bytemuck::cast_slice(&params)), [t as u32, heads as u32, 1])
}

/// CPU reference in f64, same layout as [`encoder_attention`].
pub fn encoder_attention_cpu(qkv: &[f32], starts: &[usize], dim: usize, heads: usize) -> Vec<f64> {
    let (hd, stride) = (dim / heads, 3 * dim);
    let t = *starts.last().unwrap_or(&0);
    let scale = 1.0 / (hd as f64).sqrt();
    let mut out = vec![0f64; t * dim];
    for p in starts.windows(2) {
        for i in p[0]..p[1] {
            for h in 0..heads {
                let col = h * hd;
                let s: Vec<f64> = (p[0]..p[1])
                    .map(|j| (0..hd).map(|c| qkv[i * stride + col + c] as f64 * qkv[j * stride + dim + col + c] as f64).sum::<f64>() * scale)
                    .collect();
                let m = s.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..hd {
                    out[i * dim + col + c] =
                        (p[0]..p[1]).zip(&e).map(|(j, e)| e / sum * qkv[j * stride + 2 * dim + col + c] as f64).sum();
                }
            }
        }
    }
    out
}
