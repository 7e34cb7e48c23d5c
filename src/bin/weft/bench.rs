//! `weft bench MODEL`: prefill and decode speed on random token ids, with the weight bytes each
//! decoded token reads and the bandwidth that implies.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde::Serialize;
use weft::loader::native::FileReader;
use weft::model::{self, EngineOptions, KvFormat, LoadTimes, StepProfile, WeightOptions};

use crate::backend::{Backend, Engine};

pub struct Args {
    pub model: String,
    pub prompt_len: usize,
    pub gen: usize,
    pub reps: usize,
    pub kv: KvFormat,
    pub json: bool,
    pub profile: bool,
    pub fuse: bool,
    pub tune: bool,
    pub fuse_glu: bool,
    pub glu_epilogue: bool,
    pub fuse_attention: bool,
    pub attention_chunk: Option<usize>,
    pub max_seq: Option<usize>,
    pub flash_attention: bool,
    pub pipeline: bool,
    pub int8_activations: bool,
    pub activation_records: bool,
    pub constant_shapes: bool,
    pub matrix_units: bool,
    pub sampling: weft::ops::sample::SampleParams,
    pub backend: crate::backend::Backend,
    pub cpu: crate::backend::CpuFlags,
    pub load: crate::backend::LoadFlags,
}

#[derive(Serialize)]
struct Report {
    model: String,
    adapter: String,
    backend: String,
    /// What weft's kernels were compiled with (`WEFT_SHADER_CHECKS`); none on the CPU backend.
    shader_checks: Option<String>,
    prompt_len: usize,
    gen: usize,
    reps: usize,
    load_s: f64,
    /// Where the load went (GPU backend): creating the device, then each phase of the model's
    /// load; `other_s` is the rest (the KV cache, activation buffers, RoPE tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    load_breakdown: Option<LoadBreakdown>,
    prefill_tok_s: Vec<f64>,
    decode_tok_s: Vec<f64>,
    ttft_ms: Vec<f64>,
    prefill_tok_s_median: f64,
    decode_tok_s_median: f64,
    ttft_ms_median: f64,
    weight_bytes: u64,
    /// Weight bytes read per decoded token times decode tokens per second.
    decode_weight_gb_s: f64,
    kv: KvFormat,
    kv_bytes_per_token: u64,
    fuse: bool,
    fuse_glu: bool,
    /// The SwiGLU as the gate/up GEMV's epilogue (else in the down GEMV's staging).
    glu_epilogue: bool,
    fuse_attention: bool,
    /// Decode attention's chunk: asked for, else decided by head size.
    attention_chunk: Option<usize>,
    max_seq: usize,
    /// Prompt passes' attention by tiles (asked for; taken where the head size and device allow).
    flash_attention: bool,
    pipeline: bool,
    int8_activations: bool,
    /// With 8-bit activations: the down GEMV reads the SwiGLU epilogue's activation records.
    activation_records: bool,
    /// The decode GEMVs with their weight's shape compiled in.
    constant_shapes: bool,
    /// Prompt passes on the adapter's matrix units (asked for, and the adapter has them).
    matrix_units: bool,
    /// How each decoded token was picked.
    sampling: weft::ops::sample::SampleParams,
    /// GEMV launch shapes timed at load: every candidate's median µs and the one chosen.
    gemv_tuning: Vec<weft::ops::qmatmul::GemvTuning>,
    /// KV bytes per token of this model under every format, from the engine's layout.
    kv_bytes_per_token_by_format: Vec<(KvFormat, u64)>,
    /// With --profile: one decode step's CPU/GPU split and per-kernel GPU time.
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<StepProfile>,
}

