//! Hand-computed values per type, and the integer-only conversions checked against Rust's own
//! `as f32` and the `half` crate on every pattern where those define the bits.

use super::*;
use crate::format::{GgmlType, SafeDtype};
use rand::{rngs::SmallRng, Rng, SeedableRng};

fn safe(d: SafeDtype, bytes: &[u8], n: usize) -> Vec<f32> {
    decode_to_f32(StorageType::Safe(d), bytes, n).unwrap()
}

fn ggml(t: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / t.block_bytes() as usize * t.block_elements() as usize;
    decode_to_f32(StorageType::Ggml(t), bytes, n).unwrap()
}

fn block(len: usize, fill: u8, fields: &[(usize, &[u8])]) -> Vec<u8> {
    let mut b = vec![fill; len];
    for (at, bytes) in fields {
        b[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    b
}

#[test]
fn e2m1_table() {
    let bytes: Vec<u8> = (0..8).map(|i| (2 * i) | ((2 * i + 1) << 4)).collect();
    let got = safe(SafeDtype::F4, &bytes, 16);
    let mag = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for (i, v) in got.iter().enumerate() {
        let want: f32 = if i < 8 { mag[i] } else { -mag[i - 8] };
        assert_eq!(v.to_bits(), want.to_bits(), "nibble {i}");
    }
}

#[test]
fn fp8_edges() {
    let e4 = safe(SafeDtype::F8E4M3, &[0x7E, 0xFE, 0x01, 0x08, 0x38, 0x80], 6);
    assert_eq!(e4[..5], [448.0, -448.0, 2f32.powi(-9), 2f32.powi(-6), 1.0]);
    assert_eq!(e4[5].to_bits(), 0x8000_0000);
    let nan = safe(SafeDtype::F8E4M3, &[0x7F, 0xFF], 2);
    assert_eq!(nan.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), [0x7FC0_0000, 0xFFC0_0000]);
    let e5 = safe(SafeDtype::F8E5M2, &[0x7C, 0xFC, 0x7B, 0x01, 0x3C, 0x7E], 6);
    assert_eq!(e5[..5], [f32::INFINITY, f32::NEG_INFINITY, 57344.0, 2f32.powi(-16), 1.0]);
    assert_eq!(e5[5].to_bits(), 0x7FC0_0000);
}

#[test]
fn f16_and_bf16_agree_with_half_on_every_pattern() {
    for h in 0..=u16::MAX {
        let got = safe(SafeDtype::F16, &h.to_le_bytes(), 1)[0].to_bits();
        let want = half::f16::from_bits(h).to_f32().to_bits();
        if half::f16::from_bits(h).is_nan() {
            // Sign and payload kept, quiet bit set.
            assert_eq!(got, (h as u32 & 0x8000) << 16 | 0x7FC0_0000 | (h as u32 & 0x3FF) << 13);
        } else {
            assert_eq!(got, want, "f16 {h:#06x}");
        }
        let got = safe(SafeDtype::BF16, &h.to_le_bytes(), 1)[0].to_bits();
        let want = half::bf16::from_bits(h).to_f32().to_bits();
        assert_eq!(got, want | if f32::from_bits(want).is_nan() { 0x40_0000 } else { 0 });
    }
}

#[test]
fn f32_signalling_nan_is_quieted_and_everything_else_copied() {
    let words = [0x7F80_0001u32, 0xFF80_0001, 1, 0x8000_0000, 0x7F80_0000, 0x3F80_0000];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let got: Vec<u32> = safe(SafeDtype::F32, &bytes, 6).iter().map(|v| v.to_bits()).collect();
    assert_eq!(got, [0x7FC0_0001, 0xFFC0_0001, 1, 0x8000_0000, 0x7F80_0000, 0x3F80_0000]);
}

#[test]
fn f64_rounds_like_as_f32() {
    let mut rng = SmallRng::seed_from_u64(5);
    let mut values: Vec<u64> = (0..200_000).map(|_| rng.random()).collect();
    values.extend(sample::random_bytes(StorageType::Safe(SafeDtype::F64), 9, 50_000).unwrap()
        .chunks_exact(8).map(le_u64));
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let got = safe(SafeDtype::F64, &bytes, values.len());
    for (v, g) in values.iter().zip(&got) {
        let f = f64::from_bits(*v);
        if f.is_nan() {
            assert!(g.is_nan() && g.to_bits() & 0x40_0000 != 0 && g.is_sign_negative() == f.is_sign_negative());
            assert_eq!(g.to_bits() & 0x3F_FFFF, (v >> 29) as u32 & 0x3F_FFFF);
        } else {
            assert_eq!(g.to_bits(), (f as f32).to_bits(), "{v:#018x}");
        }
    }
    let edges = safe(SafeDtype::F64, &0x47EF_FFFF_F000_0000u64.to_le_bytes(), 1);
    assert_eq!(edges[0], f32::INFINITY);
}

#[test]
fn integers_round_like_as_f32() {
    let mut rng = SmallRng::seed_from_u64(6);
    for _ in 0..100_000 {
        let v: u64 = rng.random::<u64>() >> rng.random_range(0..64);
        let b = v.to_le_bytes();
        assert_eq!(safe(SafeDtype::U64, &b, 1)[0].to_bits(), (v as f32).to_bits());
        assert_eq!(safe(SafeDtype::I64, &b, 1)[0].to_bits(), (v as i64 as f32).to_bits());
        assert_eq!(safe(SafeDtype::U32, &b[..4], 1)[0].to_bits(), (v as u32 as f32).to_bits());
        assert_eq!(safe(SafeDtype::I32, &b[..4], 1)[0].to_bits(), (v as i32 as f32).to_bits());
        assert_eq!(safe(SafeDtype::I16, &b[..2], 1)[0], v as i16 as f32);
        assert_eq!(safe(SafeDtype::U16, &b[..2], 1)[0], v as u16 as f32);
        assert_eq!(safe(SafeDtype::I8, &b[..1], 1)[0], v as i8 as f32);
        assert_eq!(safe(SafeDtype::U8, &b[..1], 1)[0], v as u8 as f32);
    }
    assert_eq!(safe(SafeDtype::I64, &i64::MIN.to_le_bytes(), 1)[0], -(2f32.powi(63)));
    assert_eq!(safe(SafeDtype::U32, &16_777_217u32.to_le_bytes(), 1)[0], 16_777_216.0);
    assert_eq!(safe(SafeDtype::U32, &16_777_219u32.to_le_bytes(), 1)[0], 16_777_220.0);
    assert_eq!(safe(SafeDtype::Bool, &[0, 1, 2, 255], 4), [0.0, 1.0, 1.0, 1.0]);
}

#[test]
fn q4_0_and_q4_1_blocks() {
    let qs: Vec<u8> = (0..16).map(|j| j | ((15 - j) << 4)).collect();
    let got = ggml(GgmlType::Q4_0, &block(18, 0, &[(0, &[0x00, 0x38]), (2, &qs)]));
    for j in 0..16 {
        assert_eq!(got[j], (j as f32 - 8.0) * 0.5);
        assert_eq!(got[j + 16], (7.0 - j as f32) * 0.5);
    }
    let qs: Vec<u8> = (0..16).map(|j| j * 17).collect();
    let got = ggml(GgmlType::Q4_1, &block(20, 0, &[(0, &[0x00, 0x34, 0x00, 0xBC]), (4, &qs)]));
    for j in 0..16 {
        assert_eq!(got[j], j as f32 * 0.25 - 1.0);
        assert_eq!(got[j + 16], got[j]);
    }
}

#[test]
fn q5_and_q8_blocks() {
    let b = block(22, 0x21, &[(0, &[0x00, 0x3C]), (2, &[0, 0, 0xFF, 0xFF])]);
    let got = ggml(GgmlType::Q5_0, &b);
    assert!(got[..16].iter().all(|&v| v == -15.0) && got[16..].iter().all(|&v| v == 2.0));
    let b = block(24, 0, &[(0, &[0x00, 0x40, 0x00, 0x38]), (4, &[1, 0, 0, 0])]);
    let got = ggml(GgmlType::Q5_1, &b);
    assert_eq!(got[0], 32.5);
    assert!(got[1..].iter().all(|&v| v == 0.5));
    let qs: Vec<u8> = (0..32).map(|j| (j as i8 - 16) as u8).collect();
    let mut b = block(34, 0, &[(0, &[0x00, 0x30]), (2, &qs)]);
    b[2] = 0x80;
    let got = ggml(GgmlType::Q8_0, &b);
    assert_eq!(got[0], -16.0);
    for (j, &v) in got.iter().enumerate().skip(1) {
        assert_eq!(v, (j as f32 - 16.0) * 0.125);
    }
}

#[test]
fn k_quant_blocks() {
    // Q2_K: scale 1, min 2, d 1, dmin 0.5; plane j of every byte holds j.
    let b = block(84, 0xE4, &[(0, &[0x21; 16]), (80, &[0x00, 0x3C, 0x00, 0x38])]);
    let got = ggml(GgmlType::Q2_K, &b);
    assert!((0..256).all(|e| got[e] == ((e % 128) / 32) as f32 - 1.0));
    // Q3_K: every 6-bit scale 33 (low nibble 1, high bits 2), d 1; hmask set, then clear.
    let mut b = block(110, 0xE4, &[(0, &[0xFF; 32]), (96, &[0x11; 8]), (104, &[0xAA; 4])]);
    b[108..110].copy_from_slice(&[0x00, 0x3C]);
    let got = ggml(GgmlType::Q3_K, &b);
    assert!((0..256).all(|e| got[e] == ((e % 128) / 32) as f32));
    b[..32].fill(0);
    let got = ggml(GgmlType::Q3_K, &b);
    assert!((0..256).all(|e| got[e] == ((e % 128) / 32) as f32 - 4.0));
    // Q4_K / Q5_K: every scale 2 and min 3, d = dmin = 1; nibbles 1 (low) and 5 (high).
    let scales = [2, 2, 2, 2, 3, 3, 3, 3, 0x32, 0x32, 0x32, 0x32];
    let b = block(144, 0x51, &[(0, &[0x00, 0x3C, 0x00, 0x3C]), (4, &scales)]);
    let got = ggml(GgmlType::Q4_K, &b);
    assert!((0..256).all(|e| got[e] == if e % 64 < 32 { -1.0 } else { 7.0 }));
    let b = block(176, 0x51, &[(0, &[0x00, 0x3C, 0x00, 0x3C]), (4, &scales), (16, &[0xFF; 32])]);
    let got = ggml(GgmlType::Q5_K, &b);
    assert!((0..256).all(|e| got[e] == if e % 64 < 32 { 31.0 } else { 39.0 }));
    // Q6_K: d 0.5, scales -1; q = 48 - 32 = 16 everywhere.
    let b = block(210, 0, &[(128, &[0xFF; 64]), (192, &[0xFF; 16]), (208, &[0x00, 0x38])]);
    assert!(ggml(GgmlType::Q6_K, &b).iter().all(|&v| v == -8.0));
}

#[test]
fn size_mismatches_are_typed_errors() {
    let cases = [
        (StorageType::Safe(SafeDtype::F32), 7usize, 2usize),
        (StorageType::Safe(SafeDtype::F4), 2, 3),
        (StorageType::Ggml(GgmlType::Q4_0), 18, 31),
        (StorageType::Ggml(GgmlType::Q6_K), 209, 256),
        (StorageType::Safe(SafeDtype::F64), 0, usize::MAX),
    ];
    for (ty, len, n) in cases {
        match decode_to_f32(ty, &vec![1u8; len], n) {
            Err(Error::Decode { ty: name, .. }) => assert_eq!(name, ty.name()),
            other => panic!("{ty:?} {len} bytes {n} elements: {other:?}"),
        }
    }
    assert!(decode_to_f32(StorageType::Ggml(GgmlType::Q8_0), &[], 0).unwrap().is_empty());
}

#[test]
fn words_are_little_endian_and_padded() {
    assert_eq!(pack_words(&[1, 2, 3, 4, 5]), [0x0403_0201, 5]);
    assert!(pack_words(&[]).is_empty());
}

#[test]
fn samples_are_sized_seeded_and_never_zero() {
    for ty in SafeDtype::ALL.map(StorageType::Safe).into_iter().chain(GgmlType::ALL.map(StorageType::Ggml)) {
        let n = 512;
        let a = sample::random_bytes(ty, 1, n).unwrap();
        assert_eq!(a.len() as u64, ty.bytes_for(n as u64).unwrap());
        assert_eq!(a, sample::random_bytes(ty, 1, n).unwrap());
        assert_ne!(a, sample::random_bytes(ty, 2, n).unwrap());
        assert!(a.iter().any(|&b| b != 0));
    }
}

#[test]
fn scale_products_are_exact_so_fma_cannot_change_a_result() {
    // Every block product is a finite f16 times an integer of magnitude below 2^13 (at most
    // |sc * q| = 128 * 32 in Q6_K), possibly in two steps whose partial products obey the same
    // bound. Exact products make round(a*b + c) == round(round(a*b) + c).
    let mut rng = SmallRng::seed_from_u64(8);
    let ks: Vec<i32> = [1, 3, 4095, 4096, 8191, -8191, -4096, -1]
        .into_iter()
        .chain((0..48).map(|_| rng.random_range(-8191..=8191)))
        .collect();
    for h in 0..=u16::MAX {
        let d = half::f16::from_bits(h);
        if !d.is_finite() {
            continue;
        }
        let d = d.to_f32();
        for &k in &ks {
            let p = d * k as f32;
            assert_eq!(p as f64, d as f64 * k as f64, "{h:#06x} * {k}");
            assert!(p == 0.0 || p.is_normal());
            let m = half::f16::from_bits(rng.random()).to_f32();
            if m.is_finite() {
                assert_eq!(d.mul_add(k as f32, -m).to_bits(), (p - m).to_bits());
            }
        }
    }
}
