//! A tiny random-weight Qwen2 checkpoint (attention biases, NeoX RoPE, tied head, its own
//! Qwen2-pattern tokenizer.json) against transformers: tokenizer ids and the greedy
//! continuation (tests/fixtures/qwen2-tiny, made by scripts/make_qwen2_fixture.py); and its
//! decode step with Q/K/V of different formats kept apart, each with its bias.

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::FileReader;
use weft::loader::read_header;
use weft::model::convert::{quantize_model, KeepRule, QuantizePlan};
use weft::model::llama::Qkv;
use weft::model::{self, EngineOptions, LlamaConfig, WeightOptions};
use weft::quant::weft::{Scheme, WeftQuant};
use weft::tokenizer::Tokenizer;

const DIR: &str = "tests/fixtures/qwen2-tiny";

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<Case>,
    prompt: String,
    prompt_ids: Vec<u32>,
    greedy: Vec<u32>,
    margins: Vec<f32>,
}

fn reference() -> anyhow::Result<Reference> {
    Ok(serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/reference.json"))?)?)
}

#[test]
fn qwen2_tokenizer_matches_hugging_face() -> anyhow::Result<()> {
    let r = reference()?;
    let tok = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{DIR}/tokenizer.json"))?, None)?;
    for case in &r.texts {
        assert_eq!(tok.encode(&case.text, true), case.ids, "{:?}", case.text);
        assert_eq!(tok.decode(&case.ids, false)?, case.text);
    }
    assert_eq!(tok.encode(&r.prompt, true), r.prompt_ids);
    Ok(())
}

#[test]
fn qwen2_greedy_continuation_matches_transformers() -> anyhow::Result<()> {
    greedy_matches(None)
}

/// Decode attention split over context chunks (what GPUs run) gives the same continuation.
#[test]
fn qwen2_greedy_with_split_decode_attention() -> anyhow::Result<()> {
    greedy_matches(Some(true))
}

fn greedy_matches(split_attention: Option<bool>) -> anyhow::Result<()> {
    let r = reference()?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let reader = FileReader::open(format!("{DIR}/model.safetensors"))?;
    let config = std::fs::read_to_string(format!("{DIR}/config.json"))?;
    let tokenizer = std::fs::read_to_string(format!("{DIR}/tokenizer.json"))?;
    let engine = EngineOptions { max_seq: 64, max_batch: 8, split_attention, ..Default::default() };
    let (mut llama, _) = pollster::block_on(model::open_safetensors(
        &ctx,
        &reader,
        &config,
        &tokenizer,
        None,
        engine,
        WeightOptions::default(),
        &mut |_| {},
    ))?;
    assert!(llama.config.attn_bias);
    let mut got = vec![pollster::block_on(llama.prefill(&ctx, &r.prompt_ids))?];
    while got.len() < r.greedy.len() {
        got.push(pollster::block_on(llama.step(&ctx))?);
    }
    if let Some(i) = got.iter().zip(&r.greedy).position(|(a, b)| a != b) {
        panic!("token {i} differs: weft {got:?} transformers {:?} (margin there {})", r.greedy, r.margins[i]);
    }
    Ok(())
}

/// V at 8 bits and Q/K at 4 (as `weft quantize --keep v_proj=8` writes it) cannot be stacked:
/// every layer keeps Q/K/V apart with their biases. In the decode step with the norms folded
/// into the GEMVs (a GPU's kernels forced on any adapter), the three products write the columns
/// of the stacked product's buffer, their biases are added as one, and the RoPE + store is in
/// the split attention kernel; the greedy ids are those of separate dispatches.
#[test]
fn qwen2_with_qkv_kept_apart_and_biases_decodes_as_separate_dispatches() -> anyhow::Result<()> {
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
    let reader = FileReader::open(format!("{DIR}/model.safetensors"))?;
    let header = pollster::block_on(read_header(&reader))?.header;
    let config = LlamaConfig::from_hf_json(&std::fs::read_to_string(format!("{DIR}/config.json"))?)?;
    let tokenizer = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{DIR}/tokenizer.json"))?, None)?;
    let keep = vec![KeepRule::parse("v_proj=8")?, KeepRule::parse("embed_tokens=8")?];
    let plan = QuantizePlan::new(WeftQuant::new(4, 32, Scheme::Asym)?, keep);
    let (writer, _) = pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, &mut |_, _| {}))?;
    let path = std::env::temp_dir().join(format!("weft-qwen2-tiny-v8-{}.safetensors", std::process::id()));
    writer.write(&mut std::fs::File::create(&path)?)?;
    let prompt = reference()?.prompt_ids;
    let mut runs = Vec::new();
    for fuse_norms in [false, true] {
        let engine = EngineOptions {
            max_seq: 64,
            max_batch: 8,
            fuse_norms: Some(fuse_norms),
            split_attention: Some(true),
            tune: false,
            ..Default::default()
        };
        let reader = FileReader::open(&path)?;
        let mut llama = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?.0;
        assert!(llama.config.attn_bias);
        let layers = llama.weights.layers.len();
        let apart = llama.weights.layers.iter().filter(|l| matches!(l.qkv, Qkv::Apart { bqkv: Some(_), .. })).count();
        assert_eq!(apart, layers, "every layer keeps Q/K/V apart, with the three biases end to end");
        let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &prompt))?];
        while ids.len() < 20 {
            ids.push(pollster::block_on(llama.step(&ctx))?);
        }
        let kernels = llama.decode_kernels();
        let count = |prefix: &str| kernels.iter().filter(|k| k.starts_with(prefix)).count();
        let (dispatches, ropes, biases) = (llama.decode_dispatches(), count("rope"), count("bias_add"));
        println!("fuse_norms {fuse_norms}: {dispatches} dispatches a step, {ropes} RoPE kernels, {biases} bias adds, ids {ids:?}");
        if fuse_norms {
            // A block: three normalising Q/K/V GEMVs, one bias add, the attention with the
            // RoPE + store, the output GEMV adding into the stream, the gate/up GEMV and the down
            // GEMV taking the SwiGLU; then the embedding, the head and the sampler.
            assert_eq!((ropes, biases), (0, layers), "RoPE + store kernels and bias adds in the step");
            assert_eq!(dispatches, 8 * layers + 3, "dispatches a step");
        }
        runs.push(ids);
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(runs[1], runs[0], "greedy ids with Q/K/V apart into one buffer against separate dispatches");
    Ok(())
}
