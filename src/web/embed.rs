//! `loadEncoder` and the `Encoder` class behind `loadModel(url, { task: 'embed' })`: a
//! BERT-family model folder (config.json, tokenizer.json or vocab.txt, model.safetensors) read
//! through the browser's range reader and its cache, run by the CPU encoder in this thread or
//! on the shared WebGPU device (`backend`).

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Float32Array, Function, Reflect};
use wasm_bindgen::prelude::*;

use super::backend::{resolve, Choice, Target};
use super::error::{js_error, to_js};
use crate::loader::web::{WebOptions, WebReader};
use crate::loader::RangeReader;
use crate::model::bert::{EmbedOptions, Encoder, EncoderOptions, Pooling, TokenizerFile};
use crate::quant::weft::WeftQuant;

fn invalid(message: &str) -> JsValue {
    js_error("INVALID_ARGUMENT", message)
}

fn field(options: &JsValue, key: &str) -> Option<JsValue> {
    if !options.is_object() {
        return None;
    }
    Reflect::get(options, &key.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// The whole of a small file of the folder; None where it is absent (404).
async fn text(base: &str, name: &str, web: &WebOptions) -> Result<Option<String>, JsValue> {
    let url = format!("{base}/{name}");
    let reader = match WebReader::open(&url, web.clone()).await {
        Ok(r) => r,
        Err(crate::Error::Load(crate::loader::LoadError::Http { status: Some(404), .. })) => return Ok(None),
        Err(e) => return Err(to_js(&e)),
    };
    let bytes = reader.read_range(0..reader.len()).await.map_err(|e| to_js(&e))?;
    String::from_utf8(bytes).map(Some).map_err(|_| js_error("FORMAT", &format!("{url} is not UTF-8 text")))
}

/// A sentence encoder loaded in this page.
#[wasm_bindgen]
pub struct SentenceEncoder {
    inner: Rc<RefCell<Encoder>>,
}

/// Loads the model folder at `url` (options: onProgress, cache, quantize 'q8' | 'q4' or a weft
/// format name, maxTokens, backend 'gpu' | 'cpu' | 'auto': the GPU, failing with UNSUPPORTED
/// without one; the CPU; the GPU when it is a hardware one, as for the LLMs. Without the option,
/// the backend `init()` chose.
#[wasm_bindgen(js_name = loadEncoder)]
pub async fn load_encoder(url: String, options: JsValue) -> Result<SentenceEncoder, JsValue> {
    let base = url.trim_end_matches('/').to_string();
    let mut web = WebOptions::default();
    if let Some(cache) = field(&options, "cache") {
        web.cache = cache.as_bool().ok_or_else(|| invalid("option 'cache' must be a boolean"))?;
    }
    let quantize = match field(&options, "quantize").map(|v| v.as_string()) {
        None => None,
        Some(Some(q)) => {
            let full = match q.as_str() {
                "q8" => "q8_g32_sym",
                "q4" => "q4_g32_asym",
                other => other,
            };
            Some(WeftQuant::parse(full).map_err(|e| invalid(&format!("option 'quantize': {e}")))?)
        }
        Some(None) => return Err(invalid("option 'quantize' must be a string: 'q8', 'q4' or a weft format")),
    };
    let mut options_out = EncoderOptions { quantize, threads: 1, ..EncoderOptions::default() };
    if let Some(n) = field(&options, "maxTokens") {
        options_out.max_tokens =
            n.as_f64().filter(|n| n.fract() == 0.0 && *n >= 2.0).ok_or_else(|| invalid("option 'maxTokens' must be an integer >= 2"))?
                as usize;
    }
    let on_progress = field(&options, "onProgress").map(|f| f.dyn_into::<Function>()).transpose()
        .map_err(|_| invalid("option 'onProgress' must be a function"))?;
    let choice = match field(&options, "backend").map(|v| v.as_string()) {
        None => super::backend::chosen(),
        Some(Some(b)) if b == "gpu" || b == "webgpu" => Choice::WebGpu,
        Some(Some(b)) if b == "cpu" => Choice::Cpu,
        Some(Some(b)) if b == "auto" => Choice::Auto,
        _ => return Err(invalid("option 'backend' must be 'gpu', 'cpu' or 'auto'")),
    };
    // Before any model byte: a missing GPU fails the load at once.
    let target = resolve(choice).await.map_err(|e| to_js(&e))?;

    let config = text(&base, "config.json", &web).await?.ok_or_else(|| js_error("FORMAT", &format!("{base}/config.json not found")))?;
    let json = text(&base, "tokenizer.json", &web).await?;
    let vocab = if json.is_none() { text(&base, "vocab.txt", &web).await? } else { None };
    let lowercase = match (&vocab, text(&base, "tokenizer_config.json", &web).await.ok().flatten()) {
        (Some(_), Some(t)) => serde_json::from_str::<serde_json::Value>(&t).ok().and_then(|v| v["do_lower_case"].as_bool()).unwrap_or(true),
        _ => true,
    };
    let tokenizer = match (&json, &vocab) {
        (Some(j), _) => TokenizerFile::Json(j),
        (None, Some(v)) => TokenizerFile::VocabTxt { text: v, lowercase },
        (None, None) => return Err(js_error("FORMAT", &format!("{base}: neither tokenizer.json nor vocab.txt"))),
    };
    let reader = WebReader::open(&format!("{base}/model.safetensors"), web).await.map_err(|e| to_js(&e))?;
    let mut progress = |loaded: u64, total: u64| {
        if let Some(f) = &on_progress {
            let event = js_sys::Object::new();
            let _ = Reflect::set(&event, &"bytesLoaded".into(), &JsValue::from_f64(loaded as f64));
            let _ = Reflect::set(&event, &"bytesTotal".into(), &JsValue::from_f64(total as f64));
            let _ = f.call1(&JsValue::NULL, &event);
        }
    };
    let mut encoder = Encoder::open(&reader, &config, tokenizer, options_out, &mut progress).await.map_err(|e| to_js(&e))?;
    if let Target::Gpu(ctx) = target {
        encoder.upload(ctx).map_err(|e| to_js(&e))?;
    }
    Ok(SentenceEncoder { inner: Rc::new(RefCell::new(encoder)) })
}

#[wasm_bindgen]
impl SentenceEncoder {
    /// Dimensions of an embedding.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.borrow().dim()
    }

    /// "gpu" or "cpu": where the passes run.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.inner.borrow().backend().to_string()
    }

    /// One `Float32Array` per text (options: pooling 'mean' | 'cls', normalize, batchSize,
    /// onProgress({ done, total }) after each batch); a promise.
    pub fn embed(&self, texts: Vec<String>, options: JsValue) -> Result<js_sys::Promise, JsValue> {
        let pooling = match field(&options, "pooling").map(|v| v.as_string()) {
            None => Pooling::Mean,
            Some(Some(p)) if p == "mean" => Pooling::Mean,
            Some(Some(p)) if p == "cls" => Pooling::Cls,
            _ => return Err(invalid("option 'pooling' must be 'mean' or 'cls'")),
        };
        let normalize = match field(&options, "normalize") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| invalid("option 'normalize' must be a boolean"))?,
        };
        let batch_size = match field(&options, "batchSize") {
            None => 32,
            Some(v) => v.as_f64().filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= 4096.0)
                .ok_or_else(|| invalid("option 'batchSize' must be an integer from 1 to 4096"))? as usize,
        };
        let on_progress = field(&options, "onProgress").map(|f| f.dyn_into::<Function>()).transpose()
            .map_err(|_| invalid("option 'onProgress' must be a function"))?;
        let inner = self.inner.clone();
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let options = EmbedOptions { pooling, normalize, batch_size };
            run_embed(&inner, &texts, options, on_progress.as_ref()).await
        }))
    }

    /// The ids the encoder reads for `text` (`[CLS]` … `[SEP]`, truncated).
    pub fn tokenize(&self, text: String) -> Vec<u32> {
        self.inner.borrow().tokenize(&text)
    }
}

/// One `embed()` call: passes one after another, awaiting the GPU's readback between them.
async fn run_embed(inner: &RefCell<Encoder>, texts: &[String], options: EmbedOptions, on_progress: Option<&Function>) -> Result<JsValue, JsValue> {
    // A shared borrow: passes of two calls may interleave (each has its own buffers).
    let encoder = inner.try_borrow().map_err(|_| js_error("BUSY", "the encoder is already running a call"))?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut progress = |done: usize, total: usize| {
        if let Some(f) = on_progress {
            let event = js_sys::Object::new();
            let _ = Reflect::set(&event, &"done".into(), &JsValue::from_f64(done as f64));
            let _ = Reflect::set(&event, &"total".into(), &JsValue::from_f64(total as f64));
            let _ = f.call1(&JsValue::NULL, &event);
        }
    };
    let vectors = encoder.embed_async(&refs, options, &mut progress).await.map_err(|e| to_js(&e))?;
    Ok(vectors.iter().map(|v| Float32Array::from(&v[..])).collect::<Array>().into())
}
