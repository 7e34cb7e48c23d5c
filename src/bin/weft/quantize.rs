//! `weft quantize IN OUT --bits B`: a GGUF file or Hugging Face folder (path or http(s) URL) to
//! a self-contained weft safetensors file, with a report per tensor. `--budget-mb N` picks each
//! matrix's bit width to fit N MB (see weft::model::budget) and prints the plan first;
//! `--calibration FILE` (from `weft calibrate`) weighs each column's rounding error by its
//! input's mean square, and with `--gptq` rounds by GPTQ on the calibration's Hessians.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use weft::format::ModelHeader;
use weft::loader::native::NativeSource;
use weft::loader::{read_header, RangeReader};
use weft::model::budget::plan_budget;
use weft::model::convert::{budget_choices, keep_rules, quantize_model, KeepRule, QuantizePlan};
use weft::model::LlamaConfig;
use weft::quant::calibration::Calibration;
use weft::quant::weft::{Scheme, WeftQuant};
use weft::tokenizer::Tokenizer;

pub struct Args {
    pub input: String,
    pub output: String,
    pub bits: u32,
    pub group: u32,
    pub scheme: String,
    pub keep: Vec<String>,
    pub no_default_keep: bool,
    pub budget_mb: Option<f64>,
    pub calibration: Option<String>,
    pub compensate: bool,
    pub gptq: bool,
    pub entropy: bool,
}

pub fn progress_bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    let style = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} tensors {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("#>.");
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// Runs `f` with a progress callback drawing a bar labelled `what`.
fn with_bar<T>(what: &str, f: impl FnOnce(&mut dyn FnMut(usize, usize)) -> T) -> T {
    let bar = progress_bar(what);
    let out = f(&mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    out
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let scheme = match a.scheme.as_str() {
        "sym" => Scheme::Sym,
        "asym" => Scheme::Asym,
        "k" => Scheme::K,
        other => anyhow::bail!("--scheme {other}: use sym, asym or k"),
    };
    let rules = keep_rules(&a.keep, a.no_default_keep, a.budget_mb.is_some());
    let mut plan = QuantizePlan::new(
        WeftQuant::new(a.bits, a.group, scheme)?,
        rules.iter().map(|k| KeepRule::parse(k)).collect::<Result<_, _>>()?,
    );
    if let Some(path) = &a.calibration {
        let cal = Calibration::from_bytes(&std::fs::read(path).with_context(|| path.clone())?).with_context(|| path.clone())?;
        eprintln!("calibration: {} matrices from {} tokens of {}", cal.matrices.len(), cal.tokens, cal.text);
        if a.gptq && cal.matrices.values().all(|s| s.hessian.is_none()) {
            anyhow::bail!("--gptq: {path} has no Hessians; make it with `weft calibrate --hessian`");
        }
        if a.gptq && a.compensate {
            anyhow::bail!("--gptq and --compensate are two ways to compensate rounding: give one");
        }
        plan.calibration = Some(cal);
        plan.compensate = a.compensate;
        plan.gptq = a.gptq;
    } else if a.compensate || a.gptq {
        anyhow::bail!("--compensate and --gptq need --calibration");
    }
    plan.entropy = a.entropy;
    if !plan.keep.is_empty() {
        let list: Vec<String> = plan.keep.iter().map(|r| format!("{}={}", r.pattern, r.bits)).collect();
        eprintln!("keep rules: {}", list.join(" "));
    }
    let started = Instant::now();
    let (writer, reports) = if let Some(source) = crate::backend::folder(&a.input) {
        // config.json, the tokenizer files (the chat template, BOS/EOS and the stop tokens travel
        // with the model) and model.safetensors or the shards of its index.
        let folder = pollster::block_on(weft::model::folder::read_folder(&source)).with_context(|| crate::backend::loading(&a.input))?;
        let (reader, mut header, tokenizer) = (folder.reader, folder.header, folder.tokenizer);
        let mut config = LlamaConfig::from_hf_json(&folder.config_json)?;
        pollster::block_on(weft::model::load::prepare_header(&reader, &mut header, &mut config))?;
        apply_budget(&reader, &header, &mut plan, a.budget_mb)?;
        with_bar("quantizing", |p| pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, p)))?
    } else {
        let reader = NativeSource::open(&a.input).with_context(|| crate::backend::loading(&a.input))?;
        let mut header = pollster::block_on(read_header(&reader)).with_context(|| crate::backend::loading(&a.input))?.header;
        let ModelHeader::Gguf(g) = &header else {
            anyhow::bail!(
                "{}: give a GGUF file or a folder with config.json, tokenizer.json and model.safetensors \
                 (a directory, or an http(s) URL ending in /)",
                a.input
            );
        };
        let mut config = LlamaConfig::from_gguf(&g.metadata, weft::model::load::has_qkv_bias(&header))?;
        let tokenizer = Tokenizer::from_gguf(&g.metadata)?;
        pollster::block_on(weft::model::load::prepare_header(&reader, &mut header, &mut config))?;
        apply_budget(&reader, &header, &mut plan, a.budget_mb)?;
        with_bar("quantizing", |p| pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, p)))?
    };
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

/// With a budget, measures every matrix at every bit width, plans, prints the plan and adds
/// one keep rule per planned tensor (full names, so no rule matches another tensor).
fn apply_budget<R: RangeReader>(reader: &R, header: &ModelHeader, plan: &mut QuantizePlan, budget_mb: Option<f64>) -> anyhow::Result<()> {
    let Some(mb) = budget_mb else { return Ok(()) };
    if mb.is_nan() || mb <= 0.0 {
        anyhow::bail!("--budget-mb {mb}: give a positive size");
    }
    let (choices, fixed) = with_bar("measuring", |p| pollster::block_on(budget_choices(reader, header, plan, p)))?;
    // The file's header (names, shapes, metadata with the tokenizer) is outside the plan.
    let budget = (mb * 1e6) as u64;
    let assigned = plan_budget(&choices, fixed, budget)?;
    println!("budget plan:");
    println!("{:<34} {:>12} {:>12} {:>14}", "tensor", "format", "bytes", "predicted KLD");
    for a in &assigned {
        println!("{:<34} {:>12} {:>12} {:>14.3e}", a.name, a.format.name(), a.bytes, a.error);
    }
    let mut counts = std::collections::BTreeMap::new();
    for a in &assigned {
        *counts.entry(a.format.name()).or_insert(0usize) += 1;
    }
    let bytes: u64 = assigned.iter().map(|a| a.bytes).sum::<u64>() + fixed;
    println!(
        "plan: {counts:?} tensors by format; {:.2} MB of tensor data (budget {mb} MB, {:.2} MB fixed); predicted KLD {:.4}",
        bytes as f64 / 1e6,
        fixed as f64 / 1e6,
        assigned.iter().map(|a| a.error).sum::<f64>()
    );
    let mut keep: Vec<KeepRule> = assigned.into_iter().map(|a| KeepRule::format(&a.name, a.format)).collect();
    keep.append(&mut plan.keep);
    plan.keep = keep;
    Ok(())
}
