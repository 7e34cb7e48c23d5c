//! The encoder pass of `forward.rs` on the GPU, with neighbouring ops fused where a kernel
//! takes them: Q, K and V as one stacked product, each product's bias folded into the op after
//! it (the GELU, the residual LayerNorm), the residual add into its LayerNorm. Matrices run
//! through the quantized GEMM of `ops::qmatmul` in the format they were loaded in (f32 or a
//! weft format); the rest through the encoder's kernels (`ops::layernorm`, `ops::gelu`,
//! `ops::encoder_attention`, `ops::pool`). A pass is the packed batch of the CPU path: one
//! submission, then the pooled rows (and the hidden states, when captured) are read back.

use crate::error::{Error, Result};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};
use crate::model::graph::Checkpoint;
use crate::ops::qmatmul::{self, Precision, QWeight};
use crate::ops::{elementwise, encoder_attention, gelu, layernorm, pool};

use super::config::BertConfig;
use super::cpu::Batch;
use super::forward::{EncodePass, LayerWeight, Pooling, Weight};
use super::weights::BertWeights;
use crate::cpu::matrix::CpuMatrix;

/// A LayerNorm's scale and shift.
struct Norm {
    w: GpuTensor,
    b: GpuTensor,
}

struct Layer {
    /// Q, K and V stacked: [3 · dim, dim], and their biases [3 · dim].
    qkv: QWeight,
    qkv_b: GpuTensor,
    o: QWeight,
    o_b: GpuTensor,
    attn_norm: Norm,
    up: QWeight,
    up_b: GpuTensor,
    down: QWeight,
    down_b: GpuTensor,
    out_norm: Norm,
}

/// The encoder's weights on the GPU.
pub struct GpuBert {
    word: QWeight,
    position: QWeight,
    /// Token type 0's row, added to every position row.
    token_type: GpuTensor,
    embed_norm: Norm,
    layers: Vec<Layer>,
    bytes: u64,
}

fn upload_matrix(ctx: &GpuContext, name: &str, m: &CpuMatrix) -> Result<QWeight> {
    if let Some(q) = m.weft() {
        return QWeight::from_weft(ctx, name, q);
    }
    let mut values = vec![0f32; m.rows * m.cols];
    for (r, row) in values.chunks_exact_mut(m.cols).enumerate() {
        m.decode_row(r, row)?;
    }
    QWeight::from_f32(ctx, name, m.rows, m.cols, &values)
}

/// `y = x · wᵀ` at f32 throughout: `qmatmul::qmatmul` would take f16 tiles for f32 weights on
/// a software adapter with shader-f16, which moves hidden states past the activation tolerance
/// (1.6e-4 of the largest value after the first block on lavapipe, against 5e-5).
async fn product(ctx: &GpuContext, w: &QWeight, x: &GpuTensor, y: &GpuTensor) -> Result<Dispatch> {
    qmatmul::matmul(ctx, w, x, y, Precision::F32, Precision::F32).await
}

impl GpuBert {
    /// Uploads `w` (f32 matrices stay f32, weft matrices stay packed).
    pub fn upload(ctx: &GpuContext, c: &BertConfig, w: &BertWeights) -> Result<Self> {
        let d = c.dim;
        let norm = |which: Weight, name: &str| -> Result<Norm> {
            let n = w.norm(which)?;
            Ok(Norm { w: ctx.upload_f32(&format!("{name}.w"), &[d], &n.w)?, b: ctx.upload_f32(&format!("{name}.b"), &[d], &n.b)? })
        };
        let linear = |l: usize, part: LayerWeight| -> Result<(QWeight, &[f32])> {
            let a = w.linear(Weight::Layer(l, part))?;
            Ok((upload_matrix(ctx, &format!("layer{l}.{part:?}"), &a.w)?, &a.b))
        };
        let mut layers = Vec::with_capacity(c.n_layers);
        for l in 0..c.n_layers {
            let (q, qb) = linear(l, LayerWeight::Q)?;
            let (k, kb) = linear(l, LayerWeight::K)?;
            let (v, vb) = linear(l, LayerWeight::V)?;
            let qkv = QWeight::stack(ctx, &format!("layer{l}.qkv"), &[&q, &k, &v])?
                .ok_or_else(|| Error::Model(format!("layer {l}: Q, K and V do not stack into one GPU weight")))?;
            let qkv_b: Vec<f32> = [qb, kb, vb].concat();
            let (o, ob) = linear(l, LayerWeight::O)?;
            let (up, upb) = linear(l, LayerWeight::Up)?;
            let (down, downb) = linear(l, LayerWeight::Down)?;
            layers.push(Layer {
                qkv,
                qkv_b: ctx.upload_f32("qkv.b", &[3 * d], &qkv_b)?,
                o,
                o_b: ctx.upload_f32("o.b", &[d], ob)?,
                attn_norm: norm(Weight::Layer(l, LayerWeight::AttnNorm), "attn_norm")?,
                up,
                up_b: ctx.upload_f32("up.b", &[c.ffn_dim], upb)?,
                down,
                down_b: ctx.upload_f32("down.b", &[d], downb)?,
                out_norm: norm(Weight::Layer(l, LayerWeight::OutNorm), "out_norm")?,
            });
        }
        let word = upload_matrix(ctx, "word_embeddings", &w.word)?;
        let position = QWeight::from_f32(ctx, "position_embeddings", c.max_positions, d, &w.position)?;
        let mut bytes = word.bytes() + position.bytes();
        for l in &layers {
            bytes += [&l.qkv, &l.o, &l.up, &l.down].iter().map(|m| m.bytes()).sum::<u64>();
            bytes += 4 * (6 * d + 3 * d + c.ffn_dim) as u64;
        }
        Ok(Self {
            word,
            position,
            token_type: ctx.upload_f32("token_type", &[d], &w.token_type[..d])?,
            embed_norm: norm(Weight::EmbedNorm, "embed_norm")?,
            layers,
            bytes,
        })
    }

