//! `--backend gpu|cpu`: one model handle over both engines for the commands that run models,
//! from a GGUF or weft file (path or URL) or a Hugging Face folder (a directory, or an http(s)
//! URL ending in `/`), float matrices kept as stored or quantized at load (`--quantize`). The
//! CPU path creates no GPU context, so it works on machines without an adapter.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use weft::cpu::{Arithmetic, CpuLlama, CpuOptions};
use weft::gpu::GpuContext;
use weft::loader::native::{is_http_url, NativeSource};
use weft::model::fit::{AutoPlan, QuantizeChoice};
use weft::model::folder::{Directory, FolderSource, HttpFolder};
use weft::model::graph::Checkpoint;
use weft::model::llama::Quantized;
use weft::model::{self, EngineOptions, Llama, LlamaConfig, QuantizeOn, WeightOptions};
use weft::ops::sample::SampleParams;
use weft::tokenizer::Tokenizer;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Gpu,
    Cpu,
}

/// The CPU engine's own flags.
#[derive(Clone, Debug, clap::Args)]
pub struct CpuFlags {
    /// CPU backend: threads per pass (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// CPU backend: q8 (8-bit activations, integer dot products) or f32.
    #[arg(long, default_value = "q8", value_parser = ["q8", "f32"])]
    pub cpu_arith: String,
}

impl CpuFlags {
    fn options(&self, gpu: &EngineOptions) -> CpuOptions {
        let arithmetic = if self.cpu_arith == "f32" { Arithmetic::F32 } else { Arithmetic::Q8 };
        CpuOptions { max_seq: gpu.max_seq, sinks: gpu.sinks, max_batch: gpu.max_batch, threads: self.threads, arithmetic, kv: gpu.kv }
    }
}

/// How a command picks each next token (greedy unless --temperature is above 0).
#[derive(Clone, Debug, clap::Args)]
pub struct SamplingFlags {
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Keep the k most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: u32,
    /// Keep the most likely tokens whose probability adds up to this (1: all).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Divides positive (multiplies negative) logits of recently seen tokens (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u32,
}

impl SamplingFlags {
    pub fn params(&self) -> SampleParams {
        SampleParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            repeat_penalty: self.repeat_penalty,
            seed: self.seed,
            ..Default::default()
        }
    }
}

/// How a command loads its model's float matrices.
#[derive(Clone, Debug, clap::Args)]
pub struct LoadFlags {
    /// Quantize float matrices (F32, F16, BF16) at load: q4, q8, q3, a weft format such as
    /// q4_g64_sym (under `weft quantize`'s default keep rules), none, or auto (a format per
    /// matrix planned for --memory-budget-mb, printed).
    #[arg(long, default_value = "none", value_parser = parse_quantize)]
    pub quantize: QuantizeChoice,
    /// Memory the model may take, in MB (10^6 bytes): weights, KV cache and activations,
    /// checked before any weight is read. With --quantize auto, what the plan spends.
    #[arg(long)]
    pub memory_budget_mb: Option<u64>,
    /// Where --quantize runs: auto (the GPU on hardware adapters, the CPU on software ones),
    /// gpu or cpu. With cpu, GGUF blocks (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) are
    /// also repacked on the CPU.
    #[arg(long, default_value = "auto", value_parser = ["auto", "gpu", "cpu"])]
    pub quantize_on: String,
}

fn parse_quantize(name: &str) -> Result<QuantizeChoice, String> {
    QuantizeChoice::parse(name).ok_or_else(|| format!("use {}", QuantizeChoice::NAMES))
}

impl LoadFlags {
    pub fn weights(&self) -> WeightOptions {
        let quantize_on = match self.quantize_on.as_str() {
            "gpu" => QuantizeOn::Gpu,
            "cpu" => QuantizeOn::Cpu,
            _ => QuantizeOn::Auto,
        };
        WeightOptions { quantize_on, ..self.quantize.weight_options(self.memory_budget_mb) }
    }
}

/// Prints what a load quantized (matrices per format, or with `auto` the plan) and the weight
/// bytes the engine holds.
pub fn report_quantized(quantized: &[Quantized], plan: Option<&AutoPlan>, weight_bytes: u64) {
    if let Some(plan) = plan {
        eprintln!("quantize auto plan: {}", plan.summary());
    } else if !quantized.is_empty() {
        let mut counts = std::collections::BTreeMap::new();
        for q in quantized {
            *counts.entry(q.format.name()).or_insert(0usize) += 1;
        }
        let counts: Vec<String> = counts.iter().map(|(f, n)| format!("{n} {f}")).collect();
        eprintln!("quantized at load: {}", counts.join(", "));
    }
    if !quantized.is_empty() {
        eprintln!("weight bytes {weight_bytes}");
    }
}

