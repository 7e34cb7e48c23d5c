// out[i] = x[offset + i]: picks rows out of a batch (the last token's hidden state).

struct Params {
    n: u32,
    row_stride: u32,
    offset: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        out[i] = x[p.offset + i];
    }
}
