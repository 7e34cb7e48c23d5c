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

/// One cache entry's key read back: the file's URL, its validator and the byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryKey {
    pub url: String,
    pub validator: String,
    pub range: Range<u64>,
}

/// Reads a key written by [`key`]; None for anything else (the cache is ours, but a key from an
/// older layout must not break the listing).
pub fn parse_key(key: &str) -> Option<EntryKey> {
    let query = key.strip_prefix("https://weft-cache.invalid/range?")?;
    let (mut url, mut validator, mut range) = (None, None, None);
    for part in query.split('&') {
        let (name, value) = part.split_once('=')?;
        match name {
            "url" => url = Some(unescape(value)?),
            "v" => validator = Some(unescape(value)?),
            "r" => {
                let (start, end) = value.split_once('-')?;
                let (start, end) = (start.parse().ok()?, end.parse().ok()?);
                range = (start <= end).then_some(start..end);
            }
            _ => return None,
        }
    }
    Some(EntryKey { url: url?, validator: validator?, range: range? })
}

/// The inverse of `escape`; None for a malformed escape or bytes that are not UTF-8.
fn unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The file length a validator carries (`...;len:N`).
pub fn validator_len(validator: &str) -> Option<u64> {
    validator.rsplit_once(";len:")?.1.parse().ok()
}

/// One model file in the cache: every entry of one URL and validator.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedModel {
    pub url: String,
    /// Bytes the entries hold (what they take of the browser's storage). The header's prefix
    /// reads overlap the first tensors' range, so this can exceed `covered_bytes`.
    pub bytes: u64,
    /// Bytes of the file that some entry holds.
    pub covered_bytes: u64,
    /// The file's length when it was cached.
    pub file_bytes: u64,
    pub ranges: u64,
    /// The entries cover the whole file: a load makes no model-byte requests.
    pub complete: bool,
}

/// Bytes of the union of `ranges`.
pub fn covered(ranges: &[Range<u64>]) -> u64 {
    let (mut total, mut reach) = (0, 0);
    for i in crate::order::sorted_order(ranges.iter().map(|r| (r.start, r.end))) {
        let r = &ranges[i];
        let start = r.start.max(reach);
        if r.end > start {
            total += r.end - start;
            reach = r.end;
        }
    }
    total
}

/// Groups entry keys by URL and validator, in first-seen order.
pub fn summarize<'a>(keys: impl IntoIterator<Item = &'a EntryKey>) -> Vec<CachedModel> {
    let mut groups: Vec<(&str, &str, Vec<Range<u64>>)> = Vec::new();
    for k in keys {
        match groups.iter_mut().find(|(url, v, _)| *url == k.url && *v == k.validator) {
            Some((_, _, ranges)) => ranges.push(k.range.clone()),
            None => groups.push((&k.url, &k.validator, vec![k.range.clone()])),
        }
    }
    groups
        .into_iter()
        .map(|(url, validator, ranges)| {
            let file_bytes = validator_len(validator).unwrap_or(0);
            let covered_bytes = covered(&ranges);
            CachedModel {
                url: url.to_string(),
                bytes: ranges.iter().map(|r| r.end - r.start).sum(),
                covered_bytes,
                file_bytes,
                ranges: ranges.len() as u64,
                complete: file_bytes > 0 && covered_bytes >= file_bytes,
            }
        })
        .collect()
}

/// Bytes a load of `file_bytes` must still add to the cache when `covered` of them are there
/// (see [`covered`]).
pub fn bytes_to_cache(file_bytes: u64, covered: u64) -> u64 {
    file_bytes.saturating_sub(covered)
}

/// The storage estimate's free bytes (quota less usage), and whether `needed` fit in them.
pub fn fits_quota(quota: u64, usage: u64, needed: u64) -> (u64, bool) {
    let free = quota.saturating_sub(usage);
    (free, needed <= free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_what_was_written() {
        let url = "http://127.0.0.1:4173/models/a b?x=1&y=%2";
        let v = validator(Some("\"abc\""), 1234).unwrap();
        let k = key(url, &v, &(100..250));
        assert_eq!(parse_key(&k), Some(EntryKey { url: url.into(), validator: v.clone(), range: 100..250 }));
        assert_eq!(validator_len(&v), Some(1234));
        assert_eq!(parse_key("https://example.com/range?url=a&v=b&r=1-2"), None);
        assert_eq!(parse_key("https://weft-cache.invalid/range?url=a&v=b&r=5-2"), None);
        assert_eq!(parse_key("https://weft-cache.invalid/range?url=%G1&v=b&r=1-2"), None);
    }

    #[test]
    fn summaries_group_by_file_and_version() {
        let v1 = validator(Some("\"1\""), 300).unwrap();
        let v2 = validator(Some("\"2\""), 300).unwrap();
        let entry = |url: &str, v: &str, r: Range<u64>| EntryKey { url: url.into(), validator: v.into(), range: r };
        let keys = [
            entry("http://h/a", &v1, 0..100),
            entry("http://h/b", &v1, 0..50),
            // A header prefix read overlapping the first tensor range.
            entry("http://h/a", &v1, 0..40),
            entry("http://h/a", &v1, 100..300),
            entry("http://h/a", &v2, 0..10),
        ];
        let s = summarize(&keys);
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].url.as_str(), s[0].bytes, s[0].covered_bytes, s[0].ranges), ("http://h/a", 340, 300, 3));
        assert!(s[0].complete);
        assert_eq!((s[1].url.as_str(), s[1].bytes, s[1].file_bytes, s[1].complete), ("http://h/b", 50, 300, false));
        assert_eq!((s[2].bytes, s[2].complete), (10, false));
    }

    #[test]
    fn coverage_merges_overlaps_and_gaps() {
        assert_eq!(covered(&[]), 0);
        assert_eq!(covered(&[10..20, 0..5, 15..30, 29..30, 7..7]), 25);
        assert_eq!(covered(&[0..100, 10..20]), 100);
    }

    #[test]
    fn quota_counts_only_what_is_not_cached() {
        assert_eq!(bytes_to_cache(1000, 400), 600);
        assert_eq!(bytes_to_cache(1000, 1200), 0);
        assert_eq!(fits_quota(2000, 1500, 600), (500, false));
        assert_eq!(fits_quota(2000, 1400, 600), (600, true));
        assert_eq!(fits_quota(100, 300, 0), (0, true));
    }
}
