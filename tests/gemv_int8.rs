//! The GPU GEMV with 8-bit activations (shaders/gemv_dp4.wgsl) against its CPU reference: the
//! exact weights times the activations quantized as the kernel quantizes them, for weft weights
//! of 2, 3, 4 and 8 bits and the repacked planes of Q4_1, Q5_0, Q5_1 and the K-quants, plain
//! and with the decode step's fusions (RMSNorm prologue, SwiGLU staging, residual epilogue), on
//! the GPU kernel's launch shapes.

use weft::gpu::DType;
use weft::ops::elementwise::silu_mul_cpu;
use weft::ops::norm::rms_norm_cpu;
use weft::ops::qmatmul::{
    self, gemv_fused_tuned, int8_activations, int8_tolerance, GemvConfig, GemvFusion, WeightFormat, GEMV_CANDIDATES,
};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::ctx;

const CONFIGS: [GemvConfig; 3] =
    [GemvConfig { wg: 256, rows: 2, lanes: 32 }, GemvConfig { wg: 64, rows: 1, lanes: 16 }, GemvConfig { wg: 128, rows: 4, lanes: 8 }];

/// Checks y (minus `base`) against W · (factor · int8(staged)) row by row.
fn check(label: &str, w: &[f32], y: &[f32], base: &[f32], staged: &[f32], factor: f64, (n, k): (usize, usize)) {
    let (values, scales) = int8_activations(staged);
    let x: Vec<f32> = values.iter().map(|&v| (v as f64 * factor) as f32).collect();
    let (want, scale) = qmatmul::cpu_reference(w, &x, n, k, 1);
    let max_d = scales.iter().fold(0f32, |m, &d| m.max(d)) as f64 * factor;
    for r in 0..n {
        let max_w = w[r * k..(r + 1) * k].iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
        let err = (y[r] as f64 - base[r] as f64 - want[r]).abs() / scale[r];
        let tol = int8_tolerance(k, max_w, max_d, scale[r]);
        assert!(err <= tol, "{label} row {r}: {err:e} > {tol:e}");
    }
}

/// Every format of `names` on every shape of `shapes`, each at `configs`, plain and fused.
fn check_formats(names: &[&str], shapes: &[(usize, usize)], configs: &[GemvConfig]) -> anyhow::Result<()> {
    let ctx = ctx();
    for (i, &name) in names.iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        for &(n, k) in shapes {
            let seed = 700 + 10 * i as u64 + k as u64;
            let tw = qmatmul::test_weight(format, seed, n, k)?;
            let w = tw.upload(ctx, "w")?;
            let wf = tw.dequantize()?;
            let x: Vec<f32> = random_f32(seed + 1, 2 * k).iter().map(|v| v * 4.0).collect();
            let g: Vec<f32> = random_f32(seed + 2, k).iter().map(|v| 1.0 + 0.5 * v).collect();
            let base = random_f32(seed + 3, n);
            let zeros = vec![0f32; n];
            let tx = ctx.upload_f32("x", &[1, k], &x[..k])?;
            let tgu = ctx.upload_f32("gate_up", &[1, 2 * k], &x)?;
            let tg = ctx.upload_f32("g", &[k], &g)?;
            for &config in configs {
                let label = format!("{name} [{n}, {k}] {config:?}");
                let plain = ctx.zeros("y", &[1, n], DType::F32)?;
                let normed = ctx.zeros("y", &[1, n], DType::F32)?;
                let glu = ctx.upload_f32("acc", &[1, n], &base)?;
                let int8 = GemvFusion { int8: true, ..Default::default() };
                let eps = 1e-5;
                let d = [
                    pollster::block_on(gemv_fused_tuned(ctx, &w, &tx, &plain, int8, config))?,
                    pollster::block_on(gemv_fused_tuned(ctx, &w, &tx, &normed, GemvFusion { norm: Some((&tg, eps)), ..int8 }, config))?,
                    pollster::block_on(gemv_fused_tuned(ctx, &w, &tgu, &glu, GemvFusion { residual: true, glu: true, ..int8 }, config))?,
                ];
                ctx.run(&d.iter().collect::<Vec<_>>());
                check(&format!("{label} plain"), &wf, &pollster::block_on(ctx.read_f32(&plain))?, &zeros, &x[..k], 1.0, (n, k));
                // The kernel quantizes x · g and scales the sums by 1 / rms.
                let xg: Vec<f32> = x[..k].iter().zip(&g).map(|(a, b)| a * b).collect();
                let ms = x[..k].iter().map(|&v| v as f64 * v as f64).sum::<f64>() / k as f64;
                let inv_rms = 1.0 / (ms + eps as f64).sqrt();
                check(&format!("{label} norm"), &wf, &pollster::block_on(ctx.read_f32(&normed))?, &zeros, &xg, inv_rms, (n, k));
                let swiglu: Vec<f32> = silu_mul_cpu(&x[..k], &x[k..]).iter().map(|&v| v as f32).collect();
                check(&format!("{label} glu"), &wf, &pollster::block_on(ctx.read_f32(&glu))?, &base, &swiglu, 1.0, (n, k));
                // And near the f32 product: within what 8-bit activations cost.
                let (exact, scale) = qmatmul::cpu_reference(&wf, &rms_norm_cpu(&x[..k], &g, eps).iter().map(|&v| v as f32).collect::<Vec<_>>(), n, k, 1);
                let got = pollster::block_on(ctx.read_f32(&normed))?;
                let worst = got.iter().zip(&exact).zip(&scale).map(|((&a, &b), &s)| (a as f64 - b).abs() / s).fold(0.0, f64::max);
                assert!(worst < 2e-2, "{label}: {worst:e} from the f32 product");
            }
        }
    }
    Ok(())
}

