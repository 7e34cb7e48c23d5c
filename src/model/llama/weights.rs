//! A Llama-family model's weights as the engine holds them: per block the norms and the
//! projections, Q/K/V and gate/up either as loaded or stacked into one matrix each.

use crate::error::Result;
use crate::gpu::{DType, GpuContext, GpuTensor};
use crate::ops::qmatmul::QWeight;

/// One transformer block's weights, in their stored formats.
pub struct LayerWeights {
    pub attn_norm: GpuTensor, // [dim]
    pub qkv: Qkv,
    /// Per-head norms of queries and keys (Qwen3), [head_dim] each.
    pub q_norm: Option<GpuTensor>,
    pub k_norm: Option<GpuTensor>,
    pub wo: QWeight,          // [dim, q_dim]
    pub ffn_norm: GpuTensor,  // [dim]
    /// Norms of the attention and MLP outputs (Gemma 2), [dim] each.
    pub post_attn_norm: Option<GpuTensor>,
    pub post_ffn_norm: Option<GpuTensor>,
    pub gate_up: GateUp,
    pub down: QWeight,        // [dim, ffn]
}

#[allow(clippy::large_enum_variant)] // one per layer; boxing would only add indirection
/// The query, key and value projections: as loaded, or stacked into one matrix so that one
/// matrix-vector product computes all three.
pub enum Qkv {
    Apart {
        wq: QWeight,               // [q_dim, dim]
        wk: QWeight,               // [kv_dim, dim]
        wv: QWeight,               // [kv_dim, dim]
        bq: Option<GpuTensor>,     // [q_dim]
        bk: Option<GpuTensor>,     // [kv_dim]
        bv: Option<GpuTensor>,     // [kv_dim]
        /// bq, bk and bv end to end [q_dim + 2 * kv_dim], as a stacked product's bias: the
        /// decode step writes the three products into one buffer laid out as that product's
        /// output and adds this with one dispatch.
        bqkv: Option<GpuTensor>,
    },
    Stacked {
        w: QWeight,                // [q_dim + 2 * kv_dim, dim]
        bias: Option<GpuTensor>,   // [q_dim + 2 * kv_dim]
    },
}

/// The gate and up projections of the MLP, as loaded or stacked.
pub enum GateUp {
    Apart {
        gate: QWeight,             // [ffn, dim]
        up: QWeight,               // [ffn, dim]
    },
    Stacked(QWeight),              // [2 * ffn, dim]: gate rows, then up rows
}

impl LayerWeights {
    pub fn bytes(&self) -> u64 {
        let qkv = match &self.qkv {
            Qkv::Apart { wq, wk, wv, bq, bk, bv, bqkv } => {
                wq.bytes() + wk.bytes() + wv.bytes() + [bq, bk, bv, bqkv].iter().flat_map(|b| b.as_ref()).map(|b| b.bytes()).sum::<u64>()
            }
            Qkv::Stacked { w, bias } => w.bytes() + bias.as_ref().map_or(0, |b| b.bytes()),
        };
        let gate_up = match &self.gate_up {
            GateUp::Apart { gate, up } => gate.bytes() + up.bytes(),
            GateUp::Stacked(w) => w.bytes(),
        };
        let extra_norms = [&self.q_norm, &self.k_norm, &self.post_attn_norm, &self.post_ffn_norm];
        let qk_norm = extra_norms.iter().flat_map(|n| n.as_ref()).map(|n| n.bytes()).sum::<u64>();
        qkv + gate_up + qk_norm + self.wo.bytes() + self.down.bytes() + self.attn_norm.bytes() + self.ffn_norm.bytes()
    }

    /// Stacks Q/K/V (with their biases when all three have one) and gate/up where their formats
    /// allow ([`QWeight::stack`]); what cannot be stacked stays apart. The separate buffers
    /// are released once the copies are queued.
    pub fn stacked(self, ctx: &GpuContext, layer: usize) -> Result<Self> {
        let qkv = match self.qkv {
            // Normed queries and keys come out of their own products: nothing to stack.
            apart if self.q_norm.is_some() => apart,
            Qkv::Apart { wq, wk, wv, bq, bk, bv, .. } => {
                // Stacked only when all three have a bias or none has.
                let uniform = matches!((&bq, &bk, &bv), (None, None, None) | (Some(_), Some(_), Some(_)));
                let w = if uniform { QWeight::stack(ctx, &format!("blk.{layer}.qkv"), &[&wq, &wk, &wv])? } else { None };
                let bias = |q: &GpuTensor, k: &GpuTensor, v: &GpuTensor| -> Result<GpuTensor> {
                    let t = ctx.concat_words(&format!("blk.{layer}.qkv.bias"), &[(q, q.len()), (k, k.len()), (v, v.len())])?;
                    let n = t.len();
                    Ok(GpuTensor { buffer: t.buffer, shape: vec![n], dtype: DType::F32 })
                };
                match (w, bq, bk, bv) {
                    (Some(w), Some(q), Some(k), Some(v)) => Qkv::Stacked { w, bias: Some(bias(&q, &k, &v)?) },
                    (Some(w), None, None, None) => Qkv::Stacked { w, bias: None },
                    // Kept apart (formats that do not stack), the separate biases stay for
                    // passes that add them product by product.
                    (_, Some(q), Some(k), Some(v)) => {
                        let bqkv = Some(bias(&q, &k, &v)?);
                        Qkv::Apart { wq, wk, wv, bq: Some(q), bk: Some(k), bv: Some(v), bqkv }
                    }
                    (_, bq, bk, bv) => Qkv::Apart { wq, wk, wv, bq, bk, bv, bqkv: None },
                }
            }
            stacked => stacked,
        };
        let gate_up = match self.gate_up {
            GateUp::Apart { gate, up } => match QWeight::stack(ctx, &format!("blk.{layer}.gate_up"), &[&gate, &up])? {
                Some(w) => GateUp::Stacked(w),
                None => GateUp::Apart { gate, up },
            },
            stacked => stacked,
        };
        Ok(Self { qkv, gate_up, ..self })
    }
}

pub struct Weights {
    pub embedding: QWeight, // [vocab, dim]
    pub layers: Vec<LayerWeights>,
    pub out_norm: GpuTensor, // [dim]
    /// None: the output head is the embedding (tied).
    pub output: Option<QWeight>, // [vocab, dim]
    /// Each matrix quantized while loading (empty when nothing was).
    pub quantized: Vec<Quantized>,
    /// The formats `quantize: 'auto'` chose, and for what budget.
    pub plan: Option<crate::model::fit::AutoPlan>,
    /// Where loading the weights went (reads, CPU work, uploads, GPU quantization).
    pub load_times: crate::model::LoadTimes,
}

/// A matrix quantized while loading: its file name, the format and `load::quant_digest` of
/// its packed form (None when the GPU quantized it and no digest was asked for).
#[derive(Clone, Debug)]
pub struct Quantized {
    pub name: String,
    pub format: crate::quant::weft::WeftQuant,
    pub digest: Option<u64>,
}

impl Weights {
    pub fn bytes(&self) -> u64 {
        let layer: u64 = self.layers.iter().map(LayerWeights::bytes).sum();
        self.embedding.bytes() + layer + self.out_norm.bytes() + self.output.as_ref().map_or(0, |o| o.bytes())
    }
}