/// `name 0.123 s (4 %), ...` for each phase (seconds) of at least half a millisecond, as a
/// share of `total_s`.
pub fn phase_line(phases: &[(&str, f64)], total_s: f64) -> String {
    let parts: Vec<String> = phases
        .iter()
        .filter(|(_, s)| *s >= 0.0005)
        .map(|(name, s)| format!("{name} {s:.3} s ({:.0} %)", 100.0 * s / total_s))
        .collect();
    parts.join(", ")
}

/// A Hugging Face folder (config.json, tokenizer files, safetensors weights): a directory on
/// this machine, or an http(s) URL ending in `/` (the rule of the browser's `loadModel`).
pub enum ModelFolder {
    Local(Directory),
    Http(HttpFolder),
}

impl FolderSource for ModelFolder {
    type Reader = NativeSource;

    fn name(&self) -> &str {
        match self {
            Self::Local(dir) => dir.name(),
            Self::Http(http) => http.name(),
        }
    }

    async fn open(&self, name: &str) -> weft::Result<Option<NativeSource>> {
        Ok(match self {
            Self::Local(dir) => dir.open(name).await?.map(NativeSource::File),
            Self::Http(http) => http.open(name).await?.map(NativeSource::Http),
        })
    }
}

/// MODEL as a folder, or None where it is a file (path or URL).
pub fn folder(location: &str) -> Option<ModelFolder> {
    if is_http_url(location) {
        location.ends_with('/').then(|| ModelFolder::Http(HttpFolder::new(location)))
    } else {
        Path::new(location).is_dir().then(|| ModelFolder::Local(Directory(location.into())))
    }
}

/// `loading {location}`, with a hint where a URL was read as a file though it may be a folder.
pub fn loading(location: &str) -> String {
    if is_http_url(location) && !location.ends_with('/') {
        format!("loading {location} as a file (a Hugging Face folder's URL ends in /)")
    } else {
        format!("loading {location}")
    }
}

/// The tokenizer of MODEL (file path, URL or folder) alone, without its weights.
pub fn open_tokenizer(location: &str) -> anyhow::Result<Tokenizer> {
    let tokenizer = match folder(location) {
        Some(dir) => pollster::block_on(model::folder::read_folder(&dir)).map(|f| f.tokenizer),
        None => NativeSource::open(location).and_then(|source| pollster::block_on(model::open_tokenizer(&source))),
    };
    tokenizer.with_context(|| loading(location))
}

/// Opens MODEL on the GPU with a progress line on stderr.
fn open_gpu(ctx: &GpuContext, location: &str, engine: EngineOptions, weights: WeightOptions) -> anyhow::Result<(Llama, Tokenizer)> {
    let started = Instant::now();
    let mut report = |p: model::Progress| {
        eprint!(
            "\r{:?}: {}/{} groups, {:.1}/{:.1} MB   ",
            p.phase,
            p.step,
            p.steps,
            p.bytes_loaded as f64 / 1e6,
            p.bytes_total as f64 / 1e6
        );
    };
    let loaded = match folder(location) {
        Some(dir) => pollster::block_on(model::open_folder(ctx, &dir, engine, weights, &mut report)).map(|(l, t, _)| (l, t)),
        None => NativeSource::open(location).and_then(|source| pollster::block_on(model::open(ctx, &source, engine, weights, &mut report))),
    }
    .with_context(|| loading(location))?;
    eprintln!("\rloaded {location} in {:.2} s{:30}", started.elapsed().as_secs_f64(), "");
    Ok(loaded)
}

pub enum Engine {
    Gpu(Box<GpuContext>, Box<Llama>),
    Cpu(Box<CpuLlama>),
}

