//! A minimal HTTP server on loopback for reader tests: Range requests answered with 206, or the
//! whole body (servers that ignore Range), or a wrong Content-Range.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, PartialEq)]
pub enum ServerMode {
    Ranges,
    WholeBody,
    WrongContentRange,
}

/// The Range header value of each request served (None where it had none).
pub type RangeLog = Arc<Mutex<Vec<Option<String>>>>;

/// Serves `body` at any path to sequential connections; returns the URL and the Range
/// headers it saw.
pub fn serve(body: Vec<u8>, mode: ServerMode) -> anyhow::Result<(String, RangeLog)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/model.gguf", listener.local_addr()?);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let range = answer(stream, &body, mode);
            log.lock().map(|mut l| l.push(range)).ok();
        }
    });
    Ok((url, seen))
}

fn answer(mut stream: TcpStream, body: &[u8], mode: ServerMode) -> Option<String> {
    let mut range = None;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
            range = Some(value.trim().to_string());
        }
    }
    let parsed = range.as_ref().and_then(|r| {
        let (s, e) = r.split_once('-')?;
        let start: usize = s.parse().ok()?;
        let end: usize = e.parse::<usize>().ok()?.min(body.len() - 1);
        Some((start, end))
    });
    let response = match (mode, parsed) {
        (ServerMode::Ranges | ServerMode::WrongContentRange, Some((start, end))) => {
            let shown_start = if mode == ServerMode::WrongContentRange { start + 1 } else { start };
            let mut head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {shown_start}-{end}/{}\r\nConnection: close\r\n\r\n",
                end + 1 - start,
                body.len()
            )
            .into_bytes();
            head.extend_from_slice(&body[start..=end]);
            head
        }
        _ => {
            let mut head =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
            head.extend_from_slice(body);
            head
        }
    };
    stream.write_all(&response).ok()?;
    range
}

