//! `loadModel` and the `Model` class: loading through the browser's range reader, step-wise
//! generation that the JavaScript async iterator drives, chat prompts, debug checkpoints, stats.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Promise, Reflect};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use super::backend::{self, Engine, Target};
use super::error::{from_js_error, js_error, to_js};
use super::options::{self, LoadOptions};
use crate::cpu::{self, CpuOptions};
use crate::gpu::GpuContext;
use crate::loader::web::{FetchStats, WebFolder, WebOptions, WebReader};
use crate::loader::LoadError;
use crate::model::{self, EngineOptions, Llama, Progress, WeightOptions};
use crate::ops::sample::SampleParams;
use crate::tokenizer::chat::Message;
use crate::tokenizer::{TextStream, Tokenizer};
use crate::Error;

#[cfg(feature = "web-profile")]
mod profile;

fn now_ms() -> f64 {
    crate::model::llama::web_time_now()
}

/// Bytes of this module's linear memory (it only grows, so the last value is the peak).
pub fn wasm_memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .map(|m| m.buffer().unchecked_into::<js_sys::ArrayBuffer>().byte_length() as f64)
        .unwrap_or(0.0)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProgressEvent {
    #[serde(flatten)]
    progress: Progress,
    wasm_memory_bytes: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct LoadStats {
    url: String,
    file_bytes: u64,
    load_ms: f64,
    #[serde(flatten)]
    fetch: FetchStats,
    /// The file changed on the server during the first attempt, and was loaded again.
    reloaded_after_change: bool,
    /// Largest linear memory seen during the load.
    peak_wasm_memory_bytes: f64,
    /// The matrices quantized while loading (`quantize`), in load order.
    quantized: Vec<QuantizedTensor>,
    /// `quantize: 'auto'`: the budget, what it was spent on, and each matrix's format.
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<crate::model::fit::AutoPlan>,
}

/// One matrix quantized while loading: its name in the file, its weft format, and the FNV-1a
/// 64 of its packed words, scales and zero points (16 hex digits), as they would lie in a weft
/// file that `weft quantize` writes.
#[derive(Clone, Debug, Serialize)]
struct QuantizedTensor {
    name: String,
    format: String,
    /// Only where the CPU quantized the matrix, or `quantizeDigests` asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationStats {
    prompt_tokens: usize,
    /// Tokens the prompt pass ran: the prompt less the prefix already in the KV cache.
    prefill_tokens: usize,
    time_to_first_token_ms: f64,
    generated_tokens: usize,
    decode_ms: f64,
}

struct Session {
    engine: Engine,
    tok: Tokenizer,
    /// The tokens in the KV cache, in order: a prompt that starts with some of them runs only
    /// the rest.
    cached: Vec<u32>,
    /// The last token sampled, not yet in the cache (the next step feeds it).
    last: u32,
    stream: TextStream,
    load: LoadStats,
    gen: GenerationStats,
}

/// What `begin` runs: text to encode, or token ids.
enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

/// One generated token: its id, the text it completes, and whether it ended the sequence (a
/// full context does not: generation goes on over the sliding window).
#[derive(Serialize)]
struct Chunk {
    token: u32,
    text: String,
    done: bool,
}

/// A loaded language model, on the GPU or the CPU.
#[wasm_bindgen]
pub struct Model {
    inner: Rc<RefCell<Session>>,
}

/// Loads a model from `url` layer by layer (see js/index.d.ts for the options). A file that
/// changes on the server mid-load is loaded again from the start, once: every byte of the model
/// then comes from the new version.
#[wasm_bindgen(js_name = loadModel)]
pub async fn load_model(url: String, options: JsValue) -> Result<Model, JsValue> {
    let opts = LoadOptions::parse(&options)?;
    let started = now_ms();
    let target = backend::resolve(opts.backend.unwrap_or_else(backend::chosen)).await.map_err(|e| to_js(&e))?;
    // The 8-bit GEMVs use WGSL's dot4I8Packed, a language feature a browser may lack; asked for
    // there, the load stops before anything is fetched rather than failing to compile later.
    if opts.int8_activations && matches!(target, Target::Gpu(_)) && !super::device::wgsl_has(DP4_FEATURE) {
        return Err(js_error(
            "UNSUPPORTED",
            &format!("this browser's WGSL lacks '{DP4_FEATURE}', which activations: 'int8' needs; use activations: 'f32'"),
        ));
    }
    let mut changed = 0;
    let (engine, tok, fetched, peak, (quantized, plan)) = loop {
        let loaded = match &target {
            Target::Gpu(ctx) => load_once(ctx, &url, &opts).await.map(|(llama, tok, r, p)| {
                let quantized = (listed(&llama.weights.quantized), llama.weights.plan.clone());
                (Engine::Gpu { ctx: ctx.clone(), llama: Box::new(llama) }, tok, r, p, quantized)
            }),
            Target::Cpu => load_cpu(&url, &opts).await,
        };
        match loaded {
            Err(Error::Load(LoadError::Changed { .. })) if changed == 0 => changed += 1,
            Err(e) => return Err(to_js(&e)),
            Ok(loaded) => break loaded,
        }
    };
    engine.check().map_err(|e| to_js(&e))?;
    let load = LoadStats {
        url,
        file_bytes: fetched.bytes,
        load_ms: now_ms() - started,
        fetch: fetched.stats,
        reloaded_after_change: changed > 0,
        peak_wasm_memory_bytes: peak.max(wasm_memory_bytes()),
        quantized,
        plan,
    };
    let session = Session {
        engine,
        tok,
        cached: Vec::new(),
        last: 0,
        stream: TextStream::default(),
        load,
        gen: GenerationStats::default(),
    };
    Ok(Model { inner: Rc::new(RefCell::new(session)) })
}

/// The matrices a load quantized, as `stats().load.quantized` lists them.
fn listed(quantized: &[crate::model::llama::Quantized]) -> Vec<QuantizedTensor> {
    quantized
        .iter()
        .map(|q| QuantizedTensor { name: q.name.clone(), format: q.format.name(), digest: q.digest.map(|d| format!("{d:016x}")) })
        .collect()
}

/// How a load turns stored weights into the engine's: the budget, and float matrices quantized
/// as they arrive under `weft quantize`'s default keep rules (on the GPU of a hardware adapter
/// unless `quantizeOn` says otherwise; always by the CPU reference on the CPU backend).
fn weight_options(opts: &LoadOptions) -> WeightOptions {
    let weights = opts.quantize.weight_options(opts.memory_budget_mb);
    WeightOptions { quantize_on: opts.quantize_on, digests: opts.quantize_digests, ..weights }
}

/// The bytes of the model's weight files and what reading them cost.
struct Fetched {
    bytes: u64,
    stats: FetchStats,
}

impl Fetched {
    fn of<'a>(readers: impl IntoIterator<Item = &'a WebReader>) -> Self {
        let mut out = Fetched { bytes: 0, stats: FetchStats::default() };
        for r in readers {
            out.bytes += crate::loader::RangeReader::len(r);
            out.stats.add(&r.stats());
        }
        out
    }
}

