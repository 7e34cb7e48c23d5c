// XOUT: a kernel that produces an activation vector also writes it as 8-bit activation records
// (src/ops/qmatmul/records.rs) for the DP4 GEMV that reads it next (XREC), which then stages
// nothing instead of quantizing all of x in every workgroup: the SwiGLU epilogue of the stacked
// gate/up GEMV for the down projection, the decode attention for the O projection. Each 32-value
// chunk is quantized as that GEMV's staging would (shaders/gemv_dp4.wgsl, `stage`): scale
// absmax / 127, values rounded to nearest even, in the order its weight fields meet them
// (XO_ORDER: 0 bytes in order, 1 the even then the odd values of each eight, 2 the 2/3-bit
// fields'), and the integer sums of the halves. A workgroup writes whole chunks of its own
// outputs. The including kernel declares XO_CHUNKS (the most chunks a workgroup writes) and
// `xo_vec(c, j)`, values 4j .. 4j + 3 of the workgroup's chunk c.

#ifdef XOUT
@group(0) @binding(${XB}) var<storage, read_write> xo: array<u32>; // [t, n / 32, 12]

const XO_ORDER: u32 = ${XO_ORDER}u;
// Each quarter's (8 values) largest |value| and sum of integers.
var<workgroup> xo_m: array<f32, XO_CHUNKS * 4u>;
var<workgroup> xo_s: array<i32, XO_CHUNKS * 4u>;

fn xo_amax(v: vec4<f32>) -> f32 {
    let a = abs(v);
    return max(max(a.x, a.y), max(a.z, a.w));
}

// Writes the records of the workgroup's `count` chunks (at most XO_CHUNKS), chunks first ..
// first + count of token `tok`'s nb, once xo_vec gives their values; every invocation calls it
// (it has barriers). A quarter chunk an invocation, as the staging takes it.
fn write_records(tok: u32, first: u32, count: u32, nb: u32, lid: u32) {
    let nq = count * 4u;
    let c = lid / 4u;
    let i = lid % 4u;
    let chunk = first + c;
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
    let own = first + lid;
    if (lid < count && own < nb) {
        let at = 12u * (tok * nb + own);
        let q = 4u * lid;
        xo[at + 9u] = bitcast<u32>(f32(xo_s[q] + xo_s[q + 1u]));
        xo[at + 10u] = bitcast<u32>(f32(xo_s[q + 2u] + xo_s[q + 3u]));
        xo[at + 11u] = 0u;
    }
}
#endif
