//! AVX2 + FMA + F16C reads of f16 and q8 cache rows (see `attention.rs`): eight values a step,
//! converted to f32 in registers (`vcvtph2ps` for f16, sign extension for q8), so a row is never
//! decoded to memory. Same results as the scalar kernels up to the order of the sums.

use std::arch::x86_64::*;

use crate::cpu::avx2::hsum;

/// Values `i..i + 8` of an f16 row (words of two, low half first: little-endian memory order).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x8(row: &[u32], i: usize) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(row.as_ptr().cast::<u16>().add(i).cast()))
}

/// Integers `i..i + 8` of a q8 row's values (bytes in value order).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8x8(values: &[u32], i: usize) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(values.as_ptr().cast::<i8>().add(i).cast())))
}

/// Σ x·row over `x.len()` values, `load(i)` giving values `i..i + 8`, `at(d)` one of the tail.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_with(x: &[f32], load: impl Fn(usize) -> __m256, at: impl Fn(usize) -> f32) -> f32 {
    let n = x.len();
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i)), load(i), acc[0]);
        acc[1] = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i + 8)), load(i + 8), acc[1]);
        i += 16;
    }
    if i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i)), load(i), acc[0]);
        i += 8;
    }
    let mut sum = hsum(_mm256_add_ps(acc[0], acc[1]));
    for (d, v) in x.iter().enumerate().skip(i) {
        sum += v * at(d);
    }
    sum
}

/// y += a·row over `y.len()` values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn axpy_with(a: f32, y: &mut [f32], load: impl Fn(usize) -> __m256, at: impl Fn(usize) -> f32) {
    let n = y.len();
    let va = _mm256_set1_ps(a);
    let mut i = 0;
    while i + 8 <= n {
        let p = y.as_mut_ptr().add(i);
        _mm256_storeu_ps(p, _mm256_fmadd_ps(va, load(i), _mm256_loadu_ps(p)));
        i += 8;
    }
    for (d, y) in y.iter_mut().enumerate().skip(i) {
        *y += a * at(d);
    }
}

/// # Safety
/// AVX2, FMA and F16C; `row` holds `x.len()` f16 values.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16(x: &[f32], row: &[u32]) -> f32 {
    assert!(2 * row.len() >= x.len());
    dot_with(x, |i| f16x8(row, i), |d| super::f16_at(row, d))
}

/// Σ x·q over the integers of a q8 row (without its scale).
///
/// # Safety
/// AVX2, FMA and F16C; `values` holds `x.len()` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8(x: &[f32], values: &[u32]) -> f32 {
    assert!(4 * values.len() >= x.len());
    dot_with(x, |i| q8x8(values, i), |d| super::q8_at(values, d))
}

/// # Safety
/// AVX2, FMA and F16C; `row` holds `y.len()` f16 values.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn axpy_f16(a: f32, row: &[u32], y: &mut [f32]) {
    assert!(2 * row.len() >= y.len());
    axpy_with(a, y, |i| f16x8(row, i), |d| super::f16_at(row, d))
}

/// y += a·q over the integers of a q8 row (`a` carries the scale).
///
/// # Safety
/// AVX2, FMA and F16C; `values` holds `y.len()` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn axpy_q8(a: f32, values: &[u32], y: &mut [f32]) {
    assert!(4 * values.len() >= y.len());
    axpy_with(a, y, |i| q8x8(values, i), |d| super::q8_at(values, d))
}
