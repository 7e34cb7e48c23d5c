//! Models: configuration, the mapping of file tensor names to model parts, and the forward
//! pass. Model code builds on `ops` and never touches wgpu directly.

pub mod config;
pub mod eval;
pub mod llama;
pub mod load;
pub mod names;

pub use config::{Arch, LlamaConfig};
pub use llama::{EngineOptions, Llama};
pub use load::{Phase, Progress, WeightOptions};

use crate::error::{Error, Result};
use crate::format::ModelHeader;
use crate::gpu::GpuContext;
use crate::loader::{read_header, RangeReader};
use crate::tokenizer::Tokenizer;

/// Opens a model file: header, configuration, tokenizer, then the weights layer by layer, then
/// the compiled pipelines.
pub async fn open<R: RangeReader>(
    ctx: &GpuContext,
    reader: &R,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Llama, Tokenizer)> {
    let head = read_header(reader).await?;
    let total = reader.len();
    progress(Progress { phase: Phase::Header, step: 0, steps: 0, bytes_loaded: head.bytes_read, bytes_total: total });
    let (config, tokenizer) = match &head.header {
        ModelHeader::Gguf(g) => (
            LlamaConfig::from_gguf(&g.metadata, load::has_qkv_bias(&head.header))?,
            Tokenizer::from_gguf(&g.metadata)?,
        ),
        ModelHeader::Safetensors(_) => {
            return Err(Error::Model(format!(
                "{}: a safetensors file needs its config.json and tokenizer.json (open the model folder)",
                reader.name()
            )))
        }
    };
    let w = load::load_weights(ctx, reader, &head.header, &config, &weights, progress).await?;
    progress(Progress { phase: Phase::Compile, step: 0, steps: 0, bytes_loaded: total, bytes_total: total });
    let engine = EngineOptions { max_seq: engine.max_seq.min(config.context_length).max(1), ..engine };
    let llama = Llama::new(ctx, config, w, engine).await?;
    progress(Progress { phase: Phase::Ready, step: 0, steps: 0, bytes_loaded: total, bytes_total: total });
    Ok((llama, tokenizer))
}

/// The tokenizer alone, from the model file's header (to size a context before loading).
pub async fn open_tokenizer<R: RangeReader>(reader: &R) -> Result<Tokenizer> {
    match read_header(reader).await?.header {
        ModelHeader::Gguf(g) => Tokenizer::from_gguf(&g.metadata),
        ModelHeader::Safetensors(_) => Err(Error::Model(format!(
            "{}: a safetensors file carries no tokenizer; use the model folder's tokenizer.json",
            reader.name()
        ))),
    }
}

/// Like [`open_safetensors`] without needing a tokenizer (benchmarks feed token ids).
pub async fn open_safetensors_untokenized<R: RangeReader>(
    ctx: &GpuContext,
    reader: &R,
    config_json: &str,
    tokenizer_json: Option<&str>,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Llama> {
    let head = read_header(reader).await?;
    let config = LlamaConfig::from_hf_json(config_json)?;
    if let Some(json) = tokenizer_json {
        Tokenizer::from_hf_json(json, None)?;
    }
    let mut header = head.header;
    if let ModelHeader::Safetensors(st) = &mut header {
        tie_output(st, config_json);
    }
    let w = load::load_weights(ctx, reader, &header, &config, &weights, progress).await?;
    let engine = EngineOptions { max_seq: engine.max_seq.min(config.context_length).max(1), ..engine };
    Llama::new(ctx, config, w, engine).await
}

/// Opens a Hugging Face checkpoint: the weights in one safetensors file read through `reader`,
/// with the texts of its `config.json` and `tokenizer.json` (and the chat template from
/// `tokenizer_config.json`, if any).
pub async fn open_safetensors<R: RangeReader>(
    ctx: &GpuContext,
    reader: &R,
    config_json: &str,
    tokenizer_json: &str,
    chat_template: Option<String>,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Llama, Tokenizer)> {
    let head = read_header(reader).await?;
    let total = reader.len();
    progress(Progress { phase: Phase::Header, step: 0, steps: 0, bytes_loaded: head.bytes_read, bytes_total: total });
    let config = LlamaConfig::from_hf_json(config_json)?;
    let mut tokenizer = Tokenizer::from_hf_json(tokenizer_json, chat_template)?;
    if let Some(eos) = config_eos(config_json) {
        tokenizer.eos = Some(eos);
    }
    let mut header = head.header;
    if let ModelHeader::Safetensors(st) = &mut header {
        tie_output(st, config_json);
    }
    let w = load::load_weights(ctx, reader, &header, &config, &weights, progress).await?;
    progress(Progress { phase: Phase::Compile, step: 0, steps: 0, bytes_loaded: total, bytes_total: total });
    let engine = EngineOptions { max_seq: engine.max_seq.min(config.context_length).max(1), ..engine };
    let llama = Llama::new(ctx, config, w, engine).await?;
    progress(Progress { phase: Phase::Ready, step: 0, steps: 0, bytes_loaded: total, bytes_total: total });
    Ok((llama, tokenizer))
}

/// `eos_token_id` from config.json (a number, or the first of a list).
fn config_eos(config_json: &str) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(config_json).ok()?;
    let eos = v.get("eos_token_id")?;
    eos.as_u64().or_else(|| eos.as_array()?.first()?.as_u64()).map(|e| e as u32)
}

/// Checkpoints saved with tied embeddings may still carry an `lm_head.weight`; with
/// `tie_word_embeddings` the head is the embedding, so the separate copy is ignored.
fn tie_output(st: &mut crate::format::SafetensorsHeader, config_json: &str) {
    let tied = serde_json::from_str::<serde_json::Value>(config_json)
        .ok()
        .and_then(|v| v.get("tie_word_embeddings")?.as_bool())
        .unwrap_or(false);
    if tied {
        st.tensors.retain(|t| t.name != "lm_head.weight");
    }
}
