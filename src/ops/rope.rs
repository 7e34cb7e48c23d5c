//! Rotary position embeddings, applied while storing K and V into the cache.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor, Uniform};

use super::kv::{all_defines, KvFormat};
use super::Tolerance;

pub const ROPE_SHADER: ShaderSource = ShaderSource {
    name: "rope_store",
    source: &[wgsl!("rope_store.wgsl"), crate::ops::fragments::ROPE_PAIR],
};

/// One rotation: two products and a sum per element against exact f64.
pub const ROPE_TOLERANCE: Tolerance = Tolerance { abs: 1e-6, rel: 1e-6 };

/// Which dimensions rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RopeStyle {
    /// (2i, 2i+1): GGUF llama-family tensors, whose Q/K rows were permuted for it.
    Norm,
    /// (i, i + d/2): Hugging Face checkpoints, Qwen2, GPT-NeoX.
    Neox,
}

impl RopeStyle {
    pub const ALL: [RopeStyle; 2] = [RopeStyle::Norm, RopeStyle::Neox];

    /// The pair layout's define for the shaders that rotate (`NEOX`, or none).
    pub fn defines(self) -> Defines {
        match self {
            RopeStyle::Norm => Defines::new(),
            RopeStyle::Neox => Defines::new().set("NEOX", 1),
        }
    }
}

/// Frequency scaling from a model config.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RopeScaling {
    None,
    /// Positions divided by `factor` (`rope_type: linear`).
    Linear { factor: f32 },
    /// Llama 3.1's `rope_type: llama3`: wavelengths longer than `original_context /
    /// low_freq_factor` are stretched by `factor`, shorter than `original_context /
    /// high_freq_factor` kept, and those between interpolated.
    Llama3 { factor: f32, low_freq_factor: f32, high_freq_factor: f32, original_context: f32 },
    /// Each rotated pair's angle divided by its own factor: what llama.cpp's converter stores
    /// as `rope_freqs.weight` for Llama 3 scaling (one value per pair).
    Factors(Vec<f32>),
    /// Phi-3's `longrope` (`su`): per-pair divisors, `short` while a pass's positions stay
    /// within `original_context` and `long` for a pass that goes past it (transformers picks
    /// by the largest position of each forward call), and cos/sin multiplied by
    /// `attention_factor`.
    LongRope { short: Vec<f32>, long: Vec<f32>, original_context: f32, attention_factor: f32 },
}

impl RopeScaling {
    /// The angle per position of rotated pair `i` of `rot_dims`, in f64.
    pub fn inv_freq(&self, i: usize, rot_dims: usize, base: f32) -> f64 {
        let plain = (base as f64).powf(-2.0 * i as f64 / rot_dims as f64);
        match self {
            RopeScaling::None => plain,
            RopeScaling::Linear { factor } => plain / *factor as f64,
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_context } => {
                let (factor, low, high, ctx) =
                    (*factor as f64, *low_freq_factor as f64, *high_freq_factor as f64, *original_context as f64);
                let wavelen = 2.0 * std::f64::consts::PI / plain;
                if wavelen < ctx / high {
                    plain
                } else if wavelen > ctx / low {
                    plain / factor
                } else {
                    let smooth = (ctx / wavelen - low) / (high - low);
                    (1.0 - smooth) * plain / factor + smooth * plain
                }
            }
            RopeScaling::Factors(f) => plain / f.get(i).copied().unwrap_or(1.0) as f64,
            RopeScaling::LongRope { short, .. } => plain / short.get(i).copied().unwrap_or(1.0) as f64,
        }
    }

    /// Whether a pass whose positions end before `end` rotates with LongRoPE's long factors.
    pub fn long_for(&self, end: usize) -> bool {
        matches!(self, RopeScaling::LongRope { original_context, .. } if end as f64 > *original_context as f64)
    }
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    let styles = RopeStyle::ALL.map(RopeStyle::defines);
    styles
        .clone()
        .into_iter()
        .chain(styles.into_iter().map(|d| d.set("QKV", 1)))
        .flat_map(all_defines)
        .map(|d| (ROPE_SHADER, d))
        .collect()
}

