//! A Hugging Face model folder read through any range reader: `config.json`, the tokenizer
//! files, and the weights in `model.safetensors` or in the shards that
//! `model.safetensors.index.json` names. The shards are joined into one address space (each
//! shard's bytes after the previous shard's), so one header lists every tensor and the loader
//! reads a layer with one request, wherever the layer lies.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::format::{ModelHeader, SafetensorsHeader};
use crate::loader::{read_header, LoadError, RangeReader};
use crate::tokenizer::{HfTokenizerFiles, Tokenizer};

/// The files of one folder, opened by name.
#[allow(async_fn_in_trait)]
pub trait FolderSource {
    type Reader: RangeReader;

    /// The folder's path or URL, for messages.
    fn name(&self) -> &str;

    /// The file `name` of the folder; `Ok(None)` when the folder has no such file.
    async fn open(&self, name: &str) -> Result<Option<Self::Reader>>;
}

/// Shards read as one file: shard `i`'s byte `b` is at `starts[i] + b`.
pub struct Shards<R> {
    name: String,
    parts: Vec<(u64, R)>,
    len: u64,
}

impl<R: RangeReader> Shards<R> {
    pub fn new(name: String, readers: Vec<R>) -> Self {
        let mut start = 0;
        let parts = readers
            .into_iter()
            .map(|r| {
                let at = start;
                start += r.len();
                (at, r)
            })
            .collect();
        Self { name, parts, len: start }
    }

    /// The shards' readers, in order.
    pub fn readers(&self) -> impl Iterator<Item = &R> {
        self.parts.iter().map(|(_, r)| r)
    }
}

impl<R: RangeReader> RangeReader for Shards<R> {
    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> &str {
        &self.name
    }

    /// One read per shard the range touches (one for every layer that lies in one shard).
    async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        if range.start > range.end || range.end > self.len {
            let (start, end, len) = (range.start, range.end, self.len);
            return Err(LoadError::OutOfRange { source_name: self.name.clone(), start, end, len }.into());
        }
        // Within one shard, that shard's read as it is: no copy of a layer's bytes.
        if let Some((at, reader)) = self.parts.iter().find(|(at, r)| *at <= range.start && range.end <= at + r.len()) {
            return reader.read_range(range.start - at..range.end - at).await;
        }
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        for (at, reader) in &self.parts {
            let (lo, hi) = (range.start.max(*at), range.end.min(at + reader.len()));
            if lo < hi {
                out.extend_from_slice(&reader.read_range(lo - at..hi - at).await?);
            }
        }
        Ok(out)
    }
}

/// What a folder holds, read: the texts of its small files, its tokenizer, and the weights'
/// reader and joined header.
pub struct HfFolder<R> {
    pub config_json: String,
    pub tokenizer: Tokenizer,
    pub reader: Shards<R>,
    pub header: ModelHeader,
}

/// The whole of a small file; None where the folder lacks it.
async fn text<S: FolderSource>(source: &S, name: &str) -> Result<Option<String>> {
    let Some(reader) = source.open(name).await? else { return Ok(None) };
    let bytes = reader.read_range(0..reader.len()).await?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Error::Model(format!("{}/{name} is not UTF-8 text", source.name())))
}

async fn required<S: FolderSource>(source: &S, name: &str) -> Result<String> {
    text(source, name).await?.ok_or_else(|| Error::UnsupportedModel {
        what: format!("{} without {name}", source.name()),
        hint: "a Hugging Face model folder has config.json, tokenizer.json and model.safetensors \
               (or model.safetensors.index.json and its shards)"
            .into(),
    })
}

/// The shard files an index names, each once, in the order of their names
/// (`model-00001-of-00002.safetensors` first).
pub fn shard_names(index_json: &str) -> Result<Vec<String>> {
    let index: serde_json::Value =
        serde_json::from_str(index_json).map_err(|e| Error::Model(format!("model.safetensors.index.json: {e}")))?;
    let map = index
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| Error::Model("model.safetensors.index.json has no weight_map".into()))?;
    let mut names: Vec<String> = Vec::new();
    for file in map.values() {
        let file = file.as_str().ok_or_else(|| Error::Model("model.safetensors.index.json: a weight_map value is not a file name".into()))?;
        // A name is a file of this folder, never a path out of it.
        if file.contains('/') || file.contains('\\') || file.starts_with('.') {
            return Err(Error::Model(format!("model.safetensors.index.json names '{file}', not a file of the folder")));
        }
        // In name order, each once.
        if let Err(at) = names.binary_search_by(|n| n.as_str().cmp(file)) {
            names.insert(at, file.to_string());
        }
    }
    Ok(names)
}

/// The shards' headers as one: every tensor's range moved to where its shard starts, the
/// metadata of all of them.
fn join_headers(headers: Vec<SafetensorsHeader>, starts: &[u64]) -> SafetensorsHeader {
    let mut joined = SafetensorsHeader { header_len: 0, data_start: 0, tensors: Vec::new(), metadata: BTreeMap::new() };
    for (i, (h, &at)) in headers.into_iter().zip(starts).enumerate() {
        if i == 0 {
            (joined.header_len, joined.data_start) = (h.header_len, h.data_start);
        }
        joined.metadata.extend(h.metadata);
        joined.tensors.extend(h.tensors.into_iter().map(|mut t| {
            t.range = t.range.start + at..t.range.end + at;
            t
        }));
    }
    crate::order::sort_by_key(&mut joined.tensors, |t| (t.range.start, 0));
    joined
}

