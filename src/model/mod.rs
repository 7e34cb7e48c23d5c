//! Models: configuration, the mapping of file tensor names to model parts, and the forward
//! pass. Model code builds on `ops` and never touches wgpu directly.

pub mod bert;
pub mod budget;
pub mod cnn;
pub mod config;
pub mod convert;
pub mod eval;
pub mod fit;
pub mod folder;
pub mod graph;
pub mod hf_config;
pub mod llama;
pub mod load;
mod load_matrix;
mod load_rows;
pub mod load_times;
pub mod names;

pub use config::{Arch, LlamaConfig};
pub use crate::ops::kv::KvFormat;
pub use llama::{kv_bytes_per_token, EngineOptions, Llama, StepProfile};
pub use fit::{check_memory_fit, DeviceMemory, MemoryNeeds};
pub use load::{Phase, Progress, QuantizeOn, WeightOptions};
pub use load_times::LoadTimes;
use load_times::LoadClock;

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
    let start = LoadClock::start();
    let mut header = read_header_reporting(reader, progress).await?;
    let (mut config, tokenizer) = header_parts(&header, reader.name())?;
    load::prepare_header(reader, &mut header, &mut config).await?;
    let header_ms = LoadClock::since(start);
    let mut llama = build(ctx, &load::read_range_of(reader), reader.len(), &header, config, engine, weights, progress).await?;
    llama.load_times.header_ms += header_ms;
    Ok((llama, tokenizer))
}

/// The configuration and tokenizer a GGUF header or a weft safetensors file carries.
pub(crate) fn header_parts(header: &ModelHeader, name: &str) -> Result<(LlamaConfig, Tokenizer)> {
    match header {
        ModelHeader::Gguf(g) => Ok((
            LlamaConfig::from_gguf(&g.metadata, load::has_qkv_bias(header))?,
            Tokenizer::from_gguf(&g.metadata)?,
        )),
        ModelHeader::Safetensors(st) => weft_file_parts(&st.metadata)?.ok_or_else(|| {
            Error::Model(format!("{name}: a safetensors file needs its config.json and tokenizer.json (open the model folder)"))
        }),
    }
}

async fn read_header_reporting<R: RangeReader>(reader: &R, progress: &mut dyn FnMut(Progress)) -> Result<ModelHeader> {
    let head = read_header(reader).await?;
    progress(Progress { phase: Phase::Header, step: 0, steps: 0, bytes_loaded: head.bytes_read, bytes_total: reader.len() });
    Ok(head.header)
}

