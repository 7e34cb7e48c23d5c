//! A weight matrix as the CPU backend holds it: packed, in its stored format. Rows of the GGML
//! formats with block kernels (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) go to those;
//! every other format (Q2_K, Q3_K, floats, weft's formats) is decoded one row at a time by the
//! reference decoders and multiplied in f32.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::format::{SafeDtype, StorageType};
use crate::quant::decode_to_f32;
use crate::quant::weft::QuantMatrix;

use super::kernels::{BlockFormat, BlockQ8, Isa, BLOCK};

enum Packing {
    /// Row-major whole blocks of a format with block kernels.
    Blocks(BlockFormat),
    /// Row-major rows of any other GGML or safetensors type, decoded per row.
    Stored(StorageType),
    /// A weft matrix (packed words, f16 scales and zero points).
    Weft(QuantMatrix),
}

pub struct CpuMatrix {
    pub rows: usize,
    pub cols: usize,
    packing: Packing,
    bytes: Vec<u8>,
    row_bytes: usize,
}

/// A pass's input rows to a matrix product: `t` rows of `cols` f32, and their 8-bit blocks
/// when the product uses them.
pub struct Input<'a> {
    pub x: &'a [f32],
    pub xq: Option<&'a [BlockQ8]>,
    pub t: usize,
}

impl CpuMatrix {
    /// A matrix stored as `storage`, `bytes` being its whole data (rows × row bytes).
    pub fn from_storage(name: &str, storage: StorageType, rows: usize, cols: usize, bytes: Vec<u8>) -> Result<Self> {
        let packing = match storage {
            StorageType::Ggml(t) => BlockFormat::from_ggml(t).map_or(Packing::Stored(storage), Packing::Blocks),
            other => Packing::Stored(other),
        };
        let row_bytes = storage.bytes_for(cols as u64).ok_or_else(|| Error::Model(format!(
            "{name}: rows of {cols} values are not whole blocks of {}", storage.name()
        )))? as usize;
        if bytes.len() != rows * row_bytes {
            return Err(Error::Model(format!("{name}: {} bytes for [{rows}, {cols}] of {}", bytes.len(), storage.name())));
        }
        Ok(Self { rows, cols, packing, bytes, row_bytes })
    }

    pub fn from_f32(rows: usize, cols: usize, values: &[f32]) -> Self {
        let bytes = bytemuck::cast_slice(values).to_vec();
        Self { rows, cols, packing: Packing::Stored(StorageType::Safe(SafeDtype::F32)), bytes, row_bytes: cols * 4 }
    }

    pub fn from_weft(m: QuantMatrix) -> Self {
        Self { rows: m.rows, cols: m.cols, packing: Packing::Weft(m), bytes: Vec::new(), row_bytes: 0 }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        match &self.packing {
            Packing::Weft(m) => m.bytes() as u64,
            _ => self.bytes.len() as u64,
        }
    }

    /// The block format when the block kernels read this matrix (and the input's 8-bit blocks).
    pub fn block_format(&self) -> Option<BlockFormat> {
        match self.packing {
            Packing::Blocks(f) if self.cols.is_multiple_of(BLOCK) => Some(f),
            _ => None,
        }
    }

    /// The weft matrix, when this is one.
    pub fn weft(&self) -> Option<&QuantMatrix> {
        match &self.packing {
            Packing::Weft(m) => Some(m),
            _ => None,
        }
    }

