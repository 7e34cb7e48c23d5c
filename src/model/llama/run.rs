//! The run loop: prompt passes, decode steps, scoring passes, and the RoPE ring that lets
//! generation go on past `max_seq` over a sliding window (see the module docs of `llama.rs`).

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, Submitted};
use crate::ops::rope::step_bytes;

use super::super::graph::{concat_checkpoints, Act, Pass};
use super::ring::{check_position, pass_len};
use super::{Checkpoints, Llama};

impl Llama {
    fn pass_len(&self, remaining: usize) -> usize {
        pass_len(self.pos, remaining, self.options.max_seq, self.options.max_batch)
    }

    /// Makes the RoPE table's slots for positions `pos .. pos + n` hold those positions' rows.
    fn prepare_rope(&mut self, ctx: &GpuContext, pos: usize, n: usize) -> Result<()> {
        let rope = &self.rope;
        self.ring.prepare(pos, n, |slot, row| ctx.write_tensor(rope, slot * row.len(), bytemuck::cast_slice(row)))?;
        if let Some((table, ring)) = &mut self.rope_local {
            ring.prepare(pos, n, |slot, row| ctx.write_tensor(table, slot * row.len(), bytemuck::cast_slice(row)))?;
        }
        Ok(())
    }

    /// Queues a pass's ids, the step uniform and the RoPE rows it needs. `ids` never crosses
    /// the end of the rings (see [`Self::pass_len`]).
    fn write_ids(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<()> {
        ctx.write_tensor(&self.buffers.ids, 0, bytemuck::cast_slice(ids))?;
        ctx.write_tensor(&self.tokens, self.pos % self.options.max_seq, bytemuck::cast_slice(ids))?;
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, ids.len() as u32));
        self.prepare_rope(ctx, self.pos, ids.len())
    }

    fn check_position(&self, n: usize) -> Result<()> {
        check_position(self.pos, n)
    }

    /// Runs the prompt through the model (in passes of at most `max_batch` tokens) and
    /// returns the first sampled token.
    pub async fn prefill(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<u32> {
        if ids.is_empty() {
            return Err(Error::Model("an empty prompt".into()));
        }
        self.check_position(ids.len())?;
        if self.ring.turns_long(self.pos + ids.len()) {
            let all = [&self.history[..self.pos.min(self.history.len())], ids].concat();
            return self.replay_long(ctx, &all).await;
        }
        self.run_prompt(ctx, ids).await
    }

    /// LongRoPE past the original context: the whole sequence again with the long factors.
    async fn replay_long(&mut self, ctx: &GpuContext, all: &[u32]) -> Result<u32> {
        self.restart_long();
        self.run_prompt(ctx, all).await
    }

    /// An empty sequence whose passes rotate with LongRoPE's long factors.
    fn restart_long(&mut self) {
        self.reset();
        self.ring.set_long();
        if let Some((_, ring)) = &mut self.rope_local {
            ring.set_long();
        }
    }

    async fn run_prompt(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<u32> {
        self.ahead = None;
        let mut next = 0;
        let mut done = 0;
        while done < ids.len() {
            let t = self.pass_len(ids.len() - done);
            let chunk = &ids[done..done + t];
            if !self.prefill.contains_key(&t) {
                let dispatches = self.lower(ctx, Pass::prefill(t), None).await?;
                self.prefill.insert(t, dispatches);
            }
            self.write_ids(ctx, chunk)?;
            next = ctx.run_and_read_u32(&self.prefill[&t], &self.chosen, &self.slots[0]).await?[0];
            self.pos += t;
            done += t;
        }
        self.history.extend_from_slice(ids);
        self.last = next;
        Ok(next)
    }

    /// One decode step: feeds the last sampled token and returns the next.
    pub async fn step(&mut self, ctx: &GpuContext) -> Result<u32> {
        self.check_position(1)?;
        if self.ring.turns_long(self.pos + 1) {
            let all = [&self.history[..], &[self.last]].concat();
            return self.replay_long(ctx, &all).await;
        }
        let current = match self.ahead.take() {
            Some(a) if a.pos == self.pos => a,
            _ => self.submit_step(ctx, self.pos)?,
        };
        // The next step reads this one's token and position on the GPU, so it is queued now and
        // runs while this token is read back. Work queued later (any other call drops it) runs
        // after it and overwrites what it wrote at the next position. Not across LongRoPE's
        // switch, where the next step computes the sequence again.
        if self.options.pipeline && self.check_position(2).is_ok() && !self.ring.turns_long(self.pos + 2) {
            self.ahead = Some(self.submit_step(ctx, self.pos + 1)?);
        }
        // The commands of the step two ahead, which uses this step's slot, are recorded while
        // the GPU runs (recording costs about as much as a small model's step).
        let slot = current.slot;
        if self.recorded[slot].is_none() {
            let (i, decode) = self.decode_at(self.pos + 2);
            self.recorded[slot] = Some((i, ctx.encode_step(decode, &self.chosen, &self.slots[slot])));
        }
        let next = match ctx.read_step(&self.slots[slot], current.submitted).await {
            Ok(words) => words[0],
            Err(e) => {
                self.ahead = None;
                return Err(e);
            }
        };
        self.pos += 1;
        self.history.push(self.last);
        self.last = next;
        Ok(next)
    }

    /// Queues the decode step at `pos`: its position uniform and RoPE row, then its commands
    /// (recorded earlier where they were), reading back through slot `pos % 2`.
    fn submit_step(&mut self, ctx: &GpuContext, pos: usize) -> Result<Ahead> {
        ctx.write_uniform(&self.step, &step_bytes(pos as u32, 1));
        self.prepare_rope(ctx, pos, 1)?;
        let slot = pos % 2;
        let i = self.decode_at(pos).0;
        // Commands recorded for another context range (another attention chunk) are dropped.
        let commands = match self.recorded[slot].take() {
            Some((at, c)) if at == i => c,
            _ => ctx.encode_step(&self.decode[i].1, &self.chosen, &self.slots[slot]),
        };
        Ok(Ahead { pos, slot, submitted: ctx.submit_step(commands) })
    }

    /// Runs `ids` (in passes, as `logits` does) from the current position and returns every checkpoint
    /// as (name, shape, values): embedding, each block's attention output, MLP output and
    /// residual, the final norm and the logits.
    pub async fn checkpoints(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<Vec<(String, Vec<usize>, Vec<f32>)>> {
        let mut cp = Checkpoints::default();
        self.logits(ctx, ids, Some(&mut cp)).await?;
        let mut out = Vec::with_capacity(cp.names.len());
        for (name, t) in cp.names.into_iter().zip(&cp.tensors) {
            out.push((name, t.shape.clone(), ctx.read_f32(t).await?));
        }
        Ok(concat_checkpoints(out))
    }

    /// Logits for every token of `ids` (appended to the cache), [len, vocab], read back in
    /// passes of `max_batch` (one token at a time past `max_seq`). `capture` snapshots the
    /// checkpoints of every pass.
    pub async fn logits(
        &mut self,
        ctx: &GpuContext,
        ids: &[u32],
        capture: Option<&mut Checkpoints>,
    ) -> Result<Vec<f32>> {
        self.check_position(ids.len())?;
        self.ahead = None;
        // A sequence that crosses LongRoPE's original context is computed with the long factors
        // throughout, as `prefill` and `step` do: the tokens already in the cache run again.
        if self.ring.turns_long(self.pos + ids.len()) {
            let earlier = self.history[..self.pos.min(self.history.len())].to_vec();
            self.restart_long();
            if !earlier.is_empty() {
                self.score(ctx, &earlier, None).await?;
            }
        }
        self.score(ctx, ids, capture).await
    }

    /// The passes of `logits` from the current position, with the RoPE factors as they are.
    async fn score(&mut self, ctx: &GpuContext, ids: &[u32], mut capture: Option<&mut Checkpoints>) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(ids.len() * self.config.vocab);
        let mut done = 0;
        while done < ids.len() {
            let t = self.pass_len(ids.len() - done);
            let chunk = &ids[done..done + t];
            done += t;
            let dispatches = self.lower(ctx, Pass::scoring(t, capture.is_some()), capture.as_deref_mut()).await?;
            self.write_ids(ctx, chunk)?;
            ctx.run(&dispatches.iter().collect::<Vec<_>>());
            let logits = self.buffers.view(&self.config, Act::Logits, t)?;
            let mut all = ctx.read_f32(&logits).await?;
            all.truncate(t * self.config.vocab);
            out.extend_from_slice(&all);
            self.pos += t;
            self.history.extend_from_slice(chunk);
        }
        Ok(out)
    }
}

/// A decode step submitted and not yet read back.
pub(super) struct Ahead {
    pos: usize,
    slot: usize,
    submitted: Submitted,
}
