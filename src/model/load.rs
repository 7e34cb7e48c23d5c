//! Loading a model's weights onto the GPU one layer at a time: read the layer's byte range,
//! upload its tensors in their stored formats, drop the bytes, report progress.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{ModelHeader, StorageType, TensorInfo};
use crate::gpu::{GpuContext, GpuTensor};
use crate::loader::cache::{fnv1a64_update, FNV1A64_START};
use crate::loader::RangeReader;
use crate::ops::qmatmul::QWeight;
use crate::ops::repack::repacks;
use crate::quant::decode_to_f32;
use crate::quant::weft::{QuantMatrix, WeftQuant};

use super::config::LlamaConfig;
use super::fit::AutoPlan;
pub(crate) use super::load_matrix::{chosen_format, quantize_stored};
use super::load_matrix::{matrix, Quantizing};
use super::load_times::{LoadClock, LoadPhase};
use super::llama::{GateUp, LayerWeights, Qkv, Weights};
use super::names::{part_of, part_of_in, tensor_name, LayerPart, Naming, Part};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Header,
    Weights,
    Compile,
    Ready,
}

/// Where a load stands, for progress bars.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub phase: Phase,
    /// Layer groups uploaded so far (the embedding and the head count as one each).
    pub step: usize,
    pub steps: usize,
    pub bytes_loaded: u64,
    pub bytes_total: u64,
}

/// How stored weights become GPU weights.
#[derive(Clone, Copy, Debug, Default)]
pub struct WeightOptions {
    /// Quantize float matrices (F16, BF16, F32, ...) to this weft format while loading.
    /// Block-quantized GGUF tensors always stay as they are.
    pub quantize: Option<WeftQuant>,
    /// The most the model may occupy on the GPU, in MB (10^6 bytes), checked with the KV cache
    /// and activations before any weight is fetched (`fit::check_memory_fit`). None checks only
    /// the device's buffer limits.
    pub memory_budget_mb: Option<u64>,
    /// With `quantize`: apply the default keep rules of `weft quantize` (the token embedding and
    /// an untied head at 8 bits), so that a load quantizes as the command line does.
    pub default_keep: bool,
    /// With `quantize`: where matrices are quantized (the GPU kernel and the CPU reference give
    /// the same bytes). GGUF matrices that a hardware adapter holds in another layout of the
    /// same bits (Q4_0/Q8_0 in the weft format of the same weights, Q4_1, Q5_0, Q5_1 and the
    /// K-quants Q4_K, Q5_K, Q6_K in their planes) are repacked there by the GPU (`ops::repack`)
    /// unless this is `Cpu`; with `Gpu`, on software adapters too.
    pub quantize_on: QuantizeOn,
    /// `quantize: 'auto'`: each float matrix in the format [`super::fit::plan_auto`] chose for
    /// the budget (`quantize` and `default_keep` are then not used).
    pub auto: bool,
    /// With `quantize` on the GPU: read each quantized matrix back for its digest
    /// ([`quant_digest`]), to compare a load with `weft quantize`; costs a copy of the weights.
    pub digests: bool,
}

/// Where a load quantizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuantizeOn {
    /// The GPU on hardware adapters; the CPU on software ones (lavapipe, SwiftShader), where
    /// the kernel's integer emulation of the reference's float arithmetic runs several times
    /// slower than the CPU quantizer itself.
    #[default]
    Auto,
    Gpu,
    Cpu,
}

/// The bytes of one group: a single covering read, or one read per tensor.
enum Reads {
    Span(u64, Vec<u8>),
    Each(HashMap<String, Vec<u8>>),
}

impl Reads {
    fn bytes_of(&self, t: &TensorInfo) -> Result<&[u8]> {
        match self {
            Reads::Span(base, bytes) => slice(bytes, *base, t),
            Reads::Each(each) => {
                each.get(&t.name).map(Vec::as_slice).ok_or_else(|| Error::Model(format!("{}: not read", t.name)))
            }
        }
    }
}

