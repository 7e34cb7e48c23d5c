// In place over every element: x *= by (SCALE: Gemma's embedding times sqrt(dim)), or
// x = cap * tanh(x / cap) (SOFTCAP: Gemma 2's final logits), tanh's argument clamped where
// tanh is 1 in f32 already.

struct Params {
    n: u32,
    row_stride: u32,
    value: f32, // `by` or `cap`
    _pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
#ifdef SOFTCAP
        x[i] = p.value * tanh(clamp(x[i] / p.value, -15.0, 15.0));
#else
        x[i] = x[i] * p.value;
#endif
    }
}
