//! Copies shaders/*.wgsl into OUT_DIR, where `wgsl!` (src/lib.rs) embeds them from. For wasm32
//! the copies lose their comments, indentation and blank lines: the shaders' comments say why
//! each kernel is shaped as it is, and carried into the module they cost ~25 KB of its
//! gzipped size, which has a budget (README; blanking them in the built module saved all but
//! ~4 KB of it). Native builds embed the files as written, so
//! shader errors there point at the source's own lines (WEFT_MINIFY_WGSL=1 minifies them too, to
//! run the native tests on what the browser gets). WGSL has no string literals, so `//` always
//! starts a comment.
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=WEFT_MINIFY_WGSL");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("shaders");
    fs::create_dir_all(&out).expect("create OUT_DIR/shaders");
    let strip = env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") || env::var("WEFT_MINIFY_WGSL").as_deref() == Ok("1");
    for entry in fs::read_dir("shaders").expect("read shaders/") {
        let path = entry.expect("shaders/ entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("read a shader");
        let text = if strip { minify(&text) } else { text };
        fs::write(out.join(path.file_name().expect("file name")), text).expect("write a shader");
    }
}

fn minify(text: &str) -> String {
    let mut out = String::with_capacity(text.len() / 2);
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("").trim();
        if !code.is_empty() {
            out.push_str(code);
            out.push('\n');
        }
    }
    out
}
