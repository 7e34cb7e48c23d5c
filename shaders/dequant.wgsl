// One element per invocation through `decode` (shaders/decode.wgsl, appended to this file).

struct Params {
    n: u32,          // elements
    row_stride: u32, // elements per row of the 2-D grid
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>; // f32 bits
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        dst[i] = decode(i);
    }
}
