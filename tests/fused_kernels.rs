//! The fused forms the engine uses to cut dispatches per token: residual add + RMSNorm, the
//! stacked Q/K/V and gate/up projections, RoPE + KV store reading the stacked Q/K/V, and SwiGLU
//! over the stacked gate/up output, decode attention with the RoPE + KV store folded in, and GEMVs
//! of products kept apart writing into the columns of one buffer.
//! Each must give what its unfused form gives: the same bits where the arithmetic is the same,
//! else its CPU reference's tolerance.

use weft::gpu::{BackendChoice, DType, GpuContext, GpuTensor};
use weft::ops::attention::{
    attention_rope_split, attention_split_masked, partials_shape, AttentionMask, AttentionShape, ATTENTION_TOLERANCE,
    DECODE_CHUNKS, SPLIT_CHUNK,
};
use weft::ops::elementwise::{silu_mul_cpu, silu_mul_pairs, SILU_MUL_TOLERANCE};
use weft::ops::kv::KvFormat;
use weft::ops::norm::{add_rms_norm, rms_norm_cpu, RMSNORM_TOLERANCE};
use weft::ops::qmatmul::{self, Precision, QWeight, WeightFormat};
use weft::ops::rope::{rope_store, rope_store_qkv, rope_table, step_bytes, RopeScaling, RopeShape, RopeStyle};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::ctx;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn residual_add_fused_into_rms_norm() -> anyhow::Result<()> {
    let ctx = ctx();
    for (i, (rows, cols)) in [(1, 576), (4, 64), (3, 1000)].into_iter().enumerate() {
        let x = random_f32(10 + i as u64, rows * cols);
        let r: Vec<f32> = random_f32(20 + i as u64, rows * cols).iter().map(|v| v * 3.0).collect();
        let w: Vec<f32> = random_f32(30 + i as u64, cols).iter().map(|v| 1.0 + v * 0.5).collect();
        let (tx, tr) = (ctx.upload_f32("x", &[rows, cols], &x)?, ctx.upload_f32("r", &[rows, cols], &r)?);
        let tw = ctx.upload_f32("w", &[cols], &w)?;
        let ty = ctx.zeros("y", &[rows, cols], DType::F32)?;
        let d = pollster::block_on(add_rms_norm(ctx, &tx, &tr, &tw, &ty, 1e-5))?;
        ctx.run(&[&d]);
        // The sum is one f32 addition: exact against the CPU's.
        let sum: Vec<f32> = x.iter().zip(&r).map(|(a, b)| a + b).collect();
        assert_eq!(bits(&pollster::block_on(ctx.read_f32(&tx))?), bits(&sum), "[{rows},{cols}] x += r");
        let got = pollster::block_on(ctx.read_f32(&ty))?;
        let dev = RMSNORM_TOLERANCE.compare(&got, &rms_norm_cpu(&sum, &w, 1e-5));
        assert!(dev.within, "[{rows},{cols}]: {dev:?}");
    }
    let bad = ctx.zeros("r", &[2, 7], DType::F32)?;
    let x = ctx.zeros("x", &[2, 8], DType::F32)?;
    let w = ctx.zeros("w", &[8], DType::F32)?;
    assert!(pollster::block_on(add_rms_norm(ctx, &x, &bad, &w, &x, 1e-5)).is_err(), "a residual of another shape");
    Ok(())
}

#[test]
fn swiglu_over_stacked_gate_and_up() -> anyhow::Result<()> {
    let ctx = ctx();
    let (rows, cols) = (5, 1536 + 3);
    let gu: Vec<f32> = random_f32(40, rows * 2 * cols).iter().map(|v| v * 8.0).collect();
    let (mut g, mut u) = (Vec::new(), Vec::new());
    for row in gu.chunks(2 * cols) {
        g.extend_from_slice(&row[..cols]);
        u.extend_from_slice(&row[cols..]);
    }
    let tgu = ctx.upload_f32("gu", &[rows, 2 * cols], &gu)?;
    let out = ctx.zeros("out", &[rows, cols], DType::F32)?;
    let d = pollster::block_on(silu_mul_pairs(ctx, &tgu, &out))?;
    ctx.run(&[&d]);
    let dev = SILU_MUL_TOLERANCE.compare(&pollster::block_on(ctx.read_f32(&out))?, &silu_mul_cpu(&g, &u));
    assert!(dev.within, "{dev:?}");
    let odd = ctx.zeros("odd", &[rows, 2 * cols + 1], DType::F32)?;
    assert!(pollster::block_on(silu_mul_pairs(ctx, &odd, &out)).is_err(), "a row that is not two halves");
    Ok(())
}

