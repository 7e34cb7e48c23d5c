//! WebAssembly SIMD128 reads of f16 and q8 cache rows (see `attention.rs`): eight values a step
//! as two f32x4, converted in registers. SIMD128 has no f16 conversion, so an f16's bits are
//! moved into an f32's exponent and mantissa and scaled by 2^112 (exact for normal and
//! subnormal halves, wasm keeps subnormals), infinities and NaNs given the f32 exponent.
//! Same results as the scalar kernels up to the order of the sums.

use core::arch::wasm32::*;

#[inline]
fn hsum(v: v128) -> f32 {
    f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v) + f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v)
}

/// Four f16 (in the low halves of u32 lanes) as f32.
#[inline]
fn f16x4_to_f32(h: v128) -> v128 {
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let bits = v128_and(h, u32x4_splat(0x7fff));
    // 2^112 moves the f16 exponent bias (15) to the f32 one (127).
    let finite = f32x4_mul(i32x4_shl(bits, 13), f32x4_splat(f32::from_bits((127 + 112) << 23)));
    let special = v128_or(u32x4_splat(0x7f80_0000), i32x4_shl(bits, 13));
    v128_or(v128_bitselect(special, finite, u32x4_ge(bits, u32x4_splat(0x7c00))), sign)
}

/// Values `i..i + 8` of an f16 row (words of two, low half first: little-endian memory order).
#[inline]
fn f16x8(row: &[u32], i: usize) -> (v128, v128) {
    assert!(i + 8 <= 2 * row.len());
    // SAFETY: the 16 bytes from value i are inside `row`.
    let h = unsafe { v128_load(row.as_ptr().cast::<u16>().add(i).cast()) };
    (f16x4_to_f32(u32x4_extend_low_u16x8(h)), f16x4_to_f32(u32x4_extend_high_u16x8(h)))
}

/// Integers `i..i + 8` of a q8 row's values (bytes in value order).
#[inline]
fn q8x8(values: &[u32], i: usize) -> (v128, v128) {
    assert!(i + 8 <= 4 * values.len());
    // SAFETY: the 8 bytes from byte i are inside `values`.
    let b = i16x8_extend_low_i8x16(unsafe { v128_load64_zero(values.as_ptr().cast::<u8>().add(i).cast()) });
    (f32x4_convert_i32x4(i32x4_extend_low_i16x8(b)), f32x4_convert_i32x4(i32x4_extend_high_i16x8(b)))
}

/// Four f32 from `x[i..i + 4]`.
#[inline]
fn f32x4_at(x: &[f32], i: usize) -> v128 {
    assert!(i + 4 <= x.len());
    // SAFETY: checked above.
    unsafe { v128_load(x.as_ptr().add(i).cast()) }
}

/// Σ x·row over `x.len()` values, `load(i)` giving values `i..i + 8`, `at(d)` one of the tail.
#[inline]
fn dot_with(x: &[f32], load: impl Fn(usize) -> (v128, v128), at: impl Fn(usize) -> f32) -> f32 {
    let n = x.len();
    let mut acc = [f32x4_splat(0.0); 2];
    let mut i = 0;
    while i + 8 <= n {
        let (lo, hi) = load(i);
        acc[0] = f32x4_add(acc[0], f32x4_mul(f32x4_at(x, i), lo));
        acc[1] = f32x4_add(acc[1], f32x4_mul(f32x4_at(x, i + 4), hi));
        i += 8;
    }
    let mut sum = hsum(f32x4_add(acc[0], acc[1]));
    for (d, v) in x.iter().enumerate().skip(i) {
        sum += v * at(d);
    }
    sum
}

/// y += a·row over `y.len()` values.
#[inline]
fn axpy_with(a: f32, y: &mut [f32], load: impl Fn(usize) -> (v128, v128), at: impl Fn(usize) -> f32) {
    let n = y.len();
    let va = f32x4_splat(a);
    let mut i = 0;
    while i + 8 <= n {
        let (lo, hi) = load(i);
        let (y0, y1) = (f32x4_add(f32x4_at(y, i), f32x4_mul(va, lo)), f32x4_add(f32x4_at(y, i + 4), f32x4_mul(va, hi)));
        // SAFETY: i + 8 <= y.len().
        unsafe {
            v128_store(y.as_mut_ptr().add(i).cast(), y0);
            v128_store(y.as_mut_ptr().add(i + 4).cast(), y1);
        }
        i += 8;
    }
    for (d, y) in y.iter_mut().enumerate().skip(i) {
        *y += a * at(d);
    }
}

pub fn dot_f16(x: &[f32], row: &[u32]) -> f32 {
    dot_with(x, |i| f16x8(row, i), |d| super::f16_at(row, d))
}

/// Σ x·q over the integers of a q8 row (without its scale).
pub fn dot_q8(x: &[f32], values: &[u32]) -> f32 {
    dot_with(x, |i| q8x8(values, i), |d| super::q8_at(values, d))
}

pub fn axpy_f16(a: f32, row: &[u32], y: &mut [f32]) {
    axpy_with(a, y, |i| f16x8(row, i), |d| super::f16_at(row, d))
}

/// y += a·q over the integers of a q8 row (`a` carries the scale).
pub fn axpy_q8(a: f32, values: &[u32], y: &mut [f32]) {
    axpy_with(a, y, |i| q8x8(values, i), |d| super::q8_at(values, d))
}
