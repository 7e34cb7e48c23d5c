//! The all-MiniLM-L6-v2 reference fixtures (tests/fixtures/embed, scripts/make_embed_fixture.py):
//! texts, HF `tokenizers` ids, sentence-transformers embeddings, retrieval top-5; and the checks
//! every backend's F32 encoder passes against them.
#![allow(dead_code)]

#[path = "activations.rs"]
#[allow(dead_code)]
mod activations;

use std::path::Path;

use weft::model::bert::{EmbedOptions, Encoder, Pooling};

pub const MODEL_DIR: &str = "models/all-MiniLM-L6-v2";
pub const FIXTURES: &str = "tests/fixtures/embed";

#[derive(serde::Deserialize)]
pub struct Sentence {
    pub text: String,
    pub ids: Vec<u32>,
    pub embedding: Vec<f32>,
}

#[derive(serde::Deserialize)]
pub struct Retrieval {
    pub queries: Vec<String>,
    pub passages: Vec<String>,
    pub top5: Vec<Vec<usize>>,
}

#[derive(serde::Deserialize)]
pub struct Fixture {
    pub max_len: usize,
    pub sentences: Vec<Sentence>,
    pub retrieval: Retrieval,
}

pub fn fixture() -> anyhow::Result<Fixture> {
    Ok(serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/sentences.json"))?)?)
}

pub fn model_present() -> anyhow::Result<()> {
    anyhow::ensure!(
        std::path::Path::new(MODEL_DIR).join("model.safetensors").exists(),
        "{MODEL_DIR} missing: run scripts/fetch-embed-model.sh"
    );
    Ok(())
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Indices of the `k` passages closest to `query` (both L2-normalised), best first.
pub fn top_k(query: &[f32], passages: &[Vec<f32>], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..passages.len()).collect();
    let score = |i: usize| cosine(query, &passages[i]);
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    order.truncate(k);
    order
}

/// Every fixture text's embedding (batches of 8, which mix short and long truncated texts in one
/// pass) within cosine 0.99999 of sentence-transformers' and of unit length; CLS pooling without
/// normalisation equal to the first row of the last hidden state. Returns the embeddings.
pub fn check_f32_embeddings(enc: &Encoder, label: &str) -> anyhow::Result<Vec<Vec<f32>>> {
    let fx = fixture()?;
    let texts: Vec<&str> = fx.sentences.iter().map(|s| s.text.as_str()).collect();
    let got = enc.embed(&texts, EmbedOptions { batch_size: 8, ..Default::default() }, &mut |_, _| {})?;
    let mut worst = 1.0f64;
    for (s, e) in fx.sentences.iter().zip(&got) {
        let cos = cosine(e, &s.embedding);
        println!("{label}: {cos:.8}  {:?}", s.text.chars().take(40).collect::<String>());
        worst = worst.min(cos);
        let norm: f32 = e.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{label}: normalised: {norm}");
    }
    println!("{label}: min cosine {worst:.8} over {} texts", got.len());
    assert!(worst >= 0.99999, "{label}: min cosine {worst}");
    let cls = enc.embed(&texts[..1], EmbedOptions { pooling: Pooling::Cls, normalize: false, batch_size: 1 }, &mut |_, _| {})?;
    let hidden = enc.hidden_states(texts[0])?;
    assert_eq!(&cls[0][..], &hidden.last().expect("hidden states").2[..enc.dim()], "{label}: CLS row");
    Ok(got)
}

/// Every layer's hidden state of the first three fixture texts within the activation tolerance
/// of transformers' (tests/fixtures/embed/hidden.{text}.{layer}.npy).
pub fn check_hidden_states(enc: &Encoder, label: &str) -> anyhow::Result<()> {
    let fx = fixture()?;
    for s in 0..3 {
        let got = enc.hidden_states(&fx.sentences[s].text)?;
        assert_eq!(got.len(), enc.config.n_layers + 1);
        for (name, shape, values) in &got {
            let layer = name.trim_start_matches("hidden.");
            let (ref_shape, reference) = activations::read_npy(&Path::new(FIXTURES).join(format!("hidden.{s}.{layer}.npy")))?;
            assert_eq!(shape, &ref_shape, "{name}");
            let max_err = values.iter().zip(&reference).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
            let scale = reference.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
            let rel = max_err / scale;
            println!("{label}: text {s} {name:<9} max|err| {max_err:.3e} max|ref| {scale:.3e} relative {rel:.2e}");
            assert!(rel <= activations::F32_TOLERANCE, "{label}: text {s} {name}: {rel:.2e}");
        }
    }
    Ok(())
}
