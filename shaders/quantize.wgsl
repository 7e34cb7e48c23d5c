// Quantizes F32 / F16 / BF16 rows into weft blocks, bit for bit what `quant::weft::quantize`
// computes on the CPU: per group, the clipping grid of candidates scored after rounding to f16,
// then the least-squares refits, then the levels packed into words.
//
// Every floating-point operation here works on bit patterns with integer arithmetic, rounding to
// nearest even and keeping subnormals: WGSL lets a GPU flush subnormals, fuse `a * b + c` and
// divide to 2.5 ulp, and has no f64, while the reference sums its errors and fits its scales in
// f64. Integer operations are exact everywhere, so every adapter gives the CPU's bytes.
//
// One invocation quantizes one group. A group holding NaN or an infinity is not quantized: the
// tensor's id goes to `status` (its minimum over the load) and the host reports a typed error.

struct Params {
    rows: u32,
    cols: u32,
    // Groups per row.
    gpr: u32,
    // Invocations per row of the dispatch grid.
    stride: u32,
    bits: u32,
    group: u32,
    asym: u32,
    // 0: F32, 1: F16, 2: BF16.
    dtype: u32,
    // Index of this dispatch's first group in the output buffers.
    out_group0: u32,
    // Reported in `status` when a group is not finite.
    tensor: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
// f16 scales and zero points, two per word: neighbouring groups may belong to two invocations.
@group(0) @binding(2) var<storage, read_write> scales: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> zeros: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(5) var<uniform> params: Params;

const SIGN: u32 = 0x80000000u;
const F32_INF: u32 = 0x7F800000u;
const F32_NAN: u32 = 0x7FC00000u;
const F32_ONE: u32 = 0x3F800000u;
const F32_HALF: u32 = 0x3F000000u;
const F32_QUARTER: u32 = 0x3E800000u;
const F64_INF_HI: u32 = 0x7FF00000u;
// Candidates of the clipping grid and least-squares refits (quant/search.rs).
const SEARCH_STEPS: u32 = 24u;
const REFITS: u32 = 3u;

// ---- 64-bit unsigned integers as vec2(low word, high word) ----

fn u64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn u64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn u64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

fn u64_zero(a: vec2<u32>) -> bool {
    return (a.x | a.y) == 0u;
}

// Shifts below 64; WGSL masks a shift count to the word, so 0 and 32+ are handled apart.
fn u64_shl(a: vec2<u32>, n: u32) -> vec2<u32> {
    if n == 0u {
        return a;
    }
    if n >= 32u {
        return vec2<u32>(0u, a.x << (n - 32u));
    }
    return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}

fn u64_shr(a: vec2<u32>, n: u32) -> vec2<u32> {
    if n == 0u {
        return a;
    }
    if n >= 32u {
        return vec2<u32>(a.y >> (n - 32u), 0u);
    }
    return vec2<u32>((a.x >> n) | (a.y << (32u - n)), a.y >> n);
}

// Shifted right by any count, the lowest bit set when a 1 bit was shifted out (the sticky bit
// that keeps round-to-nearest-even exact).
fn u64_shr_jam(a: vec2<u32>, n: u32) -> vec2<u32> {
    if n == 0u {
        return a;
    }
    if n >= 64u {
        return vec2<u32>(select(0u, 1u, !u64_zero(a)), 0u);
    }
    let r = u64_shr(a, n);
    let lost = !u64_zero(u64_sub(a, u64_shl(r, n)));
    return vec2<u32>(r.x | select(0u, 1u, lost), r.y);
}

fn u64_clz(a: vec2<u32>) -> u32 {
    if a.y != 0u {
        return countLeadingZeros(a.y);
    }
    return 32u + countLeadingZeros(a.x);
}

// 32 x 32 -> 64 bits from 16-bit halves.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xFFFFu;
    let a1 = a >> 16u;
    let b0 = b & 0xFFFFu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let mid = a0 * b1 + (p00 >> 16u);
    let mid2 = (mid & 0xFFFFu) + a1 * b0;
    return vec2<u32>((mid2 << 16u) | (p00 & 0xFFFFu), a1 * b1 + (mid >> 16u) + (mid2 >> 16u));
}

