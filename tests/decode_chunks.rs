//! The decode step's attention chunk follows the context length (`decode_chunk_plan`): a model
//! with heads of 128 dimensions decodes across 256 and 512 positions, its step switching from
//! chunks of 64 to 128 to 256, with queued steps recorded across each switch; the ids it
//! samples (seeded) equal those of the same model with the chunk fixed at 64. With an f16 cache
//! the folded kernel takes the same chunks and samples the ids of the separate RoPE + store,
//! split attention and combine.

mod common;
mod gpu_context;

use common::{ty, GgufWriter};
use weft::format::GgmlType;
use weft::loader::native::NativeSource;
use weft::model::{self, EngineOptions, KvFormat, Llama, WeightOptions};
use weft::ops::attention::decode_chunk_plan;
use weft::ops::sample::SampleParams;

const HEAD_DIM: u64 = 128;
const HEADS: u64 = 2;
const DIM: u64 = HEADS * HEAD_DIM;
const FFN: u64 = 320;
const VOCAB: u64 = 260;
const LAYERS: usize = 2;
const MAX_SEQ: usize = 600;

/// A llama GGUF with F32 random weights (scaled so the logits stay well apart), one KV head,
/// and a byte-level vocabulary.
fn model_file() -> anyhow::Result<std::path::PathBuf> {
    let mut tensors: Vec<(String, Vec<u64>, f32)> =
        vec![("token_embd.weight".into(), vec![DIM, VOCAB], 0.03), ("output_norm.weight".into(), vec![DIM], 0.0)];
    for i in 0..LAYERS {
        for (name, dims, scale) in [
            ("attn_norm.weight", vec![DIM], 0.0),
            ("attn_q.weight", vec![DIM, DIM], 0.2),
            ("attn_k.weight", vec![DIM, HEAD_DIM], 0.2),
            ("attn_v.weight", vec![DIM, HEAD_DIM], 0.2),
            ("attn_output.weight", vec![DIM, DIM], 0.1),
            ("ffn_norm.weight", vec![DIM], 0.0),
            ("ffn_gate.weight", vec![DIM, FFN], 0.1),
            ("ffn_up.weight", vec![DIM, FFN], 0.1),
            ("ffn_down.weight", vec![FFN, DIM], 0.1),
        ] {
            tensors.push((format!("blk.{i}.{name}"), dims, scale));
        }
    }
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).collect();
    tokens.extend(["<|im_start|>", "<|im_end|>", "ab", "abc"].map(String::from));
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let dims = [
        ("llama.block_count", LAYERS as u64),
        ("llama.embedding_length", DIM),
        ("llama.attention.head_count", HEADS),
        ("llama.attention.head_count_kv", 1),
        ("llama.attention.key_length", HEAD_DIM),
        ("llama.feed_forward_length", FFN),
        ("llama.vocab_size", VOCAB),
        ("llama.context_length", 4096),
        ("llama.rope.dimension_count", HEAD_DIM),
    ];
    let mut w = GgufWriter::new(3, tensors.len() as u64, 5 + dims.len() as u64);
    w.kv_str("general.architecture", "llama");
    w.key("llama.attention.layer_norm_rms_epsilon", ty::F32).raw(&1e-5f32.to_le_bytes());
    w.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "smollm");
    w.kv_str_array("tokenizer.ggml.tokens", &refs);
    for (key, value) in dims {
        w.kv_u32(key, value as u32);
    }
    let mut offset = 0u64;
    for (name, dims, _) in &tensors {
        w.tensor(name, dims, GgmlType::F32.id(), offset);
        offset += (dims.iter().product::<u64>() * 4).div_ceil(32) * 32;
    }
    let mut file = w.finish(32, offset as usize);
    let mut at = file.len() - offset as usize;
    for (i, (_, dims, scale)) in tensors.iter().enumerate() {
        let n = dims.iter().product::<u64>() as usize;
        // Norm weights (scale 0) are ones; the rest seeded uniform values times the scale.
        let values = if *scale == 0.0 { vec![1.0; n] } else { weft::selftest::random_f32(40 + i as u64, n) };
        for (j, v) in values.iter().enumerate() {
            let v = if *scale == 0.0 { *v } else { v * scale };
            file[at + 4 * j..at + 4 * j + 4].copy_from_slice(&v.to_le_bytes());
        }
        at += (n * 4).div_ceil(32) * 32;
    }
    let path = std::env::temp_dir().join(format!("weft-decode-chunks-{}.gguf", std::process::id()));
    std::fs::write(&path, file)?;
    Ok(path)
}

/// GPT-2's printable stand-in for byte `b` (a byte-level vocabulary's first 256 tokens).
fn byte_char(b: u8) -> String {
    let printable = |x: u8| (b'!'..=b'~').contains(&x) || (0xA1..=0xAC).contains(&x) || x >= 0xAE;
    if printable(b) {
        return char::from(b).to_string();
    }
    let index = (0..b).filter(|&x| !printable(x)).count();
    char::from_u32(256 + index as u32).unwrap().to_string()
}

