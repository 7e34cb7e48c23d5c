//! The encoder on the GPU (lavapipe in CI): its kernels against their CPU references on seeded
//! data (packed batches of ragged sequences), then all-MiniLM-L6-v2 against sentence-transformers
//! (F32: cosine ≥ 0.99999 on every fixture text and every hidden state of three texts within the
//! activation tolerance; q8: cosine ≥ 0.995 to the F32 reference).

#[path = "common/embed.rs"]
mod embed;

use std::rc::Rc;

use weft::gpu::{BackendChoice, DType, GpuContext, GpuTensor};
use weft::model::bert::{open_native, EmbedOptions, Encoder, EncoderOptions};
use weft::ops::{encoder_attention, gelu, layernorm, pool};
use weft::quant::weft::WeftQuant;
use weft::selftest::random_f32;

fn context() -> Rc<GpuContext> {
    let choice = BackendChoice::from_env().expect("WEFT_BACKEND");
    Rc::new(pollster::block_on(GpuContext::new(choice)).expect("a GPU adapter (lavapipe in CI)"))
}

fn read(ctx: &GpuContext, t: &GpuTensor) -> Vec<f32> {
    pollster::block_on(ctx.read_f32(t)).expect("readback")
}

/// Sequence starts of a packed batch of the given lengths.
fn starts(lengths: &[usize]) -> Vec<usize> {
    let mut s = vec![0];
    for l in lengths {
        s.push(s.last().unwrap() + l);
    }
    s
}

const LENGTHS: [usize; 5] = [1, 7, 33, 2, 70];

#[test]
fn encoder_kernels_match_their_cpu_references() -> anyhow::Result<()> {
    let ctx = context();
    let starts = starts(&LENGTHS);
    let t = *starts.last().unwrap();

    // LayerNorm with the residual and its bias, at a width that does not fill the workgroup.
    for (seed, cols) in [(1u64, 384usize), (2, 100)] {
        let (x, r) = (random_f32(seed, t * cols), random_f32(seed + 10, t * cols));
        let (rb, w, b) = (random_f32(seed + 20, cols), random_f32(seed + 30, cols), random_f32(seed + 40, cols));
        let want = layernorm::add_layer_norm_cpu(&x, &r, &rb, &w, &b, 1e-12);
        let gx = ctx.upload_f32("x", &[t, cols], &x)?;
        let up = |name: &str, v: &[f32]| ctx.upload_f32(name, &[v.len()], v);
        let (gr, grb, gw, gb) = (ctx.upload_f32("r", &[t, cols], &r)?, up("rb", &rb)?, up("w", &w)?, up("b", &b)?);
        let d = pollster::block_on(layernorm::add_layer_norm(&ctx, &gx, &gr, &grb, &gw, &gb, 1e-12))?;
        ctx.run(&[&d]);
        let dev = layernorm::LAYERNORM_TOLERANCE.compare(&read(&ctx, &gx), &want);
        assert!(dev.within, "layernorm {cols}: {dev:?}");
    }

    // GELU with a bias, over activations as large as an encoder's MLP makes.
    let cols = 96;
    let x: Vec<f32> = random_f32(3, t * cols).iter().map(|v| v * 8.0).collect();
    let b = random_f32(4, cols);
    let gx = ctx.upload_f32("x", &[t, cols], &x)?;
    let gb = ctx.upload_f32("b", &[cols], &b)?;
    let d = pollster::block_on(gelu::bias_gelu(&ctx, &gx, &gb))?;
    ctx.run(&[&d]);
    let dev = gelu::GELU_TOLERANCE.compare(&read(&ctx, &gx), &gelu::bias_gelu_cpu(&x, &b));
    assert!(dev.within, "gelu: {dev:?}");

    // Attention over the packed sequences: 4 heads of 16, scores as large as a model's.
    let (dim, heads) = (64, 4);
    let qkv: Vec<f32> = random_f32(5, t * 3 * dim).iter().map(|v| v * 2.0).collect();
    let gqkv = ctx.upload_f32("qkv", &[t, 3 * dim], &qkv)?;
    let spans = ctx.upload_u32("spans", &[2 * t], &encoder_attention::spans(&starts))?;
    let out = ctx.zeros("out", &[t, dim], DType::F32)?;
    let longest = *LENGTHS.iter().max().unwrap();
    let d = pollster::block_on(encoder_attention::encoder_attention(&ctx, &gqkv, &spans, &out, heads, longest))?;
    ctx.run(&[&d]);
    let want = encoder_attention::encoder_attention_cpu(&qkv, &starts, dim, heads);
    let dev = encoder_attention::ENCODER_ATTENTION_TOLERANCE.compare(&read(&ctx, &out), &want);
    assert!(dev.within, "attention: {dev:?}");
    // A sequence longer than the shared scores hold is refused, not truncated.
    let e = pollster::block_on(encoder_attention::encoder_attention(&ctx, &gqkv, &spans, &out, heads, 513)).err();
    assert!(matches!(e, Some(weft::Error::ContextFull { tokens: 513, .. })), "{e:?}");

    // Pooling, each form.
    let cols = 200;
    let x = random_f32(6, t * cols);
    let gx = ctx.upload_f32("x", &[t, cols], &x)?;
    let s32: Vec<u32> = starts.iter().map(|&s| s as u32).collect();
    let gs = ctx.upload_u32("starts", &[s32.len()], &s32)?;
    let out = ctx.zeros("pooled", &[LENGTHS.len(), cols], DType::F32)?;
    for (cls, normalize) in [(false, false), (false, true), (true, false), (true, true)] {
        let d = pollster::block_on(pool::pool(&ctx, &gx, &gs, &out, cls, normalize))?;
        ctx.run(&[&d]);
        let dev = pool::POOL_TOLERANCE.compare(&read(&ctx, &out), &pool::pool_cpu(&x, &starts, cols, cls, normalize));
        assert!(dev.within, "pool cls {cls} normalize {normalize}: {dev:?}");
    }
    Ok(())
}

fn gpu_encoder(ctx: &Rc<GpuContext>, quantize: Option<&str>) -> anyhow::Result<Encoder> {
    let quantize = quantize.map(WeftQuant::parse).transpose()?;
    let mut enc = open_native(embed::MODEL_DIR, EncoderOptions { quantize, ..Default::default() })?;
    enc.upload(ctx.clone())?;
    assert_eq!(enc.backend(), "gpu");
    Ok(enc)
}

#[test]
fn gpu_embeddings_equal_sentence_transformers() -> anyhow::Result<()> {
    embed::model_present()?;
    let ctx = context();
    let enc = gpu_encoder(&ctx, None)?;
    embed::check_f32_embeddings(&enc, "GPU F32")?;
    embed::check_hidden_states(&enc, "GPU")
}

#[test]
fn gpu_q8_embeddings_stay_within_cosine_0_995() -> anyhow::Result<()> {
    embed::model_present()?;
    let fx = embed::fixture()?;
    let ctx = context();
    let enc = gpu_encoder(&ctx, Some("q8_g32_sym"))?;
    let texts: Vec<&str> = fx.sentences.iter().map(|s| s.text.as_str()).collect();
    let got = enc.embed(&texts, EmbedOptions::default(), &mut |_, _| {})?;
    let cosines: Vec<f64> = got.iter().zip(&fx.sentences).map(|(e, s)| embed::cosine(e, &s.embedding)).collect();
    let min = cosines.iter().copied().fold(1.0, f64::min);
    println!("GPU q8_g32_sym: min cosine to F32 {min:.6} over {} texts", got.len());
    assert!(min >= 0.995, "min cosine {min}");
    Ok(())
}
