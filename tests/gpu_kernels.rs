//! Every kernel against its CPU reference on seeded random data, on the native adapter
//! (lavapipe in CI). Shapes include ragged ones that do not fill a tile or a workgroup.

use weft::gpu::shader::{Defines, ShaderSource};
use weft::gpu::{BackendChoice, DType, GpuContext};
use weft::ops::{elementwise, matmul, softmax};
use weft::selftest::random_f32;
use weft::Error;

mod gpu_context;
use gpu_context::ctx;

#[test]
fn add_matches_cpu_exactly() -> anyhow::Result<()> {
    let ctx = ctx();
    for (i, n) in [1usize, 255, 256, 1000, 70_001].into_iter().enumerate() {
        let a = random_f32(100 + i as u64, n);
        let b = random_f32(200 + i as u64, n);
        let ta = ctx.upload_f32("a", &[n], &a)?;
        let tb = ctx.upload_f32("b", &[n], &b)?;
        let out = ctx.zeros("out", &[n], DType::F32)?;
        let d = pollster::block_on(elementwise::add(ctx, &ta, &tb, &out))?;
        ctx.run(&[&d]);
        let got = pollster::block_on(ctx.read_f32(&out))?;
        let dev = elementwise::ADD_TOLERANCE.compare(&got, &elementwise::add_cpu(&a, &b));
        assert!(dev.within, "n={n}: {dev:?}");
    }
    Ok(())
}

#[test]
fn add_grid_spans_two_dimensions() -> anyhow::Result<()> {
    // More workgroups than fit one dimension forces the 2-D grid path.
    let ctx = ctx();
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension as usize;
    let n = max * 256 + 513;
    let a = random_f32(1, n);
    let b = random_f32(2, n);
    let ta = ctx.upload_f32("a", &[n], &a)?;
    let tb = ctx.upload_f32("b", &[n], &b)?;
    let out = ctx.zeros("out", &[n], DType::F32)?;
    let d = pollster::block_on(elementwise::add(ctx, &ta, &tb, &out))?;
    ctx.run(&[&d]);
    let got = pollster::block_on(ctx.read_f32(&out))?;
    let dev = elementwise::ADD_TOLERANCE.compare(&got, &elementwise::add_cpu(&a, &b));
    assert!(dev.within, "n={n}: {dev:?}");
    Ok(())
}

#[test]
fn matmul_matches_cpu_on_ragged_shapes() -> anyhow::Result<()> {
    let ctx = ctx();
    let shapes = [(1, 1, 1), (16, 16, 16), (17, 33, 5), (64, 300, 48), (3, 577, 129), (128, 64, 1)];
    for (i, (m, k, n)) in shapes.into_iter().enumerate() {
        let a = random_f32(10 + i as u64, m * k);
        let b = random_f32(20 + i as u64, k * n);
        let got = pollster::block_on(weft::selftest::gpu_matmul(ctx, &a, &b, m, k, n))?;
        let want = matmul::matmul_cpu(&a, &b, m, k, n);
        let dev = matmul::matmul_tolerance(k).compare(&got, &want);
        assert!(dev.within, "[{m},{k}]x[{k},{n}]: {dev:?}");
    }
    Ok(())
}

#[test]
fn matmul_rejects_mismatched_shapes() -> anyhow::Result<()> {
    let ctx = ctx();
    let a = ctx.zeros("a", &[4, 5], DType::F32)?;
    let b = ctx.zeros("b", &[6, 3], DType::F32)?;
    let c = ctx.zeros("c", &[4, 3], DType::F32)?;
    let err = pollster::block_on(matmul::matmul(ctx, &a, &b, &c)).err().expect("shape error");
    assert!(matches!(err, Error::Shape { op: "matmul", .. }), "{err}");
    Ok(())
}

#[test]
fn softmax_matches_cpu() -> anyhow::Result<()> {
    let ctx = ctx();
    for (i, (rows, cols)) in [(1, 1), (3, 7), (5, 64), (2, 1000), (130, 33)].into_iter().enumerate() {
        // Scale to [-20, 20) so that the max subtraction matters.
        let x: Vec<f32> = random_f32(30 + i as u64, rows * cols).iter().map(|v| v * 20.0).collect();
        let tx = ctx.upload_f32("x", &[rows, cols], &x)?;
        let ty = ctx.zeros("y", &[rows, cols], DType::F32)?;
        let d = pollster::block_on(softmax::softmax(ctx, &tx, &ty))?;
        ctx.run(&[&d]);
        let got = pollster::block_on(ctx.read_f32(&ty))?;
        let dev = softmax::SOFTMAX_TOLERANCE.compare(&got, &softmax::softmax_cpu(&x, cols));
        assert!(dev.within, "[{rows},{cols}]: {dev:?}");
    }
    Ok(())
}

