//! `weft dequantize IN OUT`: every tensor of a model file decoded to f32 under its original
//! name, in a safetensors file that keeps the input's model config and tokenizer metadata.

use std::io::Write;

use anyhow::Context;
use weft::loader::native::NativeSource;
use weft::loader::read_header;
use weft::model::convert::dequantize_model;

pub fn run(input: &str, output: &str) -> anyhow::Result<()> {
    let reader = NativeSource::open(input)?;
    let header = pollster::block_on(read_header(&reader))?.header;
    let bar = crate::quantize::progress_bar("decoding");
    let writer = pollster::block_on(dequantize_model(&reader, &header, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }))?;
    bar.finish_and_clear();
    let mut file = std::io::BufWriter::new(std::fs::File::create(output).with_context(|| output.to_string())?);
    writer.write(&mut file)?;
    file.flush()?;
    println!("{output}: {:.2} MB of f32 tensors", writer.data_len() as f64 / 1e6);
    Ok(())
}
