//! Inputs of the configuration and tokenizer fuzz targets (fuzz/fuzz_targets: seeds that reach
//! deep, and any that ever crashed), replayed through the same calls: each file in
//! tests/fixtures/fuzz named `TARGET-...` goes to that target's body.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use weft::format::{parse_gguf, ModelHeader, SafeDtype, SafetensorsHeader, StorageType, TensorInfo};
use weft::model::fit::memory_needs;
use weft::model::load::{has_qkv_bias, validate_tensors};
use weft::model::{weft_file_parts, EngineOptions, LlamaConfig, WeightOptions};
use weft::tokenizer::Tokenizer;

/// fuzz/fuzz_targets/common.rs's split: mode byte, optional extra length, prefix.
fn split_input(data: &[u8]) -> Option<(&[u8], Option<u64>)> {
    let (&mode, rest) = data.split_first()?;
    Some(match mode % 3 {
        0 => (rest, None),
        1 => (rest, Some(rest.len() as u64)),
        _ => {
            let extra: [u8; 4] = rest.get(..4)?.try_into().ok()?;
            let prefix = rest.get(4..)?;
            (prefix, Some(prefix.len() as u64 + u64::from(u32::from_le_bytes(extra))))
        }
    })
}

fn check_config(c: &LlamaConfig) {
    use weft::model::config::limits::*;
    assert!(c.n_layers >= 1 && c.n_layers as u64 <= MAX_LAYERS);
    assert!(c.dim >= 1 && c.dim as u64 <= MAX_DIM);
    assert!(c.vocab >= 1 && c.vocab as u64 <= MAX_VOCAB);
    assert!(c.ffn_dim >= 1 && c.ffn_dim as u64 <= MAX_FFN);
    assert!(c.context_length >= 1 && c.context_length as u64 <= MAX_CONTEXT);
    assert!(c.n_kv_heads >= 1 && c.n_heads.is_multiple_of(c.n_kv_heads) && c.n_heads as u64 <= MAX_HEADS);
    assert!(c.head_dim >= 2 && c.head_dim.is_multiple_of(2) && c.rope_dims <= c.head_dim);
    assert!(c.q_dim().checked_mul(c.dim).is_some());
}

/// Returns whether the input got as far as a validated configuration (or tokenizer).
fn gguf_config(data: &[u8]) -> bool {
    let Some((prefix, file_len)) = split_input(data) else { return false };
    let Ok(g) = parse_gguf(prefix, file_len) else { return false };
    let header = ModelHeader::Gguf(g);
    let ModelHeader::Gguf(g) = &header else { unreachable!() };
    if let Ok(tokenizer) = Tokenizer::from_gguf(&g.metadata) {
        let ids = tokenizer.encode("Hello, world! 123 <|im_end|>", true);
        let _ = tokenizer.decode(&ids, false);
    }
    let Ok(config) = LlamaConfig::from_gguf(&g.metadata, has_qkv_bias(&header)) else { return false };
    check_config(&config);
    if validate_tensors(&header, &config).is_ok() {
        let _ = memory_needs(&config, header.tensors(), &EngineOptions::default(), &WeightOptions::default());
    }
    true
}

fn config_json(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else { return false };
    let Ok(config) = LlamaConfig::from_hf_json(text) else { return false };
    check_config(&config);
    let back = LlamaConfig::from_weft_json(&serde_json::to_string(&config).unwrap()).unwrap();
    assert_eq!(format!("{config:?}"), format!("{back:?}"));
    true
}

fn tokenizer_json(data: &[u8]) -> bool {
    let (json, text) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"Hello world, 12345!  \n"[..]),
    };
    let Ok(json) = std::str::from_utf8(json) else { return false };
    let Ok(tokenizer) = Tokenizer::from_hf_json(json, None) else { return false };
    let text = String::from_utf8_lossy(text);
    for parse_special in [false, true] {
        let ids = tokenizer.encode(&text, parse_special);
        assert!(ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()));
        let _ = tokenizer.decode(&ids, false);
    }
    true
}

fn weft_metadata(data: &[u8]) -> bool {
    let Ok(metadata) = serde_json::from_slice::<BTreeMap<String, String>>(data) else { return false };
    let Ok(Some((config, tokenizer))) = weft_file_parts(&metadata) else { return false };
    check_config(&config);
    let _ = tokenizer.encode("Hello, world!", true);
    let tensors = metadata
        .keys()
        .filter_map(|k| k.strip_prefix("weft.q."))
        .flat_map(|base| ["weft_q", "weft_scale", "weft_zero"].map(|s| format!("{base}.{s}")))
        .map(|name| TensorInfo { name, storage: StorageType::Safe(SafeDtype::U8), shape: vec![4], range: 0..4 })
        .collect();
    let header = ModelHeader::Safetensors(SafetensorsHeader { header_len: 0, data_start: 0, tensors, metadata });
    let _ = validate_tensors(&header, &config);
    true
}

#[test]
fn config_and_tokenizer_fuzz_inputs() -> anyhow::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz");
    let mut replayed = BTreeMap::<&str, (usize, usize)>::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let Some((target, _)) = name.split_once('-') else { continue };
        let (target, run): (&'static str, fn(&[u8]) -> bool) = match target {
            "gguf_config" => ("gguf_config", gguf_config),
            "config_json" => ("config_json", config_json),
            "tokenizer_json" => ("tokenizer_json", tokenizer_json),
            "weft_metadata" => ("weft_metadata", weft_metadata),
            _ => continue,
        };
        let bytes = std::fs::read(&path).with_context(|| path.display().to_string())?;
        let deep = run(&bytes);
        let counts = replayed.entry(target).or_default();
        counts.0 += 1;
        counts.1 += usize::from(deep);
    }
    // Every target has inputs, and at least one of each gets past parsing to a configuration
    // or tokenizer (the seeds), so the replay exercises more than the first check.
    for target in ["gguf_config", "config_json", "tokenizer_json", "weft_metadata"] {
        let (n, deep) = replayed.get(target).copied().unwrap_or_default();
        assert!(n > 0 && deep > 0, "{target}: {n} inputs, {deep} reaching a configuration");
    }
    Ok(())
}
