// Block-native access for the GEMV and GEMM kernels (BLOCKS): `bdot(row, b, xs)` is the dot
// product of the 32 weights of chunk b of `row` with xs (those 32 activations as eight vec4, from
// `xblock`), its scale (and min or zero point) read once per chunk and its quants read as whole
// words. Each weight is formed as in decode.wgsl, or as its integer part with the scale applied
// to the chunk's sum (no cancellation: every term keeps its sign and size); only the sum's
// association differs from the reference, which the products' named tolerance covers. The
// bit-exact dequantization (`w8`, `decode`) serves the embedding lookup.

#ifdef BLOCKS
#ifdef XSCALAR
// K not a multiple of 4 (weft rows may be ragged): x is read one float at a time.
@group(0) @binding(1) var<storage, read> x: array<f32>; // [t, k]

fn xblock(tok: u32, b: u32) -> array<vec4<f32>, 8> {
    var xs: array<vec4<f32>, 8>;
    let at = tok * p.k + b * 32u;
    for (var i = 0u; i < 32u; i++) {
        if (b * 32u + i < p.k) {
            xs[i / 4u][i % 4u] = x[at + i];
        }
    }
    return xs;
}
#else
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>; // [t, k / 4]

// A weft row's last chunk may end past K: the activations there read as zero, so the stored
// padding levels never count.
fn xblock(tok: u32, b: u32) -> array<vec4<f32>, 8> {
    var xs: array<vec4<f32>, 8>;
    let k4 = p.k / 4u;
    let at = tok * k4 + b * 8u;
    if (b * 8u + 8u <= k4) {
        for (var i = 0u; i < 8u; i++) {
            xs[i] = x[at + i];
        }
    } else {
        for (var i = 0u; i < 8u; i++) {
            if (b * 8u + i < k4) {
                xs[i] = x[at + i];
            }
        }
    }
    return xs;
}
#endif

// 32-weight chunks per row (the last one partial for a ragged weft row).
fn nblocks() -> u32 {
    return (p.k + 31u) / 32u;
}
#endif

// The f16 at bits 0-15 (h = 0) or 16-31 (h = 1) of `word`, widened exactly.
fn half_in(word: u32, h: u32) -> f32 {
    return bitcast<f32>(f16_bits((word >> (h * 16u)) & 0xffffu));
}

const LOW4: vec4<u32> = vec4<u32>(0u, 8u, 16u, 24u);
const HIGH4: vec4<u32> = vec4<u32>(4u, 12u, 20u, 28u);

// w · xv, at the kernel's precision for the products; the caller's sums stay f32.
fn dot4(w: vec4<f32>, xv: vec4<f32>) -> f32 {
#ifdef F16
    return f32(dot(vec4<f16>(w), vec4<f16>(xv)));
#else
    return dot(w, xv);
#endif
}

#ifdef B_Q4_1
// 20 bytes = 5 words, so every block is word-aligned: d | m << 16, then 16 bytes whose low
// nibbles are weights 0-15 and high nibbles 16-31.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let at = (row * (p.k / 32u) + b) * 5u;
    let dm = src[at];
    let d = half_in(dm, 0u);
    let m = half_in(dm, 1u);
    var s = 0.0;
    for (var i = 0u; i < 4u; i++) {
        let q = vec4<u32>(src[at + 1u + i]);
        s += dot4(vec4<f32>((q >> LOW4) & vec4<u32>(15u)) * d + m, xs[i]);
        s += dot4(vec4<f32>((q >> HIGH4) & vec4<u32>(15u)) * d + m, xs[4u + i]);
    }
    return s;
}
#endif

#ifdef B_Q4_0
// 18 bytes: block g starts at byte 18g, word-aligned when g is even and two bytes into a word
// when odd; either way its scale and 16 quant bytes lie in the five words from byte 18g / 4.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let g = row * (p.k / 32u) + b;
    let at = (g * 9u) >> 1u;
    let odd = (g & 1u) == 1u;
    var w: array<u32, 5>;
    for (var i = 0u; i < 5u; i++) {
        w[i] = src[at + i];
    }
    let d = half_in(w[0], select(0u, 1u, odd));
    var s = 0.0;
    for (var i = 0u; i < 4u; i++) {
        let q = vec4<u32>(select((w[i] >> 16u) | (w[i + 1u] << 16u), w[i + 1u], odd));
        let lo = vec4<i32>((q >> LOW4) & vec4<u32>(15u)) - vec4<i32>(8);
        let hi = vec4<i32>((q >> HIGH4) & vec4<u32>(15u)) - vec4<i32>(8);
        s += dot4(vec4<f32>(lo) * d, xs[i]);
        s += dot4(vec4<f32>(hi) * d, xs[4u + i]);
    }
    return s;
}
#endif

