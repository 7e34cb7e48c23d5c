//! CPU work of a load spread over the cores by runs of rows (natively; the browser build has no
//! threads and runs it in one piece, as before). Every format weft packs into keeps each row to
//! itself (whole words and whole groups per row), so runs packed apart and joined are the bytes
//! one pass over all the rows makes.

use crate::error::Result;
use crate::quant::repack::KPlanes;
use crate::quant::weft::QuantMatrix;

/// A packed run of rows, which the packing of the rows after it can follow.
pub(crate) trait Rows: Send {
    fn append(&mut self, next: Self);
}

impl Rows for QuantMatrix {
    fn append(&mut self, next: Self) {
        self.rows += next.rows;
        self.words.extend_from_slice(&next.words);
        self.scales.extend_from_slice(&next.scales);
        self.zeros.extend_from_slice(&next.zeros);
    }
}

impl Rows for KPlanes {
    fn append(&mut self, next: Self) {
        self.rows += next.rows;
        self.words.extend_from_slice(&next.words);
        self.high.extend_from_slice(&next.high);
        self.heads.extend_from_slice(&next.heads);
        self.d.extend_from_slice(&next.d);
    }
}

/// Weights below which a thread is not worth starting (a 576 x 576 matrix is ~4 of these).
#[cfg(not(target_arch = "wasm32"))]
const MIN_WEIGHTS_PER_THREAD: usize = 1 << 16;

/// Threads for a matrix of `weights` values.
fn threads(weights: usize) -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(weights / MIN_WEIGHTS_PER_THREAD).max(1)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = weights;
        1
    }
}

/// `pack(row0, n)` (rows `row0 .. row0 + n` of a [rows, cols] matrix, packed) over runs of rows
/// on as many threads as pay, joined in row order.
pub(crate) fn pack_by_rows<T, F>(rows: usize, cols: usize, pack: F) -> Result<Option<T>>
where
    T: Rows,
    F: Fn(usize, usize) -> Result<Option<T>> + Sync,
{
    let threads = threads(rows.saturating_mul(cols)).min(rows.max(1));
    if threads <= 1 {
        return pack(0, rows);
    }
    let per = rows.div_ceil(threads);
    let runs: Vec<Result<Option<T>>> = run_all(rows, per, &pack);
    let mut joined: Option<T> = None;
    for run in runs {
        let Some(m) = run? else { return Ok(None) };
        match &mut joined {
            None => joined = Some(m),
            Some(j) => j.append(m),
        }
    }
    Ok(joined)
}

#[cfg(not(target_arch = "wasm32"))]
fn run_all<T: Send, F: Fn(usize, usize) -> T + Sync>(rows: usize, per: usize, f: &F) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..rows).step_by(per).map(|r0| s.spawn(move || f(r0, per.min(rows - r0)))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

#[cfg(target_arch = "wasm32")]
fn run_all<T, F: Fn(usize, usize) -> T>(rows: usize, per: usize, f: &F) -> Vec<T> {
    (0..rows).step_by(per).map(|r0| f(r0, per.min(rows - r0))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::GgmlType;
    use crate::quant::repack::{to_planes, to_weft};

    #[test]
    fn runs_joined_equal_one_pass() {
        // Enough weights for several threads wherever there is more than one core; an odd row
        // count, so the runs differ in length.
        let (rows, cols) = (1031, 256);
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
            let row_bytes = cols / 32 * ty.block_bytes() as usize;
            let bytes: Vec<u8> = (0..rows * row_bytes).map(|i| (i * 7 + i / 13) as u8).collect();
            let whole = to_weft(ty, rows, cols, &bytes).unwrap().unwrap();
            let run = |r0: usize, n: usize| to_weft(ty, n, cols, &bytes[r0 * row_bytes..(r0 + n) * row_bytes]);
            let runs = pack_by_rows(rows, cols, run).unwrap().unwrap();
            assert_eq!((runs.rows, runs.cols, runs.quant), (rows, cols, whole.quant));
            assert_eq!(runs.words, whole.words, "{}", ty.name());
            assert_eq!(runs.scales, whole.scales, "{}", ty.name());
            assert!(runs.zeros.is_empty());
            // A failed run fails the whole.
            let cut = |r0: usize, n: usize| {
                to_weft(ty, n, cols, &bytes[r0 * row_bytes..(r0 + n) * row_bytes - usize::from(r0 + n == rows)])
            };
            assert!(pack_by_rows(rows, cols, cut).is_err());
        }
        // A type without a weft equivalent stays as stored.
        assert!(pack_by_rows::<QuantMatrix, _>(rows, cols, |_, _| Ok(None)).unwrap().is_none());
    }

    #[test]
    fn k_plane_runs_joined_equal_one_pass() {
        let (rows, cols) = (263, 512);
        for ty in [GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
            let row_bytes = cols / ty.block_elements() as usize * ty.block_bytes() as usize;
            let bytes: Vec<u8> = (0..rows * row_bytes).map(|i| (i * 7 + i / 13) as u8).collect();
            let whole = to_planes(ty, rows, cols, &bytes).unwrap().unwrap();
            let run = |r0: usize, n: usize| to_planes(ty, n, cols, &bytes[r0 * row_bytes..(r0 + n) * row_bytes]);
            assert_eq!(pack_by_rows(rows, cols, run).unwrap().unwrap(), whole, "{}", ty.name());
        }
    }
}
