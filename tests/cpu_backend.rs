//! The CPU backend on SmolLM2: every checkpoint against the PyTorch fixtures (f32 arithmetic,
//! the same tolerance as the GPU's tests/activations.rs), greedy ids against the GPU backend's
//! (also past max_seq, over the sliding window) with every KV-cache format, f16 and q8 caches
//! against the f32 one, and the same logits on one thread or two. Hugging Face folders on the
//! CPU backend, as stored and quantized at load.

#[path = "common/activations.rs"]
mod fixtures;

use weft::cpu::{self, Arithmetic, CpuLlama, CpuOptions};
use weft::gpu::{BackendChoice, GpuContext};
use weft::loader::native::NativeSource;
use weft::model::fit::QuantizeChoice;
use weft::model::folder::Directory;
use weft::model::{self, EngineOptions, KvFormat, WeightOptions};
use weft::tokenizer::Tokenizer;

use fixtures::{check, input, F32_TOLERANCE, MODEL};

const PROMPT: &str = "The capital of France is";

fn open_cpu(options: CpuOptions) -> anyhow::Result<(CpuLlama, Tokenizer)> {
    let reader = NativeSource::open(MODEL)?;
    Ok(pollster::block_on(cpu::open(&reader, options))?)
}

fn f32_options(max_seq: usize) -> CpuOptions {
    CpuOptions { max_seq, max_batch: 16, arithmetic: Arithmetic::F32, ..Default::default() }
}

fn kv_options(max_seq: usize, kv: KvFormat) -> CpuOptions {
    CpuOptions { kv, ..f32_options(max_seq) }
}

fn greedy_cpu(llama: &mut CpuLlama, prompt: &[u32], n: usize) -> anyhow::Result<Vec<u32>> {
    let mut ids = vec![llama.prefill(prompt)?];
    while ids.len() < n {
        ids.push(llama.step()?);
    }
    Ok(ids)
}

#[test]
fn every_checkpoint_matches_transformers() -> anyhow::Result<()> {
    let input = input()?;
    let (mut llama, _) = open_cpu(f32_options(64))?;
    let got = llama.checkpoints(&input.ids)?;
    check(&input, &got, llama.config.vocab, F32_TOLERANCE)
}

/// Where 8-bit activations may pick another token than f32 ones: the f32 logits' top two
/// closer than this (a near-tie that rounding decides).
const NEAR_TIE: f32 = 0.25;

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

/// `n` greedy ids of the default prompt on the GPU backend with `kv` and `max_seq`, and the
/// prompt's ids.
fn greedy_gpu(ctx: &GpuContext, max_seq: usize, kv: KvFormat, n: usize) -> anyhow::Result<(Vec<u32>, Vec<u32>)> {
    let reader = NativeSource::open(MODEL)?;
    let engine = EngineOptions { max_seq, max_batch: 16, kv, ..Default::default() };
    let (mut gpu, tok) = pollster::block_on(model::open(ctx, &reader, engine, WeightOptions::default(), &mut |_| {}))?;
    let prompt = tok.encode(PROMPT, true);
    let mut ids = vec![pollster::block_on(gpu.prefill(ctx, &prompt))?];
    while ids.len() < n {
        ids.push(pollster::block_on(gpu.step(ctx))?);
    }
    Ok((ids, prompt))
}

