//! Splitting text into pieces before BPE, the way the model's tokenizer was trained to.

use unicode_general_category::{get_general_category, GeneralCategory as G};

/// The pre-tokenizers weft knows, named as GGUF's `tokenizer.ggml.pre` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2: contractions, letters, numbers, other symbols, whitespace runs.
    Gpt2,
    /// GPT-2 after splitting every digit into its own piece (SmolLM, StarCoder, Refact).
    DigitsThenGpt2,
    /// Qwen2's pattern: single digits, a leading non-letter glued to words, newlines kept
    /// with the punctuation or whitespace before them.
    Qwen2,
    /// Llama 3's pattern: Qwen2's with numbers in runs of up to three digits.
    Llama3,
    /// Qwen3.5's pattern: Qwen2's with combining marks counted as letters.
    Qwen35,
}

impl PreTokenizer {
    /// The `tokenizer.ggml.pre` names [`Self::from_gguf_name`] knows, for error messages.
    pub const SUPPORTED: &'static str = "weft knows gpt2, gpt-2, phi-2, default, mpt, olmo, jais, smollm, starcoder, \
                                          refact, codeshell, command-r, qwen2, qwen35, llama-bpe and llama3";

    pub fn from_gguf_name(name: &str) -> Option<Self> {
        match name {
            "gpt2" | "gpt-2" | "phi-2" | "default" | "mpt" | "olmo" | "jais" => Some(Self::Gpt2),
            "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" => Some(Self::DigitsThenGpt2),
            "qwen2" => Some(Self::Qwen2),
            "qwen35" => Some(Self::Qwen35),
            "llama-bpe" | "llama3" => Some(Self::Llama3),
            _ => None,
        }
    }

    /// Whether a piece the vocabulary holds whole is that token without merging (Llama 3's
    /// tokenizer.json `ignore_merges`, which llama.cpp ties to this pre-tokenizer).
    pub fn ignores_merges(&self) -> bool {
        *self == Self::Llama3
    }

    /// Pieces of `text` (slices of it, in order, covering it exactly).
    pub fn split<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut out = Vec::new();
        match self {
            Self::Gpt2 => gpt2_split(text, &mut out),
            Self::DigitsThenGpt2 => {
                let mut start = 0;
                for (i, c) in text.char_indices() {
                    if is_number(c) {
                        gpt2_split(&text[start..i], &mut out);
                        out.push(&text[i..i + c.len_utf8()]);
                        start = i + c.len_utf8();
                    }
                }
                gpt2_split(&text[start..], &mut out);
            }
            Self::Qwen2 => qwen2_split(text, 1, false, &mut out),
            Self::Llama3 => qwen2_split(text, 3, false, &mut out),
            Self::Qwen35 => qwen2_split(text, 1, true, &mut out),
        }
        out
    }
}

pub fn is_letter(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::UppercaseLetter | G::LowercaseLetter | G::TitlecaseLetter | G::ModifierLetter | G::OtherLetter
    )
}

pub fn is_number(c: char) -> bool {
    matches!(get_general_category(c), G::DecimalNumber | G::LetterNumber | G::OtherNumber)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn is_mark(c: char) -> bool {
    matches!(get_general_category(c), G::NonspacingMark | G::SpacingMark | G::EnclosingMark)
}

/// The class of `c`; with `marks`, combining marks are letters.
fn class(c: char, marks: bool) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if is_letter(c) || (marks && is_mark(c)) {
        Class::Letter
    } else if is_number(c) {
        Class::Number
    } else {
        Class::Other
    }
}

const CONTRACTIONS: [&str; 7] = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];

/// The GPT-2 pattern
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
/// as a scanner: the alternatives are tried in order at each position, like the regex engine.
fn gpt2_split<'a>(text: &'a str, out: &mut Vec<&'a str>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
    let run = |from: usize, cls: Class| {
        let mut j = from;
        while j < chars.len() && class(chars[j].1, false) == cls {
            j += 1;
        }
        j
    };
    let mut i = 0;
    while i < chars.len() {
        let rest = &text[byte_at(i)..];
        if let Some(c) = CONTRACTIONS.iter().find(|c| rest.starts_with(**c)) {
            let end = i + c.chars().count();
            out.push(&text[byte_at(i)..byte_at(end)]);
            i = end;
            continue;
        }
        let c = chars[i].1;
        // ` ?X+` for X in letters, numbers, other: an optional single space, then a run.
        let (body, lead) = if c == ' ' && i + 1 < chars.len() && class(chars[i + 1].1, false) != Class::Space {
            (i + 1, 1)
        } else {
            (i, 0)
        };
        let cls = class(chars[body].1, false);
        if cls != Class::Space {
            let end = run(body, cls);
            out.push(&text[byte_at(body - lead)..byte_at(end)]);
            i = end;
            continue;
        }
        // Whitespace: `\s+(?!\S)` keeps the last space for the next word when one follows.
        let end = run(i, Class::Space);
        let end = if end < chars.len() && end - i > 1 { end - 1 } else { end };
        out.push(&text[byte_at(i)..byte_at(end)]);
        i = end;
    }
}

