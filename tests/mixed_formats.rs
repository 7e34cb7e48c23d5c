//! A GGUF whose layers mix formats as llama-quantize's Q4_K_M does (Q4_K, with Q6_K for V and
//! the down projection in the layers its `use_more_bits` rule picks; bench/gpu/gen_quant_gguf.py
//! wrote the fixture): in those layers Q/K/V cannot be stacked into one matrix. The decode step
//! with the norms and residual adds folded into its GEMVs (forced here, with a GPU's kernels on
//! any adapter) keeps those products apart, each normalising the stream itself and writing its
//! columns of the buffer the stacked product would fill, so that the layer takes the same fused
//! RoPE + store + split attention as a stacked one; the greedy ids are those of the step with
//! separate norm, add, RoPE + store and attention dispatches, in fewer dispatches.

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::FileReader;
use weft::model::llama::Qkv;
use weft::model::{self, EngineOptions, WeightOptions};

const MODEL: &str = "tests/fixtures/quant-tiny/model-q4_k_m.gguf";

/// One decode configuration's greedy ids and its step's dispatches.
struct Run {
    ids: Vec<u32>,
    dispatches: usize,
}

#[test]
fn norms_fold_into_the_products_a_mixed_layer_keeps_apart() -> anyhow::Result<()> {
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
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
