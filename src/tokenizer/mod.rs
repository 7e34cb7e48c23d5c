//! Tokenizers: byte-level BPE (GPT-2 family: SmolLM, Qwen2, Llama 3) and SentencePiece-style
//! BPE (Llama 2 family, Phi-3, Gemma), built from a model file's vocabulary. Written here rather
//! than taken from the `tokenizers` crate, whose wasm32 build alone is about 2.1 MB (0.7 MB
//! gzipped), several times the rest of the library.

mod accents;
mod accents_table;
mod bpe;
pub mod chat;
mod gguf;
mod hf;
pub mod merge;
mod pretokenize;
mod spm;
mod stream;
pub mod wordpiece;

use std::collections::HashMap;

pub use hf::HfTokenizerFiles;
pub use pretokenize::PreTokenizer;
pub use stream::TextStream;

use crate::error::{Error, Result};

/// GGUF `tokenizer.ggml.token_type` values.
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Everything a model file says about its tokenizer.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TokenizerSpec {
    /// `gpt2` (byte-level BPE), `llama` (SentencePiece BPE: by merge rank where `merges` are
    /// given, else by score) or `gemma4` (SentencePiece BPE by merge rank), as GGUF names them.
    pub model: String,
    /// Pre-tokenizer name (byte-level BPE only), e.g. `smollm`.
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    /// One of [`token_type`] per token; empty means all normal.
    pub token_types: Vec<i32>,
    /// "left right" pairs in rank order.
    pub merges: Vec<String>,
    /// Per-token scores (SentencePiece).
    pub scores: Vec<f32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unknown: Option<u32>,
    pub add_bos: bool,
    pub add_space_prefix: bool,
    /// The space prefix only where the text does not already start with a space (Hugging
    /// Face's Metaspace with prepend_scheme "first"); llama.cpp's GGUF rule prefixes always.
    #[serde(default)]
    pub space_prefix_if_missing: bool,
    /// The space prefix before every piece of text between special tokens (Hugging Face's
    /// `Prepend` normalizer: Llama 2 and Phi-3 tokenizer.json files).
    #[serde(default)]
    pub space_prefix_every_segment: bool,
    pub chat_template: Option<String>,
    /// Special tokens after which whitespace is dropped (Hugging Face's `rstrip`, which
    /// llama.cpp gives Phi-3's special tokens: `<|user|>\nHi` is `<|user|>Hi`).
    #[serde(default)]
    pub rstrip: Vec<u32>,
    /// Tokens beside `eos` that end a generation (a chat model's end of turn: Llama 3's
    /// `<|eot_id|>`, Gemma's `<end_of_turn>`), from generation_config.json or GGUF.
    #[serde(default)]
    pub stop: Vec<u32>,
}

enum Kind {
    ByteBpe {
        pre: PreTokenizer,
        merges: bpe::Merges,
        byte_ids: Box<[Option<u32>; 256]>,
    },
    SentencePiece {
        rule: spm::Rule,
        byte_tokens: Box<[Option<u32>; 256]>,
        add_space_prefix: bool,
        space_prefix_if_missing: bool,
        space_prefix_every_segment: bool,
    },
}

pub struct Tokenizer {
    /// What it was built from, kept so that a converted model file can carry it.
    spec: TokenizerSpec,
    kind: Kind,
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
    /// Control and user-defined tokens matched verbatim before pre-tokenization, longest first.
    specials: Vec<(String, u32)>,
    control: Vec<bool>,
    rstrip: Vec<bool>,
    /// What each token decodes to.
    bytes: Vec<Vec<u8>>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub add_bos: bool,
    pub chat_template: Option<String>,
    /// Every id that ends a generation: `eos` and the spec's `stop`.
    stop: Vec<u32>,
    unknown: u32,
}

fn bad(message: impl Into<String>) -> Error {
    Error::Tokenizer(message.into())
}

/// A tokenizer weft has no rule for: refused by name rather than tokenized with another rule.
fn unsupported(what: String, hint: &str) -> Error {
    Error::UnsupportedModel { what, hint: hint.into() }
}

impl Tokenizer {
    pub fn spec(&self) -> &TokenizerSpec {
        &self.spec
    }