/// Stacked weights computed in one GEMV/GEMM give, row for row, the bits of separate ones.
#[test]
fn stacked_projections_equal_separate_ones() -> anyhow::Result<()> {
    let ctx = ctx();
    // Row counts of SmolLM2's Q, K and V scaled down, some odd so that a weft weight's packed
    // f16 scales would end inside a word.
    let names = ["Q4_1", "Q8_0", "Q4_0", "Q4_K", "Q6_K", "F32", "q4_g32_sym", "q4_g32_asym", "q8_g64_asym", "q3_g128_asym", "Q4_K_R", "Q5_K_R", "Q6_K_R", "Q4_1_R", "Q5_0_R", "Q5_1_R"];
    for (i, name) in names.into_iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        let k = if format.k_multiple() == 256 { 512 } else { 192 };
        let rows = [18, 6, 6];
        let tws: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(j, &n)| qmatmul::test_weight(format, 100 + (i * 3 + j) as u64, n, k))
            .collect::<Result<_, _>>()?;
        let ws: Vec<QWeight> = tws.iter().map(|tw| tw.upload(ctx, "w")).collect::<Result<_, _>>()?;
        let stacked = QWeight::stack(ctx, "qkv", &ws.iter().collect::<Vec<_>>())?
            .ok_or_else(|| anyhow::anyhow!("{name}: not stacked"))?;
        assert_eq!((stacked.rows, stacked.cols, stacked.parts.len()), (30, k, 1), "{name}");
        for t in [1, 5] {
            let x = ctx.upload_f32("x", &[t, k], &random_f32(200 + i as u64, t * k))?;
            let run = |w: &QWeight| -> anyhow::Result<Vec<f32>> {
                let out = ctx.zeros("out", &[t, w.rows], DType::F32)?;
                let d = pollster::block_on(qmatmul::matmul(ctx, w, &x, &out, Precision::F32, Precision::F32))?;
                ctx.run(&[&d]);
                Ok(pollster::block_on(ctx.read_f32(&out))?)
            };
            let whole = run(&stacked)?;
            let parts: Vec<Vec<f32>> = ws.iter().map(run).collect::<Result<_, _>>()?;
            for tok in 0..t {
                let mut want = Vec::new();
                for (p, &n) in parts.iter().zip(&rows) {
                    want.extend_from_slice(&p[tok * n..(tok + 1) * n]);
                }
                assert_eq!(bits(&whole[tok * 30..(tok + 1) * 30]), bits(&want), "{name} t={t} token {tok}");
            }
        }
        println!("{name}: stacked [30, {k}] equal to its parts");
    }
    // Different formats or K stay apart.
    let a = qmatmul::test_weight(WeightFormat::parse("Q8_0").expect("Q8_0"), 1, 4, 64)?.upload(ctx, "a")?;
    let b = qmatmul::test_weight(WeightFormat::parse("Q4_0").expect("Q4_0"), 2, 4, 64)?.upload(ctx, "b")?;
    let c = qmatmul::test_weight(WeightFormat::parse("Q8_0").expect("Q8_0"), 3, 4, 96)?.upload(ctx, "c")?;
    assert!(QWeight::stack(ctx, "ab", &[&a, &b])?.is_none());
    assert!(QWeight::stack(ctx, "ac", &[&a, &c])?.is_none());
    Ok(())
}

