//! A tokenizer from a Hugging Face `tokenizer.json`: byte-level BPE models, and
//! SentencePiece-style BPE (Llama 2 family: a Metaspace pre-tokenizer, byte fallback).

use serde_json::Value;

use super::{token_type, unsupported, Tokenizer, TokenizerSpec};
use crate::error::{Error, Result};

fn bad(message: impl Into<String>) -> Error {
    Error::Tokenizer(message.into())
}

const SUPPORTED_PRE: &str = "weft knows ByteLevel alone, Digits then ByteLevel, and a Split with Qwen2's, \
                             Qwen3.5's or Llama 3's pattern then ByteLevel";

/// Which of weft's pre-tokenizers a `pre_tokenizer` block describes.
fn pre_tokenizer_name(pre: &Value) -> Result<&'static str> {
    let kind = pre.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "ByteLevel" => Ok("gpt2"),
        "Sequence" => {
            let parts = pre.get("pretokenizers").and_then(Value::as_array).ok_or_else(|| bad("empty pre-tokenizer sequence"))?;
            let kinds: Vec<&str> = parts.iter().filter_map(|p| p.get("type").and_then(Value::as_str)).collect();
            let regex = parts
                .iter()
                .find_map(|p| p.get("pattern").and_then(|p| p.get("Regex")).and_then(Value::as_str))
                .unwrap_or("");
            match kinds.as_slice() {
                ["Digits", "ByteLevel"] => Ok("smollm"),
                ["Split", "ByteLevel"] if regex.contains(r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|") => Ok("qwen2"),
                ["Split", "ByteLevel"] if regex.contains(r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|") => Ok("llama-bpe"),
                ["Split", "ByteLevel"] if regex.contains(r"[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+") => {
                    Ok("qwen35")
                }
                _ => Err(unsupported(format!("the pre-tokenizer {kinds:?} with pattern {regex:?}"), SUPPORTED_PRE)),
            }
        }
        other => Err(unsupported(format!("the pre-tokenizer '{other}'"), SUPPORTED_PRE)),
    }
}

impl Tokenizer {
    /// From the text of `tokenizer.json`; `chat_template` comes from `tokenizer_config.json`
    /// when the caller has it.
    pub fn from_hf_json(json: &str, chat_template: Option<String>) -> Result<Self> {
        Tokenizer::new(hf_spec(json, chat_template)?)
    }

    /// From a Hugging Face folder's files: `tokenizer.json`, and where present
    /// `tokenizer_config.json` (chat template, BOS and EOS tokens, `add_bos_token`),
    /// `chat_template.jinja` (newer repos keep the template there), `generation_config.json` and
    /// `config.json` (their `eos_token_id`s stop generation).
    pub fn from_hf_files(files: &HfTokenizerFiles) -> Result<Self> {
        let mut spec = hf_spec(files.tokenizer_json, None)?;
        let parse = |name: &str, text: Option<&str>| -> Result<Option<Value>> {
            text.map(|t| serde_json::from_str(t).map_err(|e| bad(format!("{name}: {e}")))).transpose()
        };
        let id_of = |spec: &TokenizerSpec, text: &str| spec.tokens.iter().position(|t| t == text).map(|i| i as u32);
        if let Some(tc) = parse("tokenizer_config.json", files.tokenizer_config)? {
            spec.chat_template = template_of(&tc)?;
            // A token is a string or an AddedToken object {"content": ...}; null means none.
            let token = |key: &str| -> Option<String> {
                let v = tc.get(key)?;
                v.as_str().or_else(|| v.get("content")?.as_str()).map(str::to_string)
            };
            if let Some(bos) = token("bos_token") {
                spec.bos = Some(id_of(&spec, &bos).ok_or_else(|| bad(format!("bos_token {bos:?} is not in the vocabulary")))?);
            }
            if let Some(eos) = token("eos_token") {
                spec.eos = Some(id_of(&spec, &eos).ok_or_else(|| bad(format!("eos_token {eos:?} is not in the vocabulary")))?);
            }
            if let Some(add) = tc.get("add_bos_token").and_then(Value::as_bool) {
                spec.add_bos = add;
            }
        }
        if let Some(t) = files.chat_template_jinja {
            spec.chat_template = Some(t.to_string());
        }
        for (name, text) in [("generation_config.json", files.generation_config), ("config.json", files.config)] {
            if let Some(v) = parse(name, text)? {
                for id in eos_ids(&v) {
                    if !spec.stop.contains(&id) && (id as usize) < spec.tokens.len() {
                        spec.stop.push(id);
                    }
                }
            }
        }
        Tokenizer::new(spec)
    }
}

/// The texts of a Hugging Face folder's tokenizer files; all but `tokenizer_json` optional.
#[derive(Clone, Copy, Debug, Default)]
pub struct HfTokenizerFiles<'a> {
    pub tokenizer_json: &'a str,
    pub tokenizer_config: Option<&'a str>,
    pub chat_template_jinja: Option<&'a str>,
    pub generation_config: Option<&'a str>,
    pub config: Option<&'a str>,
}

