//! Weights read ahead into the GPU's L2 cache while another kernel runs (shaders/l2_prefetch.wgsl).
//!
//! A decode step's GEMVs leave part of the memory's bandwidth unused (their loads wait on
//! latency and on the work of each chunk), and one finds its weight in the L2 cache in 16-22 %
//! less time than it takes to read it from memory (bench/NOTES.md 72). A prefetch dispatch
//! recorded right after a GEMV binds nothing that GEMV writes, so no barrier parts them and the
//! two run side by side; the barrier before the next GEMV waits for both.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

pub const PREFETCH_SHADER: ShaderSource = ShaderSource { name: "l2_prefetch", source: &[wgsl!("l2_prefetch.wgsl")] };

/// Words of a 32-byte sector, the unit in which the L2 cache fills from memory: the kernel loads
/// one word of each.
pub const SECTOR_WORDS: usize = 8;
const LANES: usize = 256;
/// Sectors a lane loads: enough loads in flight a lane without a grid of many waves.
const SECTORS_PER_LANE: usize = 4;
/// Buffers one dispatch reads from, and spans of each.
pub const MAX_BUFFERS: usize = 3;
const SPANS: usize = 2;

/// Words `start .. start + len` of a buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub len: usize,
}

impl Span {
    /// The sectors holding this span's words in a buffer of `words` words, as (first, count),
    /// clipped to the buffer.
    fn sectors(self, words: usize) -> (usize, usize) {
        let end = (self.start + self.len).min(words);
        if self.start >= end {
            return (0, 0);
        }
        let first = self.start / SECTOR_WORDS;
        (first, (end - 1) / SECTOR_WORDS + 1 - first)
    }
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(PREFETCH_SHADER, defines(&[(0, 100), (200, 50), (0, 0), (3, 9), (0, 1), (0, 0)]))]
}

fn defines(sectors: &[(usize, usize); MAX_BUFFERS * SPANS]) -> Defines {
    sectors.iter().enumerate().fold(Defines::new(), |d, (j, &(f, n))| d.set(&format!("F{j}"), f).set(&format!("N{j}"), n))
}

/// Words of `t`'s buffer (a view's buffer is the whole buffer).
fn buffer_words(t: &GpuTensor) -> usize {
    (t.bytes() / 4) as usize
}

/// A dispatch that loads one word of every sector of up to two spans of each of `buffers` (at
/// most [`MAX_BUFFERS`], of u32 words) and XORs them into `sink[0]` ([1] u32, its own buffer
/// bound nowhere else in the pass, or a barrier would part the dispatch from the kernel before
/// it). `None` where the spans cover nothing.
pub async fn prefetch(ctx: &GpuContext, buffers: &[(&GpuTensor, [Span; SPANS])], sink: &GpuTensor) -> Result<Option<Dispatch>> {
    let ok = !buffers.is_empty()
        && buffers.len() <= MAX_BUFFERS
        && buffers.iter().all(|(t, _)| t.dtype == DType::U32)
        && sink.dtype == DType::U32
        && !sink.is_empty();
    if !ok {
        return Err(Error::Shape {
            op: "prefetch",
            message: format!("1 to {MAX_BUFFERS} u32 buffers and a u32 sink, got {} buffers", buffers.len()),
        });
    }
    let mut sectors = [(0, 0); MAX_BUFFERS * SPANS];
    for (i, (t, spans)) in buffers.iter().enumerate() {
        for (j, s) in spans.iter().enumerate() {
            sectors[i * SPANS + j] = s.sectors(buffer_words(t));
        }
    }
    let total: usize = sectors.iter().map(|s| s.1).sum();
    if total == 0 {
        return Ok(None);
    }
    let pipeline = ctx.pipeline(&PREFETCH_SHADER, &defines(&sectors)).await?;
    // Unused bindings repeat the first buffer with empty spans.
    let bound: Vec<&GpuTensor> = (0..MAX_BUFFERS).map(|i| buffers.get(i).unwrap_or(&buffers[0]).0).chain([sink]).collect();
    let groups = total.div_ceil(LANES * SECTORS_PER_LANE);
    ctx.dispatch(&pipeline, &bound, None, [groups as u32, 1, 1]).map(Some)
}

/// CPU reference: the XOR of the first word of every sector the spans cover, what
/// [`prefetch`] adds to its sink.
pub fn prefetch_xor_cpu(buffers: &[(&[u32], [Span; SPANS])]) -> u32 {
    let mut acc = 0;
    for (words, spans) in buffers {
        for s in spans {
            let (first, n) = s.sectors(words.len());
            for k in first..first + n {
                acc ^= words[k * SECTOR_WORDS];
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_whole_sectors_within_the_buffer() {
        assert_eq!(Span { start: 0, len: 8 }.sectors(100), (0, 1));
        assert_eq!(Span { start: 7, len: 2 }.sectors(100), (0, 2));
        assert_eq!(Span { start: 16, len: 0 }.sectors(100), (0, 0));
        assert_eq!(Span { start: 90, len: 50 }.sectors(100), (11, 2));
        assert_eq!(Span { start: 120, len: 5 }.sectors(100), (0, 0));
    }
}
