// Numerically stable softmax over each row: y = exp(x - max) / sum(exp(x - max)).
// One workgroup per row; the grid is 2-D so that more than 65535 rows fit one dispatch.

struct Params {
    rows: u32,
    cols: u32,
    groups_x: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;        // [rows, cols]
@group(0) @binding(1) var<storage, read_write> y: array<f32>;  // [rows, cols]
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = ${WG}u;
// The lowest finite f32, written exactly: Tint rejects a decimal literal that rounds beyond it.
const LOWEST: f32 = -0x1.fffffep+127f;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(${WG})
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let row = wid.x + wid.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.cols;

    var m = LOWEST;
    for (var i = lid.x; i < p.cols; i += WG) {
        m = max(m, x[base + i]);
    }
    partial[lid.x] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid.x < s) {
            partial[lid.x] = max(partial[lid.x], partial[lid.x + s]);
        }
        workgroupBarrier();
    }
    let row_max = partial[0];
    workgroupBarrier();

    var sum = 0.0;
    for (var i = lid.x; i < p.cols; i += WG) {
        sum += exp(x[base + i] - row_max);
    }
    partial[lid.x] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid.x < s) {
            partial[lid.x] += partial[lid.x + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / partial[0];

    for (var i = lid.x; i < p.cols; i += WG) {
        y[base + i] = exp(x[base + i] - row_max) * inv;
    }
}