/// RoPE + KV store reading the stacked [t, heads + 2 kv_heads, head_dim] writes the same cache
/// rows and rotated queries as the form with separate q, k and v.
#[test]
fn rope_store_from_stacked_qkv_equals_separate() -> anyhow::Result<()> {
    let ctx = ctx();
    let (n_heads, n_kv_heads, head_dim, max_seq) = (6, 2, 64, 40);
    for (s, (style, kv, n_tokens, pos)) in [
        (RopeStyle::Norm, KvFormat::F32, 1, 7),
        (RopeStyle::Neox, KvFormat::F32, 5, 3),
        (RopeStyle::Norm, KvFormat::F16, 3, 0),
        (RopeStyle::Neox, KvFormat::Q8, 2, 30),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 300 + 10 * s as u64;
        let rs = RopeShape { n_tokens, n_heads, n_kv_heads, head_dim, max_seq, rot_dims: head_dim, style, kv, sinks: 0 };
        let per = (n_heads + 2 * n_kv_heads) * head_dim;
        let qkv = random_f32(seed, n_tokens * per);
        let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for row in qkv.chunks(per) {
            q.extend_from_slice(&row[..n_heads * head_dim]);
            k.extend_from_slice(&row[n_heads * head_dim..(n_heads + n_kv_heads) * head_dim]);
            v.extend_from_slice(&row[(n_heads + n_kv_heads) * head_dim..]);
        }
        let table = ctx.upload_f32("rope", &[max_seq, head_dim / 2, 2], &rope_table(max_seq, head_dim, 10000.0, &RopeScaling::None))?;
        let step = ctx.uniform_block("step", 16);
        ctx.write_uniform(&step, &step_bytes(pos as u32, n_tokens as u32));
        let cache = [n_kv_heads, max_seq, kv.row_words(head_dim)];
        let caches = || -> anyhow::Result<_> {
            let fill = random_f32(seed + 1, n_kv_heads * max_seq * head_dim);
            Ok(match kv {
                KvFormat::F32 => (ctx.upload_f32("kc", &cache, &fill)?, ctx.upload_f32("vc", &cache, &fill)?),
                _ => {
                    let words = kv.encode_cache(&fill, head_dim);
                    (ctx.upload_u32("kc", &cache, &words)?, ctx.upload_u32("vc", &cache, &words)?)
                }
            })
        };
        let ((kc1, vc1), (kc2, vc2)) = (caches()?, caches()?);
        let read = |t: &weft::gpu::GpuTensor| -> anyhow::Result<Vec<u32>> {
            Ok(match t.dtype {
                DType::F32 => bits(&pollster::block_on(ctx.read_f32(t))?),
                DType::U32 => pollster::block_on(ctx.read_u32(t))?,
            })
        };

        let tq = ctx.upload_f32("q", &[n_tokens, n_heads, head_dim], &q)?;
        let tk = ctx.upload_f32("k", &[n_tokens, n_kv_heads, head_dim], &k)?;
        let tv = ctx.upload_f32("v", &[n_tokens, n_kv_heads, head_dim], &v)?;
        let apart = pollster::block_on(rope_store(ctx, rs, &tq, &tk, &tv, &kc1, &vc1, &table, &step))?;
        let tqkv = ctx.upload_f32("qkv", &[n_tokens, n_heads + 2 * n_kv_heads, head_dim], &qkv)?;
        let q_out = ctx.zeros("q out", &[n_tokens, n_heads, head_dim], DType::F32)?;
        let stacked = pollster::block_on(rope_store_qkv(ctx, rs, &tqkv, &q_out, &kc2, &vc2, &table, &step))?;
        ctx.run(&[&apart, &stacked]);
        let what = format!("{style:?} {kv} T={n_tokens} pos={pos}");
        assert_eq!(read(&q_out)?, read(&tq)?, "{what}: q");
        assert_eq!(read(&kc2)?, read(&kc1)?, "{what}: k cache");
        assert_eq!(read(&vc2)?, read(&vc1)?, "{what}: v cache");
        // And the queries really were rotated (not copied through).
        assert_ne!(bits(&pollster::block_on(ctx.read_f32(&q_out))?), bits(&q), "{what}");
    }
    Ok(())
}