fn load(path: &std::path::Path, attention_chunk: Option<usize>, kv: KvFormat, fuse_attention: bool) -> anyhow::Result<Llama> {
    let ctx = gpu_context::ctx();
    // Split attention (with the RoPE + store folded in where `fuse_attention`), as on GPUs, on
    // any adapter.
    let engine = EngineOptions {
        max_seq: MAX_SEQ,
        max_batch: 64,
        split_attention: Some(true),
        attention_chunk,
        kv,
        fuse_attention,
        ..Default::default()
    };
    let (llama, _) =
        pollster::block_on(model::open(ctx, &NativeSource::open(path.to_str().expect("a UTF-8 temp path"))?, engine, WeightOptions::default(), &mut |_| {}))?;
    Ok(llama)
}

/// The folded attention kernel's chunk in the decode step at the current position, or
/// "separate" where the step has no folded kernel.
fn step_chunk(llama: &Llama) -> String {
    let kernels = llama.decode_kernels();
    match kernels.iter().find(|k| k.starts_with("attention_decode")) {
        Some(k) => k.split([',', '[', ']']).find(|d| d.starts_with("CHUNK=")).expect("CHUNK define").to_string(),
        None => "separate".into(),
    }
}

#[test]
fn the_plan_covers_every_context_once() {
    assert_eq!(decode_chunk_plan(64, 4096), vec![(4096, 256)]);
    assert_eq!(decode_chunk_plan(128, 200), vec![(200, 64)]);
    assert_eq!(decode_chunk_plan(128, 256), vec![(256, 64)]);
    assert_eq!(decode_chunk_plan(128, 300), vec![(256, 64), (300, 128)]);
    assert_eq!(decode_chunk_plan(256, 8192), vec![(256, 64), (512, 128), (8192, 256)]);
}

#[test]
fn the_decode_chunk_follows_the_context_and_keeps_the_ids() -> anyhow::Result<()> {
    let path = model_file()?;
    let ctx = gpu_context::ctx();
    // Prompts bring the context near each switch and decode steps cross it: 190 positions, steps
    // to 310 (past 256), 230 more positions, steps to 570 (past 512).
    let text = |n: usize, at: u32| -> Vec<u32> { (0..n as u32).map(|i| ((at + i) * 7 % VOCAB as u32) + 1).collect() };
    let phases = [(text(190, 0), 310), (text(230, 500), 570)];
    let mut runs = Vec::new();
    // The planned chunks and chunks of 64 with the f32 cache; with the f16 and q8 caches the
    // folded kernel (planned chunks) and the separate RoPE + store, split attention and combine.
    let runs_of = [
        (None, KvFormat::F32, true),
        (Some(64), KvFormat::F32, true),
        (None, KvFormat::F16, true),
        (None, KvFormat::F16, false),
        (None, KvFormat::Q8, true),
        (None, KvFormat::Q8, false),
    ];
    for (chunk, kv, folded) in runs_of {
        let mut llama = load(&path, chunk, kv, folded)?;
        // Sampled at temperature 1 with a seed: every step's choice depends on the whole
        // distribution, where greedy choices on random weights settle into a loop.
        llama.set_sampling(ctx, &SampleParams { temperature: 1.0, seed: 7, ..Default::default() });
        let (mut ids, mut chunks) = (Vec::new(), Vec::new());
        for (prompt, stop) in &phases {
            ids.push(pollster::block_on(llama.prefill(ctx, prompt))?);
            // The step about to run decodes at the current position, with that many + 1 in context.
            while llama.position() + 1 < *stop {
                let context = llama.position() + 1;
                if [200, 300, 560].contains(&context) {
                    chunks.push((context, step_chunk(&llama)));
                }
                ids.push(pollster::block_on(llama.step(ctx))?);
            }
        }
        runs.push((ids, chunks));
    }
    std::fs::remove_file(&path).ok();
    let [planned, fixed, half, apart, q8, q8_apart] = &runs[..] else { unreachable!() };
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let chunks_of = |r: &(Vec<u32>, Vec<(usize, String)>)| r.1.iter().map(|c| c.1.clone()).collect::<Vec<_>>();
    assert_eq!(chunks_of(planned), names(&["CHUNK=64", "CHUNK=128", "CHUNK=256"]), "{:?}", planned.1);
    assert_eq!(chunks_of(fixed), names(&["CHUNK=64"; 3]), "{:?}", fixed.1);
    assert_eq!(chunks_of(half), names(&["CHUNK=64", "CHUNK=128", "CHUNK=256"]), "{:?}", half.1);
    assert_eq!(chunks_of(apart), names(&["separate"; 3]), "{:?}", apart.1);
    assert_eq!(chunks_of(q8), names(&["CHUNK=64", "CHUNK=128", "CHUNK=256"]), "{:?}", q8.1);
    assert_eq!(chunks_of(q8_apart), names(&["separate"; 3]), "{:?}", q8_apart.1);
    // The two runs differ only in how the context is split between workgroups, so their sums
    // round differently; no draw of these lands that close to a boundary between two ids.
    let distinct = planned.0.iter().collect::<std::collections::HashSet<_>>().len();
    assert!(distinct > 10, "a degenerate model: {distinct} distinct ids");
    assert_eq!(planned.0, fixed.0, "sampled ids with the planned chunks against chunks of 64");
    // The f16 cache holds the same rounded rows either way.
    assert_eq!(half.0, apart.0, "f16 cache: sampled ids of the folded kernel against the separate dispatches");
    assert_eq!(q8.0, q8_apart.0, "q8 cache: sampled ids of the folded kernel against the separate dispatches");
    Ok(())
}
