//! x86-64 AVX2 + FMA (+ F16C for the block scales) versions of the kernels in `kernels.rs`, same results up to the order of
//! floating-point sums (quantization is bit for bit the scalar one). Callers check the CPU
//! features first ([`super::kernels::Isa::detect`]).

use std::arch::x86_64::*;

use super::kernels::{block_scales_with, BlockFormat, BlockQ8, BLOCK};

/// The f16 at `b[at..at + 2]` as f32 in one F16C instruction (a software conversion per block
/// costs as much as the block's products).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn half_at(b: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([b[at], b[at + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// The sum of a vector's eight lanes (also the CPU attention's, src/cpu/attention/avx2.rs).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C; `x.len()` = 32 × `out.len()` at least.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize(x: &[f32], out: &mut [BlockQ8]) {
    let sign = _mm256_set1_ps(-0.0);
    for (xs, b) in x.chunks_exact(BLOCK).zip(out.iter_mut()) {
        let p = xs.as_ptr();
        let v = [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24))];
        let m = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
            _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])),
        );
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_movehdup_ps(m));
        let d = _mm_cvtss_f32(m) / 127.0;
        let id = _mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
        // Round to nearest even, as the scalar reference does.
        let q: [__m256i; 4] = [
            _mm256_cvtps_epi32(_mm256_mul_ps(v[0], id)),
            _mm256_cvtps_epi32(_mm256_mul_ps(v[1], id)),
            _mm256_cvtps_epi32(_mm256_mul_ps(v[2], id)),
            _mm256_cvtps_epi32(_mm256_mul_ps(v[3], id)),
        ];
        let sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        // Packing interleaves the 128-bit lanes; the permutation restores element order.
        let w16 = _mm256_packs_epi32(q[0], q[1]);
        let w16b = _mm256_packs_epi32(q[2], q[3]);
        let w8 = _mm256_packs_epi16(w16, w16b);
        let w8 = _mm256_permutevar8x32_epi32(w8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(b.q.as_mut_ptr() as *mut __m256i, w8);
        b.d = d;
        b.s = d * sum as f32;
    }
}

/// The 32 nibbles of a Q4 block as bytes: low nibbles (elements 0..16), then high ones.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles(qs: *const u8) -> __m256i {
    let raw = _mm_loadu_si128(qs as *const __m128i);
    let m4 = _mm_set1_epi8(0xF);
    let lo = _mm_and_si128(raw, m4);
    let hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
    _mm256_set_m128i(hi, lo)
}

/// Bit j of the little-endian u32 at `p` as 0x10 in byte j: the fifth bits of a Q5 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fifth_bits(p: *const u8) -> __m256i {
    let qh = _mm256_set1_epi32(std::ptr::read_unaligned(p as *const i32));
    // Byte j takes byte j / 8 of qh (each 128-bit lane holds all four), then bit j % 8 of it.
    let spread = _mm256_shuffle_epi8(
        qh,
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// The 32 bytes at `p`, each shifted right by `shift` (0 or 4) and masked to its low nibble.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibble_run(p: *const u8, shift: i32) -> __m256i {
    let raw = _mm256_loadu_si256(p as *const __m256i);
    _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(0xF))
}

/// Block `i`'s 32 integers in element order (`kernels::block_q`).
///
/// # Safety
/// AVX2; block `i` lies within `row`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack(f: BlockFormat, row: &[u8], i: usize) -> __m256i {
    let sb = f.stored_bytes();
    let p = row.as_ptr();
    match f {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 => nibbles(p.add((i + 1) * sb - 16)),
        BlockFormat::Q5_0 | BlockFormat::Q5_1 => {
            let qh = if f == BlockFormat::Q5_0 { 2 } else { 4 };
            _mm256_or_si256(nibbles(p.add((i + 1) * sb - 16)), fifth_bits(p.add(i * sb + qh)))
        }
        BlockFormat::Q8_0 => _mm256_loadu_si256(p.add(i * sb + 2) as *const __m256i),
        BlockFormat::Q4_K | BlockFormat::Q5_K => {
            let (b, j) = (p.add((i / 8) * sb), i % 8);
            let qs = if f == BlockFormat::Q4_K { 16 } else { 48 };
            let low = nibble_run(b.add(qs + 32 * (j / 2)), 4 * (j as i32 % 2));
            if f == BlockFormat::Q4_K {
                return low;
            }
            // Bit j of each qh byte, moved to bit 4.
            let qh = _mm256_loadu_si256(b.add(16) as *const __m256i);
            let high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j as i32)), _mm256_set1_epi8(1));
            _mm256_or_si256(low, _mm256_slli_epi16(high, 4))
        }
        BlockFormat::Q6_K => {
            let (b, n, k) = (p.add((i / 8) * sb), (i % 8) / 4, i % 4);
            let low = nibble_run(b.add(64 * n + 32 * (k & 1)), 4 * (k as i32 >> 1));
            let qh = _mm256_loadu_si256(b.add(128 + 32 * n) as *const __m256i);
            let high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32)), _mm256_set1_epi8(3));
            _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), _mm256_set1_epi8(32))
        }
    }
}

