//! BERT's accent stripping (`strip_accents`): Unicode NFD, then every nonspacing mark (`Mn`)
//! dropped. Written as one lookup per character over a generated table (`accents_table.rs`, about
//! 2,000 entries) instead of the `unicode-normalization` crate, whose `nfd()` links both the
//! canonical and the compatibility decomposition tables (about 100 KB of wasm data, 50 KB
//! gzipped) because the kind is a runtime field. The table is checked against that crate for
//! every code point in the tests, and rewritten from it with
//! `WEFT_WRITE_ACCENTS=1 cargo test --lib accents -- --ignored`.
//!
//! One difference from NFD remains, documented rather than tabled: NFD also sorts runs of marks
//! by combining class across characters. All `Mn` marks are dropped, so that only matters for the
//! 25 spacing marks with a nonzero class (some viramas, the Hangul tone marks, musical-symbol
//! stems) when two of them with different classes follow each other; they keep the input order.

use unicode_general_category::{get_general_category, GeneralCategory as G};

use super::accents_table::{ACCENTS, LONG};

const HANGUL_BASE: u32 = 0xAC00;
const HANGUL_COUNT: u32 = 11172;

/// Appends `c` decomposed (NFD) with its nonspacing marks dropped.
fn push_stripped(out: &mut String, c: char) {
    if get_general_category(c) == G::NonspacingMark {
        return;
    }
    let u = c as u32;
    // Hangul syllables decompose by arithmetic into leading, vowel and optional trailing jamo
    // (Unicode 3.12); none of them is a mark.
    if (HANGUL_BASE..HANGUL_BASE + HANGUL_COUNT).contains(&u) {
        let s = u - HANGUL_BASE;
        let (l, v, t) = (0x1100 + s / 588, 0x1161 + (s % 588) / 28, 0x11A7 + s % 28);
        for j in [l, v] {
            out.push(char::from_u32(j).unwrap_or(c));
        }
        if t != 0x11A7 {
            out.push(char::from_u32(t).unwrap_or(c));
        }
        return;
    }
    match ACCENTS.binary_search_by_key(&u, |e| e.0) {
        Err(_) => out.push(c),
        Ok(i) => {
            let v = ACCENTS[i].1;
            // The high bit marks a decomposition of several kept characters: start and length
            // in `LONG`; otherwise the value is the one character left.
            let chars: &[u32] = if v & 0x8000_0000 != 0 {
                let (start, len) = ((v & 0xFFFF) as usize, ((v >> 16) & 0xFF) as usize);
                &LONG[start..start + len]
            } else {
                std::slice::from_ref(&ACCENTS[i].1)
            };
            out.extend(chars.iter().filter_map(|&x| char::from_u32(x)));
        }
    }
}

/// `s` in NFD with every nonspacing mark removed ("Crème Brûlée" → "Creme Brulee").
pub fn strip_accents(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_stripped(&mut out, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_normalization::UnicodeNormalization;

    /// The reference: what the tokenizer computed before, through `unicode-normalization`.
    fn reference(c: char) -> Vec<char> {
        std::iter::once(c)
            .nfd()
            .filter(|&c| get_general_category(c) != G::NonspacingMark)
            .collect()
    }

    #[test]
    fn every_code_point_matches_nfd_without_marks() {
        let mut wrong = Vec::new();
        for c in (0..0x110000u32).filter_map(char::from_u32) {
            let mut got = String::new();
            push_stripped(&mut got, c);
            if got.chars().collect::<Vec<_>>() != reference(c) {
                wrong.push(c as u32);
            }
        }
        assert!(
            wrong.is_empty(),
            "{} code points differ, first {:x?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
    }

    #[test]
    fn strips_a_sentence() {
        assert_eq!(
            strip_accents("Crème Brûlée, naïve façade, Ångström"),
            "Creme Brulee, naive facade, Angstrom"
        );
        // Hangul syllables come out as their jamo, as NFD writes them.
        let nfd: String = "한국어".nfd().collect();
        assert_eq!(nfd.chars().count(), 8);
        assert_eq!(strip_accents("한국어"), nfd);
    }

    /// Rewrites `accents_table.rs` from `unicode-normalization` (run when that crate's Unicode
    /// version moves; the test above then says whether anything changed).
    #[test]
    #[ignore]
    fn write_table() {
        if std::env::var_os("WEFT_WRITE_ACCENTS").is_none() {
            return;
        }
        let (mut single, mut long, mut entries) = (0, Vec::new(), Vec::new());
        for c in (0..0x110000u32).filter_map(char::from_u32) {
            let u = c as u32;
            if (HANGUL_BASE..HANGUL_BASE + HANGUL_COUNT).contains(&u)
                || get_general_category(c) == G::NonspacingMark
            {
                continue;
            }
            let r = reference(c);
            if r == [c] {
                continue;
            }
            let v = if r.len() == 1 {
                single += 1;
                r[0] as u32
            } else {
                let v = 0x8000_0000 | (r.len() as u32) << 16 | long.len() as u32;
                long.extend(r.iter().map(|&x| x as u32));
                v
            };
            entries.push(format!("(0x{u:X}, 0x{v:X})"));
        }
        let n = entries.len();
        let entries: String = entries
            .chunks(6)
            .map(|c| format!("    {},\n", c.join(", ")))
            .collect();
        let long: Vec<String> = long.iter().map(|x| format!("0x{x:X}")).collect();
        let long: String = long
            .chunks(10)
            .map(|c| format!("    {},\n", c.join(", ")))
            .collect();
        let text = format!(
            "//! Generated by `accents::tests::write_table` from unicode-normalization {}.{}.{}: every\n\
             //! character that is not a nonspacing mark or a Hangul syllable and whose NFD with the\n\
             //! marks dropped is not itself ({single} to one character, {} to several).\n\n\
             #[rustfmt::skip]\npub(super) static ACCENTS: [(u32, u32); {n}] = [\n{entries}];\n\n\
             #[rustfmt::skip]\npub(super) static LONG: [u32; {}] = [\n{}];\n",
            unicode_normalization::UNICODE_VERSION.0,
            unicode_normalization::UNICODE_VERSION.1,
            unicode_normalization::UNICODE_VERSION.2,
            n - single,
            long.lines().map(|l| l.matches("0x").count()).sum::<usize>(),
            long,
        );
        std::fs::write(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/tokenizer/accents_table.rs"
            ),
            text,
        )
        .unwrap();
    }
}