    /// Bytes of GPU memory the weights take.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One pass over `batch`: the pooled rows [sequences, dim] and, with `pass.capture`, every
    /// hidden state.
    pub async fn run(&self, ctx: &GpuContext, c: &BertConfig, batch: &Batch<'_>, pass: EncodePass) -> Result<(Vec<f32>, Vec<Checkpoint>)> {
        let longest = batch.check(c)?;
        let (t, d) = (batch.ids.len(), c.dim);
        let n_seq = batch.starts.len() - 1;
        let positions: Vec<u32> =
            batch.starts.windows(2).flat_map(|p| 0..(p[1] - p[0]) as u32).collect();
        let starts: Vec<u32> = batch.starts.iter().map(|&s| s as u32).collect();
        let ids = ctx.upload_u32("ids", &[t], batch.ids)?;
        let positions = ctx.upload_u32("positions", &[t], &positions)?;
        let spans = ctx.upload_u32("spans", &[2 * t], &encoder_attention::spans(batch.starts))?;
        let starts = ctx.upload_u32("starts", &[n_seq + 1], &starts)?;
        let x = ctx.zeros("x", &[t, d], DType::F32)?;
        let r = ctx.zeros("r", &[t, d], DType::F32)?;
        let qkv = ctx.zeros("qkv", &[t, 3 * d], DType::F32)?;
        let attn = ctx.zeros("attn", &[t, d], DType::F32)?;
        let up = ctx.zeros("up", &[t, c.ffn_dim], DType::F32)?;
        let pooled = ctx.zeros("pooled", &[n_seq, d], DType::F32)?;

        let mut steps: Vec<Dispatch> = Vec::new();
        let mut captures: Vec<(String, GpuTensor)> = Vec::new();
        let mut capture = async |steps: &mut Vec<Dispatch>, name: String| -> Result<()> {
            if pass.capture {
                let copy = ctx.zeros(&name, &[t, d], DType::F32)?;
                steps.push(elementwise::copy(ctx, &x, &copy).await?);
                captures.push((name, copy));
            }
            Ok(())
        };
        // x = LayerNorm(word[id] + (position[pos] + token_type[0]))
        steps.push(qmatmul::embed(ctx, &self.word, &ids, &x).await?);
        steps.push(qmatmul::embed(ctx, &self.position, &positions, &r).await?);
        let en = &self.embed_norm;
        steps.push(layernorm::add_layer_norm(ctx, &x, &r, &self.token_type, &en.w, &en.b, c.eps).await?);
        capture(&mut steps, "hidden.0".into()).await?;
        for (l, layer) in self.layers.iter().enumerate() {
            // x = LayerNorm(x + (wo · attention(wqkv · x + b) + b))
            steps.push(product(ctx, &layer.qkv, &x, &qkv).await?);
            steps.push(elementwise::bias_add(ctx, &qkv, &layer.qkv_b).await?);
            steps.push(encoder_attention::encoder_attention(ctx, &qkv, &spans, &attn, c.n_heads, longest).await?);
            steps.push(product(ctx, &layer.o, &attn, &r).await?);
            let n = &layer.attn_norm;
            steps.push(layernorm::add_layer_norm(ctx, &x, &r, &layer.o_b, &n.w, &n.b, c.eps).await?);
            // x = LayerNorm(x + (w_down · gelu(w_up · x + b) + b))
            steps.push(product(ctx, &layer.up, &x, &up).await?);
            steps.push(gelu::bias_gelu(ctx, &up, &layer.up_b).await?);
            steps.push(product(ctx, &layer.down, &up, &r).await?);
            let n = &layer.out_norm;
            steps.push(layernorm::add_layer_norm(ctx, &x, &r, &layer.down_b, &n.w, &n.b, c.eps).await?);
            capture(&mut steps, format!("hidden.{}", l + 1)).await?;
        }
        steps.push(pool::pool(ctx, &x, &starts, &pooled, pass.pooling == Pooling::Cls, pass.normalize).await?);
        ctx.run(&steps.iter().collect::<Vec<_>>());
        let out = ctx.read_f32(&pooled).await?;
        let mut checkpoints = Vec::with_capacity(captures.len());
        for (name, tensor) in &captures {
            checkpoints.push((name.clone(), vec![t, d], ctx.read_f32(tensor).await?));
        }
        ctx.check()?;
        Ok((out, checkpoints))
    }
}
