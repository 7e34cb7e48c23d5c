//! The run loop: prompt passes, decode steps, scoring passes, and the RoPE ring that lets
//! generation go on past `max_seq` over a sliding window (see the module docs of `llama.rs`).

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::ops::rope::step_bytes;

use super::super::graph::{concat_checkpoints, Act, Pass};
use super::ring::{check_position, pass_len};
use super::{Checkpoints, Llama};

impl Llama {
    fn pass_len(&self, remaining: usize) -> usize {
        pass_len(self.pos, remaining, self.options.max_seq, self.options.max_batch)
    }

    /// Makes the RoPE table's slots for positions `pos .. pos + n` hold those positions' rows.
    fn prepare_rope(&mut self, ctx: &GpuContext, n: usize) -> Result<()> {
        let rope = &self.rope;
        self.ring.prepare(self.pos, n, |slot, row| ctx.write_tensor(rope, slot * row.len(), bytemuck::cast_slice(row)))?;
        if let Some((table, ring)) = &mut self.rope_local {
            ring.prepare(self.pos, n, |slot, row| ctx.write_tensor(table, slot * row.len(), bytemuck::cast_slice(row)))?;
        }
        Ok(())
    }

    /// Queues a pass's ids, the step uniform and the RoPE rows it needs. `ids` never crosses
    /// the end of the rings (see [`Self::pass_len`]).
    fn write_ids(&mut self, ctx: &GpuContext, ids: &[u32]) -> Result<()> {
        ctx.write_tensor(&self.buffers.ids, 0, bytemuck::cast_slice(ids))?;
        ctx.write_tensor(&self.tokens, self.pos % self.options.max_seq, bytemuck::cast_slice(ids))?;
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, ids.len() as u32));
        self.prepare_rope(ctx, ids.len())
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
            next = ctx.run_and_read_u32(&self.prefill[&t], &self.chosen, &self.slot).await?[0];
            self.pos += t;
            done += t;
        }
        Ok(next)
    }

    /// One decode step: feeds the last sampled token and returns the next.
    pub async fn step(&mut self, ctx: &GpuContext) -> Result<u32> {
        self.check_position(1)?;
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, 1));
        self.prepare_rope(ctx, 1)?;
        let steps = &self.decode;
        let commands = match self.recorded.take() {
            Some(c) => c,
            None => ctx.encode_step(steps, &self.chosen, &self.slot),
        };
        let submitted = ctx.submit_step(commands);
        // The next step's commands are the same and read their inputs (the token, the position
        // uniform) on the GPU, so they are recorded while this step runs.
        self.recorded = Some(ctx.encode_step(steps, &self.chosen, &self.slot));
        let next = ctx.read_step(&self.slot, submitted).await?[0];
        self.pos += 1;
        Ok(next)
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
        mut capture: Option<&mut Checkpoints>,
    ) -> Result<Vec<f32>> {
        self.check_position(ids.len())?;
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
        }
        Ok(out)
    }
}
