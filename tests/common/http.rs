//! A minimal HTTP server on loopback for reader tests: Range requests answered with 206, or the
//! whole body (servers that ignore Range), or a wrong Content-Range; serving one body at any
//! path, or the files of a folder by path (404 for what the folder lacks).

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, PartialEq)]
pub enum ServerMode {
    Ranges,
    WholeBody,
    WrongContentRange,
}

/// The Range header value of each request served (None where it had none).
pub type RangeLog = Arc<Mutex<Vec<Option<String>>>>;

/// The path and Range header value of each request a folder server answered.
pub type RequestLog = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Serves `body` at any path to sequential connections; returns the URL and the Range
/// headers it saw.
pub fn serve(body: Vec<u8>, mode: ServerMode) -> anyhow::Result<(String, RangeLog)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/model.gguf", listener.local_addr()?);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut logged = false;
            answer(stream, |_| Some(Cow::Borrowed(&body[..])), mode, |_, range| {
                log.lock().map(|mut l| l.push(range.map(str::to_string))).ok();
                logged = true;
            });
            if !logged {
                log.lock().map(|mut l| l.push(None)).ok();
            }
        }
    });
    Ok((url, seen))
}

/// Serves the files of `dir` (symbolic links followed) under `/NAME/`, with Range requests;
/// returns the folder's URL, ending in `/`, and the requests it saw.
pub fn serve_folder(dir: &Path, name: &str) -> anyhow::Result<(String, RequestLog)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/{name}/", listener.local_addr()?);
    let (dir, prefix) = (dir.to_path_buf(), format!("/{name}/"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let file = |path: &str| std::fs::read(file_of(&dir, path.strip_prefix(&prefix)?)?).ok().map(Cow::Owned);
            answer(stream, file, ServerMode::Ranges, |path, range| {
                log.lock().map(|mut l| l.push((path.to_string(), range.map(str::to_string)))).ok();
            });
        }
    });
    Ok((url, seen))
}

/// A file name of the folder, never a path out of it.
fn file_of(dir: &Path, name: &str) -> Option<PathBuf> {
    let name = Path::new(name);
    name.components().all(|c| matches!(c, Component::Normal(_))).then(|| dir.join(name)).filter(|p| p.is_file())
}

/// Reads one request, passes its path and Range to `record` before answering (so a client that
/// got its answer finds the request logged), and answers with the body `file` gives for its
/// path (404 for None). Returns None where reading or answering failed.
fn answer<'a>(
    mut stream: TcpStream,
    file: impl Fn(&str) -> Option<Cow<'a, [u8]>>,
    mode: ServerMode,
    record: impl FnOnce(&str, Option<&str>),
) -> Option<()> {
    let (mut path, mut range) = (String::new(), None);
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
        if path.is_empty() {
            path = line.split(' ').nth(1).unwrap_or_default().to_string();
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
            range = Some(value.trim().to_string());
        }
    }
    record(&path, range.as_deref());
    let Some(body) = file(&path) else {
        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").ok()?;
        return Some(());
    };
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
            head.extend_from_slice(&body);
            head
        }
    };
    stream.write_all(&response).ok()?;
    Some(())
}
