// Applies stored scales (and zero points) to decoded codes, in place:
//   w[i] = scale[g] * (w[i] - zero[g])      (without ZERO: w[i] = scale[g] * w[i])
// with the element's group g = row * groups_per_row + col / group for a [rows, cols] view.
// One subtraction and one product, each correctly rounded, and no a*b + c that a compiler could
// fuse: the CPU reference (quant::scaled::rescale) gets the same bits.

struct Params {
    n: u32,          // elements: rows * cols
    row_stride: u32, // invocations per row of the 2-D grid
    cols: u32,
    group: u32,
    groups_per_row: u32,
    _a: u32,
    _b: u32,
    _c: u32,
}

@group(0) @binding(0) var<storage, read_write> w: array<f32>;  // [rows, cols]
@group(0) @binding(1) var<storage, read> scale: array<f32>;    // [rows, groups_per_row]
#ifdef ZERO
@group(0) @binding(2) var<storage, read> zero: array<f32>;     // [rows, groups_per_row]
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(2) var<uniform> p: Params;
#endif

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    let row = i / p.cols;
    let g = row * p.groups_per_row + (i - row * p.cols) / p.group;
#ifdef ZERO
    w[i] = scale[g] * (w[i] - zero[g]);
#else
    w[i] = scale[g] * w[i];
#endif
}
