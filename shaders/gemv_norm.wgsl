// The RMSNorm prologue of the decode step's GEMVs (NORM), shared by qgemv.wgsl's block kernel
// and qgemv_gpu.wgsl: x is normalised as x / sqrt(mean(x^2) + eps) * norm_w, eps in
// Params._pad0. Every workgroup sums its token's squares itself, one extra pass over an x it reads
// anyway, which saves the norm's own dispatch.

#ifdef NORM
@group(0) @binding(${NB}) var<storage, read> norm_w: array<vec4<f32>>; // [k / 4]
var<workgroup> squares: array<f32, WG>;

// 1 / sqrt(mean(x[tok]^2) + eps), the same in every invocation.
fn inv_rms(tok: u32, lid: u32) -> f32 {
    let k4 = p.k / 4u;
    var s = 0.0;
    for (var i = lid; i < k4; i += WG) {
        let v = x[tok * k4 + i];
        s += dot(v, v);
    }
    squares[lid] = s;
    workgroupBarrier();
    for (var o = WG / 2u; o > 0u; o >>= 1u) {
        if (lid < o) {
            squares[lid] += squares[lid + o];
        }
        workgroupBarrier();
    }
    return 1.0 / sqrt(squares[0] / f32(p.k) + bitcast<f32>(p._pad0));
}
#endif
