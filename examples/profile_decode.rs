//! Where a decode step's time goes: each dispatch of the step run alone, summed per kernel.
//!
//!     cargo run --release --example profile_decode -- models/SmolLM2-135M-Instruct.Q4_1.gguf

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::NativeSource;
use weft::model::{self, EngineOptions, WeightOptions};

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "models/SmolLM2-135M-Instruct.Q4_1.gguf".into());
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let reader = NativeSource::open(&path)?;
    let engine = EngineOptions { max_seq: 256, ..Default::default() };
    let (mut llama, tok) = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?;
    pollster::block_on(llama.prefill(&ctx, &tok.encode("The capital of France is", true)))?;
    let rows = pollster::block_on(llama.profile_decode(&ctx, 3))?;
    let total: f64 = rows.iter().map(|r| r.1).sum();
    println!("{:<60} {:>10} {:>6} {:>7}", "kernel", "ms/step", "count", "share");
    for (name, ms, count) in rows {
        println!("{name:<60} {ms:>10.3} {count:>6} {:>6.1}%", 100.0 * ms / total);
    }
    println!("total {total:.1} ms per decode step (dispatches run one at a time)");
    Ok(())
}
