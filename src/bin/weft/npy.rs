//! NumPy `.npy` files, format version 1.0, holding little-endian f32 (`<f4`) in C order: the
//! one layout `weft inspect --npy` writes, so this is all of the format it implements.
//!
//! Layout: the magic `\x93NUMPY`, the version bytes 1 and 0, a little-endian u16 header length,
//! then a Python dict literal padded with spaces and ended by a newline so that the data starts
//! at a multiple of 64 bytes (numpy's own alignment), then the values.

use std::io::Write;

use anyhow::{bail, ensure};

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy pads headers so the data is aligned to this for memory mapping.
const ALIGN: usize = 64;
/// Magic, two version bytes and the u16 header length.
const PREAMBLE: usize = MAGIC.len() + 2 + 2;

/// Python's tuple syntax: `()`, `(3,)`, `(2, 3)`.
fn shape_tuple(shape: &[u64]) -> String {
    match shape {
        [] => "()".to_string(),
        [only] => format!("({only},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// The magic, version, length and padded dict for an f32 array of `shape`.
pub fn header(shape: &[u64]) -> anyhow::Result<Vec<u8>> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape_tuple(shape));
    // One newline at least; spaces before it bring the data to the alignment.
    let unpadded = PREAMBLE + dict.len() + 1;
    let padding = (ALIGN - unpadded % ALIGN) % ALIGN;
    let header_len = dict.len() + padding + 1;
    let Ok(header_len_u16) = u16::try_from(header_len) else {
        bail!("a {}-dimensional shape does not fit a version 1.0 .npy header", shape.len());
    };
    let mut out = Vec::with_capacity(PREAMBLE + header_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&header_len_u16.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', padding));
    out.push(b'\n');
    Ok(out)
}

/// Writes `values` as an f32 array of `shape` (outermost dimension first).
pub fn write_f32(out: &mut impl Write, shape: &[u64], values: &[f32]) -> anyhow::Result<()> {
    let elements = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    ensure!(
        elements == Some(values.len() as u64),
        "shape {shape:?} does not hold {} values",
        values.len()
    );
    out.write_all(&header(shape)?)?;
    // Converted in chunks: an embedding table is ~100 MB of f32, no need for a second copy.
    let mut buffer = Vec::with_capacity(4 * 16384);
    for chunk in values.chunks(16384) {
        buffer.clear();
        buffer.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        out.write_all(&buffer)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_numpys_byte_for_byte() -> anyhow::Result<()> {
        // What `np.save` writes for np.zeros((2, 3), '<f4'): 128 bytes before the data.
        let h = header(&[2, 3])?;
        assert_eq!(h.len(), 128);
        assert_eq!(&h[..10], b"\x93NUMPY\x01\x00\x76\x00");
        let dict = std::str::from_utf8(&h[10..])?;
        assert_eq!(dict.trim_end(), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
        assert!(dict.ends_with(" \n"));
        Ok(())
    }

    #[test]
    fn shapes_use_python_tuple_syntax() {
        assert_eq!(shape_tuple(&[]), "()");
        assert_eq!(shape_tuple(&[7]), "(7,)");
        assert_eq!(shape_tuple(&[0, 3, 4]), "(0, 3, 4)");
    }

    #[test]
    fn data_starts_aligned_and_follows_the_header() -> anyhow::Result<()> {
        for shape in [vec![], vec![1], vec![49152, 576], vec![2; 20]] {
            assert_eq!(header(&shape)?.len() % ALIGN, 0, "{shape:?}");
        }
        let mut out = Vec::new();
        write_f32(&mut out, &[2], &[1.0, -0.0])?;
        let data = out.get(header(&[2])?.len()..);
        assert_eq!(data, Some(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x80][..]));
        Ok(())
    }

    #[test]
    fn refuses_mismatched_counts_and_oversized_headers() {
        assert!(write_f32(&mut Vec::new(), &[2, 2], &[0.0; 3]).is_err());
        assert!(header(&[u64::MAX; 4000]).is_err());
    }
}
