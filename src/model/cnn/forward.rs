//! The forward pass: on the GPU with weights kept as their files store them where a kernel reads
//! that storage (weft formats, through the packed matrix kernels), else decoded once on the GPU
//! by the bit-exact decoders; and the CPU reference over CPU-decoded weights.

use std::collections::BTreeMap;

use super::{CnnConfig, CnnFile, Step, StoredTensor};
use crate::error::{Error, Result};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};
use crate::ops::qmatmul::{self, Precision, QWeight};
use crate::ops::{conv, dequant, elementwise, softmax};
use crate::quant::pack_words;

enum GpuStep {
    Dense { w: QWeight, b: GpuTensor, relu: bool },
    Conv { geo: conv::Conv2d, w: GpuTensor, b: GpuTensor, relu: bool },
    View(Vec<usize>),
    Softmax,
}

/// A CNN on the GPU.
pub struct CnnGpu {
    steps: Vec<GpuStep>,
    input: usize,
    output: usize,
    weight_bytes: u64,
}

/// Decodes a stored tensor to f32 on the GPU: the dtype's decoder, then its scales; weft
/// formats through the embedding kernel's row decoder. Returns [elements] f32.
pub async fn decode_on_gpu(ctx: &GpuContext, name: &str, t: &StoredTensor) -> Result<GpuTensor> {
    let n = t.elements();
    match t {
        StoredTensor::Plain { dtype, bytes, scale, .. } => {
            let words = pack_words(bytes);
            let packed = ctx.upload_u32(&format!("{name} codes"), &[words.len()], &words)?;
            let out = ctx.zeros(name, &[n], DType::F32)?;
            let mut dispatches =
                vec![dequant::dequant(ctx, crate::format::StorageType::Safe(*dtype), &packed, &out).await?];
            let mut keep = Vec::new();
            if let Some(s) = scale {
                let groups = [s.layout.groups()];
                keep.push(ctx.upload_f32(&format!("{name}.scale"), &groups, &s.scales)?);
                if s.layout.zero {
                    keep.push(ctx.upload_f32(&format!("{name}.zero"), &groups, &s.zeros)?);
                }
                dispatches.push(dequant::rescale(ctx, &s.layout, &out, &keep[0], keep.get(1)).await?);
            }
            ctx.run(&dispatches.iter().collect::<Vec<_>>());
            Ok(out)
        }
        StoredTensor::Weft { matrix, .. } => {
            let w = QWeight::from_weft(ctx, name, matrix)?;
            let ids: Vec<u32> = (0..matrix.rows as u32).collect();
            let ids = ctx.upload_u32(&format!("{name} rows"), &[ids.len()], &ids)?;
            let out = ctx.zeros(name, &[matrix.rows, matrix.cols], DType::F32)?;
            let d = qmatmul::embed(ctx, &w, &ids, &out).await?;
            ctx.run(&[&d]);
            out.view(&[n])
        }
    }
}

fn param<'a>(file: &'a CnnFile, name: &str) -> Result<&'a StoredTensor> {
    file.tensors.get(name).ok_or_else(|| Error::Model(format!("no parameter '{name}'")))
}

impl CnnGpu {
    /// Uploads (and where needed decodes) every parameter of `file`.
    pub async fn load(ctx: &GpuContext, file: &CnnFile) -> Result<Self> {
        let (input, output) = file.config.io_sizes()?;
        let mut steps = Vec::new();
        let mut weight_bytes = 0u64;
        for step in file.config.steps()? {
            steps.push(match step {
                Step::Dense { name, inputs, outputs, relu } => {
                    let wname = format!("{name}.weight");
                    let w = match param(file, &wname)? {
                        StoredTensor::Weft { matrix, .. } => QWeight::from_weft(ctx, &wname, matrix)?,
                        plain => {
                            let decoded = decode_on_gpu(ctx, &wname, plain).await?;
                            QWeight::from_gpu_f32(&wname, outputs, inputs, decoded)?
                        }
                    };
                    let bname = format!("{name}.bias");
                    let b = decode_on_gpu(ctx, &bname, param(file, &bname)?).await?;
                    weight_bytes += w.bytes() + b.bytes();
                    GpuStep::Dense { w, b, relu }
                }
                Step::Conv { name, geo, relu } => {
                    let wname = format!("{name}.weight");
                    let w = decode_on_gpu(ctx, &wname, param(file, &wname)?).await?.view(&geo.weight_shape())?;
                    let bname = format!("{name}.bias");
                    let b = decode_on_gpu(ctx, &bname, param(file, &bname)?).await?;
                    weight_bytes += w.bytes() + b.bytes();
                    GpuStep::Conv { geo, w, b, relu }
                }
                Step::View(shape) => GpuStep::View(shape),
                Step::Softmax => GpuStep::Softmax,
            });
        }
        ctx.check()?;
        Ok(Self { steps, input, output, weight_bytes })
    }

    /// Bytes of the weight buffers the GPU holds.
    pub fn weight_bytes(&self) -> u64 {
        self.weight_bytes
    }

