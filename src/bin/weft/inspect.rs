//! `weft inspect FILE`: a model file's header — format, metadata and tensor table — read from a
//! path or, with Range requests only, from an http(s) URL; of a Hugging Face folder (a directory,
//! or a URL ending in `/`), its weight files' headers joined, offsets in the shards joined end
//! to end as the loader reads them. With `--tensor NAME --npy OUT`, one tensor decoded to f32
//! instead, reading only the header and that tensor's bytes.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::{json, Value};
use weft::format::{GgufArray, GgufValue, ModelHeader};
use weft::loader::native::NativeSource;
use weft::loader::{read_header, RangeReader};
use weft::model::folder::read_folder;

use crate::tensor_table::{self, TensorRow, TensorTotals};

use weft::format::npy;

/// Arrays longer than this are shown as type, length and their first few items.
const ARRAY_SHOWN_IN_FULL: usize = 8;
const ARRAY_ITEMS_PREVIEWED: usize = 5;
/// Longer strings are cut in the text view (the JSON view keeps them whole).
const STRING_CHARS_SHOWN: usize = 72;

#[derive(Serialize)]
struct MetadataEntry {
    key: String,
    value: Value,
}

#[derive(Serialize)]
struct Report {
    source: String,
    file_len: u64,
    format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alignment: Option<u64>,
    header_len: u64,
    data_start: u64,
    /// In file order, which a JSON object would not keep.
    metadata: Vec<MetadataEntry>,
    tensors: Vec<TensorRow>,
    totals: TensorTotals,
}

/// `--tensor NAME --npy OUT`: one tensor, decoded, instead of the header report.
#[derive(clap::Args, Debug)]
pub struct TensorExport {
    /// Decode this tensor to f32 (needs --npy).
    #[arg(long, requires = "npy")]
    pub tensor: Option<String>,
    /// Write the decoded tensor as a NumPy .npy file: f32, C order, shape outermost first.
    #[arg(long, requires = "tensor")]
    pub npy: Option<PathBuf>,
}

pub fn run(location: &str, json_output: bool, export: &TensorExport) -> anyhow::Result<()> {
    if let Some(source) = crate::backend::folder(location) {
        // The shards' headers joined into one, as the loader reads them.
        let folder = pollster::block_on(read_folder(&source)).with_context(|| format!("reading the folder {location}"))?;
        return show(location, &folder.reader, &folder.header, json_output, export, &|| report_fetched(folder.reader.readers(), " of its weight files"));
    }
    let source = NativeSource::open(location).with_context(|| format!("opening {location}"))?;
    let read = pollster::block_on(read_header(&source)).with_context(|| format!("reading the header of {location}"))?;
    show(location, &source, &read.header, json_output, export, &|| report_fetched([&source], ""))
}

/// The header report, or with `--tensor` that tensor's export; `fetched` reports the traffic.
fn show<R: RangeReader>(
    location: &str,
    source: &R,
    header: &ModelHeader,
    json_output: bool,
    export: &TensorExport,
    fetched: &dyn Fn(),
) -> anyhow::Result<()> {
    if let (Some(name), Some(npy)) = (&export.tensor, &export.npy) {
        return export_tensor(source, header, name, npy, json_output, fetched);
    }
    fetched();
    let report = report(location, source.len(), header);
    if json_output {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, header);
    }
    Ok(())
}

/// Bytes and requests of the readers' HTTP GETs; `of` says what the readers are.
fn report_fetched<'a>(readers: impl IntoIterator<Item = &'a NativeSource>, of: &str) {
    let http: Vec<_> = readers.into_iter().filter_map(|r| if let NativeSource::Http(h) = r { Some(h) } else { None }).collect();
    if !http.is_empty() {
        let bytes: u64 = http.iter().map(|h| h.bytes_fetched()).sum();
        let requests: u64 = http.iter().map(|h| h.requests()).sum();
        eprintln!("fetched {bytes} bytes{of} in {requests} requests");
    }
}

