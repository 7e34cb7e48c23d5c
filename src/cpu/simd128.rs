//! WebAssembly SIMD128 versions of the kernels in `kernels.rs`, same results up to the order of
//! floating-point sums (quantization is bit for bit the scalar one). SIMD128 is a compile-time
//! feature of the module (`-C target-feature=+simd128`): an engine without it refuses the whole
//! module, so where this code runs, the instructions exist.
//!
//! SIMD128 has no 8-bit dot product: bytes multiply into i16 lanes (`extmul`) and sum pairwise
//! into i32 (see `block_isum`).

use core::arch::wasm32::*;

use super::kernels::{half_at, BlockFormat, BlockQ8, BLOCK};

#[inline]
fn hsum(v: v128) -> f32 {
    f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v) + f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v)
}

#[inline]
fn hmax(v: v128) -> f32 {
    f32x4_extract_lane::<0>(v).max(f32x4_extract_lane::<1>(v)).max(f32x4_extract_lane::<2>(v).max(f32x4_extract_lane::<3>(v)))
}

#[inline]
fn hsum_i32(v: v128) -> i32 {
    i32x4_extract_lane::<0>(v) + i32x4_extract_lane::<1>(v) + i32x4_extract_lane::<2>(v) + i32x4_extract_lane::<3>(v)
}

/// 16 bytes at `p` (no alignment needed).
///
/// # Safety
/// `p..p + 16` is readable.
#[inline]
unsafe fn load(p: *const u8) -> v128 {
    v128_load(p as *const v128)
}

/// Quantizes `x` (32 values per block of `out`) as `kernels::quantize_scalar` does.
pub fn quantize(x: &[f32], out: &mut [BlockQ8]) {
    for (xs, b) in x.chunks_exact(BLOCK).zip(out.iter_mut()) {
        // SAFETY: `xs` has 32 f32 (128 bytes): eight 16-byte loads.
        let v: [v128; 8] = std::array::from_fn(|i| unsafe { load(xs.as_ptr().add(4 * i) as *const u8) });
        let m = v.iter().fold(f32x4_splat(0.0), |m, &x| f32x4_max(m, f32x4_abs(x)));
        let d = hmax(m) / 127.0;
        let id = f32x4_splat(if d > 0.0 { 1.0 / d } else { 0.0 });
        // `nearest` rounds ties to even, as the scalar reference does; |x d⁻¹| <= 127.
        let q: [v128; 8] = std::array::from_fn(|i| i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(v[i], id))));
        let sum = hsum_i32(q.iter().fold(i32x4_splat(0), |s, &x| i32x4_add(s, x)));
        let w16 = [i16x8_narrow_i32x4(q[0], q[1]), i16x8_narrow_i32x4(q[2], q[3]), i16x8_narrow_i32x4(q[4], q[5]), i16x8_narrow_i32x4(q[6], q[7])];
        let lo = i8x16_narrow_i16x8(w16[0], w16[1]);
        let hi = i8x16_narrow_i16x8(w16[2], w16[3]);
        // SAFETY: `b.q` is 32 bytes.
        unsafe {
            v128_store(b.q.as_mut_ptr() as *mut v128, lo);
            v128_store(b.q.as_mut_ptr().add(16) as *mut v128, hi);
        }
        b.d = d;
        b.s = d * sum as f32;
    }
}

/// A block's scale and its offset per unit of Σx (Q4_0: -8d, Q4_1: m, Q8_0: 0).
#[inline]
fn scales(f: BlockFormat, b: &[u8]) -> (f32, f32) {
    let d = half_at(b, 0);
    match f {
        BlockFormat::Q4_0 => (d, -8.0 * d),
        BlockFormat::Q4_1 => (d, half_at(b, 2)),
        BlockFormat::Q8_0 => (d, 0.0),
    }
}

/// A Q4 block's nibbles as bytes: elements 0..16 (low nibbles), then 16..32 (high ones).
///
/// # Safety
/// `b` is one whole Q4_0 or Q4_1 block.
#[inline]
unsafe fn nibbles(b: &[u8]) -> (v128, v128) {
    let raw = load(b.as_ptr().add(b.len() - 16));
    (v128_and(raw, u8x16_splat(0xF)), u8x16_shr(raw, 4))
}

/// One block's 32 weights as four i16x8 quarters in element order.
///
/// # Safety
/// `b` is one whole block of `f`.
#[inline]
unsafe fn widened(f: BlockFormat, b: &[u8]) -> [v128; 4] {
    match f {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
            let (lo, hi) = nibbles(b);
            [u16x8_extend_low_u8x16(lo), u16x8_extend_high_u8x16(lo), u16x8_extend_low_u8x16(hi), u16x8_extend_high_u8x16(hi)]
        }
        BlockFormat::Q8_0 => {
            let (a, c) = (load(b.as_ptr().add(2)), load(b.as_ptr().add(18)));
            [i16x8_extend_low_i8x16(a), i16x8_extend_high_i8x16(a), i16x8_extend_low_i8x16(c), i16x8_extend_high_i8x16(c)]
        }
    }
}

/// A block of 8-bit activations as bytes (elements 0..16, 16..32) and, for Q8_0, widened to
/// four i16x8 quarters.
#[inline]
fn activations(f: BlockFormat, x: &BlockQ8) -> ((v128, v128), [v128; 4]) {
    // SAFETY: `x.q` is 32 bytes.
    let (a, c) = unsafe { (load(x.q.as_ptr() as *const u8), load(x.q.as_ptr().add(16) as *const u8)) };
    let wide = match f {
        BlockFormat::Q8_0 => [i16x8_extend_low_i8x16(a), i16x8_extend_high_i8x16(a), i16x8_extend_low_i8x16(c), i16x8_extend_high_i8x16(c)],
        _ => [a; 4],
    };
    ((a, c), wide)
}

