//! Tokenizers of the model families against Hugging Face tokenizers, from files built with
//! `tokenizers` where the real ones are too large to keep here: Llama 3's byte-level BPE (its
//! pre-tokenizer pattern verbatim, `ignore_merges`), tests/fixtures/llama3-tokenizer from
//! scripts/make_llama3_tokenizer.py. Texts: code, numbers, CJK, emoji, whitespace runs,
//! special tokens.

use weft::tokenizer::Tokenizer;

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