/// The decode step's GEMV with the RMSNorm folded in front (every workgroup normalises x
/// itself) against the CPU's norm then product, and with the residual add folded behind it
/// against the GEMV's own result added to y: on the adapter's launch shape and on the GPU shape
/// (32 lanes a row).
#[test]
fn gemv_with_norm_prologue_and_residual_epilogue() -> anyhow::Result<()> {
    use weft::ops::norm::rms_norm_cpu;
    use weft::ops::qmatmul::{gemv_fused, GemvFusion};
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let caps = ctx.capabilities().clone();
    for gpu_shape in [false, true] {
        let mut c = caps.clone();
        c.is_software = caps.is_software && !gpu_shape;
        ctx.set_capabilities(c);
        let ctx = &ctx;
        for (i, name) in ["Q4_1", "Q8_0", "Q4_0", "Q6_K", "q4_g32_sym", "q4_g32_asym", "q8_g64_asym", "Q4_K_R", "Q5_K_R", "Q6_K_R", "Q4_1_R", "Q5_0_R", "Q5_1_R"].into_iter().enumerate() {
            let format = WeightFormat::parse(name).expect("known format");
            let (n, k) = match format.k_multiple() {
                1 => (37, 100), // a weft row ending inside its last group
                32 => (37, 576),
                _ => (37, 512),
            };
            let tw = qmatmul::test_weight(format, 500 + i as u64, n, k)?;
            let w = tw.upload(ctx, "w")?;
            assert!(qmatmul::gemv_fuses(&w), "{name}");
            let x: Vec<f32> = random_f32(510 + i as u64, k).iter().map(|v| v * 4.0).collect();
            let g: Vec<f32> = random_f32(520 + i as u64, k).iter().map(|v| 1.0 + 0.5 * v).collect();
            let (tx, tg) = (ctx.upload_f32("x", &[1, k], &x)?, ctx.upload_f32("g", &[k], &g)?);
            let eps = 1e-5;

            let y = ctx.zeros("y", &[1, n], DType::F32)?;
            let d = pollster::block_on(gemv_fused(ctx, &w, &tx, &y, GemvFusion { norm: Some((&tg, eps)), ..Default::default() }))?;
            ctx.run(&[&d]);
            let got = pollster::block_on(ctx.read_f32(&y))?;
            let normed: Vec<f32> = rms_norm_cpu(&x, &g, eps).iter().map(|&v| v as f32).collect();
            let (want, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &normed, n, k, 1);
            let worst = got.iter().zip(&want).zip(&scale).map(|((&a, &b), &s)| (a as f64 - b).abs() / s).fold(0.0, f64::max);
            // The product's tolerance plus the norm's relative error carried through it.
            let tol = qmatmul::f32_tolerance(k) + RMSNORM_TOLERANCE.rel;
            assert!(worst <= tol, "{name} gpu shape {gpu_shape}: norm + gemv {worst:e} > {tol:e}");

            let base = random_f32(530 + i as u64, n);
            let plain = ctx.zeros("plain", &[1, n], DType::F32)?;
            let d = pollster::block_on(qmatmul::gemv(ctx, &w, &tx, &plain, Precision::F32))?;
            let acc = ctx.upload_f32("acc", &[1, n], &base)?;
            let r = pollster::block_on(gemv_fused(ctx, &w, &tx, &acc, GemvFusion { residual: true, ..Default::default() }))?;
            ctx.run(&[&d, &r]);
            let product = pollster::block_on(ctx.read_f32(&plain))?;
            let sum: Vec<f32> = base.iter().zip(&product).map(|(a, b)| a + b).collect();
            assert_eq!(bits(&pollster::block_on(ctx.read_f32(&acc))?), bits(&sum), "{name} gpu shape {gpu_shape}: residual");
        }
    }
    // Formats without a block kernel, and more than one token, are refused.
    let f16 = qmatmul::test_weight(WeightFormat::parse("F16").expect("F16"), 1, 4, 64)?.upload(&ctx, "f16")?;
    let x1 = ctx.zeros("x", &[1, 64], DType::F32)?;
    let y1 = ctx.zeros("y", &[1, 4], DType::F32)?;
    assert!(pollster::block_on(gemv_fused(&ctx, &f16, &x1, &y1, GemvFusion::default())).is_err());
    let q = qmatmul::test_weight(WeightFormat::parse("Q8_0").expect("Q8_0"), 2, 4, 64)?.upload(&ctx, "q")?;
    let x2 = ctx.zeros("x", &[2, 64], DType::F32)?;
    let y2 = ctx.zeros("y", &[2, 4], DType::F32)?;
    assert!(pollster::block_on(gemv_fused(&ctx, &q, &x2, &y2, GemvFusion::default())).is_err());
    Ok(())
}

/// Products of different formats kept apart write into the columns of one buffer the stacked
/// product would fill (`GemvFusion::at`): each column range has the bits of that product into a
/// buffer of its own, with the norm folded in or not, on the block kernel's launch shape and the
/// GPU kernel's; a range past the buffer's end is refused.
#[test]
fn gemv_products_into_columns_of_one_buffer_equal_their_own() -> anyhow::Result<()> {
    use weft::ops::qmatmul::{gemv_fused, GemvFusion};
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let caps = ctx.capabilities().clone();
    let k = 512;
    let x = random_f32(710, k);
    let g: Vec<f32> = random_f32(711, k).iter().map(|v| 1.0 + 0.5 * v).collect();
    for gpu_shape in [false, true] {
        let mut c = caps.clone();
        c.is_software = caps.is_software && !gpu_shape;
        ctx.set_capabilities(c);
        let ctx = &ctx;
        let (tx, tg) = (ctx.upload_f32("x", &[1, k], &x)?, ctx.upload_f32("g", &[k], &g)?);
        // Q/K/V of a Q4_K_M layer (V in Q6_K), and of 32-weight block formats.
        for (i, names) in [["Q4_K_R", "Q4_K_R", "Q6_K_R"], ["Q8_0", "q4_g32_sym", "Q4_1"]].into_iter().enumerate() {
            let rows = [48, 16, 16];
            let ws = names
                .iter()
                .zip(rows)
                .enumerate()
                .map(|(j, (name, n))| qmatmul::test_weight(WeightFormat::parse(name).expect("known format"), 720 + (3 * i + j) as u64, n, k)?.upload(ctx, name))
                .collect::<anyhow::Result<Vec<_>, _>>()?;
            let total: usize = rows.iter().sum();
            for norm in [None, Some((&tg, 1e-5))] {
                let fusion = GemvFusion { norm, ..Default::default() };
                let sentinel = vec![-7.0f32; total];
                let all = ctx.upload_f32("qkv", &[1, total], &sentinel)?;
                let mut ds = Vec::new();
                let mut own = Vec::new();
                let mut at = 0;
                for (w, n) in ws.iter().zip(rows) {
                    ds.push(pollster::block_on(gemv_fused(ctx, w, &tx, &all, GemvFusion { at: Some(at), ..fusion }))?);
                    let y = ctx.zeros("y", &[1, n], DType::F32)?;
                    ds.push(pollster::block_on(gemv_fused(ctx, w, &tx, &y, fusion))?);
                    own.push(y);
                    at += n;
                }
                ctx.run(&ds.iter().collect::<Vec<_>>());
                let mut want = Vec::new();
                for y in &own {
                    want.extend(pollster::block_on(ctx.read_f32(y))?);
                }
                assert_eq!(bits(&pollster::block_on(ctx.read_f32(&all))?), bits(&want), "{names:?} gpu shape {gpu_shape} norm {}", norm.is_some());
            }
            let short = ctx.zeros("short", &[1, total - 1], DType::F32)?;
            let last = GemvFusion { at: Some(total - rows[2]), ..Default::default() };
            assert!(pollster::block_on(gemv_fused(ctx, &ws[2], &tx, &short, last)).is_err(), "{names:?}: columns past the end");
        }
    }
    Ok(())
}

