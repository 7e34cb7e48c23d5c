//! Opening a model for the CPU engine: the header, then each weight read into memory in its
//! stored format (GGUF, a weft safetensors file with its packed matrices, or a Hugging Face
//! folder's floats), or, where the load asks for it, each float matrix quantized by the CPU
//! reference quantizer as it is read (the bytes `weft quantize` writes). Weights are read one
//! tensor at a time, so a load holds at most one stored matrix beside what it keeps.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::format::{ModelHeader, TensorInfo};
use crate::loader::{read_header, RangeReader};
use crate::model::fit::{is_float_matrix, plan_auto, weft_bytes, AutoPlan, DeviceMemory};
use crate::model::folder::{read_folder, FolderSource, Shards};
use crate::model::load::{
    chosen_format, norm_shift, prepare_header, quant_digest, quantize_stored, read_range_of, validate_tensors, weft_entries, ReadRange,
};
use crate::model::names::{part_of_in, LayerPart, Part};
use crate::model::{header_parts, prepare_hf, EngineOptions, LlamaConfig, WeightOptions};
use crate::model::llama::Quantized;
use crate::ops::kv::KvFormat;
use crate::quant::decode_to_f32;
use crate::tokenizer::Tokenizer;

use super::engine::{CpuLlama, CpuOptions, CpuWeights, LayerWeights};
use super::matrix::CpuMatrix;

/// A model opened on the CPU: the engine, its tokenizer, and what the load quantized.
pub struct CpuLoaded {
    pub llama: CpuLlama,
    pub tokenizer: Tokenizer,
    /// The matrices quantized while loading, in load order, each with the digest of its packed
    /// bytes ([`quant_digest`]).
    pub quantized: Vec<Quantized>,
    /// `WeightOptions::auto`: the formats planned for the budget.
    pub plan: Option<AutoPlan>,
}

/// Opens a GGUF or weft safetensors model on the CPU (no GPU involved), weights as stored.
pub async fn open<R: RangeReader>(reader: &R, options: CpuOptions) -> Result<(CpuLlama, Tokenizer)> {
    let loaded = open_with(reader, options, &WeightOptions::default()).await?;
    Ok((loaded.llama, loaded.tokenizer))
}

/// Opens a GGUF or weft safetensors model on the CPU, float matrices quantized as `weights`
/// asks (`quantize`, `default_keep`, `auto` with `memory_budget_mb`; the GPU's options are
/// not used).
pub async fn open_with<R: RangeReader>(reader: &R, options: CpuOptions, weights: &WeightOptions) -> Result<CpuLoaded> {
    let mut header = read_header(reader).await?.header;
    let (mut config, tokenizer) = header_parts(&header, reader.name())?;
    prepare_header(reader, &mut header, &mut config).await?;
    load(reader, &header, config, tokenizer, options, weights).await
}

/// Opens a Hugging Face model folder (`config.json`, the tokenizer files, `model.safetensors`
/// or the shards of its index) on the CPU, as [`open_with`] does a file; with the shards'
/// reader, for what the load fetched.
pub async fn open_folder<S: FolderSource>(
    source: &S,
    options: CpuOptions,
    weights: &WeightOptions,
) -> Result<(CpuLoaded, Shards<S::Reader>)> {
    let folder = read_folder(source).await?;
    let mut header = folder.header;
    let config = prepare_hf(&folder.reader, &mut header, &folder.config_json).await?;
    let loaded = load(&folder.reader, &header, config, folder.tokenizer, options, weights).await?;
    Ok((loaded, folder.reader))
}

/// The GPU engine's options that size the same KV cache and batch, for the memory plan.
fn engine_options(options: &CpuOptions) -> EngineOptions {
    EngineOptions { max_seq: options.max_seq, sinks: options.sinks, max_batch: options.max_batch, kv: options.kv, ..Default::default() }
}

async fn load<R: RangeReader>(
    reader: &R,
    header: &ModelHeader,
    config: LlamaConfig,
    tokenizer: Tokenizer,
    options: CpuOptions,
    weights: &WeightOptions,
) -> Result<CpuLoaded> {
    load_from(&read_range_of(reader), header, config, tokenizer, options, weights).await
}