// ---- f32 on bit patterns ----

fn f32_nan(a: u32) -> bool {
    return (a & 0x7FFFFFFFu) > F32_INF;
}

fn f32_inf(a: u32) -> bool {
    return (a & 0x7FFFFFFFu) == F32_INF;
}

fn f32_is_zero(a: u32) -> bool {
    return (a & 0x7FFFFFFFu) == 0u;
}

// The significand (hidden bit included) and the exponent e of a finite value m * 2^(e - 150).
fn f32_sig(a: u32) -> u32 {
    let e = (a >> 23u) & 0xFFu;
    return select((a & 0x7FFFFFu) | 0x800000u, a & 0x7FFFFFu, e == 0u);
}

fn f32_exp(a: u32) -> i32 {
    return max(i32((a >> 23u) & 0xFFu), 1);
}

// m shifted right by n, jammed.
fn jam32(m: u32, n: u32) -> u32 {
    if n >= 32u {
        return select(0u, 1u, m != 0u);
    }
    return (m >> n) | select(0u, 1u, (m & ((1u << n) - 1u)) != 0u);
}

// sig * 2^k (sig != 0) rounded to the nearest f32, ties to even, with sign bit s.
fn f32_round32(s: u32, sig: u32, k: i32) -> u32 {
    let shift = 1 - i32(countLeadingZeros(sig));
    var m: u32;
    if shift > 0 {
        m = jam32(sig, u32(shift));
    } else {
        m = sig << u32(-shift);
    }
    // m has its leading bit at bit 30: the value is m * 2^(e - 157) with e the exponent field.
    var e = k + shift + 157;
    if e >= 255 {
        return s | F32_INF;
    }
    if e <= 0 {
        m = jam32(m, u32(1 - e));
        e = 1;
    }
    let low = m & 0x7Fu;
    var r = (m + 0x40u) >> 7u;
    if low == 0x40u {
        r = r & ~1u;
    }
    // The hidden bit adds one to the exponent field; a carry out of the significand adds one
    // more, up to infinity.
    return s | ((u32(e - 1) << 23u) + r);
}

// The same for a 64-bit significand: its top 32 bits, jammed with the rest.
fn f32_round(s: u32, sig: vec2<u32>, k: i32) -> u32 {
    if sig.y == 0u {
        return f32_round32(s, sig.x, k);
    }
    let shift = 32u - countLeadingZeros(sig.y);
    if shift == 32u {
        return f32_round32(s, sig.y | select(0u, 1u, sig.x != 0u), k + 32);
    }
    let m = (sig.y << (32u - shift)) | (sig.x >> shift) | select(0u, 1u, (sig.x << (32u - shift)) != 0u);
    return f32_round32(s, m, k + i32(shift));
}

fn f32_mul(a: u32, b: u32) -> u32 {
    let s = (a ^ b) & SIGN;
    if f32_nan(a) || f32_nan(b) {
        return F32_NAN;
    }
    if f32_inf(a) || f32_inf(b) {
        if f32_is_zero(a) || f32_is_zero(b) {
            return F32_NAN;
        }
        return s | F32_INF;
    }
    if f32_is_zero(a) || f32_is_zero(b) {
        return s;
    }
    return f32_round(s, mul_wide(f32_sig(a), f32_sig(b)), f32_exp(a) + f32_exp(b) - 300);
}

// A finite non-zero significand moved up to bit 23, with its exponent.
fn f32_normal(a: u32) -> vec2<i32> {
    let m = f32_sig(a);
    let up = i32(countLeadingZeros(m)) - 8;
    return vec2<i32>(i32(m << u32(up)), f32_exp(a) - up);
}

