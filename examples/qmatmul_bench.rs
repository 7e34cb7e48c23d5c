//! GEMV and GEMM throughput per weight format and shape: many dispatches recorded into one
//! submission, timed by wall clock after a warm-up, reported as GB/s of weight bytes read and
//! GFLOP/s.
//!
//! cargo run --example qmatmul_bench -- [--formats Q4_K,q4_g32_sym] [--shapes 4096x4096]
//!     [--wg 64] [--rows 2] [--tokens 1] [--tt 4] [--precision f32|f16] [--seconds 0.5]
//!
//! Shapes are NxK (output features x reduced dimension). --tokens 1 (the default) times the
//! GEMV, more the GEMM over that many tokens. --wg and --rows override the format's default
//! `GemvConfig` or `GemmConfig`, --tt the GEMM's tokens per invocation (one left out keeps the
//! default). The GPU work dominates the wall time,
//! so a debug build measures the same kernels as a release one.

use std::time::Instant;

use anyhow::{anyhow, Context};
use weft::gpu::{BackendChoice, DType, GpuContext};
use weft::ops::qmatmul::{self, GemmConfig, GemvConfig, Precision, WeightFormat};

const DEFAULT_FORMATS: &str =
    "F32,F16,Q4_0,Q4_1,Q8_0,Q4_K,Q5_K,Q6_K,q4_g32_sym,q4_g128_asym,q8_g32_sym,q3_g64_sym,q2_g64_asym";
const DEFAULT_SHAPES: &str = "4096x4096,8192x8192,1536x576,576x1536,49152x576";

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let formats = arg(&args, "--formats", DEFAULT_FORMATS);
    let shapes = arg(&args, "--shapes", DEFAULT_SHAPES);
    let opt = |name: &str| -> anyhow::Result<Option<u32>> {
        Ok(match arg(&args, name, "").as_str() { "" => None, v => Some(v.parse()?) })
    };
    let (wg, rows, tt, lanes) = (opt("--wg")?, opt("--rows")?, opt("--tt")?, opt("--lanes")?);
    let tokens = opt("--tokens")?.unwrap_or(1).max(1) as usize;
    let precision = match arg(&args, "--precision", "f32").as_str() {
        "f32" => Precision::F32,
        "f16" => Precision::F16,
        other => return Err(anyhow!("precision '{other}' is not f32 or f16")),
    };
    let seconds: f64 = arg(&args, "--seconds", "0.5").parse()?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let caps = ctx.capabilities();
    println!("adapter: {} ({}), shader-f16 {}, {precision:?}", caps.adapter_name, caps.backend, caps.shader_f16);
    println!("{:<14} {:>12} {:>10} {:>10} {:>9} {:>9}  config", "format", "N x K", "MB", "us/call", "GB/s", "GFLOP/s");
    for shape in shapes.split(',') {
        let (n, k) = shape.split_once('x').ok_or_else(|| anyhow!("shape '{shape}' is not NxK"))?;
        let (n, k): (usize, usize) = (n.parse()?, k.parse()?);
        for name in formats.split(',') {
            let format = WeightFormat::parse(name).ok_or_else(|| anyhow!("unknown format '{name}'"))?;
            let config = if tokens == 1 {
                let d = GemvConfig::for_adapter(caps, &format);
                Config::Gemv(GemvConfig {
                    wg: wg.unwrap_or(d.wg),
                    rows: rows.unwrap_or(d.rows),
                    lanes: lanes.unwrap_or(d.lanes),
                })
            } else {
                let d = GemmConfig::for_format(&format);
                Config::Gemm(GemmConfig {
                    wg: wg.unwrap_or(d.wg),
                    rows: rows.unwrap_or(d.rows),
                    tokens: tt.unwrap_or(d.tokens),
                })
            };
            match bench(&ctx, format, n, k, tokens, config, precision, seconds) {
                Ok((bytes, secs)) => println!(
                    "{:<14} {:>12} {:>10.1} {:>10.1} {:>9.2} {:>9.2}  {config:?}",
                    name,
                    format!("{n}x{k}"),
                    bytes as f64 / 1e6,
                    secs * 1e6,
                    bytes as f64 / secs / 1e9,
                    2.0 * (n * k * tokens) as f64 / secs / 1e9,
                ),
                Err(e) => println!("{name:<14} {:>12} skipped: {e:#}", format!("{n}x{k}")),
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Config {
    Gemv(GemvConfig),
    Gemm(GemmConfig),
}

/// Returns the weight bytes read per call and seconds per call.
#[allow(clippy::too_many_arguments)]
fn bench(
    ctx: &GpuContext,
    format: WeightFormat,
    n: usize,
    k: usize,
    tokens: usize,
    config: Config,
    precision: Precision,
    seconds: f64,
) -> anyhow::Result<(u64, f64)> {
    let tw = qmatmul::test_weight(format, 1, n, k)?;
    let w = tw.upload(ctx, "bench weight")?;
    let x = ctx.upload_f32("bench x", &[tokens, k], &weft::selftest::random_f32(2, tokens * k))?;
    let y = ctx.zeros("bench y", &[tokens, n], DType::F32)?;
    let d = match config {
        Config::Gemv(c) => pollster::block_on(qmatmul::gemv_tuned(ctx, &w, &x, &y, precision, c))?,
        Config::Gemm(c) => pollster::block_on(qmatmul::gemm_tuned(ctx, &w, &x, &y, precision, c))?,
    };
    let time = |reps: usize| -> anyhow::Result<f64> {
        let list: Vec<_> = std::iter::repeat_n(&d, reps).collect();
        let start = Instant::now();
        ctx.run(&list);
        pollster::block_on(ctx.read_f32(&y)).context("waiting for the GPU")?;
        Ok(start.elapsed().as_secs_f64())
    };
    let once = time(1)?; // warm-up: pipeline, first-touch of the buffers
    let reps = ((seconds / once.max(1e-6)) as usize).clamp(3, 2000);
    let total = time(reps)?;
    Ok((w.bytes(), total / reps as f64))
}
