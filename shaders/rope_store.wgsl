// Rotary position embedding for one step of `n_tokens` tokens starting at position step.pos:
// rotates q in place, rotates k and writes k and v into the caches at their positions.
// cos/sin come from a table computed on the CPU in f64, so large positions lose no accuracy
// to a GPU's sin/cos range reduction.
//
// Pair layout: NORM rotates (2i, 2i+1) (GGUF llama); NEOX rotates (i, i + rot/2) (HF, Qwen2).

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    max_seq: u32,
    rot_dims: u32,
    _pad0: u32,
    _pad1: u32,
}

struct Step {
    pos: u32,
    n_tokens: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> q: array<f32>;        // [n_tokens, n_heads, head_dim]
@group(0) @binding(1) var<storage, read> k: array<f32>;              // [n_tokens, n_kv_heads, head_dim]
@group(0) @binding(2) var<storage, read> v: array<f32>;              // [n_tokens, n_kv_heads, head_dim]
@group(0) @binding(3) var<storage, read_write> k_cache: array<f32>;  // [n_kv_heads, max_seq, head_dim]
@group(0) @binding(4) var<storage, read_write> v_cache: array<f32>;  // [n_kv_heads, max_seq, head_dim]
@group(0) @binding(5) var<storage, read> cos_sin: array<f32>;        // [max_seq, rot_dims / 2, 2]
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<uniform> step: Step;

fn pair(i: u32) -> vec2<u32> {
#ifdef NEOX
    return vec2<u32>(i, i + p.rot_dims / 2u);
#else
    return vec2<u32>(2u * i, 2u * i + 1u);
#endif
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half_dim = p.head_dim / 2u;
    let slots = p.n_heads + p.n_kv_heads;
    // One thread per (token, head slot, pair of dimensions).
    let idx = gid.x;
    let i = idx % half_dim;
    let slot = (idx / half_dim) % slots;
    let t = idx / (half_dim * slots);
    if (t >= p.n_tokens) {
        return;
    }
    let pos = step.pos + t;
    if (pos >= p.max_seq) {
        return;
    }
    var dims = vec2<u32>(2u * i, 2u * i + 1u);
    var cs = vec2<f32>(1.0, 0.0);
    let rotated = i < p.rot_dims / 2u;
    if (rotated) {
        dims = pair(i);
        let at = (pos * (p.rot_dims / 2u) + i) * 2u;
        cs = vec2<f32>(cos_sin[at], cos_sin[at + 1u]);
    } else {
        // Dimensions past rot_dims pass through unrotated, two per thread.
        dims = vec2<u32>(p.rot_dims + 2u * (i - p.rot_dims / 2u), p.rot_dims + 2u * (i - p.rot_dims / 2u) + 1u);
    }
    if (slot < p.n_heads) {
        let base = (t * p.n_heads + slot) * p.head_dim;
        let x0 = q[base + dims.x];
        let x1 = q[base + dims.y];
        q[base + dims.x] = x0 * cs.x - x1 * cs.y;
        q[base + dims.y] = x0 * cs.y + x1 * cs.x;
    } else {
        let h = slot - p.n_heads;
        let src = (t * p.n_kv_heads + h) * p.head_dim;
        let dst = (h * p.max_seq + pos) * p.head_dim;
        let x0 = k[src + dims.x];
        let x1 = k[src + dims.y];
        k_cache[dst + dims.x] = x0 * cs.x - x1 * cs.y;
        k_cache[dst + dims.y] = x0 * cs.y + x1 * cs.x;
        v_cache[dst + dims.x] = v[src + dims.x];
        v_cache[dst + dims.y] = v[src + dims.y];
    }
}
