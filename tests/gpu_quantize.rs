//! The GPU quantizer against the CPU reference quantizer, byte for byte (packed words, f16
//! scales and zero points), for every weft format and each float source type, on seeded data
//! with the edge cases forced in: zero and constant groups, ragged last groups, subnormals,
//! values near f32's and f16's limits, exact grid values (rounding ties), mixed magnitudes.

use half::{bf16, f16};
use weft::format::{SafeDtype, StorageType};
use weft::ops::quantize::{read_back, Quantizer};
use weft::quant::weft::{quantize, Scheme, WeftQuant, BITS, GROUPS};
use weft::quant::decode_to_f32;
use weft::selftest::random_f32;
use weft::Error;

mod gpu_context;
use gpu_context::ctx;

/// Rows of 200 columns (ragged for every group size), one edge case per row.
fn edge_rows(seed: u64, cols: usize) -> Vec<f32> {
    let r = |k: u64| random_f32(seed * 31 + k, cols);
    let rows: Vec<Vec<f32>> = vec![
        vec![0.0; cols],
        vec![0.37; cols],
        vec![-2.5; cols],
        (0..cols).map(|c| if c % 41 == 5 { 1e-3 } else { 0.0 }).collect(),
        r(1).iter().enumerate().map(|(c, v)| if c % 9 == 0 { 3.3e38 * v.signum() } else { v * 1e38 }).collect(),
        r(2).iter().map(|v| v * 1e-40).collect(),
        r(3).iter().enumerate().map(|(c, v)| v * 10f32.powi((c % 20) as i32 - 10)).collect(),
        (0..cols).map(|c| if c % 5 == 0 { -0.0 } else { ((c % 7) as f32 - 3.0) * 0.5 }).collect(),
        (0..cols).map(|c| (c % 16) as f32 * 0.125 - 1.0).collect(),
        r(4),
        r(5).iter().map(|v| v * v * v * 8.0).collect(),
        r(6).iter().map(|v| v * 60000.0).collect(),
    ];
    rows.concat()
}

/// `values` stored as `dtype` (non-finite F16 results clamped to its largest value), and the
/// floats the CPU reads back from those bytes.
fn stored(dtype: SafeDtype, values: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let bytes: Vec<u8> = match dtype {
        SafeDtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        SafeDtype::F16 => values
            .iter()
            .map(|&v| f16::from_f32(v))
            .map(|h| if h.is_finite() { h } else { f16::MAX.copysign(h) })
            .flat_map(|h| h.to_bits().to_le_bytes())
            .collect(),
        SafeDtype::BF16 => values.iter().flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes()).collect(),
        _ => unreachable!("the quantizer reads F32, F16 and BF16"),
    };
    let floats = decode_to_f32(StorageType::Safe(dtype), &bytes, values.len()).unwrap();
    (bytes, floats)
}

fn all_formats() -> Vec<WeftQuant> {
    let mut v = Vec::new();
    for bits in BITS {
        for group in GROUPS {
            for scheme in [Scheme::Sym, Scheme::Asym] {
                v.push(WeftQuant { bits, group, scheme });
            }
        }
    }
    v
}

