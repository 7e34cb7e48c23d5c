//! Errors from reading model files. Each names the file part (tensor, key) and the problem.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The prefix is too short to finish parsing; fetch at least this many bytes from the start.
    #[error("need the first {needed} bytes of the file to read its header, have {have}")]
    NeedMore { needed: u64, have: u64 },

    #[error("not a {format} file: {message}")]
    BadMagic { format: &'static str, message: String },
}