/// A matrix in one of weft's formats inside a safetensors file (docs/FORMAT.md): the packed
/// levels are the part's tensor; scales and zero points come along.
#[derive(Clone)]
pub(crate) struct WeftEntry {
    pub(crate) quant: WeftQuant,
    pub(crate) shape: [usize; 2],
    pub(crate) scale: TensorInfo,
    pub(crate) zero: Option<TensorInfo>,
    /// A `k` matrix stored as entropy-coded streams (`quant::kcode::decode_coded`).
    pub(crate) coded: bool,
}

impl WeftEntry {
    /// The matrix from its packed levels and the bytes of its scales and zero points, with
    /// every length checked against the format.
    pub(crate) fn matrix(&self, name: &str, words: &[u8], scales: &[u8], zeros: Option<&[u8]>) -> Result<QuantMatrix> {
        let [rows, cols] = self.shape;
        if self.coded {
            // A damaged stream is the file's fault: a decode error (FORMAT in JS) naming the matrix.
            return crate::quant::kcode::decode_coded(self.quant, rows, cols, words, scales, zeros.unwrap_or_default())
                .map_err(|e| match e {
                    Error::Decode { ty, message } => Error::Decode {
                        ty,
                        message: format!("{name}: {message}; the file is damaged: fetch it again, or write it again with `weft quantize --entropy`"),
                    },
                    other => other,
                });
        }
        if self.quant.scheme == crate::quant::weft::Scheme::K {
            let words = bytemuck::pod_collect_to_vec(words);
            return crate::quant::kcode::decode(self.quant, rows, cols, words, scales, zeros.unwrap_or_default())
                .map_err(|e| Error::Model(format!("{name}: {e}")));
        }
        let m = QuantMatrix {
            quant: self.quant,
            rows,
            cols,
            words: bytemuck::pod_collect_to_vec(words),
            scales: bytemuck::pod_collect_to_vec(scales),
            zeros: zeros.map(bytemuck::pod_collect_to_vec).unwrap_or_default(),
        };
        let groups = rows * self.quant.groups_per_row(cols);
        if m.words.len() != rows * self.quant.words_per_row(cols)
            || m.scales.len() != groups
            || (self.zero.is_some() && m.zeros.len() != groups)
        {
            return Err(Error::Model(format!("{name}: packed sizes do not match {} [{rows}, {cols}]", self.quant.name())));
        }
        Ok(m)
    }
}

#[derive(serde::Deserialize)]
struct WeftMeta {
    format: String,
    shape: [usize; 2],
    /// "rans" for an entropy-coded `k` matrix; absent for packed levels.
    #[serde(default)]
    coding: Option<String>,
}

/// The `weft.q.*` entries of a weft safetensors file, by the name of their packed tensor.
pub(crate) fn weft_entries(header: &ModelHeader) -> Result<HashMap<String, WeftEntry>> {
    let mut out = HashMap::new();
    let ModelHeader::Safetensors(st) = header else { return Ok(out) };
    let find = |name: String| header.tensors().iter().find(|t| t.name == name).cloned();
    for (key, value) in &st.metadata {
        let Some(base) = key.strip_prefix("weft.q.") else { continue };
        let meta: WeftMeta = serde_json::from_str(value)
            .map_err(|e| Error::Model(format!("{key}: {e}")))?;
        let quant = WeftQuant::parse(&meta.format)?;
        let scale = find(format!("{base}.weft_scale"))
            .ok_or_else(|| Error::Model(format!("{base}: no {base}.weft_scale tensor")))?;
        let zero = find(format!("{base}.weft_zero"));
        if quant.has_zero() != zero.is_some() {
            return Err(Error::Model(format!("{base}: zero points do not match the {} scheme", meta.format)));
        }
        let coded = match meta.coding.as_deref() {
            None => false,
            Some("rans") if quant.scheme == crate::quant::weft::Scheme::K => true,
            Some(other) => {
                return Err(Error::Model(format!("{key}: coding '{other}' is not one this build reads (rans, for k formats)")))
            }
        };
        out.insert(format!("{base}.weft_q"), WeftEntry { quant, shape: meta.shape, scale, zero, coded });
    }
    Ok(out)
}

