//! The CPU backend's inner loops: dot products of one packed weight row with one activation
//! row, per 32-weight block, and the quantization of activations to 8 bits. Each has a scalar
//! reference here and a SIMD version per instruction set (`avx2.rs` on x86-64, `simd128.rs` in
//! a wasm build with SIMD128), picked once at run time by [`Isa`].
//!
//! Two arithmetics: `Q8` quantizes each 32-value block of the activations to i8 with an f32
//! scale and sums integer products (llama.cpp's scheme: about twice the f32 path's speed);
//! `F32` decodes the weights exactly as the reference decoder does and multiplies in f32
//! (what the activation fixtures are checked with).

use half::f16;

/// Values per quantization block of every format with a fast path here.
pub const BLOCK: usize = 32;

/// Bytes of one block of each fast-path GGML format.
pub const Q4_0_BYTES: usize = 18;
pub const Q4_1_BYTES: usize = 20;
pub const Q8_0_BYTES: usize = 34;

/// 32 activations quantized to i8: `x ≈ d * q`, with `s = d * Σq` for formats with an offset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ8 {
    pub d: f32,
    pub s: f32,
    pub q: [i8; BLOCK],
}

/// The weight formats with block kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFormat {
    /// d f16, 16 bytes of nibbles; w = (q - 8) d. Element j is the low nibble of byte j,
    /// element j + 16 the high one.
    Q4_0,
    /// d f16, m f16, 16 bytes of nibbles; w = q d + m.
    Q4_1,
    /// d f16, 32 i8; w = q d.
    Q8_0,
}

impl BlockFormat {
    pub fn block_bytes(self) -> usize {
        match self {
            BlockFormat::Q4_0 => Q4_0_BYTES,
            BlockFormat::Q4_1 => Q4_1_BYTES,
            BlockFormat::Q8_0 => Q8_0_BYTES,
        }
    }
}

/// The instruction set the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// Compiled in, not detected: a wasm engine without SIMD128 refuses the whole module.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    Simd128,
}

impl Isa {
    /// The best this CPU runs.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
        {
            return Isa::Avx2;
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return Isa::Simd128;
        #[allow(unreachable_code)]
        Isa::Scalar
    }

    /// Every instruction set this CPU runs (the scalar one first), for tests.
    pub fn available() -> Vec<Self> {
        let mut all = vec![Isa::Scalar];
        if Isa::detect() != Isa::Scalar {
            all.push(Isa::detect());
        }
        all
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => "simd128",
        }
    }

    /// Quantizes `x` (a multiple of 32 values) into `out`, one block per 32.
    pub fn quantize(self, x: &[f32], out: &mut [BlockQ8]) {
        match self {
            Isa::Scalar => quantize_scalar(x, out),
            // SAFETY: `Avx2` is only constructed after detecting AVX2, FMA and F16C.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::quantize(x, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::quantize(x, out),
        }
    }

    /// One packed row (`row.len()` = blocks × block bytes) · quantized activations.
    pub fn dot_q8(self, f: BlockFormat, row: &[u8], x: &[BlockQ8]) -> f32 {
        match self {
            Isa::Scalar => dot_q8_scalar(f, row, x),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::dot_q8(f, row, x) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::dot_q8_tile::<1, 1>(f, [row], [x])[0][0],
        }
    }

    /// [`Self::dot_q8`] of four rows at once (same length) with the same activations.
    pub fn dot_q8_4(self, f: BlockFormat, rows: [&[u8]; 4], x: &[BlockQ8]) -> [f32; 4] {
        match self {
            Isa::Scalar => rows.map(|row| dot_q8_scalar(f, row, x)),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::dot_q8_rows::<4>(f, rows, x) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::dot_q8_tile::<4, 1>(f, rows, [x])[0],
        }
    }

    /// [`Self::dot_q8_4`] for two token rows of activations at once: `[token][row]`.
    pub fn dot_q8_4x2(self, f: BlockFormat, rows: [&[u8]; 4], xs: [&[BlockQ8]; 2]) -> [[f32; 4]; 2] {
        match self {
            Isa::Scalar => xs.map(|x| rows.map(|row| dot_q8_scalar(f, row, x))),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::dot_q8_tile::<4, 2>(f, rows, xs) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::dot_q8_tile::<4, 2>(f, rows, xs),
        }
    }

    /// One packed row · f32 activations, the weights decoded as the reference decoder does.
    pub fn dot_f32(self, f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
        match self {
            Isa::Scalar => dot_f32_scalar(f, row, x),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::dot_f32(f, row, x) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::dot_f32(f, row, x),
        }
    }

    /// Σ a·b over f32 slices of equal length.
    pub fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Isa::Scalar => a.iter().zip(b).map(|(x, y)| x * y).sum(),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::dot(a, b) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::dot(a, b),
        }
    }

    /// y += a · x over f32 slices of equal length.
    pub fn axpy(self, a: f32, x: &[f32], y: &mut [f32]) {
        match self {
            Isa::Scalar => y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::axpy(a, x, y) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::axpy(a, x, y),
        }
    }
}

