//! `weft selftest`: the seeded matmul against the CPU reference.

use anyhow::bail;

pub fn run(seed: u64, m: usize, k: usize, n: usize) -> anyhow::Result<()> {
    let ctx = crate::cli::context()?;
    let report = pollster::block_on(weft::selftest::run(&ctx, seed, m, k, n))?;
    println!("adapter: {}", ctx.capabilities().adapter_name);
    println!("{}", serde_json::to_string_pretty(&report)?);
    if !report.passed {
        bail!("self-test outside tolerance");
    }
    Ok(())
}
