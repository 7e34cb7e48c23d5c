// Y[t, n] = X[t, k] · W[n, k]^T for many tokens (prefill) on GPUs, for K a multiple of 32.
//
// A workgroup owns a tile of TN (64) rows x TM tokens of Y. Per 32-wide step of K its
// invocations decode the tile's TN * 4 eight-weight units of W (`w8`, shaders/qweight.wgsl, the
// values of the CPU reference) and stage its TM * 8 vec4 of X, both stored k-major in workgroup
// memory; each invocation then takes a block of 4 tokens x 4 rows of Y as outer products of a
// vec4 of four tokens and a vec4 of four rows: 16 FMAs for two vec4 loads from workgroup memory,
// where the 32 x 32 tiled kernel of shaders/qgemm.wgsl does 4 and stalls on workgroup memory.
// The next step's weights and activations are fetched into registers before the products, so
// their latency hides behind the arithmetic. The registers are named variables, not arrays:
// with arrays indexed in constant-count loops (and with 8 rows an invocation) an H100 ran this
// kernel 20-30 % slower (bench/NOTES.md, note 21).
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>; // [t, k / 4]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [t, ny]
@group(0) @binding(${PB}) var<uniform> p: Params;

const TM: u32 = ${TM}u;   // tokens per tile
const TN: u32 = ${TN}u;   // rows per tile
const WG: u32 = ${WG}u;   // TM * TN / 16: one 4 x 4 block of Y an invocation
const COLS: u32 = TN / 4u; // invocations along the rows of the tile

var<workgroup> ws: array<array<vec4<f32>, ${TN4}>, 32>; // [k][row / 4]
var<workgroup> xs: array<array<vec4<f32>, ${TM4}>, 32>; // [k][token / 4]

// Unit j of the W tile: row j % TN (adjacent invocations take adjacent rows, so the stores
// below hit distinct banks), eight weights (j / TN) * 8 .. + 8 of the step. Rows past n repeat
// row n - 1; they are never stored to Y.
fn fetch_w(n0: u32, step: u32, j: u32) -> W8 {
    return w8(min(n0 + j % TN, p.n - 1u), step * 4u + j / TN);
}

fn put_w(j: u32, v: W8) {
    let r = j % TN;
    let k0 = (j / TN) * 8u;
    let c = r / 4u;
    let e = r % 4u;
    ws[k0][c][e] = v.a.x;
    ws[k0 + 1u][c][e] = v.a.y;
    ws[k0 + 2u][c][e] = v.a.z;
    ws[k0 + 3u][c][e] = v.a.w;
    ws[k0 + 4u][c][e] = v.b.x;
    ws[k0 + 5u][c][e] = v.b.y;
    ws[k0 + 6u][c][e] = v.b.z;
    ws[k0 + 7u][c][e] = v.b.w;
}

// vec4 j of the X tile: token j % TM, values (j / TM) * 4 .. + 4 of the step; zeros past t.
fn fetch_x(t0: u32, step: u32, j: u32) -> vec4<f32> {
    let tok = t0 + j % TM;
    if (tok >= p.t) {
        return vec4<f32>(0.0);
    }
    return x[(tok * p.k) / 4u + step * 8u + j / TM];
}

fn put_x(j: u32, v: vec4<f32>) {
    let r = j % TM;
    let k0 = (j / TM) * 4u;
    let c = r / 4u;
    let e = r % 4u;
    xs[k0][c][e] = v.x;
    xs[k0 + 1u][c][e] = v.y;
    xs[k0 + 2u][c][e] = v.z;
    xs[k0 + 3u][c][e] = v.w;
}

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n0 = wid.x * TN;
    let t0 = wid.y * TM;
    let tx = li % COLS;
    let ty = li / COLS;
    let steps = p.k / 32u;
    // TN * 4 units of W and TM * 8 vec4 of X a step: two vec4 of X an invocation, and one unit
    // of W (TM 64) or two (TM 32, W2).
    var wa = fetch_w(n0, 0u, li);
#ifdef W2
    var wb = fetch_w(n0, 0u, li + WG);
#endif
    var xa = fetch_x(t0, 0u, li);
    var xb = fetch_x(t0, 0u, li + WG);
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    for (var step = 0u; step < steps; step++) {
        put_w(li, wa);
#ifdef W2
        put_w(li + WG, wb);
#endif
        put_x(li, xa);
        put_x(li + WG, xb);
        workgroupBarrier();
        if (step + 1u < steps) {
            wa = fetch_w(n0, step + 1u, li);
#ifdef W2
            wb = fetch_w(n0, step + 1u, li + WG);
#endif
            xa = fetch_x(t0, step + 1u, li);
            xb = fetch_x(t0, step + 1u, li + WG);
        }
        for (var k = 0u; k < 32u; k++) {
            let a = xs[k][ty];
            let b = ws[k][tx];
            c0 = fma(vec4<f32>(a.x), b, c0);
            c1 = fma(vec4<f32>(a.y), b, c1);
            c2 = fma(vec4<f32>(a.z), b, c2);
            c3 = fma(vec4<f32>(a.w), b, c3);
        }
        workgroupBarrier();
    }
    let row = n0 + tx * 4u;
    let tok = t0 + ty * 4u;
    store(tok, row, c0);
    store(tok + 1u, row, c1);
    store(tok + 2u, row, c2);
    store(tok + 3u, row, c3);
}

fn store(tok: u32, row: u32, v: vec4<f32>) {
    if (tok >= p.t) {
        return;
    }
    let at = tok * p.ny + p.row0 + row;
    for (var e = 0u; e < 4u; e++) {
        if (row + e < p.n) {
            y[at + e] = v[e];
        }
    }
}
