//! 8-bit activation records: an activation vector quantized once, by the kernel that produces
//! it, for the DP4 GEMV that reads it next (shaders/xrecord.wgsl writes them, the GEMV's XREC
//! reads them). The DP4 GEMV otherwise quantizes all of x in every workgroup, with two barriers
//! a tile; reading records it stages nothing (bench/NOTES.md, notes 47 and 48).
//!
//! A record is one 32-value chunk in 12 words: eight words of four int8 values, in the order the
//! reader's weight fields meet them ([`RecordOrder`]); the scale absmax / 127 (f32 bits); the
//! integer sums of the two 16-value halves (as f32, exact); one word of padding. Three vec4 a
//! chunk, so a lane loads a chunk's record in three vector loads. The values, scale and sums are
//! those the reader's staging computes from the same f32 values, so its products are the same
//! bits either way.

use super::{GemvConfig, GemvFusion, QWeight, WeightFormat};
use crate::error::{Error, Result};
use crate::gpu::{DType, GpuTensor};

/// Words of one chunk's record.
pub const RECORD_WORDS: usize = 12;

/// The order of a chunk's 32 int8 values in its eight words, that of the reader's weight fields
/// (shaders/gemv_dp4.wgsl, `quarter_words`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordOrder {
    /// Word j holds values 4j .. 4j + 3 (8-bit weights, a byte each).
    Bytes = 0,
    /// Words 2i and 2i + 1 hold values 8i, 8i + 2, 8i + 4, 8i + 6 and the odd ones (4-bit
    /// words and the repacked planes: nibbles masked in place).
    Nibbles = 1,
    /// Words 4h + f hold values 16h + f, 16h + 4 + f, 16h + 8 + f, 16h + 12 + f (the 2-bit
    /// fields of 2- and 3-bit words).
    Fields = 2,
}

impl RecordOrder {
    /// The order `format`'s DP4 GEMV reads, if it has one.
    pub fn of(format: &WeightFormat) -> Option<Self> {
        match format {
            WeightFormat::Weft(q) if q.bits == 8 => Some(Self::Bytes),
            WeightFormat::Weft(q) if q.bits < 4 => Some(Self::Fields),
            WeightFormat::Weft(q) if q.bits == 4 => Some(Self::Nibbles),
            WeightFormat::Repacked(_) => Some(Self::Nibbles),
            _ => None,
        }
    }

    /// Index in the chunk (0 .. 32) of the value byte `b` (0 .. 4) of word `j` (0 .. 8) holds.
    pub fn value_of(self, j: usize, b: usize) -> usize {
        match self {
            Self::Bytes => 4 * j + b,
            Self::Nibbles => 8 * (j / 2) + 2 * b + j % 2,
            Self::Fields => 16 * (j / 4) + 4 * b + j % 4,
        }
    }
}

/// Records of `t` tokens of `k` values (k a multiple of 32): U32 [t, k / 32, RECORD_WORDS].
pub fn records_shape(t: usize, k: usize) -> [usize; 3] {
    [t, k / 32, RECORD_WORDS]
}

/// Checks that `x` holds records of `k`-value rows and returns its tokens.
pub(super) fn check_records(op: &'static str, x: &GpuTensor, k: usize) -> Result<usize> {
    match x.shape[..] {
        [t, c, RECORD_WORDS] if c * 32 == k && x.dtype == DType::U32 && t > 0 => Ok(t),
        _ => Err(Error::Shape { op, message: format!("records {} for rows of {k} values: need U32 [t, {}, {RECORD_WORDS}] with k a multiple of 32", x.label_shape(), k / 32) }),
    }
}

/// The conditions of [`GemvFusion::records_out`] and [`GemvFusion::records_in`] for `w` at
/// `config` (as the kernel runs: paired with `swiglu`).
pub(super) fn check_fusion(w: &QWeight, y: &GpuTensor, f: &GemvFusion<'_>, config: GemvConfig) -> Result<()> {
    let fail = |message: String| Err(Error::Shape { op: "gemv_fused", message });
    if let Some((out, _)) = f.records_out {
        let n = w.rows / 2;
        if !f.swiglu || !writes_records(config) {
            return fail(format!("records out need the SwiGLU epilogue at a launch shape whose workgroups own whole chunks, not {config:?}"));
        }
        let want = records_shape(y.shape.first().copied().unwrap_or(0), n);
        if !n.is_multiple_of(32) || out.dtype != DType::U32 || out.shape != want {
            return fail(format!("records {} for {n} outputs: need U32 {want:?}, n a multiple of 32", out.label_shape()));
        }
    }
    if f.records_in && (!f.int8 || f.norm.is_some() || f.glu || f.swiglu || RecordOrder::of(&w.format).is_none()) {
        return fail(format!("{}: records in need 8-bit activations of a format with a DP4 GEMV, and no norm, GLU or SwiGLU", w.format.name()));
    }
    Ok(())
}

