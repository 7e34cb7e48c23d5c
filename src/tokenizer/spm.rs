//! SentencePiece-style BPE (Llama 2 family): merges chosen by token score, bytes as fallback.

use std::collections::HashMap;

use super::merge::{merge, Score, Symbol, NO_ID};

/// Encodes `text` (spaces already replaced by U+2581) by repeatedly merging the adjacent pair
/// whose concatenation is the highest-scoring token (leftmost among equals); characters with no
/// token become their UTF-8 bytes' `<0xXX>` tokens.
pub fn encode(
    text: &str,
    ids: &HashMap<String, u32>,
    scores: &[f32],
    byte_tokens: &[Option<u32>; 256],
    unknown: u32,
    out: &mut Vec<u32>,
) {
    let mut symbols: Vec<Symbol> = text
        .char_indices()
        .map(|(i, c)| {
            let end = i + c.len_utf8();
            Symbol { id: ids.get(&text[i..end]).copied().unwrap_or(NO_ID), start: i, end }
        })
        .collect();
    merge(&mut symbols, |l, r| {
        let id = *ids.get(&text[l.start..r.end])?;
        Some((Score(scores.get(id as usize).copied().unwrap_or(f32::NEG_INFINITY)), id))
    });
    for s in symbols {
        match s.id {
            NO_ID => out.extend(text[s.start..s.end].bytes().map(|b| byte_tokens[b as usize].unwrap_or(unknown))),
            id => out.push(id),
        }
    }
}
