//! Tensor names of both file layouts mapped once to the parts of the model.

use super::config::Arch;

/// A weight's role in a decoder-only transformer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    Embedding,
    OutputNorm,
    Output,
    Layer(usize, LayerPart),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerPart {
    AttnNorm,
    Q,
    K,
    V,
    QBias,
    KBias,
    VBias,
    /// Per-head RMSNorm weights of queries and keys (Qwen3), [head_dim].
    QNorm,
    KNorm,
    AttnOut,
    FfnNorm,
    /// Norms after attention and after the MLP (Gemma 2).
    PostAttnNorm,
    PostFfnNorm,
    Gate,
    Up,
    Down,
}

const GGUF_LAYER: [(&str, LayerPart); 16] = [
    ("attn_norm.weight", LayerPart::AttnNorm),
    ("attn_q.weight", LayerPart::Q),
    ("attn_k.weight", LayerPart::K),
    ("attn_v.weight", LayerPart::V),
    ("attn_q.bias", LayerPart::QBias),
    ("attn_k.bias", LayerPart::KBias),
    ("attn_v.bias", LayerPart::VBias),
    ("attn_q_norm.weight", LayerPart::QNorm),
    ("attn_k_norm.weight", LayerPart::KNorm),
    ("attn_output.weight", LayerPart::AttnOut),
    ("ffn_norm.weight", LayerPart::FfnNorm),
    ("post_attention_norm.weight", LayerPart::PostAttnNorm),
    ("post_ffw_norm.weight", LayerPart::PostFfnNorm),
    ("ffn_gate.weight", LayerPart::Gate),
    ("ffn_up.weight", LayerPart::Up),
    ("ffn_down.weight", LayerPart::Down),
];

const HF_LAYER: [(&str, LayerPart); 15] = [
    ("input_layernorm.weight", LayerPart::AttnNorm),
    ("self_attn.q_proj.weight", LayerPart::Q),
    ("self_attn.k_proj.weight", LayerPart::K),
    ("self_attn.v_proj.weight", LayerPart::V),
    ("self_attn.q_proj.bias", LayerPart::QBias),
    ("self_attn.k_proj.bias", LayerPart::KBias),
    ("self_attn.v_proj.bias", LayerPart::VBias),
    ("self_attn.q_norm.weight", LayerPart::QNorm),
    ("self_attn.k_norm.weight", LayerPart::KNorm),
    ("self_attn.o_proj.weight", LayerPart::AttnOut),
    ("post_attention_layernorm.weight", LayerPart::FfnNorm),
    ("post_feedforward_layernorm.weight", LayerPart::PostFfnNorm),
    ("mlp.gate_proj.weight", LayerPart::Gate),
    ("mlp.up_proj.weight", LayerPart::Up),
    ("mlp.down_proj.weight", LayerPart::Down),
];

/// The part a tensor name stands for in GGUF (`blk.3.attn_q.weight`) or Hugging Face
/// (`model.layers.3.self_attn.q_proj.weight`) naming; None for tensors the model does not use
/// (such as precomputed rotary tables).
pub fn part_of(name: &str) -> Option<Part> {
    match name {
        "token_embd.weight" | "model.embed_tokens.weight" => return Some(Part::Embedding),
        "output_norm.weight" | "model.norm.weight" => return Some(Part::OutputNorm),
        "output.weight" | "lm_head.weight" => return Some(Part::Output),
        _ => {}
    }
    let (rest, table) = if let Some(rest) = name.strip_prefix("blk.") {
        (rest, &GGUF_LAYER[..])
    } else if let Some(rest) = name.strip_prefix("model.layers.") {
        (rest, &HF_LAYER[..])
    } else {
        return None;
    };
    let (index, suffix) = rest.split_once('.')?;
    let index: usize = index.parse().ok()?;
    table.iter().find(|(s, _)| *s == suffix).map(|&(_, p)| Part::Layer(index, p))
}

/// [`part_of`] for a model of `arch`. Gemma's Hugging Face names differ in one place: its
/// `post_attention_layernorm` is the norm after attention and `pre_feedforward_layernorm` the
/// MLP's input norm, which Llama calls `post_attention_layernorm`.
pub fn part_of_in(name: &str, arch: Arch) -> Option<Part> {
    if arch.is_gemma() {
        if let Some((i, suffix)) = name.strip_prefix("model.layers.").and_then(|r| r.split_once('.')) {
            let i: usize = i.parse().ok()?;
            match suffix {
                "post_attention_layernorm.weight" => return Some(Part::Layer(i, LayerPart::PostAttnNorm)),
                "pre_feedforward_layernorm.weight" => return Some(Part::Layer(i, LayerPart::FfnNorm)),
                _ => {}
            }
        }
    }
    part_of(name)
}