/// A Hugging Face model folder rather than a model file: a URL whose path ends in `/`
/// (`https://huggingface.co/ORG/NAME/resolve/main/`, `/models/SmolLM2-135M-Instruct/`).
fn is_folder(url: &str) -> bool {
    WebFolder::parse(url, WebOptions::default()).is_some()
}

/// Room in the browser's storage for what the cache will keep of `reader`'s file.
async fn ensure_room(reader: &WebReader) -> crate::Result<()> {
    match reader.cache_validator() {
        Some(validator) => {
            super::storage::ensure_room(crate::loader::RangeReader::name(reader), validator, crate::loader::RangeReader::len(reader)).await
        }
        None => Ok(()),
    }
}

/// One load from a fresh HEAD: the model, its tokenizer, what was fetched and the peak linear
/// memory seen.
async fn load_once(
    ctx: &GpuContext,
    url: &str,
    opts: &LoadOptions,
) -> crate::Result<(Llama, Tokenizer, Fetched, f64)> {
    let mut peak = wasm_memory_bytes();
    let mut report = |p: Progress| {
        let memory = wasm_memory_bytes();
        peak = peak.max(memory);
        if let Some(f) = &opts.on_progress {
            let event = ProgressEvent { progress: p, wasm_memory_bytes: memory };
            if let Ok(value) = to_value(&event) {
                let _ = f.call1(&JsValue::NULL, &value);
            }
        }
    };
    let engine = EngineOptions {
        max_seq: opts.max_context,
        kv: opts.kv,
        int8_activations: opts.int8_activations,
        // Under init's `kernels: 'gpu'` the adapter is a software one: timing launch shapes on it
        // would take minutes and choose nothing a GPU would.
        tune: !super::device::options().gpu_paths,
        ..EngineOptions::default()
    };
    let watch = ctx.watch_out_of_memory();
    // The budget is checked against weights + KV cache + activations after the header, before
    // any weight is fetched: a model over it is GPU_OOM (needed, available) with nothing spent.
    let weights = weight_options(opts);
    let (opened, fetched) = if is_folder(url) {
        let folder = WebFolder::parse(url, opts.web.clone()).expect("a folder URL");
        match model::open_folder(ctx, &folder, engine, weights, &mut report).await {
            Ok((llama, tok, shards)) => (Ok((llama, tok)), Some(Fetched::of(shards.readers()))),
            Err(e) => (Err(e), None),
        }
    } else {
        let reader = WebReader::open(url, opts.web.clone()).await?;
        ensure_room(&reader).await?;
        let opened = model::open(ctx, &reader, engine, weights, &mut report).await;
        (opened, Some(Fetched::of([&reader])))
    };
    let oom = watch.pop().await;
    // Before the model is complete, the file's size bounds its weights in the message.
    let bytes = fetched.as_ref().map_or(0, |f| f.bytes);
    match (opened, oom) {
        (Ok((llama, _)), Some(e)) => Err(Error::OutOfMemory { needed: llama.gpu_bytes(), message: e.to_string() }),
        (Err(_), Some(e)) => Err(Error::OutOfMemory { needed: bytes, message: e.to_string() }),
        (Err(e), None) => Err(e),
        (Ok((llama, tok)), None) => Ok((llama, tok, fetched.unwrap_or(Fetched { bytes, stats: FetchStats::default() }), peak)),
    }
}

