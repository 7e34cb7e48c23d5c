//! Tokenizers from real GGUF metadata: llama.cpp's vocabulary test files (`ggml-vocab-*.gguf`,
//! tokenizer metadata without weights), each with its test texts (`.inp`) and the ids Hugging
//! Face `tokenizers` gives for them (`.out`, written by llama.cpp's tests). They come from the
//! llama-cpp-python sdist (scripts/fetch-llama-vocab.sh) into tests/fixtures/llama-vocab/.
//! Every file loads through weft's own GGUF path (the header read by the loader, then
//! `Tokenizer::from_gguf`), as a model file would.

use weft::loader::native::FileReader;
use weft::tokenizer::Tokenizer;
use weft::Error;

const DIR: &str = "tests/fixtures/llama-vocab";

/// What separates the texts of a `.inp` file (llama.cpp's test-tokenizer-0 format).
const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn open(name: &str) -> weft::Result<Tokenizer> {
    let path = format!("{DIR}/ggml-vocab-{name}.gguf");
    assert!(std::path::Path::new(&path).exists(), "{path} missing: run scripts/fetch-llama-vocab.sh");
    pollster::block_on(weft::model::open_tokenizer(&FileReader::open(&path)?))
}

/// The test texts and their expected ids: the `.inp` cut at the separators (a separator at the
/// very end closes the last text), one line of space-separated ids per text in the `.out`.
fn cases(name: &str) -> anyhow::Result<Vec<(String, Vec<u32>)>> {
    let inp = std::fs::read_to_string(format!("{DIR}/ggml-vocab-{name}.gguf.inp"))?;
    let out = std::fs::read_to_string(format!("{DIR}/ggml-vocab-{name}.gguf.out"))?;
    let inp = inp.strip_suffix(SEPARATOR).unwrap_or(&inp);
    let texts: Vec<&str> = inp.split(SEPARATOR).collect();
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|line| line.split_whitespace().map(str::parse).collect::<Result<Vec<u32>, _>>())
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(texts.len() == ids.len(), "{name}: {} texts but {} lines of ids", texts.len(), ids.len());
    Ok(texts.into_iter().map(str::to_string).zip(ids).collect())
}

/// Encodes every text as llama.cpp's test does (no BOS, special tokens not parsed) and compares
/// with the expected ids; with `lossless`, decoding gives each text back.
fn check(name: &str, lossless: bool) -> anyhow::Result<()> {
    let tok = open(name)?;
    let cases = cases(name)?;
    assert!(cases.len() >= 30, "{name}: only {} texts", cases.len());
    let mut failed = Vec::new();
    for (text, want) in &cases {
        let mut ids = tok.encode(text, false);
        if tok.add_bos {
            assert_eq!(ids.first(), tok.bos.as_ref(), "{name}: BOS first");
            ids.remove(0);
        }
        if ids != *want {
            let at = ids.iter().zip(want).position(|(a, b)| a != b).unwrap_or(ids.len().min(want.len()));
            failed.push(format!("{text:?}: differs at {at}: got {ids:?}, want {want:?}"));
            continue;
        }
        if lossless {
            assert_eq!(tok.decode(&ids, false)?, *text, "{name}: decode(encode(text))");
        }
    }
    assert!(failed.is_empty(), "{name}: {} of {} texts differ:\n{}", failed.len(), cases.len(), failed.join("\n"));
    Ok(())
}

#[test]
fn phi3_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("phi-3", true)
}

#[test]
fn gemma4_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("gemma-4", true)
}

#[test]
fn llama_spm_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("llama-spm", true)
}

#[test]
fn llama_bpe_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("llama-bpe", true)
}

#[test]
fn qwen2_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("qwen2", true)
}

/// Qwen3.5's pre-tokenizer: Qwen2's with combining marks as letters.
#[test]
fn qwen35_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("qwen35", true)
}

#[test]
fn gpt2_gguf_matches_hugging_face() -> anyhow::Result<()> {
    check("gpt-2", true)
}

#[test]
fn starcoder_refact_mpt_command_r_ggufs_match_hugging_face() -> anyhow::Result<()> {
    for name in ["starcoder", "refact", "mpt", "command-r"] {
        check(name, true)?;
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct Special {
    text: String,
    ids: Vec<u32>,
}

/// Chat-like texts with special tokens parsed, against the ids llama.cpp gives
/// (scripts/make_gguf_vocab_references.py): Gemma 4's turn and tool-call markers (the latter
/// user-defined), Phi-3's special tokens that drop the whitespace after them, the space prefix
/// after every special token of SentencePiece files, Llama 3's headers, Qwen2's ChatML.
#[test]
fn special_tokens_match_llama_cpp() -> anyhow::Result<()> {
    let path = "tests/fixtures/tokenizer-references/gguf-special.json";
    let all: std::collections::BTreeMap<String, Vec<Special>> = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    assert!(all.len() >= 5);
    for (name, cases) in &all {
        let tok = open(name)?;
        for case in cases {
            let mut ids = tok.encode(&case.text, true);
            if tok.add_bos {
                ids.remove(0);
            }
            assert_eq!(ids, case.ids, "{name}: {:?}", case.text);
        }
    }
    Ok(())
}

/// Files whose pre-tokenizer or tokenizer model weft does not have are refused with a typed
/// error naming what is missing, never tokenized with a wrong rule.
#[test]
fn unsupported_vocabularies_are_refused_by_name() {
    for (name, what) in [
        ("falcon", "'falcon'"),
        ("deepseek-coder", "'deepseek-coder'"),
        ("deepseek-llm", "'deepseek-llm'"),
        ("bert-bge", "'bert'"),
    ] {
        match open(name) {
            Err(Error::UnsupportedModel { what: got, .. }) => assert!(got.contains(what), "{name}: {got}"),
            Err(other) => panic!("{name}: {other} is not an UnsupportedModel error"),
            Ok(_) => panic!("{name}: loaded, but weft has no tokenizer for it"),
        }
    }
}
