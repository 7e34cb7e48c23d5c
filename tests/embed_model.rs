//! all-MiniLM-L6-v2 (F32 weights) on the CPU against sentence-transformers (PyTorch, f32): every
//! fixture text's embedding, batched texts of different lengths in one pass, and every layer's
//! hidden state of three texts within the activation tolerance (the checks: `common/embed.rs`).

#[path = "common/embed.rs"]
mod embed;

use weft::model::bert::{open_native, EmbedOptions, EncoderOptions};

#[test]
fn embeddings_equal_sentence_transformers() -> anyhow::Result<()> {
    embed::model_present()?;
    let enc = open_native(embed::MODEL_DIR, EncoderOptions::default())?;
    let got = embed::check_f32_embeddings(&enc, "CPU F32")?;
    // One at a time gives the same vectors as the batches (the packed mask isolates sequences).
    let fx = embed::fixture()?;
    let texts: Vec<&str> = fx.sentences[..3].iter().map(|s| s.text.as_str()).collect();
    let single = enc.embed(&texts, EmbedOptions { batch_size: 1, ..Default::default() }, &mut |_, _| {})?;
    for (a, b) in single.iter().zip(&got) {
        assert!(a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6));
    }
    Ok(())
}

#[test]
fn every_hidden_state_matches_transformers() -> anyhow::Result<()> {
    embed::model_present()?;
    let enc = open_native(embed::MODEL_DIR, EncoderOptions::default())?;
    embed::check_hidden_states(&enc, "CPU")
}
