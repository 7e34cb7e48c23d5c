//! The CPU backend on SmolLM2: every checkpoint against the PyTorch fixtures (f32 arithmetic,
//! the same tolerance as the GPU's tests/activations.rs), greedy ids against the GPU backend's
//! (also past max_seq, over the sliding window), and the same logits on one thread or two.

#[path = "common/activations.rs"]
mod fixtures;

use weft::cpu::{self, Arithmetic, CpuLlama, CpuOptions};
use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::NativeSource;
use weft::model::{self, EngineOptions, WeightOptions};
use weft::tokenizer::Tokenizer;

use fixtures::{check, input, F32_TOLERANCE, MODEL};

const PROMPT: &str = "The capital of France is";

fn open_cpu(options: CpuOptions) -> anyhow::Result<(CpuLlama, Tokenizer)> {
    let reader = NativeSource::open(MODEL)?;
    Ok(pollster::block_on(cpu::open(&reader, options))?)
}

fn f32_options(max_seq: usize) -> CpuOptions {
    CpuOptions { max_seq, max_batch: 16, arithmetic: Arithmetic::F32, ..Default::default() }
}

fn greedy_cpu(llama: &mut CpuLlama, prompt: &[u32], n: usize) -> anyhow::Result<Vec<u32>> {
    let mut ids = vec![llama.prefill(prompt)?];
    while ids.len() < n {
        ids.push(llama.step()?);
    }
    Ok(ids)
}

#[test]
fn every_checkpoint_matches_transformers() -> anyhow::Result<()> {
    let input = input()?;
    let (mut llama, _) = open_cpu(f32_options(64))?;
    let got = llama.checkpoints(&input.ids)?;
    check(&input, &got, llama.config.vocab, F32_TOLERANCE)
}

/// Where 8-bit activations may pick another token than f32 ones: the f32 logits' top two
/// closer than this (a near-tie that rounding decides).
const NEAR_TIE: f32 = 0.25;

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

/// Greedy ids of the default prompt on the GPU backend and on the CPU backend with f32
/// arithmetic: within the window (max_seq 64) and past it (max_seq 12, 4 sinks: the ring).
/// With 8-bit activations, teacher-forced over the GPU's ids, every choice agrees or is a
/// near-tie of the f32 logits.
#[test]
fn greedy_ids_match_the_gpu_backend() -> anyhow::Result<()> {
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut gpu_ids = Vec::new();
    for (max_seq, n) in [(64, 20), (12, 20)] {
        let reader = NativeSource::open(MODEL)?;
        let engine = EngineOptions { max_seq, max_batch: 16, ..Default::default() };
        let (mut gpu, tok) = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?;
        let prompt = tok.encode(PROMPT, true);
        let mut want = vec![pollster::block_on(gpu.prefill(&ctx, &prompt))?];
        while want.len() < n {
            want.push(pollster::block_on(gpu.step(&ctx))?);
        }
        let (mut llama, _) = open_cpu(f32_options(max_seq))?;
        let got = greedy_cpu(&mut llama, &prompt, n)?;
        assert_eq!(got, want, "max_seq {max_seq}, f32");
        gpu_ids.push(want);
    }
    let (mut f32_cpu, tok) = open_cpu(f32_options(64))?;
    let (mut q8_cpu, _) = open_cpu(CpuOptions { arithmetic: Arithmetic::Q8, ..f32_options(64) })?;
    let prompt = tok.encode(PROMPT, true);
    let want = &gpu_ids[0];
    let seq: Vec<u32> = prompt.iter().chain(&want[..want.len() - 1]).copied().collect();
    let (exact, q8) = (f32_cpu.logits(&seq)?, q8_cpu.logits(&seq)?);
    let vocab = f32_cpu.config.vocab;
    for (i, &id) in want.iter().enumerate() {
        let row = (prompt.len() - 1 + i) * vocab;
        let (e, q) = (&exact[row..row + vocab], &q8[row..row + vocab]);
        let mut sorted = e.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let gap = sorted[0] - sorted[1];
        println!("token {i}: gpu {id}, q8 {}, f32 top-2 gap {gap:.4}", argmax(q));
        assert!(argmax(q) == id as usize || gap < NEAR_TIE, "token {i}: q8 picks {} over {id} with an f32 gap of {gap}", argmax(q));
    }
    Ok(())
}

/// Each thread computes whole rows in the same order, so the thread count changes nothing.
#[test]
fn threads_change_nothing() -> anyhow::Result<()> {
    let ids = [1u32, 504, 3458, 282, 4649, 314];
    let mut runs = Vec::new();
    for threads in [1, 2, 3] {
        let (mut llama, _) = open_cpu(CpuOptions { threads, ..CpuOptions { max_seq: 32, max_batch: 16, ..Default::default() } })?;
        let logits = llama.logits(&ids)?;
        runs.push(logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    assert!(runs[0] == runs[1] && runs[1] == runs[2]);
    Ok(())
}

/// The memory a model needs on the CPU is known from its header, and a model that cannot fit
/// the address space (4 GiB in wasm32) is refused by name: SmolLM2's KV cache for 2^20
/// positions alone is 48 GB.
#[test]
fn a_model_beyond_the_address_space_is_refused_before_loading() -> anyhow::Result<()> {
    let reader = NativeSource::open(MODEL)?;
    let header = pollster::block_on(weft::loader::read_header(&reader))?.header;
    let (llama, _) = open_cpu(f32_options(64))?;
    let config = &llama.config;
    let needed = cpu::memory_needed(&header, config, 64);
    // What the loaded engine holds (weights, KV cache, activations) is within the header's
    // bound but for the activations.
    assert!(needed >= llama.weights.bytes(), "{needed} < {}", llama.weights.bytes());
    assert!(needed <= llama.bytes(), "{needed} > {}", llama.bytes());
    let wasm32 = 1u64 << 32;
    cpu::fits_address_space(needed, wasm32)?;
    let huge = cpu::memory_needed(&header, config, 1 << 20);
    match cpu::fits_address_space(huge, wasm32) {
        Err(e @ weft::Error::AddressSpace { .. }) => assert!(e.to_string().contains("4 GiB"), "{e}"),
        other => panic!("expected AddressSpace, got {other:?}"),
    }
    Ok(())
}
