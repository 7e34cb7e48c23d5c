//! Storage formats of the KV cache: how one (position, KV head) row of `head_dim` values is
//! laid out in 32-bit words, and the CPU references of writing and reading a row.
//!
//! - F32: one word per value.
//! - F16: two values per word (`pack2x16float`, low half first). The packing builtins are core
//!   WGSL, so this needs no `shader-f16` and works on every adapter.
//! - Q8: one f32 scale word, then four signed 8-bit values per word (lowest byte first):
//!   `scale = absmax / 127`, `q = round(x / scale)`, value = `q * scale`.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::gpu::shader::Defines;
use crate::gpu::DType;

use super::Tolerance;

/// Largest |stored - original| of an F16 cache value: WGSL lets `pack2x16float` round to either
/// neighbour, one f16 step (2^-10 relative, 2^-24 absolute among subnormals).
pub const KV_F16_TOLERANCE: Tolerance = Tolerance { abs: 6e-8, rel: 1e-3 };

/// Q8 rounds to the nearest multiple of the row's scale, so |stored - original| <= scale / 2;
/// this slack (relative to the scale) covers the f32 arithmetic of `x / scale`.
pub const KV_Q8_SLACK: f64 = 1e-3;

/// How the KV cache stores its values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvFormat {
    #[default]
    F32,
    F16,
    Q8,
}

impl KvFormat {
    pub const ALL: [KvFormat; 3] = [KvFormat::F32, KvFormat::F16, KvFormat::Q8];

    pub fn name(self) -> &'static str {
        match self {
            KvFormat::F32 => "f32",
            KvFormat::F16 => "f16",
            KvFormat::Q8 => "q8",
        }
    }

    /// Element type of the cache tensor.
    pub fn dtype(self) -> DType {
        match self {
            KvFormat::F32 => DType::F32,
            KvFormat::F16 | KvFormat::Q8 => DType::U32,
        }
    }

    /// Whether rows of `head_dim` values fit this format (F16 packs pairs, Q8 quadruples).
    pub fn fits(self, head_dim: usize) -> bool {
        match self {
            KvFormat::F32 => true,
            KvFormat::F16 => head_dim.is_multiple_of(2),
            KvFormat::Q8 => head_dim.is_multiple_of(4),
        }
    }

    /// 32-bit words one row of `head_dim` values takes.
    pub fn row_words(self, head_dim: usize) -> usize {
        match self {
            KvFormat::F32 => head_dim,
            KvFormat::F16 => head_dim.div_ceil(2),
            KvFormat::Q8 => 1 + head_dim.div_ceil(4),
        }
    }

    /// Bytes one row of `head_dim` values takes.
    pub fn row_bytes(self, head_dim: usize) -> usize {
        4 * self.row_words(head_dim)
    }

    /// The shader defines selecting this format in rope_store and attention.
    pub(crate) fn defines(self, base: Defines) -> Defines {
        match self {
            KvFormat::F32 => base,
            KvFormat::F16 => base.set("KV_F16", 1),
            KvFormat::Q8 => base.set("KV_Q8", 1),
        }
    }

    /// A format that cannot hold rows of `head_dim` values is refused before any cache is made.
    pub fn check_fits(self, head_dim: usize) -> Result<()> {
        if !self.fits(head_dim) {
            return Err(Error::Model(format!("a {self} KV cache cannot hold rows of head_dim {head_dim}")));
        }
        Ok(())
    }

    /// CPU reference of the write path: one row in this format.
    pub fn encode_row(self, values: &[f32]) -> Vec<u32> {
        let mut out = vec![0; self.row_words(values.len())];
        self.encode_into(values, &mut out);
        out
    }

    /// [`Self::encode_row`] into `out`, `row_words(values.len())` words (the CPU backend's store).
    pub fn encode_into(self, values: &[f32], out: &mut [u32]) {
        match self {
            KvFormat::F32 => out.iter_mut().zip(values).for_each(|(w, v)| *w = v.to_bits()),
            KvFormat::F16 => {
                for (w, p) in out.iter_mut().zip(values.chunks(2)) {
                    let lo = half::f16::from_f32(p[0]).to_bits() as u32;
                    let hi = p.get(1).map_or(0, |&v| half::f16::from_f32(v).to_bits() as u32);
                    *w = lo | (hi << 16);
                }
            }
            KvFormat::Q8 => {
                let absmax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
                let scale = absmax / 127.0;
                out[0] = scale.to_bits();
                for (w, quad) in out[1..].iter_mut().zip(values.chunks(4)) {
                    let mut word = 0u32;
                    for (i, &v) in quad.iter().enumerate() {
                        let q = if scale > 0.0 { (v / scale).round_ties_even().clamp(-127.0, 127.0) } else { 0.0 };
                        word |= ((q as i32 as u32) & 0xff) << (8 * i);
                    }
                    *w = word;
                }
            }
        }
    }

    /// CPU reference of the read path: `head_dim` values back from one row.
    pub fn decode_row(self, words: &[u32], head_dim: usize) -> Vec<f32> {
        match self {
            KvFormat::F32 => words[..head_dim].iter().map(|&w| f32::from_bits(w)).collect(),
            KvFormat::F16 => {
                (0..head_dim).map(|d| half::f16::from_bits((words[d / 2] >> (16 * (d % 2))) as u16).to_f32()).collect()
            }
            KvFormat::Q8 => {
                let scale = f32::from_bits(words[0]);
                (0..head_dim).map(|d| ((words[1 + d / 4] >> (8 * (d % 4))) as u8 as i8) as f32 * scale).collect()
            }
        }
    }

    /// CPU reference over a whole cache of `rows` rows stored as f32 values.
    pub fn encode_cache(self, values: &[f32], head_dim: usize) -> Vec<u32> {
        values.chunks(head_dim).flat_map(|row| self.encode_row(row)).collect()
    }

    /// A cache of words back to f32 values, [rows, head_dim].
    pub fn decode_cache(self, words: &[u32], head_dim: usize) -> Vec<f32> {
        words.chunks(self.row_words(head_dim)).flat_map(|row| self.decode_row(row, head_dim)).collect()
    }
}