impl Engine {
    /// Opens MODEL (GGUF or weft file, path or URL, or a Hugging Face folder) on `backend`,
    /// float matrices as `weights` asks; the GPU options' context and batch sizes apply to both.
    pub fn open(backend: Backend, cpu: &CpuFlags, weights: WeightOptions, location: &str, engine: EngineOptions) -> anyhow::Result<(Engine, Tokenizer)> {
        match backend {
            Backend::Gpu => Self::open_gpu(crate::cli::context()?, weights, location, engine),
            Backend::Cpu => {
                let started = Instant::now();
                let options = cpu.options(&engine);
                let loaded = match folder(location) {
                    Some(dir) => pollster::block_on(weft::cpu::open_folder(&dir, options, &weights)).map(|(l, _)| l),
                    None => NativeSource::open(location).and_then(|source| pollster::block_on(weft::cpu::open_with(&source, options, &weights))),
                }
                .with_context(|| loading(location))?;
                report_quantized(&loaded.quantized, loaded.plan.as_ref(), loaded.llama.weights.bytes());
                let (llama, tok) = (loaded.llama, loaded.tokenizer);
                eprintln!(
                    "loaded {location} in {:.2} s (CPU, {} threads, {}, {:?}, {} KV cache)",
                    started.elapsed().as_secs_f64(),
                    llama.options.threads,
                    llama.isa.name(),
                    llama.options.arithmetic,
                    llama.options.kv
                );
                Ok((Engine::Cpu(Box::new(llama)), tok))
            }
        }
    }

    /// [`Engine::open`] on the GPU of `ctx`.
    pub fn open_gpu(ctx: GpuContext, weights: WeightOptions, location: &str, engine: EngineOptions) -> anyhow::Result<(Engine, Tokenizer)> {
        let (llama, tok) = open_gpu(&ctx, location, engine, weights)?;
        report_quantized(&llama.weights.quantized, llama.weights.plan.as_ref(), llama.weights.bytes());
        Ok((Engine::Gpu(Box::new(ctx), Box::new(llama)), tok))
    }

    pub fn config(&self) -> &LlamaConfig {
        match self {
            Engine::Gpu(_, l) => &l.config,
            Engine::Cpu(l) => &l.config,
        }
    }

    /// (max_seq, sinks) after the engine's own caps.
    pub fn window(&self) -> (usize, usize) {
        match self {
            Engine::Gpu(_, l) => (l.options.max_seq, l.options.sinks),
            Engine::Cpu(l) => (l.options.max_seq, l.options.sinks),
        }
    }

    pub fn position(&self) -> usize {
        match self {
            Engine::Gpu(_, l) => l.position(),
            Engine::Cpu(l) => l.position(),
        }
    }

    pub fn reset(&mut self) {
        match self {
            Engine::Gpu(_, l) => l.reset(),
            Engine::Cpu(l) => l.reset(),
        }
    }

    pub fn set_sampling(&mut self, p: &SampleParams) {
        match self {
            Engine::Gpu(ctx, l) => l.set_sampling(ctx, p),
            Engine::Cpu(l) => l.set_sampling(p),
        }
    }

    pub fn prefill(&mut self, ids: &[u32]) -> anyhow::Result<u32> {
        Ok(match self {
            Engine::Gpu(ctx, l) => pollster::block_on(l.prefill(ctx, ids))?,
            Engine::Cpu(l) => l.prefill(ids)?,
        })
    }

    pub fn step(&mut self) -> anyhow::Result<u32> {
        Ok(match self {
            Engine::Gpu(ctx, l) => pollster::block_on(l.step(ctx))?,
            Engine::Cpu(l) => l.step()?,
        })
    }

    pub fn logits(&mut self, ids: &[u32]) -> anyhow::Result<Vec<f32>> {
        Ok(match self {
            Engine::Gpu(ctx, l) => pollster::block_on(l.logits(ctx, ids, None))?,
            Engine::Cpu(l) => l.logits(ids)?,
        })
    }

    pub fn checkpoints(&mut self, ids: &[u32]) -> anyhow::Result<Vec<Checkpoint>> {
        Ok(match self {
            Engine::Gpu(ctx, l) => pollster::block_on(l.checkpoints(ctx, ids))?,
            Engine::Cpu(l) => l.checkpoints(ids)?,
        })
    }

    /// Bytes of weights read per decoded token.
    pub fn weight_bytes(&self) -> u64 {
        match self {
            Engine::Gpu(_, l) => l.weights.bytes(),
            Engine::Cpu(l) => l.weights.bytes(),
        }
    }

    pub fn kv_bytes_per_token(&self) -> u64 {
        match self {
            Engine::Gpu(_, l) => l.kv_bytes_per_token(),
            Engine::Cpu(l) => l.kv_bytes_per_token(),
        }
    }

    /// (adapter, backend) for reports.
    pub fn device(&self) -> (String, String) {
        match self {
            Engine::Gpu(ctx, _) => {
                let caps = ctx.capabilities();
                (caps.adapter_name.clone(), caps.backend.clone())
            }
            Engine::Cpu(l) => (format!("CPU, {} threads, {}", l.options.threads, l.isa.name()), "cpu".into()),
        }
    }
}
