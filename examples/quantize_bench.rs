//! Quantize-at-load throughput: the CPU reference quantizer (`quant::weft::quantize`, on every
//! core natively) against the GPU kernel (`ops::quantize`, upload included, timed until the
//! GPU is done), per format and shape, on seeded weights; and whether their bytes agree.
//!
//! cargo run --release --example quantize_bench -- [--formats q4_g32_asym,q8_g32_asym]
//!     [--shapes 576x576,1536x576] [--dtype F32|F16|BF16]

use std::time::Instant;

use anyhow::anyhow;
use weft::format::{SafeDtype, StorageType};
use weft::gpu::{BackendChoice, GpuContext};
use weft::ops::quantize::{read_back, Quantizer};
use weft::quant::decode_to_f32;
use weft::quant::weft::{quantize, WeftQuant};
use weft::selftest::random_f32;

#[path = "common/args.rs"]
mod args;
use args::arg;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let formats = arg(&args, "--formats", "q4_g32_asym,q8_g32_asym");
    let shapes = arg(&args, "--shapes", "576x576,1536x576");
    let dtype = match arg(&args, "--dtype", "F32").as_str() {
        "F32" => SafeDtype::F32,
        "F16" => SafeDtype::F16,
        "BF16" => SafeDtype::BF16,
        other => return Err(anyhow!("--dtype {other}: F32, F16 or BF16")),
    };
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    println!("adapter: {}", ctx.capabilities().adapter_name);
    let quantizer = pollster::block_on(Quantizer::new(&ctx))?;
    println!("{:<14} {:>11} {:>10} {:>10} {:>8}  bytes", "format", "shape", "cpu ms", "gpu ms", "gpu/cpu");
    for name in formats.split(',') {
        let quant = WeftQuant::parse(name)?;
        for shape in shapes.split(',') {
            let (rows, cols) = shape.split_once('x').ok_or_else(|| anyhow!("shape {shape}: NxK"))?;
            let (rows, cols): (usize, usize) = (rows.parse()?, cols.parse()?);
            let x = random_f32(7, rows * cols);
            let bytes: Vec<u8> = match dtype {
                SafeDtype::F32 => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
                SafeDtype::F16 => x.iter().flat_map(|&v| half::f16::from_f32(v).to_bits().to_le_bytes()).collect(),
                _ => x.iter().flat_map(|&v| half::bf16::from_f32(v).to_bits().to_le_bytes()).collect(),
            };
            let storage = StorageType::Safe(dtype);
            let t = Instant::now();
            let want = quantize(quant, &decode_to_f32(storage, &bytes, rows * cols)?, rows, cols)?;
            let cpu = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let w = quantizer.quantize(&ctx, "w", quant, storage, &bytes, rows, cols)?;
            pollster::block_on(quantizer.check(&ctx))?;
            let gpu = t.elapsed().as_secs_f64() * 1e3;
            let got = pollster::block_on(read_back(&ctx, &w))?;
            let same = if got == want { "equal" } else { "DIFFER" };
            println!("{:<14} {:>11} {cpu:>10.1} {gpu:>10.1} {:>8.2}  {same}", name, shape, gpu / cpu);
        }
    }
    Ok(())
}
