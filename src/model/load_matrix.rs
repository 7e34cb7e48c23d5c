//! How a load turns one stored matrix into its GPU weight: quantizing a float matrix (GPU kernel
//! or CPU reference), repacking GGUF blocks (GPU kernel, or the CPU by runs of rows on every
//! core), or uploading it as stored; and the clock of where that time goes.

use std::borrow::Cow;
use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::format::{GgmlType, SafeDtype, StorageType, TensorInfo};
use crate::gpu::GpuContext;
use crate::ops::qmatmul::QWeight;
use crate::ops::quantize::{read_back, source_type, Quantizer};
use crate::ops::repack::{repacks, whole_blocks, Repacker};
use crate::quant::decode_to_f32;
use crate::quant::repack::{weft_equivalent, KPlanes};
use crate::quant::weft::{quantize, QuantMatrix, WeftQuant};

use super::convert::default_keep_format;
use super::fit::AutoPlan;
use super::llama::Quantized;
use super::load::{quant_digest, QuantizeOn, WeightOptions};
use super::load_rows::pack_by_rows;
use super::load_times::{LoadClock, LoadPhase};

/// How a load quantizes: the GPU kernel (with the matrices whose digests it reads back at the
/// end) or the CPU reference, and what it quantized; whether it repacks GGUF blocks on the GPU;
/// and where the load's time goes.
pub(super) struct Quantizing {
    plan: Option<AutoPlan>,
    gpu: Option<Quantizer>,
    repacker: Option<Repacker>,
    pending: RefCell<Vec<(usize, QWeight)>>,
    done: RefCell<Vec<Quantized>>,
    pub(super) clock: LoadClock,
}

impl Quantizing {
    pub(super) async fn new(ctx: &GpuContext, opts: &WeightOptions, plan: Option<AutoPlan>, repack: bool) -> Result<Self> {
        let on_gpu = match opts.quantize_on {
            // The `k` formats' 8-bit grid is in the CPU quantizer only.
            QuantizeOn::Auto => !ctx.capabilities().is_software && opts.quantize.is_none_or(|q| q.scheme != crate::quant::weft::Scheme::K),
            QuantizeOn::Gpu => true,
            QuantizeOn::Cpu => false,
        };
        // The pipelines' time is their phase's: a cold shader cache makes the quantizer's (a
        // long kernel) take seconds.
        let clock = LoadClock::default();
        let start = LoadClock::start();
        let gpu = match opts.quantize.is_some() || plan.is_some() {
            true if on_gpu => Some(Quantizer::new(ctx).await?),
            _ => None,
        };
        if gpu.is_some() {
            clock.add(LoadPhase::GpuQuantize, start);
        }
        let start = LoadClock::start();
        let repacker = if repack { Some(Repacker::new(ctx).await?) } else { None };
        if repacker.is_some() {
            clock.add(LoadPhase::GpuRepack, start);
        }
        Ok(Self { plan, gpu, repacker, pending: RefCell::new(Vec::new()), done: RefCell::new(Vec::new()), clock })
    }

    /// Waits for the GPU's quantization (and repacking) of what was queued and checks it.
    pub(super) async fn check_gpu(&self, ctx: &GpuContext) -> Result<()> {
        let start = LoadClock::start();
        if let Some(q) = &self.gpu {
            // Reading the status waits for the repacks queued before it too.
            q.check(ctx).await?;
            self.clock.add(LoadPhase::GpuQuantize, start);
        } else if self.repacker.is_some() {
            ctx.wait_idle().await?;
            self.clock.add(LoadPhase::GpuRepack, start);
        }
        Ok(())
    }

    /// Waits for the GPU's quantization, checks it and reads the digests asked for.
    pub(super) async fn finish(self, ctx: &GpuContext) -> Result<(Vec<Quantized>, Option<AutoPlan>, LoadClock)> {
        self.check_gpu(ctx).await?;
        let mut done = self.done.into_inner();
        for (i, w) in self.pending.into_inner() {
            done[i].digest = Some(quant_digest(&read_back(ctx, &w).await?));
        }
        Ok((done, self.plan, self.clock))
    }
}

/// The weft format float matrix `name` gets at load: the auto plan's, else `quantize` under
/// the default keep rules where asked; None keeps it as stored.
pub(crate) fn chosen_format(name: &str, opts: &WeightOptions, plan: Option<&AutoPlan>) -> Result<Option<WeftQuant>> {
    Ok(match (plan, opts.quantize) {
        (Some(plan), _) => plan.format_of(name),
        (None, Some(q)) if opts.default_keep => default_keep_format(name, q)?,
        (None, q) => q,
    })
}

/// The CPU reference quantizer on a float matrix's stored bytes: the bytes `weft quantize`
/// writes for it. A matrix holding NaN or an infinity is refused, as the GPU kernel refuses it.
pub(crate) fn quantize_stored(t: &TensorInfo, bytes: &[u8], q: WeftQuant, rows: usize, cols: usize) -> Result<QuantMatrix> {
    // F32 weights are quantized from the bytes read, where they are aligned: a copy of the
    // largest layer (the embedding) would double the load's peak memory.
    let f32_stored = matches!(t.storage, StorageType::Safe(SafeDtype::F32) | StorageType::Ggml(GgmlType::F32));
    let values = match bytemuck::try_cast_slice::<u8, f32>(bytes) {
        Ok(v) if f32_stored && cfg!(target_endian = "little") && v.len() == rows * cols => Cow::Borrowed(v),
        _ => Cow::Owned(decode_to_f32(t.storage, bytes, rows * cols)?),
    };
    if !values.iter().all(|v| v.is_finite()) {
        return Err(Error::NonFiniteWeights { name: t.name.clone() });
    }
    quantize(q, &values, rows, cols)
}

