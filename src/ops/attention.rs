//! Causal multi-head attention (with grouped KV heads) over the KV cache.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor, Uniform};

use super::kv::{all_defines, KvFormat};
use super::rope::{RopeShape, RopeStyle};
use super::Tolerance;

pub const ATTENTION_SHADER: ShaderSource = ShaderSource {
    name: "attention",
    source: &[
        wgsl!("attention.wgsl"),
        crate::ops::fragments::ATTENTION_COMMON,
        "#ifdef SPLIT\n",
        crate::ops::fragments::ATTENTION_PARTIAL,
        "#endif\n",
    ],
};
// The chunk merge (attention_merge.wgsl) is shared: the combine dispatch runs it, and so does
// the last workgroup of each head in the decode kernel, whose rotation is rope_store's
// (rope_pair.wgsl).
pub const ATTENTION_DECODE_SHADER: ShaderSource = ShaderSource {
    name: "attention_decode",
    source: &[
        wgsl!("attention_decode.wgsl"),
        crate::ops::fragments::ATTENTION_COMMON,
        crate::ops::fragments::ATTENTION_PARTIAL,
        crate::ops::fragments::ATTENTION_MERGE,
        crate::ops::fragments::ROPE_PAIR,
    ],
};
pub const ATTENTION_COMBINE_SHADER: ShaderSource = ShaderSource {
    name: "attention_combine",
    source: &[wgsl!("attention_combine.wgsl"), crate::ops::fragments::ATTENTION_MERGE],
};

/// Context positions one workgroup of split attention covers: one 64-position tile, so a
/// decode step at context n runs n / 64 workgroups per head instead of one.
pub const SPLIT_CHUNK: usize = 64;

/// Lanes of a workgroup of the decode kernel ([`attention_rope_split`]).
pub const DECODE_LANES: usize = 256;
/// Context positions one workgroup of the decode kernel covers (its chunk): 256 / chunk
/// lanes share a position's K row.
pub const DECODE_CHUNKS: [usize; 3] = [64, 128, 256];

/// The decode kernel's chunk for heads of `head_dim`, as measured on an H100 at contexts of
/// 128-256 positions (bench/NOTES.md, note 28): heads of 64 dimensions run fastest in one
/// workgroup a head (chunks of 256), wider heads, whose K/V rows are twice the bytes, spread
/// over chunks of 64.
pub fn decode_chunk(head_dim: usize) -> usize {
    if head_dim <= 64 { 256 } else { 64 }
}

/// The decode kernel's chunk by context length, as (largest context, chunk) in increasing
/// order, the last covering every context up to `max_seq`: the chunk of [`decode_chunk`] up to
/// 256 positions; past that, heads wider than 64 dimensions take chunks of 128 up to 512
/// positions and of 256 beyond. Measured on an H200 (bench/NOTES.md, note 57): a 7B's heads of
/// 128 in chunks of 64 run 4 chunks a head in one wave of workgroups at 256 positions, but
/// each further wave adds the kernel's whole latency (16-17 µs a call at 320-512 positions
/// against 11.4-11.9 in chunks of 128, 30.5 against 15.8 in chunks of 256 at 1024). Heads of
/// 64 keep chunks of 256 at every length (within 1.5 µs of the best).
pub fn decode_chunk_plan(head_dim: usize, max_seq: usize) -> Vec<(usize, usize)> {
    let steps: &[(usize, usize)] = if head_dim <= 64 { &[(usize::MAX, 256)] } else { &[(256, 64), (512, 128), (usize::MAX, 256)] };
    let mut plan = Vec::new();
    for &(upto, chunk) in steps {
        plan.push((upto.min(max_seq), chunk));
        if upto >= max_seq {
            break;
        }
    }
    plan
}

/// Dot products of head_dim terms, an online softmax and a weighted sum over the context.
pub const ATTENTION_TOLERANCE: Tolerance = Tolerance { abs: 2e-6, rel: 1e-4 };

