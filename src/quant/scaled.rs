//! Safetensors dtypes with scales: any dtype stores codes `q`, and a tensor of f32 scales (plus,
//! for the unsigned integers, f32 zero points) maps them back, `x = scale · (decode(q) − zero)`.
//! `decode` is the dtype's own decoder ([`super::decode_to_f32`]); the rule is one subtraction
//! and one product, so the GPU (`ops::dequant::rescale`) gets the same bits. docs/MNIST.md
//! describes the layout in files.

use serde::{Deserialize, Serialize};

use super::decode_to_f32;
use crate::error::{Error, Result};
use crate::format::{SafeDtype, StorageType};

/// Which elements share a scale: a tensor viewed as [rows, cols], cut into groups of `group`
/// consecutive elements along each row (the last group of a row may be short).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleLayout {
    pub rows: usize,
    pub cols: usize,
    pub group: usize,
    /// Whether zero points are stored (unsigned integer dtypes).
    pub zero: bool,
}

impl ScaleLayout {
    pub fn groups_per_row(&self) -> usize {
        self.cols.div_ceil(self.group.max(1))
    }

    /// Number of scales (and of zero points, where stored).
    pub fn groups(&self) -> usize {
        self.rows * self.groups_per_row()
    }

    /// The group of element `i` (row-major).
    pub fn group_of(&self, i: usize) -> usize {
        let row = i / self.cols.max(1);
        row * self.groups_per_row() + (i - row * self.cols) / self.group.max(1)
    }
}

/// How many elements share one scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    Tensor,
    /// One per output channel: per row of the tensor viewed as [shape[0], rest].
    Row,
    /// Groups of this many consecutive weights along each row.
    Block(usize),
}

impl Granularity {
    pub fn name(&self) -> String {
        match self {
            Self::Tensor => "tensor".into(),
            Self::Row => "channel".into(),
            Self::Block(b) => format!("block{b}"),
        }
    }

    /// The layout for a tensor of `shape` stored as `dtype`.
    pub fn layout(&self, dtype: SafeDtype, shape: &[usize]) -> ScaleLayout {
        let n: usize = shape.iter().product();
        let zero = is_unsigned(dtype);
        let (rows, cols) = match shape {
            [rows, ..] if shape.len() >= 2 && *rows > 0 => (*rows, n / rows),
            _ => (1, n),
        };
        match self {
            Self::Tensor => ScaleLayout { rows: 1, cols: n, group: n.max(1), zero },
            Self::Row => ScaleLayout { rows, cols, group: cols.max(1), zero },
            Self::Block(b) => ScaleLayout { rows, cols, group: (*b).clamp(1, cols.max(1)), zero },
        }
    }
}

/// Codes, scales and zero points of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Scaled {
    pub dtype: SafeDtype,
    pub layout: ScaleLayout,
    /// The stored bytes of the codes.
    pub codes: Vec<u8>,
    /// [layout.groups()]
    pub scales: Vec<f32>,
    /// [layout.groups()] where `layout.zero`, else empty.
    pub zeros: Vec<f32>,
}

pub fn is_unsigned(dtype: SafeDtype) -> bool {
    matches!(dtype, SafeDtype::U8 | SafeDtype::U16 | SafeDtype::U32 | SafeDtype::U64)
}

fn int_range(dtype: SafeDtype) -> Option<(f64, f64)> {
    let bits = dtype.bits() as i32;
    match dtype {
        SafeDtype::I8 | SafeDtype::I16 | SafeDtype::I32 | SafeDtype::I64 => {
            Some((-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0))
        }
        SafeDtype::U8 | SafeDtype::U16 | SafeDtype::U32 | SafeDtype::U64 => Some((0.0, 2f64.powi(bits) - 1.0)),
        _ => None,
    }
}

