// The RMSNorm prologue of the decode step's GEMVs (NORM), shared by qgemv.wgsl's block kernel
// and qgemv_gpu.wgsl: x is normalised as x / sqrt(mean(x^2) + eps) * norm_w, eps in
// Params._pad0. Every workgroup sums its token's squares itself, which saves the norm's own
// dispatch: the block kernel in a first pass over x (inv_rms); the GPU kernel while it stages x,
// applying the scalar 1 / rms to its sums at the end (wg_sum, inv_rms_of).

#ifdef NORM
@group(0) @binding(${NB}) var<storage, read> norm_w: array<vec4<f32>>; // [k / 4]
var<workgroup> squares: array<f32, WG>;

// The sum of `v` over the workgroup, in every invocation (a shared-memory tree).
fn wg_sum(v: f32, lid: u32) -> f32 {
    squares[lid] = v;
    workgroupBarrier();
    for (var o = WG / 2u; o > 0u; o >>= 1u) {
        if (lid < o) {
            squares[lid] += squares[lid + o];
        }
        workgroupBarrier();
    }
    let s = squares[0];
    workgroupBarrier();
    return s;
}

// 1 / sqrt(mean of squares + eps) for a row whose squares sum to `ss`.
fn inv_rms_of(ss: f32) -> f32 {
    return 1.0 / sqrt(ss / f32(p.k) + bitcast<f32>(p._pad0));
}

// 1 / sqrt(mean(x[tok]^2) + eps), the same in every invocation.
fn inv_rms(tok: u32, lid: u32) -> f32 {
    let k4 = p.k / 4u;
    var s = 0.0;
    for (var i = lid; i < k4; i += WG) {
        let v = x[tok * k4 + i];
        s += dot(v, v);
    }
    return inv_rms_of(wg_sum(s, lid));
}
#endif
