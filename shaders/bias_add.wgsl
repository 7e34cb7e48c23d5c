// x[t, i] += b[i]: a bias broadcast over rows.

struct Params {
    n: u32,          // elements of x
    row_stride: u32, // elements per row of the 2-D grid
    cols: u32,       // length of b
    _pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;  // [rows, cols]
@group(0) @binding(1) var<storage, read> b: array<f32>;        // [cols]
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        x[i] = x[i] + b[i % p.cols];
    }
}
