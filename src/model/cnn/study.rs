//! The numerical-precision study: one trained F32 network stored in every safetensors dtype
//! (values as they are, and with scales) and in weft's block formats, each run on the GPU over
//! the test digits and compared with F32, with the CPU reference and with its own decoded
//! weights read back from the GPU.

use std::collections::BTreeMap;

use serde::Serialize;

use super::forward::decode_on_gpu;
use super::{cpu_forward, CnnFile, CnnGpu, StoredTensor};
use crate::error::{Error, Result};
use crate::format::SafeDtype;
use crate::gpu::GpuContext;
use crate::quant::scaled::Granularity;
use crate::quant::weft::{Scheme, WeftQuant};

/// How a row stores the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Every parameter in this dtype, values as they are (for integers and F4: the naive row).
    Plain(SafeDtype),
    /// Weights as codes with scales of this granularity; biases with one scale per tensor.
    Scaled(SafeDtype, Granularity),
    /// Weights (viewed as [out, rest]) in a weft format; biases F32.
    Weft(WeftQuant),
}

const INTS: [SafeDtype; 8] = [
    SafeDtype::I64,
    SafeDtype::I32,
    SafeDtype::I16,
    SafeDtype::I8,
    SafeDtype::U64,
    SafeDtype::U32,
    SafeDtype::U16,
    SafeDtype::U8,
];

impl Variant {
    /// Every row of the study, in table order.
    pub fn all() -> Vec<Variant> {
        use SafeDtype::*;
        let mut v: Vec<Variant> = [F64, F32, F16, BF16, F8E4M3, F8E5M2].map(Variant::Plain).to_vec();
        for d in [F8E4M3, F8E5M2] {
            v.push(Variant::Scaled(d, Granularity::Row));
        }
        v.push(Variant::Plain(F4));
        for g in [Granularity::Tensor, Granularity::Row, Granularity::Block(32), Granularity::Block(16)] {
            v.push(Variant::Scaled(F4, g));
        }
        for d in INTS {
            v.push(Variant::Plain(d));
            v.push(Variant::Scaled(d, Granularity::Tensor));
            v.push(Variant::Scaled(d, Granularity::Row));
        }
        for bits in [8, 4, 3, 2] {
            v.push(Variant::Weft(WeftQuant { bits, group: 32, scheme: Scheme::Sym }));
        }
        v.push(Variant::Weft(WeftQuant { bits: 2, group: 32, scheme: Scheme::Asym }));
        v
    }

    /// `F16`, `I8/channel`, `F4/block32`, `q4_g32_sym`: the row's key, accepted by [`Variant::parse`].
    pub fn key(&self) -> String {
        match self {
            Self::Plain(d) => d.name().to_string(),
            Self::Scaled(d, g) => format!("{}/{}", d.name(), g.name()),
            Self::Weft(q) => q.name(),
        }
    }

    pub fn parse(key: &str) -> Option<Variant> {
        Self::all().into_iter().find(|v| v.key() == key)
    }

    /// The stored type of the weights.
    pub fn storage(&self) -> String {
        match self {
            Self::Plain(d) | Self::Scaled(d, _) => d.name().to_string(),
            Self::Weft(q) => q.name(),
        }
    }

    /// What maps stored values to weights.
    pub fn scaling(&self) -> String {
        match self {
            Self::Plain(_) => "none".into(),
            Self::Scaled(d, g) => {
                let zero = if crate::quant::scaled::is_unsigned(*d) { " + zero point" } else { "" };
                format!("per {}{zero}", g.name())
            }
            Self::Weft(q) => {
                let zero = if q.scheme == Scheme::Asym { " + zero" } else { "" };
                format!("f16 scale{zero} per {} weights", q.group)
            }
        }
    }

    /// The F32 network `f32` stored this way.
    pub fn convert(&self, f32: &CnnFile) -> Result<CnnFile> {
        let mut tensors = BTreeMap::new();
        for (name, t) in &f32.tensors {
            let x = t.decode_cpu()?;
            let shape = t.shape();
            let is_bias = shape.len() == 1;
            let stored = match *self {
                Self::Plain(d) => StoredTensor::from_f32(&x, shape, d, None)?,
                Self::Scaled(d, _) if is_bias => StoredTensor::from_f32(&x, shape, d, Some(Granularity::Tensor))?,
                Self::Scaled(d, g) => StoredTensor::from_f32(&x, shape, d, Some(g))?,
                Self::Weft(_) if is_bias => StoredTensor::from_f32(&x, shape, SafeDtype::F32, None)?,
                Self::Weft(q) => StoredTensor::from_f32_weft(&x, shape, q)?,
            };
            tensors.insert(name.clone(), stored);
        }
        Ok(CnnFile { config: f32.config.clone(), tensors })
    }
}

/// Test digits: `count` images of `pixels` bytes, then `count` label bytes.
#[derive(Clone, Debug)]
pub struct Digits {
    /// [count, pixels], byte / 255
    pub images: Vec<f32>,
    pub labels: Vec<u8>,
}

impl Digits {
    pub fn parse(bytes: &[u8], pixels: usize) -> Result<Self> {
        if pixels == 0 || bytes.is_empty() || !bytes.len().is_multiple_of(pixels + 1) {
            return Err(Error::Model(format!(
                "{} bytes are not whole digits of {pixels} pixels and a label",
                bytes.len()
            )));
        }
        let count = bytes.len() / (pixels + 1);
        let (images, labels) = bytes.split_at(count * pixels);
        Ok(Self { images: images.iter().map(|&b| b as f32 / 255.0).collect(), labels: labels.to_vec() })
    }