/// The down projection's GEMV taking the SwiGLU of the stacked gate/up product while it stages
/// it gives the bits of the SwiGLU dispatch followed by the residual GEMV, on the GPU kernel's
/// launch shapes; the block kernel and mismatched shapes are refused.
#[test]
fn gemv_with_swiglu_staging_equals_swiglu_then_gemv() -> anyhow::Result<()> {
    use weft::ops::qmatmul::{gemv_fused_tuned, GemvConfig, GemvFusion};
    let ctx = ctx();
    let configs = [GemvConfig { wg: 256, rows: 2, lanes: 32 }, GemvConfig { wg: 64, rows: 1, lanes: 16 }, GemvConfig { wg: 128, rows: 4, lanes: 8 }];
    for (i, name) in ["q4_g32_sym", "q4_g32_asym", "q8_g32_sym", "q3_g32_asym", "q2_g32_asym", "Q4_K_R", "Q6_K_R", "Q4_1_R", "Q5_0_R"].into_iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        // k: the FFN width of SmolLM2 (48 chunks: a partial last tile) and a short one.
        for (n, k) in [(37, 1536), (64, 96)].into_iter().filter(|&(_, k)| k % format.k_multiple() == 0) {
            let tw = qmatmul::test_weight(format, 600 + i as u64, n, k)?;
            let w = tw.upload(ctx, "down")?;
            // The decode step stages the SwiGLU where its GEMV is the GPU kernel: on GPUs, and
            // for repacked K-quants (whose only GEMV it is) on every adapter.
            let repacked = matches!(format, WeightFormat::Repacked(_));
            assert_eq!(qmatmul::gemv_glu(ctx, &w), repacked || !ctx.capabilities().is_software, "{name}");
            let gu: Vec<f32> = random_f32(610 + i as u64, 2 * k).iter().map(|v| v * 6.0).collect();
            let base = random_f32(620 + i as u64, n);
            let tgu = ctx.upload_f32("gate_up", &[1, 2 * k], &gu)?;
            let act = ctx.zeros("act", &[1, k], DType::F32)?;
            for config in configs {
                let (want, got) = (ctx.upload_f32("want", &[1, n], &base)?, ctx.upload_f32("got", &[1, n], &base)?);
                let s = pollster::block_on(silu_mul_pairs(ctx, &tgu, &act))?;
                let r = pollster::block_on(gemv_fused_tuned(ctx, &w, &act, &want, GemvFusion { residual: true, ..Default::default() }, config))?;
                let glu = GemvFusion { residual: true, glu: true, ..Default::default() };
                let f = pollster::block_on(gemv_fused_tuned(ctx, &w, &tgu, &got, glu, config))?;
                ctx.run(&[&s, &r, &f]);
                let want = pollster::block_on(ctx.read_f32(&want))?;
                assert_eq!(bits(&pollster::block_on(ctx.read_f32(&got))?), bits(&want), "{name} [{n}, {k}] {config:?}");
                // And against the CPU: SwiGLU then the reference product, added to the base.
                let swiglu: Vec<f32> = silu_mul_cpu(&gu[..k], &gu[k..]).iter().map(|&v| v as f32).collect();
                let (product, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &swiglu, n, k, 1);
                let worst = want.iter().zip(&base).zip(product.iter().zip(&scale)).map(|((&y, &b), (&p, &s))| (y as f64 - b as f64 - p).abs() / s).fold(0.0, f64::max);
                assert!(worst <= qmatmul::f32_tolerance(k) + SILU_MUL_TOLERANCE.rel, "{name} [{n}, {k}]: {worst:e}");
            }
        }
    }
    let w = qmatmul::test_weight(WeightFormat::parse("q4_g32_sym").expect("q4"), 1, 8, 64)?.upload(ctx, "w")?;
    let y = ctx.zeros("y", &[1, 8], DType::F32)?;
    let glu = GemvFusion { residual: true, glu: true, ..Default::default() };
    let gpu = GemvConfig { wg: 64, rows: 1, lanes: 16 };
    let short = ctx.zeros("gu", &[1, 64], DType::F32)?;
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &w, &short, &y, glu, gpu)).is_err(), "gate/up must be [1, 2k]");
    let gu = ctx.zeros("gu", &[1, 128], DType::F32)?;
    let blocks = GemvConfig { wg: 64, rows: 1, lanes: 1 };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &w, &gu, &y, glu, blocks)).is_err(), "the block kernel has no SwiGLU staging");
    Ok(())
}

