//! The CNN kernels against their CPU references on seeded random data, the scaled decoders on
//! the GPU bit for bit, and the trained MNIST network (www/mnist/) in a few storage types.

use weft::format::SafeDtype;
use weft::gpu::DType;
use weft::model::cnn::study::{self, Digits, Reference, Variant};
use weft::model::cnn::{CnnFile, StoredTensor};
use weft::ops::conv::{self, Conv2d};
use weft::ops::{dequant, elementwise, Tolerance};
use weft::quant::scaled::{self, Granularity};
use weft::quant::weft::{Scheme, WeftQuant};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::ctx;

#[test]
fn conv2d_matches_cpu() -> anyhow::Result<()> {
    let ctx = ctx();
    let cases = [
        (3, Conv2d { in_c: 1, in_h: 28, in_w: 28, out_c: 8, kernel: 3, stride: 2, padding: 1 }),
        (2, Conv2d { in_c: 8, in_h: 14, in_w: 14, out_c: 16, kernel: 3, stride: 2, padding: 1 }),
        (1, Conv2d { in_c: 3, in_h: 9, in_w: 7, out_c: 5, kernel: 5, stride: 1, padding: 2 }),
        (2, Conv2d { in_c: 4, in_h: 10, in_w: 13, out_c: 3, kernel: 2, stride: 3, padding: 0 }),
    ];
    for (i, (batch, geo)) in cases.into_iter().enumerate() {
        let seed = 10 * i as u64;
        let x = random_f32(seed, batch * geo.in_c * geo.in_h * geo.in_w);
        let w = random_f32(seed + 1, geo.weight_shape().iter().product());
        let b = random_f32(seed + 2, geo.out_c);
        let tx = ctx.upload_f32("x", &[batch, geo.in_c, geo.in_h, geo.in_w], &x)?;
        let tw = ctx.upload_f32("w", &geo.weight_shape(), &w)?;
        let tb = ctx.upload_f32("b", &[geo.out_c], &b)?;
        let out = ctx.zeros("out", &geo.out_shape(batch).expect("fits"), DType::F32)?;
        let d = pollster::block_on(conv::conv2d(ctx, &geo, &tx, &tw, &tb, &out))?;
        ctx.run(&[&d]);
        let got = pollster::block_on(ctx.read_f32(&out))?;
        let want = conv::conv2d_cpu(&geo, batch, &x, &w, &b);
        assert_eq!(got.len(), want.len());
        let dev = conv::conv2d_tolerance(geo.in_c * geo.kernel * geo.kernel).compare(&got, &want);
        assert!(dev.within, "{geo:?}: {dev:?}");
    }
    Ok(())
}

#[test]
fn conv2d_rejects_mismatched_shapes() -> anyhow::Result<()> {
    let ctx = ctx();
    let geo = Conv2d { in_c: 2, in_h: 5, in_w: 5, out_c: 3, kernel: 3, stride: 1, padding: 0 };
    let x = ctx.zeros("x", &[1, 2, 5, 6], DType::F32)?;
    let w = ctx.zeros("w", &[3, 2, 3, 3], DType::F32)?;
    let b = ctx.zeros("b", &[3], DType::F32)?;
    let out = ctx.zeros("out", &[1, 3, 3, 3], DType::F32)?;
    let err = pollster::block_on(conv::conv2d(ctx, &geo, &x, &w, &b, &out)).err().expect("an error");
    assert!(err.to_string().contains("conv2d"), "{err}");
    let big = Conv2d { kernel: 9, ..geo };
    assert_eq!(big.out_hw(), None);
    Ok(())
}

#[test]
fn relu_matches_cpu_exactly() -> anyhow::Result<()> {
    let ctx = ctx();
    for (i, n) in [1usize, 257, 70_001].into_iter().enumerate() {
        let x = random_f32(300 + i as u64, n);
        let t = ctx.upload_f32("x", &[n], &x)?;
        let d = pollster::block_on(elementwise::relu(ctx, &t))?;
        ctx.run(&[&d]);
        let got = pollster::block_on(ctx.read_f32(&t))?;
        let dev = elementwise::RELU_TOLERANCE.compare(&got, &elementwise::relu_cpu(&x));
        assert!(dev.within, "n={n}: {dev:?}");
        assert!(n == 1 || (got.contains(&0.0) && got.iter().any(|&v| v > 0.0)));
    }
    Ok(())
}

#[test]
fn scaled_tensors_decode_identically_on_cpu_and_gpu() -> anyhow::Result<()> {
    let ctx = ctx();
    let shape = [14usize, 3, 3, 5]; // an even count: F4 packs two values per byte
    let x: Vec<f32> = random_f32(77, shape.iter().product()).iter().map(|v| v * 0.3).collect();
    let mut checked = 0;
    for dtype in SafeDtype::ALL.into_iter().filter(|&d| d != SafeDtype::Bool) {
        for g in [Granularity::Tensor, Granularity::Row, Granularity::Block(16)] {
            let t = StoredTensor::from_f32(&x, &shape, dtype, Some(g))?;
            let cpu = t.decode_cpu()?;
            let gpu = pollster::block_on(async {
                let out = weft::model::cnn::decode_on_gpu(ctx, "t", &t).await?;
                ctx.read_f32(&out).await
            })?;
            let same = cpu.iter().zip(&gpu).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same && cpu.len() == gpu.len(), "{} {}", dtype.name(), g.name());
            // Real data: the decoded values are close to the input, not zeros.
            let worst = x.iter().zip(&cpu).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst < 0.1, "{} {}: {worst}", dtype.name(), g.name());
            checked += 1;
        }
    }
    assert_eq!(checked, 45);
    Ok(())
}

