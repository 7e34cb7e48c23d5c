//! The CPU backend's inner loops: dot products of packed weight rows with activation rows, per
//! 32-weight block, and the quantization of activations to 8 bits. Each has a scalar reference
//! here and a SIMD version per instruction set (`avx2.rs` on x86-64, `simd128.rs` in a wasm
//! build with SIMD128), picked once at run time by [`Isa`].
//!
//! Two arithmetics: `Q8` quantizes each 32-value block of the activations to i8 with an f32
//! scale and sums integer products (llama.cpp's scheme: about twice the f32 path's speed);
//! `F32` decodes the weights exactly as the reference decoder does and multiplies in f32
//! (what the activation fixtures are checked with).
//!
//! Every format with a block kernel is read as blocks of 32 weights `w = q · scale + offset`:
//! integers `q` (at most 6 bits, or Q8_0's i8), one scale per half block (Q6_K's sub-blocks are
//! 16 weights) or per block, and an offset per block that multiplies Σx. K-quants keep 256
//! weights a stored block; a 32-weight block is one of its sub-blocks (or two of Q6_K's).

use half::f16;

use crate::format::GgmlType;

/// Values per quantization block of the activations, and per block of the kernels.
pub const BLOCK: usize = 32;

/// 32 activations quantized to i8: `x ≈ d * q`, with `s = d * Σq` for formats with an offset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ8 {
    pub d: f32,
    pub s: f32,
    pub q: [i8; BLOCK],
}

/// The weight formats with block kernels, named as GGML names them.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFormat {
    /// d f16, 16 bytes of nibbles; w = (q - 8) d. Element j is the low nibble of byte j,
    /// element j + 16 the high one.
    Q4_0,
    /// d f16, m f16, 16 bytes of nibbles; w = q d + m.
    Q4_1,
    /// d f16, 32 i8; w = q d.
    Q8_0,
    /// d f16, qh u32 (the fifth bit of element j is bit j), nibbles as Q4_0; w = (q - 16) d.
    Q5_0,
    /// d f16, m f16, qh u32, nibbles; w = q d + m.
    Q5_1,
    /// 256 weights: d f16, dmin f16, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
    /// (64 weights per 32 bytes: low nibbles, then high ones); w = d·sc q - dmin·m.
    Q4_K,
    /// Q4_K with a fifth bit per weight (32 bytes of qh before the nibbles).
    Q5_K,
    /// 256 weights: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 i8 scales (one per 16
    /// weights), d f16; w = d·sc (q - 32).
    Q6_K,
}

impl BlockFormat {
    pub const ALL: [BlockFormat; 8] = [
        BlockFormat::Q4_0,
        BlockFormat::Q4_1,
        BlockFormat::Q8_0,
        BlockFormat::Q5_0,
        BlockFormat::Q5_1,
        BlockFormat::Q4_K,
        BlockFormat::Q5_K,
        BlockFormat::Q6_K,
    ];

    pub fn from_ggml(t: GgmlType) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.ggml() == t)
    }

    pub fn ggml(self) -> GgmlType {
        match self {
            BlockFormat::Q4_0 => GgmlType::Q4_0,
            BlockFormat::Q4_1 => GgmlType::Q4_1,
            BlockFormat::Q8_0 => GgmlType::Q8_0,
            BlockFormat::Q5_0 => GgmlType::Q5_0,
            BlockFormat::Q5_1 => GgmlType::Q5_1,
            BlockFormat::Q4_K => GgmlType::Q4_K,
            BlockFormat::Q5_K => GgmlType::Q5_K,
            BlockFormat::Q6_K => GgmlType::Q6_K,
        }
    }

    /// Bytes of one stored block (32 weights, or 256 for K-quants).
    pub fn stored_bytes(self) -> usize {
        self.ggml().block_bytes() as usize
    }

    /// 32-weight blocks per stored block.
    fn per_stored(self) -> usize {
        self.ggml().block_elements() as usize / BLOCK
    }

    /// 32-weight blocks in a row of `bytes` bytes.
    pub fn blocks_in(self, bytes: usize) -> usize {
        bytes / self.stored_bytes() * self.per_stored()
    }

    /// Whether `q` is signed (Q8_0's i8, Q6_K's q - 32) rather than an unsigned field.
    pub fn signed_q(self) -> bool {
        matches!(self, BlockFormat::Q8_0 | BlockFormat::Q6_K)
    }

    /// Whether [`Isa::dot_f32`] reads this format; the others are decoded a row at a time for
    /// f32 products.
    pub fn has_f32_kernel(self) -> bool {
        matches!(self, BlockFormat::Q4_0 | BlockFormat::Q4_1 | BlockFormat::Q8_0)
    }
}

/// The scalars of 32-weight block `i` of a row: `w_j = q_j · d · half[j / 16] + m`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockScales {
    pub d: f32,
    /// Integer factors of the two halves (Q6_K's sub-block scales; 1 elsewhere).
    pub half: [i32; 2],
    /// Offset per unit of Σx.
    pub m: f32,
}

