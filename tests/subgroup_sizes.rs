//! The GEMV kernels' subgroup paths (lanes sharing a row add their sums by subgroup shuffles,
//! shaders/gemv_rowsum.wgsl) at every subgroup size an adapter may have — 4 to 128 lanes: mobile
//! GPUs, Intel 8/16/32, Apple and NVIDIA 32, AMD 64 — and without subgroups. wgpu cannot ask an
//! adapter for a subgroup size, and each adapter here has one, so the sizes are emulated in
//! workgroup memory (`Capabilities::with_emulated_subgroups`): the same kernel logic runs at each
//! size. A shuffle that reaches outside its subgroup reads NaN there, so a kernel that counted on
//! more lanes than the size would fail, as it could on such an adapter.
//!
//! The butterfly of shuffles pairs the lanes' sums as the shared-memory tree does, so at every
//! size a kernel must give the bits of its no-subgroup run; that run is checked against the CPU
//! reference.

use weft::gpu::{BackendChoice, Capabilities, DType, GpuContext};
use weft::ops::norm::{rms_norm_cpu, RMSNORM_TOLERANCE};
use weft::ops::qmatmul::{self, gemv_fused_tuned, GemvConfig, GemvFusion, WeightFormat};
use weft::selftest::random_f32;

/// Subgroup sizes: 0 is none (the shared-memory sums).
const SIZES: [u32; 7] = [0, 4, 8, 16, 32, 64, 128];

