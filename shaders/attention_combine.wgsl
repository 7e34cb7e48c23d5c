// Merges the per-chunk partial results of split attention (shaders/attention.wgsl with SPLIT)
// with merge_chunks (shaders/attention_merge.wgsl, concatenated). One workgroup per (head, token).

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
const LOWEST: f32 = -0x1.fffffep+127f;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let t = wid.y;
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let base = (t * p.n_heads + h) * p.chunks * (p.head_dim + 2u);
    merge_chunks(base, p.chunks, p.head_dim, lid.x, (t * p.n_heads + h) * p.head_dim);
}
