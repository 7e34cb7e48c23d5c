//! The browser's range reader: `fetch` with `Range` headers, retries with backoff, an
//! `AbortSignal`, and a persistent per-range cache (the Cache API).
//!
//! A server that ignores `Range` answers 200 with the whole body. The body is then read as a
//! stream, progressively: each read takes the bytes it needs as they arrive and drops the rest,
//! so memory stays near one layer. Reads come in file order (the model loader sorts them);
//! a read behind the stream's position restarts the download from the beginning.

use std::cell::{Cell, RefCell};
use std::ops::Range;

use js_sys::{Promise, Uint8Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortSignal, Cache, CacheStorage, Headers, ReadableStreamDefaultReader, Request, RequestCache, RequestInit,
    Response, ResponseInit,
};

use super::cache::{self, EntryCheck};
use super::{check_range, parse_content_range, LoadError, RangeReader};
use crate::Result;

#[wasm_bindgen]
extern "C" {
    /// The global `fetch`, present in windows and workers alike.
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(request: &Request) -> Promise;
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &js_sys::Function, ms: f64) -> JsValue;
}

/// How the reader fetches.
#[derive(Clone)]
pub struct WebOptions {
    pub signal: Option<AbortSignal>,
    /// Keep every range read in the Cache API and serve later loads from it.
    pub cache: bool,
    /// Further attempts after a network error, a 5xx/408/429 status or a short body.
    pub retries: u32,
    /// Delay before the first retry; each further retry doubles it.
    pub backoff_ms: f64,
}

impl Default for WebOptions {
    fn default() -> Self {
        Self { signal: None, cache: true, retries: 4, backoff_ms: 200.0 }
    }
}

/// What a load cost, for stats and tests.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchStats {
    pub requests: u64,
    pub bytes_fetched: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Cached entries that failed their length or hash check and were fetched again.
    pub cache_rejected: u64,
    pub retries: u64,
    /// The server ignored `Range` and the body was streamed instead.
    pub streamed_whole_body: bool,
}

/// Whether a failed attempt is worth repeating.
enum Attempt {
    Retry(LoadError),
    Fatal(LoadError),
}

/// A whole-body response being read front to back.
struct BodyStream {
    reader: ReadableStreamDefaultReader,
    /// File offset of `pending[0]`.
    pos: u64,
    pending: Vec<u8>,
    /// The last bytes served, ending at `pos`: a read may start a little before where the
    /// previous one ended (the header parser asks past the start of the tensor data).
    behind: Vec<u8>,
}

/// Most bytes kept behind the stream's position.
const KEEP_BEHIND: usize = 1 << 20;

pub struct WebReader {
    url: String,
    len: u64,
    validator: Option<String>,
    options: WebOptions,
    cache: Option<Cache>,
    /// Set once the server has answered a `Range` request with the whole body.
    ignores_range: Cell<bool>,
    body: RefCell<Option<BodyStream>>,
    stats: RefCell<FetchStats>,
}

fn js_text(value: &JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"))
}

async fn sleep(ms: f64) {
    let promise = Promise::new(&mut |resolve, _| {
        let _ = set_timeout(&resolve, ms);
    });
    let _ = JsFuture::from(promise).await;
}

async fn open_cache() -> Option<Cache> {
    let storage: CacheStorage = js_sys::Reflect::get(&js_sys::global(), &"caches".into()).ok()?.dyn_into().ok()?;
    JsFuture::from(storage.open(cache::CACHE_NAME)).await.ok()?.dyn_into().ok()
}

impl WebReader {
    /// Learns the file's length and validator with a HEAD request (no model bytes).
    pub async fn open(url: &str, options: WebOptions) -> Result<Self> {
        let mut reader = Self {
            url: url.to_string(),
            len: 0,
            validator: None,
            options,
            cache: None,
            ignores_range: Cell::new(false),
            body: RefCell::new(None),
            stats: RefCell::new(FetchStats::default()),
        };
        let response = reader.with_retries(|| reader.head()).await?;
        let headers = response.headers();
        let get = |name: &str| headers.get(name).ok().flatten();
        let len = get("content-length").and_then(|v| v.trim().parse::<u64>().ok()).ok_or_else(|| LoadError::Http {
            url: url.to_string(),
            start: 0,
            end: 0,
            status: Some(response.status()),
            message: "the server sent no Content-Length for HEAD".to_string(),
        })?;
        reader.len = len;
        reader.validator = cache::validator(get("etag").as_deref(), get("last-modified").as_deref(), len);
        if reader.options.cache && reader.validator.is_some() {
            reader.cache = open_cache().await;
        }
        Ok(reader)
    }