/// Block `i`'s scales. Shared by every instruction set: the vector code only differs in how it
/// unpacks `q`.
#[inline]
pub(crate) fn block_scales(f: BlockFormat, row: &[u8], i: usize) -> BlockScales {
    block_scales_with(f, row, i, half_at)
}

/// [`block_scales`] with `half_at` converting the f16 scales (AVX2 has an instruction for it).
#[inline(always)]
pub(crate) fn block_scales_with(f: BlockFormat, row: &[u8], i: usize, half_at: impl Fn(&[u8], usize) -> f32) -> BlockScales {
    let one = |d: f32, m: f32| BlockScales { d, half: [1, 1], m };
    let sb = f.stored_bytes();
    match f {
        BlockFormat::Q4_0 => {
            let d = half_at(row, i * sb);
            one(d, -8.0 * d)
        }
        BlockFormat::Q5_0 => {
            let d = half_at(row, i * sb);
            one(d, -16.0 * d)
        }
        BlockFormat::Q4_1 | BlockFormat::Q5_1 => one(half_at(row, i * sb), half_at(row, i * sb + 2)),
        BlockFormat::Q8_0 => one(half_at(row, i * sb), 0.0),
        BlockFormat::Q4_K | BlockFormat::Q5_K => {
            let b = &row[(i / 8) * sb..(i / 8 + 1) * sb];
            let (sc, m) = crate::quant::k4_scale_min(&b[4..16], i % 8);
            // d · sc is exact in f32 (11 + 6 bits), as the reference decoder computes it.
            one(half_at(b, 0) * sc as f32, -(half_at(b, 2) * m as f32))
        }
        BlockFormat::Q6_K => {
            let b = &row[(i / 8) * sb..(i / 8 + 1) * sb];
            let (n, k) = ((i % 8) / 4, i % 4);
            let sc = |h: usize| b[192 + 8 * n + 2 * k + h] as i8 as i32;
            BlockScales { d: half_at(b, 208), half: [sc(0), sc(1)], m: 0.0 }
        }
    }
}

/// Block `i`'s 32 integers in element order (the scalar reference of each SIMD unpacking).
pub fn block_q(f: BlockFormat, row: &[u8], i: usize) -> [i8; BLOCK] {
    let sb = f.stored_bytes();
    let mut q = [0i8; BLOCK];
    match f {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 | BlockFormat::Q5_0 | BlockFormat::Q5_1 => {
            let b = &row[i * sb..(i + 1) * sb];
            let qh = match f {
                BlockFormat::Q5_0 => u32::from_le_bytes([b[2], b[3], b[4], b[5]]),
                BlockFormat::Q5_1 => u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                _ => 0,
            };
            let qs = &b[sb - 16..];
            for (j, v) in q.iter_mut().enumerate() {
                let nibble = if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 };
                *v = (nibble | (((qh >> j) & 1) << 4) as u8) as i8;
            }
        }
        BlockFormat::Q8_0 => {
            for (v, &b) in q.iter_mut().zip(&row[i * sb + 2..(i + 1) * sb]) {
                *v = b as i8;
            }
        }
        BlockFormat::Q4_K | BlockFormat::Q5_K => {
            let b = &row[(i / 8) * sb..(i / 8 + 1) * sb];
            let j = i % 8;
            let qs = if f == BlockFormat::Q4_K { 16 } else { 48 };
            for (l, v) in q.iter_mut().enumerate() {
                let low = b[qs + 32 * (j / 2) + l] >> (4 * (j % 2)) & 0xF;
                let high = if f == BlockFormat::Q5_K { (b[16 + l] >> j & 1) << 4 } else { 0 };
                *v = (low | high) as i8;
            }
        }
        BlockFormat::Q6_K => {
            let b = &row[(i / 8) * sb..(i / 8 + 1) * sb];
            let (n, k) = ((i % 8) / 4, i % 4);
            for (l, v) in q.iter_mut().enumerate() {
                let low = b[64 * n + 32 * (k & 1) + l] >> (4 * (k >> 1)) & 0xF;
                let high = (b[128 + 32 * n + l] >> (2 * k) & 3) << 4;
                *v = (low | high) as i8 - 32;
            }
        }
    }
    q
}

