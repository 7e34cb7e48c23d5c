//! The `weft` command line: native GPU tooling over the same library the browser uses.

#[cfg(not(target_arch = "wasm32"))]
mod caps;
#[cfg(not(target_arch = "wasm32"))]
mod inspect;
#[cfg(not(target_arch = "wasm32"))]
mod selftest;
#[cfg(not(target_arch = "wasm32"))]
mod tensor_table;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> anyhow::Result<()> {
    cli::main()
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use anyhow::Context;
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
        /// Print the header of a GGUF or safetensors file: format, metadata and tensors.
        Inspect {
            /// A file path, or an http(s) URL (only the header is fetched, with Range requests).
            file: String,
            /// Print JSON instead of tables.
            #[arg(long)]
            json: bool,
        },
    }

    pub(crate) fn context() -> anyhow::Result<GpuContext> {
        let choice = BackendChoice::from_env()?;
        pollster::block_on(GpuContext::new(choice)).context("creating the GPU device")
    }

    pub fn main() -> anyhow::Result<()> {
        let cli = Cli::parse();
        match cli.command {
            Command::Caps { json } => crate::caps::run(json),
            Command::Selftest { seed, m, k, n } => crate::selftest::run(seed, m, k, n),
            Command::Inspect { file, json } => crate::inspect::run(&file, json),
        }
    }
}
