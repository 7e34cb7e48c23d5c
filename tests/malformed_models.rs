//! Malformed models: every dimension field of a valid GGUF and of a valid config.json set, one
//! at a time, to 0, 1, 2^31, 2^32 - 1 and 2^63. Each must load or give a typed error before
//! anything is sized from it: no panic, no abort, and this thread's live heap never grows by
//! more than [`PEAK_ALLOWANCE`] while it is tried.

mod common;
mod gpu_context;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::Range;

use common::{ty, GgufWriter};
use weft::format::GgmlType;
use weft::loader::native::FileReader;
use weft::loader::RangeReader;
use weft::model::{self, EngineOptions, WeightOptions};
use weft::Error;

/// Tracks this thread's live heap bytes and their peak, so each case measures its own growth.
struct PeakAllocator;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for PeakAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|live| {
            let now = live.get().saturating_add(layout.size());
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(layout.size())));
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: PeakAllocator = PeakAllocator;

/// Most a single malformed model may add to the live heap while it is tried.
const PEAK_ALLOWANCE: usize = 64 << 20;

/// Runs `f`, returning its result and the growth of this thread's peak live heap.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(Cell::get).saturating_sub(base))
}

const VALUES: [u64; 5] = [0, 1, 1 << 31, (1 << 32) - 1, 1 << 63];

/// A file in memory that remembers where its last read started.
struct MemoryReader(Vec<u8>, Cell<u64>);

impl MemoryReader {
    fn new(bytes: Vec<u8>) -> Self {
        Self(bytes, Cell::new(0))
    }
}

impl RangeReader for MemoryReader {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn name(&self) -> &str {
        "memory"
    }

    async fn read_range(&self, range: Range<u64>) -> weft::Result<Vec<u8>> {
        weft::loader::check_range("memory", &range, self.len())?;
        self.1.set(range.start);
        Ok(self.0[range.start as usize..range.end as usize].to_vec())
    }
}

/// A tiny engine: the point is the load, not the generation.
fn engine() -> EngineOptions {
    EngineOptions { max_seq: 16, max_batch: 4, tune: false, ..Default::default() }
}

/// The shape of the GGUF model: llama, 2 layers, dim 32, 2 heads of 16, 1 KV head, ffn 48.
const DIM: u64 = 32;
const FFN: u64 = 48;
const HEAD_DIM: u64 = 16;
const KV_DIM: u64 = 16;
const LAYERS: u64 = 2;

/// The dimension keys of the GGUF model with their valid values.
const GGUF_DIMS: [(&str, u64); 9] = [
    ("llama.block_count", LAYERS),
    ("llama.embedding_length", DIM),
    ("llama.attention.head_count", 2),
    ("llama.attention.head_count_kv", 1),
    ("llama.attention.key_length", HEAD_DIM),
    ("llama.feed_forward_length", FFN),
    ("llama.vocab_size", 260),
    ("llama.context_length", 128),
    ("llama.rope.dimension_count", HEAD_DIM),
];