    pub fn new(spec: TokenizerSpec) -> Result<Self> {
        let kept = spec.clone();
        let n = spec.tokens.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(bad(format!("vocabulary of {n} tokens")));
        }
        if !spec.token_types.is_empty() && spec.token_types.len() != n {
            return Err(bad(format!("{} token types for {n} tokens", spec.token_types.len())));
        }
        for (what, id) in [("bos", spec.bos), ("eos", spec.eos), ("unknown", spec.unknown)] {
            if id.is_some_and(|id| id as usize >= n) {
                return Err(bad(format!("{what} token id {id:?} outside the vocabulary of {n}")));
            }
        }
        if let Some(id) = spec.stop.iter().chain(&spec.rstrip).find(|&&id| id as usize >= n) {
            return Err(bad(format!("stop or rstrip token id {id} outside the vocabulary of {n}")));
        }
        let mut rstrip = vec![false; n];
        for &id in &spec.rstrip {
            rstrip[id as usize] = true;
        }
        // Ascending, each once.
        let mut stop: Vec<u32> = Vec::new();
        for id in spec.eos.into_iter().chain(spec.stop.iter().copied()) {
            if let Err(at) = stop.binary_search(&id) {
                stop.insert(at, id);
            }
        }
        let ty = |i: usize| spec.token_types.get(i).copied().unwrap_or(token_type::NORMAL);
        let mut ids = HashMap::with_capacity(n);
        for (i, t) in spec.tokens.iter().enumerate() {
            ids.entry(t.clone()).or_insert(i as u32);
        }
        let mut specials: Vec<(String, u32)> = (0..n)
            .filter(|&i| matches!(ty(i), token_type::CONTROL | token_type::USER_DEFINED))
            .filter(|&i| !spec.tokens[i].is_empty())
            .map(|i| (spec.tokens[i].clone(), i as u32))
            .collect();
        crate::order::sort_by_key(&mut specials, |s| (crate::order::longest_first(s.0.len()), s.1.into()));
        let control: Vec<bool> = (0..n).map(|i| ty(i) == token_type::CONTROL).collect();
        let unknown = spec.unknown.unwrap_or(0);