/// Greedy ids of the default prompt on the GPU backend and on the CPU backend with f32
/// arithmetic: within the window (max_seq 64) and past it (max_seq 12, 4 sinks: the ring), the
/// ring with f16 and q8 caches on both too. With 8-bit activations, teacher-forced over the
/// GPU's ids, every choice agrees or is a near-tie of the f32 logits.
#[test]
fn greedy_ids_match_the_gpu_backend() -> anyhow::Result<()> {
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut gpu_ids = Vec::new();
    for kv in KvFormat::ALL {
        let runs: &[(usize, usize)] = if kv == KvFormat::F32 { &[(64, 20), (12, 20)] } else { &[(12, 20)] };
        for &(max_seq, n) in runs {
            let (want, prompt) = greedy_gpu(&ctx, max_seq, kv, n)?;
            let (mut llama, _) = open_cpu(kv_options(max_seq, kv))?;
            let got = greedy_cpu(&mut llama, &prompt, n)?;
            println!("{kv} cache, max_seq {max_seq}: {got:?}");
            assert_eq!(got, want, "max_seq {max_seq}, f32 arithmetic, {kv} cache");
            if kv == KvFormat::F32 {
                gpu_ids.push(want);
            }
        }
    }
    let (mut f32_cpu, tok) = open_cpu(f32_options(64))?;
    let (mut q8_cpu, _) = open_cpu(CpuOptions { arithmetic: Arithmetic::Q8, ..f32_options(64) })?;
    let prompt = tok.encode(PROMPT, true);
    let want = &gpu_ids[0];
    let seq: Vec<u32> = prompt.iter().chain(&want[..want.len() - 1]).copied().collect();
    let (exact, q8) = (f32_cpu.logits(&seq)?, q8_cpu.logits(&seq)?);
    let vocab = f32_cpu.config.vocab;
    for (i, &id) in want.iter().enumerate() {
        let row = (prompt.len() - 1 + i) * vocab;
        let (e, q) = (&exact[row..row + vocab], &q8[row..row + vocab]);
        let mut sorted = e.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let gap = sorted[0] - sorted[1];
        println!("token {i}: gpu {id}, q8 {}, f32 top-2 gap {gap:.4}", argmax(q));
        assert!(argmax(q) == id as usize || gap < NEAR_TIE, "token {i}: q8 picks {} over {id} with an f32 gap of {gap}", argmax(q));
    }
    Ok(())
}