    /// Row `r` decoded to f32 into `out` (`cols` values), as the reference decoder does.
    pub fn decode_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        match &self.packing {
            Packing::Weft(m) => m.dequantize_row(r, out),
            Packing::Blocks(_) | Packing::Stored(_) => {
                let storage = match self.packing {
                    Packing::Blocks(f) => StorageType::Ggml(f.ggml()),
                    Packing::Stored(s) => s,
                    Packing::Weft(_) => unreachable!(),
                };
                let row = &self.bytes[r * self.row_bytes..(r + 1) * self.row_bytes];
                out[..self.cols].copy_from_slice(&decode_to_f32(storage, row, self.cols)?);
            }
        }
        Ok(())
    }

    /// `out(token, row, value)` for every token of `input` and every row in `rows`: the rows of
    /// `x · selfᵀ` one thread computes.
    pub fn product(&self, isa: Isa, input: &Input, rows: Range<usize>, out: &mut impl FnMut(usize, usize, f32)) -> Result<()> {
        let cols = self.cols;
        match (self.block_format(), input.xq) {
            (Some(f), Some(xq)) => {
                let blocks = cols / BLOCK;
                let row = |r: usize| &self.bytes[r * self.row_bytes..(r + 1) * self.row_bytes];
                let x = |tok: usize| &xq[tok * blocks..(tok + 1) * blocks];
                // Four rows at a time: their blocks stay in L1 while every token passes over them,
                // in tiles of several tokens.
                let quads = rows.start..rows.end - (rows.end - rows.start) % 4;
                for r in quads.clone().step_by(4) {
                    let four = [row(r), row(r + 1), row(r + 2), row(r + 3)];
                    tiles(input.t, |tok, n| match n {
                        #[cfg(not(target_arch = "wasm32"))]
                        8 => emit(out, tok, r, isa.dot_q8_tile::<4, 8>(f, four, std::array::from_fn(|i| x(tok + i)))),
                        4 => emit(out, tok, r, isa.dot_q8_tile::<4, 4>(f, four, std::array::from_fn(|i| x(tok + i)))),
                        #[cfg(not(target_arch = "wasm32"))]
                        2 => emit(out, tok, r, isa.dot_q8_tile::<4, 2>(f, four, std::array::from_fn(|i| x(tok + i)))),
                        _ => emit(out, tok, r, isa.dot_q8_tile::<4, 1>(f, four, [x(tok)])),
                    });
                }
                for r in quads.end..rows.end {
                    for tok in 0..input.t {
                        out(tok, r, isa.dot_q8(f, row(r), x(tok)));
                    }
                }
            }
            (Some(f), None) if f.has_f32_kernel() => {
                for r in rows {
                    let row = &self.bytes[r * self.row_bytes..(r + 1) * self.row_bytes];
                    for tok in 0..input.t {
                        out(tok, r, isa.dot_f32(f, row, &input.x[tok * cols..(tok + 1) * cols]));
                    }
                }
            }
            _ => {
                let mut w = vec![0f32; cols];
                for r in rows {
                    self.decode_row(r, &mut w)?;
                    for tok in 0..input.t {
                        out(tok, r, isa.dot(&w, &input.x[tok * cols..(tok + 1) * cols]));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Tokens per tile of a prompt pass, widest first: each weight block is unpacked once for that
/// many tokens. Natively up to 8 (on AVX2 a 4 x 8 tile multiplied 1536 x 576 Q4_1 rows by 64
/// tokens ~20 % faster than 4 x 4, K-quants ~30 %: best of 15 runs each, on a busy 2-core
/// machine); in wasm 4 or 1, since each width is eight more kernel instances (one per format)
/// in a module held to a size budget.
#[cfg(not(target_arch = "wasm32"))]
const TILES: [usize; 4] = [8, 4, 2, 1];
#[cfg(target_arch = "wasm32")]
const TILES: [usize; 2] = [4, 1];

/// Splits `t` tokens into tiles of [`TILES`] tokens, widest first: `tile(first token, tokens)`.
fn tiles(t: usize, mut tile: impl FnMut(usize, usize)) {
    let mut tok = 0;
    for n in TILES {
        while t - tok >= n {
            tile(tok, n);
            tok += n;
        }
    }
}

/// Hands a tile's products `[token][row]`, from token `tok` and row `r`, to `out`.
fn emit<const R: usize, const T: usize>(out: &mut impl FnMut(usize, usize, f32), tok: usize, r: usize, y: [[f32; R]; T]) {
    for (t, ys) in y.into_iter().enumerate() {
        for (i, v) in ys.into_iter().enumerate() {
            out(tok + t, r + i, v);
        }
    }
}
