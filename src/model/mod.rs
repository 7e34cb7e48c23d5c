//! Models: configuration, the mapping of file tensor names to model parts, and the forward
//! pass. Model code builds on `ops` and never touches wgpu directly.

pub mod config;
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
