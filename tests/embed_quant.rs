//! all-MiniLM-L6-v2 with its matrices quantized at load (q8: q8_g32_sym, q4: q4_g32_asym):
//! cosine of every fixture embedding to the F32 one, and retrieval agreement with the F32
//! reference's top-5 on the fixture's queries and passages. q4 stays below the 0.98 aimed for
//! (min 0.940, mean 0.973 measured): a 6-layer, 384-wide encoder loses more to 4 bits than
//! the LLMs do. In a PyTorch simulation of the same rounding (groups of 32, scale and zero
//! searched per group: min 0.937, mean 0.970), no choice within 4-bit groups of 32 reached it:
//! any single one of the 36 matrices kept at 8 bits, at most 0.952; scaling each matrix's
//! input columns by their mean magnitude to the power 0.5 before rounding (AWQ-style, 64
//! calibration sentences), 0.954; correcting each bias for the mean error, 0.932; GPTQ with
//! 128 calibration sentences, 0.918. The error is spread over all matrices about evenly, so
//! reaching 0.98 takes about two thirds of them at 8 bits (~7 bits a weight), which is q8.

#[path = "common/embed.rs"]
mod embed;

use weft::model::bert::{open_native, EmbedOptions, EncoderOptions};
use weft::quant::weft::WeftQuant;

fn check(format: &str, min_cosine: f64, mean_cosine: f64, min_overlap: f64) -> anyhow::Result<()> {
    embed::model_present()?;
    let fx = embed::fixture()?;
    let options = EncoderOptions { quantize: Some(WeftQuant::parse(format)?), ..Default::default() };
    let enc = open_native(embed::MODEL_DIR, options)?;
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
        "{format}: cosine to F32 min {min:.6} mean {mean:.6} over {} texts; top-5 overlap {:.0}%, top-1 {top1}/{}",
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
