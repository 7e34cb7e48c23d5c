//! The options objects of `loadModel` and `generate`, read and checked field by field: an unknown
//! key or a value out of range is an `INVALID_ARGUMENT` naming the option, before anything runs.

use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::error::js_error;
use crate::loader::web::WebOptions;
use crate::model::fit::QuantizeChoice;
use crate::model::KvFormat;
use crate::ops::sample::SampleParams;

/// Keys `loadModel` accepts. `task` belongs to the embedding loader, which reads it itself;
/// here it is only known, so that passing it is not a mistake.
pub const LOAD_KEYS: &[&str] = &[
    "onProgress",
    "signal",
    "kv",
    "maxContext",
    "cache",
    "retries",
    "backoffMs",
    "backend",
    "quantize",
    "memoryBudgetMB",
    "quantizeOn",
    "quantizeDigests",
    "activations",
    "task",
];

/// Keys `generate` passes to the model (`maxTokens` and `signal` stay in JavaScript, which
/// checks its own).
pub const SAMPLING_KEYS: &[&str] = &["temperature", "topK", "topP", "repeatPenalty", "seed"];

fn invalid(message: &str) -> JsValue {
    js_error("INVALID_ARGUMENT", message)
}

/// Every own key of `options` must be in `known`; `options` itself an object, or absent.
pub fn check_keys(options: &JsValue, known: &[&str], what: &str) -> Result<(), JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok(());
    }
    if !options.is_object() || options.is_function() {
        return Err(invalid(&format!("the {what} options must be an object")));
    }
    for key in js_sys::Object::keys(options.unchecked_ref::<js_sys::Object>()).iter() {
        let key = key.as_string().unwrap_or_default();
        if !known.contains(&key.as_str()) {
            return Err(invalid(&format!("unknown {what} option '{key}'; the options are {}", known.join(", "))));
        }
    }
    Ok(())
}

