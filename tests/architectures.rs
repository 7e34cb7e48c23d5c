//! The architectures beyond Llama 2 and Qwen2, each as a tiny random-weight checkpoint made with
//! its transformers config class (scripts/make_arch_fixture.py): Llama 3 (`llama3` RoPE scaling,
//! positions past the original context), Qwen3 (per-head q/k norms, tied head), Mistral (a
//! sliding window of 8 under a 20-token prompt), Gemma 2 (GeGLU, (1 + w) norms before and after
//! attention and MLP, √dim embedding scale, soft-capped scores and logits, local and global
//! layers, `query_pre_attn_scalar`), Gemma 3 (q/k norms, five local layers with their own RoPE
//! base to one global with linear scaling), Phi-3 (fused qkv and gate_up matrices, LongRoPE whose
//! generation crosses the original context and switches to the long factors). Each loads from
//! its Hugging Face folder and from its GGUF; on the GPU and on the CPU backend, every
//! checkpoint of a forward pass matches transformers (f32) and the greedy ids match `generate`.

#[path = "common/activations.rs"]
#[allow(dead_code)] // the SmolLM2 fixtures' helpers
mod fixtures;

use weft::cpu::{self, Arithmetic, CpuOptions};
use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::{FileReader, NativeSource};
use weft::model::{self, EngineOptions, Llama, WeightOptions};
use weft::ops::rope::RopeScaling;

use fixtures::{check_in, input_in, tolerance, F32_TOLERANCE};

/// The shared tokenizer of the fixtures (vocabulary 700).
const TOKENIZER: &str = "tests/fixtures/qwen2-tiny/tokenizer.json";

#[derive(serde::Deserialize)]
struct Reference {
    prompt_ids: Vec<u32>,
    greedy: Vec<u32>,
    margins: Vec<f32>,
}

fn reference(dir: &str) -> anyhow::Result<Reference> {
    Ok(serde_json::from_str(&std::fs::read_to_string(format!("{dir}/reference.json"))?)?)
}

fn engine() -> EngineOptions {
    EngineOptions { max_seq: 64, max_batch: 32, ..Default::default() }
}

/// Decode attention split over context chunks (what GPUs with many units run), masks included.
fn split_engine() -> EngineOptions {
    EngineOptions { split_attention: Some(true), ..engine() }
}

fn same_greedy(what: &str, got: &[u32], r: &Reference) {
    if let Some(i) = got.iter().zip(&r.greedy).position(|(a, b)| a != b) {
        panic!("{what}: token {i} differs: weft {got:?} transformers {:?} (margin there {})", r.greedy, r.margins[i]);
    }
    assert_eq!(got.len(), r.greedy.len());
}

fn open_hf(ctx: &GpuContext, dir: &str) -> anyhow::Result<Llama> {
    open_hf_with(ctx, dir, engine())
}

fn open_hf_with(ctx: &GpuContext, dir: &str, engine: EngineOptions) -> anyhow::Result<Llama> {
    let reader = FileReader::open(format!("{dir}/model.safetensors"))?;
    let config = std::fs::read_to_string(format!("{dir}/config.json"))?;
    let tokenizer = std::fs::read_to_string(TOKENIZER)?;
    let mut progress = |_| {};
    let open = model::open_safetensors(ctx, &reader, &config, &tokenizer, None, engine, WeightOptions::default(), &mut progress);
    Ok(pollster::block_on(open)?.0)
}

fn open_gguf(ctx: &GpuContext, dir: &str) -> anyhow::Result<Llama> {
    let reader = NativeSource::open(&format!("{dir}/model.gguf"))?;
    Ok(pollster::block_on(model::open(ctx, &reader, engine(), WeightOptions::default(), &mut |_| {}))?.0)
}

/// Both files on the GPU: checkpoints, then the greedy continuation.
fn on_gpu(dir: &str) -> anyhow::Result<Vec<Llama>> {
    let (input, r) = (input_in(dir)?, reference(dir)?);
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut models = Vec::new();
    for (what, open) in [("safetensors", open_hf as fn(&GpuContext, &str) -> _), ("gguf", open_gguf)] {
        let mut llama = open(&ctx, dir)?;
        println!("{dir} {what} on the GPU");
        let got = pollster::block_on(llama.checkpoints(&ctx, &input.ids))?;
        check_in(dir, &input, &got, llama.config.vocab, tolerance(llama.options.prompt_precision(ctx.capabilities())))?;
        llama.reset();
        let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &r.prompt_ids))?];
        while ids.len() < r.greedy.len() {
            ids.push(pollster::block_on(llama.step(&ctx))?);
        }
        same_greedy(&format!("{dir} {what}"), &ids, &r);
        models.push(llama);
    }
    Ok(models)
}

