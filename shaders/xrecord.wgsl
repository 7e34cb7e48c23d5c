// XOUT: the SwiGLU epilogue of the stacked gate/up GEMV also writes its output as 8-bit
// activation records (src/ops/qmatmul/records.rs) for the down projection's DP4 GEMV, which then
// reads them (XREC) instead of quantizing all of x in every workgroup. Each 32-value chunk
// is quantized as that GEMV's staging would (shaders/gemv_dp4.wgsl, `stage`): scale absmax / 127,
// values rounded to nearest even, in the order its weight fields meet them (XO_ORDER: 0 bytes in
// order, 1 the even then the odd values of each eight, 2 the 2/3-bit fields'), and the integer
// sums of the halves. A workgroup writes the chunks of its own outputs, so its output rows,
// XO_ROWS, are whole chunks (the launch shapes of `writes_records`).

#ifdef XOUT
@group(0) @binding(${XB}) var<storage, read_write> xo: array<u32>; // [t, n / 32, 12]

const XO_ORDER: u32 = ${XO_ORDER}u;
const XO_ROWS: u32 = (WG / LPR) * (RPT / 2u);
const XO_CHUNKS: u32 = XO_ROWS / 32u;
// The workgroup's outputs, each quarter's (8 values) largest |value| and sum of integers.
var<workgroup> xo_v: array<f32, XO_ROWS>;
var<workgroup> xo_m: array<f32, XO_CHUNKS * 4u>;
var<workgroup> xo_s: array<i32, XO_CHUNKS * 4u>;

// Values 4j .. 4j + 3 of the workgroup's chunk c.
fn xo_vec(c: u32, j: u32) -> vec4<f32> {
    let a = 32u * c + 4u * j;
    return vec4<f32>(xo_v[a], xo_v[a + 1u], xo_v[a + 2u], xo_v[a + 3u]);
}

fn xo_amax(v: vec4<f32>) -> f32 {
    let a = abs(v);
    return max(max(a.x, a.y), max(a.z, a.w));
}

// Writes the records of the workgroup's chunks, whose first output row is `row0`, once xo_v
// holds them; every invocation calls it (it has barriers). A quarter chunk an invocation, as
// the staging takes it.
fn write_records(tok: u32, row0: u32, lid: u32) {
    let nq = XO_CHUNKS * 4u;
    let nb = p.n / 32u;
    let c = lid / 4u;
    let i = lid % 4u;
    let chunk = row0 / 32u + c;
    if (lid < nq) {
        xo_m[lid] = max(xo_amax(xo_vec(c, 2u * i)), xo_amax(xo_vec(c, 2u * i + 1u)));
    }
    workgroupBarrier();
    if (lid < nq && chunk < nb) {
        let q0 = lid & ~3u;
        let amax = max(max(xo_m[q0], xo_m[q0 + 1u]), max(xo_m[q0 + 2u], xo_m[q0 + 3u]));
        let inv = select(0.0, 127.0 / amax, amax > 0.0);
        var e: vec4<i32>;
        var o: vec4<i32>;
        if (XO_ORDER == 2u) {
            // Words 2i, 2i + 1 are half i / 2's fields f and f + 1.
            let h = 4u * (i / 2u);
            let f = 2u * (i % 2u);
            let r0 = vec4<i32>(round(xo_vec(c, h) * inv));
            let r1 = vec4<i32>(round(xo_vec(c, h + 1u) * inv));
            let r2 = vec4<i32>(round(xo_vec(c, h + 2u) * inv));
            let r3 = vec4<i32>(round(xo_vec(c, h + 3u) * inv));
            let g = f + 1u;
            e = vec4<i32>(r0[f], r1[f], r2[f], r3[f]);
            o = vec4<i32>(r0[g], r1[g], r2[g], r3[g]);
        } else {
            let u = vec4<i32>(round(xo_vec(c, 2u * i) * inv));
            let v = vec4<i32>(round(xo_vec(c, 2u * i + 1u) * inv));
            if (XO_ORDER == 0u) {
                e = u;
                o = v;
            } else {
                e = vec4<i32>(u.x, u.z, v.x, v.z);
                o = vec4<i32>(u.y, u.w, v.y, v.w);
            }
        }
        let at = 12u * (tok * nb + chunk);
        xo[at + 2u * i] = pack4xI8(e);
        xo[at + 2u * i + 1u] = pack4xI8(o);
        let s = e + o;
        xo_s[lid] = (s.x + s.y) + (s.z + s.w);
        if (i == 0u) {
            xo[at + 8u] = bitcast<u32>(amax / 127.0);
        }
    }
    workgroupBarrier();
    let own = row0 / 32u + lid;
    if (lid < XO_CHUNKS && own < nb) {
        let at = 12u * (tok * nb + own);
        let q = 4u * lid;
        xo[at + 9u] = bitcast<u32>(f32(xo_s[q] + xo_s[q + 1u]));
        xo[at + 10u] = bitcast<u32>(f32(xo_s[q + 2u] + xo_s[q + 3u]));
        xo[at + 11u] = 0u;
    }
}
#endif