fn f32_div(a: u32, b: u32) -> u32 {
    let s = (a ^ b) & SIGN;
    if f32_nan(a) || f32_nan(b) || (f32_inf(a) && f32_inf(b)) || (f32_is_zero(a) && f32_is_zero(b)) {
        return F32_NAN;
    }
    if f32_inf(a) || f32_is_zero(b) {
        return s | F32_INF;
    }
    if f32_inf(b) || f32_is_zero(a) {
        return s;
    }
    let na = f32_normal(a);
    let nb = f32_normal(b);
    let mb = u32(nb.x);
    // Long division in integer steps (exact): q = floor(ma * 2^26 / mb), at least 26 bits, then
    // 8 bits at a time; every partial remainder stays below mb < 2^24.
    var n = u32(na.x) << 2u;
    var q = n / mb;
    var r = n % mb;
    for (var i = 0u; i < 3u; i++) {
        n = r << 8u;
        q = (q << 8u) | (n / mb);
        r = n % mb;
    }
    return f32_round32(s, q | select(0u, 1u, r != 0u), na.y - nb.y - 26);
}

fn f32_add(a: u32, b: u32) -> u32 {
    if f32_nan(a) || f32_nan(b) {
        return F32_NAN;
    }
    if f32_inf(a) {
        if f32_inf(b) && ((a ^ b) & SIGN) != 0u {
            return F32_NAN;
        }
        return a;
    }
    if f32_inf(b) {
        return b;
    }
    if f32_is_zero(a) {
        // -0 + -0 is -0, any other sum of zeros +0.
        return select(b, a & b, f32_is_zero(b));
    }
    if f32_is_zero(b) {
        return a;
    }
    // The operand of larger exponent first; the other shifted right, jammed, 7 guard bits:
    // with a shift of 2 or more a difference loses at most one leading bit, with less the
    // shift is exact.
    var x = a;
    var y = b;
    if f32_exp(b) > f32_exp(a) {
        x = b;
        y = a;
    }
    let ex = f32_exp(x);
    let big = f32_sig(x) << 7u;
    let small = jam32(f32_sig(y) << 7u, u32(ex - f32_exp(y)));
    var sum: u32;
    var s = x & SIGN;
    if ((x ^ y) & SIGN) == 0u {
        sum = big + small;
    } else if big < small {
        sum = small - big;
        s = y & SIGN;
    } else {
        sum = big - small;
    }
    if sum == 0u {
        return 0u;
    }
    return f32_round32(s, sum, ex - 157);
}

fn f32_sub(a: u32, b: u32) -> u32 {
    return f32_add(a, b ^ SIGN);
}

// a < b as IEEE compares: false with a NaN, and between zeros.
fn f32_lt(a: u32, b: u32) -> bool {
    if f32_nan(a) || f32_nan(b) || (f32_is_zero(a) && f32_is_zero(b)) {
        return false;
    }
    let ka = select(a | SIGN, ~a, (a & SIGN) != 0u);
    let kb = select(b | SIGN, ~b, (b & SIGN) != 0u);
    return ka < kb;
}

// An integer below 2^24, exactly.
fn f32_from_u32(n: u32) -> u32 {
    if n == 0u {
        return 0u;
    }
    let p = 31u - countLeadingZeros(n);
    return ((p + 127u) << 23u) | ((n << (23u - p)) & 0x7FFFFFu);
}

// ---- f16 ----

// IEEE binary16 to f32, exactly (subnormals renormalised).
fn f16_to_f32(h: u32) -> u32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1Fu;
    let m = h & 0x3FFu;
    if e == 0x1Fu {
        return s | F32_INF | select(0u, 0x400000u | (m << 13u), m != 0u);
    }
    if e != 0u {
        return s | ((e + 112u) << 23u) | (m << 13u);
    }
    if m == 0u {
        return s;
    }
    let p = 31u - countLeadingZeros(m);
    return s | ((p + 103u) << 23u) | ((m << (23u - p)) & 0x7FFFFFu);
}

