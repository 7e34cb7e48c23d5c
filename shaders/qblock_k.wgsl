// Block-native `bdot` (see shaders/qblock.wgsl) for the K-quants: a super-block of 256 weights
// is eight 32-weight chunks, so chunk b of a row is chunk b % 8 of super-block b / 8, and only
// that chunk's 6-bit (Q4_K, Q5_K) or 8-bit (Q6_K) sub-block scale is decoded for it. Q2_K,
// Q3_K and Q6_K chunks have a scale per 16 weights: the scale multiplies each half's sum.

// The eight words at byte `at` (even: Q3_K and Q6_K super-blocks, 110 and 210 bytes, start
// word-aligned or two bytes into a word), from nine aligned loads and no branch.
fn words8(at: u32) -> array<u32, 8> {
    let w0 = at >> 2u;
    let odd = (at & 2u) != 0u;
    var raw: array<u32, 9>;
    for (var i = 0u; i < 9u; i++) {
        raw[i] = src[w0 + i];
    }
    var out: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
        out[i] = select(raw[i], (raw[i] >> 16u) | (raw[i + 1u] << 16u), odd);
    }
    return out;
}

#ifdef B_Q4_K
// 144 bytes = 36 words, every super-block word-aligned: d | dmin << 16, the 12 scale bytes in
// words 1-3, then 128 quant bytes; chunk j is the low (j even) or high (j odd) nibbles of bytes
// 32 (j / 2) .. 32 (j / 2) + 31.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let at = (row * (p.k / 256u) + b / 8u) * 36u;
    let j = b % 8u;
    let dm = src[at];
    let sm = k4_scale_min(at * 4u + 4u, j);
    let d1 = half_in(dm, 0u) * f32(sm.x);
    let m1 = vec4<f32>(half_in(dm, 1u) * f32(sm.y));
    let q0 = at + 4u + (j / 2u) * 8u;
    let sh = LOW4 + vec4<u32>(4u * (j % 2u));
    var sum = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = (vec4<u32>(src[q0 + i]) >> sh) & vec4<u32>(15u);
        sum += dot4(vec4<f32>(q) * d1 - m1, xs[i]);
    }
    return sum;
}
#endif

#ifdef B_Q5_K
// 176 bytes = 44 words: d | dmin << 16, scales in words 1-3, the fifth bits (qh, 32 bytes) in
// words 4-11, the low nibbles (128 bytes) in words 12-43; chunk j's fifth bit is bit j of qh[l].
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let at = (row * (p.k / 256u) + b / 8u) * 44u;
    let j = b % 8u;
    let dm = src[at];
    let sm = k4_scale_min(at * 4u + 4u, j);
    let d1 = half_in(dm, 0u) * f32(sm.x);
    let m1 = vec4<f32>(half_in(dm, 1u) * f32(sm.y));
    let q0 = at + 12u + (j / 2u) * 8u;
    let sh = LOW4 + vec4<u32>(4u * (j % 2u));
    let hs = LOW4 + vec4<u32>(j);
    var sum = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let low = (vec4<u32>(src[q0 + i]) >> sh) & vec4<u32>(15u);
        let high = ((vec4<u32>(src[at + 4u + i]) >> hs) & vec4<u32>(1u)) << vec4<u32>(4u);
        sum += dot4(vec4<f32>(low | high) * d1 - m1, xs[i]);
    }
    return sum;
}
#endif

