//! `weft quantize IN OUT --bits B`: a GGUF file or Hugging Face folder to a self-contained weft
//! safetensors file, with a report per tensor.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use weft::format::ModelHeader;
use weft::loader::native::{FileReader, NativeSource};
use weft::loader::read_header;
use weft::model::convert::{quantize_model, KeepRule, QuantizePlan};
use weft::model::LlamaConfig;
use weft::quant::weft::{Scheme, WeftQuant};
use weft::tokenizer::Tokenizer;

pub struct Args {
    pub input: String,
    pub output: String,
    pub bits: u32,
    pub group: u32,
    pub scheme: String,
    pub keep: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let scheme = match a.scheme.as_str() {
        "sym" => Scheme::Sym,
        "asym" => Scheme::Asym,
        other => anyhow::bail!("--scheme {other}: use sym or asym"),
    };
    let plan = QuantizePlan {
        default: WeftQuant::new(a.bits, a.group, scheme)?,
        keep: a.keep.iter().map(|k| KeepRule::parse(k)).collect::<Result<_, _>>()?,
    };
    let started = Instant::now();
    let dir = Path::new(&a.input);
    let (writer, reports) = if dir.is_dir() {
        let config_json = std::fs::read_to_string(dir.join("config.json")).context("config.json")?;
        let tokenizer_json = std::fs::read_to_string(dir.join("tokenizer.json")).context("tokenizer.json")?;
        let reader = FileReader::open(dir.join("model.safetensors"))?;
        let header = pollster::block_on(read_header(&reader))?.header;
        let config = LlamaConfig::from_hf_json(&config_json)?;
        let tokenizer = Tokenizer::from_hf_json(&tokenizer_json, None)?;
        pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, &mut report_progress))?
    } else {
        let reader = NativeSource::open(&a.input)?;
        let header = pollster::block_on(read_header(&reader))?.header;
        let ModelHeader::Gguf(g) = &header else {
            anyhow::bail!("{}: give a GGUF file or a folder with config.json, tokenizer.json and model.safetensors", a.input);
        };
        let config = LlamaConfig::from_gguf(&g.metadata, weft::model::load::has_qkv_bias(&header))?;
        let tokenizer = Tokenizer::from_gguf(&g.metadata)?;
        pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, &mut report_progress))?
    };
    eprintln!();
    let mut file = std::io::BufWriter::new(std::fs::File::create(&a.output).with_context(|| a.output.clone())?);
    writer.write(&mut file)?;
    file.flush()?;
    println!("{:<34} {:<14} {:>12} {:>11} {:>10}", "tensor", "format", "bytes", "bits/weight", "rms error");
    for r in &reports {
        println!("{:<34} {:<14} {:>12} {:>11.3} {:>10.3e}", r.name, r.format, r.bytes, r.bits_per_weight, r.rms_error);
    }
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let elements: u64 = reports.iter().map(|r| r.elements).sum();
    let file_len = std::fs::metadata(&a.output)?.len();
    println!(
        "total: {} tensors, {} weights, {:.2} MB of tensor data, {:.3} bits/weight; file {:.2} MB; {:.1} s",
        reports.len(),
        elements,
        bytes as f64 / 1e6,
        bytes as f64 * 8.0 / elements.max(1) as f64,
        file_len as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn report_progress(done: usize, total: usize) {
    let width = 30;
    let filled = width * done / total.max(1);
    eprint!("\r[{}{}] {done}/{total} tensors", "#".repeat(filled), ".".repeat(width - filled));
}
