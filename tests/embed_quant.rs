//! all-MiniLM-L6-v2 with its matrices quantized at load (q8: q8_g32_sym, q4: q4_g32_asym, and
//! q4 with the value and up projections at q8): cosine of every fixture embedding to the F32
//! one, and retrieval agreement with the F32 reference's top-5 on the fixture's queries and
//! passages. Plain q4 (5.0 bits a matrix weight) stays below the 0.98 aimed for (min 0.946, mean
//! 0.974 measured). In a PyTorch simulation of the same rounding (groups of 32, scale and zero
//! searched per group: min 0.940), none of these reached it at 5 bits: the group search weighted
//! by each input column's mean square over 128 calibration sentences, 0.943; AWQ-style input
//! scaling, 0.954; bias correction, 0.932; GPTQ, 0.918. Keeping whole matrices at 8 bits: the
//! attention output and down projections (6.44 bits), 0.951; layers 4 and 5 (6.15 bits), 0.969;
//! the value and up projections (6.44 bits), 0.979 simulated and 0.982 with weft's quantizer
//! (`q4_with_value_and_up_at_q8_reaches_cosine_0_98`).
//!
//! On a CPU with AVX-512 VNNI the 8-bit matrices multiply activations quantized to 8 bits per 32
//! values (`cpu::gemm::int8_products`), which rounds a little more: q8 min cosine 0.998507
//! against 0.999626 with f32 activations, q4 with the value and up projections at q8 0.980785
//! against 0.981867 (top-5 overlap 80 % against 84 %).

#[path = "common/embed.rs"]
mod embed;

use weft::model::bert::{open_native, EmbedOptions, EncoderOptions, Weights};
use weft::model::convert::KeepRule;
use weft::quant::weft::WeftQuant;

/// `format` for every block matrix (no default keep rules).
fn check(format: &str, min_cosine: f64, mean_cosine: f64, min_overlap: f64) -> anyhow::Result<()> {
    check_plan(format, Some(&[]), min_cosine, mean_cosine, min_overlap)
}

/// `format` for every block matrix but those `keep` rules (`PATTERN=FORMAT`) name; `None`: the
/// encoder's default rules.
fn check_plan(format: &str, keep: Option<&[&str]>, min_cosine: f64, mean_cosine: f64, min_overlap: f64) -> anyhow::Result<()> {
    embed::model_present()?;
    let fx = embed::fixture()?;
    let default_keep = keep.is_none();
    let keep = keep.unwrap_or_default().iter().map(|k| KeepRule::parse(k)).collect::<Result<Vec<_>, _>>()?;
    let options = EncoderOptions { quantize: Some(WeftQuant::parse(format)?), keep, default_keep, ..Default::default() };
    let enc = open_native(embed::MODEL_DIR, options)?;
    let Weights::Cpu(w) = &enc.weights else { anyhow::bail!("weights on the CPU") };
    let bits = w.matrix_bits();
    let texts: Vec<&str> = fx.sentences.iter().map(|s| s.text.as_str()).collect();
    let got = enc.embed(&texts, EmbedOptions::default(), &mut |_, _| {})?;
    let cosines: Vec<f64> = got.iter().zip(&fx.sentences).map(|(e, s)| embed::cosine(e, &s.embedding)).collect();
    let min = cosines.iter().copied().fold(1.0, f64::min);
    let mean = cosines.iter().sum::<f64>() / cosines.len() as f64;

    let r = &fx.retrieval;
    let q: Vec<&str> = r.queries.iter().map(String::as_str).collect();
    let p: Vec<&str> = r.passages.iter().map(String::as_str).collect();
    let (qe, pe) = (enc.embed(&q, EmbedOptions::default(), &mut |_, _| {})?, enc.embed(&p, EmbedOptions::default(), &mut |_, _| {})?);
    let (mut overlap, mut top1) = (0usize, 0usize);
    for (v, want) in qe.iter().zip(&r.top5) {
        let top = embed::top_k(v, &pe, 5);
        overlap += top.iter().filter(|i| want.contains(i)).count();
        top1 += usize::from(top[0] == want[0]);
    }
    let overlap = overlap as f64 / (5 * r.queries.len()) as f64;
    println!(
        "{format} {bits:.2} bits a matrix weight: cosine to F32 min {min:.6} mean {mean:.6} over {} texts; top-5 overlap {:.0}%, top-1 {top1}/{}",
        cosines.len(),
        overlap * 100.0,
        r.queries.len()
    );
    assert!(min >= min_cosine, "{format}: min cosine {min}");
    assert!(mean >= mean_cosine, "{format}: mean cosine {mean}");
    assert!(overlap >= min_overlap, "{format}: top-5 overlap {overlap}");
    assert_eq!(top1, r.queries.len(), "{format}: every query's best passage unchanged");
    Ok(())
}

#[test]
fn q8_embeddings_stay_within_cosine_0_995() -> anyhow::Result<()> {
    check("q8_g32_sym", 0.995, 0.999, 1.0)
}

#[test]
fn q4_embeddings_stay_within_cosine_0_93() -> anyhow::Result<()> {
    check("q4_g32_asym", 0.93, 0.965, 0.8)
}

/// The value and up projections are the matrices whose rounding moves the embedding most (each
/// alone at 8 bits in every layer lifted the simulated min cosine from 0.940 to 0.959 and
/// 0.960; Q, K or the attention output to at most 0.941, the down projection to 0.950): the
/// encoder's default keep rules put those two at q8_g32_sym when q4 is asked, the rest at
/// q4_g32_asym, 6.46 bits a matrix weight; the same as the rules spelled out.
#[test]
fn q4_with_value_and_up_at_q8_reaches_cosine_0_98() -> anyhow::Result<()> {
    check_plan("q4_g32_asym", None, 0.98, 0.99, 0.8)?;
    check_plan("q4_g32_asym", Some(&["attention.self.value=q8_g32_sym", "intermediate.dense=q8_g32_sym"]), 0.98, 0.99, 0.8)
}
