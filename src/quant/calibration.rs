//! Calibration statistics: for each weight matrix, the mean square and the mean of every input
//! column over a calibration text, as `weft calibrate` measures them with weft's own forward
//! graph, and optionally the inputs' second-moment matrix `E[x xᵀ]` (the Hessian of the output's
//! squared error). `weft quantize --calibration` weighs each weight's rounding error by its
//! column's mean square (the imatrix idea of llama.cpp), or with a Hessian compensates rounding
//! errors across columns (GPTQ, `quant::gptq`).
//!
//! File (docs/FORMAT.md, "Calibration files"): safetensors with two f32 tensors per matrix,
//! `NAME.mean_sq` and `NAME.mean` of shape [cols], NAME being the GGUF tensor name
//! (`blk.3.attn_q.weight`), `NAME.hessian` of shape [cols, cols] once per input (under the first
//! matrix that input feeds), and metadata `weft.calibration` = JSON `{"tokens", "text"}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::safetensors::parse_safetensors;
use crate::format::writer::SafetensorsWriter;
use crate::format::{SafeDtype, StorageType};
use crate::model::names::{part_of, tensor_name, LayerPart, Naming, Part};

pub const METADATA_KEY: &str = "weft.calibration";

/// Input statistics of one matrix's columns.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnStats {
    pub mean_sq: Vec<f32>,
    pub mean: Vec<f32>,
    /// `E[x xᵀ]`, [cols, cols] row-major, shared by the matrices of one input.
    pub hessian: Option<Arc<[f32]>>,
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

/// Sums of one input's rows: squares, values, count and (optionally) the upper triangle of
/// `Σ x xᵀ`.
struct Sums {
    sq: Vec<f64>,
    sum: Vec<f64>,
    rows: u64,
    gram: Option<Vec<f32>>,
}

/// Sums over the rows of checkpoints, per matrix.
#[derive(Default)]
pub struct Accumulator {
    sums: BTreeMap<String, Sums>,
    hessians: bool,
}

/// Adds `Σ_r x_r x_rᵀ` of `values` ([rows, k]) to the upper triangle of `gram` ([k, k]). Rows go
/// in blocks so that a block stays in cache while each row of the triangle is updated; the inner
/// loop is a contiguous multiply-add the compiler vectorizes.
fn add_gram(gram: &mut [f32], values: &[f32], k: usize) {
    const BLOCK: usize = 64;
    for block in values.chunks(BLOCK * k) {
        for i in 0..k {
            let row = &mut gram[i * k + i..(i + 1) * k];
            for x in block.chunks_exact(k) {
                let a = x[i];
                if a != 0.0 {
                    for (g, &v) in row.iter_mut().zip(&x[i..]) {
                        *g += a * v;
                    }
                }
            }
        }
    }
}

impl Accumulator {
    /// With `hessians`, also sums every input's `x xᵀ` (k² values per input: ~400 MB for
    /// SmolLM2-135M).
    pub fn new(hessians: bool) -> Self {
        Self { sums: BTreeMap::new(), hessians }
    }

    /// Adds the rows of a checkpoint (`values` = [rows, cols]) to every matrix it feeds.
    pub fn add(&mut self, checkpoint: &str, values: &[f32], cols: usize) {
        let names = fed_by(checkpoint);
        let Some(first) = names.first() else { return };
        let hessians = self.hessians;
        let entry = self.sums.entry(first.clone()).or_insert_with(|| Sums {
            sq: vec![0.0; cols],
            sum: vec![0.0; cols],
            rows: 0,
            gram: hessians.then(|| vec![0.0; cols * cols]),
        });
        for row in values.chunks_exact(cols) {
            for (j, &v) in row.iter().enumerate() {
                entry.sq[j] += (v as f64) * (v as f64);
                entry.sum[j] += v as f64;
            }
            entry.rows += 1;
        }
        if let Some(gram) = &mut entry.gram {
            add_gram(gram, &values[..values.len() / cols * cols], cols);
        }
    }

    pub fn finish(self, tokens: u64, text: &str) -> Calibration {
        let mut matrices = BTreeMap::new();
        for (first, s) in self.sums {
            let n = s.rows.max(1) as f64;
            let k = s.sq.len();
            let hessian = s.gram.map(|mut g| {
                for i in 0..k {
                    for j in i..k {
                        let v = (g[i * k + j] as f64 / n) as f32;
                        g[i * k + j] = v;
                        g[j * k + i] = v;
                    }
                }
                Arc::from(g)
            });
            let stats = ColumnStats {
                mean_sq: s.sq.iter().map(|v| (v / n) as f32).collect(),
                mean: s.sum.iter().map(|v| (v / n) as f32).collect(),
                hessian,
            };
            // Every matrix fed by the same checkpoint shares its statistics.
            for name in matrices_sharing(&first) {
                matrices.insert(name, stats.clone());
            }
        }
        Calibration { tokens, text: text.to_string(), matrices }
    }
}