/// A complete byte-level llama GGUF (F32 weights, a 260-token vocabulary) with `dims` as its
/// dimension metadata; tensors always have the valid shapes. A value past u32 is written as u64.
fn gguf(dims: &[(&str, u64)]) -> Vec<u8> {
    let vocab = 260u64;
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        ("token_embd.weight".into(), vec![DIM, vocab]),
        ("output_norm.weight".into(), vec![DIM]),
    ];
    for i in 0..LAYERS {
        for (name, dims) in [
            ("attn_norm.weight", vec![DIM]),
            ("attn_q.weight", vec![DIM, DIM]),
            ("attn_k.weight", vec![DIM, KV_DIM]),
            ("attn_v.weight", vec![DIM, KV_DIM]),
            ("attn_output.weight", vec![DIM, DIM]),
            ("ffn_norm.weight", vec![DIM]),
            ("ffn_gate.weight", vec![DIM, FFN]),
            ("ffn_up.weight", vec![DIM, FFN]),
            ("ffn_down.weight", vec![FFN, DIM]),
        ] {
            tensors.push((format!("blk.{i}.{name}"), dims));
        }
    }
    // GPT-2's byte characters for all 256 bytes, then 4 more tokens.
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).collect();
    tokens.extend(["<|im_start|>", "<|im_end|>", "ab", "abc"].map(String::from));
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let entries = 6 + dims.len() as u64;
    let mut w = GgufWriter::new(3, tensors.len() as u64, entries);
    w.kv_str("general.architecture", "llama");
    w.key("llama.attention.layer_norm_rms_epsilon", ty::F32).raw(&1e-5f32.to_le_bytes());
    w.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "smollm");
    w.kv_str_array("tokenizer.ggml.tokens", &refs);
    w.kv_u32("general.alignment", 32);
    for &(key, value) in dims {
        match u32::try_from(value) {
            Ok(v) => w.kv_u32(key, v),
            Err(_) => w.key(key, ty::U64).u64(value),
        };
    }
    let mut offset = 0u64;
    for (name, dims) in &tensors {
        w.tensor(name, dims, GgmlType::F32.id(), offset);
        offset += (dims.iter().product::<u64>() * 4).div_ceil(32) * 32;
    }
    let mut file = w.finish(32, offset as usize);
    // Small weights rather than the writer's filler bytes.
    let data = file.len() - offset as usize;
    for (i, chunk) in file[data..].chunks_exact_mut(4).enumerate() {
        chunk.copy_from_slice(&(((i % 7) as f32 - 3.0) * 0.01).to_le_bytes());
    }
    file
}

/// GPT-2's printable stand-in for byte `b`.
fn byte_char(b: u8) -> String {
    let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    if printable {
        return char::from(b).to_string();
    }
    let index = (0..b).filter(|&x| !((b'!'..=b'~').contains(&x) || (0xA1..=0xAC).contains(&x) || x >= 0xAE)).count();
    char::from_u32(256 + index as u32).unwrap().to_string()
}

fn open_gguf(file: Vec<u8>) -> weft::Result<()> {
    let reader = MemoryReader::new(file);
    pollster::block_on(model::open(gpu_context::ctx(), &reader, engine(), WeightOptions::default(), &mut |_| {}))
        .map(drop)
}

/// The memory check runs on the header alone: a budget the model cannot fit is refused
/// before a byte of tensor data is read.
#[test]
fn a_budget_too_small_is_refused_before_any_weight_is_read() {
    let file = gguf(&GGUF_DIMS);
    let data_start = weft::format::detect_and_parse(&file, Some(file.len() as u64)).unwrap().data_start();
    let reader = MemoryReader::new(file);
    let weights = WeightOptions { memory_budget_mb: Some(0), ..Default::default() };
    let result = pollster::block_on(model::open(gpu_context::ctx(), &reader, engine(), weights, &mut |_| {}));
    match result {
        Err(Error::ModelTooLarge { needed, available: 0, .. }) => assert!(needed > 100_000, "{needed}"),
        other => panic!("expected ModelTooLarge, got {:?}", other.err()),
    }
    // Header reads start inside the header; a weight read would start at or past its end.
    assert!(reader.1.get() < data_start, "a read started at byte {}, past the header's end {data_start}", reader.1.get());
    let roomy = WeightOptions { memory_budget_mb: Some(100), ..Default::default() };
    pollster::block_on(model::open(gpu_context::ctx(), &MemoryReader::new(gguf(&GGUF_DIMS)), engine(), roomy, &mut |_| {}))
        .expect("fits in 100 MB");
}

