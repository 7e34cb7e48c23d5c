//! GGUF headers (versions 2 and 3), parsed from a byte prefix.
//!
//! Layout: magic `GGUF`, u32 version, u64 tensor count, u64 metadata count, the metadata
//! key/value pairs, one info record per tensor (name, dims innermost first, GGML type id, offset
//! into the data section), then padding up to `general.alignment` and the data section.
//!
//! Counts and lengths come from untrusted bytes, so nothing is allocated for them before the
//! bytes they describe are present: arrays are checked against a lower bound of their size and
//! grown one element at a time, and every count has a cap.

mod value;

use std::collections::BTreeSet;

use serde::Serialize;

pub use value::{GgufArray, GgufMetadata, GgufValue};

use super::{FormatError, GgmlType, StorageType, TensorInfo};

/// Largest header (metadata plus tensor infos) accepted. Large-vocabulary tokenizers make
/// headers of tens of megabytes.
pub const MAX_GGUF_HEADER_BYTES: u64 = 256 * 1024 * 1024;
/// Longest string accepted (chat templates are the longest real ones, kilobytes).
pub const MAX_STRING_BYTES: u64 = 16 * 1024 * 1024;
/// Most elements in one metadata array (vocabularies reach a few hundred thousand).
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 24;
/// Deepest array nesting accepted; real files nest at most once.
pub const MAX_ARRAY_DEPTH: u32 = 8;
pub const MAX_METADATA_ENTRIES: u64 = 1 << 16;
pub const MAX_TENSORS: u64 = 1 << 20;
/// GGML tensors have at most four dimensions.
pub const MAX_TENSOR_DIMS: u32 = 4;
/// Alignment of the data section and of tensor offsets when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

const FORMAT: &str = "GGUF";
const MAGIC: &[u8; 4] = b"GGUF";
/// Smallest metadata entry: empty key (8-byte length), type (4), one-byte value.
const MIN_ENTRY_BYTES: u64 = 13;
/// Smallest tensor info: empty name (8), n_dims (4), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 24;

/// A validated GGUF header.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: GgufMetadata,
    pub alignment: u64,
    /// End of the tensor infos: the header proper, without the alignment padding.
    pub header_len: u64,
    /// Absolute offset of the data section (`header_len` rounded up to `alignment`).
    pub data_start: u64,
    /// Tensors in the order of their infos. Shapes are outermost first (GGUF stores them
    /// innermost first); ranges are absolute file offsets.
    pub tensors: Vec<TensorInfo>,
}

/// Parses a GGUF header from the first bytes of a file.
///
/// A short prefix gives [`FormatError::NeedMore`] whose `needed` is at least the exact next
/// requirement and, inside long arrays, an extrapolation of the whole array, so that a remote
/// loader needs few round trips. With `file_len` known, `needed` never exceeds it and a header
/// that cannot fit is [`FormatError::Truncated`].
pub fn parse_gguf(prefix: &[u8], file_len: Option<u64>) -> Result<GgufHeader, FormatError> {
    let mut reader = Reader { bytes: prefix, pos: 0 };
    match parse_with(&mut reader, file_len) {
        Ok(header) => Ok(header),
        Err(Fail::Bad(e)) => Err(e),
        Err(Fail::Short { min, estimate }) => Err(short_to_error(min, estimate, prefix, file_len)),
    }
}

fn short_to_error(min: u64, estimate: u64, prefix: &[u8], file_len: Option<u64>) -> FormatError {
    if min > MAX_GGUF_HEADER_BYTES {
        return FormatError::HeaderTooLarge { format: FORMAT, len: min, max: MAX_GGUF_HEADER_BYTES };
    }
    let mut needed = estimate.max(min).min(MAX_GGUF_HEADER_BYTES);
    if let Some(file_len) = file_len {
        if min > file_len {
            return FormatError::Truncated { format: FORMAT, needed: min, file_len };
        }
        needed = needed.min(file_len);
    }
    FormatError::NeedMore { needed, have: prefix.len() as u64 }
}