#[derive(Serialize)]
struct LoadBreakdown {
    device_s: f64,
    #[serde(flatten)]
    phases: LoadTimes,
    other_s: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let max_seq = a.max_seq.unwrap_or(a.prompt_len + a.gen + 1);
    let engine = EngineOptions { max_seq, max_batch: a.prompt_len.clamp(1, 128), kv: a.kv, fuse: a.fuse, tune: a.tune, fuse_glu: a.fuse_glu, glu_epilogue: a.glu_epilogue, fuse_attention: a.fuse_attention, attention_chunk: a.attention_chunk, flash_attention: a.flash_attention, pipeline: a.pipeline, int8_activations: a.int8_activations, activation_records: a.activation_records, constant_shapes: a.constant_shapes, matrix_units: a.matrix_units, ..Default::default() };
    let started = Instant::now();
    // The format asked for on every matrix, the embedding and head included (no default keep
    // rules): what the benchmark measures.
    let weights = WeightOptions { default_keep: false, ..a.load.weights() };
    let dir = Path::new(&a.model);
    let gpu = match a.backend {
        Backend::Gpu => Some(crate::cli::context()?),
        Backend::Cpu => None,
    };
    let device_s = started.elapsed().as_secs_f64();
    let mut llama = match gpu {
        Some(ctx) if dir.is_dir() && !dir.join("tokenizer.json").is_file() => {
            // Random ids need no tokenizer: a folder of config.json and model.safetensors alone
            // (bench/gpu/make_models.py) opens from those.
            let config = std::fs::read_to_string(dir.join("config.json")).context("config.json")?;
            let reader = FileReader::open(dir.join("model.safetensors"))?;
            let llama = pollster::block_on(model::open_safetensors_weights(&ctx, &reader, &config, engine, weights, &mut |_| {}))?;
            crate::backend::report_quantized(&llama.weights.quantized, llama.weights.plan.as_ref(), llama.weights.bytes());
            Engine::Gpu(Box::new(ctx), Box::new(llama))
        }
        Some(ctx) => Engine::open_gpu(ctx, weights, &a.model, engine)?.0,
        None => Engine::open(a.backend, &a.cpu, weights, &a.model, engine)?.0,
    };
    let load_s = started.elapsed().as_secs_f64();
    let load_breakdown = match &llama {
        Engine::Gpu(_, l) => {
            let phases = l.load_times;
            Some(LoadBreakdown { device_s, phases, other_s: load_s - device_s - phases.total_ms() / 1e3 })
        }
        Engine::Cpu(_) => None,
    };
    llama.set_sampling(&a.sampling);
    let vocab = llama.config().vocab as u32;
    let mut rng = SmallRng::seed_from_u64(1);
    let (mut prefill, mut decode, mut ttft) = (Vec::new(), Vec::new(), Vec::new());
    // One untimed pass compiles every pipeline and warms the caches.
    for rep in 0..=a.reps {
        let prompt: Vec<u32> = (0..a.prompt_len).map(|_| rng.random_range(0..vocab)).collect();
        llama.reset();
        let t0 = Instant::now();
        llama.prefill(&prompt)?;
        let t_prefill = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        for _ in 1..a.gen {
            llama.step()?;
        }
        let t_decode = t1.elapsed().as_secs_f64();
        if rep > 0 {
            prefill.push(a.prompt_len as f64 / t_prefill);
            decode.push((a.gen - 1) as f64 / t_decode);
            ttft.push(t_prefill * 1e3);
        }
    }
    let matrix_units = a.matrix_units && matches!(&llama, Engine::Gpu(ctx, _) if ctx.capabilities().matrix_f16);
    let (profile, gemv_tuning) = match &llama {
        Engine::Gpu(ctx, l) if a.profile => (Some(pollster::block_on(l.profile_step(ctx, 20))?), l.gemv_tuning.clone()),
        Engine::Gpu(_, l) => (None, l.gemv_tuning.clone()),
        Engine::Cpu(_) => (None, Vec::new()),
    };
    let decode_median = median(&decode);
    let (adapter, backend) = llama.device();
    let report = Report {
        model: a.model.clone(),
        adapter,
        backend,
        shader_checks: match &llama {
            Engine::Gpu(ctx, _) => Some(ctx.shader_checks().name().to_string()),
            Engine::Cpu(_) => None,
        },
        prompt_len: a.prompt_len,
        gen: a.gen,
        reps: a.reps,
        load_s,
        load_breakdown,
        prefill_tok_s_median: median(&prefill),
        decode_tok_s_median: decode_median,
        ttft_ms_median: median(&ttft),
        prefill_tok_s: prefill,
        decode_tok_s: decode,
        ttft_ms: ttft,
        weight_bytes: llama.weight_bytes(),
        decode_weight_gb_s: llama.weight_bytes() as f64 * decode_median / 1e9,
        kv: a.kv,
        kv_bytes_per_token: llama.kv_bytes_per_token(),
        fuse: a.fuse,
        fuse_glu: a.fuse_glu,
        glu_epilogue: a.glu_epilogue,
        fuse_attention: a.fuse_attention,
        attention_chunk: a.attention_chunk,
        max_seq,
        flash_attention: a.flash_attention,
        pipeline: a.pipeline,
        int8_activations: a.int8_activations,
        activation_records: a.activation_records,
        constant_shapes: a.constant_shapes,
        matrix_units,
        sampling: a.sampling,
        gemv_tuning,
        kv_bytes_per_token_by_format: KvFormat::ALL
            .iter()
            .map(|&k| (k, model::kv_bytes_per_token(llama.config(), k)))
            .collect(),
        profile,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("model      {}", report.model);
        println!("adapter    {} ({})", report.adapter, report.backend);
        if let Some(c) = &report.shader_checks {
            println!("checks     {c} (wgpu's shader checks on weft's kernels; WEFT_SHADER_CHECKS)");
        }
        println!("load       {:.2} s", report.load_s);
        if let Some(b) = &report.load_breakdown {
            print_load(b, report.load_s, &report.gemv_tuning);
        }
        println!("prefill    {:.1} tok/s (median of {}; prompt {} tokens)", report.prefill_tok_s_median, a.reps, a.prompt_len);
        println!("decode     {:.1} tok/s (median of {}; {} tokens)", report.decode_tok_s_median, a.reps, a.gen);
        println!("ttft       {:.1} ms", report.ttft_ms_median);
        let s = &report.sampling;
        if s.temperature > 0.0 || s.repeat_penalty != 1.0 {
            println!("sampling   temperature {} top-k {} top-p {} repeat penalty {}", s.temperature, s.top_k, s.top_p, s.repeat_penalty);
        }
        if report.matrix_units {
            println!("prompt     matrix products on the matrix units (f16 products, f32 sums)");
        }
        println!("weights    {:.1} MB read per decoded token -> {:.2} GB/s", report.weight_bytes as f64 / 1e6, report.decode_weight_gb_s);
        println!("kv cache   {} bytes per token ({}), room for {} tokens", report.kv_bytes_per_token, report.kv, report.max_seq);
        let all: Vec<String> =
            report.kv_bytes_per_token_by_format.iter().map(|(k, b)| format!("{k} {b}")).collect();
        println!("kv formats {} bytes per token", all.join(", "));
        if let Some(p) = &report.profile {
            print_profile(p);
        }
    }
    Ok(())
}

