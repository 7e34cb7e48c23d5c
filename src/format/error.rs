//! Errors from reading model files. Each names the file part (tensor, key) and the problem.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum FormatError {
    /// The prefix is too short to finish parsing; fetch at least this many bytes from the start.
    #[error("need the first {needed} bytes of the file to read its header, have {have}")]
    NeedMore { needed: u64, have: u64 },

    #[error("not a {format} file: {message}")]
    BadMagic { format: &'static str, message: String },

    /// The file ends before its header does.
    #[error("the {format} header needs at least {needed} bytes but the file has only {file_len}")]
    Truncated { format: &'static str, needed: u64, file_len: u64 },

    #[error("the {format} header would be {len} bytes, more than the {max} bytes weft accepts")]
    HeaderTooLarge { format: &'static str, len: u64, max: u64 },

    #[error("the safetensors header is not valid JSON: {message}")]
    HeaderJson { message: String },

    #[error("safetensors '__metadata__' is not a map of strings to strings: {message}")]
    BadMetadata { message: String },

    #[error("tensor '{tensor}': malformed entry: {message}")]
    BadTensorEntry { tensor: String, message: String },

    #[error("tensor '{tensor}' appears twice in the header")]
    DuplicateTensor { tensor: String },

    #[error("tensor '{tensor}': unknown or unsupported dtype '{dtype}'")]
    UnknownDtype { tensor: String, dtype: String },

    #[error("tensor '{tensor}': unknown or unsupported GGML type id {id}")]
    UnknownGgmlType { tensor: String, id: u32 },

    #[error("tensor '{tensor}': element count or byte size of shape {shape:?} overflows 64 bits")]
    SizeOverflow { tensor: String, shape: Vec<u64> },

    /// The element count does not fill whole bytes (odd F4 count) or whole GGML blocks.
    #[error("tensor '{tensor}': {elements} elements of {storage} do not fill whole {unit}s")]
    PartialUnit { tensor: String, elements: u64, storage: &'static str, unit: &'static str },

    #[error(
        "tensor '{tensor}': shape {shape:?} of {storage} needs {expected} bytes, \
         its byte range holds {actual}"
    )]
    SizeMismatch { tensor: String, shape: Vec<u64>, storage: &'static str, expected: u64, actual: u64 },

    #[error("tensor '{tensor}': data offsets [{start}, {end}] run backwards")]
    BackwardsRange { tensor: String, start: u64, end: u64 },

    #[error("tensor '{tensor}' starts at data offset {start}, inside '{previous}' which ends at {previous_end}")]
    Overlap { tensor: String, start: u64, previous: String, previous_end: u64 },

    #[error("tensor '{tensor}' starts at data offset {start}, leaving a gap after the previous tensor, which ends at {expected}")]
    Gap { tensor: String, start: u64, expected: u64 },

    #[error("tensor '{tensor}' ends at byte {end}, past the end of the {file_len}-byte file")]
    OutOfFile { tensor: String, end: u64, file_len: u64 },

    #[error("GGUF version {version} is not supported (weft reads versions 2 and 3)")]
    UnsupportedVersion { version: u32 },

    #[error("GGUF {what}: {count} is more than the {max} weft accepts")]
    TooMany { what: &'static str, count: u64, max: u64 },

    #[error("GGUF key '{key}': unknown metadata value type {type_id}")]
    UnknownValueType { key: String, type_id: u32 },

    #[error("GGUF key '{key}': arrays nested deeper than {max} levels")]
    NestingTooDeep { key: String, max: u32 },

    #[error("GGUF key '{key}': {message}")]
    BadValue { key: String, message: String },

    #[error("GGUF {what} is not valid UTF-8")]
    BadUtf8 { what: String },

    #[error("GGUF key '{key}' appears twice")]
    DuplicateKey { key: String },

    #[error("GGUF tensor '{tensor}' has {n_dims} dimensions, more than {max}")]
    TooManyDims { tensor: String, n_dims: u32, max: u32 },

    #[error("GGUF general.alignment must be a nonzero power of two, found {found}")]
    BadAlignment { found: String },

    #[error("GGUF tensor '{tensor}': offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedOffset { tensor: String, offset: u64, alignment: u64 },

    /// A typed metadata accessor found no such key.
    #[error("metadata key '{key}' is missing")]
    MissingKey { key: String },

    /// A typed metadata accessor found the key holding another type.
    #[error("metadata key '{key}' holds {found}, expected {expected}")]
    WrongType { key: String, expected: &'static str, found: String },
}
