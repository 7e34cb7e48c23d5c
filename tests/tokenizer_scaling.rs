//! Tokenization time grows as n log n: long runs that make one huge pre-tokenizer piece (the
//! worst case of best-pair-first merging) encode quickly, on the SmolLM2 byte-level BPE and on
//! the SentencePiece fixture. Bounds are generous (debug build, a shared 2-core machine); the
//! quadratic merge loop took 28 s and 5.7 s on these inputs in a release build.

use std::path::Path;
use std::time::{Duration, Instant};

use weft::format::{detect_and_parse, ModelHeader};
use weft::tokenizer::Tokenizer;

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const BOUND: Duration = Duration::from_secs(5);

fn timed(tok: &Tokenizer, text: &str) -> (Vec<u32>, Duration) {
    let started = Instant::now();
    let ids = tok.encode(text, false);
    (ids, started.elapsed())
}

#[test]
fn byte_level_bpe_on_a_16k_run_of_one_character() -> anyhow::Result<()> {
    anyhow::ensure!(Path::new(MODEL).exists(), "{MODEL} missing: run scripts/fetch-model.sh");
    let bytes = std::fs::read(MODEL)?;
    let ModelHeader::Gguf(h) = detect_and_parse(&bytes, Some(bytes.len() as u64))? else {
        anyhow::bail!("not GGUF");
    };
    let tok = Tokenizer::from_gguf(&h.metadata)?;
    for c in ["a", " ", "=", "é"] {
        let text = c.repeat(16 * 1024);
        let (ids, took) = timed(&tok, &text);
        eprintln!("byte-level BPE, 16k x {c:?}: {} ids in {took:?}", ids.len());
        assert!(took < BOUND, "16k x {c:?} took {took:?}");
        assert_eq!(tok.decode(&ids, false)?, text);
        assert!(ids.len() <= text.chars().count(), "{c:?} merged into {} ids", ids.len());
    }
    Ok(())
}

#[test]
fn sentencepiece_on_an_8k_run_of_one_character() -> anyhow::Result<()> {
    let dir = "tests/fixtures/spm";
    let tok = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{dir}/tokenizer.json"))?, None)?;
    for c in ["a", " ", "e "] {
        let text = c.repeat(8 * 1024 / c.len());
        let (ids, took) = timed(&tok, &text);
        eprintln!("SentencePiece, 8k of {c:?}: {} ids in {took:?}", ids.len());
        assert!(took < BOUND, "8k of {c:?} took {took:?}");
        // Decoding drops the first space (the prefix SentencePiece adds), so only text that
        // does not start with one comes back whole.
        if !text.starts_with(' ') {
            assert_eq!(tok.decode(&ids, false)?, text);
        }
    }
    Ok(())
}
