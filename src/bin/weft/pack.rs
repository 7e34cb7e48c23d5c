//! `weft pack IN OUT`: a weft file with every `k` matrix entropy-coded (docs/FORMAT.md), the rest
//! copied; the weights decode to the same bits. For files quantized without `--entropy`, or
//! tuned afterwards by `scripts/quality/tune.py`, which writes packed levels.

use std::io::Write;

use anyhow::Context;
use weft::loader::native::NativeSource;
use weft::loader::read_header;
use weft::model::convert::entropy_code_model;

pub fn run(input: &str, output: &str) -> anyhow::Result<()> {
    let reader = NativeSource::open(input).with_context(|| input.to_string())?;
    let header = pollster::block_on(read_header(&reader))?.header;
    let writer = pollster::block_on(entropy_code_model(&reader, &header))?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(output).with_context(|| output.to_string())?);
    writer.write(&mut file)?;
    file.flush()?;
    let (before, after) = (std::fs::metadata(input)?.len(), std::fs::metadata(output)?.len());
    println!("{output}: {:.2} MB (was {:.2} MB)", after as f64 / 1e6, before as f64 / 1e6);
    Ok(())
}
