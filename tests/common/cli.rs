//! Running the `weft` binary from integration tests.

use std::process::{Command, Output};

use anyhow::{ensure, Context};

/// `weft ARGS`, its status and output whatever they are.
pub fn weft(args: &[&str]) -> anyhow::Result<Output> {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .context("running weft")
}

/// `weft ARGS`'s stdout, an error with its stderr when it fails.
pub fn weft_ok(args: &[&str]) -> anyhow::Result<String> {
    let out = weft(args)?;
    ensure!(out.status.success(), "weft {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}
