//! NumPy `.npy` files, format version 1.0, holding little-endian f32 (`<f4`) in C order: the
//! one layout `weft inspect --npy` and `weft dump-activations` write and the activation
//! fixtures and `examples/sample_bench` read, so this is all of the format it implements.
//!
//! Layout: the magic `\x93NUMPY`, the version bytes 1 and 0, a little-endian u16 header length,
//! then a Python dict literal padded with spaces and ended by a newline so that the data starts
//! at a multiple of 64 bytes (numpy's own alignment), then the values.

use std::io::Write;

use super::FormatError;

const FORMAT: &str = "npy";

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
pub fn header(shape: &[u64]) -> Result<Vec<u8>, FormatError> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape_tuple(shape));
    // One newline at least; spaces before it bring the data to the alignment.
    let unpadded = PREAMBLE + dict.len() + 1;
    let padding = (ALIGN - unpadded % ALIGN) % ALIGN;
    let header_len = dict.len() + padding + 1;
    let Ok(header_len_u16) = u16::try_from(header_len) else {
        return Err(FormatError::HeaderTooLarge { format: FORMAT, len: header_len as u64, max: u16::MAX as u64 });
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

/// Writes `values` as an f32 array of `shape` (outermost dimension first). A shape that does
/// not hold the values, or whose header does not fit version 1.0, is `InvalidInput`.
pub fn write_f32(out: &mut impl Write, shape: &[u64], values: &[f32]) -> std::io::Result<()> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, message);
    let elements = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    if elements != Some(values.len() as u64) {
        return Err(invalid(format!("shape {shape:?} does not hold {} values", values.len())));
    }
    out.write_all(&header(shape).map_err(|e| invalid(e.to_string()))?)?;
    // Converted in chunks: an embedding table is ~100 MB of f32, no need for a second copy.
    let mut buffer = Vec::with_capacity(4 * 16384);
    for chunk in values.chunks(16384) {
        buffer.clear();
        buffer.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        out.write_all(&buffer)?;
    }
    Ok(())
}

/// The shape and values of an f32 array in `.npy` bytes: version 1.0, `<f4`, C order, the data
/// exactly as long as the shape says. Anything else is refused, not guessed at.
pub fn read_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), FormatError> {
    let bad = |message: String| FormatError::BadMagic { format: FORMAT, message };
    if bytes.len() < PREAMBLE || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad("no \\x93NUMPY magic".into()));
    }
    if bytes[6..8] != [1, 0] {
        return Err(bad(format!("version {}.{}, only 1.0 is read", bytes[6], bytes[7])));
    }
    let data_start = PREAMBLE + usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let Some(dict) = bytes.get(PREAMBLE..data_start) else {
        return Err(FormatError::Truncated { format: FORMAT, needed: data_start as u64, file_len: bytes.len() as u64 });
    };
    let dict = std::str::from_utf8(dict).map_err(|e| bad(format!("header is not text: {e}")))?;
    if !dict.contains("'descr': '<f4'") || !dict.contains("'fortran_order': False") {
        return Err(bad(format!("{}: only little-endian f32 in C order is read", dict.trim_end())));
    }
    let shape_text = dict.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).ok_or_else(|| bad(format!("no shape in {}", dict.trim_end())))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::parse)
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|e| bad(format!("shape ({shape_text}): {e}")))?;
    let data = &bytes[data_start..];
    let want = shape.iter().try_fold(4usize, |acc, &d| acc.checked_mul(d));
    if want != Some(data.len()) {
        let shape64 = shape.iter().map(|&d| d as u64).collect();
        return Err(FormatError::SizeMismatch { tensor: "npy array".into(), shape: shape64, storage: "f32", expected: want.map_or(u64::MAX, |w| w as u64), actual: data.len() as u64 });
    }
    Ok((shape, data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_refuses_the_rest() -> anyhow::Result<()> {
        let mut out = Vec::new();
        write_f32(&mut out, &[2, 3], &[1.0, -2.5, 0.0, 7.0, f32::MIN_POSITIVE, -0.0])?;
        let (shape, values) = read_f32(&out)?;
        assert_eq!(shape, [2, 3]);
        assert_eq!(values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), [1.0f32, -2.5, 0.0, 7.0, f32::MIN_POSITIVE, -0.0].map(f32::to_bits));
        assert!(matches!(read_f32(&out[..out.len() - 1]), Err(FormatError::SizeMismatch { expected: 24, actual: 23, .. })));
        assert!(matches!(read_f32(&out[..40]), Err(FormatError::Truncated { .. })));
        assert!(matches!(read_f32(b"\x93NUMP"), Err(FormatError::BadMagic { .. })));
        let mut v2 = out.clone();
        v2[6] = 2;
        assert!(matches!(read_f32(&v2), Err(FormatError::BadMagic { .. })));
        let mut f8 = out.clone();
        let at = f8.windows(3).position(|w| w == b"<f4").expect("the descr");
        f8[at + 2] = b'8';
        assert!(matches!(read_f32(&f8), Err(FormatError::BadMagic { .. })));
        // A shape whose byte count overflows is refused before anything is allocated.
        assert!(matches!(read_f32(&header(&[1 << 62, 8])?), Err(FormatError::SizeMismatch { expected: u64::MAX, .. })));
        Ok(())
    }

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