#[test]
fn one_submission_runs_a_chain_of_dispatches() -> anyhow::Result<()> {
    // softmax(a · b + c) recorded into one pass, as a model step is.
    let ctx = ctx();
    let (m, k, n) = (9, 40, 23);
    let a = random_f32(41, m * k);
    let b = random_f32(42, k * n);
    let c = random_f32(43, m * n);
    let (ta, tb, tc) = (
        ctx.upload_f32("a", &[m, k], &a)?,
        ctx.upload_f32("b", &[k, n], &b)?,
        ctx.upload_f32("c", &[m, n], &c)?,
    );
    let prod = ctx.zeros("prod", &[m, n], DType::F32)?;
    let sum = ctx.zeros("sum", &[m, n], DType::F32)?;
    let out = ctx.zeros("out", &[m, n], DType::F32)?;
    let d1 = pollster::block_on(matmul::matmul(ctx, &ta, &tb, &prod))?;
    let d2 = pollster::block_on(elementwise::add(ctx, &prod, &tc, &sum))?;
    let d3 = pollster::block_on(softmax::softmax(ctx, &sum, &out))?;
    ctx.run(&[&d1, &d2, &d3]);
    let got = pollster::block_on(ctx.read_f32(&out))?;
    let logits: Vec<f32> = matmul::matmul_cpu(&a, &b, m, k, n)
        .iter()
        .zip(&c)
        .map(|(p, &c)| (*p as f32) + c)
        .collect();
    let want = softmax::softmax_cpu(&logits, n);
    let tol = weft::ops::Tolerance { abs: 1e-6, rel: 1e-4 };
    let dev = tol.compare(&got, &want);
    assert!(dev.within, "{dev:?}");
    Ok(())
}

#[test]
fn broken_shader_is_a_typed_error_naming_the_shader() {
    let ctx = ctx();
    let wgsl = "@compute @workgroup_size(1) fn main() { let x: f32 = undefined_thing; }";
    match pollster::block_on(ctx.compile("deliberately_broken", wgsl)) {
        Err(Error::ShaderCompile { shader, message }) => {
            assert_eq!(shader, "deliberately_broken");
            assert!(message.contains("undefined_thing"), "{message}");
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("a broken shader compiled"),
    }
    // Through the cache path too, with the variant in the name.
    const BROKEN: ShaderSource = ShaderSource { name: "broken_cached", source: &["fn main( {}"] };
    let err = pollster::block_on(ctx.pipeline(&BROKEN, &Defines::new().set("WG", 8))).err();
    match err {
        Some(Error::ShaderCompile { shader, .. }) => assert_eq!(shader, "broken_cached[WG=8]"),
        other => panic!("expected ShaderCompile, got {other:?}"),
    }
}

#[test]
fn pipelines_are_cached_per_define_set() -> anyhow::Result<()> {
    let ctx = ctx();
    let d = Defines::new().set("WG", 64);
    let p1 = pollster::block_on(ctx.pipeline(&softmax::SOFTMAX_SHADER, &d))?;
    let p2 = pollster::block_on(ctx.pipeline(&softmax::SOFTMAX_SHADER, &d))?;
    let p3 = pollster::block_on(ctx.pipeline(&softmax::SOFTMAX_SHADER, &d.clone().set("WG", 128)))?;
    assert!(std::sync::Arc::ptr_eq(&p1, &p2));
    assert!(!std::sync::Arc::ptr_eq(&p1, &p3));
    Ok(())
}

#[test]
fn oversized_buffer_is_refused_before_allocation() {
    let ctx = ctx();
    let limit = ctx.capabilities().limits.max_storage_buffer_binding_size as usize;
    let err = ctx.zeros("huge", &[limit / 4 + 1], DType::F32).err().expect("refused");
    assert!(matches!(err, Error::BufferTooLarge { .. }), "{err}");
    let err = ctx.zeros("overflow", &[usize::MAX, 2], DType::F32).err().expect("refused");
    assert!(matches!(err, Error::Shape { .. }), "{err}");
}

#[test]
fn capabilities_report_the_adapter() {
    let caps = ctx().capabilities();
    assert!(!caps.adapter_name.is_empty());
    assert!(caps.limits.max_storage_buffer_binding_size >= 128 << 20);
    assert!(caps.limits.max_compute_invocations_per_workgroup >= 256);
    match BackendChoice::from_env().expect("WEFT_BACKEND") {
        BackendChoice::Vulkan => assert_eq!(caps.backend, "Vulkan"),
        BackendChoice::Gl => assert_eq!(caps.backend, "Gl"),
        BackendChoice::Auto => assert!(["Vulkan", "Gl"].contains(&caps.backend.as_str())),
    }
}

#[test]
fn invalid_gpu_use_is_reported_not_panicked() -> anyhow::Result<()> {
    // A dispatch that binds a too-small buffer would make wgpu's default handler panic; weft
    // records the error and returns it from the next check instead.
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let pipeline = pollster::block_on(ctx.pipeline(
        &softmax::SOFTMAX_SHADER,
        &Defines::new().set("WG", 64),
    ))?;
    let x = ctx.upload_f32("x", &[4], &[1.0, 2.0, 3.0, 4.0])?;
    // Binding 2 must be a uniform buffer; a storage tensor there is a validation error.
    let y = ctx.zeros("y", &[4], DType::F32)?;
    let wrong = ctx.zeros("not a uniform", &[4], DType::F32)?;
    let d = ctx.dispatch(&pipeline, &[&x, &y, &wrong], None, [1, 1, 1])?;
    ctx.run(&[&d]);
    let err = ctx.check().expect_err("the misuse is reported");
    assert!(matches!(err, Error::Gpu(_)), "{err}");
    assert!(ctx.check().is_ok(), "an error is reported once");
    Ok(())
}
