//! Malformed headers: each gives its own typed error, never a panic, and parsing never
//! allocates in proportion to a count or length that the bytes do not back.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

use anyhow::Context;
use common::{safetensors_with_header, ty, GgufWriter};
use weft::format::{detect_and_parse, parse_gguf, parse_safetensors, FormatError, GgmlType, ModelHeader};

/// Counts the bytes this thread allocates, so each test measures only its own parse.
struct CountingAllocator;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(layout.size())));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Bytes a parse may allocate beyond the input's own size, whatever the input claims.
const ALLOCATION_ALLOWANCE: usize = 64 * 1024;

fn parse_counting(bytes: &[u8], file_len: Option<u64>) -> Result<ModelHeader, FormatError> {
    let before = ALLOCATED.with(Cell::get);
    let result = detect_and_parse(bytes, file_len);
    let allocated = ALLOCATED.with(Cell::get) - before;
    assert!(
        allocated <= ALLOCATION_ALLOWANCE + 16 * bytes.len(),
        "parsing {} bytes allocated {allocated} bytes",
        bytes.len()
    );
    result
}

fn err(bytes: &[u8], file_len: Option<u64>) -> FormatError {
    match parse_counting(bytes, file_len) {
        Ok(header) => panic!("accepted a malformed file: {header:?}"),
        Err(e) => e,
    }
}

fn whole(bytes: &[u8]) -> FormatError {
    err(bytes, Some(bytes.len() as u64))
}

fn tensor_json(entries: &[(&str, &str, &str, u64, u64)]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|(name, dtype, shape, s, e)| format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[{s},{e}]}}"#))
        .collect();
    format!("{{{}}}", items.join(","))
}

fn st(entries: &[(&str, &str, &str, u64, u64)], data_len: usize) -> Vec<u8> {
    safetensors_with_header(&tensor_json(entries), data_len)
}

#[test]
fn safetensors_truncated_and_oversized() {
    let file = st(&[("a", "F32", "[2]", 0, 8)], 8);
    // Detection wants a byte of JSON too; the parser itself only the length.
    assert_eq!(err(&file[..5], None), FormatError::NeedMore { needed: 9, have: 5 });
    assert_eq!(parse_safetensors(&file[..5], None), Err(FormatError::NeedMore { needed: 8, have: 5 }));
    assert!(matches!(parse_safetensors(&file[..5], Some(5)), Err(FormatError::Truncated { needed: 8, file_len: 5, .. })));
    let header_end = file.len() as u64 - 8;
    assert_eq!(err(&file[..20], None), FormatError::NeedMore { needed: header_end, have: 20 });
    assert!(matches!(err(&file[..20], Some(20)), FormatError::Truncated { .. }));

    for claimed in [u64::MAX, 1 << 40, 100 * 1024 * 1024 + 1] {
        let mut huge = claimed.to_le_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(matches!(err(&huge, None), FormatError::HeaderTooLarge { len, .. } if len == claimed));
    }
}