        let (kind, bytes) = match spec.model.as_str() {
            "gpt2" => {
                let pre_name = spec.pre.as_deref().unwrap_or("gpt2");
                let pre = PreTokenizer::from_gguf_name(pre_name).ok_or_else(|| {
                    unsupported(format!("the byte-level BPE pre-tokenizer '{pre_name}'"), PreTokenizer::SUPPORTED)
                })?;
                let table = bpe::byte_to_char();
                // Vocabularies may leave out bytes that never occurred in training (SmolLM2
                // has no token for most control characters); those encode as the unknown token.
                let mut byte_ids = Box::new([None; 256]);
                for (b, c) in table.iter().enumerate() {
                    byte_ids[b] = ids.get(&c.to_string()).copied();
                }
                if byte_ids.iter().filter(|b| b.is_some()).count() < 128 {
                    return Err(bad("fewer than half the bytes have tokens: not a byte-level vocabulary"));
                }
                let back: HashMap<char, u8> = table.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
                let bytes = spec
                    .tokens
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        if matches!(ty(i), token_type::CONTROL | token_type::USER_DEFINED) {
                            t.as_bytes().to_vec()
                        } else {
                            t.chars().map(|c| back.get(&c).copied().unwrap_or(b'?')).collect()
                        }
                    })
                    .collect();
                let merges = bpe::Merges::new(&spec.merges, &ids);
                (Kind::ByteBpe { pre, merges, byte_ids }, bytes)
            }
            "llama" | "gemma4" => {
                // Merge ranks where the file has them (gemma4 GGUF files, whose scores are all
                // equal, and tokenizer.json files), else SentencePiece's scores.
                let rule = if !spec.merges.is_empty() {
                    spm::Rule::Ranks(bpe::Merges::new(&spec.merges, &ids))
                } else if spec.model == "gemma4" {
                    return Err(bad("a gemma4 vocabulary without merges"));
                } else if spec.scores.len() != n {
                    return Err(bad(format!("{} scores for {n} tokens", spec.scores.len())));
                } else {
                    spm::Rule::Scores(spec.scores)
                };
                let mut byte_tokens = Box::new([None; 256]);
                let bytes = spec
                    .tokens
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match byte_token_value(t) {
                        Some(b) if ty(i) == token_type::BYTE => {
                            byte_tokens[b as usize] = Some(i as u32);
                            vec![b]
                        }
                        _ => t.replace('\u{2581}', " ").into_bytes(),
                    })
                    .collect();
                let kind = Kind::SentencePiece {
                    rule,
                    byte_tokens,
                    add_space_prefix: spec.add_space_prefix,
                    space_prefix_if_missing: spec.space_prefix_if_missing,
                    space_prefix_every_segment: spec.space_prefix_every_segment,
                };
                (kind, bytes)
            }
            other => {
                return Err(unsupported(
                    format!("the tokenizer model '{other}'"),
                    "weft reads gpt2 (byte-level BPE), llama (SentencePiece) and gemma4 (SentencePiece BPE) vocabularies",
                ))
            }
        };
        Ok(Self {
            spec: kept,
            kind,
            tokens: spec.tokens,
            ids,
            specials,
            control,
            rstrip,
            bytes,
            bos: spec.bos,
            eos: spec.eos,
            add_bos: spec.add_bos,
            chat_template: spec.chat_template,
            stop,
            unknown,
        })
    }

    /// Whether `id` ends a generation (EOS or an end-of-turn token).
    pub fn is_stop(&self, id: u32) -> bool {
        self.stop.contains(&id)
    }

    /// The ids that end a generation.
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop
    }

    /// The model's chat template, or ChatML ([`chat::FALLBACK_TEMPLATE`]) for a file without one.
    pub fn chat_template(&self) -> &str {
        self.chat_template.as_deref().unwrap_or(chat::FALLBACK_TEMPLATE)
    }

    fn chat_parts(&self, messages: &[chat::Message], add_generation_prompt: bool) -> Result<Vec<chat::ChatPart>> {
        let text = |id: Option<u32>| id.and_then(|id| self.token(id)).unwrap_or("").to_string();
        let options =
            chat::ChatOptions { add_generation_prompt, bos_token: text(self.bos), eos_token: text(self.eos), today: None };
        let control: Vec<&str> = self.specials.iter().filter(|(_, id)| self.is_control(*id)).map(|(s, _)| s.as_str()).collect();
        chat::render_parts(self.chat_template(), messages, &options, &control)
    }

    /// The prompt for `messages` in the model's template with the assistant's turn opened, as
    /// one string (for display: encoding it with special tokens parsed would also parse any the
    /// messages spell; [`Self::encode_chat`] does not).
    pub fn chat_prompt(&self, messages: &[chat::Message]) -> Result<String> {
        Ok(self.chat_parts(messages, true)?.iter().map(chat::ChatPart::text).collect())
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// Token ids for `text`. With `parse_special`, control tokens written in the text (such as
    /// `<|im_start|>`) become their ids; without, they are tokenized as plain text.
    /// User-defined tokens (MPT's runs of spaces, Gemma's tool-call markers) are matched either
    /// way, as llama.cpp and Hugging Face do. `add_bos` follows the model's own setting.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if self.add_bos {
            out.extend(self.bos);
        }
        let mut rest = text;
        let mut at_start = true;
        while !rest.is_empty() {
            let found = self.next_special(rest, parse_special);
            let (plain, special) = match found {
                Some((pos, len, id)) => (&rest[..pos], Some((len, id, pos))),
                None => (rest, None),
            };
            self.encode_plain(plain, at_start, &mut out);
            match special {
                Some((len, id, pos)) => {
                    out.push(id);
                    rest = self.after_special(id, &rest[pos + len..]);
                    at_start = false;
                }
                None => break,
            }
        }
        out
    }

    /// Token ids of a chat: `messages` rendered in the model's template with the assistant's
    /// turn opened; special tokens the template writes become their ids, and a control token
    /// spelled in a message stays text, encoded on its own (as transformers'
    /// `sanitize_control_tokens` does), so a message cannot open or close a turn. BOS is added
    /// (when the model adds one) only if the template does not already start with it.
    pub fn encode_chat(&self, messages: &[chat::Message]) -> Result<Vec<u32>> {
        let parts = self.chat_parts(messages, true)?;
        let mut out = Vec::new();
        let mut text = String::new();
        let mut at_start = true;
        // The last special token, while only whitespace followed it: an `rstrip` token drops
        // that whitespace even where it spans parts.
        let mut last_special: Option<u32> = None;
        for part in &parts {
            let mut rest = match part {
                chat::ChatPart::Template(t) | chat::ChatPart::Content(t) => t.as_str(),
            };
            if let Some(id) = last_special {
                rest = self.after_special(id, rest);
                last_special = last_special.filter(|_| rest.is_empty());
            }
            match part {
                chat::ChatPart::Template(_) => {
                    while let Some((pos, len, id)) = self.next_special(rest, true) {
                        text.push_str(&rest[..pos]);
                        self.encode_plain(&text, at_start, &mut out);
                        text.clear();
                        out.push(id);
                        at_start = false;
                        rest = self.after_special(id, &rest[pos + len..]);
                        last_special = Some(id).filter(|_| rest.is_empty());
                    }
                    text.push_str(rest);
                }
                // A piece of its own, as transformers encodes a sanitized control token: the
                // text on either side cannot merge with it.
                chat::ChatPart::Content(_) => {
                    self.encode_plain(&text, at_start, &mut out);
                    text.clear();
                    self.encode_plain(rest, false, &mut out);
                    at_start = false;
                }
            }
        }
        self.encode_plain(&text, at_start, &mut out);
        if self.add_bos && self.bos.is_some() && out.first() != self.bos.as_ref() {
            out.insert(0, self.bos.unwrap_or_default());
        }
        Ok(out)
    }

    /// The text after special token `id`: without its leading whitespace where `id` has
    /// `rstrip` (C's isspace, as llama.cpp).
    fn after_special<'a>(&self, id: u32, text: &'a str) -> &'a str {
        match self.rstrip.get(id as usize) {
            Some(true) => text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']),
            _ => text,
        }
    }

    /// Earliest special token in `text`, longest at that position: (byte offset, length, id).
    /// Control tokens count only with `control`.
    fn next_special(&self, text: &str, control: bool) -> Option<(usize, usize, u32)> {
        let mut best: Option<(usize, usize, u32)> = None;
        for (s, id) in self.specials.iter().filter(|(_, id)| control || !self.is_control(*id)) {
            if let Some(pos) = text.find(s.as_str()) {
                if best.is_none_or(|(p, l, _)| pos < p || (pos == p && s.len() > l)) {
                    best = Some((pos, s.len(), *id));
                }
            }
        }
        best
    }

    fn encode_plain(&self, text: &str, at_start: bool, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        match &self.kind {
            Kind::ByteBpe { pre, merges, byte_ids } => {
                let table = bpe::byte_to_char();
                for piece in pre.split(text) {
                    if pre.ignores_merges() {
                        let mapped: String = piece.bytes().map(|b| table[b as usize]).collect();
                        if let Some(&id) = self.ids.get(&mapped) {
                            out.push(id);
                            continue;
                        }
                    }
                    for chunk in merge::chunks(piece, false) {
                        merges.encode(chunk, byte_ids, self.unknown, out);
                    }
                }
            }
            Kind::SentencePiece {
                rule,
                byte_tokens,
                add_space_prefix,
                space_prefix_if_missing,
                space_prefix_every_segment,
            } => {
                let mut s = String::with_capacity(text.len() + 3);
                let first = at_start || *space_prefix_every_segment;
                if *add_space_prefix && first && !(*space_prefix_if_missing && text.starts_with(' ')) {
                    s.push('\u{2581}');
                }
                s.push_str(&text.replace(' ', "\u{2581}"));
                for chunk in merge::chunks(&s, true) {
                    spm::encode(chunk, &self.ids, rule, byte_tokens, self.unknown, out);
                }
            }
        }
    }

    /// The bytes token `id` stands for (control tokens: their text). Streaming output joins
    /// these and decodes UTF-8 once a character is complete.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        self.bytes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| bad(format!("token id {id} outside the vocabulary of {}", self.tokens.len())))
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    /// Text of `ids`; control tokens are left out when `skip_control`. Invalid UTF-8 (a
    /// character cut between tokens) is replaced, never an error.
    pub fn decode(&self, ids: &[u32], skip_control: bool) -> Result<String> {
        let mut buf = Vec::new();
        for &id in ids {
            if skip_control && self.is_control(id) {
                continue;
            }
            buf.extend_from_slice(self.token_bytes(id)?);
        }
        if let Kind::SentencePiece { add_space_prefix: true, .. } = self.kind {
            if buf.first() == Some(&b' ') {
                buf.remove(0);
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

/// `<0x41>` -> 0x41.
fn byte_token_value(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

#[cfg(test)]
mod tests;