/// The largest finite value of the narrow float dtypes, whose range a scale must fit weights
/// into; the 16-bit and wider floats hold weights as they are (scale 1).
fn float_max(dtype: SafeDtype) -> Option<f64> {
    match dtype {
        SafeDtype::F4 => Some(6.0),
        SafeDtype::F8E4M3 => Some(448.0),
        SafeDtype::F8E5M2 => Some(57344.0),
        _ => None,
    }
}

/// Non-negative finite values of an 8- or 4-bit float with their codes, ascending.
fn small_float_table(dtype: SafeDtype) -> Result<Vec<(f32, u8)>> {
    let half = if dtype == SafeDtype::F4 { 8u8 } else { 128 };
    let mut table = Vec::new();
    for code in 0..half {
        let v = match dtype {
            SafeDtype::F4 => decode_to_f32(StorageType::Safe(dtype), &[code], 2)?[0],
            _ => decode_to_f32(StorageType::Safe(dtype), &[code], 1)?[0],
        };
        if v.is_finite() {
            table.push((v, code));
        }
    }
    // In `f32::total_cmp`'s order, as an unsigned key: negatives (all bits flipped) below
    // positives (sign bit set).
    crate::order::sort_by_key(&mut table, |&(v, _)| {
        let bits = v.to_bits();
        (u64::from(if bits >> 31 == 1 { !bits } else { bits | 1 << 31 }), 0)
    });
    Ok(table)
}

/// The nearest code to `x` (ties to the even code, beyond the largest value saturating to it).
fn nearest_code(table: &[(f32, u8)], sign_bit: u8, x: f32) -> u8 {
    let a = x.abs();
    let i = table.partition_point(|&(v, _)| v < a);
    let code = match (i.checked_sub(1).map(|j| table[j]), table.get(i)) {
        (Some(lo), Some(hi)) => {
            let (dl, dh) = (a - lo.0, hi.0 - a);
            if dl < dh || (dl == dh && lo.1 % 2 == 0) {
                lo.1
            } else {
                hi.1
            }
        }
        (None, Some(hi)) => hi.1,
        (Some(lo), None) => lo.1,
        (None, None) => 0,
    };
    if x.is_sign_negative() && code != 0 {
        code | sign_bit
    } else {
        code
    }
}

/// `x` as `dtype` codes without any scale: floats round to nearest (even), 8- and 4-bit floats
/// saturate at their largest value; integers round half to even and saturate.
pub fn encode(dtype: SafeDtype, x: &[f32]) -> Result<Vec<u8>> {
    encode_affine(dtype, x, |_| (1.0, 0.0))
}

/// Codes for `x[i] / scale + zero` with `(scale, zero) = param(i)`.
fn encode_affine(dtype: SafeDtype, x: &[f32], param: impl Fn(usize) -> (f32, f32)) -> Result<Vec<u8>> {
    let t = |i: usize, v: f32| {
        let (s, z) = param(i);
        v as f64 / s as f64 + z as f64
    };
    let mut out = Vec::with_capacity(dtype.bytes_for(x.len() as u64).unwrap_or(0) as usize);
    match dtype {
        SafeDtype::F64 => x.iter().enumerate().for_each(|(i, &v)| out.extend(t(i, v).to_le_bytes())),
        SafeDtype::F32 => x.iter().enumerate().for_each(|(i, &v)| out.extend((t(i, v) as f32).to_le_bytes())),
        SafeDtype::F16 => {
            x.iter().enumerate().for_each(|(i, &v)| out.extend(half::f16::from_f64(t(i, v)).to_bits().to_le_bytes()))
        }
        SafeDtype::BF16 => {
            x.iter().enumerate().for_each(|(i, &v)| out.extend(half::bf16::from_f64(t(i, v)).to_bits().to_le_bytes()))
        }
        SafeDtype::F8E4M3 | SafeDtype::F8E5M2 => {
            let table = small_float_table(dtype)?;
            out.extend(x.iter().enumerate().map(|(i, &v)| nearest_code(&table, 0x80, t(i, v) as f32)));
        }
        SafeDtype::F4 => {
            if !x.len().is_multiple_of(2) {
                return Err(Error::Decode { ty: "F4", message: format!("{} values do not fill whole bytes", x.len()) });
            }
            let table = small_float_table(dtype)?;
            let code = |i: usize| nearest_code(&table, 0x8, t(i, x[i]) as f32);
            out.extend((0..x.len() / 2).map(|j| code(2 * j) | (code(2 * j + 1) << 4)));
        }
        SafeDtype::Bool => {
            return Err(Error::Decode { ty: "BOOL", message: "weights cannot be stored as BOOL".into() })
        }
        _ => {
            let (lo, hi) = int_range(dtype).unwrap_or((0.0, 0.0));
            let width = (dtype.bits() / 8) as usize;
            for (i, &v) in x.iter().enumerate() {
                let q = t(i, v).round_ties_even().clamp(lo, hi);
                // Saturating casts: the clamp bounds of the 64-bit types round up to 2^63 / 2^64.
                let bytes = if lo < 0.0 { (q as i64).to_le_bytes() } else { (q as u64).to_le_bytes() };
                out.extend(&bytes[..width]);
            }
        }
    }
    Ok(out)
}

