// out = a + b, elementwise. The grid is 2-D so that tensors longer than
// 65535 workgroups still fit one dispatch: i = x + y * row_stride.

struct Params {
    n: u32,
    row_stride: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        out[i] = a[i] + b[i];
    }
}
