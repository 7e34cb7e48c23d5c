enable f16;
enable wgpu_cooperative_matrix;
// Y[t, n] = X[t, k] · W[n, k]^T for many tokens (prefill) on the adapter's matrix units
// (tensor cores), for K a multiple of 32 and adapters whose subgroups are 32 lanes.
//
// A workgroup of SGT x SGR subgroups owns a tile of TM = 32 SGT tokens x TN = 32 SGR rows of
// Y. Per 32-wide step of K its invocations decode the tile's TN x 32 weights (`w8`,
// shaders/qweight.wgsl, the values of the CPU reference) and stage the TM x 32 activations,
// both rounded to f16 in workgroup memory, row by row along K (stride KS, padded so that the
// rows of a 16 x 16 load start in different banks). Subgroup s then takes tokens
// (s / SGR) * 32 .. + 32 and rows (s % SGR) * 32 .. + 32 as four 16 x 16 f32 accumulators: per
// 16 of K, two A loads (tokens x K), two B loads (K x rows: W's rows are B's columns,
// contiguous along K) and four multiply-adds.
// The products are of f16 operands and the sums f32: the precision of `Precision::F16`.
// The next step's weights and activations are fetched into registers before the products,
// as in shaders/qgemm_outer.wgsl.
//
// KSPLIT (64 x 64 tiles, for matrices with few rows): twice the subgroups, each pair sharing a
// 32 x 32 block of Y and taking one half of every 64-wide step of K (KT 64), their sums added
// through workgroup memory at the end. The same tiles keep twice the subgroups busy and meet
// half as many barriers.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>; // [t, k / 4]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [t, ny]
@group(0) @binding(${PB}) var<uniform> p: Params;

const SGR: u32 = ${SGR}u;      // subgroups along the rows (2 or 4)
const TM: u32 = ${TM}u;        // tokens per tile: 32 SGT, SGT 1 or 2
const TN: u32 = ${TN}u;        // rows per tile: 32 SGR
const WG: u32 = ${WG}u;        // 32 SGT SGR, twice that with KSPLIT
const KT: u32 = ${KT}u;        // K per step: 32, or 64 with KSPLIT
const KS: u32 = KT + 8u;       // f16 elements per staged row: KT of K and 8 of padding
const UPR: u32 = KT / 8u;      // eight-weight units of W a row a step
const VPT: u32 = KT / 4u;      // vec4 of X a token a step
const BLOCKS: u32 = TM * TN / 1024u; // 32 x 32 blocks of Y a tile

var<workgroup> ws: array<f16, ${WS}>; // [row][KS]: TN * KS
var<workgroup> xs: array<f16, ${XS}>; // [token][KS]: TM * KS
var<workgroup> cs: array<f32, ${CS}>; // [subgroup][16 x 16]: one accumulator each on its way out

// Unit j of the W tile: row j / UPR, eight weights (j % UPR) * 8 .. + 8 of the step, so that
// adjacent lanes read one row's KT weights together and store them side by side. Rows past n
// repeat row n - 1; they are never stored to Y.
fn fetch_w(n0: u32, step: u32, j: u32) -> W8 {
    return w8(min(n0 + j / UPR, p.n - 1u), step * UPR + j % UPR);
}

fn put_w(j: u32, v: W8) {
    let at = (j / UPR) * KS + (j % UPR) * 8u;
    ws[at] = f16(v.a.x);
    ws[at + 1u] = f16(v.a.y);
    ws[at + 2u] = f16(v.a.z);
    ws[at + 3u] = f16(v.a.w);
    ws[at + 4u] = f16(v.b.x);
    ws[at + 5u] = f16(v.b.y);
    ws[at + 6u] = f16(v.b.z);
    ws[at + 7u] = f16(v.b.w);
}

// vec4 j of the X tile: token j / VPT, values (j % VPT) * 4 .. + 4 of the step (adjacent lanes
// read one token's KT floats); zeros past t.
fn fetch_x(t0: u32, step: u32, j: u32) -> vec4<f32> {
    let tok = t0 + j / VPT;
    if (tok >= p.t) {
        return vec4<f32>(0.0);
    }
    return x[(tok * p.k) / 4u + step * VPT + j % VPT];
}

fn put_x(j: u32, v: vec4<f32>) {
    let at = (j / VPT) * KS + (j % VPT) * 4u;
    xs[at] = f16(v.x);
    xs[at + 1u] = f16(v.y);
    xs[at + 2u] = f16(v.z);
    xs[at + 3u] = f16(v.w);
}

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n0 = wid.x * TN;
    let t0 = wid.y * TM;
    let sg = li / 32u;
    let blk = sg % BLOCKS;      // the subgroup's 32 x 32 block of Y
    let half = sg / BLOCKS;     // with KSPLIT, its half of each step
    let ta = (blk / SGR) * 32u; // the block's first token in the tile
    let rb = (blk % SGR) * 32u; // and its first row
    let steps = p.k / KT;
    // TN * UPR units of W and TM * VPT vec4 of X a step: two units (W4: four, with one subgroup
    // along the tokens) and two vec4 (X4: four) an invocation.
    var wa = fetch_w(n0, 0u, li);
    var wb = fetch_w(n0, 0u, li + WG);
