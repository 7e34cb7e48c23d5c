//! The `k` formats (8-bit scale and zero-point codes, docs/FORMAT.md) on the GPU: a matrix
//! decoded from its stored codes gives, through the GPU's kernels, the CPU reference's values bit
//! for bit (embedding rows) and its products (GEMV); a `weft quantize` file of the tiny Qwen2
//! model in `q4_g32_k` is smaller than its `q4_g32_asym` twin by the scale bytes, and greedy ids
//! on the GPU and the CPU backend are the same.

mod gpu_context;

use weft::cpu::{self, Arithmetic, CpuOptions};
use weft::format::ModelHeader;
use weft::gpu::DType;
use weft::loader::native::FileReader;
use weft::loader::read_header;
use weft::model::convert::{quantize_model, QuantizePlan};
use weft::model::{self, EngineOptions, LlamaConfig, WeightOptions};
use weft::ops::qmatmul::{self, Precision, QWeight};
use weft::quant::kcode;
use weft::quant::weft::{quantize, Scheme, WeftQuant};
use weft::selftest::random_f32;
use weft::tokenizer::Tokenizer;

use gpu_context::ctx;

const DIR: &str = "tests/fixtures/qwen2-tiny";
const PROMPT: [u32; 5] = [54, 74, 71, 327, 381];

#[test]
fn k_matrices_from_their_codes_decode_on_the_gpu_bit_for_bit() -> anyhow::Result<()> {
    let ctx = ctx();
    let (n, k) = (37, 192);
    let mut dense = random_f32(31, n * k);
    // Rows of different magnitudes, so rows get different exponents.
    for (i, v) in dense.iter_mut().enumerate() {
        *v *= 0.01 * (1 + i / k % 7) as f32;
    }
    let x = random_f32(32, k);
    for bits in [2, 3, 4] {
        let format = WeftQuant::new(bits, 32, Scheme::K)?;
        let q = quantize(format, &dense, n, k)?;
        let codes = kcode::encode(&q)?;
        let m = kcode::decode(format, n, k, q.words.clone(), &codes.scales, &codes.zeros)?;
        let w = QWeight::from_weft(ctx, "w", &m)?;
        let ids: Vec<u32> = (0..n as u32).collect();
        let idt = ctx.upload_u32("ids", &[n], &ids)?;
        let rows = ctx.zeros("rows", &[n, k], DType::F32)?;
        let d = pollster::block_on(qmatmul::embed(ctx, &w, &idt, &rows))?;
        ctx.run(&[&d]);
        let got: Vec<u32> = pollster::block_on(ctx.read_f32(&rows))?.iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = m.dequantize().iter().map(|v| v.to_bits()).collect();
        assert!(got == want, "{}: GPU rows differ from the CPU reference", format.name());
        let xt = ctx.upload_f32("x", &[1, k], &x)?;
        let y = ctx.zeros("y", &[1, n], DType::F32)?;
        let d = pollster::block_on(qmatmul::gemv(ctx, &w, &xt, &y, Precision::F32))?;
        ctx.run(&[&d]);
        let got = pollster::block_on(ctx.read_f32(&y))?;
        let (want, scale) = qmatmul::cpu_reference(&m.dequantize(), &x, n, k, 1);
        for i in 0..n {
            let tol = qmatmul::f16_tolerance(k) * scale[i];
            assert!((got[i] as f64 - want[i]).abs() <= tol, "{} row {i}: {} vs {}", format.name(), got[i], want[i]);
        }
    }
    Ok(())
}

/// The tiny model quantized in `format` with no keep rules, written to a temporary file.
fn quantized_file(format: WeftQuant) -> anyhow::Result<(std::path::PathBuf, u64)> {
    let reader = FileReader::open(format!("{DIR}/model.safetensors"))?;
    let header = pollster::block_on(read_header(&reader))?.header;
    assert!(matches!(header, ModelHeader::Safetensors(_)));
    let config = LlamaConfig::from_hf_json(&std::fs::read_to_string(format!("{DIR}/config.json"))?)?;
    let tokenizer = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{DIR}/tokenizer.json"))?, None)?;
    let plan = QuantizePlan::new(format, Vec::new());
    let (writer, reports) = pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, &mut |_, _| {}))?;
    assert!(reports.iter().any(|r| r.format == format.name()));
    let path = std::env::temp_dir().join(format!("weft-qwen2-tiny-{}-{}.safetensors", format.name(), std::process::id()));
    let mut file = std::fs::File::create(&path)?;
    writer.write(&mut file)?;
    drop(file);
    let len = std::fs::metadata(&path)?.len();
    Ok((path, len))
}

#[test]
fn k_files_are_smaller_and_run_alike_on_gpu_and_cpu() -> anyhow::Result<()> {
    let ctx = ctx();
    let (k_path, k_len) = quantized_file(WeftQuant::new(4, 32, Scheme::K)?)?;
    let (asym_path, asym_len) = quantized_file(WeftQuant::new(4, 32, Scheme::Asym)?)?;
    let _ = std::fs::remove_file(&asym_path);
    // Each group of 32 saves two bytes, each row costs one; the headers differ a little.
    let reader = FileReader::open(format!("{DIR}/model.safetensors"))?;
    let header = pollster::block_on(read_header(&reader))?.header;
    let (mut groups, mut rows) = (0u64, 0u64);
    for t in header.tensors() {
        if t.shape.len() == 2 && weft::model::convert::is_matrix(&t.name) {
            groups += t.shape[0] * t.shape[1].div_ceil(32);
            rows += t.shape[0];
        }
    }
    let saved = asym_len as i64 - k_len as i64;
    let want = (2 * groups - rows) as i64;
    assert!((saved - want).abs() < 4096, "saved {saved} bytes, expected about {want}");

    let engine = EngineOptions { max_seq: 32, max_batch: 8, ..Default::default() };
    let reader = FileReader::open(&k_path)?;
    let (mut gpu, _) = pollster::block_on(model::open(ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?;
    let mut gpu_ids = vec![pollster::block_on(gpu.prefill(ctx, &PROMPT))?];
    while gpu_ids.len() < 12 {
        gpu_ids.push(pollster::block_on(gpu.step(ctx))?);
    }
    let options = CpuOptions { max_seq: 32, max_batch: 8, arithmetic: Arithmetic::F32, ..Default::default() };
    let (mut cpu, _) = pollster::block_on(cpu::open(&reader, options))?;
    let mut cpu_ids = vec![cpu.prefill(&PROMPT)?];
    while cpu_ids.len() < 12 {
        cpu_ids.push(cpu.step()?);
    }
    let _ = std::fs::remove_file(&k_path);
    println!("q4_g32_k: {k_len} bytes against {asym_len}; greedy ids {gpu_ids:?}");
    assert_eq!(cpu_ids, gpu_ids);
    Ok(())
}
