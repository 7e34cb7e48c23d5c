//! The `weft` command line: native GPU tooling over the same library the browser uses.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> anyhow::Result<()> {
    cli::main()
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use anyhow::{bail, Context};
    use clap::{Parser, Subcommand};
    use weft::gpu::{BackendChoice, GpuContext};

    #[derive(Parser)]
    #[command(name = "weft", version, about = "Quantized neural networks on WebGPU")]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Print the GPU adapter, its features and the limits weft requested.
        Caps {
            /// Print JSON instead of a table.
            #[arg(long)]
            json: bool,
        },
        /// Run the tiled matmul on seeded random data and compare with the CPU reference.
        Selftest {
            #[arg(long, default_value_t = 7)]
            seed: u64,
            #[arg(long, default_value_t = 67)]
            m: usize,
            #[arg(long, default_value_t = 129)]
            k: usize,
            #[arg(long, default_value_t = 45)]
            n: usize,
        },
    }

    fn context() -> anyhow::Result<GpuContext> {
        let choice = BackendChoice::from_env()?;
        pollster::block_on(GpuContext::new(choice)).context("creating the GPU device")
    }

    pub fn main() -> anyhow::Result<()> {
        let cli = Cli::parse();
        match cli.command {
            Command::Caps { json } => {
                let ctx = context()?;
                let caps = ctx.capabilities();
                if json {
                    println!("{}", serde_json::to_string_pretty(caps)?);
                } else {
                    let value = serde_json::to_value(caps)?;
                    print_table(&value, "");
                }
            }
            Command::Selftest { seed, m, k, n } => {
                let ctx = context()?;
                let report = pollster::block_on(weft::selftest::run(&ctx, seed, m, k, n))?;
                println!("adapter: {}", ctx.capabilities().adapter_name);
                println!("{}", serde_json::to_string_pretty(&report)?);
                if !report.passed {
                    bail!("self-test outside tolerance");
                }
            }
        }
        Ok(())
    }

    fn print_table(value: &serde_json::Value, prefix: &str) {
        if let Some(map) = value.as_object() {
            for (k, v) in map {
                if v.is_object() {
                    print_table(v, &format!("{prefix}{k}."));
                } else {
                    println!("{:<44} {}", format!("{prefix}{k}"), v);
                }
            }
        }
    }
}
