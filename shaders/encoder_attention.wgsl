// Bidirectional multi-head attention of an encoder over a packed batch: the sequences lie one
// after another in the token rows, and query row i attends to the key rows
// spans[2i] .. spans[2i + 1] (its own sequence), which is BERT's padding mask without
// padding rows. q, k and v are column blocks of one [t, 3 · dim] tensor (the stacked Q/K/V
// product): q at column 0, k at dim, v at 2 · dim; head h takes columns h · hd .. (h + 1) · hd.
// One workgroup per (query row, head): the scores of its keys stay in shared memory, so a
// sequence may have at most MAX_KEYS tokens (checked by the caller).

struct Params {
    t: u32,
    dim: u32,
    hd: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;       // [t, 3 * dim]
@group(0) @binding(1) var<storage, read> spans: array<u32>;     // [t, 2]
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // [t, dim]
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = ${WG}u;
const MAX_KEYS: u32 = ${MAX_KEYS}u;
const MAX_HD: u32 = ${MAX_HD}u;
var<workgroup> scores: array<f32, MAX_KEYS>;
var<workgroup> q: array<f32, MAX_HD>;
var<workgroup> partial: array<f32, WG>;

fn reduce_max(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            partial[lid] = max(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

fn reduce_sum(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let lid = lid3.x;
    let row = wid.x;
    let col = wid.y * p.hd;
    if (row >= p.t) {
        return;
    }
    let stride = 3u * p.dim;
    let start = spans[2u * row];
    let len = spans[2u * row + 1u] - start;
    for (var c = lid; c < p.hd; c += WG) {
        q[c] = qkv[row * stride + col + c];
    }
    workgroupBarrier();
    var top = -3.4e38;
    for (var j = lid; j < len; j += WG) {
        let kbase = (start + j) * stride + p.dim + col;
        var dot = 0.0;
        for (var c = 0u; c < p.hd; c++) {
            dot += q[c] * qkv[kbase + c];
        }
        let s = dot * p.scale;
        scores[j] = s;
        top = max(top, s);
    }
    let m = reduce_max(lid, top);
    var sum = 0.0;
    for (var j = lid; j < len; j += WG) {
        let e = exp(scores[j] - m);
        scores[j] = e;
        sum += e;
    }
    // reduce_sum's barriers also make every score visible to every invocation.
    let inv = 1.0 / reduce_sum(lid, sum);
    for (var c = lid; c < p.hd; c += WG) {
        var acc = 0.0;
        let vbase = start * stride + 2u * p.dim + col + c;
        for (var j = 0u; j < len; j++) {
            acc += scores[j] * qkv[vbase + j * stride];
        }
        out[row * p.dim + col + c] = acc * inv;
    }
}