impl fmt::Display for KvFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KvFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        KvFormat::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::Model(format!("unknown KV cache format '{s}': use f32, f16 or q8")))
    }
}

pub(crate) fn all_defines(base: Defines) -> Vec<Defines> {
    KvFormat::ALL.iter().map(|k| k.defines(base.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in KvFormat::ALL {
            assert_eq!(k.to_string().parse::<KvFormat>().unwrap(), k);
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<KvFormat>(&format!("\"{k}\"")).unwrap(), k);
        }
        assert!("q4".parse::<KvFormat>().is_err());
    }

    #[test]
    fn q8_row_stays_within_half_a_step() {
        let row: Vec<f32> = crate::selftest::random_f32(5, 64).iter().map(|v| v * 3.0).collect();
        let words = KvFormat::Q8.encode_row(&row);
        assert_eq!(words.len(), KvFormat::Q8.row_words(64));
        let scale = f32::from_bits(words[0]) as f64;
        let absmax = row.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
        assert!((scale - absmax / 127.0).abs() <= 1e-7 * absmax);
        for (got, want) in KvFormat::Q8.decode_row(&words, 64).iter().zip(&row) {
            assert!((*got as f64 - *want as f64).abs() <= scale * (0.5 + KV_Q8_SLACK), "{got} vs {want}");
        }
        // An all-zero row stores scale 0 and decodes to zeros, never NaN.
        assert!(KvFormat::Q8.decode_row(&KvFormat::Q8.encode_row(&[0.0; 8]), 8).iter().all(|&v| v == 0.0));
    }

    #[test]
    fn f16_row_is_within_one_step() {
        let row = crate::selftest::random_f32(6, 64);
        let back = KvFormat::F16.decode_row(&KvFormat::F16.encode_row(&row), 64);
        let want: Vec<f64> = row.iter().map(|&v| v as f64).collect();
        assert!(KV_F16_TOLERANCE.compare(&back, &want).within);
    }
}