/// What a load reports of its quantization: each quantized matrix, and the auto plan.
type QuantizedReport = (Vec<QuantizedTensor>, Option<crate::model::fit::AutoPlan>);

/// One load onto the CPU backend: every weight read into wasm memory one tensor at a time, in
/// its stored format or quantized by the CPU reference quantizer as it arrives (`quantize`),
/// from a model file or a folder; one progress event (phase `ready`) at the end.
async fn load_cpu(url: &str, opts: &LoadOptions) -> crate::Result<(Engine, Tokenizer, Fetched, f64, QuantizedReport)> {
    // As many threads as the pool has at each pass (workers may still be joining): every pass
    // takes the ones that have joined.
    let options = CpuOptions { max_seq: opts.max_context, threads: usize::MAX, kv: opts.kv, ..CpuOptions::default() };
    let weights = weight_options(opts);
    let (loaded, fetched) = match WebFolder::parse(url, opts.web.clone()) {
        Some(folder) => {
            let (loaded, shards) = cpu::open_folder(&folder, options, &weights).await?;
            (loaded, Fetched::of(shards.readers()))
        }
        None => {
            let reader = WebReader::open(url, opts.web.clone()).await?;
            ensure_room(&reader).await?;
            (cpu::open_with(&reader, options, &weights).await?, Fetched::of([&reader]))
        }
    };
    let cpu::CpuLoaded { llama, tokenizer: tok, quantized, plan } = loaded;
    if let Some(f) = &opts.on_progress {
        let done = fetched.bytes;
        let event = js_sys::Object::new();
        for (key, value) in [("phase", JsValue::from("ready")), ("step", 1.into()), ("steps", 1.into())] {
            let _ = Reflect::set(&event, &key.into(), &value);
        }
        let _ = Reflect::set(&event, &"bytesLoaded".into(), &JsValue::from_f64(done as f64));
        let _ = Reflect::set(&event, &"bytesTotal".into(), &JsValue::from_f64(done as f64));
        let _ = Reflect::set(&event, &"wasmMemoryBytes".into(), &JsValue::from_f64(wasm_memory_bytes()));
        let _ = f.call1(&JsValue::NULL, &event);
    }
    Ok((Engine::Cpu(Box::new(llama)), tok, fetched, wasm_memory_bytes(), (listed(&quantized), plan)))
}

