#![no_main]

//! config.json text to a validated model configuration; an accepted one must survive the trip
//! through a weft file's `weft.config` unchanged, and give a memory estimate.

use libfuzzer_sys::fuzz_target;
use weft::model::fit::memory_needs;
use weft::model::{EngineOptions, LlamaConfig, WeightOptions};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = LlamaConfig::from_hf_json(text) else {
        return;
    };
    common::check_config(&config);
    let stored = serde_json::to_string(&config).expect("a validated config serializes");
    let back = LlamaConfig::from_weft_json(&stored).expect("a validated config reads back");
    assert_eq!(format!("{config:?}"), format!("{back:?}"));
    let _ = memory_needs(&config, &[], &EngineOptions::default(), &WeightOptions::default());
});
