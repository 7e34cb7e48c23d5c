//! The browser's range reader: `fetch` with `Range` headers, retries with backoff, an
//! `AbortSignal`, and a persistent per-range cache (the Cache API).
//!
//! A server that ignores `Range` answers 200 with the whole body. The body is then read as a
//! stream, progressively: each read takes the bytes it needs as they arrive and drops the rest,
//! so memory stays near one layer. Reads come in file order (the model loader sorts them);
//! a read behind the stream's position restarts the download from the beginning.
//!
//! Every range request names the HEAD's strong ETag in `If-Range`, and every response's ETag,
//! Last-Modified, total length and Content-Length is compared with the HEAD's: a file that
//! changed mid-load is a [`LoadError::Changed`], never a mix of two versions. A server without a
//! strong ETag gives no way to tell that ranges fetched at different times are one file, so the
//! file is then read in one streamed GET and not cached (warning `NO_STRONG_VALIDATOR`); a
//! restarted stream must repeat the bytes the last one delivered (their FNV-1a hash).

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

mod folder;
pub use folder::WebFolder;

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
    /// Codes of what made the load slower than it could be: `NO_STRONG_VALIDATOR` (the server
    /// sent no strong ETag: one streamed GET, nothing cached).
    pub warnings: Vec<String>,
}

impl FetchStats {
    /// Adds the counts of another file's reader (a folder's shards).
    pub fn add(&mut self, other: &FetchStats) {
        self.requests += other.requests;
        self.bytes_fetched += other.bytes_fetched;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
        self.cache_rejected += other.cache_rejected;
        self.retries += other.retries;
        self.streamed_whole_body |= other.streamed_whole_body;
        for w in &other.warnings {
            if !self.warnings.contains(w) {
                self.warnings.push(w.clone());
            }
        }
    }
}

/// Warning code: no strong ETag, so the file is streamed in one GET and not cached.
pub const NO_STRONG_VALIDATOR: &str = "NO_STRONG_VALIDATOR";

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
    /// Bytes of the body received so far and their FNV-1a hash.
    hashed: u64,
    hash: u64,
}

/// Most bytes kept behind the stream's position.
const KEEP_BEHIND: usize = 1 << 20;