/// The body of every load, through one reading function whatever the reader: a single copy of
/// it in the wasm module for model files and folders alike.
async fn load_from(
    read: &ReadRange<'_>,
    header: &ModelHeader,
    config: LlamaConfig,
    tokenizer: Tokenizer,
    options: CpuOptions,
    weights: &WeightOptions,
) -> Result<CpuLoaded> {
    validate_tensors(header, &config)?;
    let weft = weft_entries(header)?;
    let c = &config;
    let max_seq = options.max_seq.min(config.context_length).max(1);
    let budget_bytes = weights.memory_budget_mb.map(|mb| mb.saturating_mul(1_000_000));
    let plan = match weights.auto {
        true => {
            // The CPU has no buffer limits; the budget is the whole of the check.
            let device = DeviceMemory { max_buffer_bytes: u64::MAX, max_binding_bytes: u64::MAX, budget_bytes };
            Some(plan_auto(c, header.tensors(), &engine_options(&options), &device)?)
        }
        false => None,
    };
    let plan = plan.as_ref();
    let needed = with_kv_cache(bytes_held(header, weights, plan)?, c, max_seq, options.kv);
    if let (Some(budget), None) = (budget_bytes, plan) {
        if needed > budget {
            return Err(Error::ModelTooLarge {
                what: "weights and KV cache".into(),
                needed,
                available: budget,
                hint: "raise the memory budget, quantize the model ('auto' fits it to the budget), or use a shorter context".into(),
            });
        }
    }
    fits_address_space(needed, (usize::MAX as u64).saturating_add(1))?;
    let mut infos: HashMap<Part, &TensorInfo> = HashMap::new();
    for t in header.tensors() {
        let name = if weft.contains_key(&t.name) { t.name.trim_end_matches(".weft_q") } else { &t.name };
        if let Some(p) = part_of_in(name, config.arch) {
            infos.insert(p, t);
        }
    }
    let info = |p: Part| infos.get(&p).copied().ok_or_else(|| Error::Model(format!("the file has no {p:?} weight")));
    let quantized = RefCell::new(Vec::new());
    // References, so that each async block below copies them rather than taking the values.
    let (info, weft, quantized) = (&info, &weft, &quantized);
    let matrix = |p: Part, rows: usize, cols: usize| async move {
        let t = info(p)?;
        let bytes = read(t.range.clone()).await?;
        match weft.get(&t.name) {
            Some(e) => {
                if e.shape != [rows, cols] {
                    return Err(Error::Model(format!("{} has shape {:?}, expected [{rows}, {cols}]", t.name, e.shape)));
                }
                let scales = read(e.scale.range.clone()).await?;
                let zeros = match &e.zero {
                    Some(z) => Some(read(z.range.clone()).await?),
                    None => None,
                };
                Ok(CpuMatrix::from_weft(e.matrix(&t.name, &bytes, &scales, zeros.as_deref())?))
            }
            None if t.shape == [rows as u64, cols as u64] => match quantizes(t, weights, plan)? {
                Some(q) => {
                    let m = quantize_stored(t, &bytes, q, rows, cols)?;
                    quantized.borrow_mut().push(Quantized { name: t.name.clone(), format: q, digest: Some(quant_digest(&m)) });
                    Ok(CpuMatrix::from_weft(m))
                }
                None => CpuMatrix::from_storage(&t.name, t.storage, rows, cols, bytes),
            },
            None => Err(Error::Model(format!("{} has shape {:?}, expected [{rows}, {cols}]", t.name, t.shape))),
        }
    };
    let vector = |p: Part, len: usize| async move {
        let t = info(p)?;
        if t.elements() != len as u64 {
            return Err(Error::Model(format!("{} has shape {:?}, expected {len} values", t.name, t.shape)));
        }
        let mut v = decode_to_f32(t.storage, &read(t.range.clone()).await?, len)?;
        let shift = norm_shift(header, c, p);
        v.iter_mut().for_each(|x| *x += shift);
        Ok(v)
    };
    let gemma = c.arch.is_gemma();
    let mut layers = Vec::with_capacity(c.n_layers);
    for i in 0..c.n_layers {
        let l = |lp: LayerPart| Part::Layer(i, lp);
        let bias = |lp: LayerPart, len: usize| {
            let v = c.attn_bias.then(|| vector(l(lp), len));
            async move {
                match v {
                    Some(v) => v.await.map(Some),
                    None => Ok(None),
                }
            }
        };
        layers.push(LayerWeights {
            attn_norm: vector(l(LayerPart::AttnNorm), c.dim).await?,
            wq: matrix(l(LayerPart::Q), c.q_dim(), c.dim).await?,
            wk: matrix(l(LayerPart::K), c.kv_dim(), c.dim).await?,
            wv: matrix(l(LayerPart::V), c.kv_dim(), c.dim).await?,
            bq: bias(LayerPart::QBias, c.q_dim()).await?,
            bk: bias(LayerPart::KBias, c.kv_dim()).await?,
            bv: bias(LayerPart::VBias, c.kv_dim()).await?,
            q_norm: if c.qk_norm { Some(vector(l(LayerPart::QNorm), c.head_dim).await?) } else { None },
            k_norm: if c.qk_norm { Some(vector(l(LayerPart::KNorm), c.head_dim).await?) } else { None },
            wo: matrix(l(LayerPart::AttnOut), c.dim, c.q_dim()).await?,
            ffn_norm: vector(l(LayerPart::FfnNorm), c.dim).await?,
            post_attn_norm: if gemma { Some(vector(l(LayerPart::PostAttnNorm), c.dim).await?) } else { None },
            post_ffn_norm: if gemma { Some(vector(l(LayerPart::PostFfnNorm), c.dim).await?) } else { None },
            gate: matrix(l(LayerPart::Gate), c.ffn_dim, c.dim).await?,
            up: matrix(l(LayerPart::Up), c.ffn_dim, c.dim).await?,
            down: matrix(l(LayerPart::Down), c.dim, c.ffn_dim).await?,
        });
    }
    let cpu_weights = CpuWeights {
        embedding: matrix(Part::Embedding, c.vocab, c.dim).await?,
        layers,
        out_norm: vector(Part::OutputNorm, c.dim).await?,
        output: match infos.contains_key(&Part::Output) {
            true => Some(matrix(Part::Output, c.vocab, c.dim).await?),
            false => None,
        },
    };
    let (max_seq, sinks) = config.kv_window(max_seq, options.sinks);
    let engine = CpuOptions { max_seq, sinks, ..options };
    let llama = CpuLlama::new(config, cpu_weights, engine)?;
    Ok(CpuLoaded { llama, tokenizer, quantized: quantized.take(), plan: plan.cloned() })
}

