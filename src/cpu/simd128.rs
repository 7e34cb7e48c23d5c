//! WebAssembly SIMD128 versions of the kernels in `kernels.rs`, same results up to the order of
//! floating-point sums (quantization is bit for bit the scalar one). SIMD128 is a compile-time
//! feature of the module (`-C target-feature=+simd128`): an engine without it refuses the whole
//! module, so where this code runs, the instructions exist.
//!
//! SIMD128 has no 8-bit dot product: bytes multiply into i16 lanes (`extmul`) and sum pairwise
//! into i32 (see `block_isum`).

use core::arch::wasm32::*;

use super::kernels::{block_scales, BlockFormat, BlockQ8, BlockScales, BLOCK};

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

/// A Q4 block's nibbles as bytes: elements 0..16 (low nibbles), then 16..32 (high ones).
///
/// # Safety
/// `p..p + 16` is readable.
#[inline]
unsafe fn nibbles(p: *const u8) -> (v128, v128) {
    let raw = load(p);
    (v128_and(raw, u8x16_splat(0xF)), u8x16_shr(raw, 4))
}

/// Bit j of the little-endian u32 at `p` as 0x10 in byte j of (elements 0..16, 16..32): the
/// fifth bits of a Q5 block.
///
/// # Safety
/// `p..p + 4` is readable.
#[inline]
unsafe fn fifth_bits(p: *const u8) -> (v128, v128) {
    let qh = u32x4_splat(std::ptr::read_unaligned(p as *const u32));
    let bit = u64x2_splat(0x8040_2010_0804_0201);
    let spread = |lo: u8, hi: u8| {
        let bytes = u8x16_swizzle(qh, u8x16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi));
        v128_and(i8x16_eq(v128_and(bytes, bit), bit), u8x16_splat(0x10))
    };
    (spread(0, 1), spread(2, 3))
}

/// Block `i`'s 32 integers in element order as two i8x16 (`kernels::block_q`).
///
/// # Safety
/// Block `i` lies within `row`.
#[inline]
unsafe fn unpack(f: BlockFormat, row: &[u8], i: usize) -> (v128, v128) {
    let sb = f.stored_bytes();
    let p = row.as_ptr();
    match f {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 => nibbles(p.add((i + 1) * sb - 16)),
        BlockFormat::Q5_0 | BlockFormat::Q5_1 => {
            let (lo, hi) = nibbles(p.add((i + 1) * sb - 16));
            let (a, b) = fifth_bits(p.add(i * sb + if f == BlockFormat::Q5_0 { 2 } else { 4 }));
            (v128_or(lo, a), v128_or(hi, b))
        }
        BlockFormat::Q8_0 => (load(p.add(i * sb + 2)), load(p.add(i * sb + 18))),
        BlockFormat::Q4_K | BlockFormat::Q5_K => {
            let (b, j) = (p.add((i / 8) * sb), i % 8);
            let qs = b.add(if f == BlockFormat::Q4_K { 16 } else { 48 } + 32 * (j / 2));
            let shift = 4 * (j as u32 % 2);
            let low = |v: v128| v128_and(u8x16_shr(v, shift), u8x16_splat(0xF));
            let (lo, hi) = (low(load(qs)), low(load(qs.add(16))));
            if f == BlockFormat::Q4_K {
                return (lo, hi);
            }
            // Bit j of each qh byte, moved to bit 4.
            let high = |v: v128| u8x16_shl(v128_and(u8x16_shr(v, j as u32), u8x16_splat(1)), 4);
            (v128_or(lo, high(load(b.add(16)))), v128_or(hi, high(load(b.add(32)))))
        }
        BlockFormat::Q6_K => {
            let (b, n, k) = (p.add((i / 8) * sb), (i % 8) / 4, i % 4);
            let (ql, qh) = (b.add(64 * n + 32 * (k & 1)), b.add(128 + 32 * n));
            let q = |at: usize| {
                let low = v128_and(u8x16_shr(load(ql.add(at)), 4 * (k as u32 >> 1)), u8x16_splat(0xF));
                let high = v128_and(u8x16_shr(load(qh.add(at)), 2 * k as u32), u8x16_splat(3));
                i8x16_sub(v128_or(low, u8x16_shl(high, 4)), i8x16_splat(32))
            };
            (q(0), q(16))
        }
    }
}