/// `eos_token_id`: a number or a list of them.
fn eos_ids(v: &Value) -> Vec<u32> {
    match v.get("eos_token_id") {
        Some(Value::Number(n)) => n.as_u64().map(|n| n as u32).into_iter().collect(),
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_u64).map(|n| n as u32).collect(),
        _ => Vec::new(),
    }
}

/// `chat_template`: a string, or a list of named templates (the one named "default").
fn template_of(tc: &Value) -> Result<Option<String>> {
    match tc.get("chat_template") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(list)) => Ok(list
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
            .and_then(|t| t.get("template")?.as_str())
            .map(str::to_string)),
        Some(other) => Err(bad(format!("chat_template = {other} is neither text nor a list of templates"))),
    }
}

fn hf_spec(json: &str, chat_template: Option<String>) -> Result<TokenizerSpec> {
    let root: Value = serde_json::from_str(json).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
    let model = root.get("model").ok_or_else(|| bad("tokenizer.json has no model"))?;
    if model.get("type").and_then(Value::as_str) != Some("BPE") {
        let kind = model.get("type").and_then(Value::as_str).unwrap_or("(none)");
        return Err(unsupported(format!("the tokenizer.json model type '{kind}'"), "weft reads BPE models from tokenizer.json"));
    }
    let vocab = model.get("vocab").and_then(Value::as_object).ok_or_else(|| bad("BPE model without vocab"))?;
    let added = root.get("added_tokens").and_then(Value::as_array).cloned().unwrap_or_default();
    let added_ids = added.iter().filter_map(|t| t.get("id").and_then(Value::as_u64));
    let size = vocab.values().filter_map(Value::as_u64).chain(added_ids).max().map_or(0, |m| m as usize + 1);
    if size == 0 || size > 1 << 22 {
        return Err(bad(format!("vocabulary of {size} tokens")));
    }
    // The table is sized by the largest id: ids far past the number of tokens would have a
    // few-KB file allocate a table of millions of empty entries.
    let entries = vocab.len() + added.len();
    if size > 2 * entries + 1024 {
        return Err(bad(format!("token ids up to {} for {entries} tokens: the ids must be (nearly) dense", size - 1)));
    }
    let mut tokens = vec![String::new(); size];
    let mut types = vec![token_type::UNUSED; size];
    for (text, id) in vocab {
        let id = id.as_u64().ok_or_else(|| bad(format!("token {text:?} has no integer id")))? as usize;
        tokens[id] = text.clone();
        types[id] = token_type::NORMAL;
    }
    for t in &added {
        let (Some(id), Some(content)) = (t.get("id").and_then(Value::as_u64), t.get("content").and_then(Value::as_str)) else {
            return Err(bad("added token without id or content"));
        };
        tokens[id as usize] = content.to_string();
        let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
        types[id as usize] = if special { token_type::CONTROL } else { token_type::USER_DEFINED };
    }
    // Added tokens that take the whitespace after them (Phi-3's chat tokens).
    let rstrip: Vec<u32> = added
        .iter()
        .filter(|t| t.get("rstrip").and_then(Value::as_bool) == Some(true))
        .filter_map(|t| t.get("id").and_then(Value::as_u64).map(|id| id as u32))
        .collect();
    // Merges are "a b" strings in older files and ["a", "b"] pairs in newer ones.
    let merges = model
        .get("merges")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("BPE model without merges"))?
        .iter()
        .map(|m| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) => match (pair.first().and_then(Value::as_str), pair.get(1).and_then(Value::as_str)) {
                (Some(a), Some(b)) => Ok(format!("{a} {b}")),
                _ => Err(bad("malformed merge")),
            },
            _ => Err(bad("malformed merge")),
        })
        .collect::<Result<Vec<_>>>()?;
    let pre = root.get("pre_tokenizer").filter(|p| !p.is_null());
    let id_of = |text: &str| tokens.iter().position(|t| t == text).map(|i| i as u32);
    let eos = ["<|im_end|>", "<|endoftext|>", "</s>", "<|end_of_text|>"].iter().find_map(|t| id_of(t));
    // The special token the post-processor puts before every text.
    let bos = post_processor_bos(&root).and_then(id_of);
    if let Some(spaces) = sentencepiece_spaces(root.get("normalizer").filter(|n| !n.is_null()), pre)? {
        let mut spec = sentencepiece(model, spaces, tokens, types, merges, eos, chat_template)?;
        if bos.is_some() {
            (spec.bos, spec.add_bos) = (bos, true);
        }
        spec.rstrip = rstrip;
        return Ok(spec);
    }
    let pre = pre.ok_or_else(|| bad("no pre_tokenizer"))?;
    Ok(TokenizerSpec {
        bos,
        add_bos: bos.is_some(),
        model: "gpt2".into(),
        pre: Some(pre_tokenizer_name(pre)?.into()),
        rstrip,
        eos,
        unknown: None,
        tokens,
        token_types: types,
        merges,
        chat_template,
        ..Default::default()
    })
}

