//! A tiny random-weight Qwen2 checkpoint (attention biases, NeoX RoPE, tied head, its own
//! Qwen2-pattern tokenizer.json) against transformers: tokenizer ids and the greedy
//! continuation (tests/fixtures/qwen2-tiny, made by scripts/make_qwen2_fixture.py).

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::FileReader;
use weft::model::{self, EngineOptions, WeightOptions};
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