/// Σ w x of one block as i32x4 partial sums. Q4 weights (0..15) times i8 activations stay
/// within i16 for four products (4 · 15 · 127 < 2^15): bytes multiply into i16 lanes
/// (`extmul`), add in i16 and widen once. Q8_0 products (up to 128 · 127) do not, and go
/// through `dot_i16x8` on widened values.
///
/// # Safety
/// `b` is one whole block of `f`; `bytes` and `wide` are one block's activations from
/// [`activations`] for `f`.
#[inline]
unsafe fn block_isum(f: BlockFormat, b: &[u8], bytes: &(v128, v128), wide: &[v128; 4]) -> v128 {
    match f {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
            let (lo, hi) = nibbles(b);
            let s = i16x8_add(
                i16x8_add(i16x8_extmul_low_i8x16(lo, bytes.0), i16x8_extmul_high_i8x16(lo, bytes.0)),
                i16x8_add(i16x8_extmul_low_i8x16(hi, bytes.1), i16x8_extmul_high_i8x16(hi, bytes.1)),
            );
            i32x4_extadd_pairwise_i16x8(s)
        }
        BlockFormat::Q8_0 => {
            let w = widened(f, b);
            i32x4_add(
                i32x4_add(i32x4_dot_i16x8(w[0], wide[0]), i32x4_dot_i16x8(w[1], wide[1])),
                i32x4_add(i32x4_dot_i16x8(w[2], wide[2]), i32x4_dot_i16x8(w[3], wide[3])),
            )
        }
    }
}

/// `R` packed rows times `T` token rows of 8-bit activations, `[token][row]`: each weight block
/// is read (and its scales converted) once for the `T` tokens.
pub fn dot_q8_tile<const R: usize, const T: usize>(f: BlockFormat, rows: [&[u8]; R], xs: [&[BlockQ8]; T]) -> [[f32; R]; T] {
    let bb = f.block_bytes();
    let blocks = xs.iter().fold(rows.iter().map(|r| r.len() / bb).min().unwrap_or(0), |n, x| n.min(x.len()));
    let mut acc = [[f32x4_splat(0.0); R]; T];
    let mut offset = [[0f32; R]; T];
    for i in 0..blocks {
        let xq: [_; T] = std::array::from_fn(|t| activations(f, &xs[t][i]));
        for r in 0..R {
            let b = &rows[r][i * bb..(i + 1) * bb];
            let (d, m) = scales(f, b);
            for t in 0..T {
                // SAFETY: `b` is one whole block (`blocks` counts whole blocks of every row).
                let isum = unsafe { block_isum(f, b, &xq[t].0, &xq[t].1) };
                // Σ (q d + m) x = d Σ q x + m Σ x, with Σ x = s per block.
                offset[t][r] += m * xs[t][i].s;
                acc[t][r] = f32x4_add(acc[t][r], f32x4_mul(f32x4_convert_i32x4(isum), f32x4_splat(d * xs[t][i].d)));
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

/// One packed row · f32 activations, the weights decoded as the reference decoder does.
pub fn dot_f32(f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
    let mut acc = f32x4_splat(0.0);
    for (b, xs) in row.chunks_exact(f.block_bytes()).zip(x.chunks_exact(BLOCK)) {
        let (d, m) = scales(f, b);
        // SAFETY: `b` is one whole block.
        let w = unsafe { widened(f, b) };
        let (d, m) = (f32x4_splat(d), f32x4_splat(m));
        for (k, &q) in w.iter().enumerate() {
            let halves = [i32x4_extend_low_i16x8(q), i32x4_extend_high_i16x8(q)];
            for (h, &ints) in halves.iter().enumerate() {
                // Q4_0 (q - 8) d is q d - 8 d: the same offset form as the 8-bit path.
                let wv = f32x4_add(f32x4_mul(f32x4_convert_i32x4(ints), d), m);
                // SAFETY: `xs` has 32 values; 8k + 4h + 4 <= 32.
                let xv = unsafe { load(xs.as_ptr().add(8 * k + 4 * h) as *const u8) };
                acc = f32x4_add(acc, f32x4_mul(wv, xv));
            }
        }
    }
    hsum(acc)
}

/// Σ a·b over f32 slices.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [f32x4_splat(0.0); 2];
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n.
        unsafe {
            let p = (a.as_ptr().add(i) as *const u8, b.as_ptr().add(i) as *const u8);
            acc[0] = f32x4_add(acc[0], f32x4_mul(load(p.0), load(p.1)));
            acc[1] = f32x4_add(acc[1], f32x4_mul(load(p.0.add(16)), load(p.1.add(16))));
        }
        i += 8;
    }
    let mut sum = hsum(f32x4_add(acc[0], acc[1]));
    while i < n {
        sum += a[i] * b[i];
        i += 1;
    }
    sum
}

/// y += a · x over f32 slices.
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let va = f32x4_splat(a);
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 <= n for both slices.
        unsafe {
            let p = y.as_mut_ptr().add(i) as *mut v128;
            v128_store(p, f32x4_add(v128_load(p), f32x4_mul(va, load(x.as_ptr().add(i) as *const u8))));
        }
        i += 4;
    }
    while i < n {
        y[i] += a * x[i];
        i += 1;
    }
}
