//! BERT's WordPiece tokenizer: the basic tokenizer (text cleaning, CJK splitting, optional accent
//! stripping and lower-casing, whitespace and punctuation splitting), then greedy longest-match
//! sub-words with a `##` continuation prefix, framed as `[CLS] … [SEP]` and truncated to the
//! model's maximum length. Follows Hugging Face `tokenizers` (BertNormalizer,
//! BertPreTokenizer, WordPiece, TemplateProcessing), which `tests/fixtures/embed` pins.

use std::collections::HashMap;

use unicode_general_category::{get_general_category, GeneralCategory as G};

use crate::error::{Error, Result};

/// How the basic tokenizer normalises text before splitting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Normalize {
    pub clean_text: bool,
    pub chinese_chars: bool,
    pub strip_accents: bool,
    pub lowercase: bool,
}

impl Default for Normalize {
    /// The uncased BERT vocabulary's settings (accents follow lower-casing, as in BERT).
    fn default() -> Self {
        Self { clean_text: true, chinese_chars: true, strip_accents: true, lowercase: true }
    }
}

pub struct WordPiece {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
    pub normalize: Normalize,
    pub unk: u32,
    pub cls: u32,
    pub sep: u32,
    pub pad: u32,
    prefix: String,
    max_word_chars: usize,
}

/// One tokenized text: ids with the `[CLS]`/`[SEP]` frame, never longer than the maximum.
pub type Encoding = Vec<u32>;

impl WordPiece {
    /// From a vocabulary in id order (vocab.txt's lines).
    pub fn new(tokens: Vec<String>, normalize: Normalize) -> Result<Self> {
        let ids: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let special = |name: &str| {
            ids.get(name).copied().ok_or_else(|| Error::Tokenizer(format!("WordPiece vocabulary has no {name} token")))
        };
        Ok(Self {
            unk: special("[UNK]")?,
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            pad: special("[PAD]").unwrap_or(0),
            tokens,
            ids,
            normalize,
            prefix: "##".into(),
            max_word_chars: 100,
        })
    }

    /// From vocab.txt, one token per line; `lowercase` from tokenizer_config.json's
    /// `do_lower_case` (accents are stripped when lower-casing, BERT's default).
    pub fn from_vocab_txt(text: &str, lowercase: bool) -> Result<Self> {
        let tokens: Vec<String> = text.lines().map(|l| l.trim_end_matches('\r').to_string()).collect();
        Self::new(tokens, Normalize { lowercase, strip_accents: lowercase, ..Normalize::default() })
    }

    /// From a Hugging Face tokenizer.json whose model is WordPiece.
    pub fn from_tokenizer_json(text: &str) -> Result<Self> {
        let bad = |m: &str| Error::Tokenizer(format!("tokenizer.json: {m}"));
        let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
        let model = &doc["model"];
        if model["type"].as_str() != Some("WordPiece") {
            return Err(bad("the model is not WordPiece"));
        }
        let vocab = model["vocab"].as_object().ok_or_else(|| bad("model.vocab missing"))?;
        let mut tokens = vec![String::new(); vocab.len()];
        for (token, id) in vocab {
            let id = id.as_u64().filter(|&i| (i as usize) < tokens.len()).ok_or_else(|| bad("vocab ids are not 0..n"))?;
            tokens[id as usize] = token.clone();
        }
        let n = &doc["normalizer"];
        let flag = |key: &str, default: bool| n[key].as_bool().unwrap_or(default);
        let lowercase = flag("lowercase", true);
        let normalize = Normalize {
            clean_text: flag("clean_text", true),
            chinese_chars: flag("handle_chinese_chars", true),
            // null means "as lower-casing", BERT's convention.
            strip_accents: n["strip_accents"].as_bool().unwrap_or(lowercase),
            lowercase,
        };
        let mut wp = Self::new(tokens, normalize)?;
        if let Some(unk) = model["unk_token"].as_str() {
            wp.unk = wp.id(unk).ok_or_else(|| bad("unk_token not in the vocabulary"))?;
        }
        if let Some(p) = model["continuing_subword_prefix"].as_str() {
            wp.prefix = p.to_string();
        }
        if let Some(m) = model["max_input_chars_per_word"].as_u64() {
            wp.max_word_chars = m as usize;
        }
        Ok(wp)
    }

    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// `[CLS] pieces… [SEP]`, the pieces cut so the whole is at most `max_len` (≥ 2) ids.
    pub fn encode(&self, text: &str, max_len: usize) -> Encoding {
        let mut ids = vec![self.cls];
        let budget = max_len.max(2) - 1;
        for word in self.words(text) {
            self.push_word(&word, &mut ids);
            if ids.len() >= budget {
                break;
            }
        }
        ids.truncate(budget);
        ids.push(self.sep);
        ids
    }

