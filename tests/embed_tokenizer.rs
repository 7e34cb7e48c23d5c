//! WordPiece ids against Hugging Face `tokenizers` for the fixture texts (cased, accented,
//! punctuation, CJK, Hangul, emoji, empty, longer than the maximum length), from both
//! tokenizer.json and vocab.txt.

#[path = "common/embed.rs"]
mod embed;

use weft::tokenizer::wordpiece::WordPiece;

#[test]
fn wordpiece_ids_equal_hf_tokenizers() -> anyhow::Result<()> {
    embed::model_present()?;
    let fx = embed::fixture()?;
    assert!(fx.sentences.len() >= 20);
    assert!(fx.sentences.iter().any(|s| s.ids.len() == fx.max_len), "one text is truncated");
    let json = WordPiece::from_tokenizer_json(&std::fs::read_to_string(format!("{}/tokenizer.json", embed::MODEL_DIR))?)?;
    let txt = WordPiece::from_vocab_txt(&std::fs::read_to_string(format!("{}/vocab.txt", embed::MODEL_DIR))?, true)?;
    for s in &fx.sentences {
        assert_eq!(json.encode(&s.text, fx.max_len), s.ids, "tokenizer.json: {:?}", s.text);
        assert_eq!(txt.encode(&s.text, fx.max_len), s.ids, "vocab.txt: {:?}", s.text);
    }
    Ok(())
}