#[test]
fn rescale_rejects_a_layout_that_does_not_fit() -> anyhow::Result<()> {
    let ctx = ctx();
    let layout = Granularity::Row.layout(SafeDtype::I8, &[4, 6]);
    let w = ctx.zeros("w", &[24], DType::F32)?;
    let s = ctx.zeros("s", &[3], DType::F32)?;
    assert!(pollster::block_on(dequant::rescale(ctx, &layout, &w, &s, None)).is_err());
    let layout = scaled::ScaleLayout { zero: true, ..layout };
    let s = ctx.zeros("s", &[4], DType::F32)?;
    assert!(pollster::block_on(dequant::rescale(ctx, &layout, &w, &s, None)).is_err());
    Ok(())
}

fn mnist() -> anyhow::Result<(CnnFile, Digits)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let file = CnnFile::parse(&std::fs::read(format!("{root}/www/mnist/model-f32.safetensors"))?)?;
    let digits = Digits::parse(&std::fs::read(format!("{root}/www/mnist/test-digits.bin"))?, 784)?;
    Ok((file, digits))
}

/// The trained network on all 2,000 test digits: F32 as the script measured it (95.60%), and a
/// few storage types against it. The CPU forward pass covers the first 200 digits (debug builds
/// are slow on the CPU; the GPU runs all of them).
#[test]
fn mnist_network_in_several_storage_types() -> anyhow::Result<()> {
    let ctx = ctx();
    let (f32, digits) = mnist()?;
    assert_eq!(digits.count(), 2000);
    let (row, probs) =
        pollster::block_on(study::evaluate(ctx, &f32, Variant::Plain(SafeDtype::F32), &digits, None, 200))?;
    assert!((row.accuracy - 95.60).abs() < 0.051, "F32 accuracy {}", row.accuracy);
    assert_eq!(row.weight_bit_mismatches, 0);
    assert!(row.prob_max_diff < 1e-4, "{row:?}");
    let reference = Reference { predictions: study::argmax_rows(&probs, 10), probs };
    let cases = [
        (Variant::Plain(SafeDtype::F16), 99.5),
        (Variant::Scaled(SafeDtype::I8, Granularity::Row), 99.0),
        (Variant::Scaled(SafeDtype::U8, Granularity::Row), 99.0),
        (Variant::Scaled(SafeDtype::F4, Granularity::Block(32)), 97.0),
        (Variant::Weft(WeftQuant { bits: 4, group: 32, scheme: Scheme::Sym }), 99.0),
    ];
    for (variant, min_quality) in cases {
        let (row, _) = pollster::block_on(study::evaluate(ctx, &f32, variant, &digits, Some(&reference), 200))?;
        println!("{row:?}");
        assert!(row.quality >= min_quality, "{}: quality {}", row.key, row.quality);
        assert!(row.accuracy > 90.0, "{}: accuracy {}", row.key, row.accuracy);
        assert_eq!(row.weight_bit_mismatches, 0, "{}", row.key);
        assert!(row.prob_max_diff < 1e-4, "{}: {}", row.key, row.prob_max_diff);
        assert!(row.file_bytes < f32_file_bytes(&f32)?, "{}", row.key);
    }
    // Without scales the integer types round every weight to 0 or ±1: the network collapses.
    let (naive, _) =
        pollster::block_on(study::evaluate(ctx, &f32, Variant::Plain(SafeDtype::I8), &digits, Some(&reference), 20))?;
    assert!(naive.accuracy < 30.0, "{naive:?}");
    Ok(())
}

fn f32_file_bytes(f: &CnnFile) -> anyhow::Result<u64> {
    Ok(f.to_bytes()?.len() as u64)
}

#[test]
fn cnn_files_round_trip_and_bad_ones_are_errors() -> anyhow::Result<()> {
    let (f32, _) = mnist()?;
    for v in [
        Variant::Scaled(SafeDtype::U16, Granularity::Row),
        Variant::Weft(WeftQuant { bits: 3, group: 32, scheme: Scheme::Asym }),
    ] {
        let converted = v.convert(&f32)?;
        let back = CnnFile::parse(&converted.to_bytes()?)?;
        assert_eq!(back, converted, "{}", v.key());
    }
    assert_eq!(Variant::parse("I8/channel"), Some(Variant::Scaled(SafeDtype::I8, Granularity::Row)));
    assert_eq!(Variant::parse("I9"), None);
    let bytes = f32.to_bytes()?;
    assert!(CnnFile::parse(&bytes[..bytes.len() - 4]).is_err());
    let mut broken = f32.clone();
    broken.config.layers.remove(1); // the reshape: conv1 then receives [784]
    assert!(CnnFile::parse(&broken.to_bytes()?).is_err());
    let mut empty = f32.clone();
    empty.config.input = vec![0];
    assert!(CnnFile::parse(&empty.to_bytes()?).is_err());
    let mut huge = f32.clone();
    if let weft::model::cnn::CnnLayer::Dense { outputs, .. } = &mut huge.config.layers[0] {
        *outputs = usize::MAX / 2;
    }
    assert!(CnnFile::parse(&huge.to_bytes()?).is_err());
    assert!(Digits::parse(&[0u8; 786], 784).is_err());
    let _ = Tolerance::EXACT;
    Ok(())
}
