//! The decode attention writing its output as 8-bit activation records for the O projection
//! (shaders/attention_decode.wgsl with XOUT, src/ops/qmatmul/records.rs): the records hold what
//! the O GEMV's staging makes of the same values, so its sums are the same bits either way, the
//! attention's f32 output is unchanged, and a model decodes the same ids with and without them.

use std::collections::HashMap;

use safetensors::tensor::{Dtype, TensorView};
use weft::gpu::{DType, GpuContext, GpuTensor};
use weft::model::{self, EngineOptions, Llama, WeightOptions};
use weft::ops::attention::{attention_rope_split, partials_shape, AttentionMask, AttentionShape, SPLIT_CHUNK};
use weft::ops::kv::KvFormat;
use weft::ops::qmatmul::records::{records_shape, RecordOrder, RECORD_WORDS};
use weft::ops::qmatmul::{self, gemv_fused, gemv_int8, GemvFusion, WeightFormat};
use weft::ops::rope::{rope_table, step_bytes, RopeScaling, RopeShape, RopeStyle};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::gpu_kernel_ctx;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Each record's integers within half a step of value / scale, its scale absmax / 127 and its
/// half sums those of its integers.
fn check_decodes(records: &[u32], values: &[f32], order: RecordOrder, label: &str) {
    assert_eq!(records.len(), values.len() / 32 * RECORD_WORDS, "{label}: record count");
    for (c, rec) in records.chunks_exact(RECORD_WORDS).enumerate() {
        let d = f32::from_bits(rec[8]);
        let amax = values[32 * c..32 * c + 32].iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(amax > 0.0 && (d - amax / 127.0).abs() <= amax * 1e-6, "{label}: chunk {c} scale {d} for absmax {amax}");
        let mut halves = [0i32; 2];
        for j in 0..8 {
            for (b, byte) in rec[j].to_le_bytes().into_iter().enumerate() {
                let q = byte as i8 as i32;
                let v = values[32 * c + order.value_of(j, b)];
                assert!((q as f32 - v / d).abs() <= 0.5 + 1e-3, "{label}: chunk {c} word {j} byte {b}: {q} for {}", v / d);
                halves[j / 4] += q;
            }
        }
        assert_eq!([rec[9], rec[10]], [(halves[0] as f32).to_bits(), (halves[1] as f32).to_bits()], "{label}: chunk {c} sums");
    }
}

/// One decode step's attention, then the O projection (8-bit activations) added into a copy of
/// `stream`: staged from the f32 output, or with `records` reading what the attention wrote.
/// Returns (attention output, stream after).
#[allow(clippy::too_many_arguments)]
fn attend_then_project(
    ctx: &GpuContext,
    rs: RopeShape,
    qkv: &GpuTensor,
    caches: [&GpuTensor; 2],
    table: &GpuTensor,
    step: &weft::gpu::Uniform,
    chunk: usize,
    wo: &qmatmul::QWeight,
    stream: &[f32],
    records: Option<(&GpuTensor, RecordOrder)>,
) -> anyhow::Result<(Vec<f32>, Vec<f32>)> {
    let s = AttentionShape { n_tokens: 1, n_heads: rs.n_heads, n_kv_heads: rs.n_kv_heads, head_dim: rs.head_dim, max_seq: rs.max_seq, kv: rs.kv };
    let partials = ctx.zeros("partials", &partials_shape(&s, SPLIT_CHUNK), DType::F32)?;
    let arrivals = ctx.zeros("arrivals", &[rs.n_heads], DType::U32)?;
    let out = ctx.upload_f32("out", &[1, rs.n_heads, rs.head_dim], &vec![-3.0; rs.n_heads * rs.head_dim])?;
    let scale = 1.0 / (rs.head_dim as f32).sqrt();
    let attend = pollster::block_on(attention_rope_split(
        ctx,
        rs,
        AttentionMask::default(),
        qkv,
        caches,
        table,
        [&partials, &arrivals],
        &out,
        records,
        scale,
        step,
        chunk,
    ))?;
    let y = ctx.upload_f32("stream", &[1, stream.len()], stream)?;
    let fusion = GemvFusion { residual: true, int8: true, records_in: records.is_some(), ..Default::default() };
    let flat = out.view(&[1, rs.n_heads * rs.head_dim])?;
    let x = records.map_or(&flat, |(r, _)| r);
    let project = pollster::block_on(gemv_fused(ctx, wo, x, &y, fusion))?;
    assert_eq!(attend.name().contains("XOUT=1"), records.is_some(), "{}", attend.name());
    ctx.run(&[&attend, &project]);
    Ok((pollster::block_on(ctx.read_f32(&out))?, pollster::block_on(ctx.read_f32(&y))?))
}

