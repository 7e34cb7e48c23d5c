//! Native range readers: local files, and HTTP(S) URLs read with `Range` requests.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{check_range, parse_content_range, LoadError, RangeReader, INITIAL_HEADER_READ};
use crate::Result;

/// A file path or an `http://` / `https://` URL.
pub enum NativeSource {
    File(FileReader),
    Http(HttpReader),
}

/// Whether `location` is an `http://` or `https://` URL rather than a path.
pub fn is_http_url(location: &str) -> bool {
    location.starts_with("http://") || location.starts_with("https://")
}

impl NativeSource {
    pub fn open(location: &str) -> Result<Self> {
        if is_http_url(location) {
            Ok(Self::Http(HttpReader::open(location)?))
        } else {
            Ok(Self::File(FileReader::open(location)?))
        }
    }
}

impl RangeReader for NativeSource {
    fn len(&self) -> u64 {
        match self {
            Self::File(r) => r.len(),
            Self::Http(r) => r.len(),
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::File(r) => r.name(),
            Self::Http(r) => r.name(),
        }
    }

    async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        match self {
            Self::File(r) => r.read_range(range).await,
            Self::Http(r) => r.read_range(range).await,
        }
    }
}

pub struct FileReader {
    path: PathBuf,
    name: String,
    file: Mutex<File>,
    len: u64,
}

impl FileReader {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let name = path.display().to_string();
        let fail = |e: std::io::Error| LoadError::File { path: name.clone(), message: e.to_string() };
        let file = File::open(&path).map_err(fail)?;
        let len = file.metadata().map_err(fail)?.len();
        Ok(Self { path, name, file: Mutex::new(file), len })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_sync(&self, range: Range<u64>) -> Result<Vec<u8>> {
        check_range(&self.name, &range, self.len)?;
        let fail = |e: std::io::Error| LoadError::File { path: self.name.clone(), message: e.to_string() };
        let mut file = self.file.lock().map_err(|_| LoadError::File {
            path: self.name.clone(),
            message: "an earlier read panicked".to_string(),
        })?;
        file.seek(SeekFrom::Start(range.start)).map_err(fail)?;
        let mut bytes = Vec::new();
        (&mut *file).take(range.end - range.start).read_to_end(&mut bytes).map_err(fail)?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(fail(std::io::ErrorKind::UnexpectedEof.into()).into());
        }
        Ok(bytes)
    }
}

impl RangeReader for FileReader {
    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> &str {
        &self.name
    }

    async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        self.read_sync(range)
    }
}

/// How long a response may stall (no header, or no body bytes) before the read fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads an HTTP(S) resource with `Range` requests. A server that ignores `Range` and sends
/// the whole body is read once; later ranges are served from that copy.
///
/// Every later response must be the first one's version: its Content-Range total is the file's
/// length and its ETag (sent back in `If-Range` when strong) and Last-Modified are the first's,
/// else the read fails with [`LoadError::Changed`]. Bodies are read up to what was asked for.
pub struct HttpReader {
    url: String,
    agent: ureq::Agent,
    len: u64,
    /// The first response's ETag and Last-Modified.
    etag: Option<String>,
    last_modified: Option<String>,
    /// The first bytes, fetched by `open` to learn the length; header reads start here.
    head: Vec<u8>,
    whole_body: Mutex<Option<Arc<Vec<u8>>>>,
    requests: AtomicU64,
    bytes_fetched: AtomicU64,
}

/// What one GET returned, with the response's ETag and Last-Modified.
enum Fetched {
    Partial { bytes: Vec<u8>, total: u64 },
    Whole(Vec<u8>),
}

struct Validators {
    etag: Option<String>,
    last_modified: Option<String>,
}