// f32 to binary16, ties to even, as the `half` crate converts.
fn f32_to_f16(x: u32) -> u32 {
    let s = (x >> 16u) & 0x8000u;
    let e = (x >> 23u) & 0xFFu;
    let frac = x & 0x7FFFFFu;
    if e == 0xFFu {
        return s | 0x7C00u | select(0u, 0x200u | (frac >> 13u), frac != 0u);
    }
    if e > 142u {
        return s | 0x7C00u;
    }
    if e >= 113u {
        var r = ((e - 112u) << 10u) | (frac >> 13u);
        if (frac & 0x1000u) != 0u && (frac & 0x2FFFu) != 0u {
            r += 1u;
        }
        return s | r;
    }
    if e < 102u {
        return s;
    }
    let m = frac | 0x800000u;
    let shift = 126u - e;
    var q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if rem > half || (rem == half && (q & 1u) == 1u) {
        q += 1u;
    }
    return s | q;
}

fn f16_finite(h: u32) -> bool {
    return (h & 0x7C00u) != 0x7C00u;
}

// ---- f64 as vec2(low word, high word) of its IEEE bits ----

fn f64_nan(a: vec2<u32>) -> bool {
    let hi = a.y & 0x7FFFFFFFu;
    return hi > F64_INF_HI || (hi == F64_INF_HI && a.x != 0u);
}

fn f64_inf(a: vec2<u32>) -> bool {
    return (a.y & 0x7FFFFFFFu) == F64_INF_HI && a.x == 0u;
}

fn f64_is_zero(a: vec2<u32>) -> bool {
    return ((a.y & 0x7FFFFFFFu) | a.x) == 0u;
}

fn f64_sig(a: vec2<u32>) -> vec2<u32> {
    let e = (a.y >> 20u) & 0x7FFu;
    let hi = (a.y & 0xFFFFFu) | select(0x100000u, 0u, e == 0u);
    return vec2<u32>(a.x, hi);
}

fn f64_exp(a: vec2<u32>) -> i32 {
    return max(i32((a.y >> 20u) & 0x7FFu), 1);
}

// sig * 2^k (sig != 0) rounded to the nearest f64, ties to even, with sign bit s.
fn f64_round(s: u32, sig: vec2<u32>, k: i32) -> vec2<u32> {
    let shift = 1 - i32(u64_clz(sig));
    var m: vec2<u32>;
    if shift > 0 {
        m = u64_shr_jam(sig, u32(shift));
    } else {
        m = u64_shl(sig, u32(-shift));
    }
    // Leading bit at 62: the value is m * 2^(e - 1085) with e the exponent field.
    var e = k + shift + 1085;
    if e >= 2047 {
        return vec2<u32>(0u, s | F64_INF_HI);
    }
    if e <= 0 {
        m = u64_shr_jam(m, u32(1 - e));
        e = 1;
    }
    let low = m.x & 0x3FFu;
    var r = u64_shr(u64_add(m, vec2<u32>(0x200u, 0u)), 10u);
    if low == 0x200u {
        r.x = r.x & ~1u;
    }
    return vec2<u32>(r.x, s | ((u32(e - 1) << 20u) + r.y));
}

fn f64_from_f32(a: u32) -> vec2<u32> {
    let s = a & SIGN;
    if f32_nan(a) {
        return vec2<u32>(1u, F64_INF_HI);
    }
    if f32_inf(a) {
        return vec2<u32>(0u, s | F64_INF_HI);
    }
    if f32_is_zero(a) {
        return vec2<u32>(0u, s);
    }
    return f64_round(s, vec2<u32>(f32_sig(a), 0u), f32_exp(a) - 150);
}