/// Tensors that a layer group reads together.
struct Group {
    parts: Vec<(Part, TensorInfo)>,
    /// Tensors read with the parts but not parts themselves (weft scales and zero points).
    extra: Vec<TensorInfo>,
}

impl Group {
    fn new() -> Self {
        Self { parts: Vec::new(), extra: Vec::new() }
    }

    fn infos(&self) -> impl Iterator<Item = &TensorInfo> {
        self.parts.iter().map(|(_, t)| t).chain(&self.extra)
    }

    fn bytes(&self) -> u64 {
        self.infos().map(TensorInfo::byte_len).sum()
    }

    /// One read covering every tensor, unless gaps would waste more than a quarter.
    fn span(&self) -> Option<std::ops::Range<u64>> {
        let start = self.infos().map(|t| t.range.start).min()?;
        let end = self.infos().map(|t| t.range.end).max()?;
        (end - start <= self.bytes() + self.bytes() / 4).then_some(start..end)
    }
}

/// The model's tensors grouped as they are loaded: the embedding, each layer, then the norm
/// and output head.
fn groups(header: &ModelHeader, config: &LlamaConfig, weft: &HashMap<String, WeftEntry>) -> Result<Vec<Group>> {
    let n_layers = config.n_layers;
    let mut first = Group::new();
    let mut layers: Vec<Group> = (0..n_layers).map(|_| Group::new()).collect();
    let mut last = Group::new();
    for t in header.tensors() {
        let entry = weft.get(&t.name);
        let name = match entry {
            Some(_) => t.name.trim_end_matches(".weft_q"),
            None => &t.name,
        };
        let group = match part_of_in(name, config.arch) {
            Some(Part::Embedding) => &mut first,
            Some(Part::OutputNorm | Part::Output) => &mut last,
            Some(Part::Layer(i, _)) => match layers.get_mut(i) {
                Some(g) => g,
                None => return Err(Error::Model(format!("{} names layer {i} of {n_layers}", t.name))),
            },
            None => continue,
        };
        if let Some(p) = part_of_in(name, config.arch) {
            group.parts.push((p, t.clone()));
        }
        if let Some(e) = entry {
            group.extra.push(e.scale.clone());
            group.extra.extend(e.zero.clone());
        }
    }
    let mut all = vec![first];
    all.extend(layers);
    all.push(last);
    Ok(all)
}

