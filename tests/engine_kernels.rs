//! Kernels of the transformer engine (RMSNorm, RoPE + KV store, attention, SwiGLU, residual)
//! against their f64 CPU references on seeded random data.

use std::sync::OnceLock;

use weft::gpu::{BackendChoice, DType, GpuContext};
use weft::ops::attention::{attention, attention_cpu, AttentionShape, ATTENTION_TOLERANCE};
use weft::ops::elementwise::{add_inplace, silu_mul, silu_mul_cpu, SILU_MUL_TOLERANCE};
use weft::ops::norm::{rms_norm, rms_norm_cpu, RMSNORM_TOLERANCE};
use weft::ops::rope::{rope_cpu, rope_store, rope_table, step_bytes, RopeScaling, RopeShape, RopeStyle, ROPE_TOLERANCE};
use weft::selftest::random_f32;

fn ctx() -> &'static GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| {
        let choice = BackendChoice::from_env().expect("WEFT_BACKEND");
        pollster::block_on(GpuContext::new(choice)).expect("a GPU adapter (lavapipe in CI)")
    })
}

fn run_read(d: &weft::gpu::Dispatch, out: &weft::gpu::GpuTensor) -> Vec<f32> {
    ctx().run(&[d]);
    pollster::block_on(ctx().read_f32(out)).expect("readback")
}

#[test]
fn rms_norm_matches_cpu() -> anyhow::Result<()> {
    let ctx = ctx();
    for (i, (rows, cols)) in [(1, 576), (5, 64), (3, 1000)].into_iter().enumerate() {
        let x = random_f32(60 + i as u64, rows * cols);
        let w: Vec<f32> = random_f32(70 + i as u64, cols).iter().map(|v| 1.0 + v * 0.5).collect();
        let tx = ctx.upload_f32("x", &[rows, cols], &x)?;
        let tw = ctx.upload_f32("w", &[cols], &w)?;
        let ty = ctx.zeros("y", &[rows, cols], DType::F32)?;
        let d = pollster::block_on(rms_norm(ctx, &tx, &tw, &ty, 1e-5))?;
        let dev = RMSNORM_TOLERANCE.compare(&run_read(&d, &ty), &rms_norm_cpu(&x, &w, 1e-5));
        assert!(dev.within, "[{rows},{cols}]: {dev:?}");
    }
    Ok(())
}

#[test]
fn swiglu_and_residual_match_cpu() -> anyhow::Result<()> {
    let ctx = ctx();
    let n = 1536 * 3 + 7;
    let g: Vec<f32> = random_f32(80, n).iter().map(|v| v * 8.0).collect();
    let u = random_f32(81, n);
    let (tg, tu) = (ctx.upload_f32("g", &[n], &g)?, ctx.upload_f32("u", &[n], &u)?);
    let out = ctx.zeros("out", &[n], DType::F32)?;
    let d = pollster::block_on(silu_mul(ctx, &tg, &tu, &out))?;
    let dev = SILU_MUL_TOLERANCE.compare(&run_read(&d, &out), &silu_mul_cpu(&g, &u));
    assert!(dev.within, "{dev:?}");

    let d = pollster::block_on(add_inplace(ctx, &tg, &tu))?;
    let want: Vec<f64> = g.iter().zip(&u).map(|(a, b)| (a + b) as f64).collect();
    let dev = weft::ops::Tolerance::EXACT.compare(&run_read(&d, &tg), &want);
    assert!(dev.within, "{dev:?}");
    Ok(())
}

