//! Opening a model for the CPU engine: the header, then each weight read into memory in its
//! stored format (GGUF, or a weft safetensors file with its packed matrices).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::format::TensorInfo;
use crate::loader::{read_header, RangeReader};
use crate::model::load::{norm_shift, weft_entries};
use crate::model::names::{part_of_in, LayerPart, Part};
use crate::model::header_parts;
use crate::ops::kv::KvFormat;
use crate::quant::decode_to_f32;
use crate::tokenizer::Tokenizer;

use super::engine::{CpuLlama, CpuOptions, CpuWeights, LayerWeights};
use super::matrix::CpuMatrix;

/// Opens a GGUF or weft safetensors model on the CPU (no GPU involved).
pub async fn open<R: RangeReader>(reader: &R, options: CpuOptions) -> Result<(CpuLlama, Tokenizer)> {
    let mut header = read_header(reader).await?.header;
    let (mut config, tokenizer) = header_parts(&header, reader.name())?;
    crate::model::load::prepare_header(reader, &mut header, &mut config).await?;
    let weft = weft_entries(&header)?;
    let c = &config;
    let max_seq = options.max_seq.min(config.context_length).max(1);
    fits_address_space(memory_needed(&header, c, max_seq, options.kv), (usize::MAX as u64).saturating_add(1))?;
    let mut infos: HashMap<Part, &TensorInfo> = HashMap::new();
    for t in header.tensors() {
        let name = if weft.contains_key(&t.name) { t.name.trim_end_matches(".weft_q") } else { &t.name };
        if let Some(p) = part_of_in(name, config.arch) {
            infos.insert(p, t);
        }
    }
    let info = |p: Part| infos.get(&p).copied().ok_or_else(|| Error::Model(format!("the file has no {p:?} weight")));
    // References, so that each async block below copies them rather than taking the values.
    let (info, weft) = (&info, &weft);
    let matrix = |p: Part, rows: usize, cols: usize| async move {
        let t = info(p)?;
        let bytes = reader.read_range(t.range.clone()).await?;
        match weft.get(&t.name) {
            Some(e) => {
                if e.shape != [rows, cols] {
                    return Err(Error::Model(format!("{} has shape {:?}, expected [{rows}, {cols}]", t.name, e.shape)));
                }
                let scales = reader.read_range(e.scale.range.clone()).await?;
                let zeros = match &e.zero {
                    Some(z) => Some(reader.read_range(z.range.clone()).await?),
                    None => None,
                };
                Ok(CpuMatrix::from_weft(e.matrix(&t.name, &bytes, &scales, zeros.as_deref())?))
            }
            None if t.shape == [rows as u64, cols as u64] => CpuMatrix::from_storage(&t.name, t.storage, rows, cols, bytes),
            None => Err(Error::Model(format!("{} has shape {:?}, expected [{rows}, {cols}]", t.name, t.shape))),
        }
    };
    let header = &header;
    let vector = |p: Part, len: usize| async move {
        let t = info(p)?;
        if t.elements() != len as u64 {
            return Err(Error::Model(format!("{} has shape {:?}, expected {len} values", t.name, t.shape)));
        }
        let mut v = decode_to_f32(t.storage, &reader.read_range(t.range.clone()).await?, len)?;
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
    let weights = CpuWeights {
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
    Ok((CpuLlama::new(config, weights, engine)?, tokenizer))
}

/// Bytes the engine will hold for the model, known from the header before any weight is read:
/// every tensor as stored (the upper bound of what it keeps packed) and the KV cache in `kv`.
pub fn memory_needed(header: &crate::format::ModelHeader, c: &crate::model::LlamaConfig, max_seq: usize, kv: KvFormat) -> u64 {
    let weights: u64 = header.tensors().iter().map(|t| t.range.end - t.range.start).sum();
    weights.saturating_add(crate::model::kv_bytes_per_token(c, kv).saturating_mul(max_seq as u64))
}

/// A model that cannot fit the address space (4 GiB for wasm32) is refused by name before any
/// weight is read, rather than failing on an allocation halfway through.
pub fn fits_address_space(needed: u64, limit: u64) -> Result<()> {
    if needed > limit {
        return Err(Error::AddressSpace { needed, limit });
    }
    Ok(())
}
