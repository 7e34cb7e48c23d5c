//! `weft perplexity MODEL --text FILE`: perplexity of a text under the model; with
//! `--save-logits FILE` it keeps the log-probabilities of every scored position, and with
//! `--kld FILE` it compares them with a base model's saved ones (mean KL divergence, top-1
//! agreement), like llama.cpp's `--kl-divergence`.

use std::io::{BufReader, BufWriter, Write};
use std::time::Instant;

use anyhow::Context;
use weft::model::eval::{self, kld};

pub struct Args {
    pub model: String,
    pub text: String,
    pub ctx: Option<usize>,
    pub save_logits: Option<String>,
    pub logits_dtype: String,
    pub kld: Option<String>,
    pub json: bool,
    pub decode_path: bool,
    pub int8_activations: bool,
    pub kv: weft::model::KvFormat,
    pub backend: crate::backend::Backend,
    pub cpu: crate::backend::CpuFlags,
    pub load: crate::backend::LoadFlags,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let dtype = match a.logits_dtype.as_str() {
        "f32" => kld::LogitsDtype::F32,
        "f16" => kld::LogitsDtype::F16,
        other => anyhow::bail!("--logits-dtype {other}: use f32 or f16"),
    };
    let text = std::fs::read_to_string(&a.text).with_context(|| a.text.clone())?;
    let ids = crate::backend::open_tokenizer(&a.model)?.encode(&text, false);
    // One window over the whole text unless asked otherwise; the cache is sized to fit it.
    let window = a.ctx.unwrap_or(ids.len()).max(2);
    // --decode-path: one token a pass, which the GPU lowers like the decode step (norms and
    // activations folded into the GEMVs), so the step's kernels are what is scored.
    let max_batch = if a.decode_path { 1 } else { weft::model::EngineOptions::default().max_batch };
    let engine = weft::model::EngineOptions {
        max_seq: window,
        max_batch,
        int8_activations: a.int8_activations,
        kv: a.kv,
        ..Default::default()
    };
    let (mut llama, _) = crate::backend::Engine::open(a.backend, &a.cpu, a.load.weights(), &a.model, engine)?;
    let window = window.min(llama.window().0);
    let vocab = llama.config().vocab;
    let rows = ids.len() - ids.len().div_ceil(window);

    let mut save = match &a.save_logits {
        Some(path) => {
            let mut out = BufWriter::new(std::fs::File::create(path).with_context(|| path.clone())?);
            kld::LogitsHeader { dtype, vocab, window, ids: ids.clone(), rows }.write(&mut out)?;
            Some(out)
        }
        None => None,
    };
    let mut base = match &a.kld {
        Some(path) => {
            let mut input = BufReader::new(std::fs::File::open(path).with_context(|| path.clone())?);
            let header = kld::LogitsHeader::read(&mut input)?;
            header.check(&ids, window, vocab).with_context(|| path.clone())?;
            Some((input, header, Vec::new(), kld::KldAccumulator::default()))
        }
        None => None,
    };

    let started = Instant::now();
    let (mut nll, mut scored) = (0f64, 0usize);
    let windows = score_windows(&mut llama, &ids, window, &mut |next, logits| {
        let log_probs = eval::log_softmax(logits);
        nll -= log_probs[next as usize];
        scored += 1;
        if let Some(out) = save.as_mut() {
            kld::write_row(out, dtype, &log_probs)?;
        }
        if let Some((input, header, row, acc)) = base.as_mut() {
            kld::read_row(input, header, row)?;
            acc.add(row, &log_probs, next);
        }
        Ok(())
    })?;
    if let Some(mut out) = save {
        out.flush()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{} tokens in {windows} window(s) of {window}, {seconds:.1} s ({:.1} tok/s)",
        ids.len(),
        ids.len() as f64 / seconds
    );
    let perplexity = (nll / scored as f64).exp();
    let stats = base.map(|(_, _, _, acc)| acc.finish()).transpose()?;
    if a.json {
        let value = serde_json::json!({
            "model": a.model, "text": a.text, "tokens": ids.len(), "scored": scored, "windows": windows,
            "window": window, "perplexity": perplexity, "kld": stats,
        });
        println!("{value}");
        return Ok(());
    }
    println!("perplexity: {perplexity:.4}");
    println!("tokens: {} (scored {scored})", ids.len());
    if let Some(s) = stats {
        println!("base perplexity: {:.4}", s.base_perplexity);
        println!("ln(ppl / base ppl): {:.5}", (perplexity / s.base_perplexity).ln());
        println!("mean KLD: {:.6}", s.mean_kld);
        println!("median KLD: {:.6}", s.median_kld);
        println!("99th percentile KLD: {:.6}", s.p99_kld);
        println!("max KLD: {:.6}", s.max_kld);
        println!("top-1 agreement: {:.3}%", 100.0 * s.top1_agreement);
    }
    Ok(())
}

/// `eval::score_windows` over either backend: every token of each window of `ids` but the
/// first scored from a fresh cache.
fn score_windows(
    llama: &mut crate::backend::Engine,
    ids: &[u32],
    window: usize,
    score: &mut dyn FnMut(u32, &[f32]) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    anyhow::ensure!(ids.len() >= 2, "perplexity needs at least two tokens");
    let vocab = llama.config().vocab;
    let mut windows = 0;
    for chunk in ids.chunks(window).filter(|c| c.len() >= 2) {
        llama.reset();
        let logits = llama.logits(chunk)?;
        for (i, &next) in chunk.iter().enumerate().skip(1) {
            score(next, &logits[(i - 1) * vocab..i * vocab])?;
        }
        windows += 1;
    }
    Ok(windows)
}