fn parse_with(reader: &mut Reader, file_len: Option<u64>) -> Result<GgufHeader, Fail> {
    let magic = reader.take(4)?;
    if magic != MAGIC {
        return Err(Fail::Bad(FormatError::BadMagic {
            format: FORMAT,
            message: format!("starts with {magic:02x?}, expected the bytes of \"GGUF\""),
        }));
    }
    let version = reader.u32()?;
    if version != 2 && version != 3 {
        return Err(Fail::Bad(FormatError::UnsupportedVersion { version }));
    }
    let tensor_count = reader.u64()?;
    let entry_count = reader.u64()?;
    check_count("tensor count", tensor_count, MAX_TENSORS)?;
    check_count("metadata entry count", entry_count, MAX_METADATA_ENTRIES)?;
    // Both counts are capped, so this lower bound cannot overflow.
    let tensor_infos_min = tensor_count * MIN_TENSOR_INFO_BYTES;
    reader.require(entry_count * MIN_ENTRY_BYTES + tensor_infos_min)?;

    let mut metadata = GgufMetadata::default();
    let mut keys = BTreeSet::new();
    for index in 0..entry_count {
        let tail = (entry_count - index - 1) * MIN_ENTRY_BYTES + tensor_infos_min;
        let (key, value) = read_entry(reader).map_err(|f| f.plus_tail(tail))?;
        if !keys.insert(key.clone()) {
            return Err(Fail::Bad(FormatError::DuplicateKey { key }));
        }
        metadata.entries.push((key, value));
    }
    let alignment = alignment_of(&metadata)?;

    let mut raw_tensors = Vec::new();
    let mut names = BTreeSet::new();
    for index in 0..tensor_count {
        let tail = (tensor_count - index - 1) * MIN_TENSOR_INFO_BYTES;
        let raw = read_tensor_info(reader).map_err(|f| f.plus_tail(tail))?;
        if !names.insert(raw.name.clone()) {
            return Err(Fail::Bad(FormatError::DuplicateTensor { tensor: raw.name }));
        }
        raw_tensors.push(raw);
    }

    let header_len = reader.pos as u64;
    let data_start = round_up(header_len, alignment).ok_or_else(|| {
        Fail::Bad(FormatError::BadAlignment { found: format!("{alignment} (data section offset overflows)") })
    })?;
    let tensors = place_tensors(raw_tensors, data_start, alignment, file_len)?;
    Ok(GgufHeader { version, metadata, alignment, header_len, data_start, tensors })
}

fn check_count(what: &'static str, count: u64, max: u64) -> Result<(), Fail> {
    if count > max {
        return Err(Fail::Bad(FormatError::TooMany { what, count, max }));
    }
    Ok(())
}

fn alignment_of(metadata: &GgufMetadata) -> Result<u64, Fail> {
    let Some(value) = metadata.get("general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match value.as_integer().and_then(|v| u64::try_from(v).ok()) {
        Some(a) if a.is_power_of_two() => Ok(a),
        Some(a) => Err(Fail::Bad(FormatError::BadAlignment { found: a.to_string() })),
        None => Err(Fail::Bad(FormatError::BadAlignment { found: value.describe() })),
    }
}

fn round_up(value: u64, alignment: u64) -> Option<u64> {
    value.checked_next_multiple_of(alignment)
}

struct RawTensorInfo {
    name: String,
    ggml_dims: Vec<u64>,
    ty: GgmlType,
    offset: u64,
}

fn read_tensor_info(reader: &mut Reader) -> Result<RawTensorInfo, Fail> {
    let name = reader.string(|| "tensor name".to_string())?;
    let n_dims = reader.u32()?;
    if n_dims > MAX_TENSOR_DIMS {
        return Err(Fail::Bad(FormatError::TooManyDims { tensor: name, n_dims, max: MAX_TENSOR_DIMS }));
    }
    let mut ggml_dims = Vec::new();
    for _ in 0..n_dims {
        ggml_dims.push(reader.u64()?);
    }
    let id = reader.u32()?;
    let offset = reader.u64()?;
    let Some(ty) = GgmlType::from_id(id) else {
        return Err(Fail::Bad(FormatError::UnknownGgmlType { tensor: name, id }));
    };
    Ok(RawTensorInfo { name, ggml_dims, ty, offset })
}