#[test]
fn attention_records_give_the_o_projection_the_bits_of_its_staging() -> anyhow::Result<()> {
    let ctx = &gpu_kernel_ctx()?;
    // One chunk size for every case (each kernel variant takes a software adapter most of a
    // minute to compile): a context within one chunk, where the workgroup writes its head
    // itself, and contexts over several, where the last workgroup merges them.
    let chunk = 64;
    let mut checked = 0;
    for (case, (format, n_heads, n_kv_heads, head_dim, pos)) in
        [("q4_g32_sym", 4, 2, 64, 10), ("q3_g32_asym", 8, 2, 128, 300), ("q8_g32_sym", 2, 1, 32, 130)].into_iter().enumerate()
    {
        let format = WeightFormat::parse(format).expect("known format");
        let order = RecordOrder::of(&format).expect("a DP4 order");
        let (q_dim, dim, max_seq) = (n_heads * head_dim, 96, 512);
        let wo = qmatmul::test_weight(format, 70 + case as u64, dim, q_dim)?.upload(ctx, "wo")?;
        if !gemv_int8(ctx, &wo) {
            continue;
        }
        let kv = KvFormat::F32;
        let rs = RopeShape { n_tokens: 1, n_heads, n_kv_heads, head_dim, max_seq, rot_dims: head_dim, style: RopeStyle::Norm, kv, sinks: 0 };
        let seed = 500 + 10 * case as u64;
        let qkv = ctx.upload_f32("qkv", &[1, n_heads + 2 * n_kv_heads, head_dim], &random_f32(seed, (n_heads + 2 * n_kv_heads) * head_dim))?;
        let table = ctx.upload_f32("rope", &[max_seq, head_dim / 2, 2], &rope_table(max_seq, head_dim, 10000.0, &RopeScaling::None))?;
        let step = ctx.uniform_block("step", 16);
        ctx.write_uniform(&step, &step_bytes(pos as u32, 1));
        let cache = [n_kv_heads, max_seq, kv.row_words(head_dim)];
        let kc = ctx.upload_u32("kc", &cache, &kv.encode_cache(&random_f32(seed + 1, n_kv_heads * max_seq * head_dim), head_dim))?;
        let vc = ctx.upload_u32("vc", &cache, &kv.encode_cache(&random_f32(seed + 2, n_kv_heads * max_seq * head_dim), head_dim))?;
        let (mut kc, mut vc) = (kc, vc);
        (kc.dtype, vc.dtype) = (kv.dtype(), kv.dtype());
        let stream = random_f32(seed + 3, dim);
        let label = format!("case {case}: {format:?} heads {n_heads}/{n_kv_heads} dim {head_dim} pos {pos}");
        let staged = attend_then_project(ctx, rs, &qkv, [&kc, &vc], &table, &step, chunk, &wo, &stream, None)?;
        let rec = ctx.zeros("records", &records_shape(1, q_dim), DType::U32)?;
        let recorded = attend_then_project(ctx, rs, &qkv, [&kc, &vc], &table, &step, chunk, &wo, &stream, Some((&rec, order)))?;
        assert_eq!(bits(&recorded.0), bits(&staged.0), "{label}: the attention's f32 output");
        assert_eq!(bits(&recorded.1), bits(&staged.1), "{label}: the O projection");
        assert_ne!(bits(&staged.1), bits(&stream), "{label}: the O projection added nothing");
        check_decodes(&pollster::block_on(ctx.read_u32(&rec))?, &staged.0, order, &label);
        checked += 1;
    }
    assert_eq!(checked, 3, "every case ran the DP4 GEMV");
    // Records need whole chunks a head.
    let rs = RopeShape { n_tokens: 1, n_heads: 2, n_kv_heads: 1, head_dim: 16, max_seq: 64, rot_dims: 16, style: RopeStyle::Norm, kv: KvFormat::F32, sinks: 0 };
    let qkv = ctx.zeros("qkv", &[1, 4, 16], DType::F32)?;
    let table = ctx.zeros("rope", &[64, 8, 2], DType::F32)?;
    let cache = ctx.zeros("cache", &[1, 64, 16], DType::F32)?;
    let s = AttentionShape { n_tokens: 1, n_heads: 2, n_kv_heads: 1, head_dim: 16, max_seq: 64, kv: KvFormat::F32 };
    let partials = ctx.zeros("partials", &partials_shape(&s, SPLIT_CHUNK), DType::F32)?;
    let arrivals = ctx.zeros("arrivals", &[2], DType::U32)?;
    let out = ctx.zeros("out", &[1, 2, 16], DType::F32)?;
    let rec = ctx.zeros("records", &[1, 1, RECORD_WORDS], DType::U32)?;
    let step = ctx.uniform_block("step", 16);
    let refused = pollster::block_on(attention_rope_split(
        ctx,
        rs,
        AttentionMask::default(),
        &qkv,
        [&cache, &cache],
        &table,
        [&partials, &arrivals],
        &out,
        Some((&rec, RecordOrder::Nibbles)),
        0.25,
        &step,
        64,
    ));
    assert!(refused.is_err(), "records of heads of 16 values");
    Ok(())
}

