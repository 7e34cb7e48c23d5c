//! Calibration statistics: for each weight matrix, the mean square and the mean of every input
//! column over a calibration text, as `weft calibrate` measures them with weft's own forward
//! graph. `weft quantize --calibration` weighs each weight's rounding error by its column's mean
//! square, the expected squared input it multiplies (the imatrix idea of llama.cpp).
//!
//! File (docs/FORMAT.md, "Calibration files"): safetensors with two f32 tensors per matrix,
//! `NAME.mean_sq` and `NAME.mean` of shape [cols], NAME being the GGUF tensor name
//! (`blk.3.attn_q.weight`), and metadata `weft.calibration` = JSON `{"tokens", "text"}`.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::format::safetensors::parse_safetensors;
use crate::format::writer::SafetensorsWriter;
use crate::format::SafeDtype;
use crate::model::names::{part_of, tensor_name, LayerPart, Naming, Part};

pub const METADATA_KEY: &str = "weft.calibration";

/// Input statistics of one matrix's columns.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnStats {
    pub mean_sq: Vec<f32>,
    pub mean: Vec<f32>,
}

/// Statistics for every matrix the calibration text reached, keyed by GGUF tensor name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calibration {
    pub tokens: u64,
    pub text: String,
    pub matrices: BTreeMap<String, ColumnStats>,
}

/// The matrices that a forward-graph checkpoint feeds (the checkpoints named in
/// `model/llama/forward.rs`): the normalised residual feeds Q, K, V or gate and up, the
/// attention mix feeds the output projection, the gated activation feeds down, and the final
/// norm feeds the head (the embedding too, when the model ties them).
pub fn fed_by(checkpoint: &str) -> Vec<String> {
    if checkpoint == "final_norm" {
        return vec![tensor_name(Part::Output, Naming::Gguf), tensor_name(Part::Embedding, Naming::Gguf)];
    }
    let Some(rest) = checkpoint.strip_prefix("blk.") else { return Vec::new() };
    let Some((layer, what)) = rest.split_once('.') else { return Vec::new() };
    let Ok(l) = layer.parse::<usize>() else { return Vec::new() };
    let parts: &[LayerPart] = match what {
        "attn_in" => &[LayerPart::Q, LayerPart::K, LayerPart::V],
        "attn_mix" => &[LayerPart::AttnOut],
        "ffn_in" => &[LayerPart::Gate, LayerPart::Up],
        "ffn_act" => &[LayerPart::Down],
        _ => &[],
    };
    parts.iter().map(|&p| tensor_name(Part::Layer(l, p), Naming::Gguf)).collect()
}

/// Sums over the rows of checkpoints, per matrix.
#[derive(Default)]
pub struct Accumulator {
    sums: BTreeMap<String, (Vec<f64>, Vec<f64>, u64)>,
}

impl Accumulator {
    /// Adds the rows of a checkpoint (`values` = [rows, cols]) to every matrix it feeds.
    pub fn add(&mut self, checkpoint: &str, values: &[f32], cols: usize) {
        let names = fed_by(checkpoint);
        let Some(first) = names.first() else { return };
        let entry = self.sums.entry(first.clone()).or_insert_with(|| (vec![0.0; cols], vec![0.0; cols], 0));
        for row in values.chunks_exact(cols) {
            for (j, &v) in row.iter().enumerate() {
                entry.0[j] += (v as f64) * (v as f64);
                entry.1[j] += v as f64;
            }
            entry.2 += 1;
        }
    }

    pub fn finish(self, tokens: u64, text: &str) -> Calibration {
        let mut matrices = BTreeMap::new();
        for (first, (sq, sum, rows)) in self.sums {
            let n = rows.max(1) as f64;
            let stats = ColumnStats {
                mean_sq: sq.iter().map(|v| (v / n) as f32).collect(),
                mean: sum.iter().map(|v| (v / n) as f32).collect(),
            };
            // Every matrix fed by the same checkpoint shares its statistics.
            let checkpoint_of = |m: &str| matrices_sharing(m);
            for name in checkpoint_of(&first) {
                matrices.insert(name, stats.clone());
            }
        }
        Calibration { tokens, text: text.to_string(), matrices }
    }
}

