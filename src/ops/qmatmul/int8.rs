//! The CPU reference of the 8-bit activations of the GPU GEMV's DP4 path
//! (shaders/gemv_dp4.wgsl), and what a DP4 product may differ from it by.

/// `x` as the DP4 kernel stages it, chunk by chunk of 32 values: scale d = absmax / 127 and
/// integers a = round-to-even(v · (127 / absmax)). Returns d · a for every value (what the
/// integer products stand for) and each chunk's d.
pub fn int8_activations(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut values = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(x.len().div_ceil(32));
    for chunk in x.chunks(32) {
        let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
        let d = amax / 127.0;
        values.extend(chunk.iter().map(|&v| d * (v * inv).round_ties_even()));
        scales.push(d);
    }
    (values, scales)
}

/// How far a DP4 product may be from [`super::cpu_reference`] over [`int8_activations`],
/// relative to the output's Σ|w·x|: the f32 tolerance of the sums, and two activations one level
/// off (a GPU's `127 / absmax` may round differently from the CPU's, moving a value that lies
/// on a rounding boundary), each at most max|w| · max d.
pub fn int8_tolerance(k: usize, max_w: f64, max_d: f64, scale: f64) -> f64 {
    super::f32_tolerance(k) + 2.0 * max_w * max_d / scale.max(f64::MIN_POSITIVE)
}