/// A random-weight Llama of two blocks with heads of 32 values (the fixtures' are 16, which
/// records cannot cover), written as an F32 safetensors file.
fn random_llama(path: &std::path::Path) -> anyhow::Result<String> {
    let (dim, ffn, heads, kv_heads, head_dim, layers, vocab) = (64, 128, 2, 1, 32, 2, 320);
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut seed = 1000;
    let mut add = |name: String, shape: Vec<usize>, norm: bool| {
        seed += 1;
        let n = shape.iter().product();
        let values = random_f32(seed, n).into_iter().map(|v| if norm { 1.0 + 0.2 * v } else { 0.6 * v }).collect();
        tensors.push((name, shape, values));
    };
    add("model.embed_tokens.weight".into(), vec![vocab, dim], false);
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        add(format!("{p}.input_layernorm.weight"), vec![dim], true);
        add(format!("{p}.self_attn.q_proj.weight"), vec![heads * head_dim, dim], false);
        add(format!("{p}.self_attn.k_proj.weight"), vec![kv_heads * head_dim, dim], false);
        add(format!("{p}.self_attn.v_proj.weight"), vec![kv_heads * head_dim, dim], false);
        add(format!("{p}.self_attn.o_proj.weight"), vec![dim, heads * head_dim], false);
        add(format!("{p}.post_attention_layernorm.weight"), vec![dim], true);
        add(format!("{p}.mlp.gate_proj.weight"), vec![ffn, dim], false);
        add(format!("{p}.mlp.up_proj.weight"), vec![ffn, dim], false);
        add(format!("{p}.mlp.down_proj.weight"), vec![dim, ffn], false);
    }
    add("model.norm.weight".into(), vec![dim], true);
    add("lm_head.weight".into(), vec![vocab, dim], false);
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, _, v)| v.iter().flat_map(|f| f.to_le_bytes()).collect()).collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| Ok((name.clone(), TensorView::new(Dtype::F32, shape.clone(), b)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    std::fs::write(path, safetensors::serialize(views, Some(HashMap::from([("format".to_string(), "pt".to_string())])))?)?;
    Ok(format!(
        r#"{{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": {dim}, "intermediate_size": {ffn},
        "num_attention_heads": {heads}, "num_key_value_heads": {kv_heads}, "num_hidden_layers": {layers}, "vocab_size": {vocab},
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256, "tie_word_embeddings": false,
        "hidden_act": "silu"}}"#
    ))
}

fn greedy(ctx: &GpuContext, llama: &mut Llama, prompt: &[u32], n: usize) -> anyhow::Result<Vec<u32>> {
    let mut ids = vec![pollster::block_on(llama.prefill(ctx, prompt))?];
    while ids.len() < n {
        ids.push(pollster::block_on(llama.step(ctx))?);
    }
    Ok(ids)
}

/// The engine with 8-bit activations decodes the same ids with records as without; with them
/// each block's attention writes records and its O GEMV reads them (as the down GEMV reads the
/// SwiGLU epilogue's).
#[test]
fn the_decode_step_passes_the_attention_to_the_o_projection_as_records() -> anyhow::Result<()> {
    let ctx = gpu_kernel_ctx()?;
    let path = std::env::temp_dir().join(format!("weft-attention-records-{}.safetensors", std::process::id()));
    let config = random_llama(&path)?;
    let prompt = [5, 77, 301, 12, 250, 9, 42];
    let mut runs = Vec::new();
    for activation_records in [false, true] {
        let engine = EngineOptions {
            max_seq: 160,
            max_batch: 16,
            fuse_norms: Some(true),
            split_attention: Some(true),
            // Contexts past one chunk of 64: the heads are merged by their last workgroup.
            attention_chunk: Some(64),
            int8_activations: true,
            activation_records,
            tune: false,
            ..Default::default()
        };
        let reader = weft::loader::native::FileReader::open(&path)?;
        let weights = WeightOptions { quantize: Some(weft::quant::weft::WeftQuant::parse("q4_g32_asym")?), ..Default::default() };
        let mut llama = pollster::block_on(model::open_safetensors_weights(&ctx, &reader, &config, engine, weights, &mut |_| {}))?;
        let ids = greedy(&ctx, &mut llama, &prompt, 90)?;
        let kernels: Vec<String> = llama.decode_kernels().iter().map(|k| k.to_string()).collect();
        let count = |prefix: &str, define: &str| kernels.iter().filter(|k| k.starts_with(prefix) && k.contains(define)).count();
        let recorded = if activation_records { 2 } else { 0 };
        assert_eq!(count("attention_decode[", "XOUT=1"), recorded, "{kernels:?}");
        // The O and the down GEMV of each block.
        assert_eq!(count("qgemv_gpu[", "XREC=1"), 2 * recorded, "{kernels:?}");
        runs.push((ids, llama.decode_dispatches()));
    }
    std::fs::remove_file(&path)?;
    assert_eq!(runs[1], runs[0], "records changed the ids or the dispatches");
    // Not one id repeated throughout: the comparison says something.
    assert!(runs[0].0.iter().any(|&id| id != runs[0].0[0]), "{:?}", runs[0].0);
    Ok(())
}
