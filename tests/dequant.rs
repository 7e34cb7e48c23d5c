//! The GPU decoder against the CPU reference for every storage type, on seeded random data with
//! the edge cases forced in, compared bit for bit (NaN bits included), on the native adapter.

use weft::format::{GgmlType, SafeDtype, StorageType};
use weft::gpu::DType;
use weft::ops::dequant::{self, all_types};
use weft::quant;
use weft::Error;

mod gpu_context;
use gpu_context::ctx;

/// Ragged sizes: not a multiple of the workgroup, of four bytes, or (for blocks) of many blocks.
fn sizes(ty: StorageType) -> Vec<usize> {
    match ty {
        StorageType::Ggml(t) if t.block_elements() > 1 => {
            let b = t.block_elements() as usize;
            vec![b, 3 * b, 37 * b, 1001 * b]
        }
        StorageType::Safe(SafeDtype::F4) => vec![2, 30, 258, 70_002],
        _ => vec![1, 3, 255, 257, 70_001],
    }
}

#[test]
fn every_type_matches_the_cpu_bit_for_bit() -> anyhow::Result<()> {
    let ctx = ctx();
    let mut failures = Vec::new();
    for (t, ty) in all_types().into_iter().enumerate() {
        for (s, n) in sizes(ty).into_iter().enumerate() {
            let seed = (t * 16 + s) as u64;
            let r = pollster::block_on(dequant::self_test(ctx, ty, seed, n))?;
            if r.mismatches != 0 {
                failures.push(format!("{r:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} cases differ:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

#[test]
fn float_samples_reach_nan_and_infinity() -> anyhow::Result<()> {
    // The comparison above is only as good as its data: the float types must exercise NaN and
    // infinities (E4M3 has no infinity, FP4 neither).
    for d in [SafeDtype::F64, SafeDtype::F32, SafeDtype::F16, SafeDtype::BF16, SafeDtype::F8E5M2] {
        let r = pollster::block_on(dequant::self_test(ctx(), StorageType::Safe(d), 3, 4096))?;
        assert!(r.nan > 0 && r.infinite > 0, "{r:?}");
        assert_eq!(r.mismatches, 0, "{r:?}");
    }
    Ok(())
}

#[test]
fn grid_spans_two_dimensions() -> anyhow::Result<()> {
    // More than 65535 workgroups of 256: the 2-D grid path, on a byte type and a block type.
    let ctx = ctx();
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension as usize;
    for (ty, n) in [
        (StorageType::Safe(SafeDtype::U8), max * 256 + 300),
        (StorageType::Ggml(GgmlType::Q4_K), (max * 256).div_ceil(256) * 256 + 512),
    ] {
        let r = pollster::block_on(dequant::self_test(ctx, ty, 99, n))?;
        assert_eq!(r.mismatches, 0, "{r:?}");
    }
    Ok(())
}

#[test]
fn shape_errors_are_typed() -> anyhow::Result<()> {
    let ctx = ctx();
    let q4 = StorageType::Ggml(GgmlType::Q4_0);
    let words = ctx.upload_u32("w", &[9], &[1; 9])?; // 36 bytes: two Q4_0 blocks
    let short = ctx.upload_u32("w", &[8], &[1; 8])?;
    let out = ctx.zeros("out", &[64], DType::F32)?;
    let ragged = ctx.zeros("out", &[40], DType::F32)?;
    let d = pollster::block_on(dequant::dequant(ctx, q4, &words, &out))?;
    ctx.run(&[&d]);
    let cases = [
        pollster::block_on(dequant::dequant(ctx, q4, &short, &out)).err(),
        pollster::block_on(dequant::dequant(ctx, q4, &words, &ragged)).err(),
        pollster::block_on(dequant::dequant(ctx, q4, &out, &out)).err(),
    ];
    assert!(matches!(cases[0], Some(Error::Shape { op: "dequant", .. })), "{:?}", cases[0]);
    assert!(matches!(cases[1], Some(Error::Decode { ty: "Q4_0", .. })), "{:?}", cases[1]);
    assert!(matches!(cases[2], Some(Error::Shape { op: "dequant", .. })), "{:?}", cases[2]);
    Ok(())
}

#[test]
fn gpu_decodes_a_known_block() -> anyhow::Result<()> {
    // Q4_1 with d = 0.25, m = -1 and nibble j in byte j: independent of the random data path.
    let mut block = vec![0x00, 0x34, 0x00, 0xBC];
    block.extend((0..16u8).map(|j| j * 17));
    let got = pollster::block_on(dequant::gpu_decode(
        ctx(),
        StorageType::Ggml(GgmlType::Q4_1),
        &block,
        32,
    ))?;
    let want: Vec<f32> = (0..32).map(|e| (e % 16) as f32 * 0.25 - 1.0).collect();
    assert_eq!(got, want);
    assert_eq!(quant::decode_to_f32(StorageType::Ggml(GgmlType::Q4_1), &block, 32)?, want);
    Ok(())
}

#[test]
fn names_resolve_to_types() {
    for ty in all_types() {
        let name = match ty {
            StorageType::Ggml(GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) => {
                format!("gguf:{}", ty.name())
            }
            _ => ty.name().to_string(),
        };
        assert_eq!(dequant::storage_type_from_name(&name), Some(ty), "{name}");
    }
    assert_eq!(dequant::storage_type_from_name("Q8_1"), None);
}