/// Stores `x` (row-major, viewed through `layout`) as `dtype` codes with one scale per group:
/// floats and signed integers map the group's largest magnitude to the dtype's largest value;
/// unsigned integers map [min(group, 0), max(group, 0)] onto [0, 2^bits − 1] with an integer
/// zero point.
pub fn quantize(dtype: SafeDtype, x: &[f32], layout: ScaleLayout) -> Result<Scaled> {
    if layout.rows * layout.cols != x.len() || layout.group == 0 || layout.zero != is_unsigned(dtype) {
        return Err(Error::Decode { ty: dtype.name(), message: format!("{layout:?} does not fit {} values", x.len()) });
    }
    let groups = layout.groups();
    let (mut lo, mut hi) = (vec![0f32; groups], vec![0f32; groups]);
    for (i, &v) in x.iter().enumerate() {
        let g = layout.group_of(i);
        lo[g] = lo[g].min(v);
        hi[g] = hi[g].max(v);
    }
    let (mut scales, mut zeros) = (Vec::with_capacity(groups), Vec::new());
    for g in 0..groups {
        let (l, h) = (lo[g] as f64, hi[g] as f64);
        let (scale, zero) = match (int_range(dtype), float_max(dtype)) {
            (Some((_, qmax)), _) if layout.zero => {
                let s = (h - l) / qmax;
                let s = if s > 0.0 { s as f32 as f64 } else { 1.0 };
                (s, (-l / s).round_ties_even().clamp(0.0, qmax))
            }
            (Some((_, qmax)), _) => (l.abs().max(h) / qmax, 0.0),
            (None, Some(fmax)) => (l.abs().max(h) / fmax, 0.0),
            (None, None) => (1.0, 0.0),
        };
        let scale = if scale as f32 > 0.0 && (scale as f32).is_finite() { scale as f32 } else { 1.0 };
        scales.push(scale);
        if layout.zero {
            zeros.push(zero as f32);
        }
    }
    let param = |i: usize| {
        let g = layout.group_of(i);
        (scales[g], zeros.get(g).copied().unwrap_or(0.0))
    };
    let codes = encode_affine(dtype, x, param)?;
    Ok(Scaled { dtype, layout, codes, scales, zeros })
}

/// The CPU reference of the rule: `w = scale · (w − zero)`, or `scale · w` without zero points.
pub fn rescale(w: &mut [f32], layout: &ScaleLayout, scales: &[f32], zeros: Option<&[f32]>) -> Result<()> {
    let groups = layout.groups();
    if w.len() != layout.rows * layout.cols || scales.len() != groups || zeros.is_some_and(|z| z.len() != groups) {
        return Err(Error::Decode {
            ty: "scaled",
            message: format!("{} values, {} scales do not fit {layout:?}", w.len(), scales.len()),
        });
    }
    for (i, v) in w.iter_mut().enumerate() {
        let g = layout.group_of(i);
        *v = match zeros {
            Some(z) => scales[g] * (*v - z[g]),
            None => scales[g] * *v,
        };
    }
    Ok(())
}

