#![no_main]

//! GGUF metadata to a validated model configuration: an accepted header goes through the
//! configuration, the tokenizer, the check of the dimensions against the tensors present and
//! the memory estimate. Any of them may refuse the file; none may panic or allocate in
//! proportion to a number the file merely claims.

use libfuzzer_sys::fuzz_target;
use weft::format::ModelHeader;
use weft::model::fit::memory_needs;
use weft::model::load::{has_qkv_bias, validate_tensors};
use weft::model::{EngineOptions, LlamaConfig, WeightOptions};
use weft::tokenizer::Tokenizer;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((prefix, file_len)) = common::split_input(data) else {
        return;
    };
    let Ok(header) = weft::format::parse_gguf(prefix, file_len) else {
        return;
    };
    let header = ModelHeader::Gguf(header);
    let ModelHeader::Gguf(g) = &header else { unreachable!() };
    if let Ok(tokenizer) = Tokenizer::from_gguf(&g.metadata) {
        let ids = tokenizer.encode("Hello, world! 123 <|im_end|>", true);
        let _ = tokenizer.decode(&ids, false);
    }
    let Ok(config) = LlamaConfig::from_gguf(&g.metadata, has_qkv_bias(&header)) else {
        return;
    };
    common::check_config(&config);
    if validate_tensors(&header, &config).is_ok() {
        let needs = memory_needs(&config, header.tensors(), &EngineOptions::default(), &WeightOptions::default());
        assert!(needs.weights <= header.tensors().iter().map(|t| t.byte_len().saturating_mul(4)).sum::<u64>());
    }
});