pub const MAX_HEAD_DIM: usize = 256;

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    let mut v: Vec<_> = all_defines(Defines::new()).into_iter().map(|d| (ATTENTION_SHADER, d)).collect();
    v.extend(all_defines(Defines::new().set("SPLIT", 1)).into_iter().map(|d| (ATTENTION_SHADER, d)));
    v.push((ATTENTION_SHADER, KvFormat::F32.defines(Defines::new().set("VEC4", 1))));
    v.push((ATTENTION_SHADER, KvFormat::F32.defines(Defines::new().set("VEC4", 1).set("SPLIT", 1))));
    for style in RopeStyle::ALL.map(RopeStyle::defines) {
        for kv in KvFormat::ALL {
            for chunk in DECODE_CHUNKS {
                for sg in [false, true] {
                    v.push((ATTENTION_DECODE_SHADER, decode_defines(kv.defines(style.clone()), chunk, sg)));
                }
            }
        }
    }
    v.push((ATTENTION_COMBINE_SHADER, Defines::new()));
    v
}

/// The shader's defines for `s`: its KV format, and the vec4 path where the cache is f32 and
/// head_dim a multiple of 16.
fn defines(s: &AttentionShape, base: Defines) -> Defines {
    let base = if s.kv == KvFormat::F32 && s.head_dim.is_multiple_of(16) { base.set("VEC4", 1) } else { base };
    s.kv.defines(base)
}

/// Whether decode attention should split the context across workgroups on this adapter: a GPU
/// with many compute units idles on one workgroup per head, while a CPU-emulated adapter has
/// only its cores to fill and pays for the second dispatch.
pub fn split_pays(ctx: &GpuContext) -> bool {
    !ctx.capabilities().is_software
}

/// Chunks of `chunk_len` positions that cover `max_seq`.
pub fn split_chunks(max_seq: usize, chunk_len: usize) -> usize {
    max_seq.div_ceil(chunk_len.max(1))
}

/// Shape of split attention's partial results: [n_tokens, n_heads, chunks, head_dim + 2].
pub fn partials_shape(s: &AttentionShape, chunk_len: usize) -> [usize; 4] {
    [s.n_tokens, s.n_heads, split_chunks(s.max_seq, chunk_len), s.head_dim + 2]
}

/// Gemma's changes to which positions a query sees and to its scores.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionMask {
    /// Only the last `window` positions (itself included); the cache must keep no sinks.
    pub window: Option<usize>,
    /// Scores become `softcap * tanh(score / softcap)`.
    pub softcap: Option<f32>,
}

/// Attention shapes.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    pub n_tokens: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub max_seq: usize,
    pub kv: KvFormat,
}

/// `out[t, h] = softmax(q[t, h] · K^T · scale) · V` over the last `min(pos + t + 1, max_seq)`
/// positions, with `pos` from `step`; the caches are rings of `max_seq` rows in format `s.kv`.
#[allow(clippy::too_many_arguments)]
pub async fn attention(
    ctx: &GpuContext,
    s: AttentionShape,
    q: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    out: &GpuTensor,
    scale: f32,
    step: &Uniform,
) -> Result<Dispatch> {
    attention_masked(ctx, s, AttentionMask::default(), q, k_cache, v_cache, out, scale, step).await
}

/// [`attention`] with a window and soft-capping.
#[allow(clippy::too_many_arguments)]
pub async fn attention_masked(
    ctx: &GpuContext,
    s: AttentionShape,
    mask: AttentionMask,
    q: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    out: &GpuTensor,
    scale: f32,
    step: &Uniform,
) -> Result<Dispatch> {
    check(&s, q, k_cache, v_cache, out)?;
    let grid = [s.n_heads as u32, s.n_tokens as u32, 1];
    dispatch(ctx, &ATTENTION_SHADER, &defines(&s, Defines::new()), &s, mask, [q, k_cache, v_cache, out], scale, 0, step, grid).await
}

/// An attention kernel over the cache: the queries, K and V caches and the output (or partial
/// results) at bindings 0-3, then [`params`] and the step.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn dispatch(
    ctx: &GpuContext,
    shader: &ShaderSource,
    defines: &Defines,
    s: &AttentionShape,
    mask: AttentionMask,
    tensors: [&GpuTensor; 4],
    scale: f32,
    chunk_len: u32,
    step: &Uniform,
    grid: [u32; 3],
) -> Result<Dispatch> {
    let pipeline = ctx.pipeline(shader, defines).await?;
    ctx.dispatch_with(&pipeline, &tensors, Some(bytemuck::cast_slice(&params(s, mask, scale, chunk_len))), &[step], grid)
}

