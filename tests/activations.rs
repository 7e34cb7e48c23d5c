//! Every checkpoint of the SmolLM2 forward pass against PyTorch transformers (same GGUF, f32),
//! for the fixed 16-token input in tests/fixtures/activations (scripts/dump_activations.py).

#[path = "common/activations.rs"]
mod fixtures;

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::NativeSource;
use weft::model::{self, EngineOptions, WeightOptions};

use fixtures::{check, input, tolerance, MODEL};

#[test]
fn every_checkpoint_matches_transformers() -> anyhow::Result<()> {
    let input = input()?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let reader = NativeSource::open(MODEL)?;
    let engine = EngineOptions { max_seq: 64, max_batch: 16, ..Default::default() };
    let (mut llama, _) = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?;
    let got = pollster::block_on(llama.checkpoints(&ctx, &input.ids))?;
    let precision = llama.options.prompt_precision(ctx.capabilities());
    check(&input, &got, llama.config.vocab, tolerance(precision))
}
