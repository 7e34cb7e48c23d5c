// y = x / sqrt(mean(x^2) + eps) * w, over each row. One workgroup per row.
// RESIDUAL: first x += r (the residual connection before the next block's norm), so the sum
// is written and normalised in one pass instead of two dispatches.

struct Params {
    rows: u32,
    cols: u32,
    eps: f32,
    _pad: u32,
}

#ifdef RESIDUAL
@group(0) @binding(0) var<storage, read_write> x: array<f32>;  // [rows, cols]
@group(0) @binding(1) var<storage, read> w: array<f32>;        // [cols]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [rows, cols]
@group(0) @binding(3) var<storage, read> r: array<f32>;        // [rows, cols]
@group(0) @binding(4) var<uniform> p: Params;
#else
@group(0) @binding(0) var<storage, read> x: array<f32>;        // [rows, cols]
@group(0) @binding(1) var<storage, read> w: array<f32>;        // [cols]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [rows, cols]
@group(0) @binding(3) var<uniform> p: Params;
#endif

const WG: u32 = ${WG}u;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.cols;
    var sum = 0.0;
    for (var i = lid.x; i < p.cols; i += WG) {
#ifdef RESIDUAL
        let v = x[base + i] + r[base + i];
        // Each invocation reads back only what it wrote itself: no barrier needed.
        x[base + i] = v;
#else
        let v = x[base + i];
#endif
        sum += v * v;
    }
    partial[lid.x] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid.x < s) {
            partial[lid.x] += partial[lid.x + s];
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(partial[0] / f32(p.cols) + p.eps);
    for (var i = lid.x; i < p.cols; i += WG) {
        y[base + i] = x[base + i] * scale * w[i];
    }
}
