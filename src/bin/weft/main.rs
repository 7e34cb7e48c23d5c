//! The `weft` command line: native GPU tooling over the same library the browser uses.

#[cfg(not(target_arch = "wasm32"))]
mod backend;
#[cfg(not(target_arch = "wasm32"))]
mod bench;
#[cfg(not(target_arch = "wasm32"))]
mod calibrate;
#[cfg(not(target_arch = "wasm32"))]
mod caps;
#[cfg(not(target_arch = "wasm32"))]
mod dequantize;
mod dtype_table;
#[cfg(not(target_arch = "wasm32"))]
mod dump;
#[cfg(not(target_arch = "wasm32"))]
mod embed;
#[cfg(not(target_arch = "wasm32"))]
mod generate;
#[cfg(not(target_arch = "wasm32"))]
mod inspect;
#[cfg(not(target_arch = "wasm32"))]
#[cfg(not(target_arch = "wasm32"))]
mod pack;
mod perplexity;
#[cfg(not(target_arch = "wasm32"))]
mod quantize;
#[cfg(not(target_arch = "wasm32"))]
mod selftest;
#[cfg(not(target_arch = "wasm32"))]
mod shaders;
#[cfg(not(target_arch = "wasm32"))]
mod tensor_table;
#[cfg(not(target_arch = "wasm32"))]
mod tokenize;

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

    /// What every command that runs a model takes.
    const MODEL_HELP: &str = "A GGUF or weft file (path or http(s) URL) or a Hugging Face folder \
        (config.json, tokenizer.json, model.safetensors or its shards): a directory, or an http(s) \
        URL ending in / (https://huggingface.co/ORG/NAME/resolve/main/)";

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
        /// Write every shader variant weft may compile, preprocessed, into one JSON file (for
        /// checking them with other WGSL compilers: tests/tint/check.mjs).
        Shaders {
            /// The JSON file to write: [{ name, wgsl }, ...].
            out: String,
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
        /// Generate text from a prompt, streamed to stdout.
        Generate {
            #[arg(help = MODEL_HELP)]
            model: String,
            #[arg(long)]
            prompt: String,
            #[arg(long, default_value_t = 128)]
            max_tokens: usize,
            #[command(flatten)]
            sampling: crate::backend::SamplingFlags,
            /// Wrap the prompt in the model's chat template.
            #[arg(long)]
            chat: bool,
            /// Print where the load went, phase by phase, on stderr (GPU backend).
            #[arg(long)]
            verbose: bool,
            /// Print token ids instead of text.
            #[arg(long)]
            ids: bool,
            /// Context length the KV cache holds; past it, attention slides over the last max_seq tokens.
            #[arg(long, default_value_t = 2048)]
            max_seq: usize,
            /// KV-cache storage: f32, f16 or q8.
            #[arg(long, default_value = "f32")]
            kv: weft::model::KvFormat,
            /// Past max_seq, how many first tokens stay in the attention window (0: the last max_seq only).
            #[arg(long, default_value_t = 4)]
            sinks: usize,
            /// The decode step's GEMVs with 8-bit activations and integer dot products (GPU
            /// kernels; the JS API's `activations: 'int8'`).
            #[arg(long)]
            int8_activations: bool,
            /// gpu (wgpu: Vulkan or GL) or cpu (no GPU needed).
            #[arg(long, value_enum, default_value = "gpu")]
            backend: crate::backend::Backend,
            #[command(flatten)]
            cpu: crate::backend::CpuFlags,
            #[command(flatten)]
            load: crate::backend::LoadFlags,
        },
        /// Quantize a GGUF file or Hugging Face folder into a self-contained weft safetensors file.
        Quantize {
            /// A GGUF file or a Hugging Face folder: a path, or an http(s) URL (a folder's ends in /).
            input: String,
            output: String,
            #[arg(long, default_value_t = 4)]
            bits: u32,
            #[arg(long, default_value_t = 32)]
            group: u32,
            /// sym (scale only), asym (scale and zero point) or k (asym with 8-bit scale and zero codes, 2-4 bits).
            #[arg(long, default_value = "asym")]
            scheme: String,
            /// PATTERN=BITS for tensors whose name contains PATTERN (BITS 2, 3, 4, 8; 16 or 32 keep floats);
            /// the first matching rule wins. Without any, the default rules apply.
            #[arg(long)]
            keep: Vec<String>,
            /// Quantize every matrix at --bits: no default keep rules.
            #[arg(long)]
            no_default_keep: bool,
            /// Pick each matrix's format to fit this many MB of tensor data, by measured
            /// sensitivity; --keep rules given still fix the tensors they match (the default ones
            /// do not apply).
            #[arg(long)]
            budget_mb: Option<f64>,
            /// Input statistics from `weft calibrate`: rounding error weighted by each column's
            /// input mean square.
            #[arg(long)]
            calibration: Option<String>,
            /// With --calibration: nudge levels so each row's error along the mean input cancels.
            #[arg(long)]
            compensate: bool,
            /// With --calibration from `weft calibrate --hessian`: round by GPTQ, spreading each
            /// column's rounding error over the columns not yet rounded.
            #[arg(long)]
            gptq: bool,
            /// Store the `k` matrices entropy-coded: the same weights in a smaller file, decoded
            /// at load (docs/FORMAT.md).
            #[arg(long)]
            entropy: bool,
        },
        /// Rewrite a weft file with its `k` matrices entropy-coded (what `quantize --entropy`
        /// writes); lossless.
        Pack { input: String, output: String },
        /// Run a model over a calibration text (CPU backend) and store each matrix's input
        /// column statistics for `weft quantize --calibration`.
        Calibrate(crate::calibrate::Args),
        /// Decode every tensor of a model file to f32 into a safetensors file (original names,
        /// model config and tokenizer kept).
        Dequantize { input: String, output: String },
        /// Sentence embeddings of a BERT-family model folder, printed as JSON.
        Embed(crate::embed::Args),
        /// Sentences per second of a BERT-family encoder (tokenization included).
        BenchEmbed(crate::embed::BenchArgs),
        /// Print the token ids of a text file as the model's tokenizer encodes it (no BOS).
        Tokenize {
            #[arg(help = MODEL_HELP)]
            model: String,
            #[arg(long)]
            text: String,
            #[arg(long)]
            json: bool,
        },
        /// Prefill and decode speed on random token ids.
        Bench {
            #[arg(help = MODEL_HELP)]
            model: String,
            #[arg(long, default_value_t = 128)]
            prompt_len: usize,
            #[arg(long, default_value_t = 128)]
            gen: usize,
            #[arg(long, default_value_t = 3)]
            reps: usize,
            /// KV-cache storage: f32, f16 or q8.
            #[arg(long, default_value = "f32")]
            kv: weft::model::KvFormat,
            #[arg(long)]
            json: bool,
            /// Also time one decode step: CPU record/submit vs wait, and each kernel's GPU time
            /// from timestamp queries where the adapter has them.
            #[arg(long)]
            profile: bool,
            /// Keep Q/K/V and gate/up apart and every residual add its own dispatch (to
            /// measure what the fusion buys).
            #[arg(long)]
            no_fuse: bool,
            /// Keep the default GEMV launch shapes instead of timing the candidates at load.
            #[arg(long)]
            no_tune: bool,
            /// Keep the SwiGLU its own dispatch in the decode step (to measure what folding it
            /// into the down projection buys).
            #[arg(long)]
            no_fuse_glu: bool,
            /// Take the SwiGLU in the down projection's staging rather than as the gate/up
            /// GEMV's epilogue (to measure what the epilogue buys).
            #[arg(long)]
            glu_in_down: bool,
            /// Keep the RoPE + KV store and the chunk merge of decode attention dispatches of
            /// their own (to measure what folding them into the attention kernel buys).
            #[arg(long)]
            no_fuse_attention: bool,
            /// Context positions one workgroup of the decode attention kernel covers (64, 128
            /// or 256; default: by head size and context length).
            #[arg(long)]
            attention_chunk: Option<usize>,
            /// KV-cache capacity in tokens (default: the prompt and the generated tokens);
            /// a page's engine reserves more than one reply needs.
            #[arg(long)]
            max_seq: Option<usize>,
            /// Prompt passes' attention one query a workgroup instead of by tiles of queries
            /// against tiles of the cache (to measure what the tiled kernel buys).
            #[arg(long)]
            no_flash_attention: bool,
            /// Wait for each decode step's token before queueing the next (to measure what
            /// queueing one step ahead buys).
            #[arg(long)]
            no_pipeline: bool,
            /// Decode GEMVs of weft weights (and the GGUF types repacked on GPUs) with
            /// 8-bit activations and integer dot products.
            #[arg(long)]
            int8_activations: bool,
            /// With --int8-activations: the down GEMV quantizes its input itself instead of
            /// reading the activation records the SwiGLU epilogue writes.
            #[arg(long)]
            no_activation_records: bool,
            /// The decode GEMVs read their weight's shape from a uniform instead of having it
            /// compiled into their pipelines (to measure what the constants buy).
            #[arg(long)]
            no_constant_shapes: bool,
            /// Prompt passes' matrix products in f32 on the shader cores even where the adapter
            /// has matrix units (to measure what the tensor cores buy).
            #[arg(long)]
            no_matrix_units: bool,
            /// How each decoded token is picked (default greedy; a page's chat samples).
            #[command(flatten)]
            sampling: crate::backend::SamplingFlags,
            /// gpu (wgpu: Vulkan or GL) or cpu (no GPU needed).
            #[arg(long, value_enum, default_value = "gpu")]
            backend: crate::backend::Backend,
            #[command(flatten)]
            cpu: crate::backend::CpuFlags,
            #[command(flatten)]
            load: crate::backend::LoadFlags,
        },
        /// Write every checkpoint of one forward pass over --ids as .npy files.
        DumpActivations {
            #[arg(help = MODEL_HELP)]
            model: String,
            /// Comma-separated token ids.
            #[arg(long)]
            ids: String,
            /// Output folder.
            #[arg(long)]
            out: String,
            /// gpu (wgpu: Vulkan or GL) or cpu (no GPU needed).
            #[arg(long, value_enum, default_value = "gpu")]
            backend: crate::backend::Backend,
            #[command(flatten)]
            cpu: crate::backend::CpuFlags,
            #[command(flatten)]
            load: crate::backend::LoadFlags,
        },
        /// Perplexity of a text file under the model (prints `perplexity: X`).
        Perplexity {
            #[arg(help = MODEL_HELP)]
            model: String,
            #[arg(long)]
            text: String,
            /// Tokens per window (default: the whole text in one window).
            #[arg(long)]
            ctx: Option<usize>,
            /// Write the log-probabilities of every scored position to this file (the base for --kld).
            #[arg(long)]
            save_logits: Option<String>,
            /// f32 or f16 for --save-logits.
            #[arg(long, default_value = "f32")]
            logits_dtype: String,
            /// Compare with a base model's --save-logits file: mean KL divergence, top-1 agreement.
            #[arg(long)]
            kld: Option<String>,
            #[arg(long)]
            json: bool,
            /// Score one token a pass, through the decode step's kernels.
            #[arg(long)]
            decode_path: bool,
            /// With --decode-path: GEMVs of weft weights (and repacked GGUF types) with 8-bit activations.
            #[arg(long)]
            int8_activations: bool,
            /// KV cache storage: f32, f16 or q8.
            #[arg(long, default_value = "f32")]
            kv: weft::model::KvFormat,
            /// gpu (wgpu: Vulkan or GL) or cpu (no GPU needed).
            #[arg(long, value_enum, default_value = "gpu")]
            backend: crate::backend::Backend,
            #[command(flatten)]
            cpu: crate::backend::CpuFlags,
            #[command(flatten)]
            load: crate::backend::LoadFlags,
        },
        /// The numerical-precision study of a CNN: every safetensors dtype (as is and with scales)
        /// and weft's formats, on the GPU and the CPU (docs/MNIST.md).
        DtypeTable(crate::dtype_table::Args),
        /// Print the header of a GGUF or safetensors file or of a Hugging Face folder's weights:
        /// format, metadata and tensors.
        Inspect {
            /// A file path or an http(s) URL (only the header is fetched, with Range requests), or a
            /// Hugging Face folder (a directory, or a URL ending in /): its weight files' headers.
            file: String,
            /// Print JSON instead of tables.
            #[arg(long)]
            json: bool,
            #[command(flatten)] export: crate::inspect::TensorExport,
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
            Command::DtypeTable(args) => crate::dtype_table::run(&args),
            Command::Shaders { out } => crate::shaders::run(&out),
            Command::Selftest { seed, m, k, n } => crate::selftest::run(seed, m, k, n),
            Command::Inspect { file, json, export } => crate::inspect::run(&file, json, &export),
            Command::Perplexity { model, text, ctx, save_logits, logits_dtype, kld, json, decode_path, int8_activations, kv, backend, cpu, load } => {
                crate::perplexity::run(crate::perplexity::Args {
                    model,
                    text,
                    ctx,
                    save_logits,
                    logits_dtype,
                    kld,
                    json,
                    decode_path,
                    int8_activations,
                    kv,
                    backend,
                    cpu,
                    load,
                })
            }
            Command::Embed(args) => crate::embed::run(&args),
            Command::BenchEmbed(args) => crate::embed::bench(&args),
            Command::Dequantize { input, output } => crate::dequantize::run(&input, &output),
            Command::Tokenize { model, text, json } => crate::tokenize::run(&model, &text, json),
            Command::DumpActivations { model, ids, out, backend, cpu, load } => crate::dump::run(&model, &ids, &out, backend, &cpu, &load),
            Command::Calibrate(args) => crate::calibrate::run(&args),
            Command::Quantize { input, output, bits, group, scheme, keep, no_default_keep, budget_mb, calibration, compensate, gptq, entropy } => {
                crate::quantize::run(crate::quantize::Args {
                    input,
                    output,
                    bits,
                    group,
                    scheme,
                    keep,
                    no_default_keep,
                    budget_mb,
                    calibration,
                    compensate,
                    gptq,
                    entropy,
                })
            }
            Command::Pack { input, output } => crate::pack::run(&input, &output),
            Command::Bench { model, prompt_len, gen, reps, kv, json, profile, no_fuse, no_tune, no_fuse_glu, glu_in_down, no_fuse_attention, attention_chunk, max_seq, no_flash_attention, no_pipeline, int8_activations, no_activation_records, no_constant_shapes, no_matrix_units, sampling, backend, cpu, load } => {
                let (fuse, tune) = (!no_fuse, !no_tune);
                let (fuse_glu, pipeline) = (!no_fuse_glu, !no_pipeline);
                crate::bench::run(crate::bench::Args { model, prompt_len, gen, reps, kv, json, profile, fuse, tune, fuse_glu, glu_epilogue: !glu_in_down, fuse_attention: !no_fuse_attention, attention_chunk, max_seq, flash_attention: !no_flash_attention, pipeline, int8_activations, activation_records: !no_activation_records, constant_shapes: !no_constant_shapes, matrix_units: !no_matrix_units, sampling: sampling.params(), backend, cpu, load })
            }
            Command::Generate {
                model,
                prompt,
                max_tokens,
                sampling,
                chat,
                verbose,
                ids,
                max_seq,
                kv,
                sinks,
                int8_activations,
                backend,
                cpu,
                load,
            } => crate::generate::run(crate::generate::Args {
                model,
                prompt,
                max_tokens,
                sampling: sampling.params(),
                chat,
                verbose,
                ids,
                max_seq,
                kv,
                sinks,
                int8_activations,
                backend,
                cpu,
                load,
            }),
        }
    }
}
