// One pooled row per sequence of a packed batch (sequence s is token rows
// starts[s] .. starts[s + 1]): the mean of its rows, or with CLS its first row; with NORMALIZE
// divided by max(|row|, 1e-12), sentence-transformers' Normalize. One workgroup per sequence;
// each invocation keeps to its own columns.

struct Params {
    n: u32,     // sequences
    cols: u32,
    grid_x: u32, // workgroups along x: s = x + y * grid_x
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;         // [t, cols]
@group(0) @binding(1) var<storage, read> starts: array<u32>;    // [n + 1]
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // [n, cols]
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = ${WG}u;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let lid = lid3.x;
    let s = wid.x + wid.y * p.grid_x;
    if (s >= p.n) {
        return;
    }
    let start = starts[s];
    let end = starts[s + 1u];
    var sq = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
#ifdef CLS
        let v = x[start * p.cols + c];
#else
        var acc = 0.0;
        for (var r = start; r < end; r++) {
            acc += x[r * p.cols + c];
        }
        let v = acc * (1.0 / f32(end - start));
#endif
        out[s * p.cols + c] = v;
        sq += v * v;
    }
#ifdef NORMALIZE
    partial[lid] = sq;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k = k >> 1u) {
        if (lid < k) {
            partial[lid] += partial[lid + k];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / max(sqrt(partial[0]), 1e-12);
    for (var c = lid; c < p.cols; c += WG) {
        out[s * p.cols + c] = out[s * p.cols + c] * inv;
    }
#endif
}