impl Scaled {
    /// Decoded values: the dtype's decoder, then [`rescale`].
    pub fn decode(&self) -> Result<Vec<f32>> {
        let n = self.layout.rows * self.layout.cols;
        let mut w = decode_to_f32(StorageType::Safe(self.dtype), &self.codes, n)?;
        let zeros = self.layout.zero.then_some(&self.zeros[..]);
        rescale(&mut w, &self.layout, &self.scales, zeros)?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_encoding_rounds_to_nearest_and_saturates() {
        let x = [0.2f32, -0.74, 0.76, 7.0, -100.0, 2.5, 0.25];
        let f4 = decode_to_f32(StorageType::Safe(SafeDtype::F4), &encode(SafeDtype::F4, &x[..6]).unwrap(), 6);
        assert_eq!(f4.unwrap(), [0.0, -0.5, 1.0, 6.0, -6.0, 2.0]);
        let i8 = encode(SafeDtype::I8, &[1.5, 2.5, -300.0, 0.4]).unwrap();
        assert_eq!(i8, [2, 2, 0x80, 0]);
        let u8 = encode(SafeDtype::U8, &[-3.0, 255.6, 7.5]).unwrap();
        assert_eq!(u8, [0, 255, 8]);
        let e4 = encode(SafeDtype::F8E4M3, &[1000.0, 0.3]).unwrap();
        assert_eq!(e4[0], 0x7E); // 448, the largest finite value
        let back = decode_to_f32(StorageType::Safe(SafeDtype::F8E4M3), &e4, 2).unwrap();
        assert!((back[1] - 0.3).abs() < 0.02);
    }

    #[test]
    fn scaled_codes_decode_close_for_every_dtype() {
        let x: Vec<f32> = (0..96).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013 + 0.001).collect();
        for dtype in SafeDtype::ALL.into_iter().filter(|&d| d != SafeDtype::Bool) {
            for g in [Granularity::Tensor, Granularity::Row, Granularity::Block(16)] {
                let layout = g.layout(dtype, &[4, 24]);
                let s = quantize(dtype, &x, layout).unwrap();
                let w = s.decode().unwrap();
                let step = match dtype {
                    SafeDtype::F4 => 0.25,
                    SafeDtype::I8 | SafeDtype::U8 => 0.01,
                    // Relative steps: 2^-3 and 2^-2 of values up to 0.65.
                    SafeDtype::F8E4M3 => 0.08,
                    SafeDtype::F8E5M2 => 0.16,
                    SafeDtype::BF16 => 4e-3,
                    _ => 1e-3,
                };
                let worst = x.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst <= step * 0.65, "{} {}: {worst}", dtype.name(), g.name());
            }
        }
    }

    #[test]
    fn unsigned_zero_points_are_integers_and_zero_decodes_to_zero() {
        let x = [-0.5f32, 0.0, 0.25, 1.0];
        let s = quantize(SafeDtype::U8, &x, Granularity::Tensor.layout(SafeDtype::U8, &[4])).unwrap();
        assert_eq!(s.zeros.len(), 1);
        assert_eq!(s.zeros[0], s.zeros[0].round());
        assert_eq!(s.decode().unwrap()[1], 0.0);
    }

    #[test]
    fn layouts_cover_ragged_groups() {
        let l = Granularity::Block(32).layout(SafeDtype::I8, &[16, 8, 3, 3]);
        assert_eq!((l.rows, l.cols, l.group, l.groups_per_row()), (16, 72, 32, 3));
        assert_eq!(l.group_of(71), 2);
        assert_eq!(l.group_of(72), 3);
        assert_eq!(Granularity::Row.layout(SafeDtype::U8, &[10]).rows, 1);
    }
}
