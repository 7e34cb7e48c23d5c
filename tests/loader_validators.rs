//! The native HTTP reader against servers that lie: a file that changes between requests, a
//! Content-Range total that is not the file's, a body longer than asked for, a stalled body.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft::loader::native::HttpReader;
use weft::loader::{LoadError, RangeReader};

/// One request as the server saw it: its Range (start, inclusive end) and If-Range.
#[derive(Clone, Debug)]
struct Seen {
    range: Option<(u64, u64)>,
    if_range: Option<String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Serves sequential connections; `answer(n, request)` writes the whole response of the n-th.
fn serve(answer: impl Fn(usize, &Seen, &mut dyn Write) + Send + 'static) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/model.bin", listener.local_addr().expect("addr"));
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let seen_log = log.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().flatten().enumerate() {
            let Ok(read_half) = stream.try_clone() else { continue };
            let mut reader = BufReader::new(read_half);
            let mut seen = Seen { range: None, if_range: None };
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("range: bytes=") {
                    seen.range = v.trim().split_once('-').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                }
                if lower.starts_with("if-range:") {
                    seen.if_range = Some(line["if-range:".len()..].trim().to_string());
                }
            }
            if let Ok(mut l) = seen_log.lock() {
                l.push(seen.clone());
            }
            let mut out = stream;
            answer(n, &seen, &mut out);
            let _ = out.flush();
        }
    });
    (url, log)
}

fn file(len: usize, version: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ version).collect()
}

/// A 206 for `seen`'s range of `body`, with `etag`, claiming `total` as the file's length.
fn partial(out: &mut dyn Write, body: &[u8], seen: &Seen, etag: &str, total: usize, extra: usize) {
    let (start, end) = seen.range.expect("a range request");
    let end = (end as usize).min(body.len() - 1);
    let start = start as usize;
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{end}/{total}\r\nETag: {etag}\r\nConnection: close\r\n\r\n",
        end + 1 - start + extra
    );
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&body[start..=end]);
    let _ = out.write_all(&vec![0x5a; extra]);
}

fn changed(result: weft::Result<Vec<u8>>) -> bool {
    matches!(result, Err(weft::Error::Load(LoadError::Changed { .. })))
}

#[test]
fn a_file_changed_after_the_first_read_is_an_error_not_a_mix() {
    let (a, b) = (file(3_000_000, 0), file(3_000_000, 0xff));
    let (url, log) = serve(move |n, seen, out| {
        // The first response is version A, every later one version B, with its own ETag; a
        // matching If-Range is honoured, a stale one gets the whole new file.
        let (body, tag) = if n == 0 { (&a, "\"a\"") } else { (&b, "\"b\"") };
        if seen.if_range.as_deref().is_some_and(|t| t != tag) {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: {tag}\r\nConnection: close\r\n\r\n", body.len());
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(body);
        } else {
            partial(out, body, seen, tag, body.len(), 0);
        }
    });
    let reader = HttpReader::open(&url).expect("open");
    assert_eq!(reader.len(), 3_000_000);
    let later = pollster::block_on(reader.read_range(2_000_000..2_001_000));
    assert!(changed(later), "a new version must not be read as the old one");
    let log = log.lock().expect("log").clone();
    assert_eq!(log[1].if_range.as_deref(), Some("\"a\""), "later ranges name the first version: {log:?}");
}

#[test]
fn a_content_range_total_that_is_not_the_files_is_a_change() {
    let a = file(3_000_000, 0);
    let (url, _) = serve(move |n, seen, out| {
        // Same ETag (a server that does not tag versions), but the file grew.
        let total = if n == 0 { a.len() } else { a.len() + 100 };
        partial(out, &a, seen, "\"same\"", total, 0);
    });
    let reader = HttpReader::open(&url).expect("open");
    assert!(changed(pollster::block_on(reader.read_range(2_000_000..2_000_010))));
}

#[test]
fn a_body_longer_than_asked_for_is_not_read_past_the_range() {
    let a = file(3_000_000, 0);
    let (url, _) = serve(move |n, seen, out| {
        // After the opening read, every range comes with a megabyte more than its length.
        partial(out, &a, seen, "\"a\"", a.len(), if n == 0 { 0 } else { 1 << 20 });
    });
    let reader = HttpReader::open(&url).expect("open");
    let r = pollster::block_on(reader.read_range(2_000_000..2_000_100));
    assert!(matches!(r, Err(weft::Error::Load(LoadError::Http { status: Some(206), .. }))), "{r:?}");
    assert!(reader.bytes_fetched() < 2 << 20, "read {} bytes", reader.bytes_fetched());
}

#[test]
fn a_stalled_body_times_out() {
    let a = file(3_000_000, 0);
    let (url, _) = serve(move |n, seen, out| {
        if n == 0 {
            partial(out, &a, seen, "\"a\"", a.len(), 0);
        } else {
            // Headers and a few bytes, then nothing.
            let head = "HTTP/1.1 206 Partial Content\r\nContent-Length: 100\r\nContent-Range: bytes 2000000-2000099/3000000\r\nETag: \"a\"\r\n\r\nabc";
            let _ = out.write_all(head.as_bytes());
            let _ = out.flush();
            std::thread::sleep(Duration::from_secs(5));
        }
    });
    let reader = HttpReader::open_with_timeout(&url, Duration::from_millis(500)).expect("open");
    let started = Instant::now();
    let r = pollster::block_on(reader.read_range(2_000_000..2_000_100));
    assert!(r.is_err(), "a stalled body cannot be a result");
    assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
}