/// Phi-3's fused matrices as the separate ones the forward pass reads: `qkv_proj` /
/// `attn_qkv` into q, k and v, `gate_up_proj` / llama.cpp's `ffn_up` of twice the FFN width into
/// gate and up. Each part is a run of whole rows, so a new tensor entry pointing into the fused
/// one's bytes is the split: nothing is copied, and the loader fetches the same ranges.
pub fn split_fused(tensors: &mut Vec<crate::format::TensorInfo>, c: &super::LlamaConfig) -> crate::error::Result<()> {
    if c.arch != Arch::Phi3 {
        return Ok(());
    }
    let (q, kv, ffn) = (c.q_dim() as u64, c.kv_dim() as u64, c.ffn_dim as u64);
    let mut out = Vec::with_capacity(tensors.len() + 2 * c.n_layers);
    for t in tensors.drain(..) {
        let fused: Option<(&str, Vec<(&str, u64)>)> = if let Some(rest) = t.name.strip_suffix("self_attn.qkv_proj.weight") {
            Some((rest, vec![("self_attn.q_proj.weight", q), ("self_attn.k_proj.weight", kv), ("self_attn.v_proj.weight", kv)]))
        } else if let Some(rest) = t.name.strip_suffix("mlp.gate_up_proj.weight") {
            Some((rest, vec![("mlp.gate_proj.weight", ffn), ("mlp.up_proj.weight", ffn)]))
        } else if let Some(rest) = t.name.strip_suffix("attn_qkv.weight") {
            Some((rest, vec![("attn_q.weight", q), ("attn_k.weight", kv), ("attn_v.weight", kv)]))
        } else if let (Some(rest), Some(&2)) = (t.name.strip_suffix("ffn_up.weight"), t.shape.first().map(|&r| r / ffn.max(1)).as_ref()) {
            Some((rest, vec![("ffn_gate.weight", ffn), ("ffn_up.weight", ffn)]))
        } else {
            None
        };
        let Some((prefix, parts)) = fused else {
            out.push(t);
            continue;
        };
        let rows: u64 = parts.iter().map(|p| p.1).sum();
        let bytes = t.range.end - t.range.start;
        if t.shape.len() != 2 || t.shape[0] != rows || bytes % rows != 0 {
            return Err(crate::error::Error::TensorShape { name: t.name.clone(), shape: t.shape.clone(), expected: vec![rows, c.dim as u64] });
        }
        let row_bytes = bytes / rows;
        let mut start = t.range.start;
        for (suffix, n) in parts {
            let end = start + n * row_bytes;
            out.push(crate::format::TensorInfo { name: format!("{prefix}{suffix}"), storage: t.storage, shape: vec![n, t.shape[1]], range: start..end });
            start = end;
        }
    }
    *tensors = out;
    Ok(())
}

/// Which file layout a name is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    Gguf,
    HuggingFace,
}

/// The name `part` has in `naming` (the inverse of [`part_of`]), for messages about tensors a
/// file lacks.
pub fn tensor_name(part: Part, naming: Naming) -> String {
    let hf = naming == Naming::HuggingFace;
    match part {
        Part::Embedding => if hf { "model.embed_tokens.weight" } else { "token_embd.weight" }.into(),
        Part::OutputNorm => if hf { "model.norm.weight" } else { "output_norm.weight" }.into(),
        Part::Output => if hf { "lm_head.weight" } else { "output.weight" }.into(),
        Part::Layer(i, lp) => {
            let (prefix, table) = if hf { ("model.layers.", &HF_LAYER[..]) } else { ("blk.", &GGUF_LAYER[..]) };
            let suffix = match (hf, lp) {
                (true, LayerPart::PostAttnNorm) => "post_attention_layernorm.weight",
                _ => table.iter().find(|(_, p)| *p == lp).map_or("?", |(s, _)| s),
            };
            format!("{prefix}{i}.{suffix}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_namings_map_to_the_same_parts() {
        assert_eq!(part_of("blk.12.attn_q.weight"), Some(Part::Layer(12, LayerPart::Q)));
        assert_eq!(
            part_of("model.layers.12.self_attn.q_proj.weight"),
            Some(Part::Layer(12, LayerPart::Q))
        );
        assert_eq!(part_of("model.layers.0.mlp.down_proj.weight"), Some(Part::Layer(0, LayerPart::Down)));
        assert_eq!(part_of("lm_head.weight"), Some(Part::Output));
        assert_eq!(part_of("rope_freqs.weight"), None);
        assert_eq!(part_of("blk.x.attn_q.weight"), None);
    }

    #[test]
    fn names_map_back() {
        for naming in [Naming::Gguf, Naming::HuggingFace] {
            for part in [Part::Embedding, Part::OutputNorm, Part::Output, Part::Layer(7, LayerPart::VBias)] {
                assert_eq!(part_of(&tensor_name(part, naming)), Some(part));
            }
        }
    }

    #[test]
    fn fused_phi3_matrices_split_into_row_ranges() {
        let json = r#"{"model_type":"phi3","vocab_size":32,"hidden_size":16,"intermediate_size":24,"num_hidden_layers":1,
            "num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-5}"#;
        let c = crate::model::LlamaConfig::from_hf_json(json).unwrap();
        let t = |name: &str, rows: u64, start: u64| crate::format::TensorInfo {
            name: name.into(),
            storage: crate::format::StorageType::Safe(crate::format::SafeDtype::F16),
            shape: vec![rows, 16],
            range: start..start + rows * 32,
        };
        let mut tensors = vec![t("model.layers.0.self_attn.qkv_proj.weight", 32, 100), t("blk.0.ffn_up.weight", 48, 5000)];
        split_fused(&mut tensors, &c).unwrap();
        let got: Vec<(&str, std::ops::Range<u64>)> = tensors.iter().map(|t| (t.name.as_str(), t.range.clone())).collect();
        assert_eq!(
            got,
            [
                ("model.layers.0.self_attn.q_proj.weight", 100..612),
                ("model.layers.0.self_attn.k_proj.weight", 612..868),
                ("model.layers.0.self_attn.v_proj.weight", 868..1124),
                ("blk.0.ffn_gate.weight", 5000..5768),
                ("blk.0.ffn_up.weight", 5768..6536),
            ]
        );
        let mut wrong = vec![t("model.layers.0.self_attn.qkv_proj.weight", 30, 0)];
        assert!(split_fused(&mut wrong, &c).is_err());
    }
}

