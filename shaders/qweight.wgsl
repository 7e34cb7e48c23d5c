// Weight access shared by the quantized matmul and embedding kernels: `w8(row, u)` returns the
// eight dequantized weights k = 8u .. 8u+7 of one row of W [n, k], with the very values the CPU
// reference computes. Exactly one format is selected: WEFT (with BITS/GROUP and WB2/WB3/WB4/WB8,
// ASYM), or a GGML type through its DT_* decoder from shaders/decode.wgsl, either GENERIC (eight
// calls of `decode`) or one of the W8_* paths that read a sub-block's scale once.

@group(0) @binding(0) var<storage, read> src: array<u32>; // packed rows of this part

struct W8 {
    a: vec4<f32>,
    b: vec4<f32>,
}

#ifdef WEFT
@group(0) @binding(3) var<storage, read> scales: array<u32>; // f16 pairs, [n, gpr]
#ifdef ASYM
@group(0) @binding(4) var<storage, read> zeros: array<u32>;  // f16 pairs, [n, gpr]
#endif

const GROUP: u32 = ${GROUP}u;
const BITS: u32 = ${BITS}u;
const WPG: u32 = GROUP * BITS / 32u; // words per group

fn half_of(word: u32, h: u32) -> f32 {
    return bitcast<f32>(f16_bits((word >> ((h & 1u) * 16u)) & 0xffffu));
}

