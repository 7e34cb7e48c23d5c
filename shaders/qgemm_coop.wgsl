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
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>; // [t, k / 4]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [t, ny]
@group(0) @binding(${PB}) var<uniform> p: Params;

const SGR: u32 = ${SGR}u;      // subgroups along the rows (2 or 4)
const TM: u32 = ${TM}u;        // tokens per tile: 32 SGT, SGT 1 or 2
const TN: u32 = ${TN}u;        // rows per tile: 32 SGR
const WG: u32 = ${WG}u;        // 32 SGT SGR
const KS: u32 = 40u;           // f16 elements per staged row: 32 of K and 8 of padding

var<workgroup> ws: array<f16, ${WS}>; // [row][KS]: TN * KS
var<workgroup> xs: array<f16, ${XS}>; // [token][KS]: TM * KS
var<workgroup> cs: array<f32, ${CS}>; // [subgroup][16 x 16]: one accumulator each on its way out

// Unit j of the W tile: row j / 4, eight weights (j % 4) * 8 .. + 8 of the step, so that four
// adjacent lanes read one row's 32 weights together and store them side by side. Rows past n
// repeat row n - 1; they are never stored to Y.
fn fetch_w(n0: u32, step: u32, j: u32) -> W8 {
    return w8(min(n0 + j / 4u, p.n - 1u), step * 4u + j % 4u);
}

fn put_w(j: u32, v: W8) {
    let at = (j / 4u) * KS + (j % 4u) * 8u;
    ws[at] = f16(v.a.x);
    ws[at + 1u] = f16(v.a.y);
    ws[at + 2u] = f16(v.a.z);
    ws[at + 3u] = f16(v.a.w);
    ws[at + 4u] = f16(v.b.x);
    ws[at + 5u] = f16(v.b.y);
    ws[at + 6u] = f16(v.b.z);
    ws[at + 7u] = f16(v.b.w);
}

// vec4 j of the X tile: token j / 8, values (j % 8) * 4 .. + 4 of the step (eight adjacent
// lanes read one token's 128 bytes); zeros past t.
fn fetch_x(t0: u32, step: u32, j: u32) -> vec4<f32> {
    let tok = t0 + j / 8u;
    if (tok >= p.t) {
        return vec4<f32>(0.0);
    }
    return x[(tok * p.k) / 4u + step * 8u + j % 8u];
}

fn put_x(j: u32, v: vec4<f32>) {
    let at = (j / 8u) * KS + (j % 8u) * 4u;
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
    let ta = (sg / SGR) * 32u; // the subgroup's first token in the tile
    let rb = (sg % SGR) * 32u; // and its first row
    let steps = p.k / 32u;
    // TN * 4 units of W and TM * 8 vec4 of X a step: 4 / SGT units (W4 with one subgroup along
    // the tokens) and 8 / SGR vec4 (X4 with two along the rows) an invocation.
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
        for (var kk = 0u; kk < 32u; kk += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ta * KS + kk], KS);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(ta + 16u) * KS + kk], KS);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[rb * KS + kk], KS);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[(rb + 16u) * KS + kk], KS);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }
    // Each accumulator goes out through the subgroup's 16 x 16 of workgroup memory, so that
    // tokens past t and rows past n are left unwritten.
    put_tile(c00, sg, li, t0 + ta, n0 + rb);
    put_tile(c01, sg, li, t0 + ta, n0 + rb + 16u);
    put_tile(c10, sg, li, t0 + ta + 16u, n0 + rb);
    put_tile(c11, sg, li, t0 + ta + 16u, n0 + rb + 16u);
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