/// Checks the tensors `header` holds against `config` before anything is sized from either:
/// every weight the model needs is there with the shape the configuration gives it, and no
/// tensor names a layer the configuration does not have. Output head optional (tied embeddings).
pub fn validate_tensors(header: &ModelHeader, config: &LlamaConfig) -> Result<()> {
    let c = config;
    let naming = match header {
        ModelHeader::Gguf(_) => Naming::Gguf,
        ModelHeader::Safetensors(_) => Naming::HuggingFace,
    };
    let weft = weft_entries(header)?;
    let mut present: HashMap<Part, (&str, Vec<u64>)> = HashMap::new();
    for t in header.tensors() {
        let (name, shape) = match weft.get(&t.name) {
            Some(e) => (t.name.trim_end_matches(".weft_q"), e.shape.iter().map(|&d| d as u64).collect()),
            None => (t.name.as_str(), t.shape.clone()),
        };
        let Some(part) = part_of_in(name, c.arch) else { continue };
        if let Part::Layer(i, _) = part {
            if i >= c.n_layers {
                return Err(Error::BadConfig {
                    field: "n_layers".into(),
                    problem: format!("= {} but the file has tensor '{}' of layer {i}", c.n_layers, t.name),
                });
            }
        }
        present.insert(part, (t.name.as_str(), shape));
    }
    let (vocab, dim, ffn) = (c.vocab as u64, c.dim as u64, c.ffn_dim as u64);
    let (q, kv) = (c.q_dim() as u64, c.kv_dim() as u64);
    let check = |part: Part, expected: &[u64], required: bool| -> Result<()> {
        match present.get(&part) {
            // Vectors may be stored as [n] or [1, n]: compared by element count.
            Some((_, shape)) if expected.len() == 1 && shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)) == Some(expected[0]) => Ok(()),
            Some((_, shape)) if shape.as_slice() == expected => Ok(()),
            Some((name, shape)) => {
                Err(Error::TensorShape { name: name.to_string(), shape: shape.clone(), expected: expected.to_vec() })
            }
            None if required => Err(Error::MissingTensor { name: tensor_name(part, naming) }),
            None => Ok(()),
        }
    };
    check(Part::Embedding, &[vocab, dim], true)?;
    check(Part::OutputNorm, &[dim], true)?;
    check(Part::Output, &[vocab, dim], false)?;
    for i in 0..c.n_layers {
        let layer = |lp| Part::Layer(i, lp);
        check(layer(LayerPart::AttnNorm), &[dim], true)?;
        check(layer(LayerPart::Q), &[q, dim], true)?;
        check(layer(LayerPart::K), &[kv, dim], true)?;
        check(layer(LayerPart::V), &[kv, dim], true)?;
        check(layer(LayerPart::QBias), &[q], c.attn_bias)?;
        check(layer(LayerPart::KBias), &[kv], c.attn_bias)?;
        check(layer(LayerPart::VBias), &[kv], c.attn_bias)?;
        check(layer(LayerPart::QNorm), &[c.head_dim as u64], c.qk_norm)?;
        check(layer(LayerPart::KNorm), &[c.head_dim as u64], c.qk_norm)?;
        check(layer(LayerPart::AttnOut), &[dim, q], true)?;
        check(layer(LayerPart::FfnNorm), &[dim], true)?;
        let gemma = c.arch.is_gemma();
        check(layer(LayerPart::PostAttnNorm), &[dim], gemma)?;
        check(layer(LayerPart::PostFfnNorm), &[dim], gemma)?;
        check(layer(LayerPart::Gate), &[ffn, dim], true)?;
        check(layer(LayerPart::Up), &[ffn, dim], true)?;
        check(layer(LayerPart::Down), &[dim, ffn], true)?;
    }
    Ok(())
}

/// What a norm weight of `part` needs added as stored: Gemma multiplies by `1 + w`, which
/// llama.cpp's converter folds into its GGUF files and Hugging Face checkpoints do not.
pub(crate) fn norm_shift(header: &ModelHeader, c: &LlamaConfig, part: Part) -> f32 {
    let norm = matches!(
        part,
        Part::OutputNorm
            | Part::Layer(_, LayerPart::AttnNorm | LayerPart::FfnNorm | LayerPart::PostAttnNorm | LayerPart::PostFfnNorm)
            | Part::Layer(_, LayerPart::QNorm | LayerPart::KNorm)
    );
    if norm && c.arch.is_gemma() && matches!(header, ModelHeader::Safetensors(_)) {
        1.0
    } else {
        0.0
    }
}

/// What a file's header needs before its weights are read: RoPE factors stored as tensors
/// (Llama 3's `rope_freqs.weight`, Phi-3's `rope_factors_short/long.weight`) into the
/// configuration, and Phi-3's fused matrices split into their parts.
pub async fn prepare_header<R: RangeReader>(reader: &R, header: &mut ModelHeader, config: &mut LlamaConfig) -> Result<()> {
    read_rope_freqs(reader, header, config).await?;
    super::names::split_fused(header.tensors_mut(), config)
}

/// A tensor of one value per rotated pair, each finite and positive; None where the file has
/// no tensor of that name.
async fn pair_factors<R: RangeReader>(reader: &R, header: &ModelHeader, name: &str, pairs: usize) -> Result<Option<Vec<f32>>> {
    let Some(t) = header.tensors().iter().find(|t| t.name == name) else { return Ok(None) };
    if t.elements() != pairs as u64 {
        return Err(Error::TensorShape { name: t.name.clone(), shape: t.shape.clone(), expected: vec![pairs as u64] });
    }
    let factors = decode_to_f32(t.storage, &reader.read_range(t.range.clone()).await?, pairs)?;
    if let Some(bad) = factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
        return Err(Error::BadConfig { field: name.into(), problem: format!("holds {bad}, not a finite positive number") });
    }
    Ok(Some(factors))
}

