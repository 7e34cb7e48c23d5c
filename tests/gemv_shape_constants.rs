//! The decode step's GEMVs compile their weight's shape into the pipeline
//! (`GemvFusion::constant_shape`, `SHAPE` in shaders/qgemv_gpu.wgsl) instead of reading it from
//! a uniform: the same kernel over the same numbers, with every fusion the decode step takes
//! (the engine's step and its greedy ids: tests/kv_cache.rs). lavapipe compiles both alike
//! (the same bits); a driver may contract multiply-adds differently in the two compilations
//! (on an H200, the SwiGLU epilogue writing records: 16-32 of its 64 outputs by up to 247
//! units in the last place, in five formats; the other 149 of 154 cases the same bits), so each
//! output is held to the f32 kernels' rounding of the other.

use weft::gpu::{DType, GpuContext, GpuTensor};
use weft::ops::qmatmul::records::{records_shape, RecordOrder, RECORD_SWIGLU_CANDIDATES};
use weft::ops::qmatmul::{self, f32_tolerance, gemv_fused_tuned, GemvConfig, GemvFusion, QWeight, WeightFormat};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::gpu_kernel_ctx;

const CONFIGS: [GemvConfig; 2] = [GemvConfig { wg: 256, rows: 2, lanes: 32 }, GemvConfig { wg: 128, rows: 4, lanes: 8 }];

/// Runs `fusion` at `config` with the shape in a uniform and as constants, each into a fresh y
/// holding `start` (and fresh records where it writes them), checks which pipeline each ran, and
/// holds the outputs within 16 times the f32 kernels' bound of each other, relative to the
/// largest output; counts the cases (and those of equal bits) in `tally`.
fn agree(
    ctx: &GpuContext,
    tally: &mut (usize, usize),
    label: &str,
    (w, x): (&QWeight, &GpuTensor),
    start: &[f32],
    fusion: GemvFusion<'_>,
    config: GemvConfig,
) -> anyhow::Result<()> {
    let mut outs = Vec::new();
    for constant_shape in [false, true] {
        let y = ctx.upload_f32("y", &[1, start.len()], start)?;
        let rec = fusion.records_out.map(|(r, _)| ctx.zeros("records", &r.shape, DType::U32)).transpose()?;
        let fusion = GemvFusion { constant_shape, records_out: rec.as_ref().zip(fusion.records_out).map(|(r, (_, o))| (r, o)), ..fusion };
        let d = pollster::block_on(gemv_fused_tuned(ctx, w, x, &y, fusion, config))?;
        assert_eq!(d.name().contains("SHAPE=1"), constant_shape, "{label}: {}", d.name());
        ctx.run(&[&d]);
        outs.push(pollster::block_on(ctx.read_f32(&y))?);
    }
    let scale = outs[0].iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
    let tol = 16.0 * f32_tolerance(w.cols) * scale;
    for (i, (a, b)) in outs[0].iter().zip(&outs[1]).enumerate() {
        assert!((*a as f64 - *b as f64).abs() <= tol, "{label} output {i}: {a} with the uniform, {b} with constants (tolerance {tol:e})");
    }
    tally.1 += 1;
    if outs[0].iter().zip(&outs[1]).all(|(a, b)| a.to_bits() == b.to_bits()) {
        tally.0 += 1;
    }
    Ok(())
}

#[test]
fn shapes_as_constants_give_the_uniforms_products() -> anyhow::Result<()> {
    let ctx = &gpu_kernel_ctx()?;
    // 2h = 128 rows (gate and up halves of 64 for the SwiGLU epilogue and its records), K = 768
    // (whole K-quant super-blocks; a last tile part empty at 32 lanes a row).
    let (n, k) = (128, 768);
    let mut tally = (0, 0);
    for (i, name) in ["q4_g32_sym", "q4_g32_asym", "q3_g32_asym", "q8_g32_sym", "Q4_K_R", "Q5_0_R"].into_iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        let seed = 900 + 10 * i as u64;
        let w = qmatmul::test_weight(format, seed, n, k)?.upload(ctx, "w")?;
        let x = ctx.upload_f32("x", &[1, k], &random_f32(seed + 1, k))?;
        let gate_up = ctx.upload_f32("gate_up", &[1, 2 * k], &random_f32(seed + 2, 2 * k))?;
        let g: Vec<f32> = random_f32(seed + 3, k).iter().map(|v| 1.0 + 0.5 * v).collect();
        let g = ctx.upload_f32("g", &[k], &g)?;
        let base = random_f32(seed + 4, n + 16);
        for config in CONFIGS {
            for int8 in [false, true] {
                let label = format!("{name} {config:?} int8 {int8}");
                let f = GemvFusion { int8, ..Default::default() };
                agree(ctx, &mut tally, &format!("{label} plain"), (&w, &x), &base[..n], f, config)?;
                agree(ctx, &mut tally, &format!("{label} norm"), (&w, &x), &base[..n], GemvFusion { norm: Some((&g, 1e-5)), ..f }, config)?;
                agree(ctx, &mut tally, &format!("{label} residual"), (&w, &x), &base[..n], GemvFusion { residual: true, ..f }, config)?;
                let glu = GemvFusion { residual: true, glu: true, ..f };
                agree(ctx, &mut tally, &format!("{label} glu"), (&w, &gate_up), &base[..n], glu, config)?;
                // Columns 9 .. 9 + n of a wider y.
                agree(ctx, &mut tally, &format!("{label} at"), (&w, &x), &base, GemvFusion { at: Some(9), ..f }, config)?;
                if config.rows >= 2 {
                    let swiglu = GemvFusion { swiglu: true, norm: Some((&g, 1e-5)), ..f };
                    agree(ctx, &mut tally, &format!("{label} swiglu"), (&w, &x), &base[..n / 2], swiglu, config)?;
                }
            }
        }
        // The SwiGLU epilogue writing records, and a GEMV reading them (64 columns: not for the
        // K-quants' super-blocks of 256).
        if name.starts_with("Q4_K") {
            continue;
        }
        let rec = ctx.zeros("records", &records_shape(1, n / 2), DType::U32)?;
        let order = RecordOrder::of(&w.format).expect("a DP4 order");
        let out = GemvFusion { swiglu: true, int8: true, records_out: Some((&rec, order)), ..Default::default() };
        agree(ctx, &mut tally, &format!("{name} records out"), (&w, &x), &base[..n / 2], out, RECORD_SWIGLU_CANDIDATES[0])?;
        let down = qmatmul::test_weight(format, seed + 5, 96, n / 2)?.upload(ctx, "down")?;
        let act = ctx.zeros("act", &[1, n / 2], DType::F32)?;
        let d = pollster::block_on(gemv_fused_tuned(ctx, &w, &x, &act, out, RECORD_SWIGLU_CANDIDATES[0]))?;
        ctx.run(&[&d]);
        let read = GemvFusion { int8: true, records_in: true, residual: true, ..Default::default() };
        agree(ctx, &mut tally, &format!("{name} records in"), (&down, &rec), &base[..96], read, CONFIGS[0])?;
    }
    println!("{} of {} cases gave the same bits", tally.0, tally.1);
    Ok(())
}