/// The instruction set the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX2's kernels, and the encoder's products with AVX-512 F, BW, VL and VNNI (`avx512.rs`).
    #[cfg(target_arch = "x86_64")]
    Avx512,
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
            let avx512 = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512vnni");
            return if avx512 { Isa::Avx512 } else { Isa::Avx2 };
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return Isa::Simd128;
        #[allow(unreachable_code)]
        Isa::Scalar
    }

    /// Every instruction set this CPU runs (the scalar one first), for tests.
    pub fn available() -> Vec<Self> {
        let mut all = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        if Isa::detect() == Isa::Avx512 {
            all.push(Isa::Avx2);
        }
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
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512",
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => "simd128",
        }
    }

    /// Quantizes `x` (a multiple of 32 values) into `out`, one block per 32.
    pub fn quantize(self, x: &[f32], out: &mut [BlockQ8]) {
        match self {
            Isa::Scalar => quantize_scalar(x, out),
            // SAFETY: `Avx2` and `Avx512` are only constructed after detecting AVX2, FMA and F16C.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { super::avx2::quantize(x, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::quantize(x, out),
        }
    }

    /// One packed row (whole stored blocks) · quantized activations.
    pub fn dot_q8(self, f: BlockFormat, row: &[u8], x: &[BlockQ8]) -> f32 {
        self.dot_q8_tile::<1, 1>(f, [row], [x])[0][0]
    }

    /// `R` packed rows (same length) times `T` token rows of quantized activations,
    /// `[token][row]`: each weight block is unpacked (and its scales read) once for the `T`
    /// tokens (with AVX2 also each activation block loaded once for the `R` rows).
    pub fn dot_q8_tile<const R: usize, const T: usize>(
        self,
        f: BlockFormat,
        rows: [&[u8]; R],
        xs: [&[BlockQ8]; T],
    ) -> [[f32; R]; T] {
        match self {
            Isa::Scalar => xs.map(|x| rows.map(|row| dot_q8_scalar(f, row, x))),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { super::avx2::dot_q8_tile::<R, T>(f, rows, xs) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::dot_q8_tile::<R, T>(f, rows, xs),
        }
    }

    /// One packed row · f32 activations, the weights decoded as the reference decoder does
    /// (formats with [`BlockFormat::has_f32_kernel`]).
    pub fn dot_f32(self, f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
        match self {
            Isa::Scalar => dot_f32_scalar(f, row, x),
            // SAFETY: as in `quantize`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { super::avx2::dot_f32(f, row, x) },
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
            Isa::Avx2 | Isa::Avx512 => unsafe { super::avx2::dot(a, b) },
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
            Isa::Avx2 | Isa::Avx512 => unsafe { super::avx2::axpy(a, x, y) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => super::simd128::axpy(a, x, y),
        }
    }
}

/// The f16 at `b[at..at + 2]` as f32. Block scales are normal numbers almost always: those
/// convert with two integer operations (the exponent rebiased from 15 to 127), exactly; zeros,
/// subnormals, infinities and NaNs take the general conversion. Where the CPU has no f16
/// instruction (wasm) the general one alone costs about as much as a block's products. Always
/// inlined: in wasm's block kernels LLVM otherwise kept it a call per scale and block.
#[inline(always)]
pub(crate) fn half_at(b: &[u8], at: usize) -> f32 {
    let h = u16::from_le_bytes([b[at], b[at + 1]]) as u32;
    let exponent = h & 0x7c00;
    if exponent != 0 && exponent != 0x7c00 {
        return f32::from_bits(((h & 0x8000) << 16) | (((h & 0x7fff) + ((127 - 15) << 10)) << 13));
    }
    half_general(h as u16)
}

/// The general f16 conversion of [`half_at`], out of line: it is rare.
#[cold]
#[inline(never)]
fn half_general(h: u16) -> f32 {
    f16::from_bits(h).to_f32()
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

/// Scalar reference of [`Isa::dot_q8`]: per block, the integer sums of each half times its
/// factor, scaled by d·dx, plus the offset times Σx.
pub fn dot_q8_scalar(f: BlockFormat, row: &[u8], x: &[BlockQ8]) -> f32 {
    let mut acc = 0f32;
    for (i, xb) in x.iter().enumerate().take(f.blocks_in(row.len())) {
        let s = block_scales(f, row, i);
        let q = block_q(f, row, i);
        let half = |h: usize| (16 * h..16 * h + 16).map(|j| q[j] as i32 * xb.q[j] as i32).sum::<i32>();
        let isum = s.half[0] * half(0) + s.half[1] * half(1);
        acc += s.d * xb.d * isum as f32 + s.m * xb.s;
    }
    acc
}

/// Weight `j` (0..32) of one Q4_0, Q4_1 or Q8_0 block, as `crate::quant`'s decoder computes it.
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
        _ => unreachable!("{f:?} has no f32 block kernel"),
    }
}

/// Scalar reference of [`Isa::dot_f32`].
pub fn dot_f32_scalar(f: BlockFormat, row: &[u8], x: &[f32]) -> f32 {
    let mut acc = 0f32;
    for (b, xs) in row.chunks_exact(f.stored_bytes()).zip(x.chunks_exact(BLOCK)) {
        for (j, &v) in xs.iter().enumerate() {
            acc += block_weight(f, b, j) * v;
        }
    }
    acc
}