/// Llama 3 frequency scaling as llama.cpp's converter stores it: `rope_freqs.weight`, one
/// divisor per rotated pair. Where the file has one, it becomes `config.rope_scaling`. Phi-3's
/// GGUF keeps LongRoPE's two sets the same way.
pub async fn read_rope_freqs<R: RangeReader>(reader: &R, header: &ModelHeader, config: &mut LlamaConfig) -> Result<()> {
    use crate::ops::rope::RopeScaling;
    let pairs = config.rope_dims / 2;
    if let RopeScaling::LongRope { short, long, .. } = &mut config.rope_scaling {
        if short.is_empty() {
            for (name, into) in [("rope_factors_short.weight", short), ("rope_factors_long.weight", long)] {
                *into = pair_factors(reader, header, name, pairs)
                    .await?
                    .ok_or_else(|| Error::BadConfig { field: name.into(), problem: "is missing (LongRoPE needs it)".into() })?;
            }
        }
        return Ok(());
    }
    let Some(factors) = pair_factors(reader, header, "rope_freqs.weight", pairs).await? else { return Ok(()) };
    if config.rope_scaling != RopeScaling::None {
        return Err(Error::BadConfig { field: "rope_freqs.weight".into(), problem: "is given together with another rope scaling".into() });
    }
    config.rope_scaling = RopeScaling::Factors(factors);
    Ok(())
}

/// Whether the file has q/k/v biases (Qwen2 and some Llama variants).
pub fn has_qkv_bias(header: &ModelHeader) -> bool {
    header.tensors().iter().any(|t| part_of(&t.name) == Some(Part::Layer(0, LayerPart::QBias)))
}

fn slice<'a>(bytes: &'a [u8], base: u64, t: &TensorInfo) -> Result<&'a [u8]> {
    let start = (t.range.start - base) as usize;
    bytes
        .get(start..start + t.byte_len() as usize)
        .ok_or_else(|| Error::Model(format!("{}: bytes missing from the read", t.name)))
}

fn vector(ctx: &GpuContext, t: &TensorInfo, bytes: &[u8], len: usize, shift: f32, clock: &LoadClock) -> Result<GpuTensor> {
    if t.elements() != len as u64 {
        return Err(Error::Model(format!("{} has shape {:?}, expected {len} values", t.name, t.shape)));
    }
    let mut values = clock.time(LoadPhase::Convert, || decode_to_f32(t.storage, bytes, len))?;
    if shift != 0.0 {
        values.iter_mut().for_each(|v| *v += shift);
    }
    clock.time(LoadPhase::Upload, || ctx.upload_f32(&t.name, &[len], &values))
}

/// A weft matrix from its packed levels, scales and zero points.
fn weft_matrix(ctx: &GpuContext, t: &TensorInfo, e: &WeftEntry, reads: &Reads, rows: usize, cols: usize, clock: &LoadClock) -> Result<QWeight> {
    if e.shape != [rows, cols] {
        return Err(Error::Model(format!("{} has shape {:?}, expected [{rows}, {cols}]", t.name, e.shape)));
    }
    let zeros = match &e.zero {
        Some(z) => Some(reads.bytes_of(z)?),
        None => None,
    };
    let m = clock.time(LoadPhase::Convert, || e.matrix(&t.name, reads.bytes_of(t)?, reads.bytes_of(&e.scale)?, zeros))?;
    clock.time(LoadPhase::Upload, || QWeight::from_weft(ctx, t.name.trim_end_matches(".weft_q"), &m))
}

/// FNV-1a 64 of a quantized matrix's packed words, then its scales, then its zero points, as
/// their bytes lie in a weft file: a load's quantization compared with the command line's.
pub fn quant_digest(m: &QuantMatrix) -> u64 {
    let h = fnv1a64_update(FNV1A64_START, bytemuck::cast_slice(&m.words));
    let h = fnv1a64_update(h, bytemuck::cast_slice(&m.scales));
    fnv1a64_update(h, bytemuck::cast_slice(&m.zeros))
}