/// The matrices fed by the same input as `name` (itself included).
fn matrices_sharing(name: &str) -> Vec<String> {
    match part_of(name) {
        Some(Part::Layer(l, LayerPart::Q)) => fed_by(&format!("blk.{l}.attn_in")),
        Some(Part::Layer(l, LayerPart::Gate)) => fed_by(&format!("blk.{l}.ffn_in")),
        Some(Part::Output) => fed_by("final_norm"),
        _ => vec![name.to_string()],
    }
}

impl Calibration {
    /// The statistics of tensor `name` in any naming weft reads (GGUF or Hugging Face).
    pub fn stats(&self, name: &str) -> Option<&ColumnStats> {
        let key = match part_of(name) {
            Some(p) => tensor_name(p, Naming::Gguf),
            None => name.to_string(),
        };
        self.matrices.get(&key)
    }

    pub fn to_writer(&self) -> Result<SafetensorsWriter> {
        let mut out = SafetensorsWriter::default();
        let meta = serde_json::json!({ "tokens": self.tokens, "text": self.text });
        out.metadata.insert(METADATA_KEY.into(), meta.to_string());
        for (name, s) in &self.matrices {
            let n = s.mean_sq.len() as u64;
            out.add(&format!("{name}.mean_sq"), SafeDtype::F32, &[n], bytemuck::cast_slice(&s.mean_sq).to_vec())?;
            out.add(&format!("{name}.mean"), SafeDtype::F32, &[n], bytemuck::cast_slice(&s.mean).to_vec())?;
        }
        Ok(out)
    }

    /// Reads a whole calibration file.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let header = parse_safetensors(bytes, Some(bytes.len() as u64))?;
        let bad = |m: String| Error::Model(format!("calibration file: {m}"));
        let meta = header.metadata.get(METADATA_KEY).ok_or_else(|| bad(format!("no {METADATA_KEY} metadata")))?;
        let meta: serde_json::Value = serde_json::from_str(meta).map_err(|e| bad(e.to_string()))?;
        let mut cal = Calibration {
            tokens: meta["tokens"].as_u64().unwrap_or(0),
            text: meta["text"].as_str().unwrap_or("").to_string(),
            matrices: BTreeMap::new(),
        };
        // Per matrix: (mean square, mean), each read from its own tensor.
        type Halves = (Option<Vec<f32>>, Option<Vec<f32>>);
        let mut halves: BTreeMap<String, Halves> = BTreeMap::new();
        for t in &header.tensors {
            let data = &bytes[t.range.start as usize..t.range.end as usize];
            let values: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            if let Some(name) = t.name.strip_suffix(".mean_sq") {
                halves.entry(name.to_string()).or_default().0 = Some(values);
            } else if let Some(name) = t.name.strip_suffix(".mean") {
                halves.entry(name.to_string()).or_default().1 = Some(values);
            }
        }
        for (name, pair) in halves {
            match pair {
                (Some(mean_sq), Some(mean)) if mean_sq.len() == mean.len() => {
                    cal.matrices.insert(name, ColumnStats { mean_sq, mean });
                }
                _ => return Err(bad(format!("{name}: needs .mean_sq and .mean of one length"))),
            }
        }
        Ok(cal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_column_moments_shared_by_matrices_of_one_input() {
        let mut acc = Accumulator::default();
        // Two rows of three columns, then one more row in a second pass.
        acc.add("blk.2.attn_in", &[1.0, -2.0, 0.0, 3.0, 2.0, 0.0], 3);
        acc.add("blk.2.attn_in", &[2.0, 0.0, 0.0], 3);
        acc.add("blk.2.ffn_act", &[1.0, 1.0], 2);
        acc.add("blk.2.residual", &[9.0, 9.0], 2); // feeds no matrix
        let cal = acc.finish(3, "t");
        let q = cal.stats("blk.2.attn_q.weight").unwrap();
        assert_eq!(q.mean_sq, vec![14.0 / 3.0, 8.0 / 3.0, 0.0]);
        assert_eq!(q.mean, vec![2.0, 0.0, 0.0]);
        // The same input, Hugging Face names.
        assert_eq!(cal.stats("model.layers.2.self_attn.v_proj.weight"), Some(q));
        assert_eq!(cal.stats("blk.2.ffn_down.weight").unwrap().mean_sq, vec![1.0, 1.0]);
        assert!(cal.stats("blk.2.ffn_up.weight").is_none());
        assert_eq!(cal.matrices.len(), 4);
        let mut file = Vec::new();
        cal.to_writer().unwrap().write(&mut file).unwrap();
        assert_eq!(Calibration::from_bytes(&file).unwrap(), cal);
    }
}