/// Turns offsets into absolute ranges and checks sizes, alignment, overlap and the file's end.
fn place_tensors(
    raw_tensors: Vec<RawTensorInfo>,
    data_start: u64,
    alignment: u64,
    file_len: Option<u64>,
) -> Result<Vec<TensorInfo>, Fail> {
    let mut tensors = Vec::new();
    for raw in raw_tensors {
        let shape: Vec<u64> = raw.ggml_dims.iter().rev().copied().collect();
        let overflow = |name: String, shape: Vec<u64>| Fail::Bad(FormatError::SizeOverflow { tensor: name, shape });
        let Some(elements) = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) else {
            return Err(overflow(raw.name, shape));
        };
        if elements % raw.ty.block_elements() != 0 {
            return Err(Fail::Bad(FormatError::PartialUnit {
                tensor: raw.name,
                elements,
                storage: raw.ty.name(),
                unit: "block",
            }));
        }
        let Some(bytes) = raw.ty.bytes_for(elements) else {
            return Err(overflow(raw.name, shape));
        };
        if raw.offset % alignment != 0 {
            return Err(Fail::Bad(FormatError::MisalignedOffset { tensor: raw.name, offset: raw.offset, alignment }));
        }
        let range = data_start.checked_add(raw.offset).and_then(|s| Some(s..s.checked_add(bytes)?));
        let Some(range) = range else {
            return Err(overflow(raw.name, shape));
        };
        if let Some(file_len) = file_len {
            if range.end > file_len {
                return Err(Fail::Bad(FormatError::OutOfFile { tensor: raw.name, end: range.end, file_len }));
            }
        }
        tensors.push(TensorInfo { name: raw.name, storage: StorageType::Ggml(raw.ty), shape, range });
    }

    let by_start: Vec<&TensorInfo> =
        crate::order::sorted_order(tensors.iter().map(|t| (t.range.start, t.range.end))).into_iter().map(|i| &tensors[i]).collect();
    for pair in by_start.windows(2) {
        if let [previous, next] = pair {
            // Empty tensors occupy no bytes and cannot overlap anything.
            if next.range.start < previous.range.end && !next.range.is_empty() {
                return Err(Fail::Bad(FormatError::Overlap {
                    tensor: next.name.clone(),
                    start: next.range.start - data_start,
                    previous: previous.name.clone(),
                    previous_end: previous.range.end - data_start,
                }));
            }
        }
    }
    Ok(tensors)
}

fn read_entry(reader: &mut Reader) -> Result<(String, GgufValue), Fail> {
    let key = reader.string(|| "metadata key".to_string())?;
    let type_id = reader.u32()?;
    let value = read_value(reader, &key, type_id)?;
    Ok((key, value))
}

fn read_value(reader: &mut Reader, key: &str, type_id: u32) -> Result<GgufValue, Fail> {
    Ok(match type_id {
        0 => GgufValue::U8(reader.u8()?),
        1 => GgufValue::I8(reader.u8()? as i8),
        2 => GgufValue::U16(reader.u16()?),
        3 => GgufValue::I16(reader.u16()? as i16),
        4 => GgufValue::U32(reader.u32()?),
        5 => GgufValue::I32(reader.u32()? as i32),
        6 => GgufValue::F32(f32::from_bits(reader.u32()?)),
        7 => GgufValue::Bool(reader.bool(key)?),
        8 => GgufValue::String(reader.string(|| format!("string value of '{key}'"))?),
        9 => GgufValue::Array(read_array(reader, key, 1)?),
        10 => GgufValue::U64(reader.u64()?),
        11 => GgufValue::I64(reader.u64()? as i64),
        12 => GgufValue::F64(f64::from_bits(reader.u64()?)),
        _ => return Err(Fail::Bad(FormatError::UnknownValueType { key: key.to_string(), type_id })),
    })
}

/// Smallest encoded size of one array element of this type.
fn min_element_bytes(type_id: u32) -> Option<u64> {
    Some(match type_id {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 => 8,
        9 => 12,
        10..=12 => 8,
        _ => return None,
    })
}

fn read_array(reader: &mut Reader, key: &str, depth: u32) -> Result<GgufArray, Fail> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(Fail::Bad(FormatError::NestingTooDeep { key: key.to_string(), max: MAX_ARRAY_DEPTH }));
    }
    let type_id = reader.u32()?;
    let count = reader.u64()?;
    let Some(min_bytes) = min_element_bytes(type_id) else {
        return Err(Fail::Bad(FormatError::UnknownValueType { key: key.to_string(), type_id }));
    };
    check_count("array element count", count, MAX_ARRAY_ELEMENTS)?;
    let start = reader.pos as u64;
    // Capped count times at most 12 bytes: no overflow.
    reader.require(count * min_bytes)?;
    let mut array = empty_array(type_id);
    for done in 0..count {
        if let Err(fail) = push_element(reader, key, depth, &mut array) {
            return Err(fail.extrapolate(start, reader.pos as u64, done, count));
        }
    }
    Ok(array)
}