/// The stacked gate/up GEMV with the SwiGLU as its epilogue (a lane group holds a gate row and
/// its up row) gives the bits of the stacked product followed by the pairwise SwiGLU dispatch,
/// with and without the norm folded in and with 8-bit activations, on GPU launch shapes (one
/// row a lane group is taken as two); odd rows, other epilogues and the block kernel are refused.
#[test]
fn gemv_with_swiglu_epilogue_equals_gemv_then_swiglu() -> anyhow::Result<()> {
    use weft::ops::qmatmul::{gemv_fused_tuned, gemv_int8, gemv_swiglu, GemvConfig, GemvFusion};
    let ctx = &gpu_context::gpu_kernel_ctx()?;
    let configs = [GemvConfig { wg: 256, rows: 2, lanes: 32 }, GemvConfig { wg: 64, rows: 1, lanes: 16 }, GemvConfig { wg: 128, rows: 4, lanes: 8 }];
    for (i, name) in ["q4_g32_asym", "q8_g32_sym", "q3_g32_asym", "Q4_K_R", "Q6_K_R", "Q5_0_R"].into_iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        // h gate rows over h up rows: SmolLM2's widths (a partial last lane group) and a short one.
        for (h, k) in [(37, 576), (64, 256)].into_iter().filter(|&(_, k)| k % format.k_multiple() == 0) {
            let tw = qmatmul::test_weight(format, 800 + i as u64, 2 * h, k)?;
            let w = tw.upload(ctx, "gate_up")?;
            assert!(gemv_swiglu(ctx, &w), "{name}");
            let x: Vec<f32> = random_f32(810 + i as u64, k).iter().map(|v| v * 3.0).collect();
            let g: Vec<f32> = random_f32(820 + i as u64, k).iter().map(|v| 1.0 + 0.5 * v).collect();
            let (tx, tg) = (ctx.upload_f32("x", &[1, k], &x)?, ctx.upload_f32("g", &[k], &g)?);
            // Plain, the norm folded in, and with 8-bit activations (normed, as in the step).
            let mut cases = vec![(false, None), (false, Some((&tg, 1e-5)))];
            if gemv_int8(ctx, &w) {
                cases.push((true, Some((&tg, 1e-5))));
            }
            for (int8, norm) in cases {
                for config in configs {
                    let fusion = GemvFusion { norm, int8, ..Default::default() };
                    let gu = ctx.zeros("gu", &[1, 2 * h], DType::F32)?;
                    let (want, got) = (ctx.zeros("want", &[1, h], DType::F32)?, ctx.upload_f32("got", &[1, h], &vec![-7.0; h])?);
                    let p = pollster::block_on(gemv_fused_tuned(ctx, &w, &tx, &gu, fusion, config))?;
                    let s = pollster::block_on(silu_mul_pairs(ctx, &gu, &want))?;
                    let f = pollster::block_on(gemv_fused_tuned(ctx, &w, &tx, &got, GemvFusion { swiglu: true, ..fusion }, config))?;
                    ctx.run(&[&p, &s, &f]);
                    let want = pollster::block_on(ctx.read_f32(&want))?;
                    let label = format!("{name} [{}, {k}] {config:?} norm {} int8 {int8}", 2 * h, norm.is_some());
                    assert_eq!(bits(&pollster::block_on(ctx.read_f32(&got))?), bits(&want), "{label}");
                    // The stacked product the SwiGLU reads, against the CPU.
                    if !int8 && norm.is_none() {
                        let gu = pollster::block_on(ctx.read_f32(&gu))?;
                        let (product, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &x, 2 * h, k, 1);
                        let worst = gu.iter().zip(&product).zip(&scale).map(|((&a, &b), &s)| (a as f64 - b).abs() / s).fold(0.0, f64::max);
                        assert!(worst <= qmatmul::f32_tolerance(k), "{label}: {worst:e}");
                    }
                }
            }
        }
    }
    let q4 = WeightFormat::parse("q4_g32_sym").expect("q4");
    let gpu = GemvConfig { wg: 64, rows: 2, lanes: 16 };
    let x = ctx.zeros("x", &[1, 64], DType::F32)?;
    let odd = qmatmul::test_weight(q4, 1, 9, 64)?.upload(ctx, "odd")?;
    let y = ctx.zeros("y", &[1, 4], DType::F32)?;
    let swiglu = GemvFusion { swiglu: true, ..Default::default() };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &odd, &x, &y, swiglu, gpu)).is_err(), "an odd number of rows");
    let w = qmatmul::test_weight(q4, 2, 8, 64)?.upload(ctx, "w")?;
    let residual = GemvFusion { residual: true, ..swiglu };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &w, &x, &y, residual, gpu)).is_err(), "with a residual epilogue");
    let wide = ctx.zeros("wide", &[1, 8], DType::F32)?;
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &w, &x, &wide, swiglu, gpu)).is_err(), "y of 2h columns");
    let blocks = GemvConfig { wg: 64, rows: 1, lanes: 1 };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &w, &x, &y, swiglu, blocks)).is_err(), "the block kernel has no SwiGLU epilogue");
    Ok(())
}