impl HttpReader {
    /// Requests the first [`INITIAL_HEADER_READ`] bytes, which also tells the file's length.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_with_timeout(url, READ_TIMEOUT)
    }

    /// [`Self::open`] with another stall limit for each response's header and each body read.
    pub fn open_with_timeout(url: &str, read_timeout: Duration) -> Result<Self> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(read_timeout))
            .timeout_per_read(Some(read_timeout))
            .build()
            .into();
        let mut reader = Self {
            url: url.to_string(),
            agent,
            len: 0,
            etag: None,
            last_modified: None,
            head: Vec::new(),
            whole_body: Mutex::new(None),
            requests: AtomicU64::new(0),
            bytes_fetched: AtomicU64::new(0),
        };
        let (fetched, validators) = reader.get(0..INITIAL_HEADER_READ, true)?;
        reader.etag = validators.etag;
        reader.last_modified = validators.last_modified;
        match fetched {
            Fetched::Partial { bytes, total } => {
                reader.len = total;
                reader.head = bytes;
            }
            Fetched::Whole(body) => {
                reader.len = body.len() as u64;
                reader.whole_body = Mutex::new(Some(Arc::new(body)));
            }
        }
        Ok(reader)
    }

    /// GET requests sent so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes received so far.
    pub fn bytes_fetched(&self) -> u64 {
        self.bytes_fetched.load(Ordering::Relaxed)
    }

    fn error(&self, range: &Range<u64>, status: Option<u16>, message: impl Into<String>) -> LoadError {
        LoadError::Http {
            url: self.url.clone(),
            start: range.start,
            end: range.end,
            status,
            message: message.into(),
        }
    }

    fn changed(&self, message: String) -> LoadError {
        LoadError::Changed { url: self.url.clone(), message }
    }

    /// A later response's validators against the first response's.
    fn check_validators(&self, got: &Validators) -> Result<(), LoadError> {
        if let (Some(got), Some(want)) = (&got.etag, &self.etag) {
            if got != want {
                return Err(self.changed(format!("ETag {got}, where the first response had {want}")));
            }
        }
        if let (Some(got), Some(want)) = (&got.last_modified, &self.last_modified) {
            if got != want {
                return Err(self.changed(format!("Last-Modified {got}, where the first response had {want}")));
            }
        }
        Ok(())
    }

    /// One GET for `range` (non-empty). With `clamp_to_file`, a range past the end of a shorter
    /// file is answered with what exists, as servers do for the opening read. The body is read
    /// up to the bytes asked for (the whole file for a 200 once its length is known).
    fn get(&self, range: Range<u64>, clamp_to_file: bool) -> Result<(Fetched, Validators), LoadError> {
        let last = range.end.saturating_sub(1);
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut request = self.agent.get(&self.url).header("Range", format!("bytes={}-{last}", range.start));
        if let Some(tag) = crate::loader::cache::strong_etag(self.etag.as_deref()) {
            request = request.header("If-Range", tag);
        }
        let mut response = request.call().map_err(|e| self.error(&range, None, e.to_string()))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
        };
        let content_range = header("content-range");
        let validators = Validators { etag: header("etag"), last_modified: header("last-modified") };
        if !clamp_to_file {
            self.check_validators(&validators)?;
        }
        let limit = match status {
            206 => range.end - range.start,
            // The opening read learns the length from this body; its Content-Length bounds it.
            _ if clamp_to_file => header("content-length").and_then(|n| n.parse().ok()).unwrap_or(u64::MAX),
            _ => self.len,
        };
        let body = response
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| self.error(&range, Some(status), format!("reading the body (at most {limit} bytes): {e}")))?;
        self.bytes_fetched.fetch_add(body.len() as u64, Ordering::Relaxed);
        let fetched = match status {
            200 => Fetched::Whole(body),
            206 => {
                let header = content_range
                    .ok_or_else(|| self.error(&range, Some(206), "206 without Content-Range"))?;
                let (start, end_inclusive, total) = parse_content_range(&header).ok_or_else(|| {
                    self.error(&range, Some(206), format!("unreadable Content-Range '{header}'"))
                })?;
                if !clamp_to_file && total != self.len {
                    return Err(self.changed(format!("Content-Range '{header}' for a file of {} bytes", self.len)));
                }
                let expected_end = if clamp_to_file { last.min(total.saturating_sub(1)) } else { last };
                let body_matches = end_inclusive
                    .checked_sub(start)
                    .and_then(|n| n.checked_add(1))
                    .is_some_and(|n| n == body.len() as u64);
                if start != range.start || end_inclusive != expected_end || !body_matches {
                    return Err(self.error(
                        &range,
                        Some(206),
                        format!("server sent '{header}' with {} bytes", body.len()),
                    ));
                }
                Fetched::Partial { bytes: body, total }
            }
            other => return Err(self.error(&range, Some(other), format!("HTTP status {other}"))),
        };
        Ok((fetched, validators))
    }

    fn read_sync(&self, range: Range<u64>) -> Result<Vec<u8>> {
        check_range(&self.url, &range, self.len)?;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(bytes) = slice_of(&self.head, &range) {
            return Ok(bytes);
        }
        let whole = self
            .whole_body
            .lock()
            .map_err(|_| self.error(&range, None, "an earlier read panicked"))?
            .clone();
        if let Some(body) = whole {
            return slice_of(&body, &range)
                .ok_or_else(|| self.error(&range, Some(200), "the body is shorter than before").into());
        }
        match self.get(range.clone(), false)?.0 {
            Fetched::Partial { bytes, .. } => Ok(bytes),
            Fetched::Whole(body) => {
                if body.len() as u64 != self.len {
                    return Err(self.changed(format!("a whole body of {} bytes for a file of {}", body.len(), self.len)).into());
                }
                let bytes = slice_of(&body, &range);
                if let Ok(mut slot) = self.whole_body.lock() {
                    *slot = Some(Arc::new(body));
                }
                bytes.ok_or_else(|| self.error(&range, Some(200), "short body").into())
            }
        }
    }
}

impl RangeReader for HttpReader {
    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> &str {
        &self.url
    }

    async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        self.read_sync(range)
    }
}

fn slice_of(bytes: &[u8], range: &Range<u64>) -> Option<Vec<u8>> {
    let start = usize::try_from(range.start).ok()?;
    let end = usize::try_from(range.end).ok()?;
    bytes.get(start..end).map(<[u8]>::to_vec)
}