/// The first special token of a `TemplateProcessing` post-processor's `single` template (alone
/// or in a `Sequence`): the BOS that Hugging Face adds to every text.
fn post_processor_bos(root: &Value) -> Option<&str> {
    let post = root.get("post_processor")?;
    let template = match post.get("type").and_then(Value::as_str)? {
        "TemplateProcessing" => post,
        "Sequence" => post.get("processors")?.as_array()?.iter().find(|p| p.get("type").and_then(Value::as_str) == Some("TemplateProcessing"))?,
        _ => return None,
    };
    template.pointer("/single/0/SpecialToken/id")?.as_str()
}

/// How a SentencePiece-style BPE file turns spaces into U+2581 (None for other files).
#[derive(Clone, Copy, Debug)]
struct Spaces {
    /// A U+2581 goes before the text.
    prepend: bool,
    /// Only where the text does not already start with a space (Metaspace "first").
    if_missing: bool,
    /// Before every piece between special tokens (the `Prepend` normalizer of Llama 2 and
    /// Phi-3 files), not only the first.
    every_segment: bool,
}

/// Three layouts: a Metaspace pre-tokenizer; the normalizers `Prepend("▁")` then
/// `Replace(" ", "▁")` without pre-tokenizer (Llama 2, Phi-3, Mistral); `Replace(" ", "▁")` alone,
/// with no pre-tokenizer or a split on " " that finds nothing once spaces are replaced (Gemma).
fn sentencepiece_spaces(normalizer: Option<&Value>, pre: Option<&Value>) -> Result<Option<Spaces>> {
    fn kind(v: &Value) -> &str {
        v.get("type").and_then(Value::as_str).unwrap_or("")
    }
    if let Some(p) = pre.filter(|p| kind(p) == "Metaspace") {
        if p.get("replacement").and_then(Value::as_str).is_some_and(|r| r != "\u{2581}") {
            return Err(unsupported("a Metaspace replacement other than U+2581".into(), "SentencePiece files use U+2581"));
        }
        // prepend_scheme "first" (or the older add_prefix_space) puts U+2581 before the text.
        let prepend = match p.get("prepend_scheme").and_then(Value::as_str) {
            Some(scheme) => scheme != "never",
            None => p.get("add_prefix_space").and_then(Value::as_bool).unwrap_or(true),
        };
        return Ok(Some(Spaces { prepend, if_missing: true, every_segment: false }));
    }
    let Some(n) = normalizer else { return Ok(None) };
    let parts: Vec<&Value> = match kind(n) {
        "Sequence" => n.get("normalizers").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default(),
        _ => vec![n],
    };
    let replaces_spaces =
        |v: &Value| kind(v) == "Replace" && v.pointer("/pattern/String") == Some(&Value::from(" ")) && v.get("content") == Some(&Value::from("\u{2581}"));
    let prepends = |v: &Value| kind(v) == "Prepend" && v.get("prepend") == Some(&Value::from("\u{2581}"));
    let spaces = match parts.as_slice() {
        [p, r] if prepends(p) && replaces_spaces(r) => Spaces { prepend: true, if_missing: false, every_segment: true },
        [r] if replaces_spaces(r) => Spaces { prepend: false, if_missing: false, every_segment: false },
        _ => return Ok(None),
    };
    match pre {
        None => Ok(Some(spaces)),
        Some(p) if kind(p) == "Split" && p.pointer("/pattern/String") == Some(&Value::from(" ")) => Ok(Some(spaces)),
        Some(p) => Err(unsupported(format!("the pre-tokenizer '{}' after a SentencePiece normalizer", kind(p)), SUPPORTED_PRE)),
    }
}

/// A SentencePiece-style BPE model as weft's SentencePiece tokenizer, merged by the file's
/// merge ranks.
fn sentencepiece(
    model: &Value,
    spaces: Spaces,
    tokens: Vec<String>,
    mut types: Vec<i32>,
    merges: Vec<String>,
    eos: Option<u32>,
    chat_template: Option<String>,
) -> Result<TokenizerSpec> {
    let ids: std::collections::HashMap<&str, usize> = tokens.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    if model.get("byte_fallback").and_then(Value::as_bool).unwrap_or(false) {
        for (t, ty) in tokens.iter().zip(types.iter_mut()) {
            if super::byte_token_value(t).is_some() {
                *ty = token_type::BYTE;
            }
        }
    }
    let id_of = |text: &str| ids.get(text).map(|&i| i as u32);
    let unknown = model.get("unk_token").and_then(Value::as_str).and_then(id_of);
    Ok(TokenizerSpec {
        model: "llama".into(),
        bos: id_of("<s>"),
        eos: eos.or_else(|| id_of("</s>")),
        unknown,
        tokens,
        token_types: types,
        merges,
        add_space_prefix: spaces.prepend,
        space_prefix_if_missing: spaces.if_missing,
        space_prefix_every_segment: spaces.every_segment,
        chat_template,
        ..Default::default()
    })
}
