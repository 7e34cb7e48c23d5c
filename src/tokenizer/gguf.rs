//! A tokenizer from GGUF metadata (`tokenizer.ggml.*`).

use super::{token_type, Tokenizer, TokenizerSpec};
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
            // llama.cpp prefixes the space to every piece of text after a special token too.
            space_prefix_every_segment: true,
            rstrip: phi3_rstrip(meta),
            chat_template: meta.get_str("tokenizer.chat_template").ok().map(str::to_string),
            // llama.cpp's end-of-turn and end-of-message tokens (Llama 3's <|eot_id|>, <|eom_id|>;
            // Gemma's <end_of_turn>) end a generation like EOS.
            stop: ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"].iter().filter_map(|k| opt_u32(k)).collect(),
            model,
        };
        Tokenizer::new(spec)
    }
}

/// GGUF has no per-token `rstrip`; llama.cpp gives it to Phi-3's special tokens by the model's
/// name (as Phi-3's tokenizer.json has it): every control and user-defined token and `</s>`,
/// but not `<unk>`, `<s>` and `<|endoftext|>`.
fn phi3_rstrip(meta: &GgufMetadata) -> Vec<u32> {
    let name = meta.get_str("general.name").unwrap_or("").to_lowercase();
    let (Ok(tokens), Ok(types)) = (meta.get_str_array("tokenizer.ggml.tokens"), meta.get_i32_array("tokenizer.ggml.token_type")) else {
        return Vec::new();
    };
    if !name.contains("phi-3") && !name.contains("phi3") {
        return Vec::new();
    }
    let special = |t: &str, ty: i32| {
        t == "</s>" || (matches!(ty, token_type::CONTROL | token_type::USER_DEFINED) && !["<unk>", "<s>", "<|endoftext|>"].contains(&t))
    };
    tokens.iter().zip(types).enumerate().filter(|(_, (t, &ty))| special(t, ty)).map(|(i, _)| i as u32).collect()
}