    pub fn count(&self) -> usize {
        self.labels.len()
    }
}

/// Index of the largest value of each row of `cols` (the first on ties).
pub fn argmax_rows(probs: &[f32], cols: usize) -> Vec<usize> {
    probs
        .chunks(cols.max(1))
        .map(|row| row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b }).0)
        .collect()
}

/// The F32 row's outputs, which every row is compared with.
pub struct Reference {
    pub probs: Vec<f32>,
    pub predictions: Vec<usize>,
}

/// One row of the table.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StudyRow {
    pub key: String,
    pub storage: String,
    pub scaling: String,
    /// % of test predictions identical to F32's.
    pub quality: f64,
    /// % of test digits classified correctly.
    pub accuracy: f64,
    /// Mean |Δ| of the output probabilities against F32, over all digits and classes.
    pub mean_abs_delta: f64,
    pub file_bytes: u64,
    /// Bytes of the weight buffers on the GPU during inference.
    pub gpu_bytes: u64,
    /// Largest |CPU decode − GPU decode| over every parameter.
    pub weight_max_diff: f64,
    /// Parameters' values whose f32 bits differ between the CPU and GPU decoders.
    pub weight_bit_mismatches: usize,
    /// Largest |CPU forward − GPU forward| of an output probability, over `cpu_digits` digits.
    pub prob_max_diff: f64,
    pub cpu_digits: usize,
    pub test_digits: usize,
}

/// Runs one row: convert, write, parse back, load on the GPU, classify every digit; decode
/// every parameter on both sides; the CPU forward pass over the first `cpu_digits` digits.
/// Without `reference` the row is its own reference (the F32 row).
pub async fn evaluate(
    ctx: &GpuContext,
    f32: &CnnFile,
    variant: Variant,
    digits: &Digits,
    reference: Option<&Reference>,
    cpu_digits: usize,
) -> Result<(StudyRow, Vec<f32>)> {
    let bytes = variant.convert(f32)?.to_bytes()?;
    let file = CnnFile::parse(&bytes)?;
    let (input, classes) = file.config.io_sizes()?;
    let n = digits.count();
    if digits.images.len() != n * input {
        return Err(Error::Model(format!(
            "digits of {} values, the network takes {input}",
            digits.images.len() / n.max(1)
        )));
    }
    let gpu = CnnGpu::load(ctx, &file).await?;
    let probs = gpu.forward(ctx, &digits.images, n).await?;
    let predictions = argmax_rows(&probs, classes);

    let mut cpu_weights = BTreeMap::new();
    let (mut weight_max_diff, mut weight_bit_mismatches) = (0f64, 0usize);
    for (name, t) in &file.tensors {
        let cpu = t.decode_cpu()?;
        let gpu_values = ctx.read_f32(&decode_on_gpu(ctx, name, t).await?).await?;
        if gpu_values.len() != cpu.len() {
            return Err(Error::Model(format!("{name}: GPU decoded {} values of {}", gpu_values.len(), cpu.len())));
        }
        for (a, b) in cpu.iter().zip(&gpu_values) {
            if a.to_bits() != b.to_bits() {
                weight_bit_mismatches += 1;
                weight_max_diff = weight_max_diff.max((a - b).abs() as f64);
            }
        }
        cpu_weights.insert(name.clone(), cpu);
    }
    let m = cpu_digits.min(n);
    let cpu_probs = cpu_forward(&file.config, &cpu_weights, &digits.images[..m * input], m)?;
    let prob_max_diff = cpu_probs.iter().zip(&probs).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);

    let correct = predictions.iter().zip(&digits.labels).filter(|(p, &l)| **p == l as usize).count();
    let (same, delta) = match reference {
        Some(r) => (
            predictions.iter().zip(&r.predictions).filter(|(a, b)| a == b).count(),
            probs.iter().zip(&r.probs).map(|(a, b)| (a - b).abs() as f64).sum::<f64>() / probs.len().max(1) as f64,
        ),
        None => (n, 0.0),
    };
    let pct = |k: usize| 100.0 * k as f64 / n.max(1) as f64;
    let row = StudyRow {
        key: variant.key(),
        storage: variant.storage(),
        scaling: variant.scaling(),
        quality: pct(same),
        accuracy: pct(correct),
        mean_abs_delta: delta,
        file_bytes: bytes.len() as u64,
        gpu_bytes: gpu.weight_bytes(),
        weight_max_diff,
        weight_bit_mismatches,
        prob_max_diff,
        cpu_digits: m,
        test_digits: n,
    };
    Ok((row, probs))
}

/// The whole table: the F32 row first (the reference), then every [`Variant::all`] row in order.
pub async fn run_all(
    ctx: &GpuContext,
    f32: &CnnFile,
    digits: &Digits,
    cpu_digits: usize,
    mut on_row: impl FnMut(&StudyRow),
) -> Result<Vec<StudyRow>> {
    let (f32_row, probs) = evaluate(ctx, f32, Variant::Plain(SafeDtype::F32), digits, None, cpu_digits).await?;
    let (_, classes) = f32.config.io_sizes()?;
    let reference = Reference { predictions: argmax_rows(&probs, classes), probs };
    let mut rows = Vec::new();
    for v in Variant::all() {
        let row = if v == Variant::Plain(SafeDtype::F32) {
            f32_row.clone()
        } else {
            evaluate(ctx, f32, v, digits, Some(&reference), cpu_digits).await?.0
        };
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}