/// Reads the folder's small files and every weight file's header (nothing of the weights).
pub async fn read_folder<S: FolderSource>(source: &S) -> Result<HfFolder<S::Reader>> {
    let config_json = required(source, "config.json").await?;
    let tokenizer_json = required(source, "tokenizer.json").await?;
    let tokenizer_config = text(source, "tokenizer_config.json").await?;
    let template = text(source, "chat_template.jinja").await?;
    let generation = text(source, "generation_config.json").await?;
    let tokenizer = Tokenizer::from_hf_files(&HfTokenizerFiles {
        tokenizer_json: &tokenizer_json,
        tokenizer_config: tokenizer_config.as_deref(),
        chat_template_jinja: template.as_deref(),
        generation_config: generation.as_deref(),
        config: Some(&config_json),
    })?;
    let files = match text(source, "model.safetensors.index.json").await? {
        Some(index) => shard_names(&index)?,
        None => vec!["model.safetensors".to_string()],
    };
    let (mut readers, mut headers, mut starts) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    for file in &files {
        let reader = source.open(file).await?.ok_or_else(|| Error::UnsupportedModel {
            what: format!("{} without {file}", source.name()),
            hint: "the folder needs model.safetensors or the shards its index names".into(),
        })?;
        match read_header(&reader).await?.header {
            ModelHeader::Safetensors(h) => headers.push(h),
            ModelHeader::Gguf(_) => return Err(Error::Model(format!("{}/{file} is a GGUF file, not safetensors", source.name()))),
        }
        starts.push(at);
        at += reader.len();
        readers.push(reader);
    }
    let header = ModelHeader::Safetensors(join_headers(headers, &starts));
    Ok(HfFolder { config_json, tokenizer, reader: Shards::new(source.name().to_string(), readers), header })
}

/// A folder on this machine.
#[cfg(not(target_arch = "wasm32"))]
pub struct Directory(pub std::path::PathBuf);

#[cfg(not(target_arch = "wasm32"))]
impl FolderSource for Directory {
    type Reader = crate::loader::native::FileReader;

    fn name(&self) -> &str {
        self.0.to_str().unwrap_or("(folder)")
    }

    async fn open(&self, name: &str) -> Result<Option<Self::Reader>> {
        let path = self.0.join(name);
        if !path.is_file() {
            return Ok(None);
        }
        crate::loader::native::FileReader::open(path).map(Some)
    }
}

/// A folder served over HTTP(S), as the browser's `loadModel` reads one: each file is the base
/// URL followed by its name, read with Range requests. A 404 is a file the folder lacks, as a
/// missing file of a [`Directory`]; any other failure is the load's error.
#[cfg(not(target_arch = "wasm32"))]
pub struct HttpFolder {
    /// The URL without its final `/`, for messages (which add `/` and a file name).
    name: String,
}

#[cfg(not(target_arch = "wasm32"))]
impl HttpFolder {
    /// The folder at `url` (`https://huggingface.co/ORG/NAME/resolve/main/`, or a folder of any
    /// server), with or without its final `/`.
    pub fn new(url: &str) -> Self {
        Self { name: url.trim_end_matches('/').to_string() }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl FolderSource for HttpFolder {
    type Reader = crate::loader::native::HttpReader;

    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self, name: &str) -> Result<Option<Self::Reader>> {
        match crate::loader::native::HttpReader::open(&format!("{}/{name}", self.name)) {
            Ok(reader) => Ok(Some(reader)),
            Err(Error::Load(LoadError::Http { status: Some(404), .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in memory that counts its reads.
    struct Bytes(Vec<u8>, std::cell::Cell<usize>);

    impl RangeReader for Bytes {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn name(&self) -> &str {
            "bytes"
        }
        async fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
            self.1.set(self.1.get() + 1);
            Ok(self.0[range.start as usize..range.end as usize].to_vec())
        }
    }

    #[test]
    fn a_read_across_shards_reads_each_once() {
        let parts = vec![Bytes((0..10).collect(), Default::default()), Bytes((10..25).collect(), Default::default())];
        let shards = Shards::new("s".into(), parts);
        assert_eq!(shards.len(), 25);
        assert_eq!(pollster::block_on(shards.read_range(7..13)).unwrap(), (7..13).collect::<Vec<u8>>());
        assert_eq!(pollster::block_on(shards.read_range(12..20)).unwrap(), (12..20).collect::<Vec<u8>>());
        let reads: Vec<usize> = shards.readers().map(|r| r.1.get()).collect();
        assert_eq!(reads, [1, 2]);
        assert!(pollster::block_on(shards.read_range(20..26)).is_err());
    }

    #[test]
    fn shard_names_come_once_and_in_order() {
        let index = r#"{"metadata": {}, "weight_map": {"a": "model-00002-of-00002.safetensors",
            "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}}"#;
        assert_eq!(shard_names(index).unwrap(), ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
        assert!(shard_names(r#"{"weight_map": {"a": "../x.safetensors"}}"#).is_err());
        assert!(shard_names(r#"{"weight_map": {"a": "sub/x.safetensors"}}"#).is_err());
    }
}
