//! A GGUF whose layers mix formats as llama-quantize's Q4_K_M does (Q4_K, with Q6_K for V and
//! the down projection in the layers its `use_more_bits` rule picks; bench/gpu/gen_quant_gguf.py
//! wrote the fixture): in those layers Q/K/V cannot be stacked into one matrix. The decode step
//! with the norms and residual adds folded into its GEMVs (forced here, with a GPU's kernels on
//! any adapter) keeps those products apart, each normalising the stream itself and writing its
//! columns of the buffer the stacked product would fill, so that the layer takes the same fused
//! RoPE + store + split attention as a stacked one; the greedy ids are those of the step with
//! separate norm, add, RoPE + store and attention dispatches, in fewer dispatches.

use weft::loader::native::FileReader;
use weft::model::llama::Qkv;
use weft::model::{self, EngineOptions, WeightOptions};

mod gpu_context;
use gpu_context::gpu_kernel_ctx;

const MODEL: &str = "tests/fixtures/quant-tiny/model-q4_k_m.gguf";

/// One decode configuration's greedy ids and its step's dispatches.
struct Run {
    ids: Vec<u32>,
    dispatches: usize,
}

#[test]
fn norms_fold_into_the_products_a_mixed_layer_keeps_apart() -> anyhow::Result<()> {
    let ctx = gpu_kernel_ctx()?;
    let prompt = [1u32, 7, 42, 300, 5, 64, 128];
    let mut runs = Vec::new();
    // Separate dispatches; norms folded with the RoPE + store and split attention of their own;
    // norms folded and the attention fused.
    for (fuse_norms, fuse_attention) in [(false, false), (true, false), (true, true)] {
        let engine = EngineOptions {
            max_seq: 64,
            max_batch: 16,
            fuse_norms: Some(fuse_norms),
            fuse_attention,
            split_attention: Some(true),
            tune: false,
            ..Default::default()
        };
        let reader = FileReader::open(MODEL)?;
        let mut llama = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?.0;
        let apart: Vec<bool> = llama.weights.layers.iter().map(|l| matches!(l.qkv, Qkv::Apart { .. })).collect();
        assert!(apart.iter().any(|&a| a) && apart.iter().any(|&a| !a), "the fixture mixes stacked and apart Q/K/V: {apart:?}");
        let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &prompt))?];
        while ids.len() < 24 {
            ids.push(pollster::block_on(llama.step(&ctx))?);
        }
        let kernels = llama.decode_kernels();
        let norm_gemvs = kernels.iter().filter(|k| k.contains("NORM=1")).count();
        let norms = kernels.iter().filter(|k| k.starts_with("rmsnorm") || k.starts_with("add_rms_norm")).count();
        let ropes = kernels.iter().filter(|k| k.starts_with("rope")).count();
        let dispatches = llama.decode_dispatches();
        println!("fuse_norms {fuse_norms}, fuse_attention {fuse_attention}: {dispatches} dispatches a step, {norm_gemvs} normalising \
            GEMVs, {norms} norm kernels, {ropes} RoPE kernels, Q/K/V apart {apart:?}, ids {ids:?}");
        if fuse_norms {
            // Every layer's norms are in its GEMVs (3 normalising Q/K/V products where apart,
            // 1 where stacked, 1 gate/up) and the final norm in the head: no norm kernel left.
            let want = apart.iter().map(|&a| if a { 3 } else { 1 } + 1).sum::<usize>() + 1;
            assert_eq!(norm_gemvs, want, "normalising GEMVs");
            assert_eq!(norms, 0, "norm kernels left in the step");
        }
        if fuse_attention {
            // Apart or stacked, every layer's RoPE + store is in its attention kernel: a block is
            // its Q/K/V GEMVs, the attention, the output GEMV adding into the stream, the gate/up
            // GEMV and the down GEMV taking the SwiGLU; then the embedding, the head and the
            // sampler.
            assert_eq!(ropes, 0, "RoPE + store kernels left in the step");
            let want = apart.iter().map(|&a| if a { 3 } else { 1 } + 4).sum::<usize>() + 3;
            assert_eq!(dispatches, want, "dispatches a step");
        }
        runs.push(Run { ids, dispatches });
    }
    let tokens = runs[0].ids.len();
    for (run, what) in runs[1..].iter().zip(["the norms folded in", "the norms folded in and the attention fused"]) {
        assert_eq!(run.ids, runs[0].ids, "greedy ids over {tokens} tokens with {what} against separate dispatches");
    }
    assert!(runs[1].dispatches < runs[0].dispatches, "folding must save dispatches: {} against {}", runs[1].dispatches, runs[0].dispatches);
    Ok(())
}

