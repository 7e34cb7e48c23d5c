//! Kernels of the transformer engine (RMSNorm, RoPE + KV store in each KV format, attention
//! with its sliding window, SwiGLU, residual) against their f64 CPU references on seeded random
//! data.

use weft::gpu::{DType, GpuTensor};
use weft::ops::attention::{
    attention, attention_cpu, attention_split, partials_shape, windowed_attention_cpu, AttentionShape, ATTENTION_TOLERANCE,
    SPLIT_CHUNK,
};
use weft::ops::elementwise::{add_inplace, silu_mul, silu_mul_cpu, SILU_MUL_TOLERANCE};
use weft::ops::kv::{KvFormat, KV_F16_TOLERANCE, KV_Q8_SLACK};
use weft::ops::norm::{rms_norm, rms_norm_cpu, RMSNORM_TOLERANCE};
use weft::ops::rope::{
    ring_slot, rope_cpu, rope_row, rope_store, rope_table, step_bytes, RopeScaling, RopeShape, RopeStyle,
    ROPE_TOLERANCE,
};
use weft::ops::Tolerance;
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::ctx;

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

/// A cache of f32 values uploaded in format `kv`.
fn upload_cache(kv: KvFormat, label: &str, shape: [usize; 3], values: &[f32]) -> anyhow::Result<GpuTensor> {
    let rows = [shape[0], shape[1], kv.row_words(shape[2])];
    Ok(match kv {
        KvFormat::F32 => ctx().upload_f32(label, &rows, values)?,
        _ => ctx().upload_u32(label, &rows, &kv.encode_cache(values, shape[2]))?,
    })
}

/// A cache's words, whatever its format.
fn read_words(kv: KvFormat, t: &GpuTensor) -> anyhow::Result<Vec<u32>> {
    Ok(match kv {
        KvFormat::F32 => pollster::block_on(ctx().read_f32(t))?.iter().map(|v| v.to_bits()).collect(),
        _ => pollster::block_on(ctx().read_u32(t))?,
    })
}

/// Checks one stored row against the exact (f64) values it should hold.
fn check_row(kv: KvFormat, words: &[u32], want: &[f64], what: &str) {
    let head_dim = want.len();
    let got = kv.decode_row(words, head_dim);
    match kv {
        KvFormat::F32 => {
            let dev = ROPE_TOLERANCE.compare(&got, want);
            assert!(dev.within, "{what}: {dev:?}");
        }
        KvFormat::F16 => {
            // The f32 rotation's error, then one f16 step.
            let tol = Tolerance {
                abs: ROPE_TOLERANCE.abs + KV_F16_TOLERANCE.abs,
                rel: ROPE_TOLERANCE.rel + KV_F16_TOLERANCE.rel,
            };
            let dev = tol.compare(&got, want);
            assert!(dev.within, "{what}: {dev:?}");
        }
        KvFormat::Q8 => {
            let absmax = want.iter().fold(0f64, |m, v| m.max(v.abs()));
            let scale = f32::from_bits(words[0]) as f64;
            assert!(
                (scale - absmax / 127.0).abs() <= 1e-5 * absmax / 127.0,
                "{what}: scale {scale} for absmax {absmax}"
            );
            let bound = scale * (0.5 + KV_Q8_SLACK) + ROPE_TOLERANCE.abs;
            for (d, (g, w)) in got.iter().zip(want).enumerate() {
                assert!((*g as f64 - w).abs() <= bound, "{what} dim {d}: {g} vs {w} (bound {bound:e})");
            }
        }
    }
}

/// Runs rope_store for `n_tokens` tokens at `pos` and attention over the cache, checking the
/// rotated q, every cache row (written rows against the exact rotation, the rest unchanged)
/// and the attention output against the CPU reference over the cache as stored.
fn rope_then_attention(style: RopeStyle, n_tokens: usize, pos: usize, seed: u64, kv: KvFormat) -> anyhow::Result<()> {
    rope_then_attention_dims(style, n_tokens, pos, seed, kv, 64)
}