/// The f16 at `b[at..at + 2]` as f32. Block scales are normal numbers almost always: those
/// convert with two integer operations (the exponent rebiased from 15 to 127), exactly; zeros,
/// subnormals, infinities and NaNs take the general conversion. Where the CPU has no f16
/// instruction (wasm) the general one alone costs about as much as a block's products.
#[inline]
pub(crate) fn half_at(b: &[u8], at: usize) -> f32 {
    let h = u16::from_le_bytes([b[at], b[at + 1]]) as u32;
    let exponent = h & 0x7c00;
    if exponent != 0 && exponent != 0x7c00 {
        return f32::from_bits(((h & 0x8000) << 16) | (((h & 0x7fff) + ((127 - 15) << 10)) << 13));
    }
    f16::from_bits(h as u16).to_f32()
}

/// Scalar reference of [`Isa::quantize`]: d = max|x| / 127, q = x / d rounded to nearest even
/// (the SIMD conversions' rounding, so both give the same blocks).
pub fn quantize_scalar(x: &[f32], out: &mut [BlockQ8]) {
    for (xs, b) in x.chunks_exact(BLOCK).zip(out.iter_mut()) {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in b.q.iter_mut().zip(xs) {
            *q = (v * id).round_ties_even() as i8;
            sum += *q as i32;
        }
        b.d = d;
        b.s = d * sum as f32;
    }
}

/// Scalar reference of [`Isa::dot_q8`].
pub fn dot_q8_scalar(f: BlockFormat, row: &[u8], x: &[BlockQ8]) -> f32 {
    let mut acc = 0f32;
    for (b, xb) in row.chunks_exact(f.block_bytes()).zip(x) {
        acc += match f {
            BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
                let qs = &b[b.len() - 16..];
                let (lo, hi) = xb.q.split_at(16);
                let isum: i32 = qs
                    .iter()
                    .zip(lo.iter().zip(hi))
                    .map(|(&w, (&a, &b))| (w & 0xF) as i32 * a as i32 + (w >> 4) as i32 * b as i32)
                    .sum();
                let d = half_at(b, 0);
                if f == BlockFormat::Q4_0 {
                    // Σ (q - 8) x = Σ q x - 8 Σ x.
                    d * (xb.d * isum as f32 - 8.0 * xb.s)
                } else {
                    d * xb.d * isum as f32 + half_at(b, 2) * xb.s
                }
            }
            BlockFormat::Q8_0 => {
                let isum: i32 = b[2..].iter().zip(&xb.q).map(|(&w, &q)| w as i8 as i32 * q as i32).sum();
                half_at(b, 0) * xb.d * isum as f32
            }
        };
    }
    acc
}

/// Weight `j` (0..32) of one block, as `crate::quant`'s decoder computes it.
pub fn block_weight(f: BlockFormat, b: &[u8], j: usize) -> f32 {
    let nibble = |j: usize| {
        let qs = &b[b.len() - 16..];
        if j < 16 {
            qs[j] & 0xF
        } else {
            qs[j - 16] >> 4
        }
    };
    match f {
        BlockFormat::Q4_0 => (nibble(j) as i32 - 8) as f32 * half_at(b, 0),
        BlockFormat::Q4_1 => nibble(j) as f32 * half_at(b, 0) + half_at(b, 2),
        BlockFormat::Q8_0 => b[2 + j] as i8 as f32 * half_at(b, 0),
    }
}

/// Scalar reference of [`Isa::dot_f32`].
pub fn dot_f32_scalar(f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
    let mut acc = 0f32;
    for (b, xs) in row.chunks_exact(f.block_bytes()).zip(x.chunks_exact(BLOCK)) {
        for (j, &v) in xs.iter().enumerate() {
            acc += block_weight(f, b, j) * v;
        }
    }
    acc
}
