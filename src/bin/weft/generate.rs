//! `weft generate MODEL --prompt TEXT`: streams generated text (or token ids) to stdout.

use std::io::Write;
use std::time::Instant;

use weft::model::{EngineOptions, KvFormat};
use weft::ops::sample::SampleParams;
use weft::tokenizer::TextStream;

pub struct Args {
    pub model: String,
    pub prompt: String,
    pub max_tokens: usize,
    pub sampling: SampleParams,
    pub chat: bool,
    pub verbose: bool,
    pub ids: bool,
    pub max_seq: usize,
    pub kv: KvFormat,
    pub sinks: usize,
    pub int8_activations: bool,
    pub backend: crate::backend::Backend,
    pub cpu: crate::backend::CpuFlags,
    pub load: crate::backend::LoadFlags,
}


pub fn run(a: Args) -> anyhow::Result<()> {
    let engine =
        EngineOptions { max_seq: a.max_seq, kv: a.kv, sinks: a.sinks, int8_activations: a.int8_activations, ..Default::default() };
    let (mut llama, tok) = crate::backend::Engine::open(a.backend, &a.cpu, a.load.weights(), &a.model, engine)?;
    if let (true, crate::backend::Engine::Gpu(_, l)) = (a.verbose, &llama) {
        let t = l.load_times;
        let phases: Vec<(&str, f64)> = t.phases().iter().map(|&(name, ms)| (name, ms / 1e3)).collect();
        eprintln!("load by phase: {}", crate::backend::phase_line(&phases, t.total_ms() / 1e3));
    }
    let prompt = if a.chat {
        // The prompt is message content: encoded as text, so it cannot forge template tokens.
        let user = weft::tokenizer::chat::Message { role: "user".into(), content: a.prompt.clone() };
        tok.encode_chat(&[user])?
    } else {
        tok.encode(&a.prompt, true)
    };
    llama.set_sampling(&a.sampling);
    let out = std::io::stdout();
    let mut out = out.lock();
    let mut stream = TextStream::default();
    let started = Instant::now();
    let mut next = llama.prefill(&prompt)?;
    let first = started.elapsed();
    let mut produced = Vec::new();
    loop {
        produced.push(next);
        if a.ids {
            write!(out, "{}{next}", if produced.len() > 1 { "," } else { "" })?;
        } else {
            write!(out, "{}", stream.push(&tok, next)?)?;
        }
        out.flush()?;
        if produced.len() >= a.max_tokens || tok.is_stop(next) {
            break;
        }
        let (max_seq, sinks) = llama.window();
        if llama.position() == max_seq {
            eprintln!(
                "\n[context reached {max_seq} tokens: attention keeps the first {sinks} and slides over the last {} from here]",
                max_seq - sinks
            );
        }
        next = llama.step()?;
    }
    if !a.ids {
        write!(out, "{}", stream.finish())?;
    }
    writeln!(out)?;
    let total = started.elapsed();
    let decode = total - first;
    eprintln!(
        "prompt {} tokens in {:.0} ms ({:.1} tok/s); {} new tokens, decode {:.1} tok/s",
        prompt.len(),
        first.as_secs_f64() * 1e3,
        prompt.len() as f64 / first.as_secs_f64(),
        produced.len(),
        (produced.len().saturating_sub(1)) as f64 / decode.as_secs_f64().max(1e-9)
    );
    Ok(())
}