/// What the subgroup paths run on: (format, launch shape, fusion) with 4 to 128 lanes a row.
/// The GPU kernel (shaders/qgemv_gpu.wgsl) takes weft weights at 1, 2 or 4 rows per lane group,
/// with the decode step's fusions; the block kernel (shaders/qgemv.wgsl) 8 rows, and the GGUF
/// types that are not repacked.
const CASES: [(&str, GemvConfig, Fusion); 20] = [
    ("q4_g32_sym", GemvConfig { wg: 64, rows: 2, lanes: 4 }, Fusion::None),
    ("q4_g32_sym", GemvConfig { wg: 64, rows: 1, lanes: 8 }, Fusion::None),
    ("q4_g32_sym", GemvConfig { wg: 128, rows: 4, lanes: 16 }, Fusion::None),
    ("q4_g32_sym", GemvConfig { wg: 256, rows: 2, lanes: 32 }, Fusion::None),
    ("q4_g32_sym", GemvConfig { wg: 256, rows: 1, lanes: 64 }, Fusion::None),
    ("q4_g32_sym", GemvConfig { wg: 128, rows: 2, lanes: 128 }, Fusion::None),
    ("q4_g32_sym", GemvConfig { wg: 256, rows: 4, lanes: 32 }, Fusion::Norm),
    ("q4_g32_sym", GemvConfig { wg: 64, rows: 2, lanes: 8 }, Fusion::Int8),
    ("q3_g32_asym", GemvConfig { wg: 128, rows: 2, lanes: 16 }, Fusion::None),
    ("q8_g32_sym", GemvConfig { wg: 64, rows: 4, lanes: 4 }, Fusion::Norm),
    ("q4_g32_sym", GemvConfig { wg: 128, rows: 8, lanes: 32 }, Fusion::None),
    ("Q4_K", GemvConfig { wg: 64, rows: 2, lanes: 4 }, Fusion::None),
    ("Q4_K", GemvConfig { wg: 256, rows: 1, lanes: 128 }, Fusion::Norm),
    ("Q4_K_R", GemvConfig { wg: 256, rows: 2, lanes: 32 }, Fusion::None),
    ("Q4_K_R", GemvConfig { wg: 128, rows: 4, lanes: 16 }, Fusion::Norm),
    ("Q5_K_R", GemvConfig { wg: 64, rows: 1, lanes: 8 }, Fusion::None),
    ("Q6_K_R", GemvConfig { wg: 256, rows: 4, lanes: 32 }, Fusion::Norm),
    ("Q4_1_R", GemvConfig { wg: 256, rows: 2, lanes: 32 }, Fusion::Norm),
    ("Q5_0_R", GemvConfig { wg: 128, rows: 4, lanes: 16 }, Fusion::None),
    ("Q5_1_R", GemvConfig { wg: 64, rows: 1, lanes: 8 }, Fusion::None),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fusion {
    None,
    /// The RMSNorm prologue (its own shared-memory sum beside the rows' sums).
    Norm,
    /// 8-bit activations and packed dot products.
    Int8,
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// `base` with subgroups of `size` lanes emulated, or without subgroups for 0.
fn with_size(base: &Capabilities, size: u32) -> Capabilities {
    match size {
        0 => base.clone().without_subgroups(),
        s => base.clone().with_emulated_subgroups(s),
    }
}

/// y = W · x, with `fusion` (the norm's weight `g`), at `config` on a one-token x: the kernel's
/// name and y.
fn run(ctx: &GpuContext, w: &qmatmul::QWeight, x: &[f32], g: &[f32], fusion: Fusion, config: GemvConfig) -> anyhow::Result<(String, Vec<f32>)> {
    let (n, k) = (w.rows, w.cols);
    let tx = ctx.upload_f32("x", &[1, k], x)?;
    let y = ctx.zeros("y", &[1, n], DType::F32)?;
    let tg = ctx.upload_f32("g", &[k], g)?;
    let fusion = match fusion {
        Fusion::None => GemvFusion::default(),
        Fusion::Norm => GemvFusion { norm: Some((&tg, 1e-5)), ..Default::default() },
        Fusion::Int8 => GemvFusion { int8: true, ..Default::default() },
    };
    let d = pollster::block_on(gemv_fused_tuned(ctx, w, &tx, &y, fusion, config))?;
    ctx.run(&[&d]);
    Ok((d.name().to_string(), pollster::block_on(ctx.read_f32(&y))?))
}

#[test]
fn gemv_subgroup_paths_at_every_size_equal_the_shared_memory_sums() -> anyhow::Result<()> {
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let base = ctx.capabilities().clone();
    for (i, &(name, config, fusion)) in CASES.iter().enumerate() {
        // 37 rows leave the last workgroup part empty; K of 320 is 10 chunks, a partial tile at
        // every lane count; Q4_K rows are 256-weight blocks.
        let format = WeightFormat::parse(name).expect("known format");
        let (n, k) = (37, if format.k_multiple() == 256 { 512 } else { 320 });
        let tw = qmatmul::test_weight(format, 700 + i as u64, n, k)?;
        let x: Vec<f32> = random_f32(710 + i as u64, k).iter().map(|v| v * 4.0).collect();
        let g: Vec<f32> = random_f32(720 + i as u64, k).iter().map(|v| 1.0 + 0.5 * v).collect();
        let what = format!("{name} [{n}, {k}] {config:?} {fusion:?}");
        let mut shared: Option<Vec<f32>> = None;
        for size in SIZES {
            ctx.set_capabilities(with_size(&base, size));
            let w = tw.upload(&ctx, "w")?;
            let (kernel, y) = run(&ctx, &w, &x, &g, fusion, config)?;
            // Shuffles exactly where the size holds a row's lanes, emulated at that size.
            let shuffles = size >= config.lanes;
            assert_eq!(kernel.contains(&format!("SG_EMU={size},")), shuffles, "{what} at {size}: {kernel}");
            assert_eq!(kernel.contains("SG"), shuffles, "{what} at {size}: {kernel}");
            match &shared {
                Some(want) => assert_eq!(bits(&y), bits(want), "{what} at subgroup size {size}"),
                None => {
                    // 8-bit activations have their own bound, checked in tests/gemv_int8.rs; the
                    // f32 kernels the product's, plus the norm's relative error carried through.
                    if fusion != Fusion::Int8 {
                        let input = match fusion {
                            Fusion::Norm => rms_norm_cpu(&x, &g, 1e-5).iter().map(|&v| v as f32).collect(),
                            _ => x.clone(),
                        };
                        let (want, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &input, n, k, 1);
                        let worst = y.iter().zip(&want).zip(&scale).map(|((&a, &b), &s)| (a as f64 - b).abs() / s).fold(0.0, f64::max);
                        let tol = qmatmul::f32_tolerance(k) + if fusion == Fusion::Norm { RMSNORM_TOLERANCE.rel } else { 0.0 };
                        assert!(worst <= tol, "{what} without subgroups: {worst:e} > {tol:e}");
                    }
                    assert!(y.iter().all(|v| v.is_finite()), "{what}");
                    shared = Some(y);
                }
            }
        }
    }
    Ok(())
}

/// The selection never takes the shuffles where the adapter's smallest subgroup is narrower than
/// a row's lanes, and the emulation shows why: forced at a smaller size than the lanes, the
/// shuffles reach outside the subgroup and the result is NaN.
#[test]
fn shuffles_only_where_one_subgroup_holds_a_row() -> anyhow::Result<()> {
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let base = ctx.capabilities().clone();
    let format = WeightFormat::parse("q4_g32_sym").expect("q4");
    let (n, k) = (16, 256);
    let tw = qmatmul::test_weight(format, 800, n, k)?;
    let x = random_f32(801, k);
    let config = GemvConfig { wg: 256, rows: 1, lanes: 32 };
    // An adapter reporting 16 as its smallest size (Intel may run 8, 16 or 32 lanes): no
    // shuffles for 32 lanes a row, whatever its largest size.
    let mut narrow = base.clone().with_emulated_subgroups(16);
    narrow.subgroup_emulation = 0;
    ctx.set_capabilities(narrow);
    let w = tw.upload(&ctx, "w")?;
    let (kernel, y) = run(&ctx, &w, &x, &x, Fusion::None, config)?;
    assert!(!kernel.contains("SG"), "{kernel}");
    assert!(y.iter().all(|v| v.is_finite()));
    // The browser reports no size when it does not know one: no shuffles either.
    ctx.set_capabilities(base.clone().with_web_subgroups(0));
    let (kernel, _) = run(&ctx, &w, &x, &x, Fusion::None, config)?;
    assert!(!kernel.contains("SG"), "{kernel}");
    // The emulation catches a kernel that counts on more lanes than a subgroup has: 32 lanes a
    // row summed by shuffles in subgroups of 8 read lanes outside the subgroup.
    let mut wrong = base.clone().with_emulated_subgroups(8);
    wrong.subgroup_min_size = 32;
    ctx.set_capabilities(wrong);
    let (kernel, y) = run(&ctx, &w, &x, &x, Fusion::None, config)?;
    assert!(kernel.contains("SG_EMU=8,"), "{kernel}");
    assert!(y.iter().all(|v| v.is_nan()), "{y:?}");
    Ok(())
}