pub struct WebReader {
    url: String,
    len: u64,
    /// The HEAD's strong ETag.
    strong_etag: Option<String>,
    /// The same, sent in `If-Range` to a server of the page's own origin (elsewhere it is not a
    /// CORS-safelisted header: every range would need a preflight the server may refuse).
    if_range: Option<String>,
    /// The HEAD's ETag (strong or weak) and Last-Modified, which every response must repeat.
    etag: Option<String>,
    last_modified: Option<String>,
    /// The cache's version key; None (nothing cached) without a strong ETag.
    validator: Option<String>,
    options: WebOptions,
    cache: Option<Cache>,
    /// Set once the server has answered a `Range` request with the whole body.
    ignores_range: Cell<bool>,
    body: RefCell<Option<BodyStream>>,
    stats: RefCell<FetchStats>,
    /// Length and hash of the longest prefix a whole-body stream has delivered: a restarted
    /// stream must deliver the same bytes.
    streamed: Cell<(u64, u64)>,
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

/// Whether `url` (absolute) is on the origin of this page or worker.
fn same_origin(url: &str) -> bool {
    js_sys::Reflect::get(&js_sys::global(), &"location".into())
        .and_then(|l| js_sys::Reflect::get(&l, &"origin".into()))
        .ok()
        .and_then(|o| o.as_string())
        .is_some_and(|origin| url == origin || url.starts_with(&format!("{origin}/")))
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
            strong_etag: None,
            if_range: None,
            etag: None,
            last_modified: None,
            validator: None,
            options,
            cache: None,
            ignores_range: Cell::new(false),
            body: RefCell::new(None),
            stats: RefCell::new(FetchStats::default()),
            streamed: Cell::new((0, cache::FNV1A64_START)),
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
        let etag = get("etag").map(|e| e.trim().to_string()).filter(|e| !e.is_empty());
        reader.strong_etag = cache::strong_etag(etag.as_deref());
        reader.if_range = reader.strong_etag.clone().filter(|_| same_origin(url));
        reader.validator = cache::validator(etag.as_deref(), len);
        reader.etag = etag;
        reader.last_modified = get("last-modified").map(|m| m.trim().to_string()).filter(|m| !m.is_empty());
        if reader.strong_etag.is_none() {
            reader.ignores_range.set(true);
            reader.stats.borrow_mut().warnings.push(NO_STRONG_VALIDATOR.to_string());
        }
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

    fn changed(&self, message: impl Into<String>) -> Attempt {
        Attempt::Fatal(LoadError::Changed { url: self.url.clone(), message: message.into() })
    }

    /// The response's validators against the HEAD's: a different ETag or Last-Modified means
    /// another version of the file. Where the HEAD had a strong ETag, a response must repeat it
    /// to be told from a changed file, unless it answered `If-Range` with a 206.
    fn check_validators(&self, response: &Response) -> Result<(), Attempt> {
        let headers = response.headers();
        let get = |name: &str| headers.get(name).ok().flatten().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        match (get("etag"), &self.etag) {
            (Some(got), Some(want)) if &got != want => {
                return Err(self.changed(format!("ETag {got}, where the first response had {want}")))
            }
            (Some(got), None) => return Err(self.changed(format!("ETag {got}, where the first response had none"))),
            (None, Some(want)) if self.strong_etag.is_some() && (response.status() == 200 || self.if_range.is_none()) => {
                return Err(self.changed(format!("a response without the ETag {want} to compare")))
            }
            _ => {}
        }
        if let (Some(got), Some(want)) = (get("last-modified"), &self.last_modified) {
            if &got != want {
                return Err(self.changed(format!("Last-Modified {got}, where the first response had {want}")));
            }
        }
        Ok(())
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
            // The range only if the file is still the HEAD's version; else the whole new file,
            // whose ETag then tells the change.
            if let Some(tag) = &self.if_range {
                headers.set("If-Range", tag).map_err(|e| Attempt::Fatal(self.http_error(range, None, js_text(&e))))?;
            }
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
            let stream = self.body_stream(range, response)?;
            self.ignores_range.set(true);
            *self.body.borrow_mut() = Some(stream);
            return self.stream_range(range).await;
        }
        self.check_validators(&response)?;
        let content_range = response.headers().get("content-range").ok().flatten().unwrap_or_default();
        let want_last = range.end - 1;
        let want = range.end - range.start;
        match parse_content_range(&content_range) {
            Some((_, _, total)) if total != self.len => {
                return Err(self.changed(format!("Content-Range '{content_range}' for a file of {} bytes", self.len)))
            }
            Some((start, last, _)) if start == range.start && last == want_last => {}
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
        let sent = response.headers().get("content-length").ok().flatten();
        if let Some(sent) = sent.filter(|n| n.trim().parse::<u64>().ok() != Some(want)) {
            return Err(Attempt::Fatal(self.range_error(
                range,
                status,
                format!("Content-Length {sent} for a range of {want} bytes"),
            )));
        }
        let body =
            response.array_buffer().map_err(|e| Attempt::Fatal(self.http_error(range, Some(status), js_text(&e))))?;
        // A body that fails mid-way (cut short, connection lost) is a network error.
        let body = JsFuture::from(body).await.map_err(|e| self.rejected(range, None, &e))?;
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

    fn check_whole(&self, range: &Range<u64>, response: &Response) -> Result<(), Attempt> {
        self.check_validators(response)?;
        let sent = response.headers().get("content-length").ok().flatten().and_then(|v| v.trim().parse::<u64>().ok());
        match sent {
            Some(n) if n != self.len => Err(self.changed(format!("a whole body of {n} bytes for a file of {}", self.len))),
            // Without a length or a strong ETag nothing shows that this body is the HEAD's file.
            None if self.strong_etag.is_none() => Err(Attempt::Fatal(self.range_error(
                range,
                200,
                "a whole-file response without Content-Length from a server without a strong ETag cannot be \
                 checked against the file's length; serve the file with Content-Length or an ETag",
            ))),
            _ => Ok(()),
        }
    }

    /// A whole-file response as a stream, once its validators and length are the HEAD's.
    fn body_stream(&self, range: &Range<u64>, response: Response) -> Result<BodyStream, Attempt> {
        if let Err(e) = self.check_whole(range, &response) {
            // Not the file the load started with: stop its download.
            if let Some(body) = response.body() {
                let _ = body.cancel();
            }
            return Err(e);
        }
        self.stats.borrow_mut().streamed_whole_body = true;
        let body =
            response.body().ok_or_else(|| Attempt::Fatal(self.range_error(range, 200, "a 200 without a body")))?;
        let reader: ReadableStreamDefaultReader =
            body.get_reader().dyn_into().map_err(|e| Attempt::Fatal(self.http_error(range, Some(200), js_text(&e))))?;
        Ok(BodyStream { reader, pos: 0, pending: Vec::new(), behind: Vec::new(), hashed: 0, hash: cache::FNV1A64_START })
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

    async fn next_chunk(&self, stream: &mut BodyStream, range: &Range<u64>) -> Result<Vec<u8>, Attempt> {
        let result = JsFuture::from(stream.reader.read()).await.map_err(|e| self.rejected(range, None, &e))?;
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
        self.hash_chunk(stream, &chunk)?;
        Ok(chunk)
    }

    /// Hashes a stream's next chunk; where it passes the end of the longest prefix an earlier
    /// stream delivered, the two hashes must agree (the same file, not a new version).
    fn hash_chunk(&self, stream: &mut BodyStream, chunk: &[u8]) -> Result<(), Attempt> {
        let (known, known_hash) = self.streamed.get();
        let mut rest = chunk;
        if stream.hashed < known && known <= stream.hashed + chunk.len() as u64 {
            let cut = (known - stream.hashed) as usize;
            stream.hash = cache::fnv1a64_update(stream.hash, &chunk[..cut]);
            stream.hashed = known;
            if stream.hash != known_hash {
                return Err(self.changed(format!("bytes 0..{known} differ from an earlier read of them")));
            }
            rest = &chunk[cut..];
        }
        stream.hash = cache::fnv1a64_update(stream.hash, rest);
        stream.hashed += rest.len() as u64;
        if stream.hashed > known {
            self.streamed.set((stream.hashed, stream.hash));
        }
        Ok(())
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