/// Output rows of a SwiGLU epilogue's workgroup at `config` (paired), which must be whole
/// chunks for it to write records.
pub fn swiglu_rows_per_group(config: GemvConfig) -> u32 {
    // A lane group's rows are gate rows and their up rows: half of them are outputs.
    config.rows_per_group(true) / 2
}

/// Whether a SwiGLU epilogue at `config` (as it runs: paired) can write records: its
/// workgroups' outputs are whole chunks.
pub fn writes_records(config: GemvConfig) -> bool {
    let rows = swiglu_rows_per_group(config);
    config.rows >= 2 && rows > 0 && rows.is_multiple_of(32)
}

/// The SwiGLU epilogue's launch shapes whose workgroups own whole chunks (32 output rows), tried
/// at load when the epilogue writes records.
pub const RECORD_SWIGLU_CANDIDATES: [GemvConfig; 5] = [
    GemvConfig { wg: 256, rows: 4, lanes: 16 },
    GemvConfig { wg: 256, rows: 2, lanes: 8 },
    GemvConfig { wg: 128, rows: 4, lanes: 8 },
    GemvConfig { wg: 128, rows: 2, lanes: 4 },
    GemvConfig { wg: 64, rows: 4, lanes: 4 },
];

/// The records of `values` (rows of k, k a multiple of 32) in `order`, as the GPU writes them:
/// the CPU reference. Rounding is to nearest, ties to even, as WGSL's `round`; the GPU's
/// 127 / absmax may differ from this one's by its division's error, so a value on a rounding
/// tie may land one step away.
pub fn records_cpu(values: &[f32], order: RecordOrder) -> Vec<u32> {
    let mut out = Vec::with_capacity(values.len() / 32 * RECORD_WORDS);
    for chunk in values.chunks_exact(32) {
        let amax = chunk.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
        let q: Vec<i32> = chunk.iter().map(|v| (v * inv).round_ties_even() as i32).collect();
        for j in 0..8 {
            let bytes: [u8; 4] = std::array::from_fn(|b| q[order.value_of(j, b)] as i8 as u8);
            out.push(u32::from_le_bytes(bytes));
        }
        out.push((amax / 127.0).to_bits());
        out.push((q[..16].iter().sum::<i32>() as f32).to_bits());
        out.push((q[16..].iter().sum::<i32>() as f32).to_bits());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_order_places_each_value_once() {
        for order in [RecordOrder::Bytes, RecordOrder::Nibbles, RecordOrder::Fields] {
            let mut seen = [false; 32];
            for j in 0..8 {
                for b in 0..4 {
                    let v = order.value_of(j, b);
                    assert!(!seen[v], "{order:?} places value {v} twice");
                    seen[v] = true;
                    // Words 0 .. 4 hold the first half: the record's half sums are the words'.
                    assert_eq!(v < 16, j < 4, "{order:?} word {j}");
                }
            }
        }
    }

    #[test]
    fn cpu_records_decode_to_the_values() {
        let values: Vec<f32> = (0..64).map(|i| ((i * 37 % 64) as f32 - 30.0) * 0.1).collect();
        let r = records_cpu(&values, RecordOrder::Nibbles);
        assert_eq!(r.len(), 2 * RECORD_WORDS);
        for (c, rec) in r.chunks_exact(RECORD_WORDS).enumerate() {
            let d = f32::from_bits(rec[8]);
            let mut halves = [0i32; 2];
            for j in 0..8 {
                for (b, byte) in rec[j].to_le_bytes().into_iter().enumerate() {
                    let v = values[32 * c + RecordOrder::Nibbles.value_of(j, b)];
                    let q = byte as i8 as i32;
                    assert!((q as f32 * d - v).abs() <= d * 0.5 + 1e-6, "chunk {c} word {j} byte {b}");
                    halves[j / 4] += q;
                }
            }
            assert_eq!([f32::from_bits(rec[9]), f32::from_bits(rec[10])], [halves[0] as f32, halves[1] as f32]);
        }
    }
}
