//! The `k` formats (8-bit scale and zero-point codes, docs/FORMAT.md) on the GPU: a matrix
//! decoded from its stored codes gives, through the GPU's kernels, the CPU reference's values bit
//! for bit (embedding rows) and its products (GEMV); a `weft quantize` file of the tiny Qwen2
//! model in `q4_g32_k` is smaller than its `q4_g32_asym` twin by the scale bytes, and greedy ids
//! on the GPU and the CPU backend are the same; stored entropy-coded, the same weights load from
//! a smaller file, and a damaged stream is an error at load.

mod gpu_context;

use weft::cpu::{self, Arithmetic, CpuOptions};
use weft::format::ModelHeader;
use weft::gpu::DType;
use weft::loader::native::FileReader;
use weft::loader::read_header;
use weft::model::convert::{dequantize_model, entropy_code_model, quantize_model, QuantizePlan};
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

/// The tiny model quantized in `format` with no keep rules (`k` matrices entropy-coded with
/// `entropy`), written to a temporary file.
fn quantized_file(format: WeftQuant, entropy: bool) -> anyhow::Result<(std::path::PathBuf, u64)> {
    let reader = FileReader::open(format!("{DIR}/model.safetensors"))?;
    let header = pollster::block_on(read_header(&reader))?.header;
    assert!(matches!(header, ModelHeader::Safetensors(_)));
    let config = LlamaConfig::from_hf_json(&std::fs::read_to_string(format!("{DIR}/config.json"))?)?;
    let tokenizer = Tokenizer::from_hf_json(&std::fs::read_to_string(format!("{DIR}/tokenizer.json"))?, None)?;
    let mut plan = QuantizePlan::new(format, Vec::new());
    plan.entropy = entropy;
    let (writer, reports) = pollster::block_on(quantize_model(&reader, &header, &config, &tokenizer, &plan, &mut |_, _| {}))?;
    assert!(reports.iter().any(|r| r.format == format.name()));
    let coding = if entropy { "-rans" } else { "" };
    let path = std::env::temp_dir().join(format!("weft-qwen2-tiny-{}{coding}-{}.safetensors", format.name(), std::process::id()));
    let mut file = std::fs::File::create(&path)?;
    writer.write(&mut file)?;
    drop(file);
    let len = std::fs::metadata(&path)?.len();
    Ok((path, len))
}

#[test]
fn k_files_are_smaller_and_run_alike_on_gpu_and_cpu() -> anyhow::Result<()> {
    let ctx = ctx();
    let (k_path, k_len) = quantized_file(WeftQuant::new(4, 32, Scheme::K)?, false)?;
    let (asym_path, asym_len) = quantized_file(WeftQuant::new(4, 32, Scheme::Asym)?, false)?;
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

/// Greedy ids of the model in `path`: 12 on the GPU, 12 on the CPU backend.
fn greedy_ids(path: &std::path::Path) -> anyhow::Result<(Vec<u32>, Vec<u32>)> {
    let ctx = ctx();
    let engine = EngineOptions { max_seq: 32, max_batch: 8, ..Default::default() };
    let reader = FileReader::open(path)?;
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
    Ok((gpu_ids, cpu_ids))
}

#[test]
fn entropy_coded_k_files_are_smaller_and_load_the_same_weights() -> anyhow::Result<()> {
    for bits in [3, 4] {
        let format = WeftQuant::new(bits, 32, Scheme::K)?;
        let (packed, packed_len) = quantized_file(format, false)?;
        let (coded, coded_len) = quantized_file(format, true)?;
        // `weft pack` of the packed file writes what `quantize --entropy` wrote, byte for byte.
        let reader = FileReader::open(&packed)?;
        let header = pollster::block_on(read_header(&reader))?.header;
        let mut repacked = Vec::new();
        pollster::block_on(entropy_code_model(&reader, &header))?.write(&mut repacked)?;
        assert!(repacked == std::fs::read(&coded)?, "{}: pack differs from quantize --entropy", format.name());
        // Coding pays on the embedding (1,000 rows); the small matrices stay packed.
        assert!(coded_len < packed_len, "{}: coded {coded_len} bytes, packed {packed_len}", format.name());
        let coded_names: Vec<String> = match &pollster::block_on(read_header(&FileReader::open(&coded)?))?.header {
            ModelHeader::Safetensors(st) => st.metadata.iter().filter(|(_, v)| v.contains("rans")).map(|(k, _)| k.clone()).collect(),
            _ => unreachable!(),
        };
        println!("{}: entropy-coded {coded_names:?}", format.name());
        assert!(!coded_names.is_empty());
        // Every matrix decodes to the packed file's weights, bit for bit.
        let decode = |path: &std::path::Path| -> anyhow::Result<Vec<u8>> {
            let reader = FileReader::open(path)?;
            let header = pollster::block_on(read_header(&reader))?.header;
            let mut out = Vec::new();
            pollster::block_on(dequantize_model(&reader, &header, &mut |_, _| {}))?.write(&mut out)?;
            Ok(out)
        };
        assert!(decode(&packed)? == decode(&coded)?, "{}: decoded weights differ", format.name());
        // The memory-fit check counts what the GPU will hold, not the coded bytes.
        let needs = |path: &std::path::Path| -> anyhow::Result<u64> {
            let reader = FileReader::open(path)?;
            let header = pollster::block_on(read_header(&reader))?.header;
            let config = LlamaConfig::from_hf_json(&std::fs::read_to_string(format!("{DIR}/config.json"))?)?;
            let tensors = weft::model::fit::tensors_as_uploaded(&header)?;
            Ok(weft::model::fit::memory_needs(&config, &tensors, &EngineOptions::default(), &WeightOptions::default()).weights)
        };
        assert_eq!(needs(&coded)?, needs(&packed)?, "{}: weight bytes on the GPU", format.name());
        let (packed_ids, coded_ids) = (greedy_ids(&packed)?, greedy_ids(&coded)?);
        println!("{}: {coded_len} bytes entropy-coded against {packed_len}; greedy ids {:?}", format.name(), coded_ids.0);
        assert_eq!(coded_ids, packed_ids);
        assert_eq!(coded_ids.0, coded_ids.1, "GPU and CPU backend");

        // A damaged stream (a byte in the middle of a matrix's coded levels flipped) fails the
        // load with the decoder's error, on both backends.
        let reader = FileReader::open(&coded)?;
        let header = pollster::block_on(read_header(&reader))?.header;
        let first = coded_names[0].trim_start_matches("weft.q.").to_string() + ".weft_q";
        let levels = header.tensors().iter().find(|t| t.name == first).expect("a coded matrix");
        let mut bytes = std::fs::read(&coded)?;
        let at = ((levels.range.start + levels.range.end) / 2) as usize;
        bytes[at] ^= 0x5a;
        let damaged = coded.with_extension("damaged.safetensors");
        std::fs::write(&damaged, &bytes)?;
        let reader = FileReader::open(&damaged)?;
        let engine = EngineOptions { max_seq: 32, max_batch: 8, ..Default::default() };
        let gpu = pollster::block_on(model::open(ctx(), &reader, engine, WeightOptions::default(), &mut |_| {}));
        let err = gpu.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("entropy-coded stream"), "GPU load of a damaged file: {err:?}");
        let cpu = pollster::block_on(cpu::open(&reader, CpuOptions { max_seq: 32, max_batch: 8, ..Default::default() }));
        let err = cpu.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("entropy-coded stream"), "CPU load of a damaged file: {err:?}");
        for p in [packed, coded, damaged] {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}
