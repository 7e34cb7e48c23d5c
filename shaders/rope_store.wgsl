// Rotary position embedding for one step of `n_tokens` tokens starting at position step.pos:
// rotates q in place, rotates k and writes k and v into the caches at their positions.
// cos/sin come from a table computed on the CPU in f64, so large positions lose no accuracy
// to a GPU's sin/cos range reduction.
//
// The cache and the table hold max_seq slots: the first `sinks` positions keep slots
// 0..sinks for good (attention sinks), later positions share the other slots as a ring
// (ring_slot). K is rotated at its absolute position before it is stored, so a slot needs no
// re-rotation when the window slides; the engine rewrites the table row of a slot before a
// position past max_seq uses it.
//
// QKV: k and v are both bound to one [n_tokens, n_heads + 2 * n_kv_heads, head_dim] tensor
// (the stacked Q/K/V projection's output: the query heads, then K, then V of each token), and
// the rotated queries are written to q instead of rotated in place.
//
// Pair layout: NORM rotates (2i, 2i+1) (GGUF llama); NEOX rotates (i, i + rot/2) (HF, Qwen2).
// Cache rows (src/ops/kv.rs): f32 values; KV_F16: pack2x16float pairs; KV_Q8: an f32 scale word
// (absmax / 127) then four round(x / scale) bytes per word, lowest byte first.

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    max_seq: u32,
    rot_dims: u32,
    row_words: u32,
    sinks: u32,
}

struct Step {
    pos: u32,
    n_tokens: u32,
    _pad0: u32,
    _pad1: u32,
}

#ifdef KV_F16
alias Word = u32;
#else
#ifdef KV_Q8
alias Word = u32;
#else
alias Word = f32;
#endif
#endif

@group(0) @binding(0) var<storage, read_write> q: array<f32>;         // [n_tokens, n_heads, head_dim]
@group(0) @binding(1) var<storage, read> k: array<f32>;               // [n_tokens, n_kv_heads, head_dim]
@group(0) @binding(2) var<storage, read> v: array<f32>;               // [n_tokens, n_kv_heads, head_dim]
@group(0) @binding(3) var<storage, read_write> k_cache: array<Word>;  // [n_kv_heads, max_seq, row_words]
@group(0) @binding(4) var<storage, read_write> v_cache: array<Word>;  // [n_kv_heads, max_seq, row_words]
@group(0) @binding(5) var<storage, read> cos_sin: array<f32>;         // [max_seq, rot_dims / 2, 2]
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<uniform> step: Step;

// First element of query head `h` of token `t` in the tensor the queries are read from.
fn q_row(t: u32, h: u32) -> u32 {
#ifdef QKV
    return (t * (p.n_heads + 2u * p.n_kv_heads) + h) * p.head_dim;
#else
    return (t * p.n_heads + h) * p.head_dim;
#endif
}

// First element of KV head `h` of token `t` in k.
fn k_row(t: u32, h: u32) -> u32 {
#ifdef QKV
    return (t * (p.n_heads + 2u * p.n_kv_heads) + p.n_heads + h) * p.head_dim;
#else
    return (t * p.n_kv_heads + h) * p.head_dim;
#endif
}

// First element of KV head `h` of token `t` in v.
fn v_row(t: u32, h: u32) -> u32 {
#ifdef QKV
    return k_row(t, h) + p.n_kv_heads * p.head_dim;
#else
    return k_row(t, h);
#endif
}

// Dimension d of the K row starting at `src`, rotated with table row `slot` (`pair` and
// `rotate` are in shaders/rope_pair.wgsl, concatenated).
fn rotated_k(src: u32, d: u32, slot: u32) -> f32 {
    if (d >= p.rot_dims) {
        return k[src + d];
    }
    let dims = pair(pair_index(d));
    return rotate(d, slot, k[src + dims.x], k[src + dims.y]);
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
    let ring = ring_slot(pos);
    var dims = vec2<u32>(2u * i, 2u * i + 1u);
    var cs = vec2<f32>(1.0, 0.0);
    let rotated = i < p.rot_dims / 2u;
    if (rotated) {
        dims = pair(i);
        let at = (ring * (p.rot_dims / 2u) + i) * 2u;
        cs = vec2<f32>(cos_sin[at], cos_sin[at + 1u]);
    } else {
        // Dimensions past rot_dims pass through unrotated, two per thread.
        dims = vec2<u32>(p.rot_dims + 2u * (i - p.rot_dims / 2u), p.rot_dims + 2u * (i - p.rot_dims / 2u) + 1u);
    }
    if (slot < p.n_heads) {
        let base = (t * p.n_heads + slot) * p.head_dim;
#ifdef QKV
        let qsrc = q_row(t, slot);
        let x0 = k[qsrc + dims.x];
        let x1 = k[qsrc + dims.y];
#else
        let x0 = q[base + dims.x];
        let x1 = q[base + dims.y];
#endif
        q[base + dims.x] = x0 * cs.x - x1 * cs.y;
        q[base + dims.y] = x0 * cs.y + x1 * cs.x;
        return;
    }
    let h = slot - p.n_heads;
    let src = k_row(t, h);
    let vsrc = v_row(t, h);
    let dst = (h * p.max_seq + ring) * p.row_words;
#ifdef KV_F16
    // Thread i packs dimensions (2i, 2i + 1): one word of each row.
    let kw = vec2<f32>(rotated_k(src, 2u * i, ring), rotated_k(src, 2u * i + 1u, ring));
    k_cache[dst + i] = pack2x16float(kw);
    v_cache[dst + i] = pack2x16float(vec2<f32>(v[vsrc + 2u * i], v[vsrc + 2u * i + 1u]));
#else
#ifdef KV_Q8
    // The row's scale needs its absmax: the first thread of the row writes all of it.
    if (i != 0u) {
        return;
    }
    var k_max = 0.0;
    var v_max = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        k_max = max(k_max, abs(rotated_k(src, d, ring)));
        v_max = max(v_max, abs(v[vsrc + d]));
    }
    let k_scale = k_max / 127.0;
    let v_scale = v_max / 127.0;
    k_cache[dst] = bitcast<u32>(k_scale);
    v_cache[dst] = bitcast<u32>(v_scale);
    for (var w = 0u; w < p.head_dim / 4u; w++) {
        var kq = 0u;
        var vq = 0u;
        for (var b = 0u; b < 4u; b++) {
            let d = 4u * w + b;
            kq = kq | (quant_byte(rotated_k(src, d, ring), k_scale) << (8u * b));
            vq = vq | (quant_byte(v[vsrc + d], v_scale) << (8u * b));
        }
        k_cache[dst + 1u + w] = kq;
        v_cache[dst + 1u + w] = vq;
    }
#else
    let x0 = k[src + dims.x];
    let x1 = k[src + dims.y];
    k_cache[dst + dims.x] = x0 * cs.x - x1 * cs.y;
    k_cache[dst + dims.y] = x0 * cs.y + x1 * cs.x;
    v_cache[dst + dims.x] = v[vsrc + dims.x];
    v_cache[dst + dims.y] = v[vsrc + dims.y];
#endif
#endif
}