fn is_newline(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// The Qwen2 pattern
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// as a scanner trying the alternatives in order; Llama 3's is the same with `\p{N}{1,3}`
/// (`digits` = 3), Qwen3.5's with `[\p{L}\p{M}]` for `\p{L}` and `[^\s\p{L}\p{M}\p{N}]` for
/// `[^\s\p{L}\p{N}]` (`marks`: a mark where the optional lead could take it is then the
/// first of the run, the same piece).
fn qwen2_split<'a>(text: &'a str, digits: usize, marks: bool, out: &mut Vec<&'a str>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
    let cls = |i: usize| chars.get(i).map(|&(_, c)| class(c, marks));
    let mut i = 0;
    while i < chars.len() {
        let rest = &text[byte_at(i)..];
        let lower: String = rest.chars().take(3).flat_map(char::to_lowercase).collect();
        if let Some(c) = CONTRACTIONS.iter().find(|c| lower.starts_with(**c)) {
            let end = i + c.chars().count();
            out.push(&text[byte_at(i)..byte_at(end)]);
            i = end;
            continue;
        }
        let c = chars[i].1;
        let mut end = i;
        // [^\r\n\p{L}\p{N}]?\p{L}+
        let lead = usize::from(!is_newline(c) && !matches!(cls(i), Some(Class::Letter | Class::Number)));
        if cls(i + lead) == Some(Class::Letter) {
            end = i + lead;
            while cls(end) == Some(Class::Letter) {
                end += 1;
            }
        } else if cls(i) == Some(Class::Number) {
            end = i + 1;
            while end < i + digits && cls(end) == Some(Class::Number) {
                end += 1;
            }
        } else {
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
            let body = if c == ' ' { i + 1 } else { i };
            if cls(body) == Some(Class::Other) {
                end = body;
                while cls(end) == Some(Class::Other) {
                    end += 1;
                }
                while end < chars.len() && is_newline(chars[end].1) {
                    end += 1;
                }
            }
        }
        if end == i {
            // Whitespace: `\s*[\r\n]+` up to the run's last newline, else `\s+(?!\S)|\s+`.
            let mut run = i;
            while cls(run) == Some(Class::Space) {
                run += 1;
            }
            end = match (i..run).rev().find(|&j| is_newline(chars[j].1)) {
                Some(last_newline) => last_newline + 1,
                None if run < chars.len() && run - i > 1 => run - 1,
                None => run.max(i + 1),
            };
        }
        out.push(&text[byte_at(i)..byte_at(end)]);
        i = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_pieces() {
        let p = PreTokenizer::Gpt2;
        assert_eq!(p.split("Hello world"), ["Hello", " world"]);
        assert_eq!(p.split("it's  a test!!"), ["it", "'s", " ", " a", " test", "!!"]);
        assert_eq!(p.split("a\n\nb"), ["a", "\n", "\n", "b"]);
        assert_eq!(p.split("x   "), ["x", "   "]);
        assert_eq!(p.split(" 123abc"), [" 123", "abc"]);
        assert_eq!(p.split("héllo wörld"), ["héllo", " wörld"]);
        assert_eq!(p.split(""), Vec::<&str>::new());
    }

    #[test]
    fn qwen2_pieces() {
        let p = PreTokenizer::Qwen2;
        assert_eq!(p.split("Hello world, 123!"), ["Hello", " world", ",", " ", "1", "2", "3", "!"]);
        assert_eq!(p.split("I'LL go.\n\nNext"), ["I", "'LL", " go", ".\n\n", "Next"]);
        assert_eq!(p.split("a  \n\n  b"), ["a", "  \n\n", " ", " b"]);
        assert_eq!(p.split("(hello)"), ["(hello", ")"]);
        assert_eq!(p.split("x\t\ty"), ["x", "\t", "\ty"]);
    }

    #[test]
    fn llama3_pieces() {
        let p = PreTokenizer::Llama3;
        assert_eq!(p.split("in 1234567 ways"), ["in", " ", "123", "456", "7", " ways"]);
        assert_eq!(p.split("I'LL go.\n\nNext"), ["I", "'LL", " go", ".\n\n", "Next"]);
    }

    /// Devanagari vowel signs are marks: Qwen2 cuts the word at each, Qwen3.5 keeps it whole.
    #[test]
    fn qwen35_keeps_marks_in_words() {
        let text = "नमस्ते दुनिया";
        assert_eq!(PreTokenizer::Qwen35.split(text), ["नमस्ते", " दुनिया"]);
        assert!(PreTokenizer::Qwen2.split(text).len() > 2);
    }

    #[test]
    fn digits_are_single_pieces_for_smollm() {
        let p = PreTokenizer::DigitsThenGpt2;
        assert_eq!(p.split("in 2024, x"), ["in", " ", "2", "0", "2", "4", ",", " x"]);
    }
}
