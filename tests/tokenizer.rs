//! The SmolLM2 tokenizer built from its GGUF against ids from Hugging Face `tokenizers`
//! (tests/fixtures/tokenizer, made by scripts/make_tokenizer_fixture.py).

use std::path::Path;

use weft::format::{detect_and_parse, ModelHeader};
use weft::tokenizer::Tokenizer;

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

fn smollm2() -> anyhow::Result<Tokenizer> {
    anyhow::ensure!(Path::new(MODEL).exists(), "{MODEL} missing: run scripts/fetch-model.sh");
    let bytes = std::fs::read(MODEL)?;
    let ModelHeader::Gguf(h) = detect_and_parse(&bytes, Some(bytes.len() as u64))? else {
        anyhow::bail!("not GGUF");
    };
    Ok(Tokenizer::from_gguf(&h.metadata)?)
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[derive(serde::Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[test]
fn smollm2_ids_match_hugging_face_tokenizers() -> anyhow::Result<()> {
    let tok = smollm2()?;
    let fixture: Fixture =
        serde_json::from_str(&std::fs::read_to_string("tests/fixtures/tokenizer/smollm2.json")?)?;
    let mut total = 0;
    for case in &fixture.cases {
        let ids = tok.encode(&case.text, true);
        if ids != case.ids {
            let at = ids.iter().zip(&case.ids).position(|(a, b)| a != b).unwrap_or(ids.len().min(case.ids.len()));
            panic!(
                "{:?}...: first difference at {at}: weft {:?} reference {:?}",
                &case.text.chars().take(40).collect::<String>(),
                &ids[at.saturating_sub(2)..(at + 3).min(ids.len())],
                &case.ids[at.saturating_sub(2)..(at + 3).min(case.ids.len())]
            );
        }
        assert_eq!(tok.decode(&ids, false)?, case.text, "decode round trip");
        total += ids.len();
    }
    assert!(total > 2215, "the Apache-2.0 text alone is 2215 tokens");
    Ok(())
}

#[test]
fn smollm2_special_tokens_and_settings() -> anyhow::Result<()> {
    let tok = smollm2()?;
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(tok.encode("The capital of France is", true), [504, 3575, 282, 4649, 314]);
    assert_eq!(tok.id("<|im_start|>"), Some(1));
    assert_eq!(tok.id("<|im_end|>"), Some(2));
    assert_eq!(tok.eos, Some(2));
    assert!(!tok.add_bos);
    assert!(tok.chat_template.as_deref().is_some_and(|t| t.contains("<|im_start|>")));
    let user = weft::tokenizer::chat::Message { role: "user".into(), content: "Hi".into() };
    let prompt = tok.chat_prompt(&[user])?;
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = tok.encode(&prompt, true);
    let starts = ids.iter().filter(|&&id| id == 1).count();
    let ends = ids.iter().filter(|&&id| id == 2).count();
    assert_eq!((ids[0], starts, ends), (1, 3, 2), "control tokens parsed: {ids:?}");
    Ok(())
}

#[derive(serde::Deserialize)]
struct SpmCase {
    text: String,
    ids: Vec<u32>,
    decoded: String,
}

#[derive(serde::Deserialize)]
struct SpmReference {
    vocab_size: usize,
    cases: Vec<SpmCase>,
}

/// A Llama-2-style SentencePiece BPE (Metaspace, byte fallback, vocabulary 2,000) trained with
/// Hugging Face `tokenizers` (scripts/make_spm_fixture.py): weft's ids and decoded text against
/// theirs, on a 6,000-character license excerpt, code, runs of spaces and non-ASCII text that
/// falls back to bytes.
#[test]
fn sentencepiece_ids_match_hugging_face_tokenizers() -> anyhow::Result<()> {
    let dir = "tests/fixtures/spm";
    let tok = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{dir}/tokenizer.json"))?, None)?;
    let reference: SpmReference = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/reference.json"))?)?;
    assert_eq!(tok.vocab_size(), reference.vocab_size);
    let mut total = 0;
    for case in &reference.cases {
        let ids = tok.encode(&case.text, false);
        if ids != case.ids {
            let at = ids.iter().zip(&case.ids).position(|(a, b)| a != b).unwrap_or(ids.len().min(case.ids.len()));
            let piece = |v: &[u32]| {
                v[at..(at + 6).min(v.len())]
                    .iter()
                    .map(|&i| tok.token(i).unwrap_or("?").to_string())
                    .collect::<Vec<_>>()
            };
            panic!(
                "{:?}...: first difference at id {at}: weft {:?} tokenizers {:?}",
                &case.text[..case.text.len().min(40)],
                piece(&ids),
                piece(&case.ids)
            );
        }
        assert_eq!(tok.decode(&case.ids, false)?, case.decoded, "decoding {:?}", &case.text[..case.text.len().min(40)]);
        total += ids.len();
    }
    assert!(total > 2000, "{total} ids compared");
    Ok(())
}

/// A tokenizer.json whose ids run far past its tokens is refused before its table is sized by
/// the largest id (a 4 KB file asked for a table of 2.4 million entries); small gaps, as
/// reserved ids leave, are kept. The byte-level seed of the fuzz fixtures, with one token more.
#[test]
fn sparse_token_ids_are_refused_small_gaps_are_not() -> anyhow::Result<()> {
    let seed = std::fs::read("tests/fixtures/fuzz/tokenizer_json-seed-bytelevel")?;
    let json = &seed[..seed.iter().position(|&b| b == 0).unwrap_or(seed.len())];
    let base: serde_json::Value = serde_json::from_slice(json)?;
    let n = base["model"]["vocab"].as_object().map_or(0, |v| v.len()) as u64;
    let with = |id: u64| -> anyhow::Result<String> {
        let mut v = base.clone();
        v["model"]["vocab"]["<extra>"] = serde_json::json!(id);
        Ok(serde_json::to_string(&v)?)
    };
    let err = Tokenizer::from_hf_json(&with(3_000_000)?, None).err().expect("refused");
    assert!(err.to_string().contains("dense"), "{err}");
    let tok = Tokenizer::from_hf_json(&with(n + 500)?, None)?;
    assert_eq!(tok.vocab_size() as u64, n + 501);
    Ok(())
}
