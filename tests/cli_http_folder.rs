//! A Hugging Face folder given to the command line as an http(s) URL ending in `/`, as the
//! browser's `loadModel` takes one: the Llama 3 fixture folder served by the loopback test
//! server (config.json, tokenizer.json, model.safetensors; the optional files answered with 404)
//! gives every model-taking command what the same folder on disk gives: `generate` the same
//! greedy ids on the GPU and on the CPU backend, `tokenize`, `dump-activations` and `quantize`
//! the same bytes, `inspect` the same tensor table. A folder URL without config.json, and a folder
//! URL given without its final `/`, are errors that say what is missing.

mod common;

use std::path::Path;

use anyhow::{ensure, Context};
use common::cli::{weft, weft_ok};
use common::http::{serve_folder, RequestLog};

const FOLDER: &str = "tests/fixtures/llama3-tiny";
const PROMPT: &str = "The capital of France is";

fn paths(log: &RequestLog) -> Vec<String> {
    log.lock().map(|l| l.iter().map(|(path, _)| path.clone()).collect()).unwrap_or_default()
}

/// A fresh folder for one test's outputs.
fn out_dir(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_http_folder").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[test]
fn generate_from_a_folder_url_gives_the_local_folders_greedy_ids() -> anyhow::Result<()> {
    let (url, log) = serve_folder(Path::new(FOLDER), "llama3-tiny")?;
    let generate = |model: &str, backend: &[&str]| {
        weft_ok(&[&["generate", model, "--prompt", PROMPT, "--ids", "--max-tokens", "8"][..], backend].concat())
    };
    for backend in [&["--backend", "gpu"][..], &["--backend", "cpu", "--threads", "1"]] {
        let local = generate(FOLDER, backend)?;
        let ids: Vec<u32> = local.trim().split(',').map(str::parse).collect::<Result<_, _>>().context(local.clone())?;
        assert_eq!(ids.len(), 8, "{local}");
        assert_eq!(generate(&url, backend)?, local, "{backend:?}");
    }
    let served = paths(&log);
    for file in ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"] {
        assert!(served.contains(&format!("/llama3-tiny/{file}")), "{file} not asked for: {served:?}");
    }
    Ok(())
}

#[test]
fn every_other_model_command_reads_a_folder_url_as_the_local_folder() -> anyhow::Result<()> {
    let (url, _) = serve_folder(Path::new(FOLDER), "llama3-tiny")?;
    let out = out_dir("commands")?;
    let text = out.join("text.txt");
    std::fs::write(&text, "Paris is the capital of France. 1234 ü")?;
    let text = text.display().to_string();
    let tokenize = |model: &str| weft_ok(&["tokenize", model, "--text", &text]);
    let local = tokenize(FOLDER)?;
    assert!(local.trim().split(',').count() > 5, "{local}");
    assert_eq!(tokenize(&url)?, local);

    let cpu = ["--backend", "cpu", "--threads", "1"];
    let perplexity = |model: &str| weft_ok(&[&["perplexity", model, "--text", &text][..], &cpu].concat());
    let local = perplexity(FOLDER)?;
    assert!(local.contains("perplexity: "), "{local}");
    assert_eq!(perplexity(&url)?, local);

    let mut weight_bytes = Vec::new();
    for (model, name) in [(FOLDER, "local"), (url.as_str(), "url")] {
        let dump = out.join(name).display().to_string();
        weft_ok(&[&["dump-activations", model, "--ids", "5,230,118", "--out", &dump][..], &cpu].concat())?;
        let quantized = out.join(format!("{name}.safetensors")).display().to_string();
        weft_ok(&["quantize", model, &quantized, "--bits", "4"])?;
        let bench = weft_ok(&[&["bench", model, "--prompt-len", "4", "--gen", "4", "--reps", "1", "--json"][..], &cpu].concat())?;
        let bench: serde_json::Value = serde_json::from_str(&bench).context(bench)?;
        assert!(bench["decode_tok_s_median"].as_f64().is_some_and(|r| r > 0.0), "{bench}");
        weight_bytes.push(bench["weight_bytes"].as_u64());
    }
    assert!(weight_bytes[0].is_some_and(|b| b > 100_000), "{weight_bytes:?}");
    assert_eq!(weight_bytes[1], weight_bytes[0]);
    let read = |p: std::path::PathBuf| std::fs::read(&p).with_context(|| p.display().to_string());
    let logits = read(out.join("local/logits.npy"))?;
    assert!(logits.len() > 3 * 700 * 4, "{} bytes", logits.len());
    for entry in std::fs::read_dir(out.join("local"))? {
        let name = entry?.file_name();
        assert_eq!(read(out.join("url").join(&name))?, read(out.join("local").join(&name))?, "{name:?}");
    }
    assert_eq!(read(out.join("url.safetensors"))?, read(out.join("local.safetensors"))?);
    Ok(())
}

#[test]
fn inspect_of_a_folder_url_lists_its_weights() -> anyhow::Result<()> {
    let (url, _) = serve_folder(Path::new(FOLDER), "llama3-tiny")?;
    let tensors = |model: &str| -> anyhow::Result<serde_json::Value> {
        let report: serde_json::Value = serde_json::from_str(&weft_ok(&["inspect", model, "--json"])?)?;
        Ok(report["tensors"].clone())
    };
    let file = tensors(&format!("{FOLDER}/model.safetensors"))?;
    assert_eq!(file.as_array().map(Vec::len), Some(21), "{file}");
    assert_eq!(tensors(FOLDER)?, file);
    assert_eq!(tensors(&url)?, file);
    let table = weft(&["inspect", &url])?;
    ensure!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
    let stdout = String::from_utf8(table.stdout)?;
    assert!(stdout.contains("model.layers.1.mlp.down_proj.weight"), "{stdout}");
    let stderr = String::from_utf8(table.stderr)?;
    assert!(stderr.contains("of its weight files in 1 requests"), "{stderr}");
    Ok(())
}

#[test]
fn a_folder_url_without_config_or_without_its_slash_says_what_to_do() -> anyhow::Result<()> {
    let empty = out_dir("empty")?;
    let (url, _) = serve_folder(&empty, "empty")?;
    let out = weft(&["generate", &url, "--prompt", "x", "--backend", "cpu"])?;
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)?;
    assert!(stderr.contains("without config.json"), "{stderr}");

    let (url, _) = serve_folder(Path::new(FOLDER), "llama3-tiny")?;
    let out = weft(&["tokenize", url.trim_end_matches('/'), "--text", "Cargo.toml"])?;
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)?;
    assert!(stderr.contains("a Hugging Face folder's URL ends in /") && stderr.contains("404"), "{stderr}");
    Ok(())
}
