//! The library's one error type. Every variant says what went wrong and, where the user can act,
//! what to do about it.

use thiserror::Error;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    #[error("unknown GPU backend '{0}': use one of auto, vulkan, gl (set WEFT_BACKEND)")]
    UnknownBackend(String),

    #[error("no GPU adapter found ({tried}): {hint}")]
    NoAdapter { tried: String, hint: String },

    #[error("the GPU adapter refused a device: {0}")]
    RequestDevice(String),

    #[error("unknown device option {0} (set WEFT_LIMITS / WEFT_FEATURES, or init's options)")]
    DeviceOption(String),

    #[error(
        "not enough browser storage to cache {url}: {needed} more bytes are needed but only {available} are \
         free; delete cached models (deleteCachedModel, clearCache) or load with cache: false"
    )]
    Quota { url: String, needed: u64, available: u64 },

    #[error("shader '{shader}' could not be preprocessed: {message}")]
    ShaderPreprocess { shader: String, message: String },

    #[error("shader '{shader}' failed to compile: {message}")]
    ShaderCompile { shader: String, message: String },

    #[error("pipeline for shader '{shader}' could not be created: {message}")]
    PipelineCreate { shader: String, message: String },

    #[error("{op}: {message}")]
    Shape { op: &'static str, message: String },

    #[error(
        "buffer '{label}' needs {bytes} bytes but this GPU allows at most {limit} bytes per {what}"
    )]
    BufferTooLarge { label: String, bytes: u64, limit: u64, what: &'static str },

    #[error("reading back GPU buffer '{label}' failed: {message}")]
    Readback { label: String, message: String },

    #[error("the GPU ran out of memory: the model needs {needed} bytes on the GPU ({message})")]
    OutOfMemory { needed: u64, message: String },

    #[error("the GPU device was lost ({0}); reload the model to continue")]
    DeviceLost(String),

    #[error("the GPU reported an error: {0}")]
    Gpu(String),

    #[error(transparent)]
    Format(#[from] crate::format::FormatError),

    #[error("cannot decode {ty}: {message}")]
    Decode { ty: &'static str, message: String },

    #[error("tokenizer: {0}")]
    Tokenizer(String),

    #[error("model: {0}")]
    Model(String),

    /// A calibration file (`weft calibrate`) that is damaged, or made for another model.
    #[error("calibration file: {problem}; make it again with `weft calibrate` on this model")]
    Calibration { problem: String },

    #[error("the prompt is {tokens} tokens but the context holds {context}: shorten it, or load the model with a larger context")]
    ContextFull { tokens: usize, context: usize },

    /// A configuration value out of range or inconsistent with another, found where a file's
    /// header (GGUF metadata, config.json, a weft file's config) becomes a model configuration.
    #[error("model configuration: {field} {problem}; the file is damaged or describes a model weft cannot run")]
    BadConfig { field: String, problem: String },

    #[error("{what} is not supported: {hint}")]
    UnsupportedModel { what: String, hint: String },

    #[error("the model file has no tensor '{name}'; it is incomplete or not the model its configuration describes")]
    MissingTensor { name: String },

    #[error("tensor '{name}' has shape {shape:?} but the model configuration needs {expected:?}")]
    TensorShape { name: String, shape: Vec<u64>, expected: Vec<u64> },

    /// A float matrix quantized while loading holds NaN or an infinity, which no scale
    /// represents.
    #[error("tensor '{name}' holds NaN or infinite values and cannot be quantized: load the model without `quantize`, or repair the file")]
    NonFiniteWeights { name: String },

    /// Found before any weight is fetched: the model with these options cannot fit.
    #[error("the model needs {needed} bytes for {what} but only {available} are available: {hint}")]
    ModelTooLarge { what: String, needed: u64, available: u64, hint: String },

    /// The CPU backend holds the model in this process's memory; in wasm32 that is at most
    /// 4 GiB, whatever the machine has.
    #[error("the model needs {needed} bytes of memory for its weights and KV cache, more than the {limit} bytes this build can address (a wasm32 module addresses at most 4 GiB): use a smaller model or quantization, or a shorter maxContext")]
    AddressSpace { needed: u64, limit: u64 },

    #[error(transparent)]
    Load(#[from] crate::loader::LoadError),
}