/// `R` rows times `T` token rows of activations, `[token][row]`: each weight block is unpacked
/// (and its scales read) once for the `T` tokens of a prompt pass, each activation block loaded
/// once for the `R` rows.
///
/// # Safety
/// AVX2, FMA and F16C; every row holds whole stored blocks of `f`, all of equal length.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8_tile<const R: usize, const T: usize>(
    f: BlockFormat,
    rows: [&[u8]; R],
    xs: [&[BlockQ8]; T],
) -> [[f32; R]; T] {
    // One instance per format: with the format a constant, its unpacking and scales compile to
    // straight-line code. Dispatching on it per block cost a decode step ~40 % (the loop is not
    // unswitched over eight formats).
    match f {
        BlockFormat::Q4_0 => tile::<0, R, T>(rows, xs),
        BlockFormat::Q4_1 => tile::<1, R, T>(rows, xs),
        BlockFormat::Q8_0 => tile::<2, R, T>(rows, xs),
        BlockFormat::Q5_0 => tile::<3, R, T>(rows, xs),
        BlockFormat::Q5_1 => tile::<4, R, T>(rows, xs),
        BlockFormat::Q4_K => tile::<5, R, T>(rows, xs),
        BlockFormat::Q5_K => tile::<6, R, T>(rows, xs),
        BlockFormat::Q6_K => tile::<7, R, T>(rows, xs),
    }
}

/// [`dot_q8_tile`] for `BlockFormat::ALL[F]`.
///
/// # Safety
/// As [`dot_q8_tile`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const F: usize, const R: usize, const T: usize>(rows: [&[u8]; R], xs: [&[BlockQ8]; T]) -> [[f32; R]; T] {
    let f = BlockFormat::ALL[F];
    let ones = _mm256_set1_epi16(1);
    let signed = f.signed_q();
    let blocks = xs.iter().fold(rows.iter().map(|r| f.blocks_in(r.len())).min().unwrap_or(0), |n, x| n.min(x.len()));
    let mut acc = [[_mm256_setzero_ps(); R]; T];
    let mut offset = [[0f32; R]; T];
    for i in 0..blocks {
        let xb: [&BlockQ8; T] = std::array::from_fn(|t| xs[t].get_unchecked(i));
        let xq: [__m256i; T] = std::array::from_fn(|t| _mm256_loadu_si256(xb[t].q.as_ptr() as *const __m256i));
        for r in 0..R {
            // SAFETY: F16C is enabled here.
            let s = block_scales_with(f, rows[r], i, |b, at| unsafe { half_at(b, at) });
            let w = unpack(f, rows[r], i);
            // maddubs multiplies unsigned by signed: signed weights go in as |w| times x with
            // w's sign.
            let magnitude = if signed { _mm256_sign_epi8(w, w) } else { w };
            // The pairs' sums of each half times its factor (Q6_K's two sub-block scales).
            let factors = if s.half == [1, 1] {
                ones
            } else {
                _mm256_set_m128i(_mm_set1_epi16(s.half[1] as i16), _mm_set1_epi16(s.half[0] as i16))
            };
            for t in 0..T {
                let x = if signed { _mm256_sign_epi8(xq[t], w) } else { xq[t] };
                let products = _mm256_maddubs_epi16(magnitude, x);
                // Σ (q d + m) x = d Σ q x + m Σ x, with Σ x = s per block.
                offset[t][r] += s.m * xb[t].s;
                let sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(products, factors));
                acc[t][r] = _mm256_fmadd_ps(_mm256_set1_ps(s.d * xb[t].d), sums, acc[t][r]);
            }
        }
    }
    let mut out = [[0f32; R]; T];
    for t in 0..T {
        for r in 0..R {
            out[t][r] = hsum(acc[t][r]) + offset[t][r];
        }
    }
    out
}

/// # Safety
/// AVX2, FMA and F16C; `row` holds whole blocks of `f`, and `x` at least 32 values per block.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f32(f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (b, xs) in row.chunks_exact(f.stored_bytes()).zip(x.chunks_exact(BLOCK)) {
        let d = _mm256_set1_ps(half_at(b, 0));
        let (q, bias) = match f {
            BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
                let w = nibbles(b.as_ptr().add(b.len() - 16));
                let bias = if f == BlockFormat::Q4_0 { None } else { Some(_mm256_set1_ps(half_at(b, 2))) };
                (w, bias)
            }
            BlockFormat::Q8_0 => (_mm256_loadu_si256(b.as_ptr().add(2) as *const __m256i), None),
            _ => unreachable!("{f:?} has no f32 block kernel"),
        };
        let lanes = [_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)];
        for k in 0..4 {
            let bytes = if k % 2 == 0 { lanes[k / 2] } else { _mm_srli_si128(lanes[k / 2], 8) };
            let ints = match f {
                BlockFormat::Q8_0 => _mm256_cvtepi8_epi32(bytes),
                _ => _mm256_cvtepu8_epi32(bytes),
            };
            let mut w = _mm256_cvtepi32_ps(ints);
            w = match (f, bias) {
                (BlockFormat::Q4_0, _) => _mm256_mul_ps(_mm256_sub_ps(w, _mm256_set1_ps(8.0)), d),
                (_, Some(m)) => _mm256_fmadd_ps(w, d, m),
                _ => _mm256_mul_ps(w, d),
            };
            acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(xs.as_ptr().add(8 * k)), acc);
        }
    }
    hsum(acc)
}

/// # Safety
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), acc[0]);
        acc[1] = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i + 8)), _mm256_loadu_ps(b.as_ptr().add(i + 8)), acc[1]);
        i += 16;
    }
    let mut sum = hsum(_mm256_add_ps(acc[0], acc[1]));
    while i < n {
        sum += a[i] * b[i];
        i += 1;
    }
    sum
}

/// # Safety
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let va = _mm256_set1_ps(a);
    let mut i = 0;
    while i + 8 <= n {
        let p = y.as_mut_ptr().add(i);
        _mm256_storeu_ps(p, _mm256_fmadd_ps(va, _mm256_loadu_ps(x.as_ptr().add(i)), _mm256_loadu_ps(p)));
        i += 8;
    }
    while i < n {
        y[i] += a * x[i];
        i += 1;
    }
}
