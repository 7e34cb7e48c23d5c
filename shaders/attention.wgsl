// Causal attention over the KV cache for `n_tokens` queries at positions step.pos + t.
// One workgroup per (head, token). The context is walked in tiles of WG positions with an
// online softmax (running max and sum), so any context length fits in fixed shared memory.
// GQA: query head h reads KV head h / (n_heads / n_kv_heads).

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    max_seq: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

struct Step {
    pos: u32,
    n_tokens: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;          // [n_tokens, n_heads, head_dim]
@group(0) @binding(1) var<storage, read> k_cache: array<f32>;    // [n_kv_heads, max_seq, head_dim]
@group(0) @binding(2) var<storage, read> v_cache: array<f32>;    // [n_kv_heads, max_seq, head_dim]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [n_tokens, n_heads, head_dim]
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

const WG: u32 = 64u;
// Dimensions each invocation accumulates: head_dim <= WG * DIMS.
const DIMS: u32 = 4u;
const MAX_HEAD_DIM: u32 = 256u;
// Hex: the decimal -3.40282347e38 lies just past f32's range, and Tint (unlike naga) rejects it.
const LOWEST: f32 = -0x1.fffffep+127f;

var<workgroup> qs: array<f32, MAX_HEAD_DIM>;
var<workgroup> probs: array<f32, WG>;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let t = wid.y;
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let lane = lid.x;
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let n_ctx = min(step.pos + t + 1u, p.max_seq);
    let q_base = (t * p.n_heads + h) * p.head_dim;
    for (var d = lane; d < p.head_dim; d += WG) {
        qs[d] = q[q_base + d] * p.scale;
    }
    workgroupBarrier();

    var m = LOWEST;
    var l = 0.0;
    var acc = array<f32, DIMS>(0.0, 0.0, 0.0, 0.0);
    let kv_base = kvh * p.max_seq * p.head_dim;
    for (var start = 0u; start < n_ctx; start += WG) {
        let j = start + lane;
        var s = LOWEST;
        if (j < n_ctx) {
            let row = kv_base + j * p.head_dim;
            s = 0.0;
            for (var d = 0u; d < p.head_dim; d++) {
                s += qs[d] * k_cache[row + d];
            }
        }
        partial[lane] = s;
        workgroupBarrier();
        for (var r = WG / 2u; r > 0u; r = r >> 1u) {
            if (lane < r) {
                partial[lane] = max(partial[lane], partial[lane + r]);
            }
            workgroupBarrier();
        }
        let m_new = max(m, partial[0]);
        workgroupBarrier();
        var pj = 0.0;
        if (j < n_ctx) {
            pj = exp(s - m_new);
        }
        probs[lane] = pj;
        partial[lane] = pj;
        workgroupBarrier();
        for (var r = WG / 2u; r > 0u; r = r >> 1u) {
            if (lane < r) {
                partial[lane] += partial[lane + r];
            }
            workgroupBarrier();
        }
        let correction = exp(m - m_new);
        l = l * correction + partial[0];
        let count = min(WG, n_ctx - start);
        for (var i = 0u; i < DIMS; i++) {
            let d = lane + i * WG;
            if (d < p.head_dim) {
                var sum = acc[i] * correction;
                for (var jj = 0u; jj < count; jj++) {
                    sum += probs[jj] * v_cache[kv_base + (start + jj) * p.head_dim + d];
                }
                acc[i] = sum;
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    let inv = 1.0 / l;
    for (var i = 0u; i < DIMS; i++) {
        let d = lane + i * WG;
        if (d < p.head_dim) {
            out[q_base + d] = acc[i] * inv;
        }
    }
}