/// The per-step uniform every position-dependent kernel reads: [pos, n_tokens, 0, 0].
pub fn step_bytes(pos: u32, n_tokens: u32) -> [u8; 16] {
    bytemuck::cast([pos, n_tokens, 0u32, 0u32])
}

/// cos/sin for every position and rotated pair, [max_seq, rot_dims / 2, 2], computed in f64.
pub fn rope_table(max_seq: usize, rot_dims: usize, base: f32, scaling: &RopeScaling) -> Vec<f32> {
    let mut table = vec![0f32; max_seq * rot_dims];
    for (pos, row) in table.chunks_mut(rot_dims.max(1)).enumerate() {
        rope_row(pos, rot_dims, base, scaling, row);
    }
    table
}

/// One row of the table, [rot_dims / 2, 2], for `pos` into `out` (no allocation: the engine
/// writes the row of each position past the ring's length before a step uses it).
pub fn rope_row(pos: usize, rot_dims: usize, base: f32, scaling: &RopeScaling, out: &mut [f32]) {
    rope_row_in(pos, scaling.long_for(pos + 1), rot_dims, base, scaling, out)
}

/// [`rope_row`] with LongRoPE's factors chosen by the caller (`long`), as a pass that goes past
/// the original context rotates all its positions with the long ones.
pub fn rope_row_in(pos: usize, long: bool, rot_dims: usize, base: f32, scaling: &RopeScaling, out: &mut [f32]) {
    let (factors, gain) = match scaling {
        RopeScaling::LongRope { short, long: l, attention_factor, .. } => (Some(if long { l } else { short }), *attention_factor as f64),
        _ => (None, 1.0),
    };
    for (i, cs) in out.chunks_exact_mut(2).take(rot_dims / 2).enumerate() {
        let inv_freq = match factors {
            Some(f) => (base as f64).powf(-2.0 * i as f64 / rot_dims as f64) / f.get(i).copied().unwrap_or(1.0) as f64,
            None => scaling.inv_freq(i, rot_dims, base),
        };
        let theta = pos as f64 * inv_freq;
        cs[0] = (theta.cos() * gain) as f32;
        cs[1] = (theta.sin() * gain) as f32;
    }
}

/// Shapes of one attention layer's rotary step.
#[derive(Clone, Copy, Debug)]
pub struct RopeShape {
    pub n_tokens: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub max_seq: usize,
    pub rot_dims: usize,
    pub style: RopeStyle,
    pub kv: KvFormat,
    /// Positions that keep their slots once the cache is full (attention sinks); < max_seq.
    pub sinks: usize,
}

/// The cache (and table) slot of position `pos`: the first `sinks` positions keep theirs, the
/// rest share the other `max_seq - sinks` slots as a ring. Below max_seq, slot = pos.
pub fn ring_slot(pos: usize, max_seq: usize, sinks: usize) -> usize {
    if pos < sinks {
        pos
    } else {
        sinks + (pos - sinks) % (max_seq - sinks)
    }
}

/// Rotates `q` in place and writes rotated `k` and plain `v` into the caches (`max_seq` rows
/// in format `s.kv`) at slots [`ring_slot`]`(step.pos + t)`; `table` is read at the same slots.
#[allow(clippy::too_many_arguments)]
pub async fn rope_store(
    ctx: &GpuContext,
    s: RopeShape,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    table: &GpuTensor,
    step: &Uniform,
) -> Result<Dispatch> {
    let kv = [s.n_tokens, s.n_kv_heads, s.head_dim];
    if k.shape != kv || v.shape != kv {
        return Err(Error::Shape {
            op: "rope_store",
            message: format!("{s:?} needs k and v {kv:?}, got {:?} {:?}", k.shape, v.shape),
        });
    }
    store(ctx, s, q, [k, v], false, k_cache, v_cache, table, step).await
}

