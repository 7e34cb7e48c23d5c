//! The L2 prefetch (`ops::prefetch`): the kernel reads every sector of its spans exactly once,
//! and the decode step with prefetches beside its GEMVs gives the ids of the step without.

use weft::gpu::{BackendChoice, DType, GpuContext};
use weft::model::{self, EngineOptions, Llama, WeightOptions};
use weft::ops::prefetch::{prefetch, prefetch_xor_cpu, Span, SECTOR_WORDS};

fn ctx() -> anyhow::Result<GpuContext> {
    Ok(pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?)
}

/// Seeded words (an xorshift), none of them zero.
fn words(n: usize, seed: u32) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s
        })
        .collect()
}

#[test]
fn the_prefetch_reads_every_sector_of_its_spans_once() -> anyhow::Result<()> {
    let ctx = ctx()?;
    // Odd lengths, spans that start inside a sector, end past the buffer, cover nothing, or
    // span more sectors than the grid has lanes (a lane then takes several).
    let a = words(300_001, 7);
    let b = words(1_003, 11);
    let c = words(77, 13);
    let spans = [
        [Span { start: 3, len: 250_000 }, Span { start: 299_990, len: 100 }],
        [Span { start: 0, len: 0 }, Span { start: 9, len: 1 }],
        [Span { start: 8, len: 69 }, Span { start: 76, len: 1 }],
    ];
    let (ga, gb, gc) = (
        ctx.upload_u32("a", &[a.len()], &a)?,
        ctx.upload_u32("b", &[b.len()], &b)?,
        ctx.upload_u32("c", &[c.len()], &c)?,
    );
    let want = prefetch_xor_cpu(&[(&a, spans[0]), (&b, spans[1]), (&c, spans[2])]);
    let sink = ctx.zeros("sink", &[1], DType::U32)?;
    let d = pollster::block_on(prefetch(&ctx, &[(&ga, spans[0]), (&gb, spans[1]), (&gc, spans[2])], &sink))?
        .expect("the spans cover sectors");
    ctx.run(&[&d]);
    let got = pollster::block_on(ctx.read_u32(&sink))?[0];
    assert_eq!(got, want, "XOR of the sectors' first words");
    // A sector read twice, or one missed, changes the XOR: the reference with one sector more
    // differs (its word is not zero).
    let more = prefetch_xor_cpu(&[(&a, [spans[0][0], Span { start: 299_990 - SECTOR_WORDS, len: 100 + SECTOR_WORDS }]), (&b, spans[1]), (&c, spans[2])]);
    assert_ne!(more, want);
    // Run again: each run XORs the same words in, so the sink is back to zero.
    ctx.run(&[&d]);
    assert_eq!(pollster::block_on(ctx.read_u32(&sink))?[0], 0);
    // Nothing to read: no dispatch.
    let none = pollster::block_on(prefetch(&ctx, &[(&gc, [Span { start: 77, len: 4 }, Span::default()])], &sink))?;
    assert!(none.is_none());
    Ok(())
}

fn greedy(ctx: &GpuContext, llama: &mut Llama, prompt: &[u32], n: usize) -> anyhow::Result<Vec<u32>> {
    let mut ids = vec![pollster::block_on(llama.prefill(ctx, prompt))?];
    while ids.len() < n {
        ids.push(pollster::block_on(llama.step(ctx))?);
    }
    Ok(ids)
}

/// The tiny Qwen2 fixture (two blocks) decoded with and without prefetches, f32 and 8-bit
/// activations: the same ids, and one prefetch beside the last GEMV of each group that has a
/// matrix product after it (Q/K/V → O, O → gate/up, down → the next Q/K/V or the head).
#[test]
fn prefetches_in_the_decode_step_keep_the_ids() -> anyhow::Result<()> {
    let dir = "tests/fixtures/qwen2-tiny";
    let mut ctx = ctx()?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
    let config = std::fs::read_to_string(format!("{dir}/config.json"))?;
    let prompt = [5, 77, 301, 12, 650, 9, 42];
    for int8_activations in [false, true] {
        let mut runs = Vec::new();
        for prefetch_mb in [0, 1] {
            let engine = EngineOptions {
                max_seq: 64,
                max_batch: 16,
                fuse_norms: Some(true),
                split_attention: Some(true),
                int8_activations,
                prefetch_mb,
                tune: false,
                ..Default::default()
            };
            let reader = weft::loader::native::FileReader::open(format!("{dir}/model.safetensors"))?;
            let weights = WeightOptions { quantize: Some(weft::quant::weft::WeftQuant::parse("q4_g32_asym")?), ..Default::default() };
            let mut llama = pollster::block_on(model::open_safetensors_weights(&ctx, &reader, &config, engine, weights, &mut |_| {}))?;
            let ids = greedy(&ctx, &mut llama, &prompt, 16)?;
            let kernels: Vec<String> = llama.decode_kernels().iter().map(|k| k.to_string()).collect();
            runs.push((ids, kernels));
        }
        let (off, on) = (&runs[0], &runs[1]);
        assert_eq!(on.0, off.0, "int8 {int8_activations}: prefetches changed the ids");
        let prefetches = on.1.iter().filter(|k| k.starts_with("l2_prefetch")).count();
        assert_eq!(prefetches, 3 * 2, "int8 {int8_activations}: {:?}", on.1);
        assert_eq!(on.1.len(), off.1.len() + prefetches);
        assert!(off.1.iter().all(|k| !k.starts_with("l2_prefetch")));
        // Each prefetch comes right after a GEMV.
        for (i, k) in on.1.iter().enumerate().filter(|(_, k)| k.starts_with("l2_prefetch")) {
            assert!(on.1[i - 1].starts_with("qgemv"), "{k} after {}", on.1[i - 1]);
        }
    }
    Ok(())
}
