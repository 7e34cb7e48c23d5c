//! all-MiniLM-L6-v2 (F32 weights) against sentence-transformers (PyTorch, f32): every fixture
//! text's embedding, batched texts of different lengths in one pass, and every layer's hidden
//! state of three texts within the activation tolerance.

#[path = "common/activations.rs"]
#[allow(dead_code)]
mod activations;
#[path = "common/embed.rs"]
mod embed;

use std::path::Path;

use weft::model::bert::{open_native, EmbedOptions, EncoderOptions, Pooling};

#[test]
fn embeddings_equal_sentence_transformers() -> anyhow::Result<()> {
    embed::model_present()?;
    let fx = embed::fixture()?;
    let enc = open_native(embed::MODEL_DIR, EncoderOptions::default())?;
    let texts: Vec<&str> = fx.sentences.iter().map(|s| s.text.as_str()).collect();
    // Batches of 8 mix short and long (truncated) texts in one pass.
    let got = enc.embed(&texts, EmbedOptions { batch_size: 8, ..Default::default() }, &mut |_, _| {})?;
    let mut worst = 1.0f64;
    for (s, e) in fx.sentences.iter().zip(&got) {
        let cos = embed::cosine(e, &s.embedding);
        println!("{cos:.8}  {:?}", s.text.chars().take(40).collect::<String>());
        worst = worst.min(cos);
        let norm: f32 = e.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "normalised: {norm}");
    }
    println!("min cosine {worst:.8} over {} texts", got.len());
    assert!(worst >= 0.99999, "min cosine {worst}");

    // One at a time gives the same vectors as the batches (the packed mask isolates sequences).
    let single = enc.embed(&texts[..3], EmbedOptions { batch_size: 1, ..Default::default() }, &mut |_, _| {})?;
    for (a, b) in single.iter().zip(&got) {
        assert!(a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6));
    }
    // CLS pooling without normalisation is the first row of the last hidden state.
    let cls = enc.embed(&texts[..1], EmbedOptions { pooling: Pooling::Cls, normalize: false, batch_size: 1 }, &mut |_, _| {})?;
    let hidden = enc.hidden_states(texts[0])?;
    let last = &hidden.last().expect("hidden states").2;
    assert_eq!(&cls[0][..], &last[..enc.dim()]);
    Ok(())
}

#[test]
fn every_hidden_state_matches_transformers() -> anyhow::Result<()> {
    embed::model_present()?;
    let fx = embed::fixture()?;
    let enc = open_native(embed::MODEL_DIR, EncoderOptions::default())?;
    for s in 0..3 {
        let got = enc.hidden_states(&fx.sentences[s].text)?;
        assert_eq!(got.len(), enc.config.n_layers + 1);
        for (name, shape, values) in &got {
            let layer = name.trim_start_matches("hidden.");
            let (ref_shape, reference) = activations::read_npy(&Path::new(embed::FIXTURES).join(format!("hidden.{s}.{layer}.npy")))?;
            assert_eq!(shape, &ref_shape, "{name}");
            let max_err = values.iter().zip(&reference).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
            let scale = reference.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
            let rel = max_err / scale;
            println!("text {s} {name:<9} max|err| {max_err:.3e} max|ref| {scale:.3e} relative {rel:.2e}");
            assert!(rel <= activations::F32_TOLERANCE, "text {s} {name}: {rel:.2e}");
        }
    }
    Ok(())
}
