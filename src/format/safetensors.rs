//! safetensors headers, parsed from a byte prefix: an 8-byte little-endian header length, a JSON
//! object mapping tensor names to `{dtype, shape, data_offsets}` (offsets relative to the data
//! section, which starts right after the header) and an optional `__metadata__` string map.
//!
//! The `safetensors` crate's reader needs the whole file in memory and measures sizes in `usize`
//! (32 bits on wasm32), so this reads the header on its own and reports each problem by tensor.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::{Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{FormatError, SafeDtype, StorageType, TensorInfo};

/// Largest JSON header accepted; real headers are kilobytes to a few megabytes.
pub const MAX_SAFETENSORS_HEADER_BYTES: u64 = 100 * 1024 * 1024;

const FORMAT: &str = "safetensors";
const LENGTH_PREFIX_BYTES: u64 = 8;

/// A validated safetensors header.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SafetensorsHeader {
    /// Length of the JSON header in bytes (the 8-byte length prefix not included).
    pub header_len: u64,
    /// Absolute file offset of the data section: 8 + `header_len`.
    pub data_start: u64,
    /// Tensors in the order their bytes lie in the file; ranges are absolute file offsets.
    pub tensors: Vec<TensorInfo>,
    /// The `__metadata__` entries (empty when absent).
    pub metadata: BTreeMap<String, String>,
}

impl SafetensorsHeader {
    /// Absolute end of the last tensor: the size a complete file must have at least.
    pub fn data_end(&self) -> u64 {
        self.tensors.last().map_or(self.data_start, |t| t.range.end)
    }
}

/// Parses a safetensors header from the first bytes of a file.
///
/// `file_len`, when known, turns "prefix too short" into [`FormatError::Truncated`] where the
/// file cannot hold the header, and bounds every tensor's range. Without it a short prefix gives
/// [`FormatError::NeedMore`] with the exact number of bytes to fetch.
pub fn parse_safetensors(
    prefix: &[u8],
    file_len: Option<u64>,
) -> Result<SafetensorsHeader, FormatError> {
    let have = prefix.len() as u64;
    let need = |needed: u64| match file_len {
        Some(file_len) if needed > file_len => {
            FormatError::Truncated { format: FORMAT, needed, file_len }
        }
        _ => FormatError::NeedMore { needed, have },
    };

    let length_bytes: [u8; 8] = prefix
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| need(LENGTH_PREFIX_BYTES))?;
    let header_len = u64::from_le_bytes(length_bytes);
    if header_len > MAX_SAFETENSORS_HEADER_BYTES {
        return Err(FormatError::HeaderTooLarge {
            format: FORMAT,
            len: header_len,
            max: MAX_SAFETENSORS_HEADER_BYTES,
        });
    }
    // Cannot overflow: header_len is capped above.
    let data_start = LENGTH_PREFIX_BYTES + header_len;
    let json = usize::try_from(data_start)
        .ok()
        .and_then(|end| prefix.get(8..end))
        .ok_or_else(|| need(data_start))?;

    let raw: RawHeader = serde_json::from_slice(json)
        .map_err(|e| FormatError::HeaderJson { message: e.to_string() })?;

    let mut metadata = None;
    let mut entries = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, value) in raw.entries {
        if name == "__metadata__" {
            if metadata.is_some() {
                return Err(FormatError::DuplicateTensor { tensor: name });
            }
            let map = serde_json::from_str::<BTreeMap<String, String>>(value.get())
                .map_err(|e| FormatError::BadMetadata { message: e.to_string() })?;
            metadata = Some(map);
            continue;
        }
        if !seen.insert(name.clone()) {
            return Err(FormatError::DuplicateTensor { tensor: name });
        }
        let entry = serde_json::from_str::<RawTensor>(value.get())
            .map_err(|e| FormatError::BadTensorEntry { tensor: name.clone(), message: e.to_string() })?;
        entries.push(checked_tensor(name, entry)?);
    }

    // Writers may list tensors in any order; the bytes must still tile the data section.
    crate::order::sort_by_key(&mut entries, |t| (t.range.start, t.range.end));
    let mut expected_start = 0u64;
    let mut previous: Option<&TensorInfo> = None;
    for tensor in &entries {
        let start = tensor.range.start;
        if start < expected_start {
            let previous = previous.map_or_else(String::new, |p| p.name.clone());
            return Err(FormatError::Overlap {
                tensor: tensor.name.clone(),
                start,
                previous,
                previous_end: expected_start,
            });
        }
        if start > expected_start {
            return Err(FormatError::Gap { tensor: tensor.name.clone(), start, expected: expected_start });
        }
        expected_start = tensor.range.end;
        previous = Some(tensor);
    }

    let mut tensors = Vec::new();
    for mut tensor in entries {
        let absolute = tensor
            .range
            .start
            .checked_add(data_start)
            .zip(tensor.range.end.checked_add(data_start));
        let Some((start, end)) = absolute else {
            return Err(FormatError::SizeOverflow { tensor: tensor.name, shape: tensor.shape });
        };
        if let Some(file_len) = file_len {
            if end > file_len {
                return Err(FormatError::OutOfFile { tensor: tensor.name, end, file_len });
            }
        }
        tensor.range = start..end;
        tensors.push(tensor);
    }

    Ok(SafetensorsHeader { header_len, data_start, tensors, metadata: metadata.unwrap_or_default() })
}

