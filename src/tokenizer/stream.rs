//! Turning a stream of token ids into text without splitting a UTF-8 character.

use super::Tokenizer;
use crate::error::Result;

/// Collects token bytes and hands out the text that is complete so far.
#[derive(Default)]
pub struct TextStream {
    pending: Vec<u8>,
}

impl TextStream {
    /// Adds a token; returns the newly complete text (possibly empty). Control tokens add
    /// nothing.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String> {
        if tok.is_control(id) {
            return Ok(String::new());
        }
        self.pending.extend_from_slice(tok.token_bytes(id)?);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            // An incomplete character at the end waits for the next token; an invalid
            // sequence in the middle is replaced.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        Ok(text)
    }

    /// Whatever remains (an unfinished character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}