fn busy() -> JsValue {
    js_error("BUSY", "the model is already running a call; await it first")
}

/// Runs `f` on the session as a promise; a second call while one runs is refused.
// The mutable borrow held across awaits is the session's lock: every other entry point uses
// `try_borrow*` and answers BUSY instead of panicking.
#[allow(clippy::await_holding_refcell_ref)]
fn run<F>(inner: &Rc<RefCell<Session>>, f: F) -> Promise
where
    F: for<'a> FnOnce(
            &'a mut Session,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<JsValue, JsValue>> + 'a>>
        + 'static,
{
    let inner = inner.clone();
    future_to_promise(async move {
        let mut guard = inner.try_borrow_mut().map_err(|_| busy())?;
        let session = &mut *guard;
        if let Some(reason) = session.engine.lost_reason() {
            return Err(to_js(&Error::DeviceLost(reason)));
        }
        f(session).await
    })
}

/// Plain objects (flattened structs would otherwise become `Map`s) with numbers for u64.
fn to_value<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).map_err(from_js_error)
}

fn chunk(s: &mut Session, token: u32) -> Result<JsValue, JsValue> {
    // The sampler answers u32::MAX when it had no distribution to draw from (NaN logits): a
    // model error, never a token id.
    if token as usize >= s.engine.vocab() {
        return Err(to_js(&Error::Model(format!(
            "the sampler returned no token (id {token:#x} for a vocabulary of {}): the logits were not finite",
            s.engine.vocab()
        ))));
    }
    s.last = token;
    let text = s.stream.push(&s.tok, token).map_err(|e| to_js(&e))?;
    let done = s.tok.is_stop(token);
    to_value(&Chunk { token, text, done })
}

/// Tokens of `ids` the cache already holds as its first positions: the common prefix with
/// `cached`, less one so that the prompt pass has a token to sample after.
fn reusable(cached: &[u32], ids: &[u32]) -> usize {
    let common = cached.iter().zip(ids).take_while(|(a, b)| a == b).count();
    common.min(ids.len().saturating_sub(1))
}

/// Runs `ids` with `params` and answers the first chunk. The prefix `ids` shares with the
/// sequence in the KV cache is kept and only the rest runs (a chat turn extending the last
/// one); any other prompt starts from an empty cache.
async fn start(s: &mut Session, ids: Vec<u32>, params: &SampleParams) -> Result<JsValue, JsValue> {
    let started = now_ms();
    let context = s.engine.max_seq();
    if ids.len() > context {
        return Err(to_js(&Error::ContextFull { tokens: ids.len(), context }));
    }
    let mut keep = reusable(&s.cached, &ids);
    if !s.engine.truncate(keep) {
        keep = 0;
        s.engine.reset();
    }
    // Until the pass succeeds the cache holds only the kept prefix.
    s.cached.truncate(keep);
    s.stream = TextStream::default();
    s.engine.set_sampling(params);
    let first = s.engine.prefill(&ids[keep..]).await.map_err(|e| to_js(&e))?;
    s.cached = ids;
    s.gen = GenerationStats {
        prompt_tokens: s.cached.len(),
        prefill_tokens: s.cached.len() - keep,
        time_to_first_token_ms: now_ms() - started,
        generated_tokens: 1,
        decode_ms: 0.0,
    };
    chunk(s, first)
}

#[wasm_bindgen]
impl Model {
    /// Starts a generation: encodes `prompt` (special tokens parsed), runs it, and resolves to
    /// the first chunk. Of the earlier sequence only the prefix it shares with this prompt is
    /// kept (its KV cache is reused; `stats().prefillTokens` counts what ran). A prompt longer than the context is a
    /// CONTEXT_FULL error; generation past the context goes on over the sliding window.
    /// `prompt` may also be an array of token ids, run as they are.
    pub fn begin(&self, prompt: JsValue, options: JsValue) -> Promise {
        let params = options::sampling(&options);
        let prompt = match prompt.as_string() {
            Some(text) => Ok(Prompt::Text(text)),
            None => serde_wasm_bindgen::from_value::<Vec<u32>>(prompt)
                .map(Prompt::Ids)
                .map_err(|_| js_error("INVALID_ARGUMENT", "the prompt must be a string or an array of token ids")),
        };
        run(&self.inner, move |s| {
            Box::pin(async move {
                let params = params?;
                let ids = match prompt? {
                    Prompt::Text(text) => s.tok.encode(&text, true),
                    Prompt::Ids(ids) => ids,
                };
                if let Some(&bad) = ids.iter().find(|&&id| id as usize >= s.engine.vocab()) {
                    return Err(js_error("INVALID_ARGUMENT", &format!("token id {bad} is outside the vocabulary of {}", s.engine.vocab())));
                }
                start(s, ids, &params).await
            })
        })
    }