fn f64_from_int(n: i32) -> vec2<u32> {
    if n == 0 {
        return vec2<u32>(0u, 0u);
    }
    return f64_round(select(0u, SIGN, n < 0), vec2<u32>(u32(abs(n)), 0u), 0);
}

// d * d of an f32, exact in f64.
fn f64_square(d: u32) -> vec2<u32> {
    if f32_nan(d) {
        return vec2<u32>(1u, F64_INF_HI);
    }
    if f32_inf(d) {
        return vec2<u32>(0u, F64_INF_HI);
    }
    if f32_is_zero(d) {
        return vec2<u32>(0u, 0u);
    }
    let m = f32_sig(d);
    return f64_round(0u, mul_wide(m, m), 2 * f32_exp(d) - 300);
}

fn f64_to_f32(a: vec2<u32>) -> u32 {
    let s = a.y & SIGN;
    if f64_nan(a) {
        return F32_NAN;
    }
    if f64_inf(a) {
        return s | F32_INF;
    }
    if f64_is_zero(a) {
        return s;
    }
    return f32_round(s, f64_sig(a), f64_exp(a) - 1075);
}

fn f64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if f64_nan(a) || f64_nan(b) {
        return vec2<u32>(1u, F64_INF_HI);
    }
    if f64_inf(a) {
        if f64_inf(b) && ((a.y ^ b.y) & SIGN) != 0u {
            return vec2<u32>(1u, F64_INF_HI);
        }
        return a;
    }
    if f64_inf(b) {
        return b;
    }
    if f64_is_zero(a) {
        return select(b, vec2<u32>(0u, a.y & b.y), f64_is_zero(b));
    }
    if f64_is_zero(b) {
        return a;
    }
    var x = a;
    var y = b;
    if f64_exp(b) > f64_exp(a) {
        x = b;
        y = a;
    }
    let ex = f64_exp(x);
    // Leading bits at 62, ten guard bits.
    let big = u64_shl(f64_sig(x), 10u);
    let small = u64_shr_jam(u64_shl(f64_sig(y), 10u), u32(ex - f64_exp(y)));
    var sum: vec2<u32>;
    var s = x.y & SIGN;
    if ((x.y ^ y.y) & SIGN) == 0u {
        sum = u64_add(big, small);
    } else if u64_lt(big, small) {
        sum = u64_sub(small, big);
        s = y.y & SIGN;
    } else {
        sum = u64_sub(big, small);
    }
    if u64_zero(sum) {
        return vec2<u32>(0u, 0u);
    }
    return f64_round(s, sum, ex - 1085);
}

fn f64_neg(a: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x, a.y ^ SIGN);
}

fn f64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return f64_add(a, f64_neg(b));
}

fn f64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let s = (a.y ^ b.y) & SIGN;
    if f64_nan(a) || f64_nan(b) {
        return vec2<u32>(1u, F64_INF_HI);
    }
    if f64_inf(a) || f64_inf(b) {
        if f64_is_zero(a) || f64_is_zero(b) {
            return vec2<u32>(1u, F64_INF_HI);
        }
        return vec2<u32>(0u, s | F64_INF_HI);
    }
    if f64_is_zero(a) || f64_is_zero(b) {
        return vec2<u32>(0u, s);
    }
    let x = f64_sig(a);
    let y = f64_sig(b);
    // The 106-bit product in four words, then its top 64 bits jammed with the rest.
    let ll = mul_wide(x.x, y.x);
    let lh = mul_wide(x.x, y.y);
    let hl = mul_wide(x.y, y.x);
    let hh = mul_wide(x.y, y.y);
    let mid = u64_add(u64_add(vec2<u32>(ll.y, 0u), vec2<u32>(lh.x, 0u)), vec2<u32>(hl.x, 0u));
    var high = u64_add(u64_add(hh, vec2<u32>(lh.y, 0u)), u64_add(vec2<u32>(hl.y, 0u), vec2<u32>(mid.y, 0u)));
    // Product = high * 2^64 + (mid.x, ll.x); keep high * 2^22 + the top 22 bits of the rest.
    let rest = vec2<u32>(ll.x, mid.x);
    var top = u64_shl(high, 22u);
    let below = u64_shr(rest, 42u);
    top = vec2<u32>(top.x | below.x, top.y | below.y);
    let lost = ll.x != 0u || (mid.x & 0x3FFu) != 0u;
    top.x |= select(0u, 1u, lost);
    return f64_round(s, top, f64_exp(a) + f64_exp(b) - 2150 + 42);
}

