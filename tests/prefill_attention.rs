//! The tiled prompt-pass attention (`ops::prefill_attention`) against the f64 CPU reference on
//! seeded data: GQA and plain multi-head, head_dim 32 to 128 (80 leaves lanes idle), query rows
//! that do not fill the last tile, a second pass over a cached prefix, every KV format, a
//! sliding window and soft-capping. Cache slots past the pass's context hold random values the
//! kernel must not read.

use weft::gpu::{DType, GpuTensor};
use weft::ops::attention::{attention_masked_cpu, AttentionMask, AttentionShape};
use weft::ops::kv::KvFormat;
use weft::ops::prefill_attention::{
    prefill_attention, prefill_attention_fits, prefill_attention_workgroup_bytes, PREFILL_ATTENTION_TOLERANCE,
};
use weft::ops::rope::step_bytes;
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::ctx;

/// A cache of f32 values uploaded in format `kv`.
fn upload_cache(kv: KvFormat, label: &str, shape: [usize; 3], values: &[f32]) -> anyhow::Result<GpuTensor> {
    let rows = [shape[0], shape[1], kv.row_words(shape[2])];
    Ok(match kv {
        KvFormat::F32 => ctx().upload_f32(label, &rows, values)?,
        _ => ctx().upload_u32(label, &rows, &kv.encode_cache(values, shape[2]))?,
    })
}

/// `s.n_tokens` queries at positions `pos..` against a random cache, compared with the CPU
/// reference over the cache as stored (decoded from its format).
fn check(s: AttentionShape, mask: AttentionMask, pos: usize, seed: u64) -> anyhow::Result<()> {
    let ctx = ctx();
    let cache = [s.n_kv_heads, s.max_seq, s.head_dim];
    let k = random_f32(seed, cache.iter().product());
    let v: Vec<f32> = random_f32(seed + 1, cache.iter().product()).iter().map(|x| x * 4.0).collect();
    // Queries large enough that the softmax is far from uniform.
    let q: Vec<f32> = random_f32(seed + 2, s.n_tokens * s.n_heads * s.head_dim).iter().map(|x| x * 3.0).collect();
    let (tk, tv) = (upload_cache(s.kv, "k", cache, &k)?, upload_cache(s.kv, "v", cache, &v)?);
    let tq = ctx.upload_f32("q", &[s.n_tokens, s.n_heads, s.head_dim], &q)?;
    let out = ctx.zeros("out", &[s.n_tokens, s.n_heads, s.head_dim], DType::F32)?;
    let step = ctx.uniform_block("step", 16);
    ctx.write_uniform(&step, &step_bytes(pos as u32, s.n_tokens as u32));
    let scale = 1.0 / (s.head_dim as f32).sqrt();
    // Under WebGPU's default limits (WEFT_LIMITS=default) head_dim 128 does not fit, and is refused.
    let limit = ctx.capabilities().limits.max_compute_workgroup_storage_size;
    if prefill_attention_workgroup_bytes(s.head_dim).is_some_and(|b| b > limit) {
        assert!(!prefill_attention_fits(ctx, &s), "{s:?} accepted over the workgroup memory limit {limit}");
        return Ok(());
    }
    assert!(prefill_attention_fits(ctx, &s), "{s:?}");
    let d = pollster::block_on(prefill_attention(ctx, s, mask, &tq, &tk, &tv, &out, scale, &step))?;
    ctx.run(&[&d]);
    let stored = |x: &[f32]| s.kv.decode_cache(&s.kv.encode_cache(x, s.head_dim), s.head_dim);
    let want = attention_masked_cpu(s, mask, &q, &stored(&k), &stored(&v), pos, scale);
    let got = pollster::block_on(ctx.read_f32(&out))?;
    let dev = PREFILL_ATTENTION_TOLERANCE.compare(&got, &want);
    assert!(dev.within, "{s:?} {mask:?} pos {pos}: {dev:?}");
    Ok(())
}

fn shape(n_tokens: usize, n_heads: usize, n_kv_heads: usize, head_dim: usize, max_seq: usize, kv: KvFormat) -> AttentionShape {
    AttentionShape { n_tokens, n_heads, n_kv_heads, head_dim, max_seq, kv }
}

#[test]
fn tiled_prefill_attention_matches_the_reference() -> anyhow::Result<()> {
    let none = AttentionMask::default();
    // GQA, 37 tokens x 4 heads a KV head: 148 rows, the last tile partly filled; first pass.
    check(shape(37, 8, 2, 64, 96, KvFormat::F32), none, 0, 10)?;
    // head_dim 128, a second pass after 45 cached positions.
    check(shape(20, 4, 1, 128, 80, KvFormat::F32), none, 45, 20)?;
    // Plain multi-head attention (one row a token), 9 tokens: one tile, most rows empty.
    check(shape(9, 3, 3, 32, 64, KvFormat::F32), none, 50, 30)?;
    // head_dim 80: lanes past the 20 column groups idle.
    check(shape(11, 4, 2, 80, 48, KvFormat::F32), none, 23, 40)?;
    Ok(())
}

#[test]
fn tiled_prefill_attention_reads_f16_and_q8_caches() -> anyhow::Result<()> {
    let none = AttentionMask::default();
    for (i, kv) in [KvFormat::F16, KvFormat::Q8].into_iter().enumerate() {
        let seed = 100 + 10 * i as u64;
        check(shape(13, 6, 2, 64, 64, kv), none, 30, seed)?;
        check(shape(6, 4, 2, 128, 40, kv), none, 0, seed + 5)?;
    }
    Ok(())
}

#[test]
fn tiled_prefill_attention_with_window_and_softcap() -> anyhow::Result<()> {
    // A window shorter than the context: the first tiles of the cache are skipped, and inside a
    // tile the rows of different tokens see different positions.
    let window = AttentionMask { window: Some(24), softcap: None };
    check(shape(40, 4, 2, 64, 96, KvFormat::F32), window, 30, 200)?;
    let capped = AttentionMask { window: None, softcap: Some(5.0) };
    check(shape(17, 2, 1, 32, 64, KvFormat::F32), capped, 12, 210)?;
    let both = AttentionMask { window: Some(50), softcap: Some(20.0) };
    check(shape(33, 8, 4, 128, 128, KvFormat::Q8), both, 60, 220)?;
    Ok(())
}

#[test]
fn heads_the_tiles_do_not_take_are_refused() -> anyhow::Result<()> {
    let ctx = ctx();
    for s in [shape(8, 2, 1, 256, 16, KvFormat::F32), shape(8, 2, 1, 30, 16, KvFormat::F32), shape(1, 2, 1, 64, 16, KvFormat::F32)] {
        assert!(!prefill_attention_fits(ctx, &s), "{s:?}");
        let qs = [s.n_tokens, s.n_heads, s.head_dim];
        let (q, out) = (ctx.zeros("q", &qs, DType::F32)?, ctx.zeros("out", &qs, DType::F32)?);
        let cache = ctx.zeros("cache", &[s.n_kv_heads, s.max_seq, s.head_dim], DType::F32)?;
        let step = ctx.uniform_block("step", 16);
        let r = pollster::block_on(prefill_attention(ctx, s, AttentionMask::default(), &q, &cache, &cache, &out, 1.0, &step));
        assert!(r.is_err(), "{s:?} was accepted");
    }
    Ok(())
}
