// The sum of `v` over the LPR adjacent lanes that share a row or group of rows (all of them get
// it): a butterfly of subgroup shuffles where the adapter's subgroups hold at least LPR lanes
// (SG), else a shared-memory tree. Shared by the GEMV kernels (ROW_SUM): qgemv.wgsl's block
// kernel sums one row (RowAcc = f32), qgemv_gpu.wgsl up to four at once (RowAcc = vec4<f32>).
//
// The shuffles assume what adapters do in a one-dimensional workgroup: invocation i is lane
// i % S of a subgroup of S lanes starting at a multiple of S, so the LPR lanes of a row (LPR a
// power of two, at most S) lie in one subgroup and XOR on their lane ids stays among them. The
// Rust side sets SG only where LPR is at most the adapter's smallest subgroup.
//
// SG_EMU = S (tests): subgroups of S lanes emulated in workgroup memory under that numbering, so
// the SG path runs at every size on any adapter. A shuffle that names a lane outside the
// caller's subgroup or past the workgroup, which a real adapter answers with an indeterminate
// value, reads NaN here, so a size assumption that does not hold fails the test.

#ifdef ROW_SUM
#ifndef SG
var<workgroup> part: array<RowAcc, WG>;
#endif

#ifdef SG
#ifdef SG_EMU
var<workgroup> sg_lanes: array<RowAcc, WG>;

fn shuffle_xor(v: RowAcc, o: u32, lid: u32) -> RowAcc {
    sg_lanes[lid] = v;
    workgroupBarrier();
    let lane = lid % ${SG_EMU}u;
    let src = lid - lane + (lane ^ o);
    // NaN made at run time: a constant NaN is a shader-creation error in WGSL.
    var r = RowAcc(bitcast<f32>(0x7fc00000u | (lid & 0u)));
    if ((lane ^ o) < ${SG_EMU}u && src < WG) {
        r = sg_lanes[src];
    }
    workgroupBarrier();
    return r;
}
#else
fn shuffle_xor(v: RowAcc, o: u32, lid: u32) -> RowAcc {
    return subgroupShuffleXor(v, o);
}
#endif
#endif

fn row_sum(v: RowAcc, lid: u32) -> RowAcc {
    var s = v;
#ifdef SG
    for (var o = LPR / 2u; o > 0u; o >>= 1u) {
        s += shuffle_xor(s, o, lid);
    }
#else
    part[lid] = s;
    workgroupBarrier();
    let lane = lid % LPR;
    for (var o = LPR / 2u; o > 0u; o >>= 1u) {
        if (lane < o) {
            part[lid] += part[lid + o];
        }
        workgroupBarrier();
    }
    s = part[lid - lane];
    workgroupBarrier();
#endif
    return s;
}
#endif
