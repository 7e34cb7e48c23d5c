//! A tokenizer from GGUF metadata (`tokenizer.ggml.*`).

use super::{Tokenizer, TokenizerSpec};
use crate::error::Result;
use crate::format::gguf::GgufMetadata;

impl Tokenizer {
    pub fn from_gguf(meta: &GgufMetadata) -> Result<Self> {
        let opt_u32 = |key: &str| meta.get(key).and_then(|_| meta.get_u32(key).ok());
        let opt_bool = |key: &str, default: bool| meta.get_bool(key).unwrap_or(default);
        let model = meta.get_str("tokenizer.ggml.model")?.to_string();
        let spec = TokenizerSpec {
            pre: meta.get_str("tokenizer.ggml.pre").ok().map(str::to_string),
            tokens: meta.get_str_array("tokenizer.ggml.tokens")?.to_vec(),
            token_types: match meta.get("tokenizer.ggml.token_type") {
                Some(_) => meta.get_i32_array("tokenizer.ggml.token_type")?.to_vec(),
                None => Vec::new(),
            },
            merges: match meta.get("tokenizer.ggml.merges") {
                Some(_) => meta.get_str_array("tokenizer.ggml.merges")?.to_vec(),
                None => Vec::new(),
            },
            scores: match meta.get("tokenizer.ggml.scores") {
                Some(_) => meta.get_f32_array("tokenizer.ggml.scores")?.to_vec(),
                None => Vec::new(),
            },
            bos: opt_u32("tokenizer.ggml.bos_token_id"),
            eos: opt_u32("tokenizer.ggml.eos_token_id"),
            unknown: opt_u32("tokenizer.ggml.unknown_token_id"),
            // SentencePiece models add BOS and a leading space unless told otherwise; Gemma
            // adds BOS but no space.
            add_bos: opt_bool("tokenizer.ggml.add_bos_token", model == "llama" || model == "gemma4"),
            add_space_prefix: opt_bool("tokenizer.ggml.add_space_prefix", model == "llama"),
            space_prefix_if_missing: false,
            space_prefix_every_segment: false,
            chat_template: meta.get_str("tokenizer.chat_template").ok().map(str::to_string),
            // llama.cpp's end-of-turn and end-of-message tokens (Llama 3's <|eot_id|>, <|eom_id|>;
            // Gemma's <end_of_turn>) end a generation like EOS.
            stop: ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"].iter().filter_map(|k| opt_u32(k)).collect(),
            model,
        };
        Tokenizer::new(spec)
    }
}
