// DP4, for qgemv_gpu.wgsl at 2, 3, 4 and 8 bits and the repacked planes (K4 / K5 / K6): the
// activations as 8-bit integers. With f32 activations an H100 read ~60 % of its copy rate at 4
// bits, the same time per weight as at 8 bits: the float work per weight, not the memory, set
// the time. Here each 32-value chunk of x is quantized while it is staged (scale absmax / 127,
// rounded to nearest even), and a chunk's product is eight dot4I8Packed of weight fields, masked
// into bytes where they lie, against the packed activations, then one float correction:
// s · d · (Σ q · a - z · Σ a). The weights stay exact; each activation carries one 8-bit
// rounding, as in the q8_1 dot products of llama.cpp.
// The planes' levels (at most 63) are whole bytes once their high bits are moved above the
// nibble, positive as signed bytes; K4 / K5 take d · (d1 · Σ q · a - m1 · Σ a), K6 each half's
// d · d1 · (Σ q · a - 32 Σ a). At 2 and 3 bits each of a chunk's two words (sixteen levels)
// gives four words of bytes, one per 2-bit field of its bytes (q3's third bits moved above
// them), against activations staged in that order: eight dot4I8Packed a chunk, as at 4 bits.

#ifdef DP4
struct XQ {
    a0: u32,
    a1: u32,
    a2: u32,
    a3: u32,
    a4: u32,
    a5: u32,
    a6: u32,
    a7: u32,
    d: f32,
    sum: vec2<f32>, // Σ a of each half (16 values), exact
}

#ifdef XREC
// Chunk c of token `tok` as its producer recorded it (shaders/xrecord.wgsl): the same words,
// scale and sums the staging below would have made of the same values.
fn xrec(tok: u32, c: u32) -> XQ {
    let at = 3u * (tok * (p.k / 32u) + c);
    let a = xr[at];
    let b = xr[at + 1u];
    let e = xr[at + 2u];
    return XQ(a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, bitcast<f32>(e.x), vec2<f32>(bitcast<f32>(e.y), bitcast<f32>(e.z)));
}
#else
// A staged chunk: eight words of four int8 activations, in the order the weight fields meet
// them, the chunk's scale, and the sums of its four quarters' integers: 13 words, an odd stride,
// so lanes reading adjacent chunks hit different banks.
const XQW: u32 = 13u;
var<workgroup> xq: array<u32, TILE * XQW>;
// The largest |value| of each quarter (8 values) of the tile's chunks.
var<workgroup> quarter_max: array<f32, TILE * 4u>;

fn xchunk(j: u32) -> XQ {
    let at = XQW * j;
    let sum = vec2<i32>(bitcast<i32>(xq[at + 9u]) + bitcast<i32>(xq[at + 10u]), bitcast<i32>(xq[at + 11u]) + bitcast<i32>(xq[at + 12u]));
    return XQ(xq[at], xq[at + 1u], xq[at + 2u], xq[at + 3u], xq[at + 4u], xq[at + 5u], xq[at + 6u], xq[at + 7u],
        bitcast<f32>(xq[at + 8u]), vec2<f32>(sum));
}

// The same values as quantized: times the norm's weight with NORM (1 / rms is applied to the
// finished sums).
fn xval(tok: u32, c: u32, i: u32) -> vec4<f32> {
#ifdef NORM
    return xraw(tok, c, i) * norm_w[c * 8u + i];
#else
    return xraw(tok, c, i);
#endif
}

fn amax4(v: vec4<f32>) -> f32 {
    let a = abs(v);
    return max(max(a.x, a.y), max(a.z, a.w));
}

// The integers of quarter i (values 8i .. 8i + 7) of chunk c, as staged words 2i and 2i + 1
// hold them: in the order the weight fields meet them.
struct QuarterWords {
    e: vec4<i32>,
    o: vec4<i32>,
}

fn quarter_words(tok: u32, c: u32, i: u32, inv: f32) -> QuarterWords {
    if (BITS < 4u) {
        // 2 and 3 bits: word 4h + f of the staged chunk holds values 16h + f, 16h + 4 + f,
        // 16h + 8 + f, 16h + 12 + f, the levels that field f of the bytes of weight word h holds
        // (see pdot). Words 2i and 2i + 1 are h = i / 2, fields f and f + 1, so the two quarters
        // of a half cover its sixteen values and their sums still add up to the half's.
        let h = 4u * (i / 2u);
        let f = 2u * (i % 2u);
        let r0 = vec4<i32>(round(xval(tok, c, h) * inv));
        let r1 = vec4<i32>(round(xval(tok, c, h + 1u) * inv));
        let r2 = vec4<i32>(round(xval(tok, c, h + 2u) * inv));
        let r3 = vec4<i32>(round(xval(tok, c, h + 3u) * inv));
        let g = f + 1u;
        return QuarterWords(vec4<i32>(r0[f], r1[f], r2[f], r3[f]), vec4<i32>(r0[g], r1[g], r2[g], r3[g]));
    }
    // Values 8i .. 8i + 3 and 8i + 4 .. 8i + 7.
    let u = vec4<i32>(round(xval(tok, c, 2u * i) * inv));
    let v = vec4<i32>(round(xval(tok, c, 2u * i + 1u) * inv));
#ifdef WB8
    // Word j holds levels 4j .. 4j + 3, a byte each in order.
    return QuarterWords(u, v);
#else
    // Word i of a chunk's weights (the planes' low nibbles alike) holds levels 8i .. 8i + 7, a
    // nibble each in order: masked with 0x0f0f0f0f its bytes are levels 8i, 8i + 2, 8i + 4,
    // 8i + 6; shifted down 4 bits first, the odd ones.
    return QuarterWords(vec4<i32>(u.x, u.z, v.x, v.z), vec4<i32>(u.y, u.w, v.y, v.w));
#endif
}