fn rope_then_attention_dims(
    style: RopeStyle,
    n_tokens: usize,
    pos: usize,
    seed: u64,
    kv: KvFormat,
    head_dim: usize,
) -> anyhow::Result<()> {
    let ctx = ctx();
    let (n_heads, n_kv_heads, max_seq) = (6, 2, 96);
    let rs = RopeShape { n_tokens, n_heads, n_kv_heads, head_dim, max_seq, rot_dims: head_dim, style, kv, sinks: 0 };
    let table = rope_table(max_seq, head_dim, 10000.0, &RopeScaling::None);
    // Earlier positions already in the cache, then this step's tokens.
    let k_cache = random_f32(seed, n_kv_heads * max_seq * head_dim);
    let v_cache: Vec<f32> = random_f32(seed + 1, n_kv_heads * max_seq * head_dim).iter().map(|v| v * 4.0).collect();
    let q = random_f32(seed + 2, n_tokens * n_heads * head_dim);
    let k = random_f32(seed + 3, n_tokens * n_kv_heads * head_dim);
    let v: Vec<f32> = random_f32(seed + 4, n_tokens * n_kv_heads * head_dim).iter().map(|v| v * 4.0).collect();

    let tq = ctx.upload_f32("q", &[n_tokens, n_heads, head_dim], &q)?;
    let tk = ctx.upload_f32("k", &[n_tokens, n_kv_heads, head_dim], &k)?;
    let tv = ctx.upload_f32("v", &[n_tokens, n_kv_heads, head_dim], &v)?;
    let tkc = upload_cache(kv, "k_cache", [n_kv_heads, max_seq, head_dim], &k_cache)?;
    let tvc = upload_cache(kv, "v_cache", [n_kv_heads, max_seq, head_dim], &v_cache)?;
    let before = (kv.encode_cache(&k_cache, head_dim), kv.encode_cache(&v_cache, head_dim));
    let ttable = ctx.upload_f32("rope", &[max_seq, head_dim / 2, 2], &table)?;
    let out = ctx.zeros("out", &[n_tokens, n_heads, head_dim], DType::F32)?;
    let step = ctx.uniform_block("step", 16);
    ctx.write_uniform(&step, &step_bytes(pos as u32, n_tokens as u32));

    let rope = pollster::block_on(rope_store(ctx, rs, &tq, &tk, &tv, &tkc, &tvc, &ttable, &step))?;
    let s = AttentionShape { n_tokens, n_heads, n_kv_heads, head_dim, max_seq, kv };
    let scale = 1.0 / (head_dim as f32).sqrt();
    let attn = pollster::block_on(attention(ctx, s, &tq, &tkc, &tvc, &out, scale, &step))?;
    // The split form (chunks of 64 positions over a 96-slot cache: one chunk empty while the
    // context is short) reads the same cache after the same store.
    let partials = ctx.upload_f32("partials", &partials_shape(&s, SPLIT_CHUNK), &random_f32(seed + 5, partials_shape(&s, SPLIT_CHUNK).iter().product()))?;
    let out_split = ctx.zeros("out split", &[n_tokens, n_heads, head_dim], DType::F32)?;
    let [split, merge] =
        pollster::block_on(attention_split(ctx, s, &tq, &tkc, &tvc, &partials, &out_split, scale, &step, SPLIT_CHUNK))?;
    ctx.run(&[&rope, &attn, &split, &merge]);

    let mut q_rot = Vec::new();
    for t in 0..n_tokens {
        for h in 0..n_heads {
            let x = &q[(t * n_heads + h) * head_dim..][..head_dim];
            q_rot.extend(rope_cpu(x, pos + t, head_dim, &table, style));
        }
    }
    let got_q = pollster::block_on(ctx.read_f32(&tq))?;
    let dev = ROPE_TOLERANCE.compare(&got_q, &q_rot);
    assert!(dev.within, "{style:?} q: {dev:?}");

    let (k_words, v_words) = (read_words(kv, &tkc)?, read_words(kv, &tvc)?);
    let rw = kv.row_words(head_dim);
    for h in 0..n_kv_heads {
        for slot in 0..max_seq {
            let row = (h * max_seq + slot) * rw..(h * max_seq + slot + 1) * rw;
            if (pos..pos + n_tokens).contains(&slot) {
                let src = ((slot - pos) * n_kv_heads + h) * head_dim;
                let k_rot = rope_cpu(&k[src..src + head_dim], slot, head_dim, &table, style);
                let v_row: Vec<f64> = v[src..src + head_dim].iter().map(|&x| x as f64).collect();
                check_row(kv, &k_words[row.clone()], &k_rot, &format!("{kv} {style:?} k head {h} pos {slot}"));
                check_row(kv, &v_words[row], &v_row, &format!("{kv} v head {h} pos {slot}"));
            } else {
                assert_eq!(k_words[row.clone()], before.0[row.clone()], "{kv} k row {h},{slot} changed");
                assert_eq!(v_words[row.clone()], before.1[row], "{kv} v row {h},{slot} changed");
            }
        }
    }

    // Attention against the cache exactly as stored.
    let q_rot32: Vec<f32> = q_rot.iter().map(|&v| v as f32).collect();
    let (k_vals, v_vals) = (kv.decode_cache(&k_words, head_dim), kv.decode_cache(&v_words, head_dim));
    let want = attention_cpu(s, &q_rot32, &k_vals, &v_vals, pos, scale);
    let got = pollster::block_on(ctx.read_f32(&out))?;
    let dev = ATTENTION_TOLERANCE.compare(&got, &want);
    assert!(dev.within, "{kv} {style:?} T={n_tokens} pos={pos}: {dev:?}");
    let got = pollster::block_on(ctx.read_f32(&out_split))?;
    let dev = ATTENTION_TOLERANCE.compare(&got, &want);
    assert!(dev.within, "split {kv} {style:?} T={n_tokens} pos={pos}: {dev:?}");
    Ok(())
}