/// [`rope_store`] reading the queries, keys and values from one `qkv`
/// [n_tokens, n_heads + 2 * n_kv_heads, head_dim] (a stacked Q/K/V projection's output) and
/// writing the rotated queries to `q`.
#[allow(clippy::too_many_arguments)]
pub async fn rope_store_qkv(
    ctx: &GpuContext,
    s: RopeShape,
    qkv: &GpuTensor,
    q: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    table: &GpuTensor,
    step: &Uniform,
) -> Result<Dispatch> {
    if qkv.shape != [s.n_tokens, s.n_heads + 2 * s.n_kv_heads, s.head_dim] {
        return Err(Error::Shape {
            op: "rope_store",
            message: format!("{s:?} does not fit qkv {:?}", qkv.shape),
        });
    }
    store(ctx, s, q, [qkv, qkv], true, k_cache, v_cache, table, step).await
}

#[allow(clippy::too_many_arguments)]
async fn store(
    ctx: &GpuContext,
    s: RopeShape,
    q: &GpuTensor,
    [k, v]: [&GpuTensor; 2],
    stacked: bool,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    table: &GpuTensor,
    step: &Uniform,
) -> Result<Dispatch> {
    let shape_err = |message: String| Error::Shape { op: "rope_store", message };
    let cache = [s.n_kv_heads, s.max_seq, s.kv.row_words(s.head_dim)];
    let ok = q.shape == [s.n_tokens, s.n_heads, s.head_dim]
        && k_cache.shape == cache
        && v_cache.shape == cache
        && table.shape == [s.max_seq, s.rot_dims / 2, 2]
        && s.head_dim.is_multiple_of(2)
        && s.kv.fits(s.head_dim)
        && s.rot_dims.is_multiple_of(2)
        && s.rot_dims <= s.head_dim
        && s.sinks < s.max_seq
        && [q, k, v, table].iter().all(|t| t.dtype == DType::F32)
        && [k_cache, v_cache].iter().all(|t| t.dtype == s.kv.dtype());
    if !ok {
        return Err(shape_err(format!(
            "{s:?} does not fit q {:?} k {:?} v {:?} caches {:?} table {:?}",
            q.shape, k.shape, v.shape, k_cache.shape, table.shape
        )));
    }
    let style = s.style.defines();
    let defines = s.kv.defines(if stacked { style.set("QKV", 1) } else { style });
    let pipeline = ctx.pipeline(&ROPE_SHADER, &defines).await?;
    let threads = s.n_tokens * (s.n_heads + s.n_kv_heads) * s.head_dim / 2;
    let groups = u32::try_from(threads.div_ceil(64)).map_err(|_| shape_err("too many tokens".into()))?;
    let params: [u32; 8] = [
        s.n_tokens as u32,
        s.n_heads as u32,
        s.n_kv_heads as u32,
        s.head_dim as u32,
        s.max_seq as u32,
        s.rot_dims as u32,
        s.kv.row_words(s.head_dim) as u32,
        s.sinks as u32,
    ];
    ctx.dispatch_with(
        &pipeline,
        &[q, k, v, k_cache, v_cache, table],
        Some(bytemuck::cast_slice(&params)),
        &[step],
        [groups, 1, 1],
    )
}

/// CPU reference: rotates one head vector `x` (length head_dim) at `pos`, in f64.
pub fn rope_cpu(x: &[f32], pos: usize, rot_dims: usize, table: &[f32], style: RopeStyle) -> Vec<f64> {
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let half = rot_dims / 2;
    for i in 0..half {
        let (a, b) = match style {
            RopeStyle::Norm => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        };
        let at = (pos * half + i) * 2;
        let (c, s) = (table[at] as f64, table[at + 1] as f64);
        let (x0, x1) = (x[a] as f64, x[b] as f64);
        out[a] = x0 * c - x1 * s;
        out[b] = x0 * s + x1 * c;
    }
    out
}
