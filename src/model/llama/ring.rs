//! The context window's bookkeeping, the same for every backend: how many tokens a pass takes,
//! and which position's RoPE row each slot of the table holds (slots are reused as a ring past
//! `max_seq`; see the module docs of `llama.rs`).

use crate::error::{Error, Result};
use crate::ops::rope::{ring_slot, rope_row_in, rope_table};

use super::super::config::LlamaConfig;

/// Tokens the next pass takes out of `remaining` at position `pos`: up to `max_batch` while the
/// positions stay below `max_seq` (no slot is reused), one at a time past it.
pub fn pass_len(pos: usize, remaining: usize, max_seq: usize, max_batch: usize) -> usize {
    let room = max_seq.saturating_sub(pos);
    if room == 0 {
        1
    } else {
        remaining.min(max_batch).min(room)
    }
}

/// Positions fit the engines' u32 positions.
pub fn check_position(pos: usize, n: usize) -> Result<()> {
    if pos + n > u32::MAX as usize {
        return Err(Error::Model(format!("{} positions exceed the engine's u32 positions", pos + n)));
    }
    Ok(())
}

/// Which position each slot of the RoPE table holds, and whether with LongRoPE's long factors.
pub struct RopeRing {
    slots: Vec<(usize, bool)>,
    /// One table row computed on the CPU, reused.
    scratch: Vec<f32>,
    max_seq: usize,
    sinks: usize,
    dims: usize,
    base: f32,
    scaling: crate::ops::rope::RopeScaling,
    /// LongRoPE: the sequence went past the original context, so every pass rotates with the
    /// long factors until the next reset.
    long: bool,
}

impl RopeRing {
    pub fn new(c: &LlamaConfig, max_seq: usize, sinks: usize) -> Self {
        Self::with(c.rope_dims, c.rope_base, c.rope_scaling.clone(), max_seq, sinks)
    }

    /// The table of the layers that rotate with their own base (Gemma 3's local layers, which
    /// take no scaling); None where the model has no such layers.
    pub fn local(c: &LlamaConfig, max_seq: usize, sinks: usize) -> Option<Self> {
        c.rope_local_base.map(|base| Self::with(c.rope_dims, base, crate::ops::rope::RopeScaling::None, max_seq, sinks))
    }

    fn with(dims: usize, base: f32, scaling: crate::ops::rope::RopeScaling, max_seq: usize, sinks: usize) -> Self {
        let slots = (0..max_seq).map(|p| (p, scaling.long_for(p + 1))).collect();
        Self { slots, scratch: vec![0.0; dims], max_seq, sinks, dims, base, scaling, long: false }
    }

    /// The table every slot starts with: slot p holds position p, [max_seq, rope_dims / 2, 2].
    pub fn table(&self) -> Vec<f32> {
        rope_table(self.max_seq, self.dims, self.base, &self.scaling)
    }

    /// Whether a request whose positions end before `end` takes a LongRoPE sequence past its
    /// original context for the first time. transformers then computes the whole sequence again
    /// with the long factors (Phi-3's `prepare_inputs_for_generation`), and so do the engines:
    /// the cache must not mix positions rotated with both sets.
    pub fn turns_long(&self, end: usize) -> bool {
        !self.long && self.scaling.long_for(end)
    }

    /// From now on every pass rotates with the long factors.
    pub fn set_long(&mut self) {
        self.long = self.scaling.long_for(usize::MAX);
    }

    /// Back to the short factors, for a new sequence.
    pub fn reset(&mut self) {
        self.long = false;
    }

    /// Values per table row.
    pub fn row_len(&self) -> usize {
        self.dims / 2 * 2
    }

    /// Makes the slots of positions `pos .. pos + n` hold those positions' rows, handing each
    /// row that changes to `write(slot, row)`. Only positions past `max_seq` (or again below it
    /// after a reset) write anything, and with LongRoPE a pass that switches factors.
    pub fn prepare(&mut self, pos: usize, n: usize, mut write: impl FnMut(usize, &[f32]) -> Result<()>) -> Result<()> {
        let row = self.row_len();
        self.long |= self.scaling.long_for(pos + n);
        let long = self.long;
        for p in pos..pos + n {
            let slot = ring_slot(p, self.max_seq, self.sinks);
            if self.slots[slot] != (p, long) {
                rope_row_in(p, long, self.dims, self.base, &self.scaling, &mut self.scratch);
                write(slot, &self.scratch[..row])?;
                self.slots[slot] = (p, long);
            }
        }
        Ok(())
    }
}
