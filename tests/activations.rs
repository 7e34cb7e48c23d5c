//! Every checkpoint of the SmolLM2 forward pass against PyTorch transformers (same GGUF, f32),
//! for the fixed 16-token input in tests/fixtures/activations (scripts/dump_activations.py).

#[path = "common/activations.rs"]
mod fixtures;

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::NativeSource;
use weft::model::{self, EngineOptions, WeightOptions};

use fixtures::{check, input, F32_TOLERANCE, MODEL};

/// The f16 matmul variant rounds weights and activations to 11 significant bits (2^-11 ≈ 5e-4)
/// before each product.
const F16_TOLERANCE: f64 = 1e-2;

#[test]
fn every_checkpoint_matches_transformers() -> anyhow::Result<()> {
    let input = input()?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let reader = NativeSource::open(MODEL)?;
    let engine = EngineOptions { max_seq: 64, max_batch: 16, ..Default::default() };
    let (mut llama, _) = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?;
    let got = pollster::block_on(llama.checkpoints(&ctx, &input.ids))?;
    let tolerance = match llama.options.precision {
        weft::ops::qmatmul::Precision::F32 => F32_TOLERANCE,
        weft::ops::qmatmul::Precision::F16 => F16_TOLERANCE,
    };
    check(&input, &got, llama.config.vocab, tolerance)
}