// A finite non-zero significand moved up to bit 52, with its exponent.
fn f64_normal_sig(a: vec2<u32>) -> vec2<u32> {
    return u64_shl(f64_sig(a), u64_clz(f64_sig(a)) - 11u);
}

fn f64_normal_exp(a: vec2<u32>) -> i32 {
    return f64_exp(a) - (i32(u64_clz(f64_sig(a))) - 11);
}

fn f64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let s = (a.y ^ b.y) & SIGN;
    if f64_nan(a) || f64_nan(b) || (f64_inf(a) && f64_inf(b)) || (f64_is_zero(a) && f64_is_zero(b)) {
        return vec2<u32>(1u, F64_INF_HI);
    }
    if f64_inf(a) || f64_is_zero(b) {
        return vec2<u32>(0u, s | F64_INF_HI);
    }
    if f64_inf(b) || f64_is_zero(a) {
        return vec2<u32>(0u, s);
    }
    let mb = f64_normal_sig(b);
    var r = f64_normal_sig(a);
    var q = vec2<u32>(0u, 0u);
    // q = floor(ma * 2^55 / mb), at least 55 bits.
    for (var i = 0u; i < 56u; i++) {
        q = u64_shl(q, 1u);
        if !u64_lt(r, mb) {
            r = u64_sub(r, mb);
            q.x |= 1u;
        }
        r = u64_shl(r, 1u);
    }
    q.x |= select(0u, 1u, !u64_zero(r));
    return f64_round(s, q, f64_normal_exp(a) - f64_normal_exp(b) - 55);
}

// Both non-negative (or +inf): their bit patterns order as their values.
fn f64_lt_nonneg(a: vec2<u32>, b: vec2<u32>) -> bool {
    return u64_lt(a, b);
}

fn f64_le_zero(a: vec2<u32>) -> bool {
    return !f64_nan(a) && ((a.y & SIGN) != 0u || f64_is_zero(a));
}

// ---- the quantizer (quant/search.rs, quant/weft.rs) ----

// The group's values as f32 bits; zeros past the end of the row.
var<private> xs: array<u32, 128>;
var<private> n_values: u32;
var<private> max_level: u32;
var<private> sym_zero: u32;
// The best candidate so far: its squared error (f64) and f16 scale and zero point.
var<private> best_err: vec2<u32>;
var<private> best_scale: u32;
var<private> best_zero: u32;

// Rust's `round` (half away from zero) of x, clamped to [0, max_level], as an integer.
fn level_of(x: u32) -> u32 {
    if (x & SIGN) != 0u || f32_nan(x) {
        return 0u;
    }
    let e = x >> 23u;
    if e < 126u {
        return 0u;
    }
    if e >= 150u {
        return max_level;
    }
    let n = 150u - e;
    let r = (((x & 0x7FFFFFu) | 0x800000u) + (1u << (n - 1u))) >> n;
    return min(r, max_level);
}

fn level(v: u32, scale: u32, zero: u32) -> u32 {
    if f32_is_zero(scale) {
        return level_of(zero);
    }
    return level_of(f32_add(f32_div(v, scale), zero));
}

// scale * (q - zero): the one dequantization rule.
fn dequant(q: u32, scale: u32, zero: u32) -> u32 {
    return f32_mul(scale, f32_sub(f32_from_u32(q), zero));
}

