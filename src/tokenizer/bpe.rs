//! Byte-level BPE (GPT-2 family): bytes map to printable characters, then ranked merges.

use std::collections::HashMap;

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

    /// Applies merges to `symbols` until none applies: always the lowest rank, leftmost first.
    pub fn apply(&self, symbols: &mut Vec<u32>) {
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(i, w)| self.pairs.get(&(w[0], w[1])).map(|&(rank, id)| (rank, i, id)))
                .min();
            let Some((_, i, id)) = best else { return };
            symbols[i] = id;
            symbols.remove(i + 1);
        }
    }
}
