//! `loadModel` and the `Model` class: loading through the browser's range reader, step-wise
//! generation that the JavaScript async iterator drives, chat prompts, debug checkpoints, stats.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Function, Promise, Reflect};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use super::error::{from_js_error, js_error, to_js};
use crate::gpu::GpuContext;
use crate::loader::web::{FetchStats, WebOptions, WebReader};
use crate::model::{self, EngineOptions, KvFormat, Llama, Progress, WeightOptions};
use crate::ops::sample::SampleParams;
use crate::tokenizer::chat::Message;
use crate::tokenizer::{TextStream, Tokenizer};
use crate::Error;

fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// Bytes of this module's linear memory (it only grows, so the last value is the peak).
pub fn wasm_memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .map(|m| m.buffer().unchecked_into::<js_sys::ArrayBuffer>().byte_length() as f64)
        .unwrap_or(0.0)
}

/// Options of `loadModel` (read field by field: `signal` and `onProgress` are live objects).
struct LoadOptions {
    on_progress: Option<Function>,
    web: WebOptions,
    max_context: usize,
    kv: KvFormat,
}

fn field(options: &JsValue, key: &str) -> Option<JsValue> {
    if options.is_undefined() || options.is_null() {
        return None;
    }
    Reflect::get(options, &key.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

fn number(options: &JsValue, key: &str) -> Result<Option<f64>, JsValue> {
    match field(options, key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(Some)
            .ok_or_else(|| js_error("INVALID_ARGUMENT", &format!("option '{key}' must be a non-negative number"))),
    }
}

impl LoadOptions {
    fn parse(options: &JsValue) -> Result<Self, JsValue> {
        let on_progress = match field(options, "onProgress") {
            None => None,
            Some(f) => Some(
                f.dyn_into::<Function>().map_err(|_| js_error("INVALID_ARGUMENT", "onProgress must be a function"))?,
            ),
        };
        let signal = match field(options, "signal") {
            None => None,
            Some(s) => Some(
                s.dyn_into::<web_sys::AbortSignal>()
                    .map_err(|_| js_error("INVALID_ARGUMENT", "signal must be an AbortSignal"))?,
            ),
        };
        let kv = match field(options, "kv") {
            None => KvFormat::F32,
            Some(kv) => {
                let kv = kv.as_string().unwrap_or_default();
                kv.parse::<KvFormat>().map_err(|_| {
                    js_error("INVALID_ARGUMENT", &format!("kv '{kv}' is not a KV-cache format; use \"f32\", \"f16\" or \"q8\""))
                })?
            }
        };
        let mut web = WebOptions { signal, ..WebOptions::default() };
        if let Some(cache) = field(options, "cache") {
            web.cache =
                cache.as_bool().ok_or_else(|| js_error("INVALID_ARGUMENT", "option 'cache' must be a boolean"))?;
        }
        if let Some(r) = number(options, "retries")? {
            web.retries = r as u32;
        }
        if let Some(ms) = number(options, "backoffMs")? {
            web.backoff_ms = ms;
        }
        let max_context = number(options, "maxContext")?.map_or(2048, |n| (n as usize).max(1));
        Ok(Self { on_progress, web, max_context, kv })
    }
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
    /// Largest linear memory seen during the load.
    peak_wasm_memory_bytes: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationStats {
    prompt_tokens: usize,
    time_to_first_token_ms: f64,
    generated_tokens: usize,
    decode_ms: f64,
}

struct Session {
    ctx: Rc<GpuContext>,
    llama: Llama,
    tok: Tokenizer,
    stream: TextStream,
    load: LoadStats,
    gen: GenerationStats,
}

/// Sampling options of `generate`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct GenerateOptions {
    temperature: Option<f32>,
    top_k: Option<u32>,
    top_p: Option<f32>,
    repeat_penalty: Option<f32>,
    seed: Option<u32>,
}

impl GenerateOptions {
    fn params(&self) -> SampleParams {
        let d = SampleParams::default();
        SampleParams {
            temperature: self.temperature.unwrap_or(d.temperature),
            top_k: self.top_k.unwrap_or(d.top_k),
            top_p: self.top_p.unwrap_or(d.top_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(d.repeat_penalty),
            seed: self.seed.unwrap_or(d.seed),
            ..d
        }
    }
}

/// One generated token: its id, the text it completes, and whether generation must stop
/// (end of sequence or a full context).
#[derive(Serialize)]
struct Chunk {
    token: u32,
    text: String,
    done: bool,
}

/// A loaded language model on the GPU.
#[wasm_bindgen]
pub struct Model {
    inner: Rc<RefCell<Session>>,
}

/// Loads a model from `url` layer by layer (see js/index.d.ts for the options).
#[wasm_bindgen(js_name = loadModel)]
pub async fn load_model(url: String, options: JsValue) -> Result<Model, JsValue> {
    let opts = LoadOptions::parse(&options)?;
    let started = now_ms();
    let ctx = super::shared_context().await.map_err(|e| to_js(&e))?;
    let reader = WebReader::open(&url, opts.web.clone()).await.map_err(|e| to_js(&e))?;
    if let Some(validator) = reader.cache_validator() {
        super::storage::ensure_room(&url, validator, crate::loader::RangeReader::len(&reader)).await?;
    }
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
    let engine = EngineOptions { max_seq: opts.max_context, kv: opts.kv, ..EngineOptions::default() };
    let watch = ctx.watch_out_of_memory();
    let opened = model::open(&ctx, &reader, engine, WeightOptions::default(), &mut report).await;
    let oom = watch.pop().await;
    let (llama, tok) = match (opened, oom) {
        (Ok((llama, _)), Some(e)) => {
            return Err(to_js(&Error::OutOfMemory { needed: llama.gpu_bytes(), message: e.to_string() }))
        }
        (Err(_), Some(e)) => {
            return Err(to_js(&Error::OutOfMemory { needed: reader_weights(&reader), message: e.to_string() }))
        }
        (Err(e), None) => return Err(to_js(&e)),
        (Ok(loaded), None) => loaded,
    };
    ctx.check().map_err(|e| to_js(&e))?;
    let load = LoadStats {
        url,
        file_bytes: crate::loader::RangeReader::len(&reader),
        load_ms: now_ms() - started,
        fetch: reader.stats(),
        peak_wasm_memory_bytes: peak.max(wasm_memory_bytes()),
    };
    let session = Session { ctx, llama, tok, stream: TextStream::default(), load, gen: GenerationStats::default() };
    Ok(Model { inner: Rc::new(RefCell::new(session)) })
}

/// The file's size: an upper bound on its weights, for an out-of-memory message before the
/// model was complete.
fn reader_weights(reader: &WebReader) -> u64 {
    crate::loader::RangeReader::len(reader)
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
        if let Some(reason) = session.ctx.lost_reason() {
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
    let text = s.stream.push(&s.tok, token).map_err(|e| to_js(&e))?;
    let done = Some(token) == s.tok.eos || s.llama.position() + 1 >= s.llama.options.max_seq;
    to_value(&Chunk { token, text, done })
}

#[wasm_bindgen]
impl Model {
    /// Starts a generation: encodes `prompt` (special tokens parsed), runs it, and resolves to
    /// the first chunk. Forgets any earlier sequence.
    pub fn begin(&self, prompt: String, options: JsValue) -> Promise {
        let opts: Result<GenerateOptions, JsValue> = if options.is_undefined() || options.is_null() {
            Ok(GenerateOptions::default())
        } else {
            serde_wasm_bindgen::from_value(options).map_err(from_js_error)
        };
        run(&self.inner, move |s| {
            Box::pin(async move {
                let params = opts?.params();
                let started = now_ms();
                let ids = s.tok.encode(&prompt, true);
                s.llama.reset();
                s.stream = TextStream::default();
                s.llama.set_sampling(&s.ctx, &params);
                let first = s.llama.prefill(&s.ctx, &ids).await.map_err(|e| to_js(&e))?;
                s.gen = GenerationStats {
                    prompt_tokens: ids.len(),
                    time_to_first_token_ms: now_ms() - started,
                    generated_tokens: 1,
                    decode_ms: 0.0,
                };
                chunk(s, first)
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
                let token = s.llama.step(&s.ctx).await.map_err(|e| to_js(&e))?;
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
        s.tok.chat_format().render(&messages).map_err(|e| to_js(&e))
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
                s.llama.reset();
                let got = s.llama.checkpoints(&s.ctx, &ids).await.map_err(|e| to_js(&e))?;
                s.llama.reset();
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
            prompt_tokens: g.prompt_tokens,
            time_to_first_token_ms: g.time_to_first_token_ms,
            prefill_tokens_per_second: rate(g.prompt_tokens, g.time_to_first_token_ms),
            generated_tokens: g.generated_tokens,
            tokens_per_second: rate(decode_tokens, g.decode_ms),
            gpu_bytes: s.llama.gpu_bytes(),
            weight_bytes: s.llama.weights.bytes(),
            context_length: s.llama.options.max_seq,
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
        self.inner.try_borrow().ok().and_then(|s| s.ctx.lost_reason())
    }

    /// Destroys the GPU device as a driver reset would (for testing recovery): later calls
    /// fail with DEVICE_LOST and the model must be loaded again.
    #[wasm_bindgen(js_name = destroyDevice)]
    pub fn destroy_device(&self) -> Result<(), JsValue> {
        let s = self.inner.try_borrow().map_err(|_| busy())?;
        s.ctx.destroy_device();
        Ok(())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stats {
    load: LoadStats,
    prompt_tokens: usize,
    time_to_first_token_ms: f64,
    prefill_tokens_per_second: f64,
    generated_tokens: usize,
    tokens_per_second: f64,
    gpu_bytes: u64,
    weight_bytes: u64,
    context_length: usize,
    wasm_memory_bytes: f64,
}

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