/// The weights, group by group, then the compiled pipelines: what every opener shares (one copy
/// whatever the reader: `total` is the size of what `read` reads).
#[allow(clippy::too_many_arguments)]
async fn build(
    ctx: &GpuContext,
    read: &load::ReadRange<'_>,
    total: u64,
    header: &ModelHeader,
    config: LlamaConfig,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Llama> {
    // Dimensions against the tensors present, then the memory they need against the device,
    // both before the first weight is fetched.
    load::validate_tensors(header, &config)?;
    let device = DeviceMemory::of(ctx, weights.memory_budget_mb);
    // `quantize: 'auto'` plans the formats within the budget; the buffer limits are checked
    // as for any load.
    let uploaded = fit::tensors_as_uploaded(header)?;
    let plan = match weights.auto {
        true => Some(fit::plan_auto(&config, &uploaded, &engine, &device)?),
        false => None,
    };
    let limits_only = DeviceMemory { budget_bytes: None, ..device };
    check_memory_fit(&config, &uploaded, &engine, &weights, if weights.auto { &limits_only } else { &device })?;
    let w = load::load_weights_from(ctx, read, header, &config, &weights, plan, progress).await?;
    progress(Progress { phase: Phase::Compile, step: 0, steps: 0, bytes_loaded: total, bytes_total: total });
    let (max_seq, sinks) = config.kv_window(engine.max_seq, engine.sinks);
    let engine = EngineOptions { max_seq, sinks, ..engine };
    let llama = Llama::new(ctx, config, w, engine).await?;
    progress(Progress { phase: Phase::Ready, step: 0, steps: 0, bytes_loaded: total, bytes_total: total });
    Ok(llama)
}

/// Metadata keys of a self-contained weft safetensors file (docs/FORMAT.md).
pub const WEFT_VERSION_KEY: &str = "weft.version";
pub const WEFT_CONFIG_KEY: &str = "weft.config";
pub const WEFT_TOKENIZER_KEY: &str = "weft.tokenizer";

/// Config and tokenizer carried by a weft safetensors file; None for other safetensors files.
pub fn weft_file_parts(
    metadata: &std::collections::BTreeMap<String, String>,
) -> Result<Option<(LlamaConfig, Tokenizer)>> {
    if !metadata.contains_key(WEFT_VERSION_KEY) {
        return Ok(None);
    }
    let get = |key: &str| metadata.get(key).ok_or_else(|| Error::Model(format!("weft file without {key}")));
    let config = LlamaConfig::from_weft_json(get(WEFT_CONFIG_KEY)?)?;
    let spec: crate::tokenizer::TokenizerSpec =
        serde_json::from_str(get(WEFT_TOKENIZER_KEY)?).map_err(|e| Error::Model(format!("{WEFT_TOKENIZER_KEY}: {e}")))?;
    Ok(Some((config, Tokenizer::new(spec)?)))
}

/// The tokenizer alone, from the model file's header (to size a context before loading).
pub async fn open_tokenizer<R: RangeReader>(reader: &R) -> Result<Tokenizer> {
    match read_header(reader).await?.header {
        ModelHeader::Gguf(g) => Tokenizer::from_gguf(&g.metadata),
        ModelHeader::Safetensors(st) => match weft_file_parts(&st.metadata)? {
            Some((_, tokenizer)) => Ok(tokenizer),
            None => Err(Error::Model(format!(
                "{}: a safetensors file carries no tokenizer; use the model folder's tokenizer.json",
                reader.name()
            ))),
        },
    }
}

/// The model of a Hugging Face checkpoint without its tokenizer (benchmarks feed token ids):
/// the weights in one safetensors file read through `reader`, and the text of `config.json`.
pub async fn open_safetensors_weights<R: RangeReader>(
    ctx: &GpuContext,
    reader: &R,
    config_json: &str,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Llama> {
    let start = LoadClock::start();
    let header = read_header_reporting(reader, progress).await?;
    let header_ms = LoadClock::since(start);
    let mut llama = open_hf_weights(ctx, reader, header, config_json, engine, weights, progress).await?;
    llama.load_times.header_ms += header_ms;
    Ok(llama)
}

/// The model of a Hugging Face checkpoint whose safetensors header is read.
async fn open_hf_weights<R: RangeReader>(
    ctx: &GpuContext,
    reader: &R,
    mut header: ModelHeader,
    config_json: &str,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Llama> {
    let config = prepare_hf(reader, &mut header, config_json).await?;
    build(ctx, &load::read_range_of(reader), reader.len(), &header, config, engine, weights, progress).await
}

/// A Hugging Face checkpoint's configuration from `config.json`, and its header made ready for
/// loading: a head tied to the embedding dropped, RoPE factors read, fused matrices split.
pub(crate) async fn prepare_hf<R: RangeReader>(reader: &R, header: &mut ModelHeader, config_json: &str) -> Result<LlamaConfig> {
    let mut config = LlamaConfig::from_hf_json(config_json)?;
    if let ModelHeader::Safetensors(st) = header {
        tie_output(st, config_json);
    }
    load::prepare_header(reader, header, &mut config).await?;
    Ok(config)
}

/// Opens a Hugging Face model folder (`folder::read_folder`: config.json, the tokenizer files,
/// model.safetensors or the shards of its index): the model, its tokenizer, and the reader of
/// its weights, for what the load fetched.
pub async fn open_folder<S: folder::FolderSource>(
    ctx: &GpuContext,
    source: &S,
    engine: EngineOptions,
    weights: WeightOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Llama, Tokenizer, folder::Shards<S::Reader>)> {
    let start = LoadClock::start();
    let f = folder::read_folder(source).await?;
    let header_ms = LoadClock::since(start);
    let total = f.reader.len();
    progress(Progress { phase: Phase::Header, step: 0, steps: 0, bytes_loaded: 0, bytes_total: total });
    let mut llama = open_hf_weights(ctx, &f.reader, f.header, &f.config_json, engine, weights, progress).await?;
    llama.load_times.header_ms += header_ms;
    Ok((llama, f.tokenizer, f.reader))
}

/// Opens a Hugging Face checkpoint: the weights in one safetensors file read through `reader`,
/// with the texts of its `config.json` and `tokenizer.json` (and the chat template from
/// `tokenizer_config.json`, if any). `config.json`'s `eos_token_id`s stop generation.
#[allow(clippy::too_many_arguments)]
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
    let files = crate::tokenizer::HfTokenizerFiles {
        tokenizer_json,
        chat_template_jinja: chat_template.as_deref(),
        config: Some(config_json),
        ..Default::default()
    };
    let tokenizer = Tokenizer::from_hf_files(&files)?;
    let llama = open_safetensors_weights(ctx, reader, config_json, engine, weights, progress).await?;
    Ok((llama, tokenizer))
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