/// The same attention with the context split into chunks of `chunk_len` positions (a multiple
/// of 64), each chunk's softmax statistics in `partials` ([`partials_shape`]), merged by a
/// second dispatch: flash-decoding, for steps with few tokens on GPUs with many compute units.
#[allow(clippy::too_many_arguments)]
pub async fn attention_split(
    ctx: &GpuContext,
    s: AttentionShape,
    q: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    partials: &GpuTensor,
    out: &GpuTensor,
    scale: f32,
    step: &Uniform,
    chunk_len: usize,
) -> Result<[Dispatch; 2]> {
    attention_split_masked(ctx, s, AttentionMask::default(), q, k_cache, v_cache, partials, out, scale, step, chunk_len).await
}

/// [`attention_split`] with a window and soft-capping.
#[allow(clippy::too_many_arguments)]
pub async fn attention_split_masked(
    ctx: &GpuContext,
    s: AttentionShape,
    mask: AttentionMask,
    q: &GpuTensor,
    k_cache: &GpuTensor,
    v_cache: &GpuTensor,
    partials: &GpuTensor,
    out: &GpuTensor,
    scale: f32,
    step: &Uniform,
    chunk_len: usize,
) -> Result<[Dispatch; 2]> {
    check(&s, q, k_cache, v_cache, out)?;
    let shape = partials_shape(&s, chunk_len);
    if chunk_len == 0 || !chunk_len.is_multiple_of(64) || partials.shape != shape || partials.dtype != DType::F32 {
        return Err(Error::Shape {
            op: "attention_split",
            message: format!("chunks of {chunk_len} positions need partials {shape:?}, got {}", partials.label_shape()),
        });
    }
    let chunks = shape[2] as u32;
    let split_defines = defines(&s, Defines::new().set("SPLIT", 1));
    let grid = [s.n_heads as u32, s.n_tokens as u32, chunks];
    let tensors = [q, k_cache, v_cache, partials];
    let split = dispatch(ctx, &ATTENTION_SHADER, &split_defines, &s, mask, tensors, scale, chunk_len as u32, step, grid).await?;
    let combine = ctx.pipeline(&ATTENTION_COMBINE_SHADER, &Defines::new()).await?;
    let combine_params: [u32; 4] = [s.n_tokens as u32, s.n_heads as u32, s.head_dim as u32, chunks];
    let merge = ctx.dispatch(
        &combine,
        &[partials, out],
        Some(bytemuck::cast_slice(&combine_params)),
        [s.n_heads as u32, s.n_tokens as u32, 1],
    )?;
    Ok([split, merge])
}

/// Whether [`attention_rope_split`] runs this step: one token and head_dim a multiple of 16
/// (every cache format folds).
pub fn rope_fuses(r: &RopeShape) -> bool {
    r.n_tokens == 1 && r.head_dim.is_multiple_of(16)
}