/// Decode attention that rotates the query and the new key itself, stores the new K/V row and
/// merges its chunks in the last workgroup of each head, against RoPE + KV store, split
/// attention and the combine dispatch: the same cache bits, the same output within the
/// attention tolerance (and the same bits on a second run), the arrival counters back at zero.
/// Partial rotation, both pair layouts, GQA, a context over several chunks, a ring past max_seq
/// with sinks, a window and soft-capping; with the adapter's subgroups (the softmax statistics
/// by subgroup operations) where it has them, and without.
#[test]
fn attention_with_rope_folded_in_equals_rope_store_then_split_attention() -> anyhow::Result<()> {
    let mut own = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let base = own.capabilities().clone();
    let mut settings = vec![base.clone().without_subgroups()];
    if base.subgroups {
        settings.insert(0, base.clone());
    }
    for caps in settings {
        own.set_capabilities(caps);
        attention_rope_cases(&own)?;
    }
    Ok(())
}

fn attention_rope_cases(ctx: &GpuContext) -> anyhow::Result<()> {
    let sg = ctx.capabilities().subgroups;
    let none = AttentionMask::default();
    for ((case, (style, n_heads, n_kv_heads, head_dim, rot_dims, max_seq, sinks, pos, mask)), kv) in [
        (RopeStyle::Norm, 6, 2, 64, 64, 200, 0, 130, none),
        (RopeStyle::Neox, 4, 4, 64, 32, 128, 0, 5, none),
        (RopeStyle::Neox, 8, 2, 128, 128, 128, 4, 300, none),
        (RopeStyle::Norm, 4, 1, 32, 32, 256, 0, 190, AttentionMask { window: Some(70), softcap: Some(20.0) }),
        // Contexts over several chunks of every workgroup size, and a grid mostly past the context.
        (RopeStyle::Norm, 6, 2, 64, 64, 700, 0, 600, none),
        (RopeStyle::Neox, 8, 2, 128, 64, 1024, 0, 300, AttentionMask { window: Some(200), softcap: None }),
        (RopeStyle::Neox, 2, 1, 256, 256, 600, 2, 900, none),
    ]
    .into_iter()
    .enumerate()
    // Every cache format.
    .flat_map(|c| KvFormat::ALL.map(|kv| (c, kv)))
    {
        let seed = 900 + 10 * case as u64;
        let rs = RopeShape { n_tokens: 1, n_heads, n_kv_heads, head_dim, max_seq, rot_dims, style, kv, sinks };
        let s = AttentionShape { n_tokens: 1, n_heads, n_kv_heads, head_dim, max_seq, kv };
        let qkv = random_f32(seed, (n_heads + 2 * n_kv_heads) * head_dim);
        let tqkv = ctx.upload_f32("qkv", &[1, n_heads + 2 * n_kv_heads, head_dim], &qkv)?;
        let table = ctx.upload_f32("rope", &[max_seq, rot_dims / 2, 2], &rope_table(max_seq, rot_dims, 10000.0, &RopeScaling::None))?;
        let step = ctx.uniform_block("step", 16);
        ctx.write_uniform(&step, &step_bytes(pos as u32, 1));
        let cache = [n_kv_heads, max_seq, kv.row_words(head_dim)];
        let fill = kv.encode_cache(&random_f32(seed + 1, n_kv_heads * max_seq * head_dim), head_dim);
        let fill_v = kv.encode_cache(&random_f32(seed + 2, n_kv_heads * max_seq * head_dim), head_dim);
        // The caches as their format stores them (f32 values, or f16 pairs / q8 rows in u32 words).
        let upload = |name: &str, words: &[u32]| -> anyhow::Result<GpuTensor> {
            let mut t = ctx.upload_u32(name, &cache, words)?;
            t.dtype = kv.dtype();
            Ok(t)
        };
        let cache_bits = |t: &GpuTensor| -> anyhow::Result<Vec<u32>> {
            Ok(match kv {
                KvFormat::F32 => bits(&pollster::block_on(ctx.read_f32(t))?),
                _ => pollster::block_on(ctx.read_u32(t))?,
            })
        };
        let heads = [1, n_heads, head_dim];
        let scale = 1.0 / (head_dim as f32).sqrt();

        // Unfused: rotate and store, attend in chunks, combine.
        let (kc1, vc1) = (upload("kc", &fill)?, upload("vc", &fill_v)?);
        let q = ctx.zeros("q", &heads, DType::F32)?;
        let partials1 = ctx.zeros("partials", &partials_shape(&s, SPLIT_CHUNK), DType::F32)?;
        let out1 = ctx.zeros("out", &heads, DType::F32)?;
        let store = pollster::block_on(rope_store_qkv(ctx, rs, &tqkv, &q, &kc1, &vc1, &table, &step))?;
        let [split, combine] =
            pollster::block_on(attention_split_masked(ctx, s, mask, &q, &kc1, &vc1, &partials1, &out1, scale, &step, SPLIT_CHUNK))?;
        ctx.run(&[&store, &split, &combine]);

        // Fused, twice: the counters must be ready for the next step.
        let (kc2, vc2) = (upload("kc", &fill)?, upload("vc", &fill_v)?);
        let partials2 = ctx.zeros("partials", &partials_shape(&s, SPLIT_CHUNK), DType::F32)?;
        let arrivals = ctx.zeros("arrivals", &[n_heads], DType::U32)?;
        let want: Vec<f64> = pollster::block_on(ctx.read_f32(&out1))?.iter().map(|&w| w as f64).collect();
        // Every chunk size with the f32 cache; one each for the others, since a variant takes
        // lavapipe most of a minute to compile and the format's loads and stores are the same
        // code at every chunk size.
        let chunks: &[usize] = match kv {
            KvFormat::F32 => &DECODE_CHUNKS,
            KvFormat::F16 => &DECODE_CHUNKS[1..2],
            KvFormat::Q8 => &DECODE_CHUNKS[..1],
        };
        for &chunk in chunks {
            let out2 = ctx.zeros("out", &heads, DType::F32)?;
            let fused = pollster::block_on(attention_rope_split(
                ctx,
                rs,
                mask,
                &tqkv,
                [&kc2, &vc2],
                &table,
                [&partials2, &arrivals],
                &out2,
                scale,
                &step,
                chunk,
            ))?;
            let what = format!("case {case}: {style:?} {kv} cache, heads {n_heads}/{n_kv_heads} dim {head_dim} rot {rot_dims} pos {pos}, chunks of {chunk}, subgroups {sg}");
            assert_eq!(fused.name().contains("SG=1"), sg, "{what}: {}", fused.name());
            let mut first: Option<Vec<u32>> = None;
            for run in 0..2 {
                ctx.run(&[&fused]);
                assert_eq!(cache_bits(&kc2)?, cache_bits(&kc1)?, "{what}: k cache");
                assert_eq!(cache_bits(&vc2)?, cache_bits(&vc1)?, "{what}: v cache");
                assert_eq!(pollster::block_on(ctx.read_u32(&arrivals))?, vec![0; n_heads], "{what}: arrivals after run {run}");
                let got = pollster::block_on(ctx.read_f32(&out2))?;
                let dev = ATTENTION_TOLERANCE.compare(&got, &want);
                assert!(dev.within, "{what}, run {run}: {dev:?}");
                // The same bits on every run: the sums' order does not depend on scheduling.
                match &first {
                    Some(f) => assert_eq!(&bits(&got), f, "{what}: run {run} differs from run 0"),
                    None => first = Some(bits(&got)),
                }
            }
        }
    }
    Ok(())
}
