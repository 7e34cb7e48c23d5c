//! The one sort of the load-time orderings (tensors by offset, tokens by length, candidate
//! formats by size). The standard library's sorts are compiled once per element type and key:
//! the wasm module held twelve of them (48,645 bytes of code). These orderings go through
//! [`sorted_order`], which sorts `(u64, u64)` keys with their positions, one copy; the
//! single-thread module went from 603,819 to 588,443 bytes gzipped (README, sizes). A new
//! ordering in code the browser runs should use it too.

/// The positions of `keys` in ascending key order, equal keys in their order in `keys` (the
/// order a stable sort gives).
pub(crate) fn sorted_order(keys: impl IntoIterator<Item = (u64, u64)>) -> Vec<usize> {
    by_key(keys.into_iter().enumerate().map(|(i, (a, b))| (a, b, i)).collect())
}

#[inline(never)]
fn by_key(mut keyed: Vec<(u64, u64, usize)>) -> Vec<usize> {
    // The position as the last key makes every key distinct, so the unstable sort is stable.
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, i)| i).collect()
}

/// Sorts `items` by `key`, stable: what `items.sort_by_key(key)` does.
pub(crate) fn sort_by_key<T>(items: &mut Vec<T>, key: impl Fn(&T) -> (u64, u64)) {
    let order = sorted_order(items.iter().map(key));
    let mut slots: Vec<Option<T>> = std::mem::take(items).into_iter().map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// A key that orders longer first (`Reverse(len)` as a [`sort_by_key`] key).
pub(crate) fn longest_first(len: usize) -> u64 {
    u64::MAX - len as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_like_sort_by_key() {
        let mut items: Vec<(u64, u64, char)> =
            vec![(3, 1, 'a'), (1, 2, 'b'), (3, 0, 'c'), (1, 2, 'd'), (0, 9, 'e'), (3, 1, 'f'), (1, 1, 'g')];
        let mut expected = items.clone();
        expected.sort_by_key(|t| (t.0, t.1));
        sort_by_key(&mut items, |t| (t.0, t.1));
        assert_eq!(items, expected);
        let mut expected = items.clone();
        expected.sort_by_key(|t| t.0);
        sort_by_key(&mut items, |t| (t.0, 0));
        assert_eq!(items, expected);
        assert_eq!(sorted_order([(2, 0), (1, 0), (2, 0), (0, 5)]), [3, 1, 0, 2]);
        assert!(sorted_order([]).is_empty());
        let mut words = vec!["ab", "abc", "x", "yz", "a"];
        sort_by_key(&mut words, |s| (longest_first(s.len()), 0));
        assert_eq!(words, ["abc", "ab", "yz", "x", "a"]);
    }
}