/// Each phase of the load in seconds and as a share of it, then the launch shapes tuning chose
/// (to compare between builds: a faster load must choose the same).
fn print_load(b: &LoadBreakdown, load_s: f64, tuning: &[weft::ops::qmatmul::GemvTuning]) {
    let mut phases = vec![("device", b.device_s)];
    phases.extend(b.phases.phases().iter().map(|&(name, ms)| (name, ms / 1e3)));
    phases.push(("other", b.other_s));
    println!("  load by phase: {}", crate::backend::phase_line(&phases, load_s));
    for t in tuning {
        let c = t.chosen;
        let kinds = [(t.swiglu, "SwiGLU epilogue"), (t.int8, "8-bit activations"), (t.records, "writing records"), (t.reads_records, "reading records")];
        let parts: Vec<&str> = kinds.iter().filter(|k| k.0).map(|k| k.1).collect();
        let what = if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) };
        let us = t.timings.iter().map(|&(_, us)| us).fold(f64::INFINITY, f64::min);
        println!("  tuned      {} {}x{}{what}: wg {} rows {} lanes {} ({us:.1} us)", t.format, t.rows, t.cols, c.wg, c.rows, c.lanes);
    }
}

fn print_profile(p: &StepProfile) {
    println!(
        "step       {} dispatches: record+submit {:.3} ms, wait for result {:.3} ms (CPU clock, median of 20)",
        p.dispatches, p.record_submit_ms, p.wait_ms
    );
    if p.kernels_us.is_empty() {
        println!("           no timestamp queries on this adapter: no per-kernel GPU time");
        return;
    }
    let total: f64 = p.kernels_us.iter().map(|k| k.1).sum();
    println!("{:<64} {:>10} {:>6} {:>7}", "kernel (GPU time per step)", "us", "count", "share");
    for (name, us, count) in &p.kernels_us {
        println!("{name:<64} {us:>10.1} {count:>6} {:>6.1}%", 100.0 * us / total);
    }
    println!("GPU total  {total:.1} us per decode step (each dispatch in its own timed pass)");
    if let Some(us) = p.pass_us {
        println!("GPU step   {us:.1} us per decode step in one pass (median of 20)");
    }
}
