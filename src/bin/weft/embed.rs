//! `weft embed MODEL --text …`: sentence embeddings of a BERT-family model folder as JSON; and
//! `weft bench-embed MODEL`: sentences per second, tokenization included.

use std::time::Instant;

use anyhow::Context;
use weft::model::convert::KeepRule;
use weft::model::bert::{open_native, EmbedOptions, Encoder, EncoderOptions, Pooling};
use weft::quant::weft::WeftQuant;

#[derive(clap::Args)]
pub struct ModelArgs {
    /// A model folder (path or http(s) URL): config.json, tokenizer.json or vocab.txt,
    /// model.safetensors.
    model: String,
    /// Quantize the block matrices at load: q8, q4 or a weft format such as q4_g32_asym.
    #[arg(long)]
    quantize: Option<String>,
    /// With --quantize: PATTERN=BITS or PATTERN=FORMAT for matrices whose name contains
    /// PATTERN (e.g. output.dense=8), repeatable.
    #[arg(long)]
    keep: Vec<String>,
    /// Every block matrix in the --quantize format: without the encoder's default rules, which
    /// keep the value and up projections at q8 under a format below 8 bits.
    #[arg(long)]
    no_default_keep: bool,
    /// Threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// cpu, or gpu (the native adapter WEFT_BACKEND picks).
    #[arg(long, default_value = "cpu")]
    backend: String,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// A text to embed (repeat for several).
    #[arg(long, required = true)]
    text: Vec<String>,
    /// mean or cls.
    #[arg(long, default_value = "mean")]
    pooling: String,
    /// Leave the pooled vectors unnormalised.
    #[arg(long)]
    no_normalize: bool,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// One sentence per line.
    #[arg(long, default_value = "bench/embed_sentences.txt")]
    sentences: String,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    #[arg(long, default_value_t = 3)]
    reps: usize,
    #[arg(long)]
    json: bool,
    /// After the timed runs, one more run with every phase timed (CPU backend), printed to
    /// stderr: seconds, share of the run, and GFLOP/s of the matrix products.
    #[arg(long)]
    profile: bool,
}

/// `q8` and `q4` name the formats the LLM loader uses for them.
pub fn parse_quant(name: &str) -> anyhow::Result<WeftQuant> {
    let full = match name {
        "q8" => "q8_g32_sym",
        "q4" => "q4_g32_asym",
        other => other,
    };
    Ok(WeftQuant::parse(full)?)
}

fn open(m: &ModelArgs) -> anyhow::Result<Encoder> {
    let quantize = m.quantize.as_deref().map(parse_quant).transpose()?;
    let keep = m.keep.iter().map(|k| KeepRule::parse(k)).collect::<Result<Vec<_>, _>>()?;
    let options = EncoderOptions { quantize, keep, default_keep: !m.no_default_keep, threads: m.threads, ..Default::default() };
    let mut enc = open_native(&m.model, options).with_context(|| format!("opening {}", m.model))?;
    match m.backend.as_str() {
        "cpu" => {}
        "gpu" => {
            let ctx = pollster::block_on(weft::gpu::GpuContext::new(weft::gpu::BackendChoice::from_env()?))?;
            enc.upload(std::rc::Rc::new(ctx))?;
        }
        other => anyhow::bail!("unknown backend '{other}': cpu or gpu"),
    }
    Ok(enc)
}

pub fn run(a: &Args) -> anyhow::Result<()> {
    let enc = open(&a.model)?;
    let pooling = match a.pooling.as_str() {
        "mean" => Pooling::Mean,
        "cls" => Pooling::Cls,
        other => anyhow::bail!("unknown pooling '{other}': mean or cls"),
    };
    let texts: Vec<&str> = a.text.iter().map(String::as_str).collect();
    let opts = EmbedOptions { pooling, normalize: !a.no_normalize, batch_size: a.batch_size };
    let vectors = enc.embed(&texts, opts, &mut |_, _| {})?;
    let out: Vec<serde_json::Value> = texts
        .iter()
        .zip(&vectors)
        .map(|(t, v)| serde_json::json!({ "text": t, "tokens": enc.tokenize(t).len(), "embedding": v }))
        .collect();
    println!("{}", serde_json::json!({ "model": a.model.model, "dim": enc.dim(), "embeddings": out }));
    Ok(())
}

pub fn bench(a: &BenchArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.sentences).with_context(|| a.sentences.clone())?;
    let sentences: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let mut enc = open(&a.model)?;
    let tokens: usize = sentences.iter().map(|s| enc.tokenize(s).len()).sum();
    let opts = EmbedOptions { batch_size: a.batch_size, ..Default::default() };
    enc.embed(&sentences[..a.batch_size.min(sentences.len())], opts, &mut |_, _| {})?;
    let mut best = f64::INFINITY;
    for _ in 0..a.reps.max(1) {
        let start = Instant::now();
        enc.embed(&sentences, opts, &mut |_, _| {})?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    if a.profile {
        print_profile(&mut enc, &sentences, opts)?;
    }
    let rate = sentences.len() as f64 / best;
    let threads = match a.model.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "sentences": sentences.len(), "tokens": tokens, "batch_size": a.batch_size, "backend": enc.backend(),
                "quantize": a.model.quantize, "threads": threads, "seconds": best, "sentences_per_s": rate })
        );
    } else {
        println!(
            "{} sentences ({:.1} tokens each), batch {}, {}, {} threads, weights {}: {:.3} s, {:.1} sentences/s",
            sentences.len(),
            tokens as f64 / sentences.len() as f64,
            a.batch_size,
            enc.backend(),
            threads,
            a.model.quantize.as_deref().unwrap_or("f32"),
            best,
            rate
        );
    }
    Ok(())
}

fn print_profile(enc: &mut Encoder, sentences: &[&str], opts: EmbedOptions) -> anyhow::Result<()> {
    enc.start_profile();
    let start = Instant::now();
    enc.embed(sentences, opts, &mut |_, _| {})?;
    let total = start.elapsed().as_secs_f64();
    let mut phases = enc.profile().map(|p| p.phases).unwrap_or_default();
    anyhow::ensure!(!phases.is_empty(), "no phases timed: --profile times the CPU backend");
    phases.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    eprintln!("profile of one run: {total:.3} s");
    for p in &phases {
        let rate = if p.flops > 0.0 { format!(", {:.1} GFLOP/s", p.flops / p.seconds / 1e9) } else { String::new() };
        eprintln!("  {:<22} {:>8.1} ms {:>5.1} % ({} calls{rate})", p.name, p.seconds * 1e3, 100.0 * p.seconds / total, p.calls);
    }
    let timed: f64 = phases.iter().map(|p| p.seconds).sum();
    eprintln!("  {:<22} {:>8.1} ms {:>5.1} %", "other", (total - timed) * 1e3, 100.0 * (total - timed) / total);
    Ok(())
}
