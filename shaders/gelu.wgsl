// x = gelu(x + b[i % cols]) with the exact (erf) GELU of BERT and PyTorch's default `gelu`:
// gelu(v) = v / 2 · (1 + erf(v / √2)). WGSL has no erf: erfc(z), z ≥ 0, is Abramowitz and
// Stegun's 7.1.26, t · P(t) · e^(-z²) with t = 1 / (1 + p z) (absolute error below 1.5e-7),
// the CPU encoder's form (src/cpu/encoder.rs); the negative side is v / 2 · erfc(-v / √2), so
// the small tail keeps its relative precision instead of cancelling in 1 + erf.

struct Params {
    n: u32,          // elements of x
    row_stride: u32, // elements per row of the 2-D grid
    cols: u32,       // length of b
    _pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;  // [rows, cols]
@group(0) @binding(1) var<storage, read> b: array<f32>;        // [cols]
@group(0) @binding(2) var<uniform> p: Params;

fn gelu(v: f32) -> f32 {
    let z = abs(v) * 0.70710678118654752;
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erfc = poly * exp(-z * z);
    if (v >= 0.0) {
        return 0.5 * v * (2.0 - erfc);
    }
    return 0.5 * v * erfc;
}

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i < p.n) {
        x[i] = gelu(x[i] + b[i % p.cols]);
    }
}