// Sum over the group of (v - dequant(level(v)))^2, in f64 and in order.
fn sq_error(scale: u32, zero: u32) -> vec2<u32> {
    var err = vec2<u32>(0u, 0u);
    for (var j = 0u; j < n_values; j++) {
        let v = xs[j];
        let d = f32_sub(v, dequant(level(v, scale, zero), scale, zero));
        err = f64_add(err, f64_square(d));
    }
    return err;
}

// Scores (scale, zero) after rounding both to f16; keeps it when it beats the best.
fn consider(scale: u32, zero: u32) -> bool {
    let s = f32_to_f16(scale);
    let z = f32_to_f16(zero);
    if !f16_finite(s) || !f16_finite(z) {
        return false;
    }
    let zf = select(sym_zero, f16_to_f32(z), params.asym != 0u);
    let err = sq_error(f16_to_f32(s), zf);
    if f64_lt_nonneg(err, best_err) {
        best_err = err;
        best_scale = s;
        best_zero = z;
        return true;
    }
    return false;
}

fn search_sym(lo: u32, hi: u32) {
    let amax = select(lo, hi, (hi & 0x7FFFFFFFu) >= (lo & 0x7FFFFFFFu));
    let half_levels = 1u << (params.bits - 1u);
    let half = f32_from_u32(half_levels);
    let below = f32_from_u32(max(half_levels - 1u, 1u));
    let steps = f32_from_u32(SEARCH_STEPS);
    for (var step = 0u; step < SEARCH_STEPS; step++) {
        let f = f32_sub(F32_ONE, f32_div(f32_mul(F32_HALF, f32_from_u32(step)), steps));
        consider(f32_div(f32_mul(amax ^ SIGN, f), half), 0u);
        consider(f32_div(f32_mul(amax, f), below), 0u);
    }
    let z = i32(half_levels);
    for (var it = 0u; it < REFITS; it++) {
        let s = f16_to_f32(best_scale);
        if f32_is_zero(s) {
            break;
        }
        var num = vec2<u32>(0u, 0u);
        var den = 0u;
        for (var j = 0u; j < n_values; j++) {
            let q = i32(level(xs[j], s, sym_zero)) - z;
            num = f64_add(num, f64_mul(f64_from_f32(xs[j]), f64_from_int(q)));
            den += u32(q * q);
        }
        if den == 0u || !consider(f64_to_f32(f64_div(num, f64_from_int(i32(den)))), 0u) {
            break;
        }
    }
}

fn search_asym(lo: u32, hi: u32) {
    let span = f32_sub(hi, lo);
    let quarter = f32_mul(span, F32_QUARTER);
    let n = SEARCH_STEPS / 4u;
    let nf = f32_from_u32(n);
    let top = f32_from_u32(max_level);
    for (var a = 0u; a < n; a++) {
        for (var b = 0u; b < n; b++) {
            let l = f32_add(lo, f32_div(f32_mul(quarter, f32_from_u32(a)), nf));
            let h = f32_sub(hi, f32_div(f32_mul(quarter, f32_from_u32(b)), nf));
            if f32_lt(l, h) {
                let s = f32_div(f32_sub(h, l), top);
                consider(s, f32_div(l ^ SIGN, s));
            }
        }
    }
    for (var it = 0u; it < REFITS; it++) {
        let s = f16_to_f32(best_scale);
        let z = f16_to_f32(best_zero);
        if f32_is_zero(s) {
            break;
        }
        var sq = 0u;
        var sqq = 0u;
        var sx = vec2<u32>(0u, 0u);
        var sqx = vec2<u32>(0u, 0u);
        for (var j = 0u; j < n_values; j++) {
            let q = level(xs[j], s, z);
            let v = f64_from_f32(xs[j]);
            sq += q;
            sqq += q * q;
            sx = f64_add(sx, v);
            sqx = f64_add(sqx, f64_mul(f64_from_int(i32(q)), v));
        }
        // Integers below 2^31, exact as the reference's f64 products.
        let sw = n_values;
        if sw * sqq <= sq * sq {
            break;
        }
        let den = f64_from_int(i32(sw * sqq - sq * sq));
        let swf = f64_from_int(i32(sw));
        let sqf = f64_from_int(i32(sq));
        let s2 = f64_div(f64_sub(f64_mul(swf, sqx), f64_mul(sqf, sx)), den);
        let m2 = f64_div(f64_sub(sx, f64_mul(s2, sqf)), swf);
        if f64_le_zero(s2) || !consider(f64_to_f32(s2), f64_to_f32(f64_div(f64_neg(m2), s2))) {
            break;
        }
    }
}

