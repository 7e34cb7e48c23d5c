//! Errors as JavaScript sees them: an `Error` with a stable `code`, and for load failures the
//! URL, byte range and HTTP status as properties.

use wasm_bindgen::JsValue;

use crate::loader::LoadError;
use crate::Error;

/// The stable code of an error (documented in js/index.d.ts).
pub fn code(e: &Error) -> &'static str {
    match e {
        Error::Load(LoadError::Http { status: Some(_), .. }) => "LOAD_HTTP",
        Error::Load(LoadError::Http { status: None, .. }) => "LOAD_NETWORK",
        Error::Load(LoadError::BadRange { .. } | LoadError::OutOfRange { .. }) => "LOAD_RANGE",
        Error::Load(LoadError::Aborted { .. }) => "LOAD_ABORTED",
        Error::Load(LoadError::Changed { .. }) => "LOAD_CHANGED",
        Error::Load(_) => "LOAD",
        Error::OutOfMemory { .. } => "GPU_OOM",
        Error::BufferTooLarge { .. } => "GPU_LIMIT",
        Error::DeviceLost(_) => "DEVICE_LOST",
        Error::NoAdapter { .. } | Error::RequestDevice(_) => "UNSUPPORTED",
        Error::DeviceOption(_) => "INVALID_ARGUMENT",
        Error::Quota { .. } => "QUOTA",
        Error::Format(_) | Error::Calibration { .. } | Error::BadConfig { .. } | Error::MissingTensor { .. } | Error::TensorShape { .. }
        | Error::NonFiniteWeights { .. } | Error::Decode { .. } => "FORMAT",
        Error::UnsupportedModel { .. } => "UNSUPPORTED",
        Error::ModelTooLarge { .. } => "GPU_OOM",
        Error::AddressSpace { .. } => "MEMORY_LIMIT",
        Error::Tokenizer(_) => "TOKENIZER",
        Error::ContextFull { .. } => "CONTEXT_FULL",
        Error::Model(_) | Error::Shape { .. } => "MODEL",
        _ => "GPU",
    }
}

fn set(target: &JsValue, key: &str, value: JsValue) {
    let _ = js_sys::Reflect::set(target, &key.into(), &value);
}

/// A JavaScript `Error` carrying `code` (and `url`, `start`, `end`, `status` for loads).
pub fn to_js(e: &Error) -> JsValue {
    let err: JsValue = js_sys::Error::new(&e.to_string()).into();
    set(&err, "name", "WeftError".into());
    set(&err, "code", code(e).into());
    let (url, start, end, status) = match e {
        Error::Load(LoadError::Http { url, start, end, status, .. }) => (url, *start, *end, *status),
        Error::Load(LoadError::BadRange { url, start, end, status, .. }) => (url, *start, *end, Some(*status)),
        Error::Load(LoadError::Aborted { url } | LoadError::Changed { url, .. }) => (url, 0, 0, None),
        Error::OutOfMemory { needed, .. } => {
            set(&err, "needed", JsValue::from_f64(*needed as f64));
            return err;
        }
        Error::AddressSpace { needed, limit } => {
            set(&err, "needed", JsValue::from_f64(*needed as f64));
            set(&err, "available", JsValue::from_f64(*limit as f64));
            return err;
        }
        Error::ModelTooLarge { needed, available, .. } => {
            set(&err, "needed", JsValue::from_f64(*needed as f64));
            set(&err, "available", JsValue::from_f64(*available as f64));
            return err;
        }
        Error::ContextFull { tokens, context } => {
            set(&err, "tokens", JsValue::from_f64(*tokens as f64));
            set(&err, "context", JsValue::from_f64(*context as f64));
            return err;
        }
        Error::Quota { url, needed, available } => {
            set(&err, "needed", JsValue::from_f64(*needed as f64));
            set(&err, "available", JsValue::from_f64(*available as f64));
            set(&err, "url", url.as_str().into());
            return err;
        }
        _ => return err,
    };
    set(&err, "url", url.as_str().into());
    if end > start {
        set(&err, "start", JsValue::from_f64(start as f64));
        set(&err, "end", JsValue::from_f64(end as f64));
    }
    if let Some(s) = status {
        set(&err, "status", s.into());
    }
    err
}

/// An error of the JavaScript API itself (bad options, wrong state) with its code.
pub fn js_error(code: &str, message: &str) -> JsValue {
    let err: JsValue = js_sys::Error::new(message).into();
    set(&err, "name", "WeftError".into());
    set(&err, "code", code.into());
    err
}

pub fn from_js_error(e: impl std::fmt::Display) -> JsValue {
    js_error("INVALID_ARGUMENT", &e.to_string())
}
