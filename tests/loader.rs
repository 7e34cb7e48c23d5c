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