#ifdef B_Q6_K
// ql[128], qh[64], scales[16] as i8, d: chunk j = 4n + k takes the nibbles at bit 4 (k / 2) of
// ql[64n + 32 (k % 2) + l], the two bits at bit 2k of qh[32n + l], and scale 8n + 2k for l < 16,
// 8n + 2k + 1 after. The weight is (d · scale) · (q - 32); the scale multiplies each half's sum.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let base = (row * (p.k / 256u) + b / 8u) * 210u;
    let j = b % 8u;
    let n = j / 4u;
    let k = j % 4u;
    let d = half_at(base + 208u);
    let sc = u16_at(base + 192u + n * 8u + 2u * k);
    let lw = words8(base + n * 64u + (k & 1u) * 32u);
    let hw = words8(base + 128u + n * 32u);
    let ls = LOW4 + vec4<u32>(4u * (k >> 1u));
    let hs = LOW4 + vec4<u32>(2u * k);
    var sums = vec2<f32>(0.0);
    for (var i = 0u; i < 8u; i++) {
        let low = (vec4<u32>(lw[i]) >> ls) & vec4<u32>(15u);
        let high = ((vec4<u32>(hw[i]) >> hs) & vec4<u32>(3u)) << vec4<u32>(4u);
        let t = dot4(vec4<f32>(vec4<i32>(low | high) - vec4<i32>(32)), xs[i]);
        sums += select(vec2<f32>(t, 0.0), vec2<f32>(0.0, t), i >= 4u);
    }
    return (d * f32(sext8(sc & 255u))) * sums.x + (d * f32(sext8(sc >> 8u))) * sums.y;
}
#endif

#ifdef B_Q2_K
// 84 bytes = 21 words: scales[16] (low nibble scale, high nibble min) in words 0-3, qs[64] in
// words 4-19, d | dmin << 16 in word 20. Chunk c = 4n + j is the two bits at bit 2j of
// qs[32n + l], with scale bytes 8n + 2j (l < 16) and 8n + 2j + 1.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let at = (row * (p.k / 256u) + b / 8u) * 21u;
    let c = b % 8u;
    let n = c / 4u;
    let j = c % 4u;
    let dm = src[at + 20u];
    let d = half_in(dm, 0u);
    let dmin = half_in(dm, 1u);
    let sb = n * 8u + 2u * j;
    let scs = (src[at + sb / 4u] >> ((sb % 4u) * 8u)) & 0xffffu;
    let sh = LOW4 + vec4<u32>(2u * j);
    var sum = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let sc = (scs >> (8u * (i / 4u))) & 0xffu;
        let dl = d * f32(sc & 0xfu);
        let ml = vec4<f32>(dmin * f32(sc >> 4u));
        let q = (vec4<u32>(src[at + 4u + n * 8u + i]) >> sh) & vec4<u32>(3u);
        sum += dot4(vec4<f32>(q) * dl - ml, xs[i]);
    }
    return sum;
}
#endif

#ifdef B_Q3_K
// The scales come from q3_scale in decode.wgsl, the same reader the decoder uses.
// 110 bytes (two-byte aligned, like Q6_K): hmask[32], qs[64], scales[12], d. Chunk c = 4n + j
// is the two bits at bit 2j of qs[32n + l], minus 4 where bit 4n + j of hmask[l] is clear.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let base = (row * (p.k / 256u) + b / 8u) * 110u;
    let c = b % 8u;
    let n = c / 4u;
    let j = c % 4u;
    let d = half_at(base + 108u);
    let qw = words8(base + 32u + n * 32u);
    let hw = words8(base);
    let sh = LOW4 + vec4<u32>(2u * j);
    let hs = LOW4 + vec4<u32>(4u * n + j);
    var sums = vec2<f32>(0.0);
    for (var i = 0u; i < 8u; i++) {
        let q = vec4<i32>((vec4<u32>(qw[i]) >> sh) & vec4<u32>(3u));
        let hset = ((vec4<u32>(hw[i]) >> hs) & vec4<u32>(1u)) != vec4<u32>(0u);
        let v = q - select(vec4<i32>(4), vec4<i32>(0), hset);
        let t = dot4(vec4<f32>(v), xs[i]);
        sums += select(vec2<f32>(t, 0.0), vec2<f32>(0.0, t), i >= 4u);
    }
    let k0 = n * 8u + 2u * j;
    return (d * q3_scale(base, k0)) * sums.x + (d * q3_scale(base, k0 + 1u)) * sums.y;
}
#endif
