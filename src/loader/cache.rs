//! What a persistent per-range cache of model bytes stores and checks, independent of where it
//! lives (the browser keeps entries in the Cache API; see `web`).
//!
//! An entry is keyed by the file's URL, a validator that changes whenever the file does (ETag,
//! else Last-Modified, always with the length), and the byte range. It carries its length and an
//! FNV-1a hash of its bytes; an entry whose bytes do not match both is never used.

use std::ops::Range;

/// Name of the browser cache that holds model ranges.
pub const CACHE_NAME: &str = "weft-model-ranges-v1";
/// Response headers an entry carries its check values in.
pub const LENGTH_HEADER: &str = "x-weft-length";
pub const HASH_HEADER: &str = "x-weft-fnv1a64";

/// 64-bit FNV-1a: enough to catch truncated or corrupted entries, cheap over ~100 MB.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Identifies one version of a file: the strong or weak ETag if the server sends one, else
/// Last-Modified; the length is always part of it. None when the server sends neither, and then
/// nothing is cached (a changed file could not be told apart).
pub fn validator(etag: Option<&str>, last_modified: Option<&str>, len: u64) -> Option<String> {
    let tag = etag.map(str::trim).filter(|e| !e.is_empty()).map(|e| format!("etag:{e}"));
    let modified = last_modified.map(str::trim).filter(|m| !m.is_empty()).map(|m| format!("modified:{m}"));
    tag.or(modified).map(|v| format!("{v};len:{len}"))
}

/// The cache key of `range` of `url` at version `validator`. The Cache API keys entries by URL
/// and ignores fragments, so the parts go into the query of a reserved host.
pub fn key(url: &str, validator: &str, range: &Range<u64>) -> String {
    format!(
        "https://weft-cache.invalid/range?url={}&v={}&r={}-{}",
        escape(url),
        escape(validator),
        range.start,
        range.end
    )
}

/// Percent-encodes everything but unreserved characters.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The check values stored with an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryCheck {
    pub len: u64,
    pub hash: u64,
}

impl EntryCheck {
    pub fn of(bytes: &[u8]) -> Self {
        Self { len: bytes.len() as u64, hash: fnv1a64(bytes) }
    }

    /// The header values (`LENGTH_HEADER`, `HASH_HEADER`).
    pub fn header_values(&self) -> (String, String) {
        (self.len.to_string(), format!("{:016x}", self.hash))
    }

    /// Reads the header values back; None if either is missing or malformed.
    pub fn parse(len: Option<&str>, hash: Option<&str>) -> Option<Self> {
        let len = len?.trim().parse().ok()?;
        let hash = u64::from_str_radix(hash?.trim(), 16).ok()?;
        Some(Self { len, hash })
    }

    /// Whether `bytes` are the entry for `range`: the stored length is the range's, and the
    /// bytes have that length and the stored hash.
    pub fn accepts(&self, range: &Range<u64>, bytes: &[u8]) -> bool {
        let want = range.end.saturating_sub(range.start);
        self.len == want && bytes.len() as u64 == want && fnv1a64(bytes) == self.hash
    }
}