fn w8(row: u32, u: u32) -> W8 {
    let k0 = u * 8u;
    let gi = k0 / GROUP;
    let j0 = k0 % GROUP;
    let h = row * p.gpr + gi;
    let s = half_of(scales[h >> 1u], h);
#ifdef ASYM
    let z = half_of(zeros[h >> 1u], h);
#else
    let z = f32(1u << (BITS - 1u));
#endif
    let base = row * p.wpr + gi * WPG;
#ifdef WB2
    let w = vec4<u32>(src[base + j0 / 16u] >> ((j0 % 16u) * 2u));
    let qa = (w >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
    let qb = (w >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u);
#endif
#ifdef WB3
    // A 32-level chunk is three words: low bit pairs in words 0-1, high bits in word 2.
    let c = base + (j0 / 32u) * 3u;
    let i0 = j0 % 32u;
    let lo = vec4<u32>(src[c + i0 / 16u] >> ((i0 % 16u) * 2u));
    let hi = vec4<u32>(src[c + 2u] >> i0);
    let qa = ((lo >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u))
        | (((hi >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) << vec4<u32>(2u));
    let qb = ((lo >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u))
        | (((hi >> vec4<u32>(4u, 5u, 6u, 7u)) & vec4<u32>(1u)) << vec4<u32>(2u));
#endif
#ifdef WB4
    let w = vec4<u32>(src[base + j0 / 8u]);
    let qa = (w >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    let qb = (w >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u);
#endif
#ifdef WB8
    let at = base + j0 / 4u;
    let shifts = vec4<u32>(0u, 8u, 16u, 24u);
    let qa = (vec4<u32>(src[at]) >> shifts) & vec4<u32>(255u);
    let qb = (vec4<u32>(src[at + 1u]) >> shifts) & vec4<u32>(255u);
#endif
    // One subtraction, then one product: the reference's rule, nothing to fuse.
    return W8(s * (vec4<f32>(qa) - z), s * (vec4<f32>(qb) - z));
}
#endif

#ifdef KQ
// A repacked K-quant (src/quant/repack.rs): chunks of weft's 4-bit words (and the high bits'
// words), and per 256-weight super-block a head of four words (KL: Q4_1 / Q5_1 one word a
// 32-weight block, Q5_0 its d in f16 pairs). The scale products are exact, so
// (d · sc) · q - dmin · m and (d · sc) · (q - 32) round once, fused or not: the GGUF decoder's
// bits.
@group(0) @binding(3) var<storage, read> scales: array<u32>; // heads, [n, gpr, 4 or 1]
#ifdef K6
@group(0) @binding(4) var<storage, read> dk: array<u32>;     // Q6_K's d, f16 pairs, [n, gpr]
#endif
#ifdef K5
@group(0) @binding(4) var<storage, read> qh: array<u32>;     // fifth bits, [n, k / 32]
#endif

const CW: u32 = ${BITS}u; // words per chunk

fn w8(row: u32, u: u32) -> W8 {
    let c = u / 4u;
    let v = u % 4u; // eight weights 8v .. 8v + 7 of the chunk
    let base = row * p.wpr + c * CW;
    let w = vec4<u32>(src[base + v]);
    var qa = (w >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    var qb = (w >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u);
    let sh = vec4<u32>(0u, 4u, 8u, 12u);
#ifdef K5
    // The fifth bit of weight 16 a + 4 b + c at bit 16 a + 4 c + b.
    let hb = vec4<u32>(qh[row * (p.k / 32u) + c] >> (16u * (v / 2u) + 2u * (v % 2u)));
    qa |= ((hb >> sh) & vec4<u32>(1u)) << vec4<u32>(4u);
    qb |= ((hb >> (sh + vec4<u32>(1u))) & vec4<u32>(1u)) << vec4<u32>(4u);
#endif
#ifdef KL
    // Q4_1 / Q5_1: q · d + m; Q5_0: (q - 16) · d; the decoder's expressions.
    let b = row * p.gpr + c;
#ifdef KL0
    let d = bitcast<f32>(f16_bits((scales[b >> 1u] >> (16u * (b & 1u))) & 0xffffu));
    let z = vec4<i32>(16);
    return W8(vec4<f32>(vec4<i32>(qa) - z) * d, vec4<f32>(vec4<i32>(qb) - z) * d);
#else
    let d = bitcast<f32>(f16_bits(scales[b] & 0xffffu));
    let m = vec4<f32>(bitcast<f32>(f16_bits(scales[b] >> 16u)));
    return W8(vec4<f32>(qa) * d + m, vec4<f32>(qb) * d + m);
#endif
#else
    let sb = row * p.gpr + c / 8u;
    let h = sb * 4u;
#ifdef K6
    // The high pair of weight 16 h + 8 a + 4 b + c in word h at bit 16 a + 4 c + 2 b.
    let hb = vec4<u32>(src[base + 4u + v / 2u] >> (16u * (v % 2u)));
    qa |= ((hb >> sh) & vec4<u32>(3u)) << vec4<u32>(4u);
    qb |= ((hb >> (sh + vec4<u32>(2u))) & vec4<u32>(3u)) << vec4<u32>(4u);
    let d = bitcast<f32>(f16_bits((dk[sb >> 1u] >> (16u * (sb & 1u))) & 0xffffu));
    let sc = (scales[h + (c % 8u) / 2u] >> (16u * (c % 2u) + 8u * (v / 2u))) & 255u;
    let d1 = d * f32(bitcast<i32>(sc << 24u) >> 24u);
    let z = vec4<i32>(32);
    return W8(d1 * vec4<f32>(vec4<i32>(qa) - z), d1 * vec4<f32>(vec4<i32>(qb) - z));
#else
    let dm = scales[h];
    let sm = kq_codes(scales[h + 1u], scales[h + 2u], scales[h + 3u], c % 8u);
    let d1 = bitcast<f32>(f16_bits(dm & 0xffffu)) * f32(sm.x);
    let m1 = vec4<f32>(bitcast<f32>(f16_bits(dm >> 16u)) * f32(sm.y));
    return W8(d1 * vec4<f32>(qa) - m1, d1 * vec4<f32>(qb) - m1);
#endif
#endif
}
#endif

#ifdef GENERIC
fn wel(i: u32) -> f32 {
    return bitcast<f32>(decode(i));
}

fn w8(row: u32, u: u32) -> W8 {
    let i = row * p.k + u * 8u;
    return W8(
        vec4<f32>(wel(i), wel(i + 1u), wel(i + 2u), wel(i + 3u)),
        vec4<f32>(wel(i + 4u), wel(i + 5u), wel(i + 6u), wel(i + 7u)),
    );
}
#endif

// The last unit of a row whose K is not a multiple of 8 (F32/F16 weights; weft rows are padded
// to a group): the weights past K belong to the next row or to the padding, so they read as 0.
fn w8_tail(row: u32, u: u32) -> W8 {
    let w = w8(row, u);
    let k = vec4<u32>(u * 8u) + vec4<u32>(0u, 1u, 2u, 3u);
    let kk = vec4<u32>(p.k);
    return W8(select(vec4<f32>(0.0), w.a, k < kk), select(vec4<f32>(0.0), w.b, k + vec4<u32>(4u) < kk));
}

// Eight bytes starting at any byte offset (GGML blocks are not word-aligned), as two words.
fn bytes8(off: u32) -> vec2<u32> {
    let at = off >> 2u;
    let sh = (off & 3u) * 8u;
    let w0 = src[at];
    let w1 = src[at + 1u];
    if (sh == 0u) {
        return vec2<u32>(w0, w1);
    }
    let w2 = src[at + 2u];
    return vec2<u32>((w0 >> sh) | (w1 << (32u - sh)), (w1 >> sh) | (w2 << (32u - sh)));
}

const SH8: vec4<u32> = vec4<u32>(0u, 8u, 16u, 24u);

// The four-bit fields at bit `bit` of each byte of `b`.
fn nibbles(b: vec2<u32>, bit: u32) -> array<vec4<u32>, 2> {
    let s = SH8 + vec4<u32>(bit);
    return array<vec4<u32>, 2>((vec4<u32>(b.x) >> s) & vec4<u32>(15u), (vec4<u32>(b.y) >> s) & vec4<u32>(15u));
}

// Element index of unit `u` of `row`: GGML rows are whole blocks, so a row starts a block.
fn elem(row: u32, u: u32) -> u32 {
    return row * p.k + u * 8u;
}

#ifdef W8_Q4_0
fn w8(row: u32, u: u32) -> W8 {
    let i = elem(row, u);
    let base = (i / 32u) * 18u;
    let e = i % 32u;
    let d = half_at(base);
    let q = nibbles(bytes8(base + 2u + e % 16u), (e / 16u) * 4u);
    let eight = vec4<i32>(8);
    return W8(vec4<f32>(vec4<i32>(q[0]) - eight) * d, vec4<f32>(vec4<i32>(q[1]) - eight) * d);
}
#endif

#ifdef W8_Q8_0
fn w8(row: u32, u: u32) -> W8 {
    let i = elem(row, u);
    let base = (i / 32u) * 34u;
    let d = half_at(base);
    let b = bytes8(base + 2u + i % 32u);
    let up = vec4<u32>(24u) - SH8;
    let qa = bitcast<vec4<i32>>(vec4<u32>(b.x) << up) >> vec4<u32>(24u);
    let qb = bitcast<vec4<i32>>(vec4<u32>(b.y) << up) >> vec4<u32>(24u);
    return W8(vec4<f32>(qa) * d, vec4<f32>(qb) * d);
}
#endif

#ifdef W8_Q4_K
fn w8(row: u32, u: u32) -> W8 {
    let i = elem(row, u);
    let base = (i / 256u) * 144u;
    let e = i % 256u;
    let c = e / 64u;
    let hi = (e % 64u) / 32u;
    let sm = k4_scale_min(base + 4u, 2u * c + hi);
    let d1 = half_at(base) * f32(sm.x);
    let m1 = vec4<f32>(half_at(base + 2u) * f32(sm.y));
    let q = nibbles(bytes8(base + 16u + 32u * c + e % 32u), 4u * hi);
    return W8(d1 * vec4<f32>(q[0]) - m1, d1 * vec4<f32>(q[1]) - m1);
}
#endif

#ifdef W8_Q6_K
fn w8(row: u32, u: u32) -> W8 {
    let i = elem(row, u);
    let base = (i / 256u) * 210u;
    let e = i % 256u;
    let n = e / 128u;
    let k = (e % 128u) / 32u;
    let l = e % 32u;
    let low = nibbles(bytes8(base + n * 64u + (k & 1u) * 32u + l), 4u * (k >> 1u));
    let hb = bytes8(base + 128u + n * 32u + l);
    let hs = SH8 + vec4<u32>(2u * k);
    let ha = ((vec4<u32>(hb.x) >> hs) & vec4<u32>(3u)) << vec4<u32>(4u);
    let hbv = ((vec4<u32>(hb.y) >> hs) & vec4<u32>(3u)) << vec4<u32>(4u);
    let dl = half_at(base + 208u) * f32(sext8(byte_at(base + 192u + n * 8u + l / 16u + 2u * k)));
    let off = vec4<i32>(32);
    return W8(
        dl * vec4<f32>(vec4<i32>(low[0] | ha) - off),
        dl * vec4<f32>(vec4<i32>(low[1] | hbv) - off),
    );
}
#endif
