// x += y: the residual connection. WebGPU forbids binding one buffer both read and written,
// so in-place addition is its own kernel.

struct Params {
    n: u32,
    row_stride: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        x[i] = x[i] + y[i];
    }
}
