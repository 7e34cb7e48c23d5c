//! Quantized GEMV, GEMM and embedding lookup against the f64 CPU reference of dequant(W) · x for
//! every weight format, on seeded random data and ragged shapes, on the native adapter.

use weft::format::GgmlType;
use weft::gpu::{BackendChoice, Capabilities, DType, GpuContext};
use weft::ops::qmatmul::{self, GemmConfig, Precision, QWeight, WeightFormat};
use weft::quant::weft::{quantize, Scheme, WeftQuant};
use weft::selftest::random_f32;
use weft::Error;

mod gpu_context;
use gpu_context::ctx;

/// (n, k, t) per format: K ragged where the format allows it (not a multiple of 8 or of the
/// group; 100 is a multiple of 4 but not of 32, which the block kernels read as vec4), n odd, t
/// from 1 past the 32-token GEMM tile.
fn shapes(format: WeightFormat) -> Vec<(usize, usize, usize)> {
    match format.k_multiple() {
        1 => vec![(7, 203, 1), (33, 77, 3), (5, 8, 70), (9, 100, 2)],
        32 => vec![(7, 96, 1), (33, 320, 3), (5, 64, 70)],
        _ => vec![(7, 256, 1), (33, 512, 3), (5, 256, 70)],
    }
}

fn check_all(formats: &[WeightFormat]) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for (i, &format) in formats.iter().enumerate() {
        for (s, (n, k, t)) in shapes(format).into_iter().enumerate() {
            let seed = (i * 8 + s) as u64 + 1;
            let r = pollster::block_on(qmatmul::self_test(ctx(), format, seed, n, k, t))?;
            let worst = r.kernels.iter().map(|k| format!("{}/{:?} {:.2e}", k.kernel, k.precision, k.max_error));
            println!("{} [{n}, {k}] t={t}: {}", r.format, worst.collect::<Vec<_>>().join(", "));
            assert!(r.kernels.len() >= 2, "{r:?}");
            if !r.passed {
                failures.push(format!("{r:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} cases fail:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

#[test]
fn ggml_formats_match_the_reference() -> anyhow::Result<()> {
    let mut formats: Vec<WeightFormat> = GgmlType::ALL.into_iter().map(WeightFormat::Ggml).collect();
    formats.push(WeightFormat::F32);
    check_all(&formats)
}

#[test]
fn weft_formats_match_the_reference() -> anyhow::Result<()> {
    let formats: Vec<WeightFormat> =
        WeightFormat::all().into_iter().filter(|f| matches!(f, WeightFormat::Weft(_))).collect();
    assert_eq!(formats.len(), 24);
    check_all(&formats)
}

#[test]
fn repacked_k_quants_match_the_reference() -> anyhow::Result<()> {
    // The planes GPUs hold of K-quants, Q4_1, Q5_0 and Q5_1 (src/quant/repack.rs), uploaded as
    // such on every adapter:
    // GEMV (the GPU kernel, whatever shape is asked), GEMM, and the embedding lookup to the bit.
    let formats: Vec<WeightFormat> =
        WeightFormat::all().into_iter().filter(|f| matches!(f, WeightFormat::Repacked(_))).collect();
    assert_eq!(formats.iter().map(|f| f.name()).collect::<Vec<_>>(), ["Q4_1_R", "Q5_0_R", "Q5_1_R", "Q4_K_R", "Q5_K_R", "Q6_K_R"]);
    check_all(&formats)
}

#[test]
fn long_rows_and_many_rows() -> anyhow::Result<()> {
    // K of a real layer, and more rows than one GEMV workgroup dimension needs.
    for (format, n, k, t) in [
        (WeightFormat::Ggml(GgmlType::Q4_K), 300, 4096, 2),
        (WeightFormat::Repacked(GgmlType::Q4_K), 301, 4096, 1),
        (WeightFormat::Repacked(GgmlType::Q6_K), 299, 4096, 1),
        (WeightFormat::Repacked(GgmlType::Q4_1), 297, 4096, 1),
        (WeightFormat::Repacked(GgmlType::Q5_0), 303, 2080, 1),
        (WeightFormat::Weft(WeftQuant::new(4, 128, Scheme::Asym)?), 513, 1536, 1),
        (WeightFormat::Ggml(GgmlType::Q8_0), 129, 2048, 40),
    ] {
        let r = pollster::block_on(qmatmul::self_test(ctx(), format, 7, n, k, t))?;
        assert!(r.passed, "{r:?}");
    }
    Ok(())
}

/// Runs `product` (one dispatch writing a zeroed [t, n] output) and returns its worst error
/// against the reference, each element's in units of its reference scale; NaN counts as
/// infinitely far.
fn worst_error(
    ctx: &GpuContext,
    [t, n]: [usize; 2],
    (want, scale): (&[f64], &[f64]),
    product: impl FnOnce(&weft::gpu::GpuTensor) -> anyhow::Result<weft::gpu::Dispatch>,
) -> anyhow::Result<f64> {
    let y = ctx.zeros("y", &[t, n], DType::F32)?;
    let d = product(&y)?;
    ctx.run(&[&d]);
    let got = pollster::block_on(ctx.read_f32(&y))?;
    Ok(got
        .iter()
        .zip(want)
        .zip(scale)
        .map(|((&g, &w), &s)| (g as f64 - w).abs() / s)
        .map(|e| if e.is_nan() { f64::INFINITY } else { e })
        .fold(0.0, f64::max))
}

#[test]
fn gemv_launch_shapes_for_gpus_match_the_reference() -> anyhow::Result<()> {
    // Rows shared by 32 lanes (the shape for GPUs), 4 lanes (within lavapipe's subgroups, so
    // the subgroup sum where the adapter has subgroups) and 16 lanes with 2 rows each, on
    // ragged shapes, against the same reference and tolerance as the default shape.
    let ctx = ctx();
    // Every shape load-time tuning may pick is among them.
    let mut configs = vec![qmatmul::GemvConfig { wg: 64, rows: 1, lanes: 4 }, qmatmul::GemvConfig { wg: 64, rows: 2, lanes: 16 }];
    configs.extend(qmatmul::GEMV_CANDIDATES);
    // Weft rows that end inside a chunk run the block kernel; whole chunks (K a multiple of 32,
    // and on GPUs Q4_0 / Q8_0, which are stored as weft there) run shaders/qgemv_gpu.wgsl at
    // lanes > 1.
    let ragged = ["q4_g32_sym", "q3_g64_asym", "q2_g128_sym"];
    let whole = ["q4_g32_asym", "q8_g32_sym", "q3_g32_asym", "q2_g32_asym", "q4_g128_asym", "q8_g64_asym", "q2_g64_sym"];
    let formats = ["Q4_0", "Q4_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_K_R", "Q5_K_R", "Q6_K_R", "Q4_1_R", "Q5_0_R", "Q5_1_R"].into_iter().chain(ragged).chain(whole);
    let mut failures = Vec::new();
    for (i, name) in formats.enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        let (n, k, t) = match format.k_multiple() {
            1 if ragged.contains(&name) => (37, 1000, 2),
            1 | 32 => (37, 1120, 2),
            _ => (37, 1536, 2),
        };
        let tw = qmatmul::test_weight(format, 40 + i as u64, n, k)?;
        let w = tw.upload(ctx, "w")?;
        let x = random_f32(90 + i as u64, t * k);
        let (want, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &x, n, k, t);
        let xt = ctx.upload_f32("x", &[t, k], &x)?;
        for &config in &configs {
            let worst = worst_error(ctx, [t, n], (&want, &scale), |y| {
                Ok(pollster::block_on(qmatmul::gemv_tuned(ctx, &w, &xt, y, Precision::F32, config))?)
            })?;
            println!("{name} {config:?}: {worst:.2e}");
            if worst > qmatmul::f32_tolerance(k) {
                failures.push(format!("{name} {config:?}: {worst:e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[test]
fn gpu_gemms_match_the_reference() -> anyhow::Result<()> {
    // The GEMMs GPUs run (32 x 32 tiles through shared memory; outer products on tiles of 64
    // rows x 32 or 64 tokens) for every format, on ragged shapes: rows and tokens not a multiple
    // of the tile, and for the tiled kernel K not a multiple of its K step where the format allows.
    let ctx = ctx();
    let mut failures = Vec::new();
    // Every format through the tiled kernel and the 32-token outer-product shape (two units of
    // W an invocation); the 64-token shape differs in how the tile is shared out, not in the
    // decoding, so a few formats cover it.
    let few = ["Q4_0", "Q4_K", "q3_g32_asym", "q8_g128_sym"];
    for config in [qmatmul::GEMM_TILED, qmatmul::GemmConfig::outer(32), qmatmul::GemmConfig::outer(64)] {
        let outer = config.kernel == qmatmul::GemmKernel::Outer;
        let all = config.tokens == 32;
        for (i, format) in WeightFormat::all().into_iter().enumerate() {
            if !all && !few.contains(&format.name().as_str()) {
                continue;
            }
            let (n, k, t) = match format.k_multiple() {
                1 if !outer => (37, 203, 35),
                1 | 32 => (150, 320, 70),
                _ => (150, 512, 70),
            };
            let tw = qmatmul::test_weight(format, 140 + i as u64, n, k)?;
            let w = tw.upload(ctx, "w")?;
            let x = random_f32(190 + i as u64, t * k);
            let (want, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &x, n, k, t);
            let xt = ctx.upload_f32("x", &[t, k], &x)?;
            let worst = worst_error(ctx, [t, n], (&want, &scale), |y| {
                Ok(pollster::block_on(qmatmul::gemm_tuned(ctx, &w, &xt, y, Precision::F32, config))?)
            })?;
            let name = format!("{} {:?} {}x{}", format.name(), config.kernel, config.rows, config.tokens);
            println!("{name} GEMM [{n}, {k}] t={t}: {worst:.2e}");
            if worst > qmatmul::f32_tolerance(k) {
                failures.push(format!("{name}: {worst:e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[test]
fn matrix_unit_gemm_matches_the_reference_or_is_refused() -> anyhow::Result<()> {
    // shaders/qgemm_coop.wgsl on adapters with 16x16x16 f16 cooperative matrices (tensor
    // cores): every format whose rows it takes, rows and tokens not a multiple of its 128 x 64
    // tile and more than one tile of each, within the f16 bound. Elsewhere asking for it at F16
    // is a shape error, and at F32 the same shape gives way to the outer-product kernel.
    let ctx = ctx();
    let matrix = ctx.capabilities().matrix_f16;
    println!("matrix units: {matrix}");
    let mut failures = Vec::new();
    for (i, format) in WeightFormat::all().into_iter().enumerate() {
        for (n, k, t) in [(150, 512usize, 70), (300, 320, 130), (40, 512, 2)] {
            if !k.is_multiple_of(format.k_multiple()) {
                continue;
            }
            let tw = qmatmul::test_weight(format, 240 + i as u64, n, k)?;
            let w = tw.upload(ctx, "w")?;
            let x = random_f32(290 + i as u64 + t as u64, t * k);
            let (want, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &x, n, k, t);
            let xt = ctx.upload_f32("x", &[t, k], &x)?;
            let name = format!("{} [{n}, {k}] t={t}", format.name());
            if !matrix {
                let y = ctx.zeros("y", &[t, n], DType::F32)?;
                let f16 = pollster::block_on(qmatmul::gemm_tuned(ctx, &w, &xt, &y, Precision::F16, qmatmul::GEMM_MATRIX));
                assert!(matches!(f16, Err(Error::Shape { op: "gemm", .. })), "{name}: {:?}", f16.err());
                let worst = worst_error(ctx, [t, n], (&want, &scale), |y| {
                    Ok(pollster::block_on(qmatmul::gemm_tuned(ctx, &w, &xt, y, Precision::F32, qmatmul::GEMM_MATRIX))?)
                })?;
                if worst > qmatmul::f32_tolerance(k) {
                    failures.push(format!("{name} at F32: {worst:e}"));
                }
                continue;
            }
            // The adapter's default shape (the matrix kernel where it has matrix units), then
            // every matrix shape; at K = 320 the K-split shape gives way to plain 64 x 64 tiles.
            let shapes = [None, Some(GemmConfig::matrix(128, 64)), Some(GemmConfig::matrix(64, 64)), Some(GemmConfig::matrix_split())];
            for config in shapes {
                let worst = worst_error(ctx, [t, n], (&want, &scale), |y| {
                    Ok(match config {
                        None => pollster::block_on(qmatmul::gemm(ctx, &w, &xt, y, Precision::F16))?,
                        Some(c) => pollster::block_on(qmatmul::gemm_tuned(ctx, &w, &xt, y, Precision::F16, c))?,
                    })
                })?;
                println!("{name} matrix units {config:?}: {worst:.2e}");
                if worst > qmatmul::f16_tolerance(k) {
                    failures.push(format!("{name} {config:?}: {worst:e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[test]
fn quantizer_output_runs_through_the_kernels() -> anyhow::Result<()> {
    // Real quantized data (not random levels): y from the packed weight matches the reference
    // product with the dequantized matrix, and approximates the unquantized product.
    let ctx = ctx();
    let (n, k) = (24, 200);
    let dense = random_f32(3, n * k);
    let x = random_f32(4, k);
    let m = quantize(WeftQuant::new(8, 64, Scheme::Sym)?, &dense, n, k)?;
    let w = QWeight::from_weft(ctx, "w", &m)?;
    let xt = ctx.upload_f32("x", &[1, k], &x)?;
    let y = ctx.zeros("y", &[1, n], DType::F32)?;
    let d = pollster::block_on(qmatmul::qmatmul(ctx, &w, &xt, &y))?;
    ctx.run(&[&d]);
    let got = pollster::block_on(ctx.read_f32(&y))?;
    let (want, _) = qmatmul::cpu_reference(&m.dequantize(), &x, n, k, 1);
    let (exact, scale) = qmatmul::cpu_reference(&dense, &x, n, k, 1);
    for i in 0..n {
        let tol = qmatmul::f16_tolerance(k) * scale[i];
        assert!((got[i] as f64 - want[i]).abs() <= tol, "row {i}: {} vs {}", got[i], want[i]);
        assert!((got[i] as f64 - exact[i]).abs() <= 0.01 * scale[i], "row {i}: 8-bit error too large");
    }
    Ok(())
}

#[test]
fn f16_variant_is_refused_without_shader_f16_and_shapes_are_checked() -> anyhow::Result<()> {
    let ctx = ctx();
    let tw = qmatmul::test_weight(WeightFormat::Ggml(GgmlType::Q4_0), 1, 4, 64)?;
    let w = tw.upload(ctx, "w")?;
    let x = ctx.zeros("x", &[2, 64], DType::F32)?;
    let y = ctx.zeros("y", &[2, 4], DType::F32)?;
    let f16 = pollster::block_on(qmatmul::gemv(ctx, &w, &x, &y, Precision::F16));
    assert_eq!(f16.is_ok(), ctx.capabilities().shader_f16);
    let bad_y = ctx.zeros("y", &[2, 5], DType::F32)?;
    let err = pollster::block_on(qmatmul::gemm(ctx, &w, &x, &bad_y, Precision::F32)).err();
    assert!(matches!(err, Some(Error::Shape { op: "gemm", .. })), "{err:?}");
    let ragged = QWeight::from_ggml(ctx, "blk.0.ffn_up.weight", GgmlType::Q4_K, 4, 100, &[0; 10]);
    assert!(matches!(ragged, Err(Error::Shape { op: "qweight", .. })), "ragged K is refused");
    Ok(())
}

/// A second device whose storage binding limit the test can lower (the shared one stays as is).
fn device_with_limit() -> anyhow::Result<(GpuContext, Capabilities)> {
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let caps = ctx.capabilities().clone();
    Ok((ctx, caps))
}

fn set_limit(ctx: &mut GpuContext, caps: &Capabilities, limit: u64) {
    let mut c = caps.clone();
    c.limits.max_storage_buffer_binding_size = limit;
    ctx.set_capabilities(c);
}

const STALE: u32 = 0x7fa0_5a5a;

#[test]
fn weights_over_the_binding_limit_are_split_by_rows_with_the_same_results() -> anyhow::Result<()> {
    let (mut ctx, caps) = device_with_limit()?;
    // Q4_0 rows of 1.5 blocks' worth of words (not word-aligned), Q3_K and Q6_K (two-byte
    // aligned super-blocks), the strided F16 and generic Q5_0 paths, weft with scales and zeros.
    let names = ["Q4_0", "Q4_1", "Q3_K", "Q6_K", "Q5_0", "F16", "F32", "q3_g64_asym", "q4_g32_sym", "q8_g128_asym"];
    for (i, name) in names.into_iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        let (n, k, t) = match format.k_multiple() {
            1 => (37, 300, 3),
            32 => (37, 96, 3),
            _ => (37, 512, 3),
        };
        let tw = qmatmul::test_weight(format, 60 + i as u64, n, k)?;
        set_limit(&mut ctx, &caps, caps.limits.max_storage_buffer_binding_size);
        let whole = tw.upload(&ctx, "whole")?;
        let largest = whole.parts[0].tensors().iter().map(|t| t.bytes()).max().unwrap_or(0);
        // About a fifth of the largest buffer: five to eight parts of whole rows.
        set_limit(&mut ctx, &caps, (largest / 5).max(4) / 4 * 4);
        let split = tw.upload(&ctx, "split")?;
        set_limit(&mut ctx, &caps, caps.limits.max_storage_buffer_binding_size);
        assert_eq!(whole.parts.len(), 1, "{name}");
        assert!(split.parts.len() >= 5, "{name}: {} parts", split.parts.len());
        assert_eq!(split.parts.iter().map(|p| p.rows).sum::<usize>(), n, "{name}");
        let x = ctx.upload_f32("x", &[t, k], &random_f32(70 + i as u64, t * k))?;
        let mut ids: Vec<u32> = (0..n as u32).rev().step_by(3).collect();
        ids.push(n as u32);
        let idt = ctx.upload_u32("ids", &[ids.len()], &ids)?;
        let run = |w: &QWeight, kernel: &str| -> anyhow::Result<Vec<u32>> {
            let (rows, input) = if kernel == "embed" { (ids.len(), &idt) } else { (t, &x) };
            let cols = if kernel == "embed" { k } else { n };
            let out = ctx.zeros("out", &[rows, cols], DType::F32)?;
            // A stale NaN pattern no kernel produces: every element must be overwritten.
            ctx.write_tensor(&out, 0, bytemuck::cast_slice(&vec![STALE; rows * cols]))?;
            let d = pollster::block_on(async {
                match kernel {
                    "gemv" => qmatmul::gemv(&ctx, w, &x, &out, Precision::F32).await,
                    "gemm" => qmatmul::gemm(&ctx, w, input, &out, Precision::F32).await,
                    _ => qmatmul::embed(&ctx, w, input, &out).await,
                }
            })?;
            ctx.run(&[&d]);
            let v = pollster::block_on(ctx.read_f32(&out))?;
            Ok(v.iter().map(|f| f.to_bits()).collect())
        };
        for kernel in ["gemv", "gemm", "embed"] {
            let (a, b) = (run(&whole, kernel)?, run(&split, kernel)?);
            assert!(a == b, "{name} {kernel}: split results differ from the whole weight's");
            assert!(!a.contains(&STALE), "{name} {kernel}: an output was not written");
        }
        println!("{name} [{n}, {k}]: {} parts, gemv/gemm/embed equal", split.parts.len());
    }
    Ok(())
}

#[test]
fn a_row_over_the_binding_limit_names_the_tensor_and_the_limit() -> anyhow::Result<()> {
    let (mut ctx, caps) = device_with_limit()?;
    set_limit(&mut ctx, &caps, 4096);
    let q = WeftQuant::new(8, 128, Scheme::Sym)?;
    // One row of 8192 8-bit weights is 8192 bytes; contents are never touched.
    let (rows, cols) = (3, 8192);
    let m = weft::quant::weft::QuantMatrix {
        quant: q,
        rows,
        cols,
        words: vec![0; rows * q.words_per_row(cols)],
        scales: vec![0; rows * q.groups_per_row(cols)],
        zeros: Vec::new(),
    };
    let err = QWeight::from_weft(&ctx, "token_embd", &m).err().expect("too large");
    let text = err.to_string();
    assert!(matches!(err, Error::BufferTooLarge { .. }), "{text}");
    assert!(text.contains("token_embd") && text.contains("4096"), "{text}");
    Ok(())
}

/// With 8-bit activations tuning times each weight again whose decode GEMV takes them (decided
/// by the f32 timing), over the GPU kernel's shapes and with the integer products, plain and as
/// the SwiGLU epilogue; the fused GEMV with 8-bit activations then runs at that shape.
#[test]
fn gemv_tuning_with_8_bit_activations_times_the_integer_kernel() -> anyhow::Result<()> {
    let (mut ctx, caps) = device_with_limit()?;
    assert!(caps.timestamp_query, "this test needs timestamp queries");
    let mut gpu = caps.clone();
    gpu.is_software = false;
    ctx.set_capabilities(gpu);
    let (n, k) = (300, 256);
    let w = qmatmul::test_weight(WeightFormat::parse("q3_g32_asym").expect("known format"), 93, n, k)?.upload(&ctx, "w")?;
    let tuned = pollster::block_on(qmatmul::tune_gemv(&ctx, &[&w], &[&w], Precision::F32, true, &[]))?;
    let (eight, f32s): (Vec<_>, Vec<_>) = tuned.iter().partition(|t| t.int8);
    assert_eq!(f32s.iter().map(|t| t.swiglu).collect::<Vec<_>>(), [false, true], "{tuned:?}");
    if !qmatmul::gemv_int8(&ctx, &w) {
        // The f32 timing chose the block kernel, which has no 8-bit path.
        assert!(eight.is_empty(), "{tuned:?}");
        return Ok(());
    }
    assert_eq!(eight.iter().map(|t| t.swiglu).collect::<Vec<_>>(), [false, true], "{tuned:?}");
    for t in &eight {
        assert!(!t.timings.is_empty(), "{t:?}");
        assert!(t.timings.iter().all(|(c, us)| c.lanes > 1 && matches!(c.rows, 1 | 2 | 4) && *us > 0.0), "{t:?}");
        let best = t.timings.iter().map(|&(_, us)| us).fold(f64::INFINITY, f64::min);
        assert!(t.timings.iter().any(|&(c, us)| c == t.chosen && us == best), "{t:?}");
        println!("8-bit {} [{}, {}] swiglu {}: chose {:?} of {:?}", t.format, t.rows, t.cols, t.swiglu, t.chosen, t.timings);
    }
    let tx = ctx.upload_f32("x", &[1, k], &random_f32(97, k))?;
    let out = ctx.zeros("out", &[1, n], DType::F32)?;
    let half = ctx.zeros("half", &[1, n / 2], DType::F32)?;
    let plain = qmatmul::GemvFusion { int8: true, ..Default::default() };
    let swiglu = qmatmul::GemvFusion { swiglu: true, ..plain };
    for (t, y, fusion) in [(eight[0], &out, plain), (eight[1], &half, swiglu)] {
        let d = pollster::block_on(qmatmul::gemv_fused(&ctx, &w, &tx, y, fusion))?;
        let c = t.chosen;
        for part in [format!("LPR={},", c.lanes), format!("RPT={},", c.rows), format!("WG={}]", c.wg), "DP4=1".into()] {
            assert!(d.name().contains(&part), "{} for {c:?}", d.name());
        }
    }
    Ok(())
}

/// Load-time tuning times every candidate shape once per distinct weight shape, remembers the
/// fastest in the context, and GEMVs made afterwards use it with results that still match the
/// reference; a stacked gate/up weight is also timed as the SwiGLU epilogue's product (two rows
/// a lane group or more), which the fused GEMV then runs at. The adapter is treated as a GPU
/// here (software adapters keep their measured shapes and are not tuned).
#[test]
fn gemv_tuning_times_every_candidate_and_results_still_match() -> anyhow::Result<()> {
    let (mut ctx, caps) = device_with_limit()?;
    assert!(caps.timestamp_query, "this test needs timestamp queries");
    let untouched = pollster::block_on(qmatmul::tune_gemv(&ctx, &[], &[], Precision::F32, false, &[]))?;
    assert!(untouched.is_empty());
    let mut gpu = caps.clone();
    gpu.is_software = false;
    ctx.set_capabilities(gpu);
    let (n, k) = (300, 256);
    let formats = ["q4_g32_sym", "Q4_1"];
    let tws: Vec<_> = formats
        .iter()
        .enumerate()
        .map(|(i, f)| qmatmul::test_weight(WeightFormat::parse(f).expect("known format"), 90 + i as u64, n, k))
        .collect::<Result<_, _>>()?;
    let ws: Vec<QWeight> = tws.iter().map(|tw| tw.upload(&ctx, "w")).collect::<Result<_, _>>()?;
    // The same shape twice: timed once.
    let refs = vec![&ws[0], &ws[1], &ws[0]];
    let tuned = pollster::block_on(qmatmul::tune_gemv(&ctx, &refs, &[&ws[0]], Precision::F32, false, &[]))?;
    assert_eq!(tuned.len(), 3, "{tuned:?}");
    assert_eq!(tuned.iter().map(|t| t.swiglu).collect::<Vec<_>>(), [false, false, true]);
    for t in &tuned {
        if t.swiglu {
            assert!(t.timings.len() < qmatmul::GEMV_CANDIDATES.len() && t.timings.iter().all(|(c, _)| c.rows >= 2), "{t:?}");
        } else {
            assert_eq!(t.timings.len(), qmatmul::GEMV_CANDIDATES.len(), "{t:?}");
        }
        assert!(t.timings.iter().all(|&(_, us)| us > 0.0 && us.is_finite()), "{t:?}");
        let best = t.timings.iter().map(|&(_, us)| us).fold(f64::INFINITY, f64::min);
        assert!(t.timings.iter().any(|&(c, us)| c == t.chosen && us == best), "{t:?}");
        println!("{} [{}, {}]: chose {:?} of {:?}", t.format, t.rows, t.cols, t.chosen, t.timings);
    }
    // Tuned again: nothing new to time.
    assert!(pollster::block_on(qmatmul::tune_gemv(&ctx, &refs, &[&ws[0]], Precision::F32, false, &[]))?.is_empty());
    // The epilogue's GEMV runs at the shape tuned for it.
    let c = tuned[2].chosen;
    let half = ctx.zeros("half", &[1, n / 2], DType::F32)?;
    let swiglu = qmatmul::GemvFusion { swiglu: true, ..Default::default() };
    let tx = ctx.upload_f32("x", &[1, k], &random_f32(96, k))?;
    let d = pollster::block_on(qmatmul::gemv_fused(&ctx, &ws[0], &tx, &half, swiglu))?;
    for part in [format!("LPR={},", c.lanes), format!("RPT={},", c.rows), format!("WG={}]", c.wg), "SWIGLU=1".into()] {
        assert!(d.name().contains(&part), "{} for {c:?}", d.name());
    }
    let x = random_f32(95, k);
    let tx = ctx.upload_f32("x", &[1, k], &x)?;
    for (tw, w) in tws.iter().zip(&ws) {
        let out = ctx.zeros("out", &[1, n], DType::F32)?;
        let d = pollster::block_on(qmatmul::gemv(&ctx, w, &tx, &out, Precision::F32))?;
        ctx.run(&[&d]);
        let got = pollster::block_on(ctx.read_f32(&out))?;
        let (want, scale) = qmatmul::cpu_reference(&tw.dequantize()?, &x, n, k, 1);
        let worst =
            got.iter().zip(&want).zip(&scale).map(|((&g, &w), &s)| (g as f64 - w).abs() / s).fold(0.0, f64::max);
        assert!(worst <= qmatmul::f32_tolerance(k), "{}: {worst:e}", w.format.name());
    }
    Ok(())
}
