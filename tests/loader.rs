//! The header fetch loop over a counting in-memory reader, and the native readers: a local
//! file and an HTTP server on localhost that honours Range, ignores it, or misbehaves.

mod common;

use std::cell::RefCell;
use std::ops::Range;

use common::http::{serve, ServerMode};
use common::GgufWriter;
use weft::format::{GgmlType, ModelHeader};
use weft::loader::native::{FileReader, HttpReader, NativeSource};
use weft::loader::{read_header, LoadError, RangeReader, INITIAL_HEADER_READ};

/// A GGUF whose header is larger than the first read, so the loop must ask for more, and
/// whose data is larger than its header.
fn big_header_gguf() -> Vec<u8> {
    let tokens: Vec<String> = (0..200_000).map(|i| format!("token-{i}")).collect();
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut w = GgufWriter::new(3, 1, 2);
    w.kv_str("general.architecture", "llama").kv_str_array("tokenizer.ggml.tokens", &refs);
    w.tensor("w", &[32, 100_000], GgmlType::Q8_0.id(), 0);
    w.finish(32, 100_000 * 34)
}

struct MemoryReader {
    bytes: Vec<u8>,
    reads: RefCell<Vec<Range<u64>>>,
}

impl RangeReader for MemoryReader {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn name(&self) -> &str {
        "memory"
    }

    async fn read_range(&self, range: Range<u64>) -> weft::Result<Vec<u8>> {
        weft::loader::check_range("memory", &range, self.len())?;
        self.reads.borrow_mut().push(range.clone());
        Ok(self.bytes[range.start as usize..range.end as usize].to_vec())
    }
}

#[test]
fn header_loop_reads_only_the_header() -> anyhow::Result<()> {
    let file = big_header_gguf();
    let reader = MemoryReader { bytes: file.clone(), reads: RefCell::new(Vec::new()) };
    let read = pollster::block_on(read_header(&reader))?;
    let ModelHeader::Gguf(header) = &read.header else { anyhow::bail!("not GGUF") };
    assert!(header.header_len > INITIAL_HEADER_READ);
    let reads = reader.reads.borrow();
    assert_eq!(reads.first(), Some(&(0..INITIAL_HEADER_READ)));
    assert!(reads.windows(2).all(|w| w[0].end == w[1].start), "reads are contiguous: {reads:?}");
    assert!(reads.len() <= 4, "{reads:?}");
    assert_eq!(read.bytes_read, reads.last().map_or(0, |r| r.end));
    assert!(read.bytes_read < file.len() as u64);
    Ok(())
}

#[test]
fn file_reader_reads_ranges() -> anyhow::Result<()> {
    let path = std::env::temp_dir().join(format!("weft-loader-{}.gguf", std::process::id()));
    let file = big_header_gguf();
    std::fs::write(&path, &file)?;
    let reader = FileReader::open(&path)?;
    assert_eq!(reader.len(), file.len() as u64);
    let bytes = pollster::block_on(reader.read_range(5..70))?;
    assert_eq!(bytes, &file[5..70]);
    let past_end = pollster::block_on(reader.read_range(10..file.len() as u64 + 1));
    assert!(matches!(past_end, Err(weft::Error::Load(LoadError::OutOfRange { .. }))));
    let read = pollster::block_on(read_header(&NativeSource::open(&path.to_string_lossy())?))?;
    assert_eq!(read.header.tensors().len(), 1);
    std::fs::remove_file(&path)?;
    let missing = FileReader::open(&path);
    assert!(matches!(missing, Err(weft::Error::Load(LoadError::File { .. }))));
    Ok(())
}

#[test]
fn http_reader_with_range_requests() -> anyhow::Result<()> {
    let file = big_header_gguf();
    let (url, seen) = serve(file.clone(), ServerMode::Ranges)?;
    let reader = HttpReader::open(&url)?;
    assert_eq!(reader.len(), file.len() as u64);
    let read = pollster::block_on(read_header(&reader))?;
    assert_eq!(read.header.tensors().len(), 1);
    assert_eq!(pollster::block_on(reader.read_range(1_500_000..1_500_010))?, &file[1_500_000..1_500_010]);
    let seen = seen.lock().map_err(|_| anyhow::anyhow!("log poisoned"))?.clone();
    assert!(seen.iter().all(Option::is_some), "every request has a Range: {seen:?}");
    assert_eq!(seen.first(), Some(&Some(format!("0-{}", INITIAL_HEADER_READ - 1))));
    assert_eq!(reader.requests() as usize, seen.len());
    assert!(reader.bytes_fetched() < file.len() as u64);
    Ok(())
}

#[test]
fn http_reader_when_the_server_ignores_range() -> anyhow::Result<()> {
    let file = big_header_gguf();
    let (url, _) = serve(file.clone(), ServerMode::WholeBody)?;
    let reader = HttpReader::open(&url)?;
    let read = pollster::block_on(read_header(&reader))?;
    assert_eq!(read.header.tensors().len(), 1);
    assert_eq!(pollster::block_on(reader.read_range(100..200))?, &file[100..200]);
    assert_eq!(reader.requests(), 1, "the whole body is read once");
    Ok(())
}

#[test]
fn http_reader_rejects_a_wrong_content_range() -> anyhow::Result<()> {
    let (url, _) = serve(big_header_gguf(), ServerMode::WrongContentRange)?;
    match HttpReader::open(&url) {
        Err(weft::Error::Load(LoadError::Http { url: u, start: 0, status: Some(206), .. })) => assert_eq!(u, url),
        Err(other) => anyhow::bail!("unexpected error {other}"),
        Ok(_) => anyhow::bail!("accepted a mismatched Content-Range"),
    }
    Ok(())
}

