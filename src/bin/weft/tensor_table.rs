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

pub fn rows(tensors: &[TensorInfo]) -> Vec<TensorRow> {
    tensors
        .iter()
        .map(|t| TensorRow {
            name: t.name.clone(),
            storage: t.storage.name(),
            shape: t.shape.clone(),
            elements: t.elements(),
            offset: t.range.start,
            bytes: t.byte_len(),
            bits_per_weight: bits_per_weight(t.byte_len(), t.elements()),
        })
        .collect()
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
