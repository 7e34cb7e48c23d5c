#![no_main]

//! A weft file's `__metadata__` (the JSON string map of a safetensors header) to its model
//! configuration, tokenizer and quantized-matrix entries, checked against the file's tensors.
//! The input is the map's JSON; the tensors are those the map's `weft.q.*` entries name.

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use weft::format::{ModelHeader, SafeDtype, SafetensorsHeader, StorageType, TensorInfo};
use weft::model::load::validate_tensors;
use weft::model::weft_file_parts;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(metadata) = serde_json::from_slice::<BTreeMap<String, String>>(data) else {
        return;
    };
    let Ok(Some((config, tokenizer))) = weft_file_parts(&metadata) else {
        return;
    };
    common::check_config(&config);
    let _ = tokenizer.encode("Hello, world!", true);
    // Tensors for the entries the metadata names, so the entry checks run too.
    let tensors = metadata
        .keys()
        .filter_map(|k| k.strip_prefix("weft.q."))
        .flat_map(|base| ["weft_q", "weft_scale", "weft_zero"].map(|s| format!("{base}.{s}")))
        .map(|name| TensorInfo { name, storage: StorageType::Safe(SafeDtype::U8), shape: vec![4], range: 0..4 })
        .collect();
    let header = ModelHeader::Safetensors(SafetensorsHeader { header_len: 0, data_start: 0, tensors, metadata });
    let _ = validate_tensors(&header, &config);
});