/// Reads a byte range of a model's weights: any [`RangeReader`] behind one type, so that the
/// loaders' bodies exist once in the wasm module for model files and folders alike.
pub(crate) type ReadRange<'a> = dyn Fn(Range<u64>) -> Reading<'a> + 'a;

/// One read of a [`ReadRange`].
pub(crate) type Reading<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>>> + 'a>>;

/// `reader`'s reads as a [`ReadRange`].
pub(crate) fn read_range_of<'a, R: RangeReader>(reader: &'a R) -> impl Fn(Range<u64>) -> Reading<'a> + 'a {
    move |range| Box::pin(reader.read_range(range))
}

/// Reads every weight of `config`'s model through `reader` and uploads it, group by group.
pub async fn load_weights<R: RangeReader>(
    ctx: &GpuContext,
    reader: &R,
    header: &ModelHeader,
    config: &LlamaConfig,
    opts: &WeightOptions,
    plan: Option<AutoPlan>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Weights> {
    load_weights_from(ctx, &read_range_of(reader), header, config, opts, plan, progress).await
}

pub(crate) async fn load_weights_from(
    ctx: &GpuContext,
    read: &ReadRange<'_>,
    header: &ModelHeader,
    config: &LlamaConfig,
    opts: &WeightOptions,
    plan: Option<AutoPlan>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Weights> {
    let c = config;
    validate_tensors(header, config)?;
    let weft = weft_entries(header)?;
    let groups = groups(header, c, &weft)?;
    let total: u64 = groups.iter().map(Group::bytes).sum();
    let steps = groups.len();
    let mut loaded = 0u64;
    let mut embedding = None;
    let mut out_norm = None;
    let mut output = None;
    let mut layers: Vec<Option<LayerWeights>> = (0..c.n_layers).map(|_| None).collect();
    // GGUF blocks repacked on the GPU where the adapter holds them in weft's layout or their
    // planes (hardware adapters, `QWeight::repacks`), or on any adapter when asked to.
    let repack = match opts.quantize_on {
        QuantizeOn::Auto => !ctx.capabilities().is_software,
        QuantizeOn::Gpu => true,
        QuantizeOn::Cpu => false,
    } && header.tensors().iter().any(|t| matches!(t.storage, StorageType::Ggml(g) if repacks(g)));
    let quantizing = Quantizing::new(ctx, opts, plan, repack).await?;
    // In file order, so a reader that can only stream the file front to back (a server that
    // ignores Range) never has to go back. GGUF files often store blk.10 before blk.2.
    let order = crate::order::sorted_order(
        (0..steps).map(|g| (groups[g].infos().map(|t| t.range.start).min().unwrap_or(u64::MAX), 0)),
    );
    for (done, &step) in order.iter().enumerate() {
        let group = &groups[step];
        // Either one read for the whole group or one per tensor; the bytes are dropped as
        // soon as the group is on the GPU.
        let start = LoadClock::start();
        let reads = match group.span() {
            Some(span) => Reads::Span(span.start, read(span).await?),
            None => {
                let mut each = HashMap::new();
                for t in group.infos() {
                    each.insert(t.name.clone(), read(t.range.clone()).await?);
                }
                Reads::Each(each)
            }
        };
        let clock = &quantizing.clock;
        clock.add(LoadPhase::Read, start);
        let mat = |t: &TensorInfo, rows: usize, cols: usize| -> Result<QWeight> {
            match weft.get(&t.name) {
                Some(e) => weft_matrix(ctx, t, e, &reads, rows, cols, clock),
                None => matrix(ctx, t, reads.bytes_of(t)?, rows, cols, opts, &quantizing),
            }
        };
        let mut parts: HashMap<LayerPart, &TensorInfo> = HashMap::new();
        for (part, t) in &group.parts {
            match part {
                Part::Embedding => embedding = Some(mat(t, c.vocab, c.dim)?),
                Part::OutputNorm => out_norm = Some(vector(ctx, t, reads.bytes_of(t)?, c.dim, norm_shift(header, c, *part), clock)?),
                Part::Output => output = Some(mat(t, c.vocab, c.dim)?),
                Part::Layer(_, lp) => {
                    parts.insert(*lp, t);
                }
            }
        }
        if step > 0 && step + 1 < steps {
            let layer = step - 1;
            let get = |lp: LayerPart| {
                parts.get(&lp).copied().ok_or_else(|| Error::Model(format!("layer {layer} has no {lp:?} weight")))
            };
            let layer_mat = |lp: LayerPart, rows: usize, cols: usize| -> Result<QWeight> { mat(get(lp)?, rows, cols) };
            let vec = |lp: LayerPart, len: usize| -> Result<GpuTensor> {
                let t = get(lp)?;
                vector(ctx, t, reads.bytes_of(t)?, len, norm_shift(header, c, Part::Layer(layer, lp)), clock)
            };
            let post_norm = |lp: LayerPart| -> Result<Option<GpuTensor>> {
                if c.arch.is_gemma() { vec(lp, c.dim).map(Some) } else { Ok(None) }
            };
            let bias = |lp: LayerPart, len: usize| -> Result<Option<GpuTensor>> {
                if c.attn_bias { vec(lp, len).map(Some) } else { Ok(None) }
            };
            let qk_norm = |lp: LayerPart| -> Result<Option<GpuTensor>> {
                if c.qk_norm { vec(lp, c.head_dim).map(Some) } else { Ok(None) }
            };
            layers[layer] = Some(LayerWeights {
                attn_norm: vec(LayerPart::AttnNorm, c.dim)?,
                qkv: Qkv::Apart {
                    wq: layer_mat(LayerPart::Q, c.q_dim(), c.dim)?,
                    wk: layer_mat(LayerPart::K, c.kv_dim(), c.dim)?,
                    wv: layer_mat(LayerPart::V, c.kv_dim(), c.dim)?,
                    bq: bias(LayerPart::QBias, c.q_dim())?,
                    bk: bias(LayerPart::KBias, c.kv_dim())?,
                    bv: bias(LayerPart::VBias, c.kv_dim())?,
                    bqkv: None,
                },
                q_norm: qk_norm(LayerPart::QNorm)?,
                k_norm: qk_norm(LayerPart::KNorm)?,
                wo: layer_mat(LayerPart::AttnOut, c.dim, c.q_dim())?,
                ffn_norm: vec(LayerPart::FfnNorm, c.dim)?,
                post_attn_norm: post_norm(LayerPart::PostAttnNorm)?,
                post_ffn_norm: post_norm(LayerPart::PostFfnNorm)?,
                gate_up: GateUp::Apart {
                    gate: layer_mat(LayerPart::Gate, c.ffn_dim, c.dim)?,
                    up: layer_mat(LayerPart::Up, c.ffn_dim, c.dim)?,
                },
                down: layer_mat(LayerPart::Down, c.dim, c.ffn_dim)?,
            });
        }
        // The GPU quantizes and repacks a group before the next one is uploaded: its source bytes
        // are freed as it goes, whatever the GPU's speed, and a non-finite matrix stops the load
        // here.
        quantizing.check_gpu(ctx).await?;
        loaded += group.bytes();
        progress(Progress { phase: Phase::Weights, step: done + 1, steps, bytes_loaded: loaded, bytes_total: total });
    }
    let (quantized, plan, clock) = quantizing.finish(ctx).await?;
    let layers = layers
        .into_iter()
        .enumerate()
        .map(|(i, l)| l.ok_or_else(|| Error::Model(format!("layer {i} was not loaded"))))
        .collect::<Result<Vec<_>>>()?;
    Ok(Weights {
        embedding: embedding.ok_or_else(|| Error::Model("the file has no token embedding".into()))?,
        layers,
        out_norm: out_norm.ok_or_else(|| Error::Model("the file has no output norm".into()))?,
        output,
        quantized,
        plan,
        load_times: clock.times(),
    })
}
