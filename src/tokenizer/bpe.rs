//! Byte-level BPE (GPT-2 family): bytes map to printable characters, then ranked merges.

use std::collections::HashMap;

use super::merge::{merge, Symbol};

/// GPT-2's reversible byte → char table: printable Latin-1 bytes map to themselves, the rest to
/// code points from U+0100 up, so every byte string is a string of visible characters.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        table[b as usize] = if printable {
            b as char
        } else {
            let c = char::from_u32(next).unwrap_or('\u{FFFD}');
            next += 1;
            c
        };
    }
    table
}

/// Ranked merges over token ids.
pub struct Merges {
    /// (left, right) -> (rank, merged token)
    pairs: HashMap<(u32, u32), (u32, u32)>,
}

impl Merges {
    /// `merges` are "left right" strings in rank order; both halves and their concatenation
    /// must be tokens. Entries that are not are skipped, as other implementations do.
    pub fn new(merges: &[String], ids: &HashMap<String, u32>) -> Self {
        let mut pairs = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            let Some((a, b)) = m.split_once(' ') else { continue };
            let (Some(&ia), Some(&ib)) = (ids.get(a), ids.get(b)) else { continue };
            let Some(&merged) = ids.get(&format!("{a}{b}")) else { continue };
            pairs.entry((ia, ib)).or_insert((rank as u32, merged));
        }
        Self { pairs }
    }

    /// Token ids of `piece`: its bytes' ids (`unknown` for a byte without a token), merged
    /// lowest rank first, leftmost among equal ranks.
    pub fn encode(&self, piece: &str, byte_ids: &[Option<u32>; 256], unknown: u32, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = piece
            .bytes()
            .enumerate()
            .map(|(i, b)| Symbol { id: byte_ids[b as usize].unwrap_or(unknown), start: i, end: i + 1 })
            .collect();
        merge(&mut symbols, |l, r| self.pair(l.id, r.id));
        out.extend(symbols.iter().map(|s| s.id));
    }

    /// Whether tokens `left` and `right` merge: the merge's rank and the merged token.
    pub fn pair(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        self.pairs.get(&(left, right)).copied()
    }
}
