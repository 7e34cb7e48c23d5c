// x[i] = max(x[i], 0), in place.

struct Params {
    n: u32,          // elements of x
    row_stride: u32, // elements per row of the 2-D grid
    _unused: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        x[i] = max(x[i], 0.0);
    }
}
