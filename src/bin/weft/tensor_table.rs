//! The tensor table shared by the commands that list tensors: one row per tensor and totals
//! per storage type, printable as text or serialisable as JSON.

use serde::Serialize;
use weft::format::TensorInfo;

#[derive(Clone, Debug, Serialize)]
pub struct TensorRow {
    pub name: String,
    pub storage: &'static str,
    pub shape: Vec<u64>,
    pub elements: u64,
    pub offset: u64,
    pub bytes: u64,
    /// None for tensors without elements.
    pub bits_per_weight: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StorageTotal {
    pub storage: &'static str,
    pub tensors: usize,
    pub elements: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TensorTotals {
    pub tensors: usize,
    pub elements: u64,
    pub bytes: u64,
    pub bits_per_weight: Option<f64>,
    /// Per storage type, in order of first appearance.
    pub by_storage: Vec<StorageTotal>,
}

fn bits_per_weight(bytes: u64, elements: u64) -> Option<f64> {
    (elements > 0).then(|| bytes as f64 * 8.0 / elements as f64)
}

pub fn row(t: &TensorInfo) -> TensorRow {
    TensorRow {
        name: t.name.clone(),
        storage: t.storage.name(),
        shape: t.shape.clone(),
        elements: t.elements(),
        offset: t.range.start,
        bytes: t.byte_len(),
        bits_per_weight: bits_per_weight(t.byte_len(), t.elements()),
    }
}

pub fn rows(tensors: &[TensorInfo]) -> Vec<TensorRow> {
    tensors.iter().map(row).collect()
}

pub fn totals(rows: &[TensorRow]) -> TensorTotals {
    let mut by_storage: Vec<StorageTotal> = Vec::new();
    for row in rows {
        let index = match by_storage.iter().position(|s| s.storage == row.storage) {
            Some(index) => index,
            None => {
                by_storage.push(StorageTotal { storage: row.storage, tensors: 0, elements: 0, bytes: 0 });
                by_storage.len() - 1
            }
        };
        if let Some(total) = by_storage.get_mut(index) {
            total.tensors += 1;
            total.elements = total.elements.saturating_add(row.elements);
            total.bytes = total.bytes.saturating_add(row.bytes);
        }
    }
    let elements = rows.iter().fold(0u64, |acc, r| acc.saturating_add(r.elements));
    let bytes = rows.iter().fold(0u64, |acc, r| acc.saturating_add(r.bytes));
    TensorTotals { tensors: rows.len(), elements, bytes, bits_per_weight: bits_per_weight(bytes, elements), by_storage }
}

fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

fn bpw_text(bpw: Option<f64>) -> String {
    bpw.map_or_else(|| "-".to_string(), |b| format!("{b:.3}"))
}

pub fn print(rows: &[TensorRow], totals: &TensorTotals) {
    print_rows(rows);
    println!();
    println!("{:<8} {:>8} {:>14} {:>14} {:>11}", "type", "tensors", "elements", "bytes", "bits/weight");
    for s in &totals.by_storage {
        println!(
            "{:<8} {:>8} {:>14} {:>14} {:>11}",
            s.storage,
            s.tensors,
            s.elements,
            s.bytes,
            bpw_text(bits_per_weight(s.bytes, s.elements))
        );
    }
    println!(
        "{:<8} {:>8} {:>14} {:>14} {:>11}",
        "total",
        totals.tensors,
        totals.elements,
        totals.bytes,
        bpw_text(totals.bits_per_weight)
    );
}

/// The tensor rows alone, under a heading.
pub fn print_rows(rows: &[TensorRow]) {
    let name_width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    println!("{:<name_width$}  {:<8} {:<16} {:>12} {:>11}", "name", "type", "shape", "bytes", "bits/weight");
    for row in rows {
        println!(
            "{:<name_width$}  {:<8} {:<16} {:>12} {:>11}",
            row.name,
            row.storage,
            shape_text(&row.shape),
            row.bytes,
            bpw_text(row.bits_per_weight)
        );
    }
}

/// Names shown when a requested tensor does not exist.
const SUGGESTIONS: usize = 8;

/// "No such tensor", with the names closest to `wanted`: those containing it (or contained in
/// it) first, then those within a few edits. A model has hundreds of tensors whose names differ
/// by a layer number or a suffix, so a plain list of all of them would bury the answer.
pub fn unknown_tensor_message(wanted: &str, source: &str, tensors: &[TensorInfo]) -> String {
    let close = close_names(wanted, tensors.iter().map(|t| t.name.as_str()));
    let mut message = format!("{source} has no tensor named '{wanted}'");
    if close.is_empty() {
        let some: Vec<&str> = tensors.iter().take(SUGGESTIONS).map(|t| t.name.as_str()).collect();
        message += &format!(" and none with a similar name; its {} tensors include: {}", tensors.len(), some.join(", "));
    } else {
        message += &format!("; close names: {}", close.join(", "));
    }
    message + " (`weft inspect FILE` lists them all)"
}

pub fn close_names<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    // Up to a third of the name may differ: catches typos and a wrong layer index or suffix.
    let max_edits = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = names
        .filter_map(|name| {
            let lower = name.to_lowercase();
            if lower.contains(&wanted_lower) || wanted_lower.contains(&lower) {
                return Some((0, name));
            }
            let distance = edit_distance(&wanted_lower, &lower);
            (distance <= max_edits).then_some((distance, name))
        })
        .collect();
    scored.sort_by_key(|&(distance, name)| (distance, name.len(), name));
    scored.into_iter().take(SUGGESTIONS).map(|(_, name)| name).collect()
}

/// Levenshtein distance over chars (insertions, deletions, substitutions).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("blk.0.attn_q.weight", "blk.0.attn_q.weight"), 0);
    }

    #[test]
    fn close_names_rank_substrings_then_typos() {
        let names = ["blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.10.attn_q.weight", "output_norm.weight", "token_embd.weight"];
        let close = |wanted| close_names(wanted, names.iter().copied());
        assert_eq!(close("attn_q"), vec!["blk.0.attn_q.weight", "blk.10.attn_q.weight"]);
        assert_eq!(close("blk.0.attn_x.weight"), vec!["blk.0.attn_k.weight", "blk.0.attn_q.weight", "blk.10.attn_q.weight"]);
        assert_eq!(close("token_embed.weight"), vec!["token_embd.weight"]);
        assert!(close("lm_head.bias").is_empty());
    }
}
