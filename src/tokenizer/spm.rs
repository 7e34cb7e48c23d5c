//! SentencePiece-style BPE (Llama 2 family): merges chosen by token score, bytes as fallback.

use std::collections::HashMap;

/// Encodes `text` (spaces already replaced by U+2581) by repeatedly merging the adjacent pair
/// whose concatenation is the highest-scoring token; characters with no token become their
/// UTF-8 bytes' `<0xXX>` tokens.
pub fn encode(
    text: &str,
    ids: &HashMap<String, u32>,
    scores: &[f32],
    byte_tokens: &[Option<u32>; 256],
    unknown: u32,
) -> Vec<u32> {
    let mut pieces: Vec<String> = text.chars().map(String::from).collect();
    loop {
        let mut best: Option<(f32, usize)> = None;
        for i in 0..pieces.len().saturating_sub(1) {
            let merged = format!("{}{}", pieces[i], pieces[i + 1]);
            if let Some(&id) = ids.get(&merged) {
                let score = scores.get(id as usize).copied().unwrap_or(f32::NEG_INFINITY);
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        let right = pieces.remove(i + 1);
        pieces[i].push_str(&right);
    }
    let mut out = Vec::with_capacity(pieces.len());
    for p in pieces {
        match ids.get(&p) {
            Some(&id) => out.push(id),
            None => out.extend(p.bytes().map(|b| byte_tokens[b as usize].unwrap_or(unknown))),
        }
    }
    out
}