#[test]
fn safetensors_bad_json_and_entries() {
    let e = whole(&safetensors_with_header("{\"a\": ", 0));
    assert!(matches!(e, FormatError::HeaderJson { .. }), "{e:?}");
    let e = whole(&safetensors_with_header(r#"{"a":{"dtype":"F32","shape":[1]}}"#, 4));
    assert!(matches!(e, FormatError::BadTensorEntry { ref tensor, .. } if tensor == "a"), "{e:?}");
    let e = whole(&safetensors_with_header(r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#, 4));
    assert!(matches!(e, FormatError::BadTensorEntry { .. }), "{e:?}");
    let e = whole(&safetensors_with_header(r#"{"__metadata__":{"k":1}}"#, 0));
    assert!(matches!(e, FormatError::BadMetadata { .. }), "{e:?}");
    let dup = r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#;
    let e = whole(&safetensors_with_header(dup, 2));
    assert!(matches!(e, FormatError::DuplicateTensor { ref tensor } if tensor == "a"), "{e:?}");
}

/// A `shape` of millions of entries (issue 18: a 100 MB header of one such tensor peaked at
/// 3.8 GB) is refused at its ninth dimension, allocating next to nothing beyond the input.
#[test]
fn safetensors_huge_shape_is_refused_in_bounded_memory() {
    let entries = 4_000_000;
    let shape = format!("[{}1]", "1,".repeat(entries - 1));
    let file = st(&[("t", "U8", &shape, 0, 1)], 1);
    let before = ALLOCATED.with(Cell::get);
    let e = detect_and_parse(&file, Some(file.len() as u64)).unwrap_err();
    let allocated = ALLOCATED.with(Cell::get) - before;
    assert!(matches!(e, FormatError::BadTensorEntry { ref tensor, ref message } if tensor == "t" && message.contains("dimensions")), "{e:?}");
    assert!(allocated < ALLOCATION_ALLOWANCE, "a {}-byte header allocated {allocated} bytes", file.len());
    // Eight dimensions are still a tensor.
    assert!(parse_counting(&st(&[("t", "U8", "[1,1,1,1,1,1,1,1]", 0, 1)], 1), None).is_ok());
}

#[test]
fn safetensors_bad_dtypes_and_sizes() {
    for dtype in ["F8_E8M0", "C64", "Q4_0", "f32", ""] {
        let e = whole(&st(&[("t", dtype, "[1]", 0, 1)], 1));
        assert_eq!(e, FormatError::UnknownDtype { tensor: "t".into(), dtype: dtype.into() });
    }
    let e = whole(&st(&[("w", "F32", "[2,3]", 0, 20)], 20));
    assert_eq!(
        e,
        FormatError::SizeMismatch { tensor: "w".into(), shape: vec![2, 3], storage: "F32", expected: 24, actual: 20 }
    );
    let e = whole(&st(&[("nibbles", "F4", "[3]", 0, 2)], 2));
    assert!(matches!(e, FormatError::PartialUnit { ref tensor, elements: 3, unit: "byte", .. } if tensor == "nibbles"));
    let e = whole(&st(&[("big", "F64", "[4294967296,4294967296]", 0, 8)], 8));
    assert!(matches!(e, FormatError::SizeOverflow { ref tensor, .. } if tensor == "big"), "{e:?}");
    let e = whole(&st(&[("big", "U8", "[18446744073709551615,2]", 0, 8)], 8));
    assert!(matches!(e, FormatError::SizeOverflow { .. }), "{e:?}");
}

#[test]
fn safetensors_bad_ranges() {
    let e = whole(&st(&[("a", "U8", "[8]", 0, 8), ("b", "U8", "[8]", 4, 12)], 12));
    assert_eq!(e, FormatError::Overlap { tensor: "b".into(), start: 4, previous: "a".into(), previous_end: 8 });
    let e = whole(&st(&[("a", "U8", "[8]", 0, 8), ("b", "U8", "[4]", 10, 14)], 14));
    assert_eq!(e, FormatError::Gap { tensor: "b".into(), start: 10, expected: 8 });
    let e = whole(&st(&[("a", "U8", "[4]", 4, 8)], 8));
    assert!(matches!(e, FormatError::Gap { start: 4, expected: 0, .. }));
    let e = whole(&st(&[("r", "U8", "[0]", 8, 4)], 8));
    assert_eq!(e, FormatError::BackwardsRange { tensor: "r".into(), start: 8, end: 4 });
    let file = st(&[("a", "F32", "[4]", 0, 16)], 8);
    let e = whole(&file);
    assert_eq!(e, FormatError::OutOfFile { tensor: "a".into(), end: file.len() as u64 + 8, file_len: file.len() as u64 });
    let e = whole(&st(&[("a", "U8", "[18446744073709551615]", 0, 18446744073709551615)], 0));
    assert!(matches!(e, FormatError::SizeOverflow { .. }), "{e:?}");
}

fn gguf_kv(version: u32, build: impl FnOnce(&mut GgufWriter)) -> Vec<u8> {
    let mut w = GgufWriter::new(version, 0, 1);
    build(&mut w);
    w.finish(32, 0)
}

fn gguf_tensors(alignment: Option<u32>, tensors: &[(&str, &[u64], u32, u64)], data_len: usize) -> Vec<u8> {
    let mut w = GgufWriter::new(3, tensors.len() as u64, u64::from(alignment.is_some()));
    if let Some(a) = alignment {
        w.kv_u32("general.alignment", a);
    }
    for (name, dims, type_id, offset) in tensors {
        w.tensor(name, dims, *type_id, *offset);
    }
    w.finish(alignment.unwrap_or(32).max(1) as usize, data_len)
}

#[test]
fn gguf_magic_and_version() {
    let e = whole(b"GGUX\x03\0\0\0 and more bytes");
    assert!(matches!(e, FormatError::BadMagic { .. }), "{e:?}");
    for version in [0, 1, 4, 0x0300_0000] {
        let file = GgufWriter::new(version, 0, 0).finish(32, 0);
        assert_eq!(whole(&file), FormatError::UnsupportedVersion { version });
    }
}

#[test]
fn gguf_huge_counts_and_lengths() {
    let file = GgufWriter::new(3, 1 << 60, 0).finish(1, 0);
    assert!(matches!(whole(&file), FormatError::TooMany { what: "tensor count", count, .. } if count == 1 << 60));
    let file = GgufWriter::new(3, 0, 1 << 60).finish(1, 0);
    assert!(matches!(whole(&file), FormatError::TooMany { what: "metadata entry count", .. }));

    let file = gguf_kv(3, |w| {
        w.u64(1 << 60).raw(b"short key");
    });
    assert!(matches!(whole(&file), FormatError::TooMany { what: "string length", count, .. } if count == 1 << 60));
    let file = gguf_kv(3, |w| {
        w.key("s", ty::STRING).u64(u64::MAX).raw(b"xy");
    });
    assert!(matches!(whole(&file), FormatError::TooMany { what: "string length", .. }));
    for element in [ty::U8, ty::STRING, ty::ARRAY, ty::F64] {
        let file = gguf_kv(3, |w| {
            w.key("a", ty::ARRAY).u32(element).u64(1 << 60).raw(&[1, 2, 3]);
        });
        assert!(matches!(whole(&file), FormatError::TooMany { what: "array element count", .. }));
    }

    // Under the caps but not backed by bytes: asks for them (or says the file is too short).
    let file = gguf_kv(3, |w| {
        w.key("tokens", ty::ARRAY).u32(ty::STRING).u64(10_000_000).string("a");
    });
    match err(&file, None) {
        FormatError::NeedMore { needed, .. } => assert!(needed >= 80_000_000, "{needed}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(whole(&file), FormatError::Truncated { .. }));
    let file = gguf_kv(3, |w| {
        w.key("s", ty::STRING).u64(1_000_000).raw(b"abc");
    });
    assert!(matches!(err(&file, None), FormatError::NeedMore { needed, .. } if needed > 1_000_000));
}

#[test]
fn gguf_bad_values() {
    let nested = |depth: usize| {
        gguf_kv(3, |w| {
            w.key("deep", ty::ARRAY);
            for _ in 0..depth {
                w.u32(ty::ARRAY).u64(1);
            }
            w.u32(ty::U8).u64(0);
        })
    };
    assert!(parse_gguf(&nested(7), None).is_ok());
    assert_eq!(whole(&nested(8)), FormatError::NestingTooDeep { key: "deep".into(), max: 8 });
    assert!(matches!(whole(&nested(100_000)), FormatError::NestingTooDeep { .. }));

    let file = gguf_kv(3, |w| {
        w.key("odd", 13).u32(0);
    });
    assert_eq!(whole(&file), FormatError::UnknownValueType { key: "odd".into(), type_id: 13 });
    let file = gguf_kv(3, |w| {
        w.key("odd", ty::ARRAY).u32(99).u64(0);
    });
    assert_eq!(whole(&file), FormatError::UnknownValueType { key: "odd".into(), type_id: 99 });
    let file = gguf_kv(3, |w| {
        w.key("b", ty::BOOL).u8(2);
    });
    assert!(matches!(whole(&file), FormatError::BadValue { ref key, .. } if key == "b"));
    let file = gguf_kv(3, |w| {
        w.u64(2).raw(&[0xc3, 0x28]).u32(ty::U8).u8(0);
    });
    assert!(matches!(whole(&file), FormatError::BadUtf8 { .. }));
    let mut w = GgufWriter::new(3, 0, 2);
    w.kv_u32("k", 1).kv_u32("k", 2);
    assert_eq!(whole(&w.finish(32, 0)), FormatError::DuplicateKey { key: "k".into() });
}

#[test]
fn gguf_bad_alignment() {
    for a in [0, 3, 48] {
        let file = gguf_kv(3, |w| {
            w.kv_u32("general.alignment", a);
        });
        assert_eq!(whole(&file), FormatError::BadAlignment { found: a.to_string() });
    }
    let file = gguf_kv(3, |w| {
        w.kv_str("general.alignment", "32");
    });
    assert!(matches!(whole(&file), FormatError::BadAlignment { .. }));
}

#[test]
fn gguf_bad_tensors() {
    let q4_1 = GgmlType::Q4_1.id();
    let f32 = GgmlType::F32.id();
    let file = gguf_tensors(None, &[("t", &[32], 9, 0)], 64);
    assert_eq!(whole(&file), FormatError::UnknownGgmlType { tensor: "t".into(), id: 9 });
    let file = gguf_tensors(None, &[("t", &[32], 0xdead_beef, 0)], 64);
    assert_eq!(whole(&file), FormatError::UnknownGgmlType { tensor: "t".into(), id: 0xdead_beef });
    let file = gguf_tensors(None, &[("t", &[1, 1, 1, 1, 1], f32, 0)], 64);
    assert_eq!(whole(&file), FormatError::TooManyDims { tensor: "t".into(), n_dims: 5, max: 4 });
    let file = gguf_tensors(None, &[("t", &[33], q4_1, 0)], 64);
    assert!(matches!(whole(&file), FormatError::PartialUnit { elements: 33, unit: "block", .. }));
    let file = gguf_tensors(None, &[("t", &[1 << 32, 1 << 32], f32, 0)], 64);
    assert!(matches!(whole(&file), FormatError::SizeOverflow { .. }));
    let file = gguf_tensors(None, &[("t", &[4], f32, 16)], 64);
    assert_eq!(whole(&file), FormatError::MisalignedOffset { tensor: "t".into(), offset: 16, alignment: 32 });
    let file = gguf_tensors(Some(16), &[("t", &[4], f32, 16)], 64);
    assert!(parse_gguf(&file, Some(file.len() as u64)).is_ok());
    let file = gguf_tensors(None, &[("t", &[64], f32, 0)], 64);
    assert!(matches!(whole(&file), FormatError::OutOfFile { ref tensor, .. } if tensor == "t"));
    let file = gguf_tensors(None, &[("t", &[4], f32, u64::MAX - 31)], 64);
    assert!(matches!(whole(&file), FormatError::SizeOverflow { .. }));
    let file = gguf_tensors(None, &[("a", &[16], f32, 0), ("b", &[4], f32, 32)], 96);
    assert_eq!(
        whole(&file),
        FormatError::Overlap { tensor: "b".into(), start: 32, previous: "a".into(), previous_end: 64 }
    );
    let file = gguf_tensors(None, &[("a", &[4], f32, 0), ("a", &[4], f32, 32)], 64);
    assert_eq!(whole(&file), FormatError::DuplicateTensor { tensor: "a".into() });
}

/// Every prefix and every single-byte corruption of a valid file parses to some result
/// without panicking or allocating beyond the allowance.
#[test]
fn gguf_and_safetensors_mutations() {
    let mut w = GgufWriter::new(3, 2, 2);
    w.kv_str_array("tokenizer.ggml.tokens", &["a", "bb", "ccc"]).kv_u32("general.alignment", 32);
    w.tensor("x", &[32, 2], GgmlType::Q8_0.id(), 0).tensor("y", &[8], GgmlType::F32.id(), 96);
    let gguf = w.finish(32, 128);
    let safetensors = st(&[("a", "F16", "[2,2]", 0, 8), ("b", "F4", "[4]", 8, 10)], 10);
    for file in [gguf, safetensors] {
        assert!(parse_counting(&file, Some(file.len() as u64)).is_ok());
        for cut in 0..file.len() {
            let _ = parse_counting(&file[..cut], None);
            let _ = parse_counting(&file[..cut], Some(cut as u64));
        }
        for index in 0..file.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut mutated = file.clone();
                mutated[index] = value;
                let _ = parse_counting(&mutated, Some(mutated.len() as u64));
                let _ = parse_counting(&mutated, None);
            }
        }
    }
}

/// Inputs from the fuzzers' corpora (deep-reaching ones, and any that ever crashed), replayed
/// under the allocation counter.
#[test]
fn fuzz_regressions() -> anyhow::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz");
    let entries: Vec<_> = std::fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
    assert!(!entries.is_empty(), "no inputs in {}", dir.display());
    for entry in entries {
        let path = entry.path();
        let bytes = std::fs::read(&path).with_context(|| path.display().to_string())?;
        // The same split the fuzz targets make: mode byte, optional extra length, prefix.
        let Some((&mode, rest)) = bytes.split_first() else { continue };
        let (prefix, file_len) = match mode % 3 {
            0 => (rest, None),
            1 => (rest, Some(rest.len() as u64)),
            _ => match (rest.get(..4), rest.get(4..)) {
                (Some(extra), Some(prefix)) => {
                    let extra = u32::from_le_bytes(extra.try_into()?);
                    (prefix, Some(prefix.len() as u64 + u64::from(extra)))
                }
                _ => continue,
            },
        };
        let _ = parse_counting(prefix, file_len);
        let _ = parse_gguf(prefix, file_len);
        let _ = parse_safetensors(prefix, file_len);
    }
    Ok(())
}

#[test]
fn the_allocation_counter_sees_allocations() {
    let before = ALLOCATED.with(Cell::get);
    let block = vec![1u8; 1 << 20];
    assert!(ALLOCATED.with(Cell::get) - before >= block.len());
}