/// How far a logit may move with 8-bit activations, relative to the largest |logit|: each GEMV
/// input carries one rounding of up to half a level of its 32-value chunk's largest value / 127
/// (0.4 %), compounded through two layers and the head.
const INT8_LOGITS: f32 = 0.03;

#[test]
fn int8_activations_take_every_product_of_a_mixed_layer() -> anyhow::Result<()> {
    // Q4_K and Q6_K planes (a GPU's upload) with 8-bit activations: every GEMV of the step takes
    // the DP4 path, in the same dispatches, and the logits of the decode path (one token a pass)
    // stay near those of f32 activations.
    let ctx = gpu_kernel_ctx()?;
    let prompt = [1u32, 7, 42, 300, 5, 64, 128];
    let tokens = [1u32, 7, 42, 300, 5, 64, 128, 488, 50, 240, 390, 455, 12, 99];
    let open = |int8_activations: bool, max_batch: usize| -> anyhow::Result<model::Llama> {
        let engine = EngineOptions { max_seq: 64, max_batch, fuse_norms: Some(true), int8_activations, tune: false, ..Default::default() };
        let reader = FileReader::open(MODEL)?;
        Ok(pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?.0)
    };
    let mut runs = Vec::new();
    for int8_activations in [false, true] {
        let mut llama = open(int8_activations, 16)?;
        let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &prompt))?];
        while ids.len() < 4 {
            ids.push(pollster::block_on(llama.step(&ctx))?);
        }
        let kernels = llama.decode_kernels();
        let gemvs = kernels.iter().filter(|k| k.starts_with("qgemv_gpu")).count();
        let dp4 = kernels.iter().filter(|k| k.contains("DP4=1")).count();
        let planes = |bits: &str| kernels.iter().filter(|k| k.contains("DP4=1") && k.contains(bits)).count();
        println!("int8 {int8_activations}: {} dispatches a step, {gemvs} GPU GEMVs, {dp4} DP4 (K4 {}, K6 {}), ids {ids:?}",
            llama.decode_dispatches(), planes("K4=1"), planes("K6=1"));
        let apart = llama.weights.layers.iter().filter(|l| matches!(l.qkv, Qkv::Apart { .. })).count();
        assert!(apart > 0, "the fixture keeps some layers' Q/K/V apart");
        if int8_activations {
            assert_eq!(dp4, gemvs, "GEMVs without 8-bit activations: {kernels:?}");
            assert!(planes("K4=1") > 0 && planes("K6=1") > 0, "Q4_K and Q6_K both take it: {kernels:?}");
        } else {
            assert_eq!(dp4, 0, "{kernels:?}");
        }
        let logits = pollster::block_on(open(int8_activations, 1)?.logits(&ctx, &tokens, None))?;
        runs.push((ids, llama.decode_dispatches(), gemvs, logits));
    }
    // The tiny random model's logits lie close together (later steps flip between near ties),
    // so the ids are compared over the first steps and the logits within INT8_LOGITS.
    assert_eq!(runs[1].0, runs[0].0, "8-bit activations changed the first greedy ids");
    assert_eq!(runs[1].1, runs[0].1, "8-bit activations need no dispatch of their own");
    assert_eq!(runs[1].2, runs[0].2, "the same GEMVs");
    let (exact, int8) = (&runs[0].3, &runs[1].3);
    let vocab = exact.len() / tokens.len();
    for (t, (e, q)) in exact.chunks_exact(vocab).zip(int8.chunks_exact(vocab)).enumerate() {
        let scale = e.iter().fold(0f32, |m, v| m.max(v.abs()));
        let moved = e.iter().zip(q).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max) / scale;
        println!("token {t}: logits moved {moved:.2e} of max |logit| {scale:.3}");
        assert!(moved <= INT8_LOGITS, "token {t}: {moved:e}");
        assert!(moved > 0.0, "token {t}: the same logits, so no 8-bit activations");
    }
    Ok(())
}
