//! The PyTorch activation fixtures (tests/fixtures/activations, scripts/dump_activations.py) and
//! the check of an engine's checkpoints against them, shared by every backend's test.

use std::path::Path;

use anyhow::Context;

pub const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
pub const FIXTURES: &str = "tests/fixtures/activations";

/// Error relative to the checkpoint's scale: max |weft - torch| / max |torch|. Both run the
/// same dequantized weights; with f32 kernels they differ only in summation order (and weft's
/// online softmax), amplified through 30 blocks.
pub const F32_TOLERANCE: f64 = 5e-5;

/// The f16 matmul variants round weights and activations to 11 significant bits (2^-11 ≈ 5e-4)
/// before each product: the tiled F16 kernel, and prompt passes on an adapter's matrix units.
pub const F16_TOLERANCE: f64 = 1e-2;

/// The tolerance of a forward pass whose matrix products ran at `precision`.
#[allow(dead_code)]
pub fn tolerance(precision: weft::ops::qmatmul::Precision) -> f64 {
    match precision {
        weft::ops::qmatmul::Precision::F32 => F32_TOLERANCE,
        weft::ops::qmatmul::Precision::F16 => F16_TOLERANCE,
    }
}

/// A fixture's .npy array (weft's reader: version 1.0, little-endian f32, C order).
pub fn read_npy(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    weft::format::npy::read_f32(&bytes).with_context(|| path.display().to_string())
}

#[derive(serde::Deserialize)]
pub struct Input {
    pub ids: Vec<u32>,
    pub checkpoints: Vec<String>,
}

pub fn input() -> anyhow::Result<Input> {
    anyhow::ensure!(Path::new(MODEL).exists(), "{MODEL} missing: run scripts/fetch-model.sh");
    Ok(serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/input.json"))?)?)
}

/// Checks every checkpoint (name, shape, values) against its fixture within `tolerance`, and
/// the last token's argmax against the reference logits; prints the table of errors.
pub fn check(input: &Input, got: &[(String, Vec<usize>, Vec<f32>)], vocab: usize, tolerance: f64) -> anyhow::Result<()> {
    check_in(FIXTURES, input, got, vocab, tolerance)
}

/// The input of the fixtures in `dir` (input.json and one .npy per checkpoint).
#[allow(dead_code)] // not every test binary that includes this module reads another folder
pub fn input_in(dir: &str) -> anyhow::Result<Input> {
    Ok(serde_json::from_str(&std::fs::read_to_string(format!("{dir}/input.json"))?)?)
}

/// [`check`] against the fixtures in `dir`.
pub fn check_in(dir: &str, input: &Input, got: &[(String, Vec<usize>, Vec<f32>)], vocab: usize, tolerance: f64) -> anyhow::Result<()> {
    let names: Vec<&str> = got.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, input.checkpoints.iter().map(String::as_str).collect::<Vec<_>>());

    println!("{:<18} {:>12} {:>12} {:>10}", "checkpoint", "max |err|", "max |ref|", "relative");
    let mut first_bad = None;
    for (name, shape, values) in got {
        let (ref_shape, reference) = read_npy(&Path::new(dir).join(format!("{name}.npy")))?;
        assert_eq!(values.len(), reference.len(), "{name}: {shape:?} vs {ref_shape:?}");
        let max_err = values.iter().zip(&reference).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
        let scale = reference.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
        let rel = max_err / scale.max(1e-30);
        println!("{name:<18} {max_err:>12.3e} {scale:>12.3e} {rel:>10.2e}");
        if (rel.is_nan() || rel > tolerance) && first_bad.is_none() {
            first_bad = Some(format!("{name}: relative error {rel:.2e} > {tolerance:.0e}"));
        }
    }
    if let Some(bad) = first_bad {
        panic!("first checkpoint out of tolerance: {bad}");
    }
    // The last token's prediction agrees too.
    let (_, _, logits) = got.last().expect("logits checkpoint");
    let (_, reference) = read_npy(&Path::new(dir).join("logits.npy"))?;
    let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i);
    let last = input.ids.len() - 1;
    assert_eq!(argmax(&logits[last * vocab..]), argmax(&reference[last * vocab..]));
    Ok(())
}
