// The sum of `v` over the LPR adjacent lanes that share a row or group of rows (all of them get
// it): a butterfly of subgroup shuffles where the adapter's subgroups hold at least LPR lanes
// (SG), else a shared-memory tree. Shared by the GEMV kernels (ROW_SUM): qgemv.wgsl's block
// kernel sums one row (RowAcc = f32), qgemv_gpu.wgsl up to four at once (RowAcc = vec4<f32>).

#ifdef ROW_SUM
#ifndef SG
var<workgroup> part: array<RowAcc, WG>;
#endif

fn row_sum(v: RowAcc, lid: u32) -> RowAcc {
    var s = v;
#ifdef SG
    for (var o = LPR / 2u; o > 0u; o >>= 1u) {
        s += subgroupShuffleXor(s, o);
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