#ifdef W4
    var wc = fetch_w(n0, 0u, li + 2u * WG);
    var wd = fetch_w(n0, 0u, li + 3u * WG);
#endif
    var xa = fetch_x(t0, 0u, li);
    var xb = fetch_x(t0, 0u, li + WG);
#ifdef X4
    var xc = fetch_x(t0, 0u, li + 2u * WG);
    var xd = fetch_x(t0, 0u, li + 3u * WG);
#endif
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    for (var step = 0u; step < steps; step++) {
        put_w(li, wa);
        put_w(li + WG, wb);
#ifdef W4
        put_w(li + 2u * WG, wc);
        put_w(li + 3u * WG, wd);
#endif
        put_x(li, xa);
        put_x(li + WG, xb);
#ifdef X4
        put_x(li + 2u * WG, xc);
        put_x(li + 3u * WG, xd);
#endif
        workgroupBarrier();
        if (step + 1u < steps) {
            let s1 = step + 1u;
            wa = fetch_w(n0, s1, li);
            wb = fetch_w(n0, s1, li + WG);
#ifdef W4
            wc = fetch_w(n0, s1, li + 2u * WG);
            wd = fetch_w(n0, s1, li + 3u * WG);
#endif
            xa = fetch_x(t0, s1, li);
            xb = fetch_x(t0, s1, li + WG);
#ifdef X4
            xc = fetch_x(t0, s1, li + 2u * WG);
            xd = fetch_x(t0, s1, li + 3u * WG);
#endif
        }
        // The loop's bounds stay uniform (the cooperative operations need uniform control
        // flow); a subgroup's half of the step only moves its loads.
        for (var kk = 0u; kk < 32u; kk += 16u) {
            let k0 = half * 32u + kk;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ta * KS + k0], KS);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(ta + 16u) * KS + k0], KS);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[rb * KS + k0], KS);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[(rb + 16u) * KS + k0], KS);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }
#ifdef KSPLIT
    put_split(c00, sg, li, 0u, t0, n0);
    put_split(c01, sg, li, 1u, t0, n0);
    put_split(c10, sg, li, 2u, t0, n0);
    put_split(c11, sg, li, 3u, t0, n0);
#else
    // Each accumulator goes out through the subgroup's 16 x 16 of workgroup memory, so that
    // tokens past t and rows past n are left unwritten.
    put_tile(c00, sg, li, t0 + ta, n0 + rb);
    put_tile(c01, sg, li, t0 + ta, n0 + rb + 16u);
    put_tile(c10, sg, li, t0 + ta + 16u, n0 + rb);
    put_tile(c11, sg, li, t0 + ta + 16u, n0 + rb + 16u);
#endif
}

// Writes accumulator `c` of subgroup `sg` (tokens tok0 .. + 16, rows row0 .. + 16 of the part):
// lane l of the subgroup writes tokens l / 2 (eight rows each), adjacent lanes adjacent rows.
fn put_tile(c: coop_mat16x16<f32, C>, sg: u32, li: u32, tok0: u32, row0: u32) {
    coopStoreT(c, &cs[sg * 256u], 16u);
    workgroupBarrier();
    let lane = li % 32u;
    let tok = tok0 + lane / 2u;
    let r0 = (lane % 2u) * 8u;
    if (tok < p.t) {
        for (var e = 0u; e < 8u; e++) {
            let row = row0 + r0 + e;
            if (row < p.n) {
                y[tok * p.ny + p.row0 + row] = cs[sg * 256u + (lane / 2u) * 16u + r0 + e];
            }
        }
    }
    workgroupBarrier();
}

// KSPLIT: accumulator `acc` (rows + 16 for 1 and 3, tokens + 16 for 2 and 3) of every subgroup
// goes to the subgroup's 16 x 16 (a second-half subgroup's lands BLOCKS slots after its first-
// half partner's), and the two halves' sums are added as they are written out: value e of a
// block is token e / 16 and row e % 16, so sixteen adjacent invocations write adjacent rows.
// Every subgroup stores, so the cooperative store stays in uniform control flow.
fn put_split(c: coop_mat16x16<f32, C>, sg: u32, li: u32, acc: u32, t0: u32, n0: u32) {
    coopStoreT(c, &cs[sg * 256u], 16u);
    workgroupBarrier();
    for (var e = li; e < BLOCKS * 256u; e += WG) {
        let b = e / 256u;
        let tok = t0 + (b / SGR) * 32u + (acc / 2u) * 16u + (e / 16u) % 16u;
        let row = n0 + (b % SGR) * 32u + (acc % 2u) * 16u + e % 16u;
        if (tok < p.t && row < p.n) {
            y[tok * p.ny + p.row0 + row] = cs[e] + cs[e + BLOCKS * 256u];
        }
    }
    workgroupBarrier();
}
