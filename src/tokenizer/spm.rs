//! SentencePiece-style BPE (Llama 2, Phi-3, Gemma): text with spaces as U+2581 merged from its
//! characters, bytes as fallback.

use std::collections::HashMap;

use super::bpe::Merges;
use super::merge::{merge, Score, Symbol, NO_ID};

/// How two adjacent pieces merge.
pub enum Rule {
    /// SentencePiece's own rule (GGUF `llama` files): the pair whose concatenation is the
    /// highest-scoring token first.
    Scores(Vec<f32>),
    /// Ranked merges of token pairs (GGUF `gemma4` files, whose scores are all equal).
    Ranks(Merges),
}

/// Encodes `text` (spaces already replaced by U+2581) by merging adjacent pieces by `rule`,
/// leftmost among equals; characters with no token become their UTF-8 bytes' `<0xXX>` tokens.
pub fn encode(
    text: &str,
    ids: &HashMap<String, u32>,
    rule: &Rule,
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
    match rule {
        Rule::Scores(scores) => merge(&mut symbols, |l, r| {
            let id = *ids.get(&text[l.start..r.end])?;
            Some((Score(scores.get(id as usize).copied().unwrap_or(f32::NEG_INFINITY)), id))
        }),
        Rule::Ranks(merges) => merge(&mut symbols, |l, r| merges.pair(l.id, r.id)),
    }
    for s in symbols {
        match s.id {
            NO_ID => out.extend(text[s.start..s.end].bytes().map(|b| byte_tokens[b as usize].unwrap_or(unknown))),
            id => out.push(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranked merges join only the pairs listed, so "abc" needs a merge of exactly its two
    /// halves; scores join any two pieces that make a token. A character without a token ('x')
    /// is its byte either way.
    #[test]
    fn ranks_merge_listed_pairs_scores_any_token() {
        let ids: HashMap<String, u32> =
            ["a", "b", "c", "ab", "bc", "abc"].iter().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
        let mut bytes = [None; 256];
        bytes[b'x' as usize] = Some(100);
        let encode_abcx = |rule: &Rule| {
            let mut out = Vec::new();
            encode("abcx", &ids, rule, &bytes, 99, &mut out);
            out
        };
        let ranks = |list: &[&str]| Rule::Ranks(Merges::new(&list.iter().map(|m| m.to_string()).collect::<Vec<_>>(), &ids));
        assert_eq!(encode_abcx(&ranks(&["a b"])), [3, 2, 100]);
        assert_eq!(encode_abcx(&ranks(&["b c", "a bc"])), [5, 100]);
        assert_eq!(encode_abcx(&ranks(&["a b", "b c", "a bc"])), [3, 2, 100]);
        assert_eq!(encode_abcx(&Rule::Scores(vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0])), [5, 100]);
    }
}