fn field(options: &JsValue, key: &str) -> Option<JsValue> {
    if options.is_undefined() || options.is_null() {
        return None;
    }
    Reflect::get(options, &key.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// A number option that passes `ok`, else an error naming the option and `rule`.
fn number(options: &JsValue, key: &str, rule: &str, ok: impl Fn(f64) -> bool) -> Result<Option<f64>, JsValue> {
    match field(options, key) {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(n) if ok(n) => Ok(Some(n)),
            _ => Err(invalid(&format!("option '{key}' must be {rule}; got {}", describe(&v)))),
        },
    }
}

fn describe(v: &JsValue) -> String {
    v.as_f64()
        .map(|n| n.to_string())
        .or_else(|| v.as_string().map(|s| format!("'{s}'")))
        .unwrap_or_else(|| v.js_typeof().as_string().unwrap_or_default())
}

fn integer_in(n: f64, lo: f64, hi: f64) -> bool {
    n.fract() == 0.0 && n >= lo && n <= hi
}

/// Options of `loadModel`.
pub struct LoadOptions {
    pub on_progress: Option<Function>,
    pub web: WebOptions,
    pub max_context: usize,
    pub kv: KvFormat,
    /// The most the model may occupy on the GPU (weights, KV cache, activations), in MB.
    pub memory_budget_mb: Option<u64>,
    /// This load's backend; None: the one `init()` chose.
    pub backend: Option<super::backend::Choice>,
    /// Float matrices quantized while loading (`quantize`): kept as stored, to one format, or
    /// `auto`, formats planned for the memory budget (`model::fit::plan_auto`).
    pub quantize: QuantizeChoice,
    /// `quantizeOn`: 'auto' (default: the GPU on a hardware adapter), 'gpu' or 'cpu'.
    pub quantize_on: crate::model::QuantizeOn,
    /// `quantizeDigests`: read GPU-quantized matrices back for their digests in `stats()`.
    pub quantize_digests: bool,
    /// `activations: 'int8'`: the decode step's GEMVs quantize their inputs to 8 bits per 32
    /// values and take integer dot products (`EngineOptions::int8_activations`); 'f32' (default)
    /// keeps them in f32.
    pub int8_activations: bool,
}

/// `quantize` of `loadModel`: 'q4', 'q8', 'q3', 'none', 'auto' or a weft format name.
fn quantize(options: &JsValue) -> Result<QuantizeChoice, JsValue> {
    let Some(v) = field(options, "quantize") else { return Ok(QuantizeChoice::None) };
    QuantizeChoice::parse(&v.as_string().unwrap_or_default())
        .ok_or_else(|| invalid(&format!("option 'quantize' is {}; use {}", describe(&v), QuantizeChoice::NAMES)))
}

impl LoadOptions {
    pub fn parse(options: &JsValue) -> Result<Self, JsValue> {
        check_keys(options, LOAD_KEYS, "loadModel")?;
        let on_progress = match field(options, "onProgress") {
            None => None,
            Some(f) => Some(f.dyn_into::<Function>().map_err(|_| invalid("option 'onProgress' must be a function"))?),
        };
        let signal = match field(options, "signal") {
            None => None,
            Some(s) => Some(
                s.dyn_into::<web_sys::AbortSignal>().map_err(|_| invalid("option 'signal' must be an AbortSignal"))?,
            ),
        };
        let kv = match field(options, "kv") {
            None => KvFormat::F32,
            Some(kv) => {
                let kv = kv.as_string().unwrap_or_default();
                kv.parse::<KvFormat>().map_err(|_| {
                    invalid(&format!("option 'kv' is '{kv}', not a KV-cache format; use \"f32\", \"f16\" or \"q8\""))
                })?
            }
        };
        let mut web = WebOptions { signal, ..WebOptions::default() };
        if let Some(cache) = field(options, "cache") {
            web.cache = cache.as_bool().ok_or_else(|| invalid("option 'cache' must be a boolean"))?;
        }
        if let Some(r) = number(options, "retries", "an integer from 0 to 20", |n| integer_in(n, 0.0, 20.0))? {
            web.retries = r as u32;
        }
        if let Some(ms) = number(options, "backoffMs", "a number from 0 to 60000", |n| (0.0..=60_000.0).contains(&n))? {
            web.backoff_ms = ms;
        }
        let max_context = number(options, "maxContext", "a positive integer", |n| integer_in(n, 1.0, u32::MAX as f64))?
            .map_or(2048, |n| n as usize);
        // A fraction of a MB rounds up: the budget is checked in whole MB (10^6 bytes).
        let memory_budget_mb =
            number(options, "memoryBudgetMB", "a positive finite number of MB", |n| n.is_finite() && n > 0.0)?
                .map(|n| n.ceil() as u64);
        let backend = match field(options, "backend") {
            None => None,
            Some(v) => {
                let name = v.as_string().unwrap_or_default();
                let choice = super::backend::Choice::parse(&name);
                Some(choice.ok_or_else(|| {
                    invalid(&format!("option 'backend' is {}; use {}", describe(&v), super::backend::Choice::NAMES))
                })?)
            }
        };
        let quantize = quantize(options)?;
        let quantize_on = match field(options, "quantizeOn").map(|v| v.as_string()).map(|v| v.unwrap_or_default()) {
            None => crate::model::QuantizeOn::Auto,
            Some(on) => match on.as_str() {
                "auto" => crate::model::QuantizeOn::Auto,
                "gpu" => crate::model::QuantizeOn::Gpu,
                "cpu" => crate::model::QuantizeOn::Cpu,
                _ => return Err(invalid("option 'quantizeOn' must be 'auto', 'gpu' or 'cpu'")),
            },
        };
        let quantize_digests = match field(options, "quantizeDigests") {
            None => false,
            Some(v) => v.as_bool().ok_or_else(|| invalid("option 'quantizeDigests' must be a boolean"))?,
        };
        let int8_activations = match field(options, "activations") {
            None => false,
            Some(v) => match v.as_string().as_deref() {
                Some("f32") => false,
                Some("int8") => true,
                _ => return Err(invalid(&format!("option 'activations' is {}; use 'f32' or 'int8'", describe(&v)))),
            },
        };
        Ok(Self {
            on_progress,
            web,
            max_context,
            kv,
            memory_budget_mb,
            backend,
            quantize,
            quantize_on,
            quantize_digests,
            int8_activations,
        })
    }
}

/// The sampling options of `generate`, checked: NaN, infinities and values the sampler has no
/// meaning for are refused here, so the sampler always has a distribution to draw from.
pub fn sampling(options: &JsValue) -> Result<SampleParams, JsValue> {
    check_keys(options, SAMPLING_KEYS, "generate")?;
    let d = SampleParams::default();
    // Bounds keep every logit / temperature and penalized logit finite in f32.
    let temperature =
        number(options, "temperature", "0 (greedy) or a number from 0.001 to 100", |n| n == 0.0 || (0.001..=100.0).contains(&n))?;
    let top_k = number(options, "topK", "an integer >= 0 (0 keeps every token)", |n| integer_in(n, 0.0, u32::MAX as f64))?;
    let top_p = number(options, "topP", "a number in (0, 1]", |n| n > 0.0 && n <= 1.0)?;
    let repeat_penalty =
        number(options, "repeatPenalty", "a number from 0.01 to 100 (1 is off)", |n| (0.01..=100.0).contains(&n))?;
    let seed = number(options, "seed", "an integer from 0 to 4294967295", |n| integer_in(n, 0.0, u32::MAX as f64))?;
    Ok(SampleParams {
        temperature: temperature.map_or(d.temperature, |n| n as f32),
        top_k: top_k.map_or(d.top_k, |n| n as u32),
        top_p: top_p.map_or(d.top_p, |n| n as f32),
        repeat_penalty: repeat_penalty.map_or(d.repeat_penalty, |n| n as f32),
        seed: seed.map_or(d.seed, |n| n as u32),
        ..d
    })
}