/// The weft format a stored float matrix is quantized to at this load; None keeps it as
/// stored.
fn quantizes(t: &TensorInfo, weights: &WeightOptions, plan: Option<&AutoPlan>) -> Result<Option<crate::quant::weft::WeftQuant>> {
    match is_float_matrix(t) {
        true => chosen_format(&t.name, weights, plan),
        false => Ok(None),
    }
}

/// Bytes of the weights the engine will hold after this load, from the header: each matrix
/// quantized at load in its format, every other tensor as stored (the upper bound of what the
/// engine keeps packed).
fn bytes_held(header: &ModelHeader, weights: &WeightOptions, plan: Option<&AutoPlan>) -> Result<u64> {
    header.tensors().iter().try_fold(0u64, |sum, t| {
        let bytes = match (quantizes(t, weights, plan)?, t.shape.as_slice()) {
            (Some(q), &[rows, cols]) => weft_bytes(q, rows, cols),
            _ => t.byte_len(),
        };
        Ok(sum.saturating_add(bytes))
    })
}

fn with_kv_cache(weights: u64, c: &LlamaConfig, max_seq: usize, kv: KvFormat) -> u64 {
    weights.saturating_add(crate::model::kv_bytes_per_token(c, kv).saturating_mul(max_seq as u64))
}

/// Bytes the engine will hold for the model, known from the header before any weight is read:
/// every tensor as stored (the upper bound of what it keeps packed) and the KV cache in `kv`.
pub fn memory_needed(header: &ModelHeader, c: &LlamaConfig, max_seq: usize, kv: KvFormat) -> u64 {
    let weights: u64 = header.tensors().iter().map(|t| t.range.end - t.range.start).sum();
    with_kv_cache(weights, c, max_seq, kv)
}

/// A model that cannot fit the address space (4 GiB for wasm32) is refused by name before any
/// weight is read, rather than failing on an allocation halfway through.
pub fn fits_address_space(needed: u64, limit: u64) -> Result<()> {
    if needed > limit {
        return Err(Error::AddressSpace { needed, limit });
    }
    Ok(())
}
