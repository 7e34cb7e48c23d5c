//! The decode step's graph with each RMSNorm folded into the GEMV after it and each residual
//! add into the GEMV before it ([`gemv_fused`]): per block the stacked Q/K/V product (normalising
//! x itself), RoPE + KV store, attention, the output projection added into x, the stacked
//! gate/up product (normalising again), SwiGLU and the down projection added into x; then the
//! output head, normalising, and the sampler. Eight dispatches a block where the unfused graph
//! takes ten; the same products, with the norm's sum of squares in another order.

use super::{attention_shape, rope_shape, GateUp, Graph, Llama, Qkv};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::ops::attention::{attention, attention_split, SPLIT_CHUNK};
use crate::ops::elementwise::{bias_add, silu_mul_pairs};
use crate::ops::qmatmul::{embed, gemv_fuses, gemv_fused, GemvFusion, Precision, QWeight};
use crate::ops::rope::rope_store_qkv;
use crate::ops::sample::sample;

impl Llama {
    /// The fused decode graph, or None where a weight is not stacked or has no block kernel
    /// (the caller builds the unfused one then).
    pub(super) async fn build_fused_decode(&self, ctx: &GpuContext) -> Result<Option<Graph>> {
        let (c, b, w) = (&self.config, &self.buffers, &self.weights);
        if !self.options.fuse || self.options.fuse_norms != Some(true) || self.options.precision != Precision::F32 {
            return Ok(None);
        }
        let head = w.output.as_ref().unwrap_or(&w.embedding);
        let mut stacked: Vec<(&QWeight, Option<&crate::gpu::GpuTensor>, &QWeight)> = Vec::new();
        for l in &w.layers {
            match (&l.qkv, &l.gate_up) {
                (Qkv::Stacked { w: qkv, bias }, GateUp::Stacked(gu))
                    if [qkv, gu, &l.wo, &l.down].iter().all(|m| gemv_fuses(m)) =>
                {
                    stacked.push((qkv, bias.as_ref(), gu))
                }
                _ => return Ok(None),
            }
        }
        if !gemv_fuses(head) {
            return Ok(None);
        }
        let eps = c.rms_eps;
        let x = b.x.view(&[1, c.dim])?;
        let q3 = b.q.view(&[1, c.n_heads, c.head_dim])?;
        let attn = b.attn.view(&[1, c.q_dim()])?;
        let a3 = b.attn.view(&[1, c.n_heads, c.head_dim])?;
        let qkv = b.qkv.view(&[1, c.q_dim() + 2 * c.kv_dim()])?;
        let qkv3 = b.qkv.view(&[1, c.n_heads + 2 * c.n_kv_heads, c.head_dim])?;
        let gate_up = b.gate_up.view(&[1, 2 * c.ffn_dim])?;
        let act = b.act.view(&[1, c.ffn_dim])?;
        let logits = b.logits.view(&[1, c.vocab])?;
        let rs = rope_shape(c, &self.options, 1);
        let shape = attention_shape(c, &self.options, 1);
        let scale = 1.0 / (c.head_dim as f32).sqrt();
        let normed = |norm| GemvFusion { norm: Some((norm, eps)), residual: false };
        let added = GemvFusion { norm: None, residual: true };

        let mut d = Vec::with_capacity(8 * c.n_layers + 3);
        d.push(embed(ctx, &w.embedding, &self.chosen.view(&[1])?, &x).await?);
        for (i, (l, &(wqkv, bias, wgu))) in w.layers.iter().zip(&stacked).enumerate() {
            let (kc, vc) = (&self.k_cache[i], &self.v_cache[i]);
            d.push(gemv_fused(ctx, wqkv, &x, &qkv, normed(&l.attn_norm)).await?);
            if let Some(bias) = bias {
                d.push(bias_add(ctx, &qkv, bias).await?);
            }
            d.push(rope_store_qkv(ctx, rs, &qkv3, &q3, kc, vc, &self.rope, &self.step).await?);
            if self.options.split_attention == Some(true) {
                let partials = &b.partials;
                d.extend(attention_split(ctx, shape, &q3, kc, vc, partials, &a3, scale, &self.step, SPLIT_CHUNK).await?);
            } else {
                d.push(attention(ctx, shape, &q3, kc, vc, &a3, scale, &self.step).await?);
            }
            d.push(gemv_fused(ctx, &l.wo, &attn, &x, added).await?);
            d.push(gemv_fused(ctx, wgu, &x, &gate_up, normed(&l.ffn_norm)).await?);
            d.push(silu_mul_pairs(ctx, &gate_up, &act).await?);
            d.push(gemv_fused(ctx, &l.down, &act, &x, added).await?);
        }
        d.push(gemv_fused(ctx, head, &x, &logits, normed(&w.out_norm)).await?);
        let flat = b.logits.view(&[c.vocab])?;
        d.push(sample(ctx, &flat, &self.tokens, &self.chosen, &self.sampling, &self.step).await?);
        Ok(Some(Graph { dispatches: d }))
    }
}
