//! The lowering rule that reads the next matrix product's weight into the L2 cache while the
//! decode step's GEMVs run (`ops::prefetch`, `EngineOptions::prefetch_mb`).

use crate::error::Result;
use crate::gpu::{DType, Dispatch, GpuTensor};
use crate::ops::prefetch::{prefetch, Span};
use crate::ops::qmatmul::QWeight;

use super::super::super::graph::Op;
use super::{Lower, Projection};

impl<'a> Lower<'a> {
    /// In a decode step with `prefetch_mb`: the first `prefetch_mb` MiB of the next matrix
    /// product's weight, read into the L2 cache by a dispatch recorded right after the last GEMV
    /// of `d[from..]` (what the rule before emitted), so the two run side by side. `rest` is
    /// what that rule left.
    pub(super) async fn prefetch_next(&self, rest: &[Op], from: usize, d: &mut Vec<Dispatch>) -> Result<()> {
        let cap = (self.m.options.prefetch_mb as usize) << 20;
        if cap == 0 || self.t != 1 {
            return Ok(());
        }
        let Some(at) = d[from..].iter().rposition(|x| x.name().starts_with("qgemv")) else { return Ok(()) };
        let Some((w, halves)) = self.next_matrix(rest) else { return Ok(()) };
        let spans = spans_ahead(w, halves, cap);
        if spans.is_empty() {
            return Ok(());
        }
        // A sink of its own: one bound by another dispatch of the pass would put a barrier
        // between this dispatch and the GEMV before it.
        let sink = self.ctx.zeros("prefetch sink", &[1], DType::U32)?;
        if let Some(p) = prefetch(self.ctx, &spans, &sink).await? {
            d.insert(from + at + 1, p);
        }
        Ok(())
    }

    /// The weight of the first matrix product in `ops`, and in how many halves a GEMV reads its
    /// rows side by side (2 for the stacked gate/up: row r with row r + rows / 2).
    fn next_matrix(&self, ops: &[Op]) -> Option<(&'a QWeight, usize)> {
        for j in 0..ops.len() {
            match self.projection(&ops[j..]) {
                Some(Projection::Qkv { w, .. }) => return Some((w, 1)),
                Some(Projection::QkvApart { w, .. }) => return Some((w[0], 1)),
                Some(Projection::GateUp { w, .. }) => return Some((w, 2)),
                _ => {}
            }
            if let Op::Linear { w, .. } = &ops[j] {
                if let Ok(m) = self.matrix(*w) {
                    return Some((m, 1));
                }
            }
        }
        None
    }
}

/// What to read ahead of `w`: about `cap` bytes of its first part, the first rows of each of
/// its `halves` (its words, scales and zero points alike), as spans of each of that part's
/// buffers.
fn spans_ahead(w: &QWeight, halves: usize, cap: usize) -> Vec<(&GpuTensor, [Span; 2])> {
    let Some(part) = w.parts.first() else { return Vec::new() };
    let halves = if w.parts.len() == 1 && part.rows.is_multiple_of(halves) { halves } else { 1 };
    let buffers: Vec<&GpuTensor> = [Some(&part.data), part.scales.as_ref(), part.zeros.as_ref()].into_iter().flatten().collect();
    let bytes: usize = buffers.iter().map(|t| t.bytes() as usize).sum();
    if part.rows == 0 || bytes == 0 {
        return Vec::new();
    }
    let half = part.rows / halves;
    let rows = (cap * part.rows / bytes / halves).min(half);
    buffers
        .into_iter()
        .map(|t| {
            // Row r starts at word r · words / rows (rows of the GGUF block formats need not be
            // word-aligned: a sector more or less).
            let words = (t.bytes() / 4) as usize;
            let at = |r: usize| r * words / part.rows;
            let second = if halves == 2 { Span { start: at(half), len: at(half + rows) - at(half) } } else { Span::default() };
            (t, [Span { start: 0, len: at(rows) }, second])
        })
        .collect()
}
