//! Shared by the header fuzz targets: how an input becomes (prefix, file_len), and the
//! properties every accepted header must have.

#![allow(dead_code)]

use weft::format::{FormatError, TensorInfo};

/// The first byte picks the file length the parser is told: unknown, exactly the prefix, or
/// the prefix plus a little-endian u32 from the next four bytes (the rest of the file absent).
pub fn split_input(data: &[u8]) -> Option<(&[u8], Option<u64>)> {
    let (&mode, rest) = data.split_first()?;
    Some(match mode % 3 {
        0 => (rest, None),
        1 => (rest, Some(rest.len() as u64)),
        _ => {
            let extra: [u8; 4] = rest.get(..4)?.try_into().ok()?;
            let prefix = rest.get(4..)?;
            (prefix, Some(prefix.len() as u64 + u64::from(u32::from_le_bytes(extra))))
        }
    })
}

pub fn check_result<T>(
    result: &Result<T, FormatError>,
    prefix: &[u8],
    file_len: Option<u64>,
    tensors: impl Fn(&T) -> &[TensorInfo],
) {
    match result {
        Ok(header) => {
            let tensors = tensors(header);
            for t in tensors {
                assert!(t.range.start <= t.range.end);
                if let Some(len) = file_len {
                    assert!(t.range.end <= len, "{} ends past the file", t.name);
                }
                assert_eq!(t.storage.bytes_for(t.elements()), Some(t.byte_len()));
            }
            let mut ranges: Vec<_> = tensors.iter().filter(|t| !t.range.is_empty()).map(|t| t.range.clone()).collect();
            ranges.sort_by_key(|r| r.start);
            for pair in ranges.windows(2) {
                assert!(pair[0].end <= pair[1].start, "overlapping tensors accepted");
            }
        }
        Err(FormatError::NeedMore { needed, have }) => {
            assert_eq!(*have, prefix.len() as u64);
            assert!(*needed > *have, "NeedMore asks for no new bytes");
            if let Some(len) = file_len {
                assert!(*needed <= len, "NeedMore asks for bytes past the end of the file");
            }
        }
        Err(_) => {}
    }
}

/// What every validated configuration guarantees: dimensions within their limits and related
/// as the engine assumes, so products of them cannot overflow.
pub fn check_config(c: &weft::model::LlamaConfig) {
    use weft::model::config::limits::*;
    assert!(c.n_layers >= 1 && c.n_layers as u64 <= MAX_LAYERS);
    assert!(c.dim >= 1 && c.dim as u64 <= MAX_DIM);
    assert!(c.vocab >= 1 && c.vocab as u64 <= MAX_VOCAB);
    assert!(c.ffn_dim >= 1 && c.ffn_dim as u64 <= MAX_FFN);
    assert!(c.context_length >= 1 && c.context_length as u64 <= MAX_CONTEXT);
    assert!(c.n_kv_heads >= 1 && c.n_heads.is_multiple_of(c.n_kv_heads) && c.n_heads as u64 <= MAX_HEADS);
    assert!(c.head_dim >= 2 && c.head_dim.is_multiple_of(2) && c.rope_dims <= c.head_dim);
    assert!(c.q_dim().checked_mul(c.dim).is_some());
}