/// The matrices fed by the same input as `name` (itself included), the first being the one a
/// file stores the input's Hessian under.
fn matrices_sharing(name: &str) -> Vec<String> {
    match part_of(name) {
        Some(Part::Layer(l, LayerPart::Q | LayerPart::K | LayerPart::V)) => fed_by(&format!("blk.{l}.attn_in")),
        Some(Part::Layer(l, LayerPart::Gate | LayerPart::Up)) => fed_by(&format!("blk.{l}.ffn_in")),
        Some(Part::Output | Part::Embedding) => fed_by("final_norm"),
        _ => vec![name.to_string()],
    }
}

fn problem(p: String) -> Error {
    Error::Calibration { problem: p }
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

    /// The statistics of matrix `name` of `cols` columns: `None` when the calibration did not
    /// reach it, an error when they were measured for a matrix of another width (another model).
    pub fn stats_for(&self, name: &str, cols: usize) -> Result<Option<&ColumnStats>> {
        match self.stats(name) {
            Some(s) if s.mean_sq.len() != cols => Err(problem(format!(
                "{name} has {cols} columns but its statistics have {}: they were measured on another model",
                s.mean_sq.len()
            ))),
            other => Ok(other),
        }
    }

    pub fn to_writer(&self) -> Result<SafetensorsWriter> {
        let mut out = SafetensorsWriter::default();
        let meta = serde_json::json!({ "tokens": self.tokens, "text": self.text });
        out.metadata.insert(METADATA_KEY.into(), meta.to_string());
        for (name, s) in &self.matrices {
            let n = s.mean_sq.len() as u64;
            out.add(&format!("{name}.mean_sq"), SafeDtype::F32, &[n], bytemuck::cast_slice(&s.mean_sq).to_vec())?;
            out.add(&format!("{name}.mean"), SafeDtype::F32, &[n], bytemuck::cast_slice(&s.mean).to_vec())?;
            let first = matrices_sharing(name).into_iter().find(|m| self.matrices.contains_key(m));
            if let (Some(h), true) = (&s.hessian, first.as_deref() == Some(name.as_str())) {
                out.add(&format!("{name}.hessian"), SafeDtype::F32, &[n, n], bytemuck::cast_slice(h).to_vec())?;
            }
        }
        Ok(out)
    }

    /// Reads a whole calibration file. Every tensor must be F32 and named `NAME.mean_sq`,
    /// `NAME.mean` or `NAME.hessian`, of shapes [cols], [cols] and [cols, cols].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let header = parse_safetensors(bytes, Some(bytes.len() as u64))?;
        let meta = header.metadata.get(METADATA_KEY).ok_or_else(|| problem(format!("no {METADATA_KEY} metadata")))?;
        let meta: serde_json::Value =
            serde_json::from_str(meta).map_err(|e| problem(format!("{METADATA_KEY} metadata: {e}")))?;
        let mut cal = Calibration {
            tokens: meta["tokens"].as_u64().unwrap_or(0),
            text: meta["text"].as_str().unwrap_or("").to_string(),
            matrices: BTreeMap::new(),
        };
        // Per matrix: (mean square, mean, Hessian), each read from its own tensor.
        type Parts = (Option<Vec<f32>>, Option<Vec<f32>>, Option<Vec<f32>>);
        let mut parts: BTreeMap<String, Parts> = BTreeMap::new();
        for t in &header.tensors {
            if t.storage != StorageType::Safe(SafeDtype::F32) {
                return Err(problem(format!("{} is {}, not F32", t.name, t.storage.name())));
            }
            let data = &bytes[t.range.start as usize..t.range.end as usize];
            let values: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            let (name, rank) = if let Some(n) = t.name.strip_suffix(".mean_sq") {
                (n, 1)
            } else if let Some(n) = t.name.strip_suffix(".mean") {
                (n, 1)
            } else if let Some(n) = t.name.strip_suffix(".hessian") {
                (n, 2)
            } else {
                return Err(problem(format!("{}: not a .mean_sq, .mean or .hessian tensor", t.name)));
            };
            if t.shape.len() != rank || t.shape.iter().any(|&d| d != t.shape[0]) {
                return Err(problem(format!("{} has shape {:?}", t.name, t.shape)));
            }
            let entry = parts.entry(name.to_string()).or_default();
            match rank {
                2 => entry.2 = Some(values),
                _ if t.name.ends_with(".mean_sq") => entry.0 = Some(values),
                _ => entry.1 = Some(values),
            }
        }
        let mut hessians = Vec::new();
        for (name, (mean_sq, mean, hessian)) in parts {
            let (Some(mean_sq), Some(mean)) = (mean_sq, mean) else {
                return Err(problem(format!("{name} needs both .mean_sq and .mean")));
            };
            let n = mean_sq.len();
            if mean.len() != n || hessian.as_ref().is_some_and(|h| h.len() != n * n) {
                return Err(problem(format!("{name}: its .mean_sq, .mean and .hessian disagree on the width")));
            }
            if let Some(h) = hessian {
                hessians.push((name.clone(), Arc::<[f32]>::from(h)));
            }
            cal.matrices.insert(name, ColumnStats { mean_sq, mean, hessian: None });
        }
        for (name, h) in hessians {
            for m in matrices_sharing(&name) {
                if let Some(s) = cal.matrices.get_mut(&m).filter(|s| s.mean_sq.len() * s.mean_sq.len() == h.len()) {
                    s.hessian = Some(h.clone());
                }
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
        let mut acc = Accumulator::new(false);
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

    #[test]
    fn hessians_are_second_moments_stored_once_per_input() {
        let mut acc = Accumulator::new(true);
        // 70 rows (more than one block of the Gram sum) of 3 columns.
        let x: Vec<f32> = (0..210).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
        acc.add("blk.0.attn_in", &x, 3);
        let cal = acc.finish(70, "t");
        let h = cal.stats("blk.0.attn_k.weight").unwrap().hessian.clone().unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let want: f64 = x.chunks(3).map(|r| r[i] as f64 * r[j] as f64).sum::<f64>() / 70.0;
                assert!((h[i * 3 + j] as f64 - want).abs() < 1e-5, "{i},{j}: {} vs {want}", h[i * 3 + j]);
            }
            assert!((h[i * 3 + i] - cal.stats("blk.0.attn_q.weight").unwrap().mean_sq[i]).abs() < 1e-5);
        }
        let mut file = Vec::new();
        let writer = cal.to_writer().unwrap();
        writer.write(&mut file).unwrap();
        let back = Calibration::from_bytes(&file).unwrap();
        assert_eq!(back, cal);
        let header = parse_safetensors(&file, Some(file.len() as u64)).unwrap();
        let stored: Vec<&str> = header.tensors.iter().map(|t| t.name.as_str()).filter(|n| n.ends_with(".hessian")).collect();
        assert_eq!(stored, ["blk.0.attn_q.weight.hessian"]);
    }

    /// A file with a wrong dtype, shape or a missing half is a typed error naming the tensor.
    #[test]
    fn damaged_files_are_calibration_errors() {
        let meta = |w: &mut SafetensorsWriter| {
            w.metadata.insert(METADATA_KEY.into(), r#"{"tokens":1,"text":"t"}"#.into());
        };
        let f32s = |v: &[f32]| bytemuck::cast_slice(v).to_vec();
        let cases: Vec<(SafetensorsWriter, &str)> = vec![
            {
                let mut w = SafetensorsWriter::default();
                meta(&mut w);
                w.add("a.mean_sq", SafeDtype::F16, &[2], vec![0; 4]).unwrap();
                w.add("a.mean", SafeDtype::F32, &[2], f32s(&[0.0, 0.0])).unwrap();
                (w, "a.mean_sq is F16, not F32")
            },
            {
                let mut w = SafetensorsWriter::default();
                meta(&mut w);
                w.add("a.mean_sq", SafeDtype::F32, &[1, 2], f32s(&[0.0, 0.0])).unwrap();
                (w, "a.mean_sq has shape [1, 2]")
            },
            {
                let mut w = SafetensorsWriter::default();
                meta(&mut w);
                w.add("a.mean_sq", SafeDtype::F32, &[2], f32s(&[0.0, 0.0])).unwrap();
                (w, "a needs both .mean_sq and .mean")
            },
            {
                let mut w = SafetensorsWriter::default();
                meta(&mut w);
                w.add("a.mean_sq", SafeDtype::F32, &[2], f32s(&[0.0, 0.0])).unwrap();
                w.add("a.mean", SafeDtype::F32, &[2], f32s(&[0.0, 0.0])).unwrap();
                w.add("a.hessian", SafeDtype::F32, &[3, 3], f32s(&[0.0; 9])).unwrap();
                (w, "disagree on the width")
            },
            (SafetensorsWriter::default(), "no weft.calibration metadata"),
        ];
        for (w, want) in cases {
            let mut file = Vec::new();
            w.write(&mut file).unwrap();
            match Calibration::from_bytes(&file) {
                Err(Error::Calibration { problem }) => assert!(problem.contains(want), "{problem}"),
                other => panic!("{want}: {other:?}"),
            }
        }
        // Statistics of another model's width.
        let mut acc = Accumulator::new(false);
        acc.add("blk.0.ffn_act", &[1.0, 2.0], 2);
        let cal = acc.finish(1, "t");
        assert!(cal.stats_for("blk.0.ffn_down.weight", 2).unwrap().is_some());
        assert!(cal.stats_for("blk.1.ffn_down.weight", 3).unwrap().is_none());
        assert!(matches!(cal.stats_for("blk.0.ffn_down.weight", 3), Err(Error::Calibration { .. })));
    }
}
