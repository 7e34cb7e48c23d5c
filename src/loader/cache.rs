//! What a persistent per-range cache of model bytes stores and checks, independent of where it
//! lives (the browser keeps entries in the Cache API; see `web`).
//!
//! An entry is keyed by the file's URL, a validator that changes whenever the file does (its
//! strong ETag, with the length), and the byte range. It carries its length and an
//! FNV-1a hash of its bytes; an entry whose bytes do not match both is never used.

use std::ops::Range;

/// Name of the browser cache that holds model ranges.
pub const CACHE_NAME: &str = "weft-model-ranges-v1";
/// Response headers an entry carries its check values in.
pub const LENGTH_HEADER: &str = "x-weft-length";
pub const HASH_HEADER: &str = "x-weft-fnv1a64";

/// FNV-1a's starting state.
pub const FNV1A64_START: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a: enough to catch truncated or corrupted entries, cheap over ~100 MB.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_update(FNV1A64_START, bytes)
}

/// Continues an FNV-1a hash over more bytes (a stream hashed chunk by chunk).
pub fn fnv1a64_update(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A strong entity tag (`"..."`); None for a weak one (`W/"..."`), a missing or malformed one.
/// Only a strong tag identifies the bytes themselves, so only it may join ranges fetched at
/// different times into one file.
pub fn strong_etag(etag: Option<&str>) -> Option<String> {
    let tag = etag?.trim();
    (tag.len() >= 2 && tag.starts_with('"') && tag.ends_with('"')).then(|| tag.to_string())
}

/// Identifies one version of a file: its strong ETag, with the length. None without a strong
/// ETag, and then nothing is cached: a weak ETag or Last-Modified stays the same for a file
/// replaced by another of the same size and time (`cp -p`, `rsync -a`, tar), so ranges cached or
/// fetched at different times could belong to different files.
pub fn validator(etag: Option<&str>, len: u64) -> Option<String> {
    strong_etag(etag).map(|tag| format!("etag:{tag};len:{len}"))
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