    /// Starts a generation on `messages` ([{role, content}]) in the model's chat template, as
    /// `begin` does on a prompt: the template's special tokens are control tokens, message
    /// content is encoded as text, so a message cannot open or close a turn.
    #[wasm_bindgen(js_name = beginChat)]
    pub fn begin_chat(&self, messages: JsValue, options: JsValue) -> Promise {
        let params = options::sampling(&options);
        let messages: Result<Vec<Message>, JsValue> = serde_wasm_bindgen::from_value(messages).map_err(from_js_error);
        run(&self.inner, move |s| {
            Box::pin(async move {
                let (params, messages) = (params?, messages?);
                let ids = s.tok.encode_chat(&messages).map_err(|e| to_js(&e))?;
                start(s, ids, &params).await
            })
        })
    }

    /// The next chunk of the generation `begin` started.
    pub fn next(&self) -> Promise {
        run(&self.inner, |s| {
            Box::pin(async move {
                if s.gen.generated_tokens == 0 {
                    return Err(js_error("INVALID_STATE", "call begin() before next()"));
                }
                let started = now_ms();
                let token = s.engine.step().await.map_err(|e| to_js(&e))?;
                s.cached.push(s.last);
                s.gen.decode_ms += now_ms() - started;
                s.gen.generated_tokens += 1;
                chunk(s, token)
            })
        })
    }

    /// Text held back at the end of a generation (an unfinished UTF-8 character).
    pub fn finish(&self) -> Result<String, JsValue> {
        let mut s = self.inner.try_borrow_mut().map_err(|_| busy())?;
        Ok(s.stream.finish())
    }

    /// The prompt for `messages` ([{role, content}]) in the model's chat template, ending with
    /// the assistant's turn opened.
    #[wasm_bindgen(js_name = chatPrompt)]
    pub fn chat_prompt(&self, messages: JsValue) -> Result<String, JsValue> {
        let messages: Vec<Message> = serde_wasm_bindgen::from_value(messages).map_err(from_js_error)?;
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        s.tok.chat_prompt(&messages).map_err(|e| to_js(&e))
    }

    /// The token ids a chat on `messages` runs (`beginChat`): template tokens as control
    /// tokens, message content as text.
    #[wasm_bindgen(js_name = chatIds)]
    pub fn chat_ids(&self, messages: JsValue) -> Result<Vec<u32>, JsValue> {
        let messages: Vec<Message> = serde_wasm_bindgen::from_value(messages).map_err(from_js_error)?;
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        s.tok.encode_chat(&messages).map_err(|e| to_js(&e))
    }

    pub fn encode(&self, text: String) -> Result<Vec<u32>, JsValue> {
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        Ok(s.tok.encode(&text, true))
    }

    pub fn decode(&self, ids: Vec<u32>) -> Result<String, JsValue> {
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        s.tok.decode(&ids, true).map_err(|e| to_js(&e))
    }

    /// Runs `ids` from an empty sequence and resolves to every debug checkpoint as
    /// [{name, shape, data: Float32Array}]: embedding, each block's attention output, MLP output
    /// and residual, the final norm and the logits.
    pub fn checkpoints(&self, ids: Vec<u32>) -> Promise {
        run(&self.inner, move |s| {
            Box::pin(async move {
                s.engine.reset();
                s.cached.clear();
                let got = s.engine.checkpoints(&ids).await.map_err(|e| to_js(&e))?;
                s.engine.reset();
                let out = js_sys::Array::new();
                for (name, shape, values) in got {
                    let entry = js_sys::Object::new();
                    let shape: js_sys::Array = shape.iter().map(|&d| JsValue::from_f64(d as f64)).collect();
                    Reflect::set(&entry, &"name".into(), &name.into())?;
                    Reflect::set(&entry, &"shape".into(), &shape)?;
                    Reflect::set(&entry, &"data".into(), &js_sys::Float32Array::from(values.as_slice()))?;
                    out.push(&entry);
                }
                Ok(out.into())
            })
        })
    }

