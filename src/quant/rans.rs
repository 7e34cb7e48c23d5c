//! Static rANS entropy coding of small-alphabet symbol streams: the levels and the parameter
//! codes of an entropy-coded `k` matrix (docs/FORMAT.md, "Entropy-coded `k` matrices").
//!
//! A stream is `[frequency tables][state: u32 LE][renormalisation bytes]`, with one table per
//! context: symbol `i` is coded with the table of context `contexts[i / run]`, which the decoder
//! knows beforehand (a level's context is its group's rounded zero point, so each table fits the
//! levels around one zero point). A table gives each of the alphabet's symbols its frequency out
//! of `2^PROB_BITS` (or all zero, for a context with no symbols) as LEB128 varints; a zero is
//! followed by a varint count of further zeros, so a sparse 256-symbol table costs a few dozen
//! bytes. The coder is the byte-wise rANS of Duda's asymmetric numeral systems with a 32-bit
//! state: encoded backwards, decoded forwards, and the decoder ends exactly where the encoder
//! started (state `L`, every byte used), which is what catches a damaged stream.

use crate::error::{Error, Result};

/// Frequencies are out of 2^14: a level of a 4-bit group costs at most 14 bits, and the
/// rounding of the frequencies costs well under 0.01 bit a symbol at the alphabets used here.
const PROB_BITS: u32 = 14;
const TOTAL: u32 = 1 << PROB_BITS;
/// Lower bound of the normalised state: the state lies in `[L, 256 L)` between symbols.
const L: u32 = 1 << 23;

fn bad(message: String) -> Error {
    Error::Decode { ty: "weft", message: format!("entropy-coded stream: {message}") }
}

