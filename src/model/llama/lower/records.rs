//! The O projection reading the decode attention's output as 8-bit activation records
//! (`ops::qmatmul::records`): the attention writes a head's records once, where every
//! workgroup of the O GEMV would otherwise quantize the whole input (bench/NOTES.md 73).

use crate::error::Result;
use crate::gpu::{Dispatch, GpuTensor};
use crate::ops::qmatmul::records::{records_shape, RecordOrder};
use crate::ops::qmatmul::{gemv_fused, gemv_fuses, reading_records_pays, GemvFusion, QWeight};

use super::super::super::graph::{Act, Op};
use super::super::buffers::Buffers;
use super::Lower;

/// The O projection and the stream its output is added into.
pub(super) struct OProjection<'a> {
    w: &'a QWeight,
    acc: Act,
    pub order: RecordOrder,
}

impl OProjection<'_> {
    /// The records buffer at the attention's width.
    pub fn records(&self, b: &Buffers) -> Result<GpuTensor> {
        b.records.view(&records_shape(1, self.w.cols))
    }

    /// The O GEMV reading `records`, its product added into the stream.
    pub async fn gemv(&self, l: &Lower<'_>, records: &GpuTensor) -> Result<Dispatch> {
        let fusion = GemvFusion { residual: true, records_in: true, ..l.with_options(self.w, GemvFusion::default()) };
        gemv_fused(l.ctx, self.w, records, &l.at(self.acc)?, fusion).await
    }
}

impl<'a> Lower<'a> {
    /// In a decode step with 8-bit activations and records: the O projection of the attention
    /// output `attn` and its residual add, if they head `ops` and its GEMV can read records
    /// (and reading them timed faster at load, where tuning ran).
    pub(super) fn o_reading_records(&self, ops: &[Op], attn: Act) -> Result<Option<OProjection<'a>>> {
        let o = &self.m.options;
        if !(self.norm_gemv && self.t == 1 && o.activation_records && self.c().head_dim.is_multiple_of(32)) {
            return Ok(None);
        }
        let [Op::Linear { w, bias: None, x, out }, Op::Add { x: acc, y }, ..] = ops else { return Ok(None) };
        if *x != attn || y != out {
            return Ok(None);
        }
        let w = self.matrix(*w)?;
        let Some(order) = RecordOrder::of(&w.format) else { return Ok(None) };
        let int8 = self.with_options(w, GemvFusion::default()).int8;
        if !int8 || !gemv_fuses(w) || !reading_records_pays(self.ctx, w) {
            return Ok(None);
        }
        Ok(Some(OProjection { w, acc: *acc, order }))
    }
}
