//! The merge engine shared by every BPE flavour: adjacent symbols are merged best pair first
//! (leftmost among equals) until no pair merges. A doubly linked list holds the symbols and a
//! binary heap the candidate pairs, so a piece of n symbols costs O(n log n) rather than the
//! O(n²) of rescanning the whole piece after every merge. Heap entries are checked when popped
//! and dropped if either side changed since they were pushed.
//!
//! The flavours differ only in how two adjacent symbols merge: byte-level BPE looks the id pair
//! up in its ranked merge list, SentencePiece looks the joined text up in the vocabulary and
//! prefers the higher score. Both pass that rule as a closure.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// One symbol of a piece: a token id (or [`NO_ID`]) and the byte range of the piece it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub id: u32,
    pub start: usize,
    pub end: usize,
}

/// The id of a symbol whose text is not a token (SentencePiece falls back to its bytes).
pub const NO_ID: u32 = u32::MAX;

/// Longest piece the merge engine is given, in bytes. Longer pre-tokenized pieces are cut into
/// chunks of at most this size (on character boundaries; SentencePiece text before a word where
/// it can), which bounds the work per chunk. Only a run of over 1 KB without a pre-tokenizer
/// boundary is affected, and then only at the cut.
pub const MAX_PIECE_BYTES: usize = 1024;

/// A SentencePiece score as a heap key: higher scores merge first; NaN ranks below everything.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f32);

impl Eq for Score {}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        let key = |s: f32| if s.is_nan() { f32::NEG_INFINITY } else { s };
        // Reversed: the heap pops the smallest key, and the best score must come first.
        key(other.0).total_cmp(&key(self.0))
    }
}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

const NONE: usize = usize::MAX;

struct Node {
    sym: Symbol,
    prev: usize,
    next: usize,
    /// Bumped whenever the symbol changes or dies, so stale heap entries can be recognised.
    version: u32,
    alive: bool,
}

/// A candidate merge of node `left` with the node after it.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Candidate<K> {
    key: K,
    /// The left symbol's start: among equal keys the leftmost pair merges first.
    start: usize,
    left: usize,
    right: usize,
    left_version: u32,
    right_version: u32,
    merged: u32,
}

/// Merges `symbols` in place. `rule(left, right)` says whether two adjacent symbols merge: the
/// pair's key (smaller merges first) and the merged symbol's id.
pub fn merge<K: Ord>(symbols: &mut Vec<Symbol>, rule: impl Fn(&Symbol, &Symbol) -> Option<(K, u32)>) {
    if symbols.len() < 2 {
        return;
    }
    let n = symbols.len();
    let mut nodes: Vec<Node> = symbols
        .iter()
        .enumerate()
        .map(|(i, &sym)| Node {
            sym,
            prev: if i == 0 { NONE } else { i - 1 },
            next: if i + 1 == n { NONE } else { i + 1 },
            version: 0,
            alive: true,
        })
        .collect();
    let candidate = |nodes: &[Node], left: usize| -> Option<Candidate<K>> {
        let right = nodes[left].next;
        if right == NONE {
            return None;
        }
        let (l, r) = (&nodes[left], &nodes[right]);
        let (key, merged) = rule(&l.sym, &r.sym)?;
        Some(Candidate {
            key,
            start: l.sym.start,
            left,
            right,
            left_version: l.version,
            right_version: r.version,
            merged,
        })
    };
    let mut heap: BinaryHeap<Reverse<Candidate<K>>> = (0..n - 1).filter_map(|i| candidate(&nodes, i)).map(Reverse).collect();
    while let Some(Reverse(c)) = heap.pop() {
        let (l, r) = (&nodes[c.left], &nodes[c.right]);
        let current = l.alive && r.alive && l.next == c.right && l.version == c.left_version && r.version == c.right_version;
        if !current {
            continue;
        }
        // The right symbol joins the left one.
        let after = r.next;
        let end = r.sym.end;
        nodes[c.right].alive = false;
        nodes[c.right].version = nodes[c.right].version.wrapping_add(1);
        let left = &mut nodes[c.left];
        left.sym = Symbol { id: c.merged, start: left.sym.start, end };
        left.next = after;
        left.version = left.version.wrapping_add(1);
        if after != NONE {
            nodes[after].prev = c.left;
        }
        let prev = nodes[c.left].prev;
        if prev != NONE {
            heap.extend(candidate(&nodes, prev).map(Reverse));
        }
        heap.extend(candidate(&nodes, c.left).map(Reverse));
    }
    symbols.clear();
    let mut at = 0;
    while at != NONE {
        symbols.push(nodes[at].sym);
        at = nodes[at].next;
    }
}