/// The GGUF on the CPU backend with f32 arithmetic.
fn on_cpu(dir: &str) -> anyhow::Result<()> {
    let (input, r) = (input_in(dir)?, reference(dir)?);
    let options = CpuOptions { max_seq: 64, max_batch: 32, arithmetic: Arithmetic::F32, ..Default::default() };
    let (mut llama, _) = pollster::block_on(cpu::open(&NativeSource::open(&format!("{dir}/model.gguf"))?, options))?;
    let got = llama.checkpoints(&input.ids)?;
    check_in(dir, &input, &got, llama.config.vocab, F32_TOLERANCE)?;
    llama.reset();
    let mut ids = vec![llama.prefill(&r.prompt_ids)?];
    while ids.len() < r.greedy.len() {
        ids.push(llama.step()?);
    }
    same_greedy(&format!("{dir} on the CPU"), &ids, &r);
    Ok(())
}

const LLAMA3: &str = "tests/fixtures/llama3-tiny";
const QWEN3: &str = "tests/fixtures/qwen3-tiny";
const MISTRAL: &str = "tests/fixtures/mistral-tiny";
const GEMMA2: &str = "tests/fixtures/gemma2-tiny";
const GEMMA3: &str = "tests/fixtures/gemma3-tiny";
const PHI3: &str = "tests/fixtures/phi3-tiny";

#[test]
fn llama3_matches_transformers_on_the_gpu() -> anyhow::Result<()> {
    let models = on_gpu(LLAMA3)?;
    // The folder's scaling parameters and the GGUF's per-pair factors are the same scaling.
    assert!(matches!(models[0].config.rope_scaling, RopeScaling::Llama3 { .. }));
    assert!(matches!(models[1].config.rope_scaling, RopeScaling::Factors(_)));
    Ok(())
}

#[test]
fn llama3_matches_transformers_on_the_cpu() -> anyhow::Result<()> {
    on_cpu(LLAMA3)
}

#[test]
fn qwen3_matches_transformers_on_the_gpu() -> anyhow::Result<()> {
    let models = on_gpu(QWEN3)?;
    assert!(models.iter().all(|m| m.config.qk_norm));
    Ok(())
}

#[test]
fn qwen3_matches_transformers_on_the_cpu() -> anyhow::Result<()> {
    on_cpu(QWEN3)
}

#[test]
fn mistral_sliding_window_matches_transformers_on_the_gpu() -> anyhow::Result<()> {
    let models = on_gpu(MISTRAL)?;
    // The cache holds the window and nothing else, whatever the engine asked for.
    assert!(models.iter().all(|m| m.config.sliding_window == Some(8) && m.options.max_seq == 8 && m.options.sinks == 0));
    Ok(())
}

#[test]
fn mistral_sliding_window_matches_transformers_on_the_cpu() -> anyhow::Result<()> {
    on_cpu(MISTRAL)
}

#[test]
fn gemma2_matches_transformers_on_the_gpu() -> anyhow::Result<()> {
    let models = on_gpu(GEMMA2)?;
    for m in &models {
        let c = &m.config;
        assert_eq!((c.window(0), c.window(1), c.window(2)), (Some(8), None, Some(8)));
        assert_eq!((c.attn_softcap, c.final_softcap), (Some(2.0), Some(3.0)));
    }
    // query_pre_attn_scalar in the folder, attention.scale in the GGUF.
    assert!(models.iter().all(|m| m.config.attention_scale() == 24f32.powf(-0.5)));
    Ok(())
}

#[test]
fn gemma2_matches_transformers_on_the_cpu() -> anyhow::Result<()> {
    on_cpu(GEMMA2)
}

#[test]
fn gemma2_greedy_with_split_decode_attention() -> anyhow::Result<()> {
    let r = reference(GEMMA2)?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut llama = open_hf_with(&ctx, GEMMA2, split_engine())?;
    let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &r.prompt_ids))?];
    while ids.len() < r.greedy.len() {
        ids.push(pollster::block_on(llama.step(&ctx))?);
    }
    same_greedy("gemma2 split", &ids, &r);
    Ok(())
}

#[test]
fn gemma3_matches_transformers_on_the_gpu() -> anyhow::Result<()> {
    let models = on_gpu(GEMMA3)?;
    for m in &models {
        let c = &m.config;
        let local: Vec<bool> = (0..6).map(|l| c.local_rope(l)).collect();
        assert_eq!(local, [true, true, true, true, true, false]);
        assert_eq!((c.rope_base, c.rope_local_base, &c.rope_scaling), (1e6, Some(1e4), &RopeScaling::Linear { factor: 2.0 }));
        assert!(c.qk_norm && c.attn_softcap.is_none());
    }
    Ok(())
}

#[test]
fn gemma3_matches_transformers_on_the_cpu() -> anyhow::Result<()> {
    on_cpu(GEMMA3)
}