// Quantizes chunks t0 .. t0 + TILE of token `tok` into `xq`, a quarter chunk (8 values) an
// invocation: the quarters' maxima first, then each quarter's integers against its chunk's
// maximum. Returns the sum of squares of the values this invocation read (for NORM).
fn stage(tok: u32, t0: u32, nb: u32, lid: u32) -> f32 {
    let n = min(TILE, nb - t0) * 4u;
    var ss = 0.0;
    for (var j = lid; j < n; j += WG) {
        let c = t0 + j / 4u;
        let i = j % 4u;
#ifdef NORM
        let r0 = xraw(tok, c, 2u * i);
        let r1 = xraw(tok, c, 2u * i + 1u);
        ss += dot(r0, r0) + dot(r1, r1);
#endif
        quarter_max[j] = max(amax4(xval(tok, c, 2u * i)), amax4(xval(tok, c, 2u * i + 1u)));
    }
    workgroupBarrier();
    for (var j = lid; j < n; j += WG) {
        let q0 = j & ~3u;
        let amax = max(max(quarter_max[q0], quarter_max[q0 + 1u]), max(quarter_max[q0 + 2u], quarter_max[q0 + 3u]));
        let inv = select(0.0, 127.0 / amax, amax > 0.0);
        let c = t0 + j / 4u;
        let i = j % 4u;
        let at = XQW * (j / 4u);
        let w = quarter_words(tok, c, i, inv);
        xq[at + 2u * i] = pack4xI8(w.e);
        xq[at + 2u * i + 1u] = pack4xI8(w.o);
        let s = w.e + w.o;
        xq[at + 9u + i] = bitcast<u32>((s.x + s.y) + (s.z + s.w));
        if (i == 0u) {
            xq[at + 8u] = bitcast<u32>(amax / 127.0);
        }
    }
    return ss;
}
#endif

#ifndef WB8
// Σ q · a over the eight levels of weight word `w` (levels 8i .. 8i + 7 of a chunk): its even and
// odd nibbles as bytes, each byte's high bits (bits 4 and up, 0 at 4 bits) in `h`, against the
// activations staged for them.
fn wdot(w: u32, h: vec2<u32>, a0: u32, a1: u32) -> i32 {
    let m = 0x0f0f0f0fu;
    return dot4I8Packed((w & m) | h.x, a0) + dot4I8Packed(((w >> 4u) & m) | h.y, a1);
}
#endif

#ifdef KQ
#ifndef K4
// The high fields of one weight word's eight levels, `f` bits each (1 or 2), moved to bit 4 of
// their bytes: with e the even levels 0, 2, 4, 6 and o the odd, `hw` holds e0, e1 at bits 0, 8,
// e2, e3 at f, 8 + f, o0, o1 at 4, 12 and o2, o3 at 4 + f, 12 + f (the planes' order, see
// src/quant/repack.rs `high_bit`, shifted down to this word's fields); m = (2^f - 1) · 0x1010.
fn hbytes(hw: u32, m: u32, f: u32) -> vec2<u32> {
    let m2 = m << 16u;
    return vec2<u32>(((hw << 4u) & m) | ((hw << (20u - f)) & m2), (hw & m) | ((hw << (16u - f)) & m2));
}
#endif
#endif

// Σ q · a over the sixteen levels of weight word `w` of 2 or 3 bits (levels 16h .. 16h + 15:
// byte j holds levels 4j .. 4j + 3, field f of it, bits 2f and 2f + 1, level 4j + f): field f of
// every byte masked in place and shifted down, with `t[f]` (the third bits, at bit 2 of each
// byte; zero at 2 bits), against staged word f of the half.
fn pdot(w: u32, t: vec4<u32>, a0: u32, a1: u32, a2: u32, a3: u32) -> i32 {
    let m = 0x03030303u;
    return (dot4I8Packed((w & m) | t.x, a0) + dot4I8Packed(((w >> 2u) & m) | t.y, a1))
        + (dot4I8Packed(((w >> 4u) & m) | t.z, a2) + dot4I8Packed(((w >> 6u) & m) | t.w, a3));
}

