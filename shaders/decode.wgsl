// Decoders shared by the dequant, qmatmul and embedding kernels: `decode(i)` turns element `i` of
// one storage type (one define, e.g. DT_Q4_K), read from little-endian bytes packed in u32 words
// of the `src` array the including kernel declares, into f32 bits, bit for bit what the CPU
// reference in src/quant computes. Floats are built from integer fields and written with
// bitcast: GPUs may flush subnormals in float arithmetic, and their conversion of wide integers
// to float need not round to nearest even, so neither is trusted here (small integers convert
// exactly). The only float arithmetic is in the block formats: an f16 scale (11 significant
// bits) times an integer below 2^13 is exact in f32 and never subnormal, so the one rounding is
// the final add, and a GPU that fuses a*b+c into an FMA still gets the same bits.

const INF: u32 = 0x7f800000u;
const QUIET: u32 = 0x00400000u;
const MANT: u32 = 0x007fffffu;

fn byte_at(off: u32) -> u32 {
    return (src[off >> 2u] >> ((off & 3u) * 8u)) & 0xffu;
}

fn u16_at(off: u32) -> u32 {
    return byte_at(off) | (byte_at(off + 1u) << 8u);
}

fn sext8(b: u32) -> i32 {
    return bitcast<i32>(b << 24u) >> 24u;
}

// Exact widening of a finite small float; subnormal sources become normal f32.
fn widen_finite(sign: u32, e: u32, m: u32, mbits: u32, bias: u32) -> u32 {
    let s = sign << 31u;
    if (e != 0u) {
        return s | ((e + 127u - bias) << 23u) | (m << (23u - mbits));
    }
    if (m == 0u) {
        return s;
    }
    let lead = 31u - countLeadingZeros(m);
    return s | ((128u + lead - mbits - bias) << 23u) | ((m << (23u - lead)) & MANT);
}

fn f16_bits(h: u32) -> u32 {
    let sign = (h >> 15u) & 1u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) {
        var nan = 0u;
        if (m != 0u) {
            nan = QUIET | (m << 13u);
        }
        return (sign << 31u) | INF | nan;
    }
    return widen_finite(sign, e, m, 10u, 15u);
}

fn half_at(off: u32) -> f32 {
    return bitcast<f32>(f16_bits(u16_at(off)));
}

fn quiet(bits: u32) -> u32 {
    if ((bits & 0x7fffffffu) > INF) {
        return bits | QUIET;
    }
    return bits;
}

// (hi:lo) >> s for 1 <= s <= 63, rounded to nearest even; the caller knows the result fits 32 bits.
fn shr_rne(lo: u32, hi: u32, s: u32) -> u32 {
    var q: u32;
    if (s >= 32u) {
        q = hi >> (s - 32u);
    } else {
        q = (lo >> s) | (hi << (32u - s));
    }
    let r = s - 1u;
    var round: u32;
    var sticky: bool;
    if (r >= 32u) {
        round = (hi >> (r - 32u)) & 1u;
        sticky = lo != 0u || (hi & ((1u << (r - 32u)) - 1u)) != 0u;
    } else {
        round = (lo >> r) & 1u;
        sticky = (lo & ((1u << r) - 1u)) != 0u;
    }
    if (round == 1u && (sticky || (q & 1u) == 1u)) {
        q = q + 1u;
    }
    return q;
}

fn u64_bits(lo: u32, hi: u32) -> u32 {
    if ((lo | hi) == 0u) {
        return 0u;
    }
    var lead: u32;
    if (hi != 0u) {
        lead = 63u - countLeadingZeros(hi);
    } else {
        lead = 31u - countLeadingZeros(lo);
    }
    if (lead <= 23u) {
        return ((lead + 127u) << 23u) | ((lo << (23u - lead)) & MANT);
    }
    // A carry out of the rounded mantissa bumps the exponent, as it should.
    return ((lead + 126u) << 23u) + shr_rne(lo, hi, lead - 23u);
}

fn i64_bits(lo: u32, hi: u32) -> u32 {
    if ((hi & 0x80000000u) == 0u) {
        return u64_bits(lo, hi);
    }
    let nlo = ~lo + 1u;
    let nhi = ~hi + select(0u, 1u, nlo == 0u);
    return 0x80000000u | u64_bits(nlo, nhi);
}

fn i32_bits(v: u32) -> u32 {
    return i64_bits(v, select(0u, 0xffffffffu, (v & 0x80000000u) != 0u));
}