#[test]
fn phi3_matches_transformers_on_the_gpu() -> anyhow::Result<()> {
    let models = on_gpu(PHI3)?;
    // The folder's rope_parameters and the GGUF's factor tensors and keys: the same LongRoPE,
    // with transformers' attention factor √(1 + ln(256 / 24) / ln 24).
    let factor = (1.0 + (256f64 / 24.0).ln() / 24f64.ln()).sqrt() as f32;
    for m in &models {
        match &m.config.rope_scaling {
            RopeScaling::LongRope { short, long, original_context, attention_factor } => {
                assert_eq!((short.len(), long.len(), *original_context), (8, 8, 24.0));
                assert!((attention_factor - factor).abs() < 1e-6, "{attention_factor} vs {factor}");
                assert_eq!((short[7], long[7]), (2.75, 22.0));
            }
            other => panic!("{other:?}"),
        }
    }
    Ok(())
}

#[test]
fn phi3_matches_transformers_on_the_cpu() -> anyhow::Result<()> {
    on_cpu(PHI3)
}

/// `logits` on a sequence that crosses Phi-3's original context mid-way computes it with the
/// long factors throughout, as `prefill` and `step` do: the prompt's logits first (short
/// factors, 20 < 24 positions), then the continuation's past position 24 equal the same rows of
/// one pass over the whole sequence (long factors from the start, as transformers computes it).
#[test]
fn phi3_logits_mid_sequence_redo_the_cache_with_the_long_factors() -> anyhow::Result<()> {
    let r = reference(PHI3)?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut llama = open_hf(&ctx, PHI3)?;
    let vocab = llama.config.vocab;
    let all: Vec<u32> = r.prompt_ids.iter().chain(&r.greedy).copied().collect();
    let whole = pollster::block_on(llama.logits(&ctx, &all, None))?;
    llama.reset();
    let prompt = pollster::block_on(llama.logits(&ctx, &r.prompt_ids, None))?;
    let rest = pollster::block_on(llama.logits(&ctx, &r.greedy, None))?;
    assert_eq!((prompt.len(), rest.len()), (r.prompt_ids.len() * vocab, r.greedy.len() * vocab));
    let expected = &whole[r.prompt_ids.len() * vocab..];
    let scale = expected.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
    let max_err = rest.iter().zip(expected).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
    println!("continuation logits: max |err| {max_err:.3e} of {scale:.3e}");
    let bound = tolerance(llama.options.prompt_precision(ctx.capabilities()));
    assert!(max_err / scale <= bound, "relative error {:.2e}", max_err / scale);
    // The prompt alone stays within the original context: short factors, not the whole pass's.
    let short_vs_long = prompt.iter().zip(&whole).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
    assert!(short_vs_long / scale > 1e-3, "the prompt's logits should differ from the long-factor pass");
    Ok(())
}

/// A folder whose weights are in two shards named by `model.safetensors.index.json` (the Llama 3
/// fixture's tensors split between its layers) opens through `open_folder` like the single
/// file: the joined header, each layer read from its shard, every checkpoint within tolerance.
#[test]
fn a_sharded_folder_opens_like_one_file() -> anyhow::Result<()> {
    use weft::format::writer::SafetensorsWriter;
    use weft::format::{ModelHeader, StorageType};
    use weft::loader::{read_header, RangeReader};

    let dir = std::env::temp_dir().join(format!("weft-sharded-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for file in ["config.json", "tokenizer.json"] {
        std::fs::copy(format!("{LLAMA3}/{file}"), dir.join(file))?;
    }
    let reader = FileReader::open(format!("{LLAMA3}/model.safetensors"))?;
    let ModelHeader::Safetensors(header) = pollster::block_on(read_header(&reader))?.header else { panic!("safetensors") };
    let names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
    let mut shards = [SafetensorsWriter::default(), SafetensorsWriter::default()];
    let mut map = serde_json::Map::new();
    for t in &header.tensors {
        // Layer 1 and what follows it in the second shard.
        let second = t.name.starts_with("model.layers.1.") || t.name == "model.norm.weight" || t.name == "lm_head.weight";
        let StorageType::Safe(dtype) = t.storage else { panic!("{}", t.name) };
        let bytes = pollster::block_on(reader.read_range(t.range.clone()))?;
        shards[second as usize].add(&t.name, dtype, &t.shape, bytes)?;
        map.insert(t.name.clone(), names[second as usize].into());
    }
    for (shard, name) in shards.iter().zip(names) {
        shard.write(&mut std::fs::File::create(dir.join(name))?)?;
    }
    std::fs::write(dir.join("model.safetensors.index.json"), serde_json::json!({ "weight_map": map }).to_string())?;

    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let folder = model::folder::Directory(dir.clone());
    let (mut llama, _, weights) = pollster::block_on(model::open_folder(&ctx, &folder, engine(), WeightOptions::default(), &mut |_| {}))?;
    let sizes: Vec<u64> = weights.readers().map(|r| r.len()).collect();
    assert_eq!(sizes.len(), 2);
    assert!(sizes.iter().all(|&s| s > 1000), "{sizes:?}");
    let input = input_in(LLAMA3)?;
    let got = pollster::block_on(llama.checkpoints(&ctx, &input.ids))?;
    check_in(LLAMA3, &input, &got, llama.config.vocab, tolerance(llama.options.prompt_precision(ctx.capabilities())))?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
