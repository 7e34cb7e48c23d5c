//! The sampler (greedy, or temperature with top-k / top-p, as a decode step ends) per logit
//! shape and setting: many dispatches recorded into one compute pass, timed by GPU timestamps
//! around the pass where the adapter has them (else the wall clock), reported as µs per call,
//! with the route the kernel takes for those logits.
//!
//! cargo run --release --example sample_bench -- [--logits FILE.npy] [--vocab 49152]
//!     [--settings greedy,0.3/0/0.9,1/0/1,1/40/1,0.7/40/0.95] [--reps 200]
//!
//! A setting is temperature/top_k/top_p (or `greedy`). The logits are rows of a [rows, vocab]
//! f32 .npy file (a model's logits: `weft dump-activations` writes logits.npy), else seeded
//! random ones: flat (uniform in [-6, 6]) and peaked (in [-40, 40]).

use std::time::Instant;

use anyhow::Context;
use weft::gpu::{BackendChoice, DType, GpuContext};
use weft::ops::rope::step_bytes;
use weft::ops::sample::{params_bytes, sample, sample_route, SampleParams};
use weft::selftest::random_f32;

#[path = "common/args.rs"]
mod args;
use args::arg;

const MAX_SEQ: usize = 256;

fn setting(s: &str) -> anyhow::Result<SampleParams> {
    if s == "greedy" {
        return Ok(SampleParams::default());
    }
    let v: Vec<&str> = s.split('/').collect();
    let [t, k, p] = v[..] else { anyhow::bail!("a setting is temperature/top_k/top_p or greedy: {s}") };
    Ok(SampleParams { temperature: t.parse()?, top_k: k.parse()?, top_p: p.parse()?, ..Default::default() })
}

/// Rows of an f32 .npy file of two dimensions.
fn npy_rows(path: &str) -> anyhow::Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let (dims, all) = weft::format::npy::read_f32(&bytes).with_context(|| path.to_string())?;
    let [_, vocab] = dims[..] else { anyhow::bail!("{path}: want [rows, vocab], got {dims:?}") };
    Ok(all.chunks(vocab.max(1)).map(|r| r.to_vec()).collect())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let vocab: usize = arg(&args, "--vocab", "49152").parse()?;
    let settings: Vec<SampleParams> =
        arg(&args, "--settings", "greedy,0.3/0/0.9,1/0/1,1/40/1,0.7/40/0.95").split(',').map(setting).collect::<anyhow::Result<_>>()?;
    let reps: usize = arg(&args, "--reps", "200").parse()?;
    let file = arg(&args, "--logits", "");
    let mut sources: Vec<(String, Vec<f32>)> = Vec::new();
    if file.is_empty() {
        let flat = random_f32(7, vocab).iter().map(|v| v * 6.0).collect();
        let peaked = random_f32(8, vocab).iter().map(|v| v * 40.0).collect();
        sources.push(("flat".into(), flat));
        sources.push(("peaked".into(), peaked));
    } else {
        let rows = npy_rows(&file)?;
        // The first, middle and last rows: a prompt's positions differ in how sure they are.
        for r in [0, rows.len() / 2, rows.len() - 1] {
            sources.push((format!("row {r}"), rows[r].clone()));
        }
    }
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    println!("adapter {}", ctx.capabilities().adapter_name);
    println!("{:<10} {:>7} {:<20} {:<16} {:>10} {:>10}", "logits", "vocab", "setting", "route", "us/call", "wall us");
    for (name, logits) in &sources {
        for p in &settings {
            let (gpu, wall) = time(&ctx, logits, p, reps)?;
            let what = if p.temperature <= 0.0 { "greedy".to_string() } else { format!("t {} k {} p {}", p.temperature, p.top_k, p.top_p) };
            let route = format!("{:?}", sample_route(logits, p));
            println!("{name:<10} {:>7} {what:<20} {route:<16} {:>10.2} {wall:>10.2}", logits.len(), gpu.unwrap_or(f64::NAN));
        }
    }
    Ok(())
}

/// µs per call from GPU timestamps (None without them) and from the wall clock.
fn time(ctx: &GpuContext, logits: &[f32], p: &SampleParams, reps: usize) -> anyhow::Result<(Option<f64>, f64)> {
    let vocab = logits.len();
    let tl = ctx.upload_f32("logits", &[vocab], logits)?;
    let tokens = ctx.zeros("tokens", &[MAX_SEQ], DType::U32)?;
    let chosen = ctx.zeros("chosen", &[4], DType::U32)?;
    let params = ctx.uniform_block("sample params", 32);
    ctx.write_uniform(&params, &params_bytes(p, vocab, MAX_SEQ));
    let step = ctx.uniform_block("step", 16);
    ctx.write_uniform(&step, &step_bytes(100, 1));
    let d = pollster::block_on(sample(ctx, &tl, &tokens, &chosen, &params, &step))?;
    let calls: Vec<_> = std::iter::repeat_n(&d, reps).collect();
    let run = || -> anyhow::Result<f64> {
        let start = Instant::now();
        ctx.run(&calls);
        pollster::block_on(ctx.read_u32(&chosen)).context("waiting for the GPU")?;
        Ok(start.elapsed().as_secs_f64())
    };
    run()?; // warm-up: the pipeline, first touch of the buffers, the clocks
    let wall = run()? / reps as f64 * 1e6;
    let gpu = pollster::block_on(ctx.time_pass(&calls))?.map(|ns| ns * 1e-3 / reps as f64);
    Ok((gpu, wall))
}