/// A block's 32 integers as four i16x8 quarters in element order.
#[inline]
fn widened(f: BlockFormat, w: (v128, v128)) -> [v128; 4] {
    if f.signed_q() {
        [i16x8_extend_low_i8x16(w.0), i16x8_extend_high_i8x16(w.0), i16x8_extend_low_i8x16(w.1), i16x8_extend_high_i8x16(w.1)]
    } else {
        [u16x8_extend_low_u8x16(w.0), u16x8_extend_high_u8x16(w.0), u16x8_extend_low_u8x16(w.1), u16x8_extend_high_u8x16(w.1)]
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

/// Σ w x of one block as i32x4 partial sums, each half times its factor. Weights of at most 6
/// bits times i8 activations stay within i16 for four products (4 · 32 · 127 < 2^15): bytes
/// multiply into i16 lanes (`extmul`), add in i16 and widen once. Q8_0 products (up to
/// 128 · 127) do not, and go through `dot_i16x8` on widened values.
#[inline]
fn block_isum(f: BlockFormat, w: (v128, v128), half: [i32; 2], bytes: &(v128, v128), wide: &[v128; 4]) -> v128 {
    if f == BlockFormat::Q8_0 {
        let ww = widened(f, w);
        return i32x4_add(
            i32x4_add(i32x4_dot_i16x8(ww[0], wide[0]), i32x4_dot_i16x8(ww[1], wide[1])),
            i32x4_add(i32x4_dot_i16x8(ww[2], wide[2]), i32x4_dot_i16x8(ww[3], wide[3])),
        );
    }
    let lo = i16x8_add(i16x8_extmul_low_i8x16(w.0, bytes.0), i16x8_extmul_high_i8x16(w.0, bytes.0));
    let hi = i16x8_add(i16x8_extmul_low_i8x16(w.1, bytes.1), i16x8_extmul_high_i8x16(w.1, bytes.1));
    if half == [1, 1] {
        i32x4_extadd_pairwise_i16x8(i16x8_add(lo, hi))
    } else {
        i32x4_add(i32x4_dot_i16x8(lo, i16x8_splat(half[0] as i16)), i32x4_dot_i16x8(hi, i16x8_splat(half[1] as i16)))
    }
}

/// `R` packed rows times `T` token rows of 8-bit activations, `[token][row]`: each weight block
/// is unpacked (and its scales read) once for the `T` tokens.
pub fn dot_q8_tile<const R: usize, const T: usize>(f: BlockFormat, rows: [&[u8]; R], xs: [&[BlockQ8]; T]) -> [[f32; R]; T] {
    // One instance per format, as in avx2.rs: the format a constant, its unpacking and scales
    // compile to straight-line code instead of a dispatch per block. A single row (those past a
    // multiple of four) is rare: one instance for every format keeps the module in its budget.
    if R == 1 {
        return tile_of(f, rows, xs);
    }
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
#[inline]
fn tile<const F: usize, const R: usize, const T: usize>(rows: [&[u8]; R], xs: [&[BlockQ8]; T]) -> [[f32; R]; T] {
    tile_of(BlockFormat::ALL[F], rows, xs)
}

/// The tile kernel itself, inlined where the format is a constant. One row at a time, its
/// accumulators indexed by token only: with the rows as the inner loop (blocks outermost),
/// LLVM left that loop rolled in wasm, kept the `[token][row]` accumulators in linear memory
/// (a load and a store per block and row) and called `half_at` out of line, which made a
/// SmolLM2 decode step about a third slower in Chromium. An activation block is reloaded for
/// each row instead, from L1.
// `t` indexes the tokens' activations, accumulators and offsets together.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn tile_of<const R: usize, const T: usize>(f: BlockFormat, rows: [&[u8]; R], xs: [&[BlockQ8]; T]) -> [[f32; R]; T] {
    let blocks = xs.iter().fold(rows.iter().map(|r| f.blocks_in(r.len())).min().unwrap_or(0), |n, x| n.min(x.len()));
    let mut out = [[0f32; R]; T];
    for (r, row) in rows.into_iter().enumerate() {
        let mut acc = [f32x4_splat(0.0); T];
        let mut offset = [0f32; T];
        for i in 0..blocks {
            let s = block_scales(f, row, i);
            // SAFETY: `blocks` counts whole blocks of every row.
            let w = unsafe { unpack(f, row, i) };
            for t in 0..T {
                let x = &xs[t][i];
                let (bytes, wide) = activations(f, x);
                let isum = block_isum(f, w, s.half, &bytes, &wide);
                // Σ (q d + m) x = d Σ q x + m Σ x, with Σ x = s per block.
                offset[t] += s.m * x.s;
                acc[t] = f32x4_add(acc[t], f32x4_mul(f32x4_convert_i32x4(isum), f32x4_splat(s.d * x.d)));
            }
        }
        for t in 0..T {
            out[t][r] = hsum(acc[t]) + offset[t];
        }
    }
    out
}

/// One packed row · f32 activations, the weights decoded as the reference decoder does.
pub fn dot_f32(f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
    let mut acc = f32x4_splat(0.0);
    for (i, xs) in x.chunks_exact(BLOCK).enumerate().take(f.blocks_in(row.len())) {
        let BlockScales { d, m, .. } = block_scales(f, row, i);
        // SAFETY: block `i` lies within `row`.
        let w = widened(f, unsafe { unpack(f, row, i) });
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