    /// The file's validator when its ranges go to the cache (None: nothing is cached).
    pub fn cache_validator(&self) -> Option<&str> {
        self.cache.as_ref().and(self.validator.as_deref())
    }

    pub fn stats(&self) -> FetchStats {
        self.stats.borrow().clone()
    }

    fn aborted(&self) -> bool {
        self.options.signal.as_ref().is_some_and(AbortSignal::aborted)
    }

    fn abort_error(&self) -> LoadError {
        LoadError::Aborted { url: self.url.clone() }
    }

    fn http_error(&self, range: &Range<u64>, status: Option<u16>, message: impl Into<String>) -> LoadError {
        LoadError::Http { url: self.url.clone(), start: range.start, end: range.end, status, message: message.into() }
    }

    fn range_error(&self, range: &Range<u64>, status: u16, message: impl Into<String>) -> LoadError {
        LoadError::BadRange {
            url: self.url.clone(),
            start: range.start,
            end: range.end,
            status,
            message: message.into(),
        }
    }

    /// A failed promise: an abort if the signal fired, else a network error worth retrying.
    fn rejected(&self, range: &Range<u64>, status: Option<u16>, e: &JsValue) -> Attempt {
        if self.aborted() {
            Attempt::Fatal(self.abort_error())
        } else {
            Attempt::Retry(self.http_error(range, status, js_text(e)))
        }
    }