/// `text` cut into chunks of at most [`MAX_PIECE_BYTES`] on character boundaries; with
/// `before_word`, a cut goes where possible before a `▁` that follows another character, where
/// SentencePiece vocabularies have no token spanning the cut.
pub fn chunks(text: &str, before_word: bool) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len();
        if cut > MAX_PIECE_BYTES {
            cut = MAX_PIECE_BYTES;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            if before_word {
                let word = rest[..cut]
                    .char_indices()
                    .rev()
                    .find(|&(i, c)| i > 0 && c == '\u{2581}' && !rest[..i].ends_with('\u{2581}'))
                    .map(|(i, _)| i);
                cut = word.unwrap_or(cut);
            }
            // A character longer than the whole limit cannot occur (at most 4 bytes), so the
            // cut is never 0.
        }
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quadratic rule the engine replaces: rescan, merge the best leftmost pair, repeat.
    fn reference<K: Ord + Copy>(symbols: &mut Vec<Symbol>, rule: impl Fn(&Symbol, &Symbol) -> Option<(K, u32)>) {
        loop {
            let best = (0..symbols.len().saturating_sub(1))
                .filter_map(|i| rule(&symbols[i], &symbols[i + 1]).map(|(k, id)| (k, i, id)))
                .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
            let Some((_, i, id)) = best else { return };
            symbols[i] = Symbol { id, start: symbols[i].start, end: symbols[i + 1].end };
            symbols.remove(i + 1);
        }
    }

    #[test]
    fn same_result_as_rescanning_on_seeded_inputs() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(18);
        for _ in 0..300 {
            // Ids 0..4 are "characters"; a pair merges to a new id with a rank drawn per pair,
            // ties included.
            let ranks: Vec<u32> = (0..64).map(|_| rng.random_range(0..6)).collect();
            let rule = |l: &Symbol, r: &Symbol| {
                let (a, b) = (l.id % 8, r.id % 8);
                let rank = ranks[(a * 8 + b) as usize];
                (rank < 4).then_some((rank, (l.id * 7 + r.id * 13) % 64))
            };
            let len = rng.random_range(0..40);
            let input: Vec<Symbol> =
                (0..len).map(|i| Symbol { id: rng.random_range(0..4), start: i, end: i + 1 }).collect();
            let (mut fast, mut slow) = (input.clone(), input);
            merge(&mut fast, rule);
            reference(&mut slow, rule);
            assert_eq!(fast, slow);
        }
    }

    #[test]
    fn chunks_cover_the_text_on_boundaries() {
        let text = "é".repeat(1500);
        let parts: Vec<&str> = chunks(&text, false).collect();
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| p.len() <= MAX_PIECE_BYTES));
        let words = "\u{2581}word".repeat(400);
        let parts: Vec<&str> = chunks(&words, true).collect();
        assert_eq!(parts.concat(), words);
        assert!(parts.iter().all(|p| p.len() <= MAX_PIECE_BYTES && p.starts_with("\u{2581}word")));
        assert_eq!(chunks("", true).count(), 0);
    }

    #[test]
    fn scores_order_highest_first_and_nan_last() {
        let mut keys = [Score(-1.0), Score(f32::NAN), Score(3.0), Score(0.5)];
        keys.sort();
        assert_eq!(keys.iter().map(|s| s.0).take(3).collect::<Vec<_>>(), [3.0, 0.5, -1.0]);
        assert!(keys[3].0.is_nan());
    }
}