#[test]
fn decode_step_attention_with_gqa() -> anyhow::Result<()> {
    for kv in KvFormat::ALL {
        rope_then_attention(RopeStyle::Norm, 1, 0, 90, kv)?;
        rope_then_attention(RopeStyle::Norm, 1, 70, 91, kv)?; // more than one tile of context
        rope_then_attention(RopeStyle::Neox, 1, 63, 92, kv)?;
    }
    Ok(())
}

#[test]
fn attention_over_head_dims_of_both_kernel_paths() -> anyhow::Result<()> {
    // f32 caches take the vec4 path when head_dim is a multiple of 16: 80 leaves lanes of the
    // last position group idle, 256 has one position group; 40 and 24 take the scalar path.
    for (i, head_dim) in [16, 24, 40, 80, 128, 256].into_iter().enumerate() {
        let seed = 400 + 10 * i as u64;
        rope_then_attention_dims(RopeStyle::Norm, 1, 70, seed, KvFormat::F32, head_dim)?;
        rope_then_attention_dims(RopeStyle::Neox, 7, 20, seed + 5, KvFormat::F32, head_dim)?;
    }
    rope_then_attention_dims(RopeStyle::Norm, 1, 70, 480, KvFormat::Q8, 80)?;
    Ok(())
}

#[test]
fn prefill_attention_is_causal() -> anyhow::Result<()> {
    for kv in KvFormat::ALL {
        rope_then_attention(RopeStyle::Neox, 16, 0, 93, kv)?;
        rope_then_attention(RopeStyle::Norm, 9, 40, 94, kv)?;
    }
    Ok(())
}

