//! `--backend gpu|cpu`: one model handle over both engines for the commands that run models.
//! The CPU path creates no GPU context, so it works on machines without an adapter.

use std::time::Instant;

use anyhow::Context;
use weft::cpu::{Arithmetic, CpuLlama, CpuOptions};
use weft::gpu::GpuContext;
use weft::loader::native::NativeSource;
use weft::model::graph::Checkpoint;
use weft::model::{EngineOptions, Llama, LlamaConfig};
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

pub enum Engine {
    Gpu(Box<GpuContext>, Box<Llama>),
    Cpu(Box<CpuLlama>),
}

impl Engine {
    /// Opens MODEL (GGUF path or URL) on `backend`; the GPU options' context and batch sizes
    /// apply to both.
    pub fn open(backend: Backend, cpu: &CpuFlags, location: &str, engine: EngineOptions) -> anyhow::Result<(Engine, Tokenizer)> {
        match backend {
            Backend::Gpu => {
                let ctx = crate::cli::context()?;
                let (llama, tok) = crate::generate::open_with(&ctx, location, engine)?;
                Ok((Engine::Gpu(Box::new(ctx), Box::new(llama)), tok))
            }
            Backend::Cpu => {
                let started = Instant::now();
                let reader = NativeSource::open(location)?;
                let (llama, tok) = pollster::block_on(weft::cpu::open(&reader, cpu.options(&engine)))
                    .with_context(|| format!("loading {location}"))?;
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