// The third bits of sixteen levels (bit l of `z`, l < 16) where pdot wants them: bit 2 of byte
// j of t[f] is level 4j + f's. Spreading bit l to bit 2l (a Morton spread) puts it at 8j + 2f;
// then each field's shift.
fn thirds(z: u32) -> vec4<u32> {
    var s = z & 0xffffu;
    s = (s | (s << 8u)) & 0x00ff00ffu;
    s = (s | (s << 4u)) & 0x0f0f0f0fu;
    s = (s | (s << 2u)) & 0x33333333u;
    s = (s | (s << 1u)) & 0x55555555u;
    let m = 0x04040404u;
    return vec4<u32>((s << 2u) & m, s & m, (s >> 2u) & m, (s >> 4u) & m);
}

// s · Σ (q - z) · x for one chunk, x = d · a.
fn term(w: W, xs: XQ) -> f32 {
#ifdef WB2
    let t = vec4<u32>(0u);
    let dot = pdot(w.q.x, t, xs.a0, xs.a1, xs.a2, xs.a3) + pdot(w.q.y, t, xs.a4, xs.a5, xs.a6, xs.a7);
    return w.s * xs.d * (f32(dot) - w.z * (xs.sum.x + xs.sum.y));
#endif
#ifdef WB3
    // Word z holds the third bits of levels 0 .. 31.
    let dot = pdot(w.q.x, thirds(w.q.z), xs.a0, xs.a1, xs.a2, xs.a3)
        + pdot(w.q.y, thirds(w.q.z >> 16u), xs.a4, xs.a5, xs.a6, xs.a7);
    return w.s * xs.d * (f32(dot) - w.z * (xs.sum.x + xs.sum.y));
#endif
#ifdef WB8
    // Bytes read as signed after flipping their top bit: q - 128, so the zero moves by 128.
    let f = 0x80808080u;
    let a = w.q.a;
    let b = w.q.b;
    let dot = (dot4I8Packed(a.x ^ f, xs.a0) + dot4I8Packed(a.y ^ f, xs.a1))
        + (dot4I8Packed(a.z ^ f, xs.a2) + dot4I8Packed(a.w ^ f, xs.a3))
        + (dot4I8Packed(b.x ^ f, xs.a4) + dot4I8Packed(b.y ^ f, xs.a5))
        + (dot4I8Packed(b.z ^ f, xs.a6) + dot4I8Packed(b.w ^ f, xs.a7));
    return w.s * xs.d * (f32(dot) - (w.z - 128.0) * (xs.sum.x + xs.sum.y));
#else
// The nibble words: 4 bits, and the planes' low nibbles with their high bits.
#ifndef WB2
#ifndef WB3
#ifdef WB4
    let q = w.q;
    let h0 = vec2<u32>(0u);
    let h1 = h0;
    let h2 = h0;
    let h3 = h0;
#endif
#ifdef K5
    // One word of fifth bits: word i's at bit 16 (i / 2) + 2 (i % 2).
    let q = w.q.a;
    let m = 0x1010u;
    let h0 = hbytes(w.q.h, m, 1u);
    let h1 = hbytes(w.q.h >> 2u, m, 1u);
    let h2 = hbytes(w.q.h >> 16u, m, 1u);
    let h3 = hbytes(w.q.h >> 18u, m, 1u);
#endif
#ifdef K6
    // A word of high pairs a half: word i's at bit 16 (i % 2) of h[i / 2].
    let q = w.q.a;
    let m = 0x3030u;
    let h0 = hbytes(w.q.h.x, m, 2u);
    let h1 = hbytes(w.q.h.x >> 16u, m, 2u);
    let h2 = hbytes(w.q.h.y, m, 2u);
    let h3 = hbytes(w.q.h.y >> 16u, m, 2u);
#endif
    let lo = wdot(q.x, h0, xs.a0, xs.a1) + wdot(q.y, h1, xs.a2, xs.a3);
    let hi = wdot(q.z, h2, xs.a4, xs.a5) + wdot(q.w, h3, xs.a6, xs.a7);
#ifdef K6
    // s and z: the halves' d · sc, levels q - 32.
    return xs.d * (w.s * (f32(lo) - 32.0 * xs.sum.x) + w.z * (f32(hi) - 32.0 * xs.sum.y));
#else
#ifdef KQ
    // s and z: d1 and m1.
    return xs.d * (w.s * f32(lo + hi) - w.z * (xs.sum.x + xs.sum.y));
#else
    return w.s * xs.d * (f32(lo + hi) - w.z * (xs.sum.x + xs.sum.y));
#endif
#endif
#endif
#endif
#endif
}
#endif