#[test]
fn every_format_and_source_type_matches_the_cpu_quantizer_byte_for_byte() -> anyhow::Result<()> {
    let ctx = ctx();
    let cols = 200;
    let quantizer = pollster::block_on(Quantizer::new(ctx))?;
    let mut failures = Vec::new();
    let mut cases = 0;
    for (i, quant) in all_formats().into_iter().enumerate() {
        for dtype in [SafeDtype::F32, SafeDtype::F16, SafeDtype::BF16] {
            let values = edge_rows(i as u64, cols);
            let rows = values.len() / cols;
            let (bytes, floats) = stored(dtype, &values);
            let want = quantize(quant, &floats, rows, cols)?;
            let w = quantizer.quantize(ctx, "w", quant, StorageType::Safe(dtype), &bytes, rows, cols)?;
            let got = pollster::block_on(read_back(ctx, &w))?;
            cases += 1;
            for r in 0..rows {
                let (gpr, wpr) = (quant.groups_per_row(cols), quant.words_per_row(cols));
                let same = got.words[r * wpr..(r + 1) * wpr] == want.words[r * wpr..(r + 1) * wpr]
                    && got.scales[r * gpr..(r + 1) * gpr] == want.scales[r * gpr..(r + 1) * gpr]
                    && (want.zeros.is_empty() || got.zeros[r * gpr..(r + 1) * gpr] == want.zeros[r * gpr..(r + 1) * gpr]);
                if !same {
                    failures.push(format!("{} from {}: row {r}", quant.name(), dtype.name()));
                }
            }
            assert_eq!((got.words.len(), got.scales.len(), got.zeros.len()), (want.words.len(), want.scales.len(), want.zeros.len()));
        }
    }
    pollster::block_on(quantizer.check(ctx))?;
    assert_eq!(cases, 72);
    assert!(failures.is_empty(), "{} rows differ:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

#[test]
fn non_finite_weights_are_a_typed_error_naming_the_tensor() -> anyhow::Result<()> {
    let ctx = ctx();
    let quant = WeftQuant::parse("q4_g32_asym")?;
    let quantizer = pollster::block_on(Quantizer::new(ctx))?;
    let fine = random_f32(1, 4 * 64);
    let (bytes, _) = stored(SafeDtype::F32, &fine);
    quantizer.quantize(ctx, "fine", quant, StorageType::Safe(SafeDtype::F32), &bytes, 4, 64)?;
    pollster::block_on(quantizer.check(ctx))?;
    for (name, bad) in [("nan", f32::NAN), ("inf", f32::NEG_INFINITY)] {
        let mut x = fine.clone();
        x[77] = bad;
        let (bytes, _) = stored(SafeDtype::BF16, &x);
        quantizer.quantize(ctx, name, quant, StorageType::Safe(SafeDtype::BF16), &bytes, 4, 64)?;
    }
    match pollster::block_on(quantizer.check(ctx)) {
        Err(Error::NonFiniteWeights { name }) => assert_eq!(name, "nan"),
        other => panic!("expected NonFiniteWeights, got {other:?}"),
    }
    Ok(())
}

/// A tiny model's F16 folder loaded with `quantize`, once quantized on the GPU (digests read
/// back) and once by the CPU reference: the same matrices in the same formats with equal
/// digests, then the same logits and greedy ids.
#[test]
fn a_load_quantized_on_the_gpu_equals_the_cpu_quantizers_load() -> anyhow::Result<()> {
    use weft::loader::native::FileReader;
    use weft::model::{self, EngineOptions, QuantizeOn, WeightOptions};
    let ctx = ctx();
    for dir in ["tests/fixtures/qwen3-tiny", "tests/fixtures/gemma2-tiny", "tests/fixtures/phi3-tiny"] {
        let mut runs = Vec::new();
        for on_cpu in [false, true] {
            let reader = FileReader::open(format!("{dir}/model.safetensors"))?;
            let config = std::fs::read_to_string(format!("{dir}/config.json"))?;
            let tokenizer = std::fs::read_to_string("tests/fixtures/qwen2-tiny/tokenizer.json")?;
            let weights = WeightOptions {
                quantize: Some(WeftQuant::parse("q4_g32_asym")?),
                default_keep: true,
                quantize_on: if on_cpu { QuantizeOn::Cpu } else { QuantizeOn::Gpu },
                digests: true,
                ..Default::default()
            };
            let engine = EngineOptions { max_seq: 32, max_batch: 8, ..Default::default() };
            let mut progress = |_| {};
            let open = model::open_safetensors(ctx, &reader, &config, &tokenizer, None, engine, weights, &mut progress);
            let mut llama = pollster::block_on(open)?.0;
            let quantized: Vec<(String, String, Option<u64>)> =
                llama.weights.quantized.iter().map(|q| (q.name.clone(), q.format.name(), q.digest)).collect();
            let mut ids = vec![pollster::block_on(llama.prefill(ctx, &[5, 17, 42, 9]))?];
            while ids.len() < 8 {
                ids.push(pollster::block_on(llama.step(ctx))?);
            }
            runs.push((quantized, ids));
        }
        let (gpu, cpu) = (&runs[0], &runs[1]);
        assert!(gpu.0.len() >= 7 && gpu.0.iter().all(|q| q.2.is_some()), "{dir}: {:?}", gpu.0);
        assert!(gpu.0.iter().any(|q| q.1 == "q8_g32_asym") && gpu.0.iter().any(|q| q.1 == "q4_g32_asym"));
        assert_eq!(gpu.0, cpu.0, "{dir}: digests differ");
        assert_eq!(gpu.1, cpu.1, "{dir}: greedy ids differ");
        println!("{dir}: {} matrices quantized on the GPU equal the CPU's; greedy {:?}", gpu.0.len(), gpu.1);
    }
    Ok(())
}

/// `quantize: 'auto'` on a tiny model: the plan (made from the header) names every float
/// matrix, the load quantizes each to its planned format, and the model generates; a budget
/// the KV cache and activations alone exceed is ModelTooLarge before any weight is read.
#[test]
fn auto_quantization_loads_the_planned_formats_and_generates() -> anyhow::Result<()> {
    use weft::loader::native::FileReader;
    use weft::model::{self, EngineOptions, QuantizeOn, WeightOptions};
    let ctx = ctx();
    let dir = "tests/fixtures/qwen3-tiny";
    let open = |budget_mb: u64, max_seq: usize| -> weft::Result<model::Llama> {
        let reader = FileReader::open(format!("{dir}/model.safetensors"))?;
        let config = std::fs::read_to_string(format!("{dir}/config.json")).map_err(|e| Error::Model(e.to_string()))?;
        let tokenizer = std::fs::read_to_string("tests/fixtures/qwen2-tiny/tokenizer.json").map_err(|e| Error::Model(e.to_string()))?;
        let weights = WeightOptions { auto: true, memory_budget_mb: Some(budget_mb), quantize_on: QuantizeOn::Gpu, ..Default::default() };
        let engine = EngineOptions { max_seq, max_batch: 8, ..Default::default() };
        let mut progress = |_| {};
        Ok(pollster::block_on(model::open_safetensors(ctx, &reader, &config, &tokenizer, None, engine, weights, &mut progress))?.0)
    };
    let mut llama = open(2, 32)?;
    let plan = llama.weights.plan.clone().expect("a plan");
    assert!(plan.fixed_bytes + plan.matrix_bytes <= 2_000_000);
    let planned: Vec<(String, String)> = plan.assignments.iter().map(|a| (a.name.clone(), a.format.name())).collect();
    let loaded: Vec<(String, String)> = llama.weights.quantized.iter().map(|q| (q.name.clone(), q.format.name())).collect();
    assert_eq!(planned.len(), 15);
    let mut sorted = loaded.clone();
    sorted.sort();
    let mut want = planned.clone();
    want.sort();
    assert_eq!(sorted, want, "the load quantized what the plan chose");
    let mut ids = vec![pollster::block_on(llama.prefill(ctx, &[5, 17, 42, 9]))?];
    while ids.len() < 8 {
        ids.push(pollster::block_on(llama.step(ctx))?);
    }
    assert!(ids.iter().all(|&t| (t as usize) < llama.config.vocab));
    println!("auto, 2 MB: {} matrix bytes, formats {:?}; greedy {ids:?}", plan.matrix_bytes, planned.iter().map(|p| &p.1).collect::<std::collections::BTreeSet<_>>());
    match open(0, 32) {
        Err(Error::ModelTooLarge { needed, available, .. }) => assert!(needed > available),
        Err(e) => panic!("expected ModelTooLarge, got {e}"),
        Ok(_) => panic!("expected ModelTooLarge, the model loaded"),
    }
    Ok(())
}
