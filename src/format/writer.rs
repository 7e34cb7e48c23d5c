//! Writing safetensors files (weft's quantized models are ordinary safetensors files).

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{json, Map, Value};

use super::SafeDtype;
use crate::error::{Error, Result};

/// Tensors in the order they are added, then written with their header.
#[derive(Default)]
pub struct SafetensorsWriter {
    tensors: Vec<(String, SafeDtype, Vec<u64>, Vec<u8>)>,
    pub metadata: BTreeMap<String, String>,
}

impl SafetensorsWriter {
    pub fn add(&mut self, name: &str, dtype: SafeDtype, shape: &[u64], bytes: Vec<u8>) -> Result<()> {
        let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let expected = elements.and_then(|n| dtype.bytes_for(n));
        if expected != Some(bytes.len() as u64) {
            return Err(Error::Model(format!(
                "{name}: {} bytes do not hold {shape:?} of {}",
                bytes.len(),
                dtype.name()
            )));
        }
        if self.tensors.iter().any(|t| t.0 == name) || name == "__metadata__" {
            return Err(Error::Model(format!("tensor name '{name}' used twice")));
        }
        self.tensors.push((name.to_string(), dtype, shape.to_vec(), bytes));
        Ok(())
    }

    /// Bytes of tensor data so far.
    pub fn data_len(&self) -> u64 {
        self.tensors.iter().map(|t| t.3.len() as u64).sum()
    }

    pub fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut header = Map::new();
        if !self.metadata.is_empty() {
            header.insert("__metadata__".into(), json!(self.metadata));
        }
        let mut offset = 0u64;
        for (name, dtype, shape, bytes) in &self.tensors {
            let end = offset + bytes.len() as u64;
            header.insert(
                name.clone(),
                json!({ "dtype": dtype.name(), "shape": shape, "data_offsets": [offset, end] }),
            );
            offset = end;
        }
        let mut text = Value::Object(header).to_string().into_bytes();
        // Pad with spaces so tensor data starts 8-byte aligned, as other writers do.
        text.resize(text.len().div_ceil(8) * 8, b' ');
        out.write_all(&(text.len() as u64).to_le_bytes())?;
        out.write_all(&text)?;
        for (_, _, _, bytes) in &self.tensors {
            out.write_all(bytes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse_safetensors;

    #[test]
    fn written_files_parse_back() {
        let mut w = SafetensorsWriter::default();
        w.add("a", SafeDtype::F32, &[2, 3], vec![1; 24]).unwrap();
        w.add("b", SafeDtype::U8, &[5], vec![2; 5]).unwrap();
        w.add("c", SafeDtype::F16, &[1], vec![3; 2]).unwrap();
        w.metadata.insert("weft.version".into(), "1".into());
        assert!(w.add("a", SafeDtype::U8, &[1], vec![0]).is_err());
        assert!(w.add("d", SafeDtype::F32, &[2], vec![0; 7]).is_err());
        let mut bytes = Vec::new();
        w.write(&mut bytes).unwrap();
        let h = parse_safetensors(&bytes, Some(bytes.len() as u64)).unwrap();
        assert_eq!(h.data_start % 8, 0);
        assert_eq!(h.metadata.get("weft.version").map(String::as_str), Some("1"));
        let names: Vec<&str> = h.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let b = &h.tensors[1];
        assert_eq!(&bytes[b.range.start as usize..b.range.end as usize], &[2; 5]);
    }
}