/// Frequencies summing to `TOTAL` from symbol counts; every symbol that occurs gets at least 1.
fn normalize(counts: &[u64]) -> Vec<u32> {
    let total: u64 = counts.iter().sum();
    let mut freq: Vec<u32> = counts
        .iter()
        .map(|&c| if c == 0 { 0 } else { ((c as u128 * TOTAL as u128 / total as u128) as u32).max(1) })
        .collect();
    let mut sum: i64 = freq.iter().map(|&f| f as i64).sum();
    // Hand the rounding's difference to the most frequent symbols, where it costs least.
    while sum != TOTAL as i64 {
        let (i, _) = freq
            .iter()
            .enumerate()
            .filter(|(_, &f)| sum < TOTAL as i64 || f > 1)
            .max_by_key(|(i, &f)| (f, std::cmp::Reverse(*i)))
            .expect("a symbol can absorb the difference");
        let step = if sum < TOTAL as i64 { 1 } else { -1 };
        let room = if step > 0 { TOTAL as i64 - sum } else { (sum - TOTAL as i64).min(freq[i] as i64 - 1) };
        freq[i] = (freq[i] as i64 + step * room) as u32;
        sum += step * room;
    }
    freq
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Result<u32> {
    let mut v = 0u32;
    for shift in [0, 7, 14, 21] {
        let b = *bytes.get(*pos).ok_or_else(|| bad("the frequency table is cut short".into()))?;
        *pos += 1;
        v |= ((b & 0x7f) as u32) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(bad("a frequency is longer than four bytes".into()))
}

fn put_table(out: &mut Vec<u8>, freq: &[u32]) {
    let mut s = 0;
    while s < freq.len() {
        put_varint(out, freq[s]);
        if freq[s] == 0 {
            let run = freq[s + 1..].iter().take_while(|&&f| f == 0).count();
            put_varint(out, run as u32);
            s += run;
        }
        s += 1;
    }
}

/// A table read back, with its cumulative frequencies and slot-to-symbol map; `None` for a
/// context with no symbols.
struct Table {
    freq: Vec<u32>,
    cum: Vec<u32>,
    slot_symbol: Vec<u8>,
}

fn get_table(bytes: &[u8], pos: &mut usize, alphabet: usize) -> Result<Option<Table>> {
    let mut freq = vec![0u32; alphabet];
    let mut s = 0;
    while s < alphabet {
        let f = get_varint(bytes, pos)?;
        if f > TOTAL {
            return Err(bad(format!("frequency {f} is over {TOTAL}")));
        }
        freq[s] = f;
        if f == 0 {
            let run = get_varint(bytes, pos)? as usize;
            if run > alphabet - s - 1 {
                return Err(bad(format!("a run of {run} unused symbols passes the alphabet's end")));
            }
            s += run;
        }
        s += 1;
    }
    match freq.iter().sum::<u32>() {
        0 => Ok(None),
        TOTAL => {
            let mut slot_symbol = vec![0u8; TOTAL as usize];
            let mut cum = vec![0u32; alphabet];
            let mut at = 0u32;
            for (s, &f) in freq.iter().enumerate() {
                cum[s] = at;
                slot_symbol[at as usize..(at + f) as usize].fill(s as u8);
                at += f;
            }
            Ok(Some(Table { freq, cum, slot_symbol }))
        }
        sum => Err(bad(format!("frequencies sum to {sum}, not {TOTAL}"))),
    }
}

/// Checks the arguments shared by [`encode`] and [`decode`].
fn check_shape(count: usize, alphabet: usize, contexts: &[u8], n_contexts: usize, run: usize) -> Result<()> {
    if !(1..=256).contains(&alphabet) || !(1..=256).contains(&n_contexts) || run == 0 {
        return Err(bad(format!("{alphabet} symbols, {n_contexts} contexts, runs of {run}")));
    }
    if contexts.len().checked_mul(run).is_none_or(|n| n < count) {
        return Err(bad(format!("{} contexts of {run} symbols for {count} symbols", contexts.len())));
    }
    if let Some(c) = contexts.iter().find(|&&c| c as usize >= n_contexts) {
        return Err(bad(format!("context {c} of {n_contexts}")));
    }
    Ok(())
}

/// Codes `symbols` (each below `alphabet`, at most 256) into one stream, symbol `i` with the
/// table of context `contexts[i / run]` (each below `n_contexts`).
pub fn encode(symbols: &[u8], alphabet: usize, contexts: &[u8], n_contexts: usize, run: usize) -> Result<Vec<u8>> {
    check_shape(symbols.len(), alphabet, contexts, n_contexts, run)?;
    if let Some(s) = symbols.iter().find(|&&s| s as usize >= alphabet) {
        return Err(bad(format!("symbol {s} of an alphabet of {alphabet}")));
    }
    let mut counts = vec![vec![0u64; alphabet]; n_contexts];
    for (i, &s) in symbols.iter().enumerate() {
        counts[contexts[i / run] as usize][s as usize] += 1;
    }
    let freqs: Vec<Vec<u32>> =
        counts.iter().map(|c| if c.iter().all(|&n| n == 0) { vec![0; alphabet] } else { normalize(c) }).collect();
    let mut out = Vec::with_capacity(symbols.len() / 2 + 16);
    for f in &freqs {
        put_table(&mut out, f);
    }
    if symbols.is_empty() {
        return Ok(out);
    }
    let cums: Vec<Vec<u32>> = freqs
        .iter()
        .map(|f| f.iter().scan(0u32, |at, &v| { let c = *at; *at += v; Some(c) }).collect())
        .collect();
    let mut body = Vec::with_capacity(symbols.len() / 2 + 16);
    let mut x = L;
    for (i, &s) in symbols.iter().enumerate().rev() {
        let c = contexts[i / run] as usize;
        let f = freqs[c][s as usize];
        let x_max = ((L >> PROB_BITS) << 8) * f;
        while x >= x_max {
            body.push(x as u8);
            x >>= 8;
        }
        x = ((x / f) << PROB_BITS) + (x % f) + cums[c][s as usize];
    }
    body.extend([(x >> 24) as u8, (x >> 16) as u8, (x >> 8) as u8, x as u8]);
    body.reverse();
    out.extend(body);
    Ok(out)
}

/// Decodes exactly `count` symbols of a stream [`encode`] wrote with the same alphabet and
/// contexts. Any damage (a table that does not sum to the total, a symbol in a context without
/// a table, a stream cut short or with bytes left over, an end state other than the encoder's
/// start) is [`Error::Decode`], never a panic.
pub fn decode(stream: &[u8], alphabet: usize, count: usize, contexts: &[u8], n_contexts: usize, run: usize) -> Result<Vec<u8>> {
    check_shape(count, alphabet, contexts, n_contexts, run)?;
    let mut pos = 0;
    let tables = (0..n_contexts).map(|_| get_table(stream, &mut pos, alphabet)).collect::<Result<Vec<_>>>()?;
    if count == 0 {
        return if pos == stream.len() { Ok(Vec::new()) } else { Err(bad("bytes for no symbols".into())) };
    }
    let head = stream.get(pos..pos + 4).ok_or_else(|| bad("no state".into()))?;
    let mut x = u32::from_le_bytes(head.try_into().expect("four bytes"));
    pos += 4;
    let mut out = vec![0u8; count];
    // A run of symbols at a time, each with its context's table (no division per symbol).
    for (chunk, &c) in out.chunks_mut(run).zip(contexts) {
        let c = c as usize;
        let t = tables[c].as_ref().ok_or_else(|| bad(format!("a symbol in context {c}, which has no table")))?;
        for o in chunk.iter_mut() {
            let slot = x & (TOTAL - 1);
            let s = t.slot_symbol[slot as usize] as usize;
            // At most 2^14 · (2^18 − 1) + 2^14 − 1 < 2^32: no overflow whatever the state.
            x = t.freq[s] * (x >> PROB_BITS) + slot - t.cum[s];
            while x < L {
                let b = *stream.get(pos).ok_or_else(|| bad("cut short".into()))?;
                x = (x << 8) | b as u32;
                pos += 1;
            }
            *o = s as u8;
        }
    }
    if x != L || pos != stream.len() {
        return Err(bad(format!("damaged: end state {x:#x} with {} of {} bytes read", pos, stream.len())));
    }
    Ok(out)
}

/// [`encode`] with one table for every symbol.
pub fn encode_plain(symbols: &[u8], alphabet: usize) -> Vec<u8> {
    encode(symbols, alphabet, &[0], 1, symbols.len().max(1)).expect("symbols below the alphabet")
}

/// [`decode`] with one table for every symbol.
pub fn decode_plain(stream: &[u8], alphabet: usize, count: usize) -> Result<Vec<u8>> {
    decode(stream, alphabet, count, &[0], 1, count.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::random_f32;

    fn skewed(seed: u64, n: usize, alphabet: usize) -> Vec<u8> {
        // A peaked distribution, like a group's levels around its middle.
        random_f32(seed, n)
            .iter()
            .map(|v| ((v * alphabet as f32 / 4.0) + alphabet as f32 / 2.0).clamp(0.0, alphabet as f32 - 1.0) as u8)
            .collect()
    }

    fn entropy_bits(symbols: &[u8], alphabet: usize) -> f64 {
        let mut c = vec![0f64; alphabet];
        symbols.iter().for_each(|&s| c[s as usize] += 1.0);
        let n = symbols.len() as f64;
        c.iter().filter(|&&v| v > 0.0).map(|&v| -v * (v / n).log2()).sum()
    }

    #[test]
    fn streams_round_trip_near_their_entropy() {
        for (alphabet, n) in [(4, 10_000), (8, 30_000), (16, 100_000), (256, 50_000)] {
            let symbols = skewed(alphabet as u64, n, alphabet);
            let stream = encode_plain(&symbols, alphabet);
            assert_eq!(decode_plain(&stream, alphabet, n).unwrap(), symbols, "{alphabet} symbols");
            let ideal = entropy_bits(&symbols, alphabet) / 8.0;
            assert!((stream.len() as f64) < ideal * 1.01 + 300.0, "{alphabet}: {} bytes, entropy {ideal:.0}", stream.len());
        }
    }

    #[test]
    fn degenerate_streams_round_trip() {
        for symbols in [vec![], vec![3u8], vec![7u8; 5000], vec![0, 255, 0, 255]] {
            let stream = encode_plain(&symbols, 256);
            assert_eq!(decode_plain(&stream, 256, symbols.len()).unwrap(), symbols);
        }
        // One symbol of a sparse 256-symbol alphabet: the table is a few bytes.
        assert!(encode_plain(&[9u8; 100], 256).len() < 16);
    }

    #[test]
    fn contexts_pick_tables_and_pay_where_distributions_differ() {
        // Runs of 32 symbols whose distribution depends on the run's context, as a group's
        // levels depend on its zero point: one table per context codes them in fewer bytes.
        let (run, runs) = (32, 2000);
        let noise = skewed(9, run * runs, 4);
        let contexts: Vec<u8> = (0..runs).map(|r| (r * 7 % 5) as u8).collect();
        let symbols: Vec<u8> = noise.iter().enumerate().map(|(i, &v)| v + 3 * contexts[i / run]).collect();
        let stream = encode(&symbols, 16, &contexts, 5, run).unwrap();
        assert_eq!(decode(&stream, 16, symbols.len(), &contexts, 5, run).unwrap(), symbols);
        assert!(stream.len() < encode_plain(&symbols, 16).len() * 3 / 4);
        // The wrong contexts do not decode to the symbols; a context without a table is an error.
        let shifted: Vec<u8> = contexts.iter().map(|&c| (c + 1) % 5).collect();
        assert!(decode(&stream, 16, symbols.len(), &shifted, 5, run).map_or(true, |d| d != symbols));
        let only_first = encode(&symbols[..run], 16, &contexts, 5, run).unwrap();
        assert!(decode(&only_first, 16, run, &[1], 5, run).is_err());
        assert!(encode(&symbols, 16, &contexts, 4, run).is_err(), "context over n_contexts");
        assert!(encode(&symbols, 16, &contexts[..10], 5, run).is_err(), "too few contexts");
        assert!(encode(&[16], 16, &[0], 1, 1).is_err(), "symbol over the alphabet");
    }

    #[test]
    fn damaged_streams_are_errors() {
        let symbols = skewed(5, 4000, 16);
        let stream = encode_plain(&symbols, 16);
        assert!(decode_plain(&stream, 16, symbols.len() + 1).is_err(), "one symbol too many");
        assert!(decode_plain(&stream[..stream.len() - 1], 16, symbols.len()).is_err(), "cut short");
        let mut longer = stream.clone();
        longer.push(0);
        assert!(decode_plain(&longer, 16, symbols.len()).is_err(), "a byte left over");
        let mut flipped = 0;
        for i in (0..stream.len()).step_by(7) {
            let mut s = stream.clone();
            s[i] ^= 0x10;
            match decode_plain(&s, 16, symbols.len()) {
                Err(_) => flipped += 1,
                Ok(back) => assert_ne!(back, symbols, "byte {i} changed and nothing noticed"),
            }
        }
        assert!(flipped > 0);
        assert!(decode_plain(&[0xff, 0xff, 0xff, 0xff, 0xff], 16, 3).is_err());
        assert!(decode_plain(&[], 16, 3).is_err());
        assert!(decode_plain(&stream, 0, 3).is_err());
    }
}
