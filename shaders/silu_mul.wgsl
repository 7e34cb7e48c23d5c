// out = silu(gate) * up, the SwiGLU activation: silu(g) = g / (1 + exp(-g)); with GELU,
// out = gelu(gate) * up (GeGLU) with the tanh approximation of GELU, its argument clamped where
// tanh is 1 in f32 already.
// PAIRS: gate and up are the two halves of each row of one [rows, 2 * cols] tensor (the output
// of the stacked gate/up projection, bound twice); out is [rows, cols].

struct Params {
    n: u32,
    row_stride: u32,
    cols: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
#ifdef PAIRS
        let row = i / p.cols;
        let at = i + row * p.cols;
        let g = gate[at];
        let u = up[at + p.cols];
#else
        let g = gate[i];
        let u = up[i];
#endif
#ifdef GELU
        let inner = clamp(0.7978845608028654 * (g + 0.044715 * g * g * g), -15.0, 15.0);
        out[i] = 0.5 * g * (1.0 + tanh(inner)) * u;
#else
        out[i] = g / (1.0 + exp(-g)) * u;
#endif
    }
}