    /// Outputs [batch, output] for inputs `x` [batch, input], in one submission.
    pub async fn forward(&self, ctx: &GpuContext, x: &[f32], batch: usize) -> Result<Vec<f32>> {
        if batch == 0 || x.len() != batch * self.input {
            return Err(Error::Model(format!("{} input values are not {batch} items of {}", x.len(), self.input)));
        }
        let mut cur = ctx.upload_f32("cnn input", &[batch, self.input], x)?;
        let mut dispatches: Vec<Dispatch> = Vec::new();
        let mut keep: Vec<GpuTensor> = Vec::new();
        for step in &self.steps {
            let next = match step {
                GpuStep::Dense { w, b, relu } => {
                    let x2 = cur.view(&[batch, w.cols])?;
                    let y = ctx.zeros("dense out", &[batch, w.rows], DType::F32)?;
                    // f32 products everywhere: the browser adapters without shader-f16 must agree with native.
                    dispatches.push(qmatmul::matmul(ctx, w, &x2, &y, Precision::F32, Precision::F32).await?);
                    dispatches.push(elementwise::bias_add(ctx, &y, b).await?);
                    if *relu {
                        dispatches.push(elementwise::relu(ctx, &y).await?);
                    }
                    y
                }
                GpuStep::Conv { geo, w, b, relu } => {
                    let x4 = cur.view(&[batch, geo.in_c, geo.in_h, geo.in_w])?;
                    let shape = geo.out_shape(batch).ok_or_else(|| Error::Model(format!("{geo:?} does not fit")))?;
                    let y = ctx.zeros("conv out", &shape, DType::F32)?;
                    dispatches.push(conv::conv2d(ctx, geo, &x4, w, b, &y).await?);
                    if *relu {
                        dispatches.push(elementwise::relu(ctx, &y).await?);
                    }
                    y
                }
                GpuStep::View(shape) => {
                    let mut full = vec![batch];
                    full.extend(shape);
                    cur.view(&full)?
                }
                GpuStep::Softmax => {
                    let cols = cur.shape.last().copied().unwrap_or(1);
                    let x2 = cur.view(&[cur.len() / cols.max(1), cols])?;
                    let y = ctx.zeros("softmax out", &x2.shape, DType::F32)?;
                    dispatches.push(softmax::softmax(ctx, &x2, &y).await?);
                    y
                }
            };
            keep.push(std::mem::replace(&mut cur, next));
        }
        ctx.run(&dispatches.iter().collect::<Vec<_>>());
        let out = ctx.read_f32(&cur).await?;
        ctx.check()?;
        if out.len() != batch * self.output {
            return Err(Error::Model(format!(
                "forward produced {} values, expected {}",
                out.len(),
                batch * self.output
            )));
        }
        Ok(out)
    }
}

/// The CPU reference forward pass over decoded weights (f32 values, f64 sums, as the ops'
/// references), for inputs `x` [batch, input].
pub fn cpu_forward(
    config: &CnnConfig,
    weights: &BTreeMap<String, Vec<f32>>,
    x: &[f32],
    batch: usize,
) -> Result<Vec<f32>> {
    let get = |name: String| weights.get(&name).ok_or_else(|| Error::Model(format!("no parameter '{name}'")));
    let mut cur = x.to_vec();
    let mut last: usize = config.input.iter().product();
    for step in config.steps()? {
        match step {
            Step::Dense { name, inputs, outputs, relu } => {
                let (w, b) = (get(format!("{name}.weight"))?, get(format!("{name}.bias"))?);
                if cur.len() != batch * inputs || w.len() != inputs * outputs || b.len() != outputs {
                    return Err(Error::Model(format!("{name}: sizes do not fit")));
                }
                let mut y = Vec::with_capacity(batch * outputs);
                for row in cur.chunks_exact(inputs) {
                    for (wr, &bias) in w.chunks_exact(inputs).zip(b.iter()) {
                        let dot: f64 = row.iter().zip(wr).map(|(&a, &c)| a as f64 * c as f64).sum();
                        let v = (dot + bias as f64) as f32;
                        y.push(if relu { v.max(0.0) } else { v });
                    }
                }
                cur = y;
                last = outputs;
            }
            Step::Conv { name, geo, relu } => {
                let (w, b) = (get(format!("{name}.weight"))?, get(format!("{name}.bias"))?);
                let per = geo.in_c * geo.in_h * geo.in_w;
                if cur.len() != batch * per
                    || w.len() != geo.weight_shape().iter().product::<usize>()
                    || b.len() != geo.out_c
                {
                    return Err(Error::Model(format!("{name}: sizes do not fit")));
                }
                let y = conv::conv2d_cpu(&geo, batch, &cur, w, b);
                cur = y.into_iter().map(|v| if relu { (v as f32).max(0.0) } else { v as f32 }).collect();
                last = cur.len() / batch;
            }
            Step::View(shape) => last = shape.iter().product(),
            Step::Softmax => cur = softmax::softmax_cpu(&cur, last).into_iter().map(|v| v as f32).collect(),
        }
    }
    Ok(cur)
}
