// What the attention kernels over the KV cache share (shaders/attention.wgsl, decode and short
// passes; shaders/attention_prefill.wgsl, prompt passes): their parameters, written by
// `params` in src/ops/attention.rs, and the masks. Each kernel declares `p: Params` and
// `step: Step` as uniforms.

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    max_seq: u32,
    scale: f32,
    row_words: u32,
    chunk_len: u32, // SPLIT: context positions per workgroup, a multiple of WG
    window: u32,    // 0: none
    softcap: f32,   // 0: none
    rot_dims: u32,  // ROPE: dimensions rotated, as shaders/rope_store.wgsl
    sinks: u32,     // ROPE: positions that keep their cache slots
}

struct Step {
    pos: u32,
    n_tokens: u32,
    _pad0: u32,
    _pad1: u32,
}

// Hex: the decimal -3.40282347e38 lies just past f32's range, and Tint (unlike naga) rejects it.
const LOWEST: f32 = -0x1.fffffep+127f;

// Context slots the query of token t attends to: the last min(P + 1, max_seq) positions of its
// position P, which are slots 0 .. n_ctx either way (see shaders/attention.wgsl).
fn context_len(t: u32) -> u32 {
    return min(step.pos + t + 1u, p.max_seq);
}

// Whether the query of token t sees slot j of its context (j below context_len(t)).
fn in_window(t: u32, j: u32) -> bool {
    return p.window == 0u || (step.pos + t - j) % p.max_seq < p.window;
}

// A scaled score after soft-capping. tanh's argument is clamped where tanh(x) is 1 in f32
// already, so that no implementation overflows inside it.
fn capped(s: f32) -> f32 {
    if (p.softcap > 0.0) {
        return p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
    }
    return s;
}