#[test]
fn content_range_forms() {
    use weft::loader::parse_content_range;
    assert_eq!(parse_content_range("bytes 0-99/1000"), Some((0, 99, 1000)));
    assert_eq!(parse_content_range("bytes 5-5/6"), Some((5, 5, 6)));
    assert_eq!(parse_content_range("bytes 0-99/*"), None);
    assert_eq!(parse_content_range("items 0-99/1000"), None);
    assert_eq!(parse_content_range(""), None);
}

#[test]
fn fnv1a64_known_values() {
    use weft::loader::cache::fnv1a64;
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn cache_validator_is_the_strong_etag_and_the_length() {
    use weft::loader::cache::{strong_etag, validator};
    assert_eq!(validator(Some("\"abc\""), 100).as_deref(), Some("etag:\"abc\";len:100"));
    assert_ne!(validator(Some("\"abc\""), 100), validator(Some("\"abc\""), 101));
    // A weak ETag (or Last-Modified alone) survives a same-size, same-time replacement of the
    // file: ranges cached under it could mix two files, so nothing is cached.
    assert_eq!(validator(Some("W/\"abc\""), 100), None);
    assert_eq!(validator(None, 100), None);
    assert_eq!(validator(Some(" "), 100), None);
    assert_eq!(validator(Some("abc"), 100), None, "an unquoted tag is malformed");
    assert_eq!(strong_etag(Some(" \"x\" ")).as_deref(), Some("\"x\""));
    assert_eq!(strong_etag(Some("W/\"x\"")), None);
}

#[test]
fn fnv1a64_continues_over_chunks() {
    use weft::loader::cache::{fnv1a64, fnv1a64_update, FNV1A64_START};
    let bytes = b"the same bytes in any number of chunks";
    let chunked = bytes.chunks(5).fold(FNV1A64_START, fnv1a64_update);
    assert_eq!(chunked, fnv1a64(bytes));
}

#[test]
fn cache_keys_separate_url_version_and_range() {
    use weft::loader::cache::key;
    let url = "https://example.com/m.gguf?x=1#frag";
    let a = key(url, "etag:\"1\";len:9", &(0..4));
    assert!(a.starts_with("https://"), "{a}");
    // The Cache API drops fragments, so nothing of the parts may read as one.
    assert!(!a.contains('#'), "{a}");
    assert_ne!(a, key(url, "etag:\"2\";len:9", &(0..4)));
    assert_ne!(a, key(url, "etag:\"1\";len:9", &(0..5)));
    assert_ne!(a, key("https://example.com/m.gguf?x=2#frag", "etag:\"1\";len:9", &(0..4)));
    assert_eq!(a, key(url, "etag:\"1\";len:9", &(0..4)));
}

#[test]
fn cache_entries_are_used_only_when_length_and_hash_match() {
    use weft::loader::cache::EntryCheck;
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let range = 1000..1000 + bytes.len() as u64;
    let check = EntryCheck::of(&bytes);
    let (len, hash) = check.header_values();
    let parsed = EntryCheck::parse(Some(&len), Some(&hash)).expect("own header values parse");
    assert_eq!(parsed, check);
    assert!(parsed.accepts(&range, &bytes));

    let mut flipped = bytes.clone();
    flipped[2048] ^= 1;
    assert!(!parsed.accepts(&range, &flipped), "a changed byte");
    assert!(!parsed.accepts(&range, &bytes[..4095]), "a truncated entry");
    assert!(!parsed.accepts(&(1000..5000), &bytes), "an entry stored for another range length");
    assert_eq!(EntryCheck::parse(None, Some(&hash)), None);
    assert_eq!(EntryCheck::parse(Some(&len), Some("not hex")), None);
    assert_eq!(EntryCheck::parse(Some("-1"), Some(&hash)), None);
}

/// Records the ranges a load asks for.
struct Recording<R> {
    inner: R,
    reads: RefCell<Vec<Range<u64>>>,
}

impl<R: RangeReader> RangeReader for Recording<R> {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn read_range(&self, range: Range<u64>) -> weft::Result<Vec<u8>> {
        self.reads.borrow_mut().push(range.clone());
        self.inner.read_range(range).await
    }
}

/// A reader that can only stream the file (a server that ignores Range) relies on the loader
/// asking for the weights front to back, one read per layer group; the SmolLM2 GGUF stores
/// blk.10 before blk.2.
#[test]
fn weights_are_read_in_file_order_one_read_per_group() -> anyhow::Result<()> {
    use weft::gpu::{BackendChoice, GpuContext};
    use weft::model::{self, EngineOptions, WeightOptions};
    const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    anyhow::ensure!(std::path::Path::new(MODEL).exists(), "{MODEL} missing: run scripts/fetch-model.sh");
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let reader = Recording { inner: FileReader::open(MODEL)?, reads: RefCell::new(Vec::new()) };
    let engine = EngineOptions { max_seq: 16, max_batch: 4, ..Default::default() };
    let mut groups = 0;
    pollster::block_on(model::open(&ctx, &reader, engine, WeightOptions::default(), &mut |p| {
        if p.phase == model::Phase::Weights {
            groups = p.steps;
        }
    }))?;
    let reads = reader.reads.into_inner();
    let header = weft::format::detect_and_parse(&std::fs::read(MODEL)?, None)?;
    let data_start = header.tensors().iter().map(|t| t.range.start).min().unwrap_or(0);
    // Header reads come first and may run past the start of the data; the rest are the weights.
    let weights: Vec<&Range<u64>> = reads.iter().filter(|r| r.start >= data_start).collect();
    assert_eq!(groups, 32, "embedding, 30 layers, output norm");
    assert_eq!(weights.len(), groups, "{reads:?}");
    for pair in weights.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{:?} then {:?}", pair[0], pair[1]);
    }
    Ok(())
}
