//! x86-64 AVX2 + FMA (+ F16C for the block scales) versions of the kernels in `kernels.rs`, same results up to the order of
//! floating-point sums (quantization is bit for bit the scalar one). Callers check the CPU
//! features first ([`super::kernels::Isa::detect`]).

use std::arch::x86_64::*;

use super::kernels::{BlockFormat, BlockQ8, BLOCK};

/// The f16 at `b[at..at + 2]` as f32 in one F16C instruction (a software conversion per block
/// costs as much as the block's products).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn half_at(b: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([b[at], b[at + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum(v: __m256) -> f32 {
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

/// # Safety
/// AVX2, FMA and F16C; `row` holds whole blocks of `f`, and `x` at least as many blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8(f: BlockFormat, row: &[u8], x: &[BlockQ8]) -> f32 {
    dot_q8_rows::<1>(f, [row], x)[0]
}

/// [`dot_q8`] of `R` rows with the same activations: independent accumulators keep the
/// floating-point units busy where one row's chain of dependent adds would stall them.
///
/// # Safety
/// As [`dot_q8`], for every row; all rows of equal length.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8_rows<const R: usize>(f: BlockFormat, rows: [&[u8]; R], x: &[BlockQ8]) -> [f32; R] {
    dot_q8_tile::<R, 1>(f, rows, [x])[0]
}

/// `R` rows times `T` token rows of activations: each weight block is unpacked (and its
/// scales converted) once for the `T` tokens of a prompt pass.
///
/// # Safety
/// As [`dot_q8`], for every row and token; all of equal length.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8_tile<const R: usize, const T: usize>(
    f: BlockFormat,
    rows: [&[u8]; R],
    xs: [&[BlockQ8]; T],
) -> [[f32; R]; T] {
    let ones = _mm256_set1_epi16(1);
    let bb = f.block_bytes();
    let blocks = xs.iter().fold(rows[0].len() / bb, |n, x| n.min(x.len()));
    let mut acc = [[_mm256_setzero_ps(); R]; T];
    let mut offset = [[0f32; R]; T];
    for i in 0..blocks {
        let xb: [&BlockQ8; T] = std::array::from_fn(|t| xs[t].get_unchecked(i));
        let xq: [__m256i; T] = std::array::from_fn(|t| _mm256_loadu_si256(xb[t].q.as_ptr() as *const __m256i));
        for r in 0..R {
            let b = rows[r].get_unchecked(i * bb..(i + 1) * bb);
            let d = half_at(b, 0);
            let w = match f {
                BlockFormat::Q4_0 | BlockFormat::Q4_1 => nibbles(b.as_ptr().add(bb - 16)),
                BlockFormat::Q8_0 => _mm256_loadu_si256(b.as_ptr().add(2) as *const __m256i),
            };
            let m = match f {
                BlockFormat::Q4_0 => -8.0 * d,
                BlockFormat::Q4_1 => half_at(b, 2),
                BlockFormat::Q8_0 => 0.0,
            };
            for t in 0..T {
                let products = match f {
                    // maddubs multiplies unsigned by signed: for Q8_0, |w| times x with w's sign.
                    BlockFormat::Q8_0 => _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq[t], w)),
                    _ => _mm256_maddubs_epi16(w, xq[t]),
                };
                // Q4_0: Σ (q - 8) x = Σ q x - 8 Σ x; Q4_1: Σ (q d + m) x = d Σ q x + m Σ x.
                offset[t][r] += m * xb[t].s;
                let sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(products, ones));
                acc[t][r] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb[t].d), sums, acc[t][r]);
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
    for (b, xs) in row.chunks_exact(f.block_bytes()).zip(x.chunks_exact(BLOCK)) {
        let d = _mm256_set1_ps(half_at(b, 0));
        let (q, bias) = match f {
            BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
                let w = nibbles(b.as_ptr().add(b.len() - 16));
                let bias = if f == BlockFormat::Q4_0 { None } else { Some(_mm256_set1_ps(half_at(b, 2))) };
                (w, bias)
            }
            BlockFormat::Q8_0 => (_mm256_loadu_si256(b.as_ptr().add(2) as *const __m256i), None),
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
