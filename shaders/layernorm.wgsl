// x = (s - mean(s)) / sqrt(var(s) + eps) * w + b with s = x + (r + rb), over each row, in place:
// a BERT block's residual sum, the bias of the product that made r, and its post-LayerNorm in
// one pass. One workgroup per row; each invocation keeps to its own columns, so the sum it
// writes in the first loop is read back only by itself (no barrier needed for it).
// The variance is the mean of squared deviations (two passes), as PyTorch computes it, not
// E[s²] - mean², which loses digits when the mean is large.

struct Params {
    rows: u32,
    cols: u32,
    eps: f32,
    grid_x: u32,  // workgroups along x: row = x + y * grid_x
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;  // [rows, cols]
@group(0) @binding(1) var<storage, read> r: array<f32>;        // [rows, cols]
@group(0) @binding(2) var<storage, read> rb: array<f32>;       // [cols]
@group(0) @binding(3) var<storage, read> w: array<f32>;        // [cols]
@group(0) @binding(4) var<storage, read> b: array<f32>;        // [cols]
@group(0) @binding(5) var<uniform> p: Params;

const WG: u32 = ${WG}u;
var<workgroup> partial: array<f32, WG>;

fn reduce(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    // Everyone has read the total before the next reduction overwrites it.
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x + wid.y * p.grid_x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.cols;
    var sum = 0.0;
    for (var i = lid.x; i < p.cols; i += WG) {
        let v = x[base + i] + (r[base + i] + rb[i]);
        x[base + i] = v;
        sum += v;
    }
    let mean = reduce(lid.x, sum) / f32(p.cols);
    var sq = 0.0;
    for (var i = lid.x; i < p.cols; i += WG) {
        let d = x[base + i] - mean;
        sq += d * d;
    }
    let scale = 1.0 / sqrt(reduce(lid.x, sq) / f32(p.cols) + p.eps);
    for (var i = lid.x; i < p.cols; i += WG) {
        x[base + i] = (x[base + i] - mean) * scale * w[i] + b[i];
    }
}
