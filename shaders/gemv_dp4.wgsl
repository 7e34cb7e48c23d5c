// DP4, for qgemv_gpu.wgsl at 4 and 8 bits: the activations as 8-bit integers. With f32
// activations an H100 read ~60 % of its copy rate at 4 bits, the same time per weight as at 8
// bits: the float work per weight, not the memory, set the time. Here each 32-value chunk of x
// is quantized while it is staged (scale absmax / 127, rounded to nearest even), and a chunk's
// product is eight dot4I8Packed of weight fields, masked into bytes where they lie, against the
// packed activations, then one float correction: s · d · (Σ q · a - z · Σ a). The weights stay
// exact; each activation carries one 8-bit rounding, as in the q8_1 dot products of llama.cpp.

#ifdef DP4
// A staged chunk: eight words of four int8 activations, in the order the weight fields meet
// them, the chunk's scale, and the sums of its four quarters' integers: 13 words, an odd stride,
// so lanes reading adjacent chunks hit different banks.
const XQW: u32 = 13u;
var<workgroup> xq: array<u32, TILE * XQW>;
// The largest |value| of each quarter (8 values) of the tile's chunks.
var<workgroup> quarter_max: array<f32, TILE * 4u>;

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
    sum: f32,
}

fn xchunk(j: u32) -> XQ {
    let at = XQW * j;
    let sum = bitcast<i32>(xq[at + 9u]) + bitcast<i32>(xq[at + 10u]) + bitcast<i32>(xq[at + 11u]) + bitcast<i32>(xq[at + 12u]);
    return XQ(xq[at], xq[at + 1u], xq[at + 2u], xq[at + 3u], xq[at + 4u], xq[at + 5u], xq[at + 6u], xq[at + 7u],
        bitcast<f32>(xq[at + 8u]), f32(sum));
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
        // Values 8i .. 8i + 3 and 8i + 4 .. 8i + 7.
        let u = vec4<i32>(round(xval(tok, c, 2u * i) * inv));
        let v = vec4<i32>(round(xval(tok, c, 2u * i + 1u) * inv));
#ifdef WB4
        // Word i of a chunk's weights holds levels 8i .. 8i + 7, a nibble each in order:
        // masked with 0x0f0f0f0f its bytes are levels 8i, 8i + 2, 8i + 4, 8i + 6; shifted
        // down 4 bits first, the odd ones.
        xq[at + 2u * i] = pack4xI8(vec4<i32>(u.x, u.z, v.x, v.z));
        xq[at + 2u * i + 1u] = pack4xI8(vec4<i32>(u.y, u.w, v.y, v.w));
#endif
#ifdef WB8
        // Word j holds levels 4j .. 4j + 3, a byte each in order.
        xq[at + 2u * i] = pack4xI8(u);
        xq[at + 2u * i + 1u] = pack4xI8(v);
#endif
        xq[at + 9u + i] = bitcast<u32>((u.x + u.y) + (u.z + u.w) + (v.x + v.y) + (v.z + v.w));
        if (i == 0u) {
            xq[at + 8u] = bitcast<u32>(amax / 127.0);
        }
    }
    return ss;
}

// s · Σ (q - z) · x for one chunk, x = d · a.
fn term(w: W, xs: XQ) -> f32 {
#ifdef WB4
    let m = 0x0f0f0f0fu;
    let q = w.q;
    let dot = (dot4I8Packed(q.x & m, xs.a0) + dot4I8Packed((q.x >> 4u) & m, xs.a1))
        + (dot4I8Packed(q.y & m, xs.a2) + dot4I8Packed((q.y >> 4u) & m, xs.a3))
        + (dot4I8Packed(q.z & m, xs.a4) + dot4I8Packed((q.z >> 4u) & m, xs.a5))
        + (dot4I8Packed(q.w & m, xs.a6) + dot4I8Packed((q.w >> 4u) & m, xs.a7));
    let z = w.z;
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
    let z = w.z - 128.0;
#endif
    return w.s * xs.d * (f32(dot) - z * xs.sum);
}
#endif
