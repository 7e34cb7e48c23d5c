//! The SmolLM2 engine with each KV-cache format and with a sliding window: greedy ids for a
//! fixed prompt, last-position logits against the f32 cache, and generation past max_seq.

use std::path::Path;

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::NativeSource;
use weft::model::{self, EngineOptions, KvFormat, Llama, WeightOptions};
use weft::tokenizer::Tokenizer;

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const PROMPT: &str = "The capital of France is";
/// Greedy continuation of PROMPT (no chat template) with the f32 cache.
const F32_IDS: [u32; 20] = [7042, 30, 198, 198, 504, 2988, 314, 42, 216, 34, 32, 33, 40, 29, 32, 33, 29, 34, 34, 216];

/// Last-position logits with the f16 cache against the f32 cache: max |diff| / max |f32 logit|.
/// Each K/V value carries one f16 rounding (2^-11 relative), through 30 blocks.
const F16_LOGITS_TOLERANCE: f64 = 2e-3;
/// The same for the q8 cache: each value is off by up to absmax / 254 of its row.
const Q8_LOGITS_TOLERANCE: f64 = 4e-2;

fn ctx() -> anyhow::Result<GpuContext> {
    Ok(pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?)
}

fn load(ctx: &GpuContext, engine: EngineOptions) -> anyhow::Result<(Llama, Tokenizer)> {
    anyhow::ensure!(Path::new(MODEL).exists(), "{MODEL} missing: run scripts/fetch-model.sh");
    let reader = NativeSource::open(MODEL)?;
    Ok(pollster::block_on(model::open(ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?)
}

fn greedy(ctx: &GpuContext, llama: &mut Llama, prompt: &[u32], n: usize) -> anyhow::Result<Vec<u32>> {
    let mut ids = vec![pollster::block_on(llama.prefill(ctx, prompt))?];
    while ids.len() < n {
        ids.push(pollster::block_on(llama.step(ctx))?);
    }
    Ok(ids)
}

/// The logits of the prompt's last position, from an empty cache.
fn last_logits(ctx: &GpuContext, llama: &mut Llama, prompt: &[u32]) -> anyhow::Result<Vec<f32>> {
    llama.reset();
    let all = pollster::block_on(llama.logits(ctx, prompt, None))?;
    Ok(all[(prompt.len() - 1) * llama.config.vocab..].to_vec())
}

#[test]
fn every_kv_format_follows_the_f32_cache() -> anyhow::Result<()> {
    let ctx = ctx()?;
    let mut reference = None;
    for kv in KvFormat::ALL {
        let (mut llama, tok) = load(&ctx, EngineOptions { max_seq: 64, max_batch: 16, kv, ..Default::default() })?;
        let prompt = tok.encode(PROMPT, true);
        let ids = greedy(&ctx, &mut llama, &prompt, F32_IDS.len())?;
        let logits = last_logits(&ctx, &mut llama, &prompt)?;
        let same = ids.iter().zip(&F32_IDS).take_while(|(a, b)| a == b).count();
        println!("{kv}: {} B/token, ids {ids:?}, {same} of {} equal to f32", llama.kv_bytes_per_token(), F32_IDS.len());
        match kv {
            KvFormat::F32 => {
                assert_eq!(ids, F32_IDS, "f32 cache");
                reference = Some(logits);
            }
            KvFormat::F16 | KvFormat::Q8 => {
                let want = reference.as_ref().expect("f32 runs first");
                let max_err = logits.iter().zip(want).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
                let scale = want.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
                let rel = max_err / scale;
                let tolerance = if kv == KvFormat::F16 { F16_LOGITS_TOLERANCE } else { Q8_LOGITS_TOLERANCE };
                println!(
                    "{kv}: last-position logits max |diff| {max_err:.3e}, relative {rel:.3e} (tolerance {tolerance:e})"
                );
                assert!(rel <= tolerance, "{kv}: logits relative deviation {rel:.3e} > {tolerance:e}");
                // On lavapipe all 20 ids agree for both formats. f16 is asserted in full; q8's
                // larger logit error could flip a near tie on another GPU, so only its first 5.
                let checked = if kv == KvFormat::F16 { F32_IDS.len() } else { 5 };
                assert_eq!(ids[..checked], F32_IDS[..checked], "{kv}: greedy ids");
            }
        }
    }
    Ok(())
}

/// With a context of 16, generation goes on past the cap; up to the cap it matches an engine with
/// room for everything, after a reset the same prompt gives the same ids again (the RoPE table
/// rows overwritten past the cap are restored), and a prompt longer than the window prefilled
/// at once predicts what decoding it token by token did.
#[test]
fn sliding_window_generation_continues_past_max_seq() -> anyhow::Result<()> {
    let ctx = ctx()?;
    let window = 16;
    let (mut full, tok) = load(&ctx, EngineOptions { max_seq: 64, max_batch: 16, ..Default::default() })?;
    let prompt = tok.encode(PROMPT, true);
    let n = 40;
    let want = greedy(&ctx, &mut full, &prompt, n)?;
    // The default 4 attention sinks with f32, a plain window with q8.
    for (kv, sinks) in [(KvFormat::F32, 4), (KvFormat::Q8, 0)] {
        let engine = EngineOptions { max_seq: window, max_batch: 16, kv, sinks, ..Default::default() };
        let (mut small, _) = load(&ctx, engine)?;
        let got = greedy(&ctx, &mut small, &prompt, n)?;
        assert_eq!(small.position(), prompt.len() + n - 1);
        assert!(got.iter().all(|&id| (id as usize) < small.config.vocab));
        // Token i is predicted at position prompt.len() - 1 + i: within the cap the window holds
        // everything, so it must agree with the large cache.
        let within = window - prompt.len() + 1;
        if kv == KvFormat::F32 {
            assert_eq!(got[..within], want[..within], "ids within the cap");
        }
        println!("{kv} window {window}, {sinks} sinks: {got:?}\nfull context: {want:?}");
        small.reset();
        assert_eq!(greedy(&ctx, &mut small, &prompt, n)?, got, "{kv}: the same ids after a reset");
        // A prompt longer than the window runs past the cap in single-token passes and predicts
        // what decoding the same tokens one step at a time did.
        let long: Vec<u32> = prompt.iter().chain(&got[..n - 1]).copied().collect();
        small.reset();
        let next = pollster::block_on(small.prefill(&ctx, &long))?;
        assert_eq!(small.position(), long.len());
        println!("{kv}: prefill of {} tokens predicts {next}; decoding predicted {}", long.len(), got[n - 1]);
        if kv == KvFormat::F32 {
            assert_eq!(next, got[n - 1], "windowed prefill against windowed decode");
        }
    }
    Ok(())
}

/// Stacked Q/K/V and gate/up with the residual adds fused into the norms compute what the
/// separate dispatches compute, bit for bit: logits of a 16-token pass and greedy ids. The decode
/// step with the norms and residual adds also folded into its GEMVs (the GPU default, forced
/// here) gives the same greedy ids.
#[test]
fn fused_and_separate_dispatches_agree() -> anyhow::Result<()> {
    let ctx = ctx()?;
    let mut runs = Vec::new();
    for (fuse, fuse_norms) in [(true, Some(false)), (false, None), (true, Some(true))] {
        let engine = EngineOptions { max_seq: 64, max_batch: 16, fuse, fuse_norms, ..Default::default() };
        let (mut llama, tok) = load(&ctx, engine)?;
        let prompt = tok.encode(PROMPT, true);
        let ids = greedy(&ctx, &mut llama, &prompt, F32_IDS.len())?;
        let logits = last_logits(&ctx, &mut llama, &prompt)?;
        let n = llama.decode_dispatches();
        println!("fuse {fuse} norms {fuse_norms:?}: {n} dispatches per decode step, {} bytes of weights, ids {ids:?}",
            llama.weights.bytes());
        assert_eq!(ids, F32_IDS, "fuse {fuse}, norms {fuse_norms:?}");
        runs.push((logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), llama.weights.bytes(), n));
    }
    assert!(runs[0].0 == runs[1].0, "logits differ between the fused and separate engines");
    assert_eq!(runs[0].1, runs[1].1, "stacking must not change the weight bytes");
    let layers = 30;
    // Per block: Q/K/V two fewer GEMVs, gate/up one fewer, two residual adds into the norms;
    // the last add goes into the final norm, which then needs no copy of the last row.
    assert_eq!(runs[1].2 - runs[0].2, 5 * layers + 1, "dispatches saved by stacking and add + norm");
    // Both norms into the GEMVs after them and both adds into the GEMVs before them (7 of 14
    // a block); the final norm into the output head.
    assert_eq!(runs[1].2 - runs[2].2, 7 * layers + 2, "dispatches saved with the norms in the GEMVs");
    Ok(())
}

/// The default model loaded as on a GPU (forced here on any adapter): its Q4_1 matrices repacked
/// into their planes at load, every product on the GPU kernels, and the greedy ids of the stored
/// blocks.
#[test]
fn q4_1_repacked_at_load_keeps_the_greedy_ids() -> anyhow::Result<()> {
    let mut ctx = ctx()?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
    let engine = EngineOptions { max_seq: 64, max_batch: 16, kv: KvFormat::F32, tune: false, ..Default::default() };
    let (mut llama, tok) = load(&ctx, engine)?;
    let down = &llama.weights.layers[1].down;
    assert_eq!(down.format, weft::ops::qmatmul::WeightFormat::Repacked(weft::format::GgmlType::Q4_1));
    let ids = greedy(&ctx, &mut llama, &tok.encode(PROMPT, true), F32_IDS.len())?;
    assert_eq!(ids, F32_IDS);
    Ok(())
}

/// The decode step on a GPU's launch shapes (forced here on any adapter) with weft weights, so
/// that the GPU GEMV kernel runs: the SwiGLU folded into a GEMV (one dispatch a block fewer),
/// either the down projection's staging or the gate/up GEMV's epilogue, steps queued one ahead
/// and split attention with the RoPE + KV store folded in give the greedy ids of the step with
/// none of them (with 8-bit activations, with and without the epilogue's activation records), and a generation stopped with a step still queued leaves nothing behind. The
/// tiny Qwen2 fixture (F32 weights, quantized at load; widths multiples of 32).
#[test]
fn swiglu_in_a_gemv_and_queued_steps_keep_the_ids() -> anyhow::Result<()> {
    let dir = "tests/fixtures/qwen2-tiny";
    let mut ctx = ctx()?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
    let quantize = Some(weft::quant::weft::WeftQuant::parse("q8_g32_sym")?);
    let config = std::fs::read_to_string(format!("{dir}/config.json"))?;
    let prompt = [5, 77, 301, 12, 650, 9, 42];
    let mut runs = Vec::new();
    // (fuse_glu, glu_epilogue, pipeline, int8_activations, split, activation_records, constant_shapes)
    let configs = [
        (false, false, false, false, true, true, true),
        (true, false, false, false, true, true, true),
        (true, true, false, false, true, true, true),
        (true, true, true, false, true, true, true),
        (true, true, true, true, true, true, true),
        (false, false, false, false, false, true, true),
        (true, true, true, true, true, false, true),
        (true, true, true, true, true, true, false),
    ];
    for (fuse_glu, glu_epilogue, pipeline, int8_activations, split, activation_records, constant_shapes) in configs {
        let engine = EngineOptions {
            max_seq: 64,
            max_batch: 16,
            fuse_norms: Some(true),
            fuse_glu,
            glu_epilogue,
            pipeline,
            int8_activations,
            activation_records,
            constant_shapes,
            split_attention: Some(split),
            tune: false,
            ..Default::default()
        };
        let reader = weft::loader::native::FileReader::open(format!("{dir}/model.safetensors"))?;
        let weights = WeightOptions { quantize, ..Default::default() };
        let mut llama = pollster::block_on(model::open_safetensors_weights(&ctx, &reader, &config, engine, weights, &mut |_| {}))?;
        let ids = greedy(&ctx, &mut llama, &prompt, 24)?;
        // Stopped after 5 tokens (a step queued ahead), then the prompt again from scratch.
        llama.reset();
        let short = greedy(&ctx, &mut llama, &prompt, 5)?;
        llama.reset();
        let again = greedy(&ctx, &mut llama, &prompt, 24)?;
        let name = format!(
            "glu {fuse_glu} epilogue {glu_epilogue} pipeline {pipeline} int8 {int8_activations} records {activation_records} \
             constant shapes {constant_shapes}"
        );
        println!("{name}: {} dispatches a step, ids {ids:?}", llama.decode_dispatches());
        assert_eq!(short, ids[..5], "{name}: a shorter run");
        assert_eq!(again, ids, "{name}: after a stop with a step queued");
        let kernels = llama.decode_kernels();
        let with = |define: &str| kernels.iter().filter(|k| k.contains(define)).count();
        assert_eq!(with(",GLU=1"), if fuse_glu && !glu_epilogue { 2 } else { 0 }, "{kernels:?}");
        assert_eq!(with("SWIGLU=1"), if fuse_glu && glu_epilogue { 2 } else { 0 }, "{kernels:?}");
        // Every GEMV of the step (Q/K/V, O, gate/up, down a block, and the head).
        assert_eq!(with("DP4=1"), if int8_activations { 4 * 2 + 1 } else { 0 }, "{kernels:?}");
        // With 8-bit activations the epilogue writes records, which the down GEMV reads.
        let recorded = int8_activations && glu_epilogue && activation_records;
        assert_eq!((with("XOUT=1"), with("XREC=1")), if recorded { (2, 2) } else { (0, 0) }, "{kernels:?}");
        // Every GPU GEMV of the step has its weight's shape compiled in, or none has.
        let shaped = if constant_shapes { with("qgemv_gpu[") } else { 0 };
        assert_eq!(with("SHAPE=1"), shaped, "{kernels:?}");
        // At least the nine GEMVs counted above (four a block and the head) run the GPU kernel.
        assert!(with("qgemv_gpu[") > 4 * 2, "{kernels:?}");
        // Split attention takes the RoPE + KV store into it (one dispatch a block, not three).
        assert_eq!(with("attention_decode["), if split { 2 } else { 0 }, "{kernels:?}");
        runs.push((ids, llama.decode_dispatches()));
    }
    assert_eq!(runs[5].0, runs[0].0, "attention with the RoPE + KV store in it changed the ids");
    // Unsplit, the RoPE + KV store is a dispatch of its own: one more a block.
    assert_eq!(runs[5].1, runs[0].1 + 2, "dispatches of the unsplit step");
    assert_eq!(runs[0].0, runs[1].0, "the SwiGLU in the down GEMV changed the ids");
    assert_eq!(runs[1].0, runs[2].0, "the SwiGLU as the gate/up GEMV's epilogue changed the ids");
    assert_eq!(runs[2].0, runs[3].0, "queueing steps ahead changed the ids");
    assert_eq!(runs[0].1 - runs[1].1, 2, "one dispatch fewer a block");
    assert_eq!(runs[2].1, runs[1].1, "the epilogue in place of the staging: as many dispatches");
    // 8-bit activations round every GEMV input once; on this model the ids stay the same.
    assert_eq!(runs[4].0, runs[3].0, "8-bit activations changed the ids");
    assert_eq!(runs[4].1, runs[3].1, "8-bit activations need no dispatch of their own");
    // The records hold what the down GEMV's staging makes of the same values: the same ids.
    assert_eq!(runs[6], runs[4], "activation records changed the ids or the dispatches");
    // The shapes as constants are the same kernels over the same numbers.
    assert_eq!(runs[7], runs[4], "the shapes in the pipelines changed the ids or the dispatches");
    Ok(())
}