fn empty_array(type_id: u32) -> GgufArray {
    match type_id {
        0 => GgufArray::U8(Vec::new()),
        1 => GgufArray::I8(Vec::new()),
        2 => GgufArray::U16(Vec::new()),
        3 => GgufArray::I16(Vec::new()),
        4 => GgufArray::U32(Vec::new()),
        5 => GgufArray::I32(Vec::new()),
        6 => GgufArray::F32(Vec::new()),
        7 => GgufArray::Bool(Vec::new()),
        8 => GgufArray::String(Vec::new()),
        10 => GgufArray::U64(Vec::new()),
        11 => GgufArray::I64(Vec::new()),
        12 => GgufArray::F64(Vec::new()),
        _ => GgufArray::Array(Vec::new()),
    }
}

fn push_element(
    reader: &mut Reader,
    key: &str,
    depth: u32,
    array: &mut GgufArray,
) -> Result<(), Fail> {
    match array {
        GgufArray::U8(v) => v.push(reader.u8()?),
        GgufArray::I8(v) => v.push(reader.u8()? as i8),
        GgufArray::U16(v) => v.push(reader.u16()?),
        GgufArray::I16(v) => v.push(reader.u16()? as i16),
        GgufArray::U32(v) => v.push(reader.u32()?),
        GgufArray::I32(v) => v.push(reader.u32()? as i32),
        GgufArray::F32(v) => v.push(f32::from_bits(reader.u32()?)),
        GgufArray::Bool(v) => v.push(reader.bool(key)?),
        GgufArray::String(v) => v.push(reader.string(|| format!("string in array '{key}'"))?),
        GgufArray::Array(v) => v.push(read_array(reader, key, depth + 1)?),
        GgufArray::U64(v) => v.push(reader.u64()?),
        GgufArray::I64(v) => v.push(reader.u64()? as i64),
        GgufArray::F64(v) => v.push(f64::from_bits(reader.u64()?)),
    }
    Ok(())
}

/// Why parsing stopped: the prefix ended (with the least and the likely number of bytes the
/// header needs), or the bytes are malformed.
enum Fail {
    Short { min: u64, estimate: u64 },
    Bad(FormatError),
}

impl Fail {
    fn short(end: u64) -> Self {
        Fail::Short { min: end, estimate: end }
    }

    /// Adds the least size of what follows the failed part.
    fn plus_tail(self, tail: u64) -> Self {
        match self {
            Fail::Short { min, estimate } => {
                Fail::Short { min: min.saturating_add(tail), estimate: estimate.saturating_add(tail) }
            }
            bad => bad,
        }
    }

    /// Inside an array: assume the missing elements are as long as the ones read so far.
    fn extrapolate(self, start: u64, pos: u64, done: u64, count: u64) -> Self {
        match self {
            Fail::Short { min, estimate } if done > 0 => {
                let per_element = (pos - start).div_ceil(done);
                let whole = start.saturating_add(per_element.saturating_mul(count));
                Fail::Short { min, estimate: estimate.max(whole) }
            }
            other => other,
        }
    }
}

impl From<FormatError> for Fail {
    fn from(e: FormatError) -> Self {
        Fail::Bad(e)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Fails with `Short` unless `len` more bytes are present, without consuming them.
    fn require(&self, len: u64) -> Result<(), Fail> {
        let end = (self.pos as u64).saturating_add(len);
        if end > self.bytes.len() as u64 {
            return Err(Fail::short(end));
        }
        Ok(())
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], Fail> {
        let start = self.pos;
        let end = usize::try_from(len).ok().and_then(|len| start.checked_add(len));
        match end.and_then(|end| Some((end, self.bytes.get(start..end)?))) {
            Some((end, slice)) => {
                self.pos = end;
                Ok(slice)
            }
            None => Err(Fail::short((start as u64).saturating_add(len))),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Fail> {
        let slice = self.take(N as u64)?;
        slice.try_into().map_err(|_| Fail::short(self.pos as u64))
    }

    fn u8(&mut self) -> Result<u8, Fail> {
        Ok(u8::from_le_bytes(self.array()?))
    }

    fn u16(&mut self) -> Result<u16, Fail> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, Fail> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, Fail> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn bool(&mut self, key: &str) -> Result<bool, Fail> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Fail::Bad(FormatError::BadValue {
                key: key.to_string(),
                message: format!("bool byte is {other}, expected 0 or 1"),
            })),
        }
    }

    fn string(&mut self, what: impl Fn() -> String) -> Result<String, Fail> {
        let len = self.u64()?;
        if len > MAX_STRING_BYTES {
            return Err(Fail::Bad(FormatError::TooMany { what: "string length", count: len, max: MAX_STRING_BYTES }));
        }
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Fail::Bad(FormatError::BadUtf8 { what: what() }))
    }
}