    /// Load cost, the last generation's speed, and memory.
    pub fn stats(&self) -> Result<JsValue, JsValue> {
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        let g = &s.gen;
        let decode_tokens = g.generated_tokens.saturating_sub(1);
        let stats = Stats {
            load: s.load.clone(),
            backend: s.engine.name(),
            architecture: match &s.engine {
                Engine::Gpu { llama, .. } => llama.config.arch,
                Engine::Cpu(c) => c.config.arch,
            },
            prompt_tokens: g.prompt_tokens,
            prefill_tokens: g.prefill_tokens,
            time_to_first_token_ms: g.time_to_first_token_ms,
            prefill_tokens_per_second: rate(g.prefill_tokens, g.time_to_first_token_ms),
            generated_tokens: g.generated_tokens,
            tokens_per_second: rate(decode_tokens, g.decode_ms),
            gpu_bytes: match s.engine { Engine::Gpu { .. } => s.engine.bytes(), Engine::Cpu(_) => 0 },
            weight_bytes: s.engine.weight_bytes(),
            activations: match &s.engine {
                Engine::Gpu { llama, .. } if llama.decode_kernels().iter().any(|k| k.contains("DP4=1")) => "int8",
                _ => "f32",
            },
            kv_format: s.engine.kv_cache().0,
            kv_cache_bytes: s.engine.kv_cache().1,
            context_length: s.engine.max_seq(),
            wasm_memory_bytes: wasm_memory_bytes(),
        };
        to_value(&stats)
    }

    /// The end-of-sequence token id, if the model has one.
    #[wasm_bindgen(getter)]
    pub fn eos(&self) -> Option<u32> {
        self.inner.try_borrow().ok().and_then(|s| s.tok.eos)
    }

    /// Why the GPU device was lost, or undefined while it works.
    #[wasm_bindgen(js_name = deviceLost)]
    pub fn device_lost(&self) -> Option<String> {
        self.inner.try_borrow().ok().and_then(|s| s.engine.lost_reason())
    }

    /// Destroys the GPU device as a driver reset would (for testing recovery): later calls
    /// fail with DEVICE_LOST and the model must be loaded again.
    #[wasm_bindgen(js_name = destroyDevice)]
    pub fn destroy_device(&self) -> Result<(), JsValue> {
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        s.engine.destroy_device();
        Ok(())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stats {
    load: LoadStats,
    /// "webgpu" or "cpu".
    backend: &'static str,
    architecture: crate::model::Arch,
    prompt_tokens: usize,
    prefill_tokens: usize,
    time_to_first_token_ms: f64,
    prefill_tokens_per_second: f64,
    generated_tokens: usize,
    tokens_per_second: f64,
    gpu_bytes: u64,
    weight_bytes: u64,
    /// "int8" where the decode step's GEMVs take 8-bit activations (`activations: 'int8'` on a
    /// GPU whose kernels have them), else "f32".
    activations: &'static str,
    kv_format: crate::ops::kv::KvFormat,
    /// Bytes of the KV cache in its format, on the GPU or in wasm memory.
    kv_cache_bytes: u64,
    context_length: usize,
    wasm_memory_bytes: f64,
}

/// The WGSL language feature of `dot4I8Packed`.
pub(crate) const DP4_FEATURE: &str = "packed_4x8_integer_dot_product";

fn rate(tokens: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        tokens as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

/// Empties the persistent cache of model ranges.
#[wasm_bindgen(js_name = clearModelCache)]
pub async fn clear_model_cache() -> Result<bool, JsValue> {
    let storage: web_sys::CacheStorage = Reflect::get(&js_sys::global(), &"caches".into())?
        .dyn_into()
        .map_err(|_| js_error("UNSUPPORTED", "this context has no Cache API"))?;
    let deleted = wasm_bindgen_futures::JsFuture::from(storage.delete(crate::loader::cache::CACHE_NAME)).await?;
    Ok(deleted.as_bool().unwrap_or(false))
}

/// Linear memory of the module in bytes.
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory() -> f64 {
    wasm_memory_bytes()
}