    async fn with_retries<T, F, Fut>(&self, mut attempt: F) -> Result<T, LoadError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Attempt>>,
    {
        let mut tries = 0u32;
        loop {
            if self.aborted() {
                return Err(self.abort_error());
            }
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(Attempt::Retry(_)) if tries < self.options.retries => {
                    self.stats.borrow_mut().retries += 1;
                    sleep(self.options.backoff_ms * f64::from(1u32 << tries.min(16))).await;
                    tries += 1;
                }
                Err(Attempt::Retry(e) | Attempt::Fatal(e)) => return Err(e),
            }
        }
    }

    async fn send(&self, method: &str, range: &Range<u64>, range_header: Option<String>) -> Result<Response, Attempt> {
        let init = RequestInit::new();
        init.set_method(method);
        // The persistent cache is ours; the HTTP cache would hide requests and double memory.
        init.set_cache(RequestCache::NoStore);
        init.set_signal(self.options.signal.as_ref());
        let headers = Headers::new().map_err(|e| Attempt::Fatal(self.http_error(range, None, js_text(&e))))?;
        if let Some(value) = range_header {
            headers.set("Range", &value).map_err(|e| Attempt::Fatal(self.http_error(range, None, js_text(&e))))?;
        }
        init.set_headers_headers(&headers);
        let request = Request::new_with_str_and_init(&self.url, &init)
            .map_err(|e| Attempt::Fatal(self.http_error(range, None, js_text(&e))))?;
        self.stats.borrow_mut().requests += 1;
        let response = JsFuture::from(global_fetch(&request)).await.map_err(|e| self.rejected(range, None, &e))?;
        let response: Response =
            response.dyn_into().map_err(|e| Attempt::Fatal(self.http_error(range, None, js_text(&e))))?;
        let status = response.status();
        match status {
            200..=299 => Ok(response),
            408 | 429 | 500..=599 => {
                Err(Attempt::Retry(self.http_error(range, Some(status), format!("HTTP status {status}"))))
            }
            _ => Err(Attempt::Fatal(self.http_error(range, Some(status), format!("HTTP status {status}")))),
        }
    }

    async fn head(&self) -> Result<Response, Attempt> {
        self.send("HEAD", &(0..0), None).await
    }

    /// One `Range` request; a 200 switches the reader to streaming the whole body.
    async fn fetch_range(&self, range: &Range<u64>) -> Result<Vec<u8>, Attempt> {
        if self.ignores_range.get() {
            return self.stream_range(range).await;
        }
        let header = format!("bytes={}-{}", range.start, range.end - 1);
        let response = self.send("GET", range, Some(header)).await?;
        let status = response.status();
        if status == 200 {
            self.ignores_range.set(true);
            self.stats.borrow_mut().streamed_whole_body = true;
            *self.body.borrow_mut() = Some(self.body_stream(range, response)?);
            return self.stream_range(range).await;
        }
        let content_range = response.headers().get("content-range").ok().flatten().unwrap_or_default();
        let want_last = range.end - 1;
        match parse_content_range(&content_range) {
            Some((start, last, total)) if start == range.start && last == want_last && total == self.len => {}
            _ => {
                return Err(Attempt::Fatal(self.range_error(
                    range,
                    status,
                    format!(
                        "asked for bytes {}-{want_last}/{}, the server sent Content-Range '{content_range}'",
                        range.start, self.len
                    ),
                )))
            }
        }
        let body =
            response.array_buffer().map_err(|e| Attempt::Fatal(self.http_error(range, Some(status), js_text(&e))))?;
        let body = JsFuture::from(body).await.map_err(|e| self.rejected(range, Some(status), &e))?;
        let bytes = Uint8Array::new(&body).to_vec();
        self.stats.borrow_mut().bytes_fetched += bytes.len() as u64;
        if bytes.len() as u64 != range.end - range.start {
            return Err(Attempt::Retry(self.range_error(
                range,
                status,
                format!("the body has {} bytes, expected {}", bytes.len(), range.end - range.start),
            )));
        }
        Ok(bytes)
    }

    fn body_stream(&self, range: &Range<u64>, response: Response) -> Result<BodyStream, Attempt> {
        let sent = response.headers().get("content-length").ok().flatten().and_then(|v| v.trim().parse::<u64>().ok());
        if sent.is_some_and(|n| n != self.len) {
            return Err(Attempt::Fatal(self.range_error(
                range,
                200,
                format!("the whole body is {} bytes but the file was {}", sent.unwrap_or(0), self.len),
            )));
        }
        let body =
            response.body().ok_or_else(|| Attempt::Fatal(self.range_error(range, 200, "a 200 without a body")))?;
        let reader: ReadableStreamDefaultReader =
            body.get_reader().dyn_into().map_err(|e| Attempt::Fatal(self.http_error(range, Some(200), js_text(&e))))?;
        Ok(BodyStream { reader, pos: 0, pending: Vec::new(), behind: Vec::new() })
    }

    /// `range` from the whole-body stream, (re)starting the download when the stream is gone
    /// or already past `range.start`.
    async fn stream_range(&self, range: &Range<u64>) -> Result<Vec<u8>, Attempt> {
        // The stream is taken out while in use (no borrow across awaits) and put back only
        // when the read succeeded; a failed stream is dropped and the next attempt restarts.
        let held = self.body.borrow_mut().take();
        let mut stream = match held {
            Some(s) if s.pos - s.behind.len() as u64 <= range.start => s,
            other => {
                // A stream already past the range stops downloading.
                if let Some(old) = other {
                    let _ = old.reader.cancel();
                }
                let response = self.send("GET", range, None).await?;
                self.body_stream(range, response)?
            }
        };
        let out = self.read_stream(&mut stream, range).await?;
        *self.body.borrow_mut() = Some(stream);
        Ok(out)
    }

    async fn read_stream(&self, stream: &mut BodyStream, range: &Range<u64>) -> Result<Vec<u8>, Attempt> {
        let want = (range.end - range.start) as usize;
        let mut out = Vec::with_capacity(want);
        if range.start < stream.pos {
            let behind_start = stream.pos - stream.behind.len() as u64;
            let a = (range.start - behind_start) as usize;
            let b = (range.end.min(stream.pos) - behind_start) as usize;
            out.extend_from_slice(&stream.behind[a..b]);
            if range.end <= stream.pos {
                return Ok(out);
            }
        }
        while out.len() < want {
            if stream.pending.is_empty() {
                stream.pending = self.next_chunk(stream, range).await?;
            }
            let from = range.start + out.len() as u64;
            let end = stream.pos + stream.pending.len() as u64;
            if end <= from {
                stream.pos = end;
                stream.pending.clear();
                continue;
            }
            let a = (from - stream.pos) as usize;
            let b = (end.min(range.end) - stream.pos) as usize;
            out.extend_from_slice(&stream.pending[a..b]);
            stream.pending.drain(..b);
            stream.pos += b as u64;
        }
        let keep = out.len().min(KEEP_BEHIND);
        stream.behind = out[out.len() - keep..].to_vec();
        Ok(out)
    }

    async fn next_chunk(&self, stream: &BodyStream, range: &Range<u64>) -> Result<Vec<u8>, Attempt> {
        let result = JsFuture::from(stream.reader.read()).await.map_err(|e| self.rejected(range, Some(200), &e))?;
        let done = js_sys::Reflect::get(&result, &"done".into()).ok().and_then(|v| v.as_bool()).unwrap_or(true);
        if done {
            return Err(Attempt::Retry(self.range_error(
                range,
                200,
                format!("the body ended at byte {} of {}", stream.pos + stream.pending.len() as u64, self.len),
            )));
        }
        let value = js_sys::Reflect::get(&result, &"value".into()).unwrap_or(JsValue::UNDEFINED);
        let chunk = Uint8Array::new(&value).to_vec();
        self.stats.borrow_mut().bytes_fetched += chunk.len() as u64;
        Ok(chunk)
    }

    async fn cached(&self, range: &Range<u64>) -> Option<Vec<u8>> {
        let (cache, validator) = (self.cache.as_ref()?, self.validator.as_ref()?);
        let key = cache::key(&self.url, validator, range);
        let found = JsFuture::from(cache.match_with_str(&key)).await.ok()?;
        let response: Response = found.dyn_into().ok()?;
        let headers = response.headers();
        let check = EntryCheck::parse(
            headers.get(cache::LENGTH_HEADER).ok().flatten().as_deref(),
            headers.get(cache::HASH_HEADER).ok().flatten().as_deref(),
        );
        let body = match response.array_buffer() {
            Ok(p) => JsFuture::from(p).await.ok(),
            Err(_) => None,
        };
        let bytes = body.map(|b| Uint8Array::new(&b).to_vec());
        match (check, bytes) {
            (Some(check), Some(bytes)) if check.accepts(range, &bytes) => {
                self.stats.borrow_mut().cache_hits += 1;
                Some(bytes)
            }
            _ => {
                self.stats.borrow_mut().cache_rejected += 1;
                let _ = JsFuture::from(cache.delete_with_str(&key)).await;
                None
            }
        }
    }

    /// Stores `bytes` for `range`; a full quota only means the next load fetches again.
    async fn store(&self, range: &Range<u64>, bytes: &[u8]) {
        let (Some(cache), Some(validator)) = (self.cache.as_ref(), self.validator.as_ref()) else { return };
        let (len, hash) = EntryCheck::of(bytes).header_values();
        let Ok(headers) = Headers::new() else { return };
        let _ = headers.set("content-type", "application/octet-stream");
        let _ = headers.set(cache::LENGTH_HEADER, &len);
        let _ = headers.set(cache::HASH_HEADER, &hash);
        let init = ResponseInit::new();
        init.set_status(200);
        init.set_headers_headers(&headers);
        let body = Uint8Array::from(bytes);
        let Ok(response) = Response::new_with_opt_js_u8_array_and_init(Some(&body), &init) else { return };
        let _ = JsFuture::from(cache.put_with_str(&cache::key(&self.url, validator, range), &response)).await;
    }
}

impl RangeReader for WebReader {
    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> &str {
        &self.url
    }

    async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        check_range(&self.url, &range, self.len)?;
        if self.aborted() {
            return Err(self.abort_error().into());
        }
        if range.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(bytes) = self.cached(&range).await {
            return Ok(bytes);
        }
        if self.cache.is_some() {
            self.stats.borrow_mut().cache_misses += 1;
        }
        let bytes = self.with_retries(|| self.fetch_range(&range)).await?;
        self.store(&range, &bytes).await;
        Ok(bytes)
    }
}