/// Checks one entry on its own: dtype known, offsets ordered, shape × dtype size == range.
/// The range stays relative to the data section here.
fn checked_tensor(name: String, raw: RawTensor) -> Result<TensorInfo, FormatError> {
    let Some(dtype) = SafeDtype::from_name(&raw.dtype) else {
        return Err(FormatError::UnknownDtype { tensor: name, dtype: raw.dtype });
    };
    let (start, end) = raw.data_offsets;
    if end < start {
        return Err(FormatError::BackwardsRange { tensor: name, start, end });
    }
    let Some(elements) = raw.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) else {
        return Err(FormatError::SizeOverflow { tensor: name, shape: raw.shape });
    };
    if elements.checked_mul(dtype.bits()).is_none() {
        return Err(FormatError::SizeOverflow { tensor: name, shape: raw.shape });
    }
    let Some(expected) = dtype.bytes_for(elements) else {
        return Err(FormatError::PartialUnit { tensor: name, elements, storage: dtype.name(), unit: "byte" });
    };
    let actual = end - start;
    if expected != actual {
        return Err(FormatError::SizeMismatch {
            tensor: name,
            shape: raw.shape,
            storage: dtype.name(),
            expected,
            actual,
        });
    }
    Ok(TensorInfo { name, storage: StorageType::Safe(dtype), shape: raw.shape, range: start..end })
}

/// Most dimensions a tensor may have. Real tensors have up to 5; a bound keeps a header whose
/// `shape` lists millions of entries from costing memory in proportion to them.
pub const MAX_RANK: usize = 8;

#[derive(Deserialize)]
struct RawTensor {
    dtype: String,
    #[serde(deserialize_with = "bounded_shape")]
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

/// A `shape` array read element by element, refused at the first entry past [`MAX_RANK`].
fn bounded_shape<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u64>, D::Error> {
    struct ShapeVisitor;
    impl<'de> Visitor<'de> for ShapeVisitor {
        type Value = Vec<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "an array of at most {MAX_RANK} dimensions")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u64>, A::Error> {
            let mut shape = Vec::new();
            while let Some(d) = seq.next_element::<u64>()? {
                if shape.len() == MAX_RANK {
                    return Err(A::Error::custom(format!("shape has more than {MAX_RANK} dimensions")));
                }
                shape.push(d);
            }
            Ok(shape)
        }
    }
    deserializer.deserialize_seq(ShapeVisitor)
}

/// The header's top-level entries in document order (a plain map would sort them by name).
/// Values stay unparsed slices of the header until each is read on its own, so a huge value
/// costs no memory beyond the header's own bytes.
struct RawHeader<'a> {
    entries: Vec<(String, &'a RawValue)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawHeader<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for EntriesVisitor<'a> {
            type Value = RawHeader<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object of tensor entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader<'a>, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    entries.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(RawHeader { entries })
            }
        }
        deserializer.deserialize_map(EntriesVisitor(std::marker::PhantomData))
    }
}
