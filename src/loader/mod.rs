//! Reading byte ranges of model files, wherever they live, and fetching just their headers.
//!
//! [`RangeReader`] is the one interface the model loader reads through. Native builds get a
//! local-file and an HTTP(S) implementation in [`native`]; the browser implements the same trait
//! with `fetch` and `Range` headers.

pub mod cache;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
#[cfg(target_arch = "wasm32")]
pub mod web;

use std::ops::Range;

use thiserror::Error;

use crate::format::{detect_and_parse, FormatError, ModelHeader};
use crate::Result;

/// First read when fetching a header: most headers fit, and it is small next to any model.
pub const INITIAL_HEADER_READ: u64 = 1024 * 1024;
/// Most reads the header loop makes before giving up (each asks for everything known missing).
pub const MAX_HEADER_READS: u32 = 32;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error("cannot read '{path}': {message}")]
    File { path: String, message: String },

    /// A failed request: no response (`status` None) or an error status.
    #[error("GET {url} bytes {start}..{end}: {message}")]
    Http { url: String, start: u64, end: u64, status: Option<u16>, message: String },

    /// A response whose `Content-Range`, total length or body length is not what was asked for.
    #[error("GET {url} bytes {start}..{end} (status {status}): {message}")]
    BadRange { url: String, start: u64, end: u64, status: u16, message: String },

    #[error("loading {url} was aborted")]
    Aborted { url: String },

    /// The file is not the version the load started with: a response's validator or total
    /// length differs from the first one's. Nothing of the mixed bytes is used.
    #[error("{url} changed on the server while it was being read ({message}); load it again")]
    Changed { url: String, message: String },

    #[error("{source_name}: bytes {start}..{end} lie outside the {len}-byte file")]
    OutOfRange { source_name: String, start: u64, end: u64, len: u64 },

    #[error("{source_name}: the header was still incomplete after {reads} reads ({have} bytes)")]
    HeaderUnfinished { source_name: String, reads: u32, have: u64 },
}

/// Random access to the bytes of one file.
///
/// Futures are not required to be `Send`: in the browser they wrap JavaScript promises.
#[allow(async_fn_in_trait)]
pub trait RangeReader {
    /// Total length of the file in bytes.
    fn len(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The path or URL, for messages.
    fn name(&self) -> &str;

    /// Exactly the bytes in `range`; a range past the end of the file is an error.
    async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>>;
}

/// A parsed header and what it cost to fetch.
#[derive(Debug)]
pub struct HeaderRead {
    pub header: ModelHeader,
    /// Bytes read from the start of the file.
    pub bytes_read: u64,
    pub reads: u32,
}

/// Reads the first [`INITIAL_HEADER_READ`] bytes (or the whole file if smaller), parses, and
/// on [`FormatError::NeedMore`] reads exactly the missing bytes, a bounded number of times.
pub async fn read_header<R: RangeReader>(reader: &R) -> Result<HeaderRead> {
    let len = reader.len();
    let mut prefix = reader.read_range(0..INITIAL_HEADER_READ.min(len)).await?;
    let mut reads = 1;
    loop {
        let have = prefix.len() as u64;
        match detect_and_parse(&prefix, Some(len)) {
            Ok(header) => return Ok(HeaderRead { header, bytes_read: have, reads }),
            Err(FormatError::NeedMore { needed, .. }) if needed > have && reads < MAX_HEADER_READS => {
                let more = reader.read_range(have..needed.min(len)).await?;
                prefix.extend_from_slice(&more);
                reads += 1;
            }
            Err(FormatError::NeedMore { .. }) => {
                return Err(LoadError::HeaderUnfinished {
                    source_name: reader.name().to_string(),
                    reads,
                    have,
                }
                .into())
            }
            Err(other) => return Err(other.into()),
        }
    }
}

/// Checks a requested range against the file length before any I/O.
pub fn check_range(source_name: &str, range: &Range<u64>, len: u64) -> Result<(), LoadError> {
    if range.start > range.end || range.end > len {
        return Err(LoadError::OutOfRange {
            source_name: source_name.to_string(),
            start: range.start,
            end: range.end,
            len,
        });
    }
    Ok(())
}

/// `bytes START-END/TOTAL` (END inclusive); an unknown total (`*`) is not accepted.
pub fn parse_content_range(value: &str) -> Option<(u64, u64, u64)> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (span, total) = rest.split_once('/')?;
    let (start, end) = span.split_once('-')?;
    Some((start.trim().parse().ok()?, end.trim().parse().ok()?, total.trim().parse().ok()?))
}
