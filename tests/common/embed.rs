//! The all-MiniLM-L6-v2 reference fixtures (tests/fixtures/embed, scripts/make_embed_fixture.py):
//! texts, HF `tokenizers` ids, sentence-transformers embeddings, retrieval top-5.
#![allow(dead_code)]

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