/// One stored matrix as its GPU weight: quantized where a weft format was chosen for it,
/// repacked (on the GPU or the CPU) where the adapter reads its GGUF type in another layout, else
/// uploaded as stored.
pub(super) fn matrix(
    ctx: &GpuContext,
    t: &TensorInfo,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    opts: &WeightOptions,
    quantizing: &Quantizing,
) -> Result<QWeight> {
    if t.shape != [rows as u64, cols as u64] {
        return Err(Error::Model(format!("{} has shape {:?}, expected [{rows}, {cols}]", t.name, t.shape)));
    }
    let float = matches!(
        t.storage,
        StorageType::Safe(_) | StorageType::Ggml(GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
    );
    let quant = chosen_format(&t.name, opts, quantizing.plan.as_ref())?;
    let clock = &quantizing.clock;
    if let (true, Some(q)) = (float, quant) {
        let mut done = quantizing.done.borrow_mut();
        if let Some(gpu) = &quantizing.gpu {
            let start = LoadClock::start();
            // F32, F16 and BF16 go up as stored; other float types as their f32 values.
            let w = match source_type(t.storage) {
                Some(_) => gpu.quantize(ctx, &t.name, q, t.storage, bytes, rows, cols)?,
                None => {
                    let values = decode_to_f32(t.storage, bytes, rows * cols)?;
                    let f32s = StorageType::Safe(SafeDtype::F32);
                    gpu.quantize(ctx, &t.name, q, f32s, bytemuck::cast_slice(&values), rows, cols)?
                }
            };
            clock.add(LoadPhase::GpuQuantize, start);
            if opts.digests {
                quantizing.pending.borrow_mut().push((done.len(), w.alias()?));
            }
            done.push(Quantized { name: t.name.clone(), format: q, digest: None });
            return Ok(w);
        }
        let m = clock.time(LoadPhase::Convert, || quantize_stored(t, bytes, q, rows, cols))?;
        done.push(Quantized { name: t.name.clone(), format: q, digest: Some(quant_digest(&m)) });
        return clock.time(LoadPhase::Upload, || QWeight::from_weft(ctx, &t.name, &m));
    }
    // safetensors floats share GGML's little-endian layouts.
    let as_ggml = match t.storage {
        StorageType::Ggml(g) => Some(g),
        StorageType::Safe(SafeDtype::F32) => Some(GgmlType::F32),
        StorageType::Safe(SafeDtype::F16) => Some(GgmlType::F16),
        StorageType::Safe(SafeDtype::BF16) => Some(GgmlType::BF16),
        StorageType::Safe(_) => None,
    };
    match (as_ggml, &quantizing.repacker) {
        // The CPU only hands the stored blocks on.
        (Some(g), Some(r)) if repacks(g) && whole_blocks(g, rows, cols, bytes.len()) => {
            clock.time(LoadPhase::GpuRepack, || r.repack(ctx, &t.name, g, rows, cols, bytes))
        }
        (Some(g), _) if QWeight::repacks(ctx, g) => {
            if let Some(m) = clock.time(LoadPhase::Convert, || repacked(g, rows, cols, bytes))? {
                return clock.time(LoadPhase::Upload, || QWeight::from_weft(ctx, &t.name, &m));
            }
            match clock.time(LoadPhase::Convert, || planes(g, rows, cols, bytes))? {
                Some(m) => clock.time(LoadPhase::Upload, || QWeight::from_planes(ctx, &t.name, &m)),
                // A length that does not fit: from_ggml says what it needed.
                None => QWeight::from_ggml(ctx, &t.name, g, rows, cols, bytes),
            }
        }
        (Some(g), _) => clock.time(LoadPhase::Upload, || QWeight::from_ggml(ctx, &t.name, g, rows, cols, bytes)),
        (None, _) => {
            let values = clock.time(LoadPhase::Convert, || decode_to_f32(t.storage, bytes, rows * cols))?;
            clock.time(LoadPhase::Upload, || QWeight::from_f32(ctx, &t.name, rows, cols, &values))
        }
    }
}

/// A Q4_0 or Q8_0 matrix in the weft format that holds it (`quant::repack`), repacked by runs
/// of rows on every core; None where the bytes are not whole rows of 32-weight blocks.
fn repacked(g: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<Option<QuantMatrix>> {
    if weft_equivalent(g).is_none() || !whole_blocks(g, rows, cols, bytes.len()) {
        return Ok(None);
    }
    let row_bytes = cols / 32 * g.block_bytes() as usize;
    pack_by_rows(rows, cols, |r0, n| {
        crate::quant::repack::to_weft(g, n, cols, &bytes[r0 * row_bytes..(r0 + n) * row_bytes])
    })
}

/// A K-quant, Q4_1, Q5_0 or Q5_1 matrix in its planes (`quant::repack::to_planes`), repacked by
/// runs of rows on every core; None for the other types and where the bytes are not whole rows
/// of blocks.
fn planes(g: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<Option<KPlanes>> {
    let be = g.block_elements() as usize;
    let row_bytes = cols / be * g.block_bytes() as usize;
    if !crate::quant::repack::has_planes(g) || !cols.is_multiple_of(be) || rows.checked_mul(row_bytes) != Some(bytes.len()) {
        return Ok(None);
    }
    pack_by_rows(rows, cols, |r0, n| {
        crate::quant::repack::to_planes(g, n, cols, &bytes[r0 * row_bytes..(r0 + n) * row_bytes])
    })
}