/// A cache of 8 slots filled by one 8-token pass, then 12 single-token steps that wrap the ring
/// more than once: each step's output against attention over the window (the first `sinks`
/// positions and the most recent ones, 8 in all) of the whole history (rows as the GPU stored
/// them), the table row of each position past 8 rewritten into its slot the way the engine
/// does. Half the dimensions rotate (NEOX).
#[test]
fn sliding_window_attention_wraps_the_ring() -> anyhow::Result<()> {
    let ctx = ctx();
    let (n_heads, n_kv_heads, head_dim, max_seq, rot_dims, steps) = (4, 2, 16, 8, 8, 20);
    let style = RopeStyle::Neox;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let cases = KvFormat::ALL.into_iter().flat_map(|kv| [(kv, 0), (kv, 3)]);
    for (f, (kv, sinks)) in cases.enumerate() {
        let seed = 200 + 10 * f as u64;
        let qs = random_f32(seed, steps * n_heads * head_dim);
        let ks = random_f32(seed + 1, steps * n_kv_heads * head_dim);
        let vs = random_f32(seed + 2, steps * n_kv_heads * head_dim);
        let table = rope_table(max_seq, rot_dims, 10000.0, &RopeScaling::None);
        let full_table = rope_table(steps, rot_dims, 10000.0, &RopeScaling::None);
        let ttable = ctx.upload_f32("rope", &[max_seq, rot_dims / 2, 2], &table)?;
        let zeros = vec![0f32; n_kv_heads * max_seq * head_dim];
        let tkc = upload_cache(kv, "k ring", [n_kv_heads, max_seq, head_dim], &zeros)?;
        let tvc = upload_cache(kv, "v ring", [n_kv_heads, max_seq, head_dim], &zeros)?;
        let step = ctx.uniform_block("step", 16);
        // History by absolute position: [n_kv_heads, steps, head_dim].
        let mut k_hist = vec![0f32; n_kv_heads * steps * head_dim];
        let mut v_hist = vec![0f32; n_kv_heads * steps * head_dim];
        let mut pos = 0;
        while pos < steps {
            let t = if pos == 0 { max_seq } else { 1 };
            let q = &qs[pos * n_heads * head_dim..(pos + t) * n_heads * head_dim];
            let tq = ctx.upload_f32("q", &[t, n_heads, head_dim], q)?;
            let tk = ctx.upload_f32(
                "k",
                &[t, n_kv_heads, head_dim],
                &ks[pos * n_kv_heads * head_dim..][..t * n_kv_heads * head_dim],
            )?;
            let tv = ctx.upload_f32(
                "v",
                &[t, n_kv_heads, head_dim],
                &vs[pos * n_kv_heads * head_dim..][..t * n_kv_heads * head_dim],
            )?;
            let out = ctx.zeros("out", &[t, n_heads, head_dim], DType::F32)?;
            if pos >= max_seq {
                let mut row = vec![0f32; rot_dims];
                rope_row(pos, rot_dims, 10000.0, &RopeScaling::None, &mut row);
                ctx.write_tensor(&ttable, ring_slot(pos, max_seq, sinks) * rot_dims, bytemuck::cast_slice(&row))?;
            }
            ctx.write_uniform(&step, &step_bytes(pos as u32, t as u32));
            let rs = RopeShape { n_tokens: t, n_heads, n_kv_heads, head_dim, max_seq, rot_dims, style, kv, sinks };
            let s = AttentionShape { n_tokens: t, n_heads, n_kv_heads, head_dim, max_seq, kv };
            let rope = pollster::block_on(rope_store(ctx, rs, &tq, &tk, &tv, &tkc, &tvc, &ttable, &step))?;
            let attn = pollster::block_on(attention(ctx, s, &tq, &tkc, &tvc, &out, scale, &step))?;
            ctx.run(&[&rope, &attn]);

            // Record what this pass stored (checked against the exact rotation) in the history.
            let (kw, vw) = (read_words(kv, &tkc)?, read_words(kv, &tvc)?);
            let rw = kv.row_words(head_dim);
            for p in pos..pos + t {
                for h in 0..n_kv_heads {
                    let slot = ring_slot(p, max_seq, sinks);
                    let row = (h * max_seq + slot) * rw..(h * max_seq + slot + 1) * rw;
                    let src = (p * n_kv_heads + h) * head_dim;
                    let want_k = rope_cpu(&ks[src..src + head_dim], p, rot_dims, &full_table, style);
                    check_row(kv, &kw[row.clone()], &want_k, &format!("{kv} ring k pos {p}"));
                    let dst = (h * steps + p) * head_dim;
                    k_hist[dst..dst + head_dim].copy_from_slice(&kv.decode_row(&kw[row.clone()], head_dim));
                    v_hist[dst..dst + head_dim].copy_from_slice(&kv.decode_row(&vw[row], head_dim));
                }
            }
            let mut q_rot = Vec::new();
            for x in q.chunks(head_dim).enumerate().map(|(i, x)| (pos + i / n_heads, x)) {
                q_rot.extend(rope_cpu(x.1, x.0, rot_dims, &full_table, style).iter().map(|&v| v as f32));
            }
            let want = windowed_attention_cpu(s, &q_rot, &k_hist, &v_hist, steps, pos, max_seq, sinks, scale);
            let got = pollster::block_on(ctx.read_f32(&out))?;
            let dev = ATTENTION_TOLERANCE.compare(&got, &want);
            assert!(dev.within, "{kv} window with {sinks} sinks at pos {pos}: {dev:?}");
            pos += t;
        }
    }
    Ok(())
}

#[test]
fn rope_table_is_cos_sin_of_scaled_positions() {
    let t = rope_table(4, 8, 10000.0, &RopeScaling::Linear { factor: 2.0 });
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