/// Each thread computes whole rows in the same order, so the thread count changes nothing.
#[test]
fn threads_change_nothing() -> anyhow::Result<()> {
    let ids = [1u32, 504, 3458, 282, 4649, 314];
    let mut runs = Vec::new();
    for threads in [1, 2, 3] {
        let (mut llama, _) = open_cpu(CpuOptions { threads, ..CpuOptions { max_seq: 32, max_batch: 16, ..Default::default() } })?;
        let logits = llama.logits(&ids)?;
        runs.push(logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    assert!(runs[0] == runs[1] && runs[1] == runs[2]);
    Ok(())
}

/// The memory a model needs on the CPU is known from its header, and a model that cannot fit
/// the address space (4 GiB in wasm32) is refused by name: SmolLM2's KV cache for 2^20
/// positions alone is 48 GB.
#[test]
fn a_model_beyond_the_address_space_is_refused_before_loading() -> anyhow::Result<()> {
    let reader = NativeSource::open(MODEL)?;
    let header = pollster::block_on(weft::loader::read_header(&reader))?.header;
    let (llama, _) = open_cpu(f32_options(64))?;
    let config = &llama.config;
    let needed = cpu::memory_needed(&header, config, 64, KvFormat::F32);
    // What the loaded engine holds (weights, KV cache, activations) is within the header's
    // bound but for the activations.
    assert!(needed >= llama.weights.bytes(), "{needed} < {}", llama.weights.bytes());
    assert!(needed <= llama.bytes(), "{needed} > {}", llama.bytes());
    let wasm32 = 1u64 << 32;
    cpu::fits_address_space(needed, wasm32)?;
    let huge = cpu::memory_needed(&header, config, 1 << 20, KvFormat::F32);
    match cpu::fits_address_space(huge, wasm32) {
        Err(e @ weft::Error::AddressSpace { .. }) => assert!(e.to_string().contains("4 GiB"), "{e}"),
        other => panic!("expected AddressSpace, got {other:?}"),
    }
    Ok(())
}

/// The engine holds, reports and plans for the bytes of its cache's format: the README's table
/// per token (SmolLM2: 30 layers, 3 KV heads of 64 values), times max_seq.
#[test]
fn memory_accounting_follows_the_kv_format() -> anyhow::Result<()> {
    let reader = NativeSource::open(MODEL)?;
    let header = pollster::block_on(weft::loader::read_header(&reader))?.header;
    let mut totals = Vec::new();
    for (kv, per_token) in [(KvFormat::F32, 46_080), (KvFormat::F16, 23_040), (KvFormat::Q8, 12_240)] {
        let (llama, _) = open_cpu(kv_options(64, kv))?;
        assert_eq!(llama.kv_bytes_per_token(), per_token, "{kv}");
        assert_eq!(llama.kv_bytes(), 64 * per_token, "{kv}");
        let needed = cpu::memory_needed(&header, &llama.config, 64, kv);
        assert_eq!(needed, cpu::memory_needed(&header, &llama.config, 64, KvFormat::F32) - 64 * (46_080 - per_token));
        totals.push(llama.bytes());
    }
    assert_eq!(totals[0] - totals[1], 64 * (46_080 - 23_040));
    assert_eq!(totals[0] - totals[2], 64 * (46_080 - 12_240));
    Ok(())
}

/// Greedy ids with f16 and q8 caches against the f32 cache, with each arithmetic, teacher-forced
/// over the f32 cache's ids: every choice is the same, or a near-tie of the f32 cache's logits.
/// With f32 arithmetic all 20 ids are the same for both formats; with 8-bit activations both
/// part from the f32 cache at token 5 (2988 or 1797 after "The capital of France is.\n\nThe"),
/// where the f32 cache's top two logits are 0.23 apart (under `NEAR_TIE`).
#[test]
fn f16_and_q8_caches_follow_the_f32_cache() -> anyhow::Result<()> {
    for arithmetic in [Arithmetic::F32, Arithmetic::Q8] {
        let options = |kv| CpuOptions { arithmetic, ..kv_options(64, kv) };
        let (mut f32_cpu, tok) = open_cpu(options(KvFormat::F32))?;
        let prompt = tok.encode(PROMPT, true);
        let want = greedy_cpu(&mut f32_cpu, &prompt, 20)?;
        let seq: Vec<u32> = prompt.iter().chain(&want[..want.len() - 1]).copied().collect();
        f32_cpu.reset();
        let exact = f32_cpu.logits(&seq)?;
        let vocab = f32_cpu.config.vocab;
        for kv in [KvFormat::F16, KvFormat::Q8] {
            let (mut llama, _) = open_cpu(options(kv))?;
            let greedy = greedy_cpu(&mut llama, &prompt, 20)?;
            let same = greedy.iter().zip(&want).take_while(|(a, b)| a == b).count();
            println!("{arithmetic:?} arithmetic, {kv}: {greedy:?}, the first {same} of 20 equal to the f32 cache's");
            llama.reset();
            let logits = llama.logits(&seq)?;
            for (i, &id) in want.iter().enumerate() {
                let row = (prompt.len() - 1 + i) * vocab;
                let mut sorted = exact[row..row + vocab].to_vec();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let gap = sorted[0] - sorted[1];
                let got = argmax(&logits[row..row + vocab]);
                if got != id as usize {
                    println!("  token {i}: {got} over {id}, f32 cache's top-2 gap {gap:.4}");
                }
                assert!(got == id as usize || gap < NEAR_TIE, "{kv} token {i}: {got} over {id} with an f32 gap of {gap}");
            }
            let max_err = logits.iter().zip(&exact).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            println!("  logits max |diff| {max_err:.3e} against the f32 cache over {} positions", seq.len());
        }
    }
    Ok(())
}

/// The CPU stores rows with the format's reference (`KvFormat::encode_row`): layer 0's K and V
/// depend on no earlier attention, so its f16 and q8 caches hold exactly the f32 cache's
/// values encoded, in every slot, past max_seq too (a ring of 12 over 20 positions).
#[test]
fn stored_rows_are_the_reference_encoding() -> anyhow::Result<()> {
    let ids: Vec<u32> = (0..20).map(|i| 1 + 37 * i).collect();
    let run = |kv: KvFormat| -> anyhow::Result<(Vec<u32>, Vec<u32>, usize)> {
        let (mut llama, _) = open_cpu(kv_options(12, kv))?;
        llama.logits(&ids)?;
        let (k, v) = llama.kv_cache(0);
        Ok((k.to_vec(), v.to_vec(), llama.config.head_dim))
    };
    let (k32, v32, hd) = run(KvFormat::F32)?;
    let values = |words: &[u32]| KvFormat::F32.decode_cache(words, hd);
    for kv in [KvFormat::F16, KvFormat::Q8] {
        let (k, v, _) = run(kv)?;
        assert_eq!(k, kv.encode_cache(&values(&k32), hd), "{kv} K cache of layer 0");
        assert_eq!(v, kv.encode_cache(&values(&v32), hd), "{kv} V cache of layer 0");
    }
    Ok(())
}

/// A prompt extending the cached sequence runs only its new tokens (session-prefix reuse):
/// with each cache format, truncating to a shared prefix and feeding the rest gives the same
/// ids as the whole prompt from an empty cache.
#[test]
fn a_shared_prefix_is_reused_in_every_format() -> anyhow::Result<()> {
    for kv in KvFormat::ALL {
        let (mut llama, tok) = open_cpu(kv_options(64, kv))?;
        let prompt = tok.encode(PROMPT, true);
        let want = greedy_cpu(&mut llama, &prompt, 8)?;
        let keep = prompt.len() - 2;
        assert!(llama.truncate(keep));
        assert_eq!(llama.position(), keep);
        let got = greedy_cpu(&mut llama, &prompt[keep..], 8)?;
        assert_eq!(got, want, "{kv}");
    }
    Ok(())
}

/// The tiny architecture fixtures of tests/architectures.rs, each a Hugging Face folder
/// (config.json, tokenizer.json, F16 model.safetensors).
const FOLDERS: [&str; 4] =
    ["tests/fixtures/llama3-tiny", "tests/fixtures/qwen3-tiny", "tests/fixtures/gemma2-tiny", "tests/fixtures/phi3-tiny"];

#[derive(serde::Deserialize)]
struct Reference {
    prompt_ids: Vec<u32>,
    greedy: Vec<u32>,
}

fn folder_options() -> CpuOptions {
    CpuOptions { max_seq: 64, max_batch: 32, arithmetic: Arithmetic::F32, ..Default::default() }
}

/// A folder on the CPU backend, float matrices as `quantize` asks.
fn open_cpu_folder(dir: &str, quantize: QuantizeChoice) -> anyhow::Result<cpu::CpuLoaded> {
    let folder = Directory(dir.into());
    Ok(pollster::block_on(cpu::open_folder(&folder, folder_options(), &quantize.weight_options(None)))?.0)
}

/// Folders on the CPU backend: as stored, the greedy ids of transformers' `generate` (the
/// fixtures' reference.json); quantized at load to q8 (q8_g32_asym, the embedding and head kept
/// at 8 bits by the default rules), the same ids as the GPU backend loading the same folder
/// with the same quantization, from packed bytes with the same digests.
#[test]
fn hf_folders_run_on_the_cpu_as_stored_and_quantized() -> anyhow::Result<()> {
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let q8 = QuantizeChoice::parse("q8").expect("q8");
    for dir in FOLDERS {
        let r: Reference = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/reference.json"))?)?;
        let mut stored = open_cpu_folder(dir, QuantizeChoice::None)?;
        assert!(stored.quantized.is_empty());
        let ids = greedy_cpu(&mut stored.llama, &r.prompt_ids, r.greedy.len())?;
        println!("{dir} as stored on the CPU: {ids:?}");
        assert_eq!(ids, r.greedy, "{dir} as stored");

        let mut quantized = open_cpu_folder(dir, q8)?;
        let cpu_ids = greedy_cpu(&mut quantized.llama, &r.prompt_ids, r.greedy.len())?;
        let engine = EngineOptions { max_seq: 64, max_batch: 32, ..Default::default() };
        let folder = Directory(dir.into());
        // On a hardware adapter the GPU kernel quantizes (read back for its digests), on a
        // software one the CPU reference.
        let weights = WeightOptions { digests: true, ..q8.weight_options(None) };
        let (mut gpu, _, _) = pollster::block_on(model::open_folder(&ctx, &folder, engine, weights, &mut |_| {}))?;
        let mut gpu_ids = vec![pollster::block_on(gpu.prefill(&ctx, &r.prompt_ids))?];
        while gpu_ids.len() < r.greedy.len() {
            gpu_ids.push(pollster::block_on(gpu.step(&ctx))?);
        }
        println!("{dir} q8 on the CPU: {cpu_ids:?}, on the GPU: {gpu_ids:?}");
        assert_eq!(cpu_ids, gpu_ids, "{dir} quantized to q8");
        // Every matrix quantized, the same format and bytes on both backends (the GPU loads
        // in file order, the CPU the embedding after the layers).
        let listed = |q: &[weft::model::llama::Quantized]| -> Vec<(String, String, Option<u64>)> {
            let mut all: Vec<_> = q.iter().map(|q| (q.name.clone(), q.format.name(), q.digest)).collect();
            all.sort();
            all
        };
        assert_eq!(listed(&quantized.quantized), listed(&gpu.weights.quantized), "{dir}");
        assert!(quantized.quantized.iter().all(|q| q.format.name() == "q8_g32_asym" && q.digest.is_some()));
        // The head is tied or an untied matrix; either way 7 per layer plus the embedding.
        let matrices = 7 * stored.llama.config.n_layers + 1 + gpu.weights.output.is_some() as usize;
        assert_eq!(quantized.quantized.len(), matrices, "{dir}");
        assert!(quantized.llama.weights.bytes() < stored.llama.weights.bytes());
    }
    Ok(())
}

/// `quantize: 'auto'` on the CPU backend: without a budget every matrix at 8 bits, each as
/// planned; a budget that no format fits is ModelTooLarge, before any weight is read (budgets
/// between, on a model large enough for whole MB to matter: tests/cli_quantize_auto.rs).
#[test]
fn auto_quantization_on_the_cpu_follows_the_budget() -> anyhow::Result<()> {
    let dir = FOLDERS[0];
    let open = |budget_mb: Option<u64>| {
        let weights = QuantizeChoice::Auto.weight_options(budget_mb);
        pollster::block_on(cpu::open_folder(&Directory(dir.into()), CpuOptions { max_seq: 16, ..folder_options() }, &weights))
    };
    let roomy = open(None)?.0;
    let plan = roomy.plan.as_ref().expect("a plan");
    assert!(plan.assignments.iter().all(|a| a.format.bits == 8));
    assert_eq!(roomy.quantized.len(), plan.assignments.len());
    match open(Some(0)) {
        Err(weft::Error::ModelTooLarge { needed, available, .. }) => assert!(needed > available && available == 0),
        Err(e) => panic!("expected ModelTooLarge, got {e}"),
        Ok(_) => panic!("expected ModelTooLarge, got a model"),
    }
    Ok(())
}

/// A folder whose files record the largest single read made of them past their start (reads
/// from byte 0 are a header's, or a small file's whole).
struct Recording(Directory, std::rc::Rc<std::cell::Cell<u64>>);

struct RecordingReader(weft::loader::native::FileReader, std::rc::Rc<std::cell::Cell<u64>>);

impl weft::loader::RangeReader for RecordingReader {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    async fn read_range(&self, range: std::ops::Range<u64>) -> weft::Result<Vec<u8>> {
        if range.start > 0 {
            self.1.set(self.1.get().max(range.end - range.start));
        }
        self.0.read_range(range).await
    }
}

impl model::folder::FolderSource for Recording {
    type Reader = RecordingReader;
    fn name(&self) -> &str {
        self.0.name()
    }
    async fn open(&self, name: &str) -> weft::Result<Option<RecordingReader>> {
        Ok(self.0.open(name).await?.map(|r| RecordingReader(r, self.1.clone())))
    }
}

/// The CPU loader reads a folder's weights a tensor at a time, quantizing each as it arrives:
/// past the header, no read is larger than the largest tensor, so a load never holds more than
/// one stored matrix beside what it keeps.
#[test]
fn a_folder_is_read_one_tensor_at_a_time() -> anyhow::Result<()> {
    use weft::loader::RangeReader;
    use model::folder::FolderSource;
    let dir = FOLDERS[0];
    let largest = std::rc::Rc::new(std::cell::Cell::new(0));
    let source = Recording(Directory(dir.into()), largest.clone());
    let weights = QuantizeChoice::parse("q4").expect("q4").weight_options(None);
    let (loaded, shards) = pollster::block_on(cpu::open_folder(&source, folder_options(), &weights))?;
    let header = pollster::block_on(weft::loader::read_header(&pollster::block_on(source.0.open("model.safetensors"))?.expect("weights")))?.header;
    let tensor = header.tensors().iter().map(|t| t.byte_len()).max().unwrap_or(0);
    println!("largest read past the header {} bytes; largest tensor {tensor}, weights file {}", largest.get(), shards.len());
    assert!(largest.get() > 0 && largest.get() <= tensor, "a read of {} bytes", largest.get());
    assert_eq!(loaded.quantized.len(), 16);
    Ok(())
}
