// out[t, k] = row ids[t] of W, dequantized by `w8` (shaders/qweight.wgsl): only the requested rows
// are read. One invocation per eight values; an id past the last row gives a row of zeros. With
// W in several parts, each part's dispatch writes the ids it holds.

@group(0) @binding(1) var<storage, read> ids: array<u32>;         // [t]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;   // [t, k]
@group(0) @binding(${PB}) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let units = (p.k + 7u) / 8u; // per row
    let i = gid.x + gid.y * p.grid_x * 64u;
    let tok = i / units;
    let u = i % units;
    if (tok >= p.t) {
        return;
    }
    // Rows of other parts are theirs to write; ids past W are zeros, from the first part.
    let id = ids[tok];
    let local = id - p.row0;
    let mine = id >= p.row0 && local < p.n;
    if (!mine && !(p.row0 == 0u && id >= p.ny)) {
        return;
    }
    var v = W8(vec4<f32>(0.0), vec4<f32>(0.0));
    if (mine) {
        v = w8_tail(local, u);
    }
    let at = tok * p.k + u * 8u;
    for (var j = 0u; j < 4u; j++) {
        if (u * 8u + j < p.k) {
            out[at + j] = v.a[j];
        }
        if (u * 8u + 4u + j < p.k) {
            out[at + 4u + j] = v.b[j];
        }
    }
}