#[test]
fn int8_activation_gemv_matches_its_reference() -> anyhow::Result<()> {
    check_formats(&["q4_g32_sym", "q4_g32_asym", "q8_g32_sym", "q8_g64_asym"], &[(37, 576), (64, 1536), (9, 64)], &CONFIGS)
}

#[test]
fn int8_activation_gemv_of_2_and_3_bits_matches_its_reference() -> anyhow::Result<()> {
    // Sixteen levels a word: the activations are staged in the order of the words' 2-bit fields,
    // q3's third bits spread above them.
    check_formats(&["q2_g32_asym", "q2_g64_sym", "q3_g32_asym", "q3_g128_sym"], &[(37, 576), (9, 256), (9, 4608)], &CONFIGS)
}

#[test]
fn int8_activation_gemv_of_the_planes_matches_its_reference() -> anyhow::Result<()> {
    // The planes' levels built into bytes from the nibbles and the high bits (K4, K5, K6), with
    // a super-block's or a 32-weight block's params; K = 768 and 576 leave the last tile of
    // 32-lane rows part empty.
    check_formats(&["Q4_K_R", "Q6_K_R", "Q5_K_R"], &[(37, 768), (9, 256)], &CONFIGS)?;
    check_formats(&["Q4_1_R", "Q5_0_R", "Q5_1_R"], &[(37, 576), (9, 64)], &CONFIGS)
}

#[test]
fn int8_activation_gemv_on_every_tuned_shape() -> anyhow::Result<()> {
    // The launch shapes tuning may choose (those the GPU kernel cannot run fall back to its
    // default), each with the fusions: the planes, and 2 and 3 bits, whose tuning times them
    // with 8-bit activations.
    check_formats(&["Q4_K_R", "Q6_K_R", "Q5_0_R"], &[(13, 512)], &GEMV_CANDIDATES)?;
    // Weft weights run the shapes the GPU kernel takes (tuning times no other with 8 bits).
    let gpu: Vec<GemvConfig> = GEMV_CANDIDATES.into_iter().filter(|c| c.rows <= 4).collect();
    check_formats(&["q3_g32_asym", "q2_g32_sym"], &[(13, 512)], &gpu)
}

#[test]
fn int8_activations_are_refused_where_there_is_no_dp4_path() -> anyhow::Result<()> {
    let ctx = ctx();
    // Weft weights and the planes are taken, GGUF types only where the upload repacked them
    // (hardware GPUs: Q4_0 and Q8_0 into weft's words, Q4_K into its planes); the block kernel
    // is refused.
    let int8 = GemvFusion { int8: true, ..Default::default() };
    let gpu = GemvConfig { wg: 64, rows: 1, lanes: 16 };
    let x = ctx.zeros("x", &[1, 64], DType::F32)?;
    let y = ctx.zeros("y", &[1, 8], DType::F32)?;
    for name in ["q2_g32_sym", "q3_g32_asym", "Q4_K", "Q4_0", "Q8_0"] {
        let w = qmatmul::test_weight(WeightFormat::parse(name).expect("format"), 1, 8, 256)?.upload(ctx, "w")?;
        let repacked = matches!(w.format, WeightFormat::Weft(_) | WeightFormat::Repacked(_));
        assert_eq!(repacked, name.starts_with('q') || !ctx.capabilities().is_software, "{name}");
        let x256 = ctx.zeros("x", &[1, 256], DType::F32)?;
        let taken = pollster::block_on(gemv_fused_tuned(ctx, &w, &x256, &y, int8, gpu)).is_ok();
        assert_eq!(taken, repacked, "{name}");
    }
    let w = qmatmul::test_weight(WeightFormat::parse("q4_g32_sym").expect("q4"), 1, 8, 64)?.upload(ctx, "w")?;
    let blocks = GemvConfig { wg: 64, rows: 1, lanes: 1 };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &w, &x, &y, int8, blocks)).is_err(), "the block kernel");
    Ok(())
}