// Element i of the source as f32 bits.
fn load(i: u32) -> u32 {
    switch params.dtype {
        case 1u: {
            return f16_to_f32((src[i >> 1u] >> ((i & 1u) * 16u)) & 0xFFFFu);
        }
        case 2u: {
            return ((src[i >> 1u] >> ((i & 1u) * 16u)) & 0xFFFFu) << 16u;
        }
        default: {
            return src[i];
        }
    }
}

fn put_half(buffer: u32, index: u32, h: u32) {
    let v = h << ((index & 1u) * 16u);
    if buffer == 0u {
        atomicOr(&scales[index >> 1u], v);
    } else {
        atomicOr(&zeros[index >> 1u], v);
    }
}

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let index = gid.y * params.stride + gid.x;
    if index >= params.rows * params.gpr {
        return;
    }
    let g = params.group;
    let row = index / params.gpr;
    let start = (index % params.gpr) * g;
    n_values = min(g, params.cols - start);
    max_level = (1u << params.bits) - 1u;
    sym_zero = f32_from_u32(1u << (params.bits - 1u));
    var lo = 0x7F7FFFFFu;
    var hi = 0xFF7FFFFFu;
    var finite = true;
    for (var j = 0u; j < g; j++) {
        var v = 0u;
        if j < n_values {
            v = load(row * params.cols + start + j);
            finite = finite && (v & F32_INF) != F32_INF;
            lo = select(lo, v, f32_lt(v, lo));
            hi = select(hi, v, f32_lt(hi, v));
        }
        xs[j] = v;
    }
    let out = params.out_group0 + index;
    if !finite {
        atomicMin(&status[0], params.tensor);
        return;
    }
    best_err = vec2<u32>(0u, F64_INF_HI);
    best_scale = 0u;
    best_zero = 0u;
    if f32_is_zero(lo) && f32_is_zero(hi) {
        best_zero = select(f32_to_f16(sym_zero), 0u, params.asym != 0u);
    } else if params.asym != 0u {
        search_asym(lo, hi);
    } else {
        search_sym(lo, hi);
    }
    let scale = f16_to_f32(best_scale);
    let zero = select(sym_zero, f16_to_f32(best_zero), params.asym != 0u);
    // Every level of the group, padding included, packed as quant/weft.rs's put_q packs them.
    let wpg = g * params.bits / 32u;
    var packed: array<u32, 32>;
    for (var w = 0u; w < wpg; w++) {
        packed[w] = 0u;
    }
    for (var j = 0u; j < g; j++) {
        let q = level(xs[j], scale, zero);
        if params.bits == 3u {
            let c = (j / 32u) * 3u;
            let i = j % 32u;
            packed[c + i / 16u] |= (q & 3u) << (2u * (i % 16u));
            packed[c + 2u] |= ((q >> 2u) & 1u) << i;
        } else {
            let per = 32u / params.bits;
            packed[j / per] |= q << ((j % per) * params.bits);
        }
    }
    for (var w = 0u; w < wpg; w++) {
        words[out * wpg + w] = packed[w];
    }
    put_half(0u, out, best_scale);
    if params.asym != 0u {
        put_half(1u, out, best_zero);
    }
}