fn f64_bits(lo: u32, hi: u32) -> u32 {
    let s = hi & 0x80000000u;
    let e = i32((hi >> 20u) & 0x7ffu);
    let mhi = hi & 0xfffffu;
    if (e == 0x7ff) {
        if ((mhi | lo) == 0u) {
            return s | INF;
        }
        return s | INF | QUIET | (mhi << 3u) | (lo >> 29u);
    }
    if (e == 0) {
        return s;
    }
    let biased = e - 896;
    if (biased >= 255) {
        return s | INF;
    }
    var shift = 29u;
    if (biased < 1) {
        shift = u32(30 - biased);
    }
    if (shift >= 54u) {
        return s;
    }
    let q = shr_rne(lo, mhi | 0x100000u, shift);
    if (biased >= 1) {
        return s | ((u32(biased - 1) << 23u) + q);
    }
    return s | q;
}

#ifdef DT_F64
fn decode(i: u32) -> u32 {
    return f64_bits(src[2u * i], src[2u * i + 1u]);
}
#endif
#ifdef DT_F32
fn decode(i: u32) -> u32 {
    return quiet(src[i]);
}
#endif
#ifdef DT_F16
fn decode(i: u32) -> u32 {
    return f16_bits(u16_at(2u * i));
}
#endif
#ifdef DT_BF16
fn decode(i: u32) -> u32 {
    return quiet(u16_at(2u * i) << 16u);
}
#endif
#ifdef DT_F8_E4M3
fn decode(i: u32) -> u32 {
    let b = byte_at(i);
    let sign = b >> 7u;
    let e = (b >> 3u) & 0xfu;
    let m = b & 7u;
    if (e == 0xfu && m == 7u) {
        return (sign << 31u) | INF | QUIET;
    }
    return widen_finite(sign, e, m, 3u, 7u);
}
#endif
#ifdef DT_F8_E5M2
fn decode(i: u32) -> u32 {
    return f16_bits(byte_at(i) << 8u);
}
#endif
#ifdef DT_F4
fn decode(i: u32) -> u32 {
    let n = (byte_at(i >> 1u) >> ((i & 1u) * 4u)) & 0xfu;
    return widen_finite((n >> 3u) & 1u, (n >> 1u) & 3u, n & 1u, 1u, 1u);
}
#endif
#ifdef DT_I64
fn decode(i: u32) -> u32 {
    return i64_bits(src[2u * i], src[2u * i + 1u]);
}
#endif
#ifdef DT_U64
fn decode(i: u32) -> u32 {
    return u64_bits(src[2u * i], src[2u * i + 1u]);
}
#endif
#ifdef DT_I32
fn decode(i: u32) -> u32 {
    return i32_bits(src[i]);
}
#endif
#ifdef DT_U32
fn decode(i: u32) -> u32 {
    return u64_bits(src[i], 0u);
}
#endif
#ifdef DT_I16
fn decode(i: u32) -> u32 {
    return i32_bits(bitcast<u32>(bitcast<i32>(u16_at(2u * i) << 16u) >> 16u));
}
#endif
#ifdef DT_U16
fn decode(i: u32) -> u32 {
    return u64_bits(u16_at(2u * i), 0u);
}
#endif
#ifdef DT_I8
fn decode(i: u32) -> u32 {
    return i32_bits(bitcast<u32>(sext8(byte_at(i))));
}
#endif
#ifdef DT_U8
fn decode(i: u32) -> u32 {
    return u64_bits(byte_at(i), 0u);
}
#endif
#ifdef DT_BOOL
fn decode(i: u32) -> u32 {
    return select(0u, 0x3f800000u, byte_at(i) != 0u);
}
#endif
#ifdef DT_Q4_0
fn decode(i: u32) -> u32 {
    let base = (i / 32u) * 18u;
    let e = i % 32u;
    let q = (byte_at(base + 2u + e % 16u) >> ((e / 16u) * 4u)) & 0xfu;
    return bitcast<u32>(f32(i32(q) - 8) * half_at(base));
}
#endif
#ifdef DT_Q4_1
fn decode(i: u32) -> u32 {
    let base = (i / 32u) * 20u;
    let e = i % 32u;
    let q = (byte_at(base + 4u + e % 16u) >> ((e / 16u) * 4u)) & 0xfu;
    return bitcast<u32>(f32(q) * half_at(base) + half_at(base + 2u));
}
#endif
#ifdef DT_Q5_0
fn decode(i: u32) -> u32 {
    let base = (i / 32u) * 22u;
    let e = i % 32u;
    let qh = (byte_at(base + 2u + e / 8u) >> (e % 8u)) & 1u;
    let q = ((byte_at(base + 6u + e % 16u) >> ((e / 16u) * 4u)) & 0xfu) | (qh << 4u);
    return bitcast<u32>(f32(i32(q) - 16) * half_at(base));
}
#endif
#ifdef DT_Q5_1
fn decode(i: u32) -> u32 {
    let base = (i / 32u) * 24u;
    let e = i % 32u;
    let qh = (byte_at(base + 4u + e / 8u) >> (e % 8u)) & 1u;
    let q = ((byte_at(base + 8u + e % 16u) >> ((e / 16u) * 4u)) & 0xfu) | (qh << 4u);
    return bitcast<u32>(f32(q) * half_at(base) + half_at(base + 2u));
}
#endif
#ifdef DT_Q8_0
fn decode(i: u32) -> u32 {
    let base = (i / 32u) * 34u;
    return bitcast<u32>(f32(sext8(byte_at(base + 2u + i % 32u))) * half_at(base));
}
#endif
#ifdef DT_Q2_K
fn decode(i: u32) -> u32 {
    let base = (i / 256u) * 84u;
    let e = i % 256u;
    let n = e / 128u;
    let j = (e % 128u) / 32u;
    let w = e % 32u;
    let sc = byte_at(base + n * 8u + j * 2u + w / 16u);
    let dl = half_at(base + 80u) * f32(sc & 0xfu);
    let ml = half_at(base + 82u) * f32(sc >> 4u);
    let q = (byte_at(base + 16u + n * 32u + w) >> (2u * j)) & 3u;
    return bitcast<u32>(dl * f32(q) - ml);
}
#endif
#ifdef DT_Q3_K
// 6-bit scale `k` of the Q3_K super-block at byte `base`, minus 32 (also the block kernel's).
fn q3_scale(base: u32, k: u32) -> f32 {
    var low: u32;
    if (k < 8u) {
        low = byte_at(base + 96u + k) & 0xfu;
    } else {
        low = byte_at(base + 88u + k) >> 4u;
    }
    let high = (byte_at(base + 104u + k % 4u) >> (2u * (k / 4u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}

fn decode(i: u32) -> u32 {
    let base = (i / 256u) * 110u;
    let e = i % 256u;
    let n = e / 128u;
    let j = (e % 128u) / 32u;
    let w = e % 32u;
    let k = n * 8u + j * 2u + w / 16u;
    let dl = half_at(base + 108u) * q3_scale(base, k);
    let q = i32((byte_at(base + 32u + n * 32u + w) >> (2u * j)) & 3u);
    let hm = (byte_at(base + w) >> (n * 4u + j)) & 1u;
    return bitcast<u32>(dl * f32(q - select(4, 0, hm != 0u)));
}
#endif

// Scale (x) and min (y) `j` of the 12 packed 6-bit pairs at `s` shared by Q4_K and Q5_K.
fn k4_scale_min(s: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
    }
    let top = byte_at(s + j + 4u);
    return vec2<u32>(
        (top & 0xfu) | ((byte_at(s + j - 4u) >> 6u) << 4u),
        (top >> 4u) | ((byte_at(s + j) >> 6u) << 4u),
    );
}

#ifdef DT_Q4_K
fn decode(i: u32) -> u32 {
    let base = (i / 256u) * 144u;
    let e = i % 256u;
    let c = e / 64u;
    let hi = (e % 64u) / 32u;
    let sm = k4_scale_min(base + 4u, 2u * c + hi);
    let d1 = half_at(base) * f32(sm.x);
    let m1 = half_at(base + 2u) * f32(sm.y);
    let q = (byte_at(base + 16u + 32u * c + e % 32u) >> (4u * hi)) & 0xfu;
    return bitcast<u32>(d1 * f32(q) - m1);
}
#endif
#ifdef DT_Q5_K
fn decode(i: u32) -> u32 {
    let base = (i / 256u) * 176u;
    let e = i % 256u;
    let c = e / 64u;
    let hi = (e % 64u) / 32u;
    let l = e % 32u;
    let sm = k4_scale_min(base + 4u, 2u * c + hi);
    let d1 = half_at(base) * f32(sm.x);
    let m1 = half_at(base + 2u) * f32(sm.y);
    let low = (byte_at(base + 48u + 32u * c + l) >> (4u * hi)) & 0xfu;
    let high = ((byte_at(base + 16u + l) >> (2u * c + hi)) & 1u) << 4u;
    return bitcast<u32>(d1 * f32(low | high) - m1);
}
#endif
#ifdef DT_Q6_K
fn decode(i: u32) -> u32 {
    let base = (i / 256u) * 210u;
    let e = i % 256u;
    let n = e / 128u;
    let k = (e % 128u) / 32u;
    let l = e % 32u;
    let low = (byte_at(base + n * 64u + (k & 1u) * 32u + l) >> (4u * (k >> 1u))) & 0xfu;
    let high = ((byte_at(base + 128u + n * 32u + l) >> (2u * k)) & 3u) << 4u;
    let sc = sext8(byte_at(base + 192u + n * 8u + l / 16u + 2u * k));
    return bitcast<u32>((half_at(base + 208u) * f32(sc)) * f32(i32(low | high) - 32));
}
#endif