/// Runs rope_store for `n_tokens` tokens at `pos` and attention over the cache, checking both.
fn rope_then_attention(style: RopeStyle, n_tokens: usize, pos: usize, seed: u64) -> anyhow::Result<()> {
    let ctx = ctx();
    let (n_heads, n_kv_heads, head_dim, max_seq) = (6, 2, 64, 96);
    let rs = RopeShape { n_tokens, n_heads, n_kv_heads, head_dim, max_seq, rot_dims: head_dim, style };
    let table = rope_table(max_seq, head_dim, 10000.0, RopeScaling::None);
    // Earlier positions already in the cache, then this step's tokens.
    let mut k_cache = random_f32(seed, n_kv_heads * max_seq * head_dim);
    let mut v_cache = random_f32(seed + 1, n_kv_heads * max_seq * head_dim);
    let q = random_f32(seed + 2, n_tokens * n_heads * head_dim);
    let k = random_f32(seed + 3, n_tokens * n_kv_heads * head_dim);
    let v = random_f32(seed + 4, n_tokens * n_kv_heads * head_dim);

    let tq = ctx.upload_f32("q", &[n_tokens, n_heads, head_dim], &q)?;
    let tk = ctx.upload_f32("k", &[n_tokens, n_kv_heads, head_dim], &k)?;
    let tv = ctx.upload_f32("v", &[n_tokens, n_kv_heads, head_dim], &v)?;
    let tkc = ctx.upload_f32("k_cache", &[n_kv_heads, max_seq, head_dim], &k_cache)?;
    let tvc = ctx.upload_f32("v_cache", &[n_kv_heads, max_seq, head_dim], &v_cache)?;
    let ttable = ctx.upload_f32("rope", &[max_seq, head_dim / 2, 2], &table)?;
    let out = ctx.zeros("out", &[n_tokens, n_heads, head_dim], DType::F32)?;
    let step = ctx.uniform_block("step", 16);
    ctx.write_uniform(&step, &step_bytes(pos as u32, n_tokens as u32));

    let rope = pollster::block_on(rope_store(ctx, rs, &tq, &tk, &tv, &tkc, &tvc, &ttable, &step))?;
    let s = AttentionShape { n_tokens, n_heads, n_kv_heads, head_dim, max_seq };
    let scale = 1.0 / (head_dim as f32).sqrt();
    let attn = pollster::block_on(attention(ctx, s, &tq, &tkc, &tvc, &out, scale, &step))?;
    ctx.run(&[&rope, &attn]);

    // CPU: rotate q and k, store k and v, then attend.
    let mut q_rot = Vec::new();
    for t in 0..n_tokens {
        for h in 0..n_heads {
            let x = &q[(t * n_heads + h) * head_dim..][..head_dim];
            q_rot.extend(rope_cpu(x, pos + t, head_dim, &table, style));
        }
        for h in 0..n_kv_heads {
            let src = (t * n_kv_heads + h) * head_dim;
            let rot = rope_cpu(&k[src..src + head_dim], pos + t, head_dim, &table, style);
            let dst = (h * max_seq + pos + t) * head_dim;
            for d in 0..head_dim {
                k_cache[dst + d] = rot[d] as f32;
                v_cache[dst + d] = v[src + d];
            }
        }
    }
    let got_q = pollster::block_on(ctx.read_f32(&tq))?;
    let dev = ROPE_TOLERANCE.compare(&got_q, &q_rot);
    assert!(dev.within, "{style:?} q: {dev:?}");
    let got_k = pollster::block_on(ctx.read_f32(&tkc))?;
    let want_k: Vec<f64> = k_cache.iter().map(|&v| v as f64).collect();
    let dev = ROPE_TOLERANCE.compare(&got_k, &want_k);
    assert!(dev.within, "{style:?} k cache: {dev:?}");
    let got_v = pollster::block_on(ctx.read_f32(&tvc))?;
    assert_eq!(got_v, v_cache, "v cache");

    let q_rot32: Vec<f32> = q_rot.iter().map(|&v| v as f32).collect();
    let want = attention_cpu(s, &q_rot32, &k_cache, &v_cache, pos, scale);
    let got = pollster::block_on(ctx.read_f32(&out))?;
    let dev = ATTENTION_TOLERANCE.compare(&got, &want);
    assert!(dev.within, "{style:?} T={n_tokens} pos={pos}: {dev:?}");
    Ok(())
}

#[test]
fn decode_step_attention_with_gqa() -> anyhow::Result<()> {
    rope_then_attention(RopeStyle::Norm, 1, 0, 90)?;
    rope_then_attention(RopeStyle::Norm, 1, 70, 91)?; // more than one tile of context
    rope_then_attention(RopeStyle::Neox, 1, 63, 92)
}

#[test]
fn prefill_attention_is_causal() -> anyhow::Result<()> {
    rope_then_attention(RopeStyle::Neox, 16, 0, 93)?;
    rope_then_attention(RopeStyle::Norm, 9, 40, 94)
}

#[test]
fn rope_table_is_cos_sin_of_scaled_positions() {
    let t = rope_table(4, 8, 10000.0, RopeScaling::Linear { factor: 2.0 });
    assert_eq!(t.len(), 4 * 4 * 2);
    // pos 3, pair 1: theta = 3 / 2 * 10000^(-2/8)
    let theta = 1.5f64 * 10000f64.powf(-0.25);
    assert!((t[(3 * 4 + 1) * 2] as f64 - theta.cos()).abs() < 1e-7);
    assert!((t[(3 * 4 + 1) * 2 + 1] as f64 - theta.sin()).abs() < 1e-7);
}

#[test]
fn bias_add_and_copy_row() -> anyhow::Result<()> {
    use weft::ops::elementwise::{bias_add, copy_row};
    let ctx = ctx();
    let (rows, cols) = (3, 70);
    let x = random_f32(95, rows * cols);
    let b = random_f32(96, cols);
    let tx = ctx.upload_f32("x", &[rows, cols], &x)?;
    let tb = ctx.upload_f32("b", &[cols], &b)?;
    let d = pollster::block_on(bias_add(ctx, &tx, &tb))?;
    let got = run_read(&d, &tx);
    let want: Vec<f32> = x.iter().enumerate().map(|(i, v)| v + b[i % cols]).collect();
    assert_eq!(got, want);
    let last = ctx.zeros("last", &[1, cols], DType::F32)?;
    let d = pollster::block_on(copy_row(ctx, &tx, rows - 1, &last))?;
    assert_eq!(run_read(&d, &last), want[(rows - 1) * cols..]);
    assert!(pollster::block_on(copy_row(ctx, &tx, rows, &last)).is_err());
    Ok(())
}
