//! `weft calibrate MODEL --text FILE --out FILE`: runs the model on the CPU backend (the forward
//! graph every backend runs) over a calibration text in windows, and stores the mean square and
//! mean of every matrix's input columns (weft::quant::calibration) for `weft quantize
//! --calibration`; with `--hessian`, each input's second moments too (`weft quantize --gptq`).

use std::time::Instant;

use anyhow::Context;
use weft::cpu::{Arithmetic, CpuOptions};
use weft::loader::native::NativeSource;
use weft::quant::calibration::Accumulator;

#[derive(clap::Args)]
pub struct Args {
    /// A GGUF file or weft safetensors file.
    model: String,
    /// The calibration text (default text: data/calibration.txt).
    #[arg(long)]
    text: String,
    /// Where to write the statistics (safetensors).
    #[arg(long)]
    out: String,
    /// Tokens per window; each window starts from an empty cache.
    #[arg(long, default_value_t = 512)]
    ctx: usize,
    /// Threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Also store every input's second-moment matrix E[x xT] (for `weft quantize --gptq`;
    /// ~400 MB for SmolLM2-135M).
    #[arg(long)]
    hessian: bool,
}

pub fn run(a: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let text = std::fs::read_to_string(&a.text).with_context(|| a.text.clone())?;
    let reader = NativeSource::open(&a.model)?;
    let window = a.ctx.max(2);
    // f32 products: the statistics are of the model's own activations, not of an 8-bit rounding
    // of them.
    let options = CpuOptions { max_seq: window, threads: a.threads, arithmetic: Arithmetic::F32, ..Default::default() };
    let (mut llama, tokenizer) = pollster::block_on(weft::cpu::open(&reader, options)).with_context(|| a.model.clone())?;
    let ids = tokenizer.encode(&text, false);
    let mut acc = Accumulator::new(a.hessian);
    let bar = crate::quantize::progress_bar("calibrating");
    bar.set_length(ids.len().div_ceil(window) as u64);
    for chunk in ids.chunks(window) {
        llama.reset();
        for (name, shape, values) in llama.input_checkpoints(chunk)? {
            if let Some(&cols) = shape.last() {
                acc.add(&name, &values, cols);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let source = std::path::Path::new(&a.text).file_name().map_or(a.text.clone(), |n| n.to_string_lossy().into_owned());
    let cal = acc.finish(ids.len() as u64, &source);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&a.out).with_context(|| a.out.clone())?);
    cal.to_writer()?.write(&mut out)?;
    println!(
        "calibration: {} matrices, {} tokens in windows of {window}, {:.1} s -> {}",
        cal.matrices.len(),
        ids.len(),
        started.elapsed().as_secs_f64(),
        a.out
    );
    Ok(())
}