/// Errors a user can act on by kind: any of these is a correct answer to a bad file.
fn is_typed(e: &Error) -> bool {
    matches!(
        e,
        Error::BadConfig { .. }
            | Error::UnsupportedModel { .. }
            | Error::MissingTensor { .. }
            | Error::TensorShape { .. }
            | Error::ModelTooLarge { .. }
            | Error::Format(_)
    )
}

#[test]
fn the_valid_gguf_loads() {
    open_gguf(gguf(&GGUF_DIMS)).expect("the unmodified model loads");
}

/// Issue 18, item 1: a few-KB GGUF whose block_count is u32::MAX aborted the process while
/// vectors were sized from it.
#[test]
fn block_count_of_u32_max_is_a_typed_error_not_an_abort() {
    let mut dims = GGUF_DIMS;
    dims[0].1 = u32::MAX as u64;
    let (result, peak) = measured(|| open_gguf(gguf(&dims)));
    match result {
        Err(Error::BadConfig { field, .. }) => assert!(field.starts_with("n_layers"), "{field}"),
        other => panic!("expected BadConfig, got {other:?}"),
    }
    assert!(peak < PEAK_ALLOWANCE, "peak {peak}");
}

#[test]
fn every_gguf_dimension_at_every_extreme() {
    let mut loaded = Vec::new();
    for i in 0..GGUF_DIMS.len() {
        for value in VALUES {
            let mut dims = GGUF_DIMS;
            dims[i].1 = value;
            let case = format!("{} = {value}", dims[i].0);
            let (result, peak) = measured(|| open_gguf(gguf(&dims)));
            assert!(peak < PEAK_ALLOWANCE, "{case}: live heap grew by {peak} bytes");
            match result {
                Ok(()) => loaded.push(case),
                Err(e) => {
                    assert!(is_typed(&e), "{case}: untyped error {e:?}");
                    eprintln!("{case}: {e}");
                }
            }
        }
    }
    // One KV head is the model's own value, and a context of 1 a (useless) valid model;
    // nothing else may load.
    assert_eq!(loaded, ["llama.attention.head_count_kv = 1", "llama.context_length = 1"]);
}

const QWEN2: &str = "tests/fixtures/qwen2-tiny";

/// The config.json keys of the tiny Qwen2 fixture that are dimensions (head_dim is added: the
/// fixture leaves it implicit).
const JSON_DIMS: [&str; 8] = [
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "head_dim",
];

fn open_qwen2(config: &str) -> weft::Result<()> {
    let reader = FileReader::open(format!("{QWEN2}/model.safetensors"))?;
    let tokenizer = std::fs::read_to_string(format!("{QWEN2}/tokenizer.json")).expect("fixture");
    pollster::block_on(model::open_safetensors(
        gpu_context::ctx(),
        &reader,
        config,
        &tokenizer,
        None,
        engine(),
        WeightOptions::default(),
        &mut |_| {},
    ))
    .map(drop)
}

#[test]
fn every_config_json_dimension_at_every_extreme() -> anyhow::Result<()> {
    let base: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(format!("{QWEN2}/config.json"))?)?;
    open_qwen2(&base.to_string())?;
    let mut loaded = Vec::new();
    for key in JSON_DIMS {
        for value in VALUES {
            let mut config = base.clone();
            config[key] = value.into();
            let case = format!("{key} = {value}");
            let (result, peak) = measured(|| open_qwen2(&config.to_string()));
            assert!(peak < PEAK_ALLOWANCE, "{case}: live heap grew by {peak} bytes");
            match result {
                Ok(()) => loaded.push(case),
                Err(e) => {
                    assert!(is_typed(&e), "{case}: untyped error {e:?}");
                    eprintln!("{case}: {e}");
                }
            }
        }
    }
    assert_eq!(loaded, ["max_position_embeddings = 1"]);
    Ok(())
}

#[test]
fn the_peak_counter_sees_allocations() {
    let ((), peak) = measured(|| drop(vec![1u8; 1 << 20]));
    assert!(peak >= 1 << 20);
}
