//! A model with Llama 3's vocabulary of 128,256 tokens and a tied head (Llama 3.2 1B's layout),
//! tiny otherwise (scripts/make_vocab_fixture.py), loaded from its Hugging Face folder and from
//! its GGUF under a
//! 128 MiB storage binding limit (Firefox's) and under one of 768 KiB, a third of its 2 MiB
//! embedding (with one-token passes, whose logits fit it): there the embedding, which is also
//! the head, is split over several bindings, as
//! Llama 3's 525 MB embedding is under 128 MiB. Either way the logits of the prompt's last
//! position match transformers (f32) over the whole vocabulary and the greedy ids match
//! `generate` (16 under 128 MiB, 4 split; this tiny model repeats one token). The prompt's ids come from all over the
//! vocabulary, so the embedding rows are gathered from every part.

#[path = "common/activations.rs"]
#[allow(dead_code)]
mod fixtures;

use std::path::Path;

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::FileReader;
use weft::model::{self, EngineOptions, Llama, WeightOptions};

const DIR: &str = "tests/fixtures/vocab128k-tiny";
const TOKENIZER: &str = "tests/fixtures/qwen2-tiny/tokenizer.json";

#[derive(serde::Deserialize)]
struct Reference {
    prompt_ids: Vec<u32>,
    greedy: Vec<u32>,
}

/// Loads the fixture with the engine options given, from one of its two files.
type Open = fn(&GpuContext, EngineOptions) -> anyhow::Result<Llama>;

fn open_folder(ctx: &GpuContext, engine: EngineOptions) -> anyhow::Result<Llama> {
    let config = std::fs::read_to_string(format!("{DIR}/config.json"))?;
    let tokenizer = std::fs::read_to_string(TOKENIZER)?;
    let reader = FileReader::open(format!("{DIR}/model.safetensors"))?;
    let mut progress = |_| {};
    let open = model::open_safetensors(ctx, &reader, &config, &tokenizer, None, engine, WeightOptions::default(), &mut progress);
    Ok(pollster::block_on(open)?.0)
}

fn open_gguf(ctx: &GpuContext, engine: EngineOptions) -> anyhow::Result<Llama> {
    let reader = FileReader::open(format!("{DIR}/model.gguf"))?;
    Ok(pollster::block_on(model::open(ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?.0)
}

/// Under each binding limit: the embedding split as it must be, the last position's logits
/// against transformers, the greedy ids against `generate`.
fn matches_under_both_limits(open: Open) -> anyhow::Result<()> {
    let r: Reference = serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/reference.json"))?)?;
    let (_, last) = fixtures::read_npy(&Path::new(DIR).join("last_logits.npy"))?;
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let caps = ctx.capabilities().clone();
    // The split run generates 4 tokens, not 16: one-token passes over a 128k head are slow on a
    // software adapter.
    for (limit, min_parts, max_batch, tokens) in [(128u64 << 20, 1, 32, 16), (768 << 10, 3, 1, 4)] {
        let mut c = caps.clone();
        c.limits.max_storage_buffer_binding_size = limit.min(caps.limits.max_storage_buffer_binding_size);
        ctx.set_capabilities(c);
        let t0 = std::time::Instant::now();
        let mut llama = open(&ctx, EngineOptions { max_seq: 64, max_batch, ..Default::default() })?;
        assert_eq!(llama.config.vocab, 128_256);
        assert!(llama.weights.output.is_none(), "the head is the embedding");
        let parts = llama.weights.embedding.parts.len();
        assert!(parts >= min_parts, "limit {limit}: {parts} parts");
        for p in &llama.weights.embedding.parts {
            assert!(p.tensors().iter().all(|t| t.bytes() <= limit), "limit {limit}: a part over it");
        }

        println!("limit {limit}: loaded in {:?}", t0.elapsed());
        let logits = pollster::block_on(llama.logits(&ctx, &r.prompt_ids, None))?;
        let got = &logits[(r.prompt_ids.len() - 1) * 128_256..];
        let max_err = got.iter().zip(&last).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
        let scale = last.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
        println!("limit {limit}: {parts} parts, last-position logits max |err| {max_err:.3e} of {scale:.3e}");
        let bound = fixtures::tolerance(llama.options.prompt_precision(ctx.capabilities()));
        assert!(max_err / scale <= bound, "limit {limit}: relative error {:.2e}", max_err / scale);

        llama.reset();
        let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &r.prompt_ids))?];
        while ids.len() < tokens {
            ids.push(pollster::block_on(llama.step(&ctx))?);
        }
        assert_eq!(ids, r.greedy[..tokens], "limit {limit}");
        println!("limit {limit}: done in {:?}", t0.elapsed());
    }
    Ok(())
}

#[test]
fn a_128k_vocabulary_splits_over_bindings_and_matches_transformers() -> anyhow::Result<()> {
    matches_under_both_limits(open_folder)
}

/// The same weights in a GGUF (llama.cpp's names and Q/K row order, written with `gguf`; the
/// vocabulary is the shared tokenizer's tokens and reserved control tokens up to 128,256).
#[test]
fn a_128k_vocabulary_gguf_splits_and_matches_transformers() -> anyhow::Result<()> {
    let reader = FileReader::open(format!("{DIR}/model.gguf"))?;
    let tokenizer = pollster::block_on(model::open_tokenizer(&reader))?;
    assert_eq!(tokenizer.vocab_size(), 128_256);
    matches_under_both_limits(open_gguf)
}