/// Decode attention with the RoPE + KV store folded in (every cache format), one dispatch for what
/// `rope_store_qkv` + [`attention_split_masked`] do in three (shaders/attention_decode.wgsl).
/// `qkv` is the stacked projection [1, n_heads + 2 * n_kv_heads, head_dim]: every workgroup
/// rotates its query and the new key with `table` (as `rope_store` does), and the first
/// workgroup of each KV head stores the new K/V row. Each workgroup covers `chunk` context
/// positions (one of [`DECODE_CHUNKS`]); where one covers the whole context it writes `out`
/// itself, else the last workgroup of each head to finish merges the chunks. `partials` has the shape the split kernel's chunks give ([`partials_shape`] with
/// [`SPLIT_CHUNK`]), which holds these longer chunks' too; `arrivals` ([n_heads] words, zero)
/// counts them and is zero again afterwards.
#[allow(clippy::too_many_arguments)]
pub async fn attention_rope_split(
    ctx: &GpuContext,
    r: RopeShape,
    mask: AttentionMask,
    qkv: &GpuTensor,
    [k_cache, v_cache]: [&GpuTensor; 2],
    table: &GpuTensor,
    [partials, arrivals]: [&GpuTensor; 2],
    out: &GpuTensor,
    scale: f32,
    step: &Uniform,
    chunk: usize,
) -> Result<Dispatch> {
    let s = AttentionShape {
        n_tokens: r.n_tokens,
        n_heads: r.n_heads,
        n_kv_heads: r.n_kv_heads,
        head_dim: r.head_dim,
        max_seq: r.max_seq,
        kv: r.kv,
    };
    // `out` has the shape a separate query tensor would have.
    check(&s, out, k_cache, v_cache, out)?;
    let shape = partials_shape(&s, SPLIT_CHUNK);
    let ok = rope_fuses(&r)
        && DECODE_CHUNKS.contains(&chunk)
        && qkv.shape == [1, r.n_heads + 2 * r.n_kv_heads, r.head_dim]
        && qkv.dtype == DType::F32
        && table.shape == [r.max_seq, r.rot_dims / 2, 2]
        && r.rot_dims.is_multiple_of(2)
        && r.rot_dims <= r.head_dim
        && r.sinks < r.max_seq
        && partials.shape == shape
        && partials.dtype == DType::F32
        && arrivals.shape == [r.n_heads]
        && arrivals.dtype == DType::U32;
    if !ok {
        return Err(Error::Shape {
            op: "attention_rope_split",
            message: format!(
                "{r:?} (one token, head_dim a multiple of 16, chunks of {DECODE_CHUNKS:?} positions, got {chunk}) does not fit qkv {:?}, table {:?}, partials {:?}, arrivals {:?}",
                qkv.shape, table.shape, partials.shape, arrivals.shape
            ),
        });
    }
    // The adapter's own subgroups (not the tests' emulation, which covers row sums only).
    let caps = ctx.capabilities();
    let sg = caps.subgroups && caps.subgroup_emulation == 0;
    let pipeline = ctx.pipeline(&ATTENTION_DECODE_SHADER, &decode_defines(r.kv.defines(r.style.defines()), chunk, sg)).await?;
    let mut p = params(&s, mask, scale, chunk as u32);
    p[10] = r.rot_dims as u32;
    p[11] = r.sinks as u32;
    ctx.dispatch_with(
        &pipeline,
        &[qkv, k_cache, v_cache, partials, table, arrivals, out],
        Some(bytemuck::cast_slice(&p)),
        &[step],
        [s.n_heads as u32, 1, split_chunks(s.max_seq, chunk) as u32],
    )
}

/// With `sg` the softmax statistics are taken with subgroup operations (one barrier for both).
fn decode_defines(base: Defines, chunk: usize, sg: bool) -> Defines {
    let d = base.set("WG", DECODE_LANES as u32).set("CHUNK", chunk as u32);
    if sg { d.set("SG", 1) } else { d }
}

pub(crate) fn params(s: &AttentionShape, mask: AttentionMask, scale: f32, chunk_len: u32) -> [u32; 12] {
    [
        s.n_tokens as u32,
        s.n_heads as u32,
        s.n_kv_heads as u32,
        s.head_dim as u32,
        s.max_seq as u32,
        scale.to_bits(),
        s.kv.row_words(s.head_dim) as u32,
        chunk_len,
        mask.window.map_or(0, |w| w.min(u32::MAX as usize) as u32),
        mask.softcap.unwrap_or(0.0).to_bits(),
        0, // rot_dims and sinks: set by attention_rope_split
        0,
    ]
}

pub(crate) fn check(s: &AttentionShape, q: &GpuTensor, k_cache: &GpuTensor, v_cache: &GpuTensor, out: &GpuTensor) -> Result<()> {
    let qs = [s.n_tokens, s.n_heads, s.head_dim];
    let cache = [s.n_kv_heads, s.max_seq, s.kv.row_words(s.head_dim)];
    let ok = q.shape == qs
        && out.shape == qs
        && k_cache.shape == cache
        && v_cache.shape == cache
        && s.n_kv_heads > 0
        && s.n_heads.is_multiple_of(s.n_kv_heads)
        && s.head_dim <= MAX_HEAD_DIM
        && s.kv.fits(s.head_dim)
        && [q, out].iter().all(|t| t.dtype == DType::F32)
        && [k_cache, v_cache].iter().all(|t| t.dtype == s.kv.dtype());
    if !ok {
        return Err(Error::Shape {
            op: "attention",
            message: format!(
                "{s:?} does not fit q {:?} caches {:?} out {:?} (head_dim <= {MAX_HEAD_DIM}, heads a multiple of KV heads)",
                q.shape, k_cache.shape, out.shape
            ),
        });
    }
    Ok(())
}

