//! A GGUF whose layers mix formats as llama-quantize's Q4_K_M does (Q4_K, with Q6_K for V and
//! the down projection in the layers its `use_more_bits` rule picks; bench/gpu/gen_quant_gguf.py
//! wrote the fixture): in those layers Q/K/V cannot be stacked into one matrix. The decode step
//! with the norms and residual adds folded into its GEMVs (forced here, with a GPU's kernels on
//! any adapter) keeps those products apart, each normalising the stream itself, and gives the
//! greedy ids of the step with separate norm and add dispatches, in fewer dispatches.

use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::FileReader;
use weft::model::llama::Qkv;
use weft::model::{self, EngineOptions, WeightOptions};

const MODEL: &str = "tests/fixtures/quant-tiny/model-q4_k_m.gguf";

#[test]
fn norms_fold_into_the_products_a_mixed_layer_keeps_apart() -> anyhow::Result<()> {
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
    let prompt = [1u32, 7, 42, 300, 5, 64, 128];
    let mut runs = Vec::new();
    for fuse_norms in [false, true] {
        let engine = EngineOptions { max_seq: 64, max_batch: 16, fuse_norms: Some(fuse_norms), tune: false, ..Default::default() };
        let reader = FileReader::open(MODEL)?;
        let mut llama = pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?.0;
        let apart: Vec<bool> = llama.weights.layers.iter().map(|l| matches!(l.qkv, Qkv::Apart { .. })).collect();
        assert!(apart.iter().any(|&a| a) && apart.iter().any(|&a| !a), "the fixture mixes stacked and apart Q/K/V: {apart:?}");
        let mut ids = vec![pollster::block_on(llama.prefill(&ctx, &prompt))?];
        while ids.len() < 16 {
            ids.push(pollster::block_on(llama.step(&ctx))?);
        }
        let kernels = llama.decode_kernels();
        let norm_gemvs = kernels.iter().filter(|k| k.contains("NORM=1")).count();
        let norms = kernels.iter().filter(|k| k.starts_with("rmsnorm") || k.starts_with("add_rms_norm")).count();
        println!("fuse_norms {fuse_norms}: {} dispatches a step, {norm_gemvs} normalising GEMVs, {norms} norm kernels, Q/K/V apart {apart:?}, ids {ids:?}",
            llama.decode_dispatches());
        if fuse_norms {
            // Every layer's norms are in its GEMVs (3 normalising Q/K/V products where apart,
            // 1 where stacked, 1 gate/up) and the final norm in the head: no norm kernel left.
            let want = apart.iter().map(|&a| if a { 3 } else { 1 } + 1).sum::<usize>() + 1;
            assert_eq!(norm_gemvs, want, "normalising GEMVs");
            assert_eq!(norms, 0, "norm kernels left in the step");
        }
        runs.push((ids, llama.decode_dispatches()));
    }
    assert_eq!(runs[1].0, runs[0].0, "greedy ids with the norms folded in against separate dispatches");
    assert!(runs[1].1 < runs[0].1, "folding must save dispatches: {} against {}", runs[1].1, runs[0].1);
    Ok(())
}