fn export_tensor<R: RangeReader>(
    source: &R,
    header: &ModelHeader,
    name: &str,
    npy: &PathBuf,
    json_output: bool,
    fetched: &dyn Fn(),
) -> anyhow::Result<()> {
    let Some(tensor) = header.tensors().iter().find(|t| t.name == name) else {
        bail!("{}", tensor_table::unknown_tensor_message(name, source.name(), header.tensors()));
    };
    let Ok(elements) = usize::try_from(tensor.elements()) else {
        bail!("{name} has {} elements, more than this machine can address", tensor.elements());
    };
    let bytes = pollster::block_on(source.read_range(tensor.range.clone()))
        .with_context(|| format!("reading the bytes of {name}"))?;
    let values = weft::quant::decode_to_f32(tensor.storage, &bytes, elements)
        .with_context(|| format!("decoding {name}"))?;
    drop(bytes);
    let file = std::fs::File::create(npy).with_context(|| format!("creating {}", npy.display()))?;
    let mut out = std::io::BufWriter::new(file);
    npy::write_f32(&mut out, &tensor.shape, &values)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", npy.display()))?;
    fetched();

    let row = tensor_table::row(tensor);
    if json_output {
        let report = json!({ "tensor": row, "npy": npy.display().to_string(), "values": values.len() });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        tensor_table::print_rows(std::slice::from_ref(&row));
        println!("wrote {} f32 values to {}", values.len(), npy.display());
    }
    Ok(())
}

fn report(location: &str, file_len: u64, header: &ModelHeader) -> Report {
    let rows = tensor_table::rows(header.tensors());
    let totals = tensor_table::totals(&rows);
    let (version, alignment, header_len, metadata) = match header {
        ModelHeader::Gguf(h) => (
            Some(h.version),
            Some(h.alignment),
            h.header_len,
            h.metadata.entries.iter().map(|(k, v)| MetadataEntry { key: k.clone(), value: gguf_json(v) }).collect(),
        ),
        ModelHeader::Safetensors(h) => (
            None,
            None,
            h.header_len,
            h.metadata.iter().map(|(k, v)| MetadataEntry { key: k.clone(), value: Value::String(v.clone()) }).collect(),
        ),
    };
    Report {
        source: location.to_string(),
        file_len,
        format: header.format_name(),
        version,
        alignment,
        header_len,
        data_start: header.data_start(),
        metadata,
        tensors: rows,
        totals,
    }
}

/// Scalars as JSON values; long arrays as type, length and first items.
fn gguf_json(value: &GgufValue) -> Value {
    match value {
        GgufValue::Array(array) => array_json(array),
        scalar => serde_json::to_value(scalar).unwrap_or(Value::Null),
    }
}

fn array_json(array: &GgufArray) -> Value {
    if array.len() <= ARRAY_SHOWN_IN_FULL {
        return serde_json::to_value(array).unwrap_or(Value::Null);
    }
    let first: Vec<Value> = (0..ARRAY_ITEMS_PREVIEWED).filter_map(|i| array.get(i)).map(|v| gguf_json(&v)).collect();
    json!({ "element_type": array.element_type_name(), "len": array.len(), "first": first })
}

fn print_report(report: &Report, header: &ModelHeader) {
    println!("file:     {} ({} bytes)", report.source, report.file_len);
    match (report.version, report.alignment) {
        (Some(version), Some(alignment)) => {
            println!("format:   {} v{version}, alignment {alignment}", report.format)
        }
        _ => println!("format:   {}", report.format),
    }
    println!("header:   {} bytes, tensor data from byte {}", report.header_len, report.data_start);
    println!("metadata: {} entries", report.metadata.len());
    let key_width = report.metadata.iter().map(|e| e.key.len()).max().unwrap_or(0);
    match header {
        ModelHeader::Gguf(h) => {
            for (key, value) in &h.metadata.entries {
                println!("  {key:<key_width$}  {:<8} {}", value.type_name(), gguf_text(value));
            }
        }
        ModelHeader::Safetensors(h) => {
            for (key, value) in &h.metadata {
                println!("  {key:<key_width$}  {}", string_text(value));
            }
        }
    }
    println!();
    println!("tensors:  {}", report.tensors.len());
    tensor_table::print(&report.tensors, &report.totals);
}

fn string_text(s: &str) -> String {
    let chars = s.chars().count();
    if chars <= STRING_CHARS_SHOWN {
        return format!("{s:?}");
    }
    let cut: String = s.chars().take(STRING_CHARS_SHOWN).collect();
    format!("{cut:?}… ({chars} chars)")
}

fn gguf_text(value: &GgufValue) -> String {
    match value {
        GgufValue::String(s) => string_text(s),
        GgufValue::Array(array) => {
            let shown = array.len().min(if array.len() <= ARRAY_SHOWN_IN_FULL { ARRAY_SHOWN_IN_FULL } else { ARRAY_ITEMS_PREVIEWED });
            let items: Vec<String> = (0..shown).filter_map(|i| array.get(i)).map(|v| gguf_text(&v)).collect();
            let more = if shown < array.len() { ", …" } else { "" };
            format!("[{} × {}] [{}{more}]", array.element_type_name(), array.len(), items.join(", "))
        }
        GgufValue::F32(v) => format!("{v}"),
        GgufValue::F64(v) => format!("{v}"),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}