    /// The basic tokenizer: normalised text split into words and punctuation marks.
    pub fn words(&self, text: &str) -> Vec<String> {
        let n = self.normalize;
        let mut s = String::with_capacity(text.len());
        for c in text.chars() {
            if n.clean_text {
                if c == '\0' || c == '\u{fffd}' || is_control(c) {
                    continue;
                }
                if is_whitespace(c) {
                    s.push(' ');
                    continue;
                }
            }
            if n.chinese_chars && is_cjk(c) {
                s.push(' ');
                s.push(c);
                s.push(' ');
            } else {
                s.push(c);
            }
        }
        if n.strip_accents {
            s = super::accents::strip_accents(&s);
        }
        if n.lowercase {
            s = s.to_lowercase();
        }
        let mut words = Vec::new();
        for chunk in s.split(char::is_whitespace).filter(|w| !w.is_empty()) {
            let mut word = String::new();
            for c in chunk.chars() {
                if is_punctuation(c) {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    words.push(c.to_string());
                } else {
                    word.push(c);
                }
            }
            if !word.is_empty() {
                words.push(word);
            }
        }
        words
    }

    /// Greedy longest-match-first pieces of one word; `[UNK]` for the whole word when some
    /// part of it matches nothing (or it is too long).
    fn push_word(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > self.max_word_chars {
            out.push(self.unk);
            return;
        }
        let start_len = out.len();
        let mut start = 0;
        let mut piece = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                piece.clear();
                if start > 0 {
                    piece.push_str(&self.prefix);
                }
                piece.push_str(&word[start..end]);
                if let Some(&id) = self.ids.get(&piece) {
                    found = Some(id);
                    break;
                }
                end = word[..end].char_indices().next_back().map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(start_len);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r')
        && matches!(
            get_general_category(c),
            G::Control | G::Format | G::Surrogate | G::PrivateUse | G::Unassigned
        )
}

/// ASCII punctuation (BERT counts `$`, `+`, `^`, … as punctuation) and Unicode P*.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            get_general_category(c),
            G::ConnectorPunctuation
                | G::DashPunctuation
                | G::ClosePunctuation
                | G::FinalPunctuation
                | G::InitialPunctuation
                | G::OtherPunctuation
                | G::OpenPunctuation
        )
}

/// The CJK Unified Ideograph blocks BERT isolates (not Hangul, kana or other scripts).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "cafe", ",", "!", "東"];
        WordPiece::new(vocab.iter().map(|s| s.to_string()).collect(), Normalize::default()).unwrap()
    }

    #[test]
    fn greedy_pieces_accents_punctuation_and_unknown_words() {
        let wp = tiny();
        assert_eq!(wp.encode("UNAFFABLE, Café!", 16), vec![2, 4, 5, 6, 8, 7, 9, 3]);
        // "unx" has no piece for "x": the whole word is [UNK], not "un" + [UNK].
        assert_eq!(wp.encode("unx 東京", 16), vec![2, 1, 10, 1, 3]);
    }

    #[test]
    fn truncation_keeps_the_frame() {
        let wp = tiny();
        assert_eq!(wp.encode("unaffable unaffable", 4), vec![2, 4, 5, 3]);
        assert_eq!(wp.encode("", 8), vec![2, 3]);
    }
}
