// Merges the per-chunk partial results of split attention (shaders/attention.wgsl with SPLIT):
// out = Σ_c acc_c · e^(m_c − M) / Σ_c l_c · e^(m_c − M), M the largest chunk maximum. Chunks
// with a zero sum saw no position. One workgroup per (head, token).

struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    chunks: u32,
}

@group(0) @binding(0) var<storage, read> partials: array<f32>; // [n_tokens, n_heads, chunks, head_dim + 2]
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // [n_tokens, n_heads, head_dim]
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 64u;
const LOWEST: f32 = -3.40282347e38;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let t = wid.y;
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let stride = p.head_dim + 2u;
    let base = (t * p.n_heads + h) * p.chunks * stride;
    var top = LOWEST;
    for (var c = 0u; c < p.chunks; c++) {
        if (partials[base + c * stride + 1u] > 0.0) {
            top = max(top, partials[base + c * stride]);
        }
    }
    var sum = 0.0;
    for (var c = 0u; c < p.chunks; c++) {
        let l = partials[base + c * stride + 1u];
        if (l > 0.0) {
            sum += l * exp(partials[base + c * stride] - top);
        }
    }
    let inv = 1.0 / sum;
    for (var d = lid.x; d < p.head_dim; d += WG) {
        var acc = 0.0;
        for (var c = 0u; c < p.chunks; c++) {
            let at = base + c * stride;
            if (partials[at + 1u] > 0.0) {
                acc += partials[at + 2u + d] * exp(partials[at] - top);
            }
        }
        out[(t * p.n_heads + h) * p.head_dim + d] = acc * inv;
    }
}
