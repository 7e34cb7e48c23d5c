//! The CPU engine's run loop: prompt passes, decode steps and scoring passes, with the same
//! window bookkeeping as the GPU engine (`model::llama::ring`).

use crate::error::{Error, Result};
use crate::model::graph::{concat_checkpoints, Act, Checkpoint, Pass};
use crate::model::llama::ring::{check_position, pass_len};

use super::engine::{act_index, CpuLlama};
use super::exec::PassOut;

impl CpuLlama {
    fn pass_len(&self, remaining: usize) -> usize {
        pass_len(self.pos, remaining, self.options.max_seq, self.options.max_batch)
    }

    /// Feeds a pass's ids to the history and makes the RoPE rows of its positions current.
    fn begin(&mut self, ids: &[u32]) -> Result<()> {
        check_position(self.pos, ids.len())?;
        self.history.extend_from_slice(ids);
        let rope = &mut self.state.rope;
        self.ring.prepare(self.pos, ids.len(), |slot, row| {
            rope[slot * row.len()..(slot + 1) * row.len()].copy_from_slice(row);
            Ok(())
        })?;
        if let Some(ring) = &mut self.ring_local {
            let rope = &mut self.state.rope_local;
            ring.prepare(self.pos, ids.len(), |slot, row| {
                rope[slot * row.len()..(slot + 1) * row.len()].copy_from_slice(row);
                Ok(())
            })?;
        }
        Ok(())
    }

    fn sampled(&mut self, out: PassOut) -> Result<u32> {
        let id = out.sampled.ok_or_else(|| Error::Model("the pass sampled no token".into()))?;
        self.sampled = id;
        Ok(id)
    }

    /// Runs the prompt (in passes of at most `max_batch` tokens) and returns the first sampled
    /// token.
    pub fn prefill(&mut self, ids: &[u32]) -> Result<u32> {
        if ids.is_empty() {
            return Err(Error::Model("an empty prompt".into()));
        }
        if self.ring.turns_long(self.pos + ids.len()) {
            let all = [&self.history[..], ids].concat();
            return self.replay_long(&all);
        }
        self.run_prompt(ids)
    }

    /// LongRoPE past the original context: the whole sequence again with the long factors, as
    /// the GPU engine does (`RopeRing::turns_long`).
    fn replay_long(&mut self, all: &[u32]) -> Result<u32> {
        self.reset();
        self.ring.set_long();
        if let Some(ring) = &mut self.ring_local {
            ring.set_long();
        }
        self.run_prompt(all)
    }

    fn run_prompt(&mut self, ids: &[u32]) -> Result<u32> {
        let mut next = 0;
        let mut done = 0;
        while done < ids.len() {
            let t = self.pass_len(ids.len() - done);
            let chunk = &ids[done..done + t];
            self.begin(chunk)?;
            let out = self.execute(Pass::prefill(t), chunk)?;
            next = self.sampled(out)?;
            self.pos += t;
            done += t;
        }
        Ok(next)
    }

    /// One decode step: feeds the last sampled token and returns the next.
    pub fn step(&mut self) -> Result<u32> {
        if self.ring.turns_long(self.pos + 1) {
            let all = [&self.history[..], &[self.sampled]].concat();
            return self.replay_long(&all);
        }
        self.begin(&[self.sampled])?;
        let out = self.execute(Pass::decode(), &[])?;
        self.pos += 1;
        self.sampled(out)
    }

    /// Logits for every token of `ids` (appended to the cache), [len, vocab].
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        self.score(ids, |t| Pass::scoring(t, false)).map(|(logits, _)| logits)
    }

    /// Runs `ids` (in passes as `logits` does) and returns every checkpoint as (name, shape,
    /// values) over all of them, as `Llama::checkpoints` does.
    pub fn checkpoints(&mut self, ids: &[u32]) -> Result<Vec<Checkpoint>> {
        self.score(ids, |t| Pass::scoring(t, true)).map(|(_, captures)| captures)
    }

    /// As [`Self::checkpoints`], with every projection's input too (`weft calibrate`).
    pub fn input_checkpoints(&mut self, ids: &[u32]) -> Result<Vec<Checkpoint>> {
        self.score(ids, Pass::calibration).map(|(_, captures)| captures)
    }

    fn score(&mut self, ids: &[u32], pass: fn(usize) -> Pass) -> Result<(Vec<f32>, Vec<Checkpoint>)> {
        let vocab = self.config.vocab;
        let mut logits = Vec::with_capacity(ids.len() * vocab);
        let mut captures = Vec::new();
        if self.pos == 0 && self.ring.turns_long(ids.len()) {
            self.ring.set_long();
        }
        let mut done = 0;
        while done < ids.len() {
            let t = self.pass_len(ids.len() - done);
            let chunk = &ids[done..done + t];
            self.begin(chunk)?;
            let out = self.execute(pass(t), chunk)?;
            logits.extend_from_slice(&self.state.acts[act_index(Act::Logits)][..t * vocab]);
            captures.extend(out.captures);
            self.pos += t;
            done += t;
        }
        Ok((logits, concat_checkpoints(captures)))
    }
}