/// CPU reference in f64. `k_cache`/`v_cache` are [n_kv_heads, max_seq, head_dim] f32 values (a
/// quantized cache decoded with [`KvFormat::decode_cache`]), attended in slot order.
pub fn attention_cpu(
    s: AttentionShape,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    pos: usize,
    scale: f32,
) -> Vec<f64> {
    attention_masked_cpu(s, AttentionMask::default(), q, k_cache, v_cache, pos, scale)
}

/// [`attention_cpu`] with Gemma's masks as the kernels apply them: the query at position
/// `P = pos + t` sees slot j of its `min(P + 1, max_seq)` slots where `(P - j) % max_seq <
/// window`, and each scaled score s becomes `softcap * tanh(s / softcap)`.
#[allow(clippy::too_many_arguments)]
pub fn attention_masked_cpu(
    s: AttentionShape,
    mask: AttentionMask,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    pos: usize,
    scale: f32,
) -> Vec<f64> {
    attend_cpu(s, q, k_cache, v_cache, s.max_seq, scale, mask.softcap, |t| {
        let last = pos + t;
        let n_ctx = (last + 1).min(s.max_seq);
        (0..n_ctx).filter(|&j| mask.window.is_none_or(|w| (last - j) % s.max_seq < w)).collect()
    })
}

#[allow(clippy::too_many_arguments)]
/// CPU reference of sliding-window attention over a whole history: the query at absolute
/// position `P = pos + t` attends to positions `0..sinks` and to the last `window - sinks`
/// positions up to P (all of `0..=P` while P < window), in order. `k_hist`/`v_hist` are
/// [n_kv_heads, history, head_dim] by absolute position.
pub fn windowed_attention_cpu(
    s: AttentionShape,
    q: &[f32],
    k_hist: &[f32],
    v_hist: &[f32],
    history: usize,
    pos: usize,
    window: usize,
    sinks: usize,
    scale: f32,
) -> Vec<f64> {
    attend_cpu(s, q, k_hist, v_hist, history, scale, None, |t| {
        let last = pos + t;
        let recent = (last + 1).saturating_sub(window - sinks).max(sinks.min(last + 1));
        (0..sinks.min(recent)).chain(recent..=last).collect()
    })
}

/// Each query row of token t against the rows `positions(t)` of `k`/`v` ([n_kv_heads, rows,
/// head_dim]), in f64: scaled scores, optionally soft-capped, softmax, weighted sum of V.
#[allow(clippy::too_many_arguments)]
fn attend_cpu(
    s: AttentionShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    rows: usize,
    scale: f32,
    softcap: Option<f32>,
    positions: impl Fn(usize) -> Vec<usize>,
) -> Vec<f64> {
    let hd = s.head_dim;
    let mut out = vec![0f64; s.n_tokens * s.n_heads * hd];
    for t in 0..s.n_tokens {
        let positions = positions(t);
        for h in 0..s.n_heads {
            let kvh = h / (s.n_heads / s.n_kv_heads);
            let qv = &q[(t * s.n_heads + h) * hd..][..hd];
            let at = |j: usize| (kvh * rows + j) * hd..(kvh * rows + j + 1) * hd;
            let scores: Vec<f64> = positions
                .iter()
                .map(|&j| {
                    let x = qv.iter().zip(&k[at(j)]).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale as f64;
                    softcap.map_or(x, |c| c as f64 * (x / c as f64).tanh())
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            let o = &mut out[(t * s.n_heads + h) * hd..][..hd];
            for (w, &j) in e.iter().zip(&positions) {
                for (od, &vd) in o.iter_mut().zip(&v[at(j)]) {
                    *od += w / z * vd as f64;
                }
            }
        }
    }
    out
}