#ifdef B_Q8_0
// 34 bytes: like Q4_0, block g starts word-aligned when g is even and two bytes into a word
// when odd, and its scale and 32 quant bytes lie in the nine words from byte 34g / 4.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let g = row * (p.k / 32u) + b;
    let at = (g * 17u) >> 1u;
    let odd = (g & 1u) == 1u;
    var w: array<u32, 9>;
    for (var i = 0u; i < 9u; i++) {
        w[i] = src[at + i];
    }
    let d = half_in(w[0], select(0u, 1u, odd));
    let up = vec4<u32>(24u, 16u, 8u, 0u);
    var s = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = vec4<u32>(select((w[i] >> 16u) | (w[i + 1u] << 16u), w[i + 1u], odd));
        let v = bitcast<vec4<i32>>(q << up) >> vec4<u32>(24u);
        s += dot4(vec4<f32>(v) * d, xs[i]);
    }
    return s;
}
#endif

#ifdef B_WEFT
// A 32-weight chunk is BITS whole words (groups are whole chunks), so chunk b of a row starts at
// word b · BITS. The weight s · (q - z) is s times the exact f32 q - z; s multiplies the chunk's
// sum once.
fn bdot(row: u32, b: u32, xs: array<vec4<f32>, 8>) -> f32 {
    let h = row * p.gpr + b / (GROUP / 32u);
    let s = half_in(scales[h >> 1u], h & 1u);
#ifdef ASYM
    let z = vec4<f32>(half_in(zeros[h >> 1u], h & 1u));
#else
    let z = vec4<f32>(f32(1u << (BITS - 1u)));
#endif
    let at = row * p.wpr + b * BITS;
    var sum = 0.0;
#ifdef WB2
    // Word i holds levels 16i .. 16i + 15, two bits each.
    for (var i = 0u; i < 2u; i++) {
        let w = vec4<u32>(src[at + i]);
        for (var j = 0u; j < 4u; j++) {
            let q = (w >> (vec4<u32>(0u, 2u, 4u, 6u) + vec4<u32>(8u * j))) & vec4<u32>(3u);
            sum += dot4(vec4<f32>(q) - z, xs[4u * i + j]);
        }
    }
#endif
#ifdef WB3
    // Low bit pairs of levels 0-15 in word 0, 16-31 in word 1; the high bits in word 2.
    let hi = vec4<u32>(src[at + 2u]);
    for (var i = 0u; i < 2u; i++) {
        let lo = vec4<u32>(src[at + i]);
        for (var j = 0u; j < 4u; j++) {
            let l = (lo >> (vec4<u32>(0u, 2u, 4u, 6u) + vec4<u32>(8u * j))) & vec4<u32>(3u);
            let e = vec4<u32>(16u * i + 4u * j) + vec4<u32>(0u, 1u, 2u, 3u);
            let q = l | (((hi >> e) & vec4<u32>(1u)) << vec4<u32>(2u));
            sum += dot4(vec4<f32>(q) - z, xs[4u * i + j]);
        }
    }
#endif
#ifdef WB4
    for (var i = 0u; i < 4u; i++) {
        let w = vec4<u32>(src[at + i]);
        let qa = (w >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
        let qb = (w >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u);
        sum += dot4(vec4<f32>(qa) - z, xs[2u * i]);
        sum += dot4(vec4<f32>(qb) - z, xs[2u * i + 1u]);
    }
#endif
#ifdef WB8
    for (var i = 0u; i < 8u; i++) {
        let q = (vec4<u32>(src[at + i]) >> LOW4) & vec4<u32>(255u);
        sum += dot4(vec4<f32>(q) - z, xs[i]);
    }
#endif
    return s * sum;
}
#endif
