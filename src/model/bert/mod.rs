//! BERT-family sentence encoders (all-MiniLM-L6-v2 and its kin): WordPiece ids, the encoder
//! graph (`forward.rs`) run by the CPU backend's pieces (`cpu.rs`) or on the GPU (`gpu.rs`),
//! mean or CLS pooling and L2 normalisation, batched over sequences of different lengths.

pub mod config;
pub mod cpu;
pub mod forward;
pub mod gpu;
pub mod weights;

pub use config::BertConfig;
pub use forward::Pooling;

use std::rc::Rc;
use std::sync::Mutex;

use crate::cpu::kernels::Isa;
use crate::gpu::GpuContext;
use crate::error::{Error, Result};
use crate::loader::RangeReader;
use crate::model::convert::KeepRule;
use crate::model::graph::Checkpoint;
use crate::quant::weft::WeftQuant;
use crate::tokenizer::wordpiece::WordPiece;

use forward::EncodePass;
use gpu::GpuBert;
use weights::BertWeights;

/// The longest input sentence-transformers gives this family (its `max_seq_length`) when the
/// folder does not say otherwise.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Options fixed at load.
#[derive(Clone, Debug)]
pub struct EncoderOptions {
    /// Quantize the block matrices to this weft format while loading (q8, q4); None keeps f32.
    pub quantize: Option<WeftQuant>,
    /// With `quantize`: matrices whose Hugging Face name (`encoder.layer.3.output.dense`)
    /// contains a rule's pattern take its format instead (the first rule that matches; 16 or 32
    /// bits keep f32).
    pub keep: Vec<KeepRule>,
    /// Under a format below 8 bits, the value and up projections stay at q8_g32_sym unless a
    /// `keep` rule names them ([`ENCODER_DEFAULT_KEEP`]), as llama.cpp's `_M` mixes keep the
    /// most sensitive matrices wider. False: every block matrix in the asked format.
    pub default_keep: bool,
    /// Threads per pass; 0: one per available core (in a wasm page with shared memory, the
    /// joined pool workers and the caller).
    pub threads: usize,
    /// Ids per text, `[CLS]` and `[SEP]` included; longer texts are truncated.
    pub max_tokens: usize,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        Self { quantize: None, keep: Vec::new(), default_keep: true, threads: 0, max_tokens: DEFAULT_MAX_TOKENS }
    }
}

/// The matrices whose rounding moves an embedding most (tests/embed_quant.rs: each alone at 8
/// bits in every layer lifted all-MiniLM-L6-v2's simulated minimum cosine from 0.940 to 0.959
/// and 0.960; Q, K or the attention output to at most 0.941). q4_g32_asym everywhere: minimum
/// cosine 0.946 to F32; with these two at q8: 0.981, at 6.46 bits a matrix weight.
pub const ENCODER_DEFAULT_KEEP: [&str; 2] = ["attention.self.value=q8_g32_sym", "intermediate.dense=q8_g32_sym"];

impl EncoderOptions {
    /// The user's rules first, then, under a format below 8 bits, the default ones.
    fn keep_rules(&self) -> Result<Vec<KeepRule>> {
        let mut rules = self.keep.clone();
        if self.default_keep && self.quantize.is_some_and(|q| q.bits < 8) {
            for r in ENCODER_DEFAULT_KEEP {
                rules.push(KeepRule::parse(r)?);
            }
        }
        Ok(rules)
    }
}

/// Options of one `embed` call.
#[derive(Clone, Copy, Debug)]
pub struct EmbedOptions {
    pub pooling: Pooling,
    pub normalize: bool,
    /// Texts per pass.
    pub batch_size: usize,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        Self { pooling: Pooling::Mean, normalize: true, batch_size: 32 }
    }
}

/// The tokenizer file of a model folder.
pub enum TokenizerFile<'a> {
    Json(&'a str),
    VocabTxt { text: &'a str, lowercase: bool },
}

/// Where the encoder's weights live, and so which backend runs its passes.
pub enum Weights {
    Cpu(Box<BertWeights>),
    Gpu { ctx: Rc<GpuContext>, bert: Box<GpuBert> },
}

pub struct Encoder {
    pub config: BertConfig,
    pub tokenizer: WordPiece,
    pub weights: Weights,
    pub options: EncoderOptions,
    isa: Isa,
    /// Phase times of the CPU passes since `start_profile` (native only).
    profile: Option<Mutex<cpu::Profile>>,
}

impl Encoder {
    /// From a model folder's parts: `config.json`'s text, its tokenizer, and `model.safetensors`
    /// through `reader`. `progress(bytes loaded, bytes total)`.
    pub async fn open<R: RangeReader>(
        reader: &R,
        config_json: &str,
        tokenizer: TokenizerFile<'_>,
        options: EncoderOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self> {
        let config = BertConfig::from_hf_json(config_json)?;
        let tokenizer = match tokenizer {
            TokenizerFile::Json(text) => WordPiece::from_tokenizer_json(text)?,
            TokenizerFile::VocabTxt { text, lowercase } => WordPiece::from_vocab_txt(text, lowercase)?,
        };
        if tokenizer.vocab_size() > config.vocab {
            return Err(Error::BadConfig {
                field: "vocab_size".into(),
                problem: format!("is {} but the tokenizer has {} tokens", config.vocab, tokenizer.vocab_size()),
            });
        }
        let weights = weights::load(reader, &config, options.quantize, &options.keep_rules()?, progress).await?;
        let max_tokens = options.max_tokens.clamp(2, config.max_positions);
        let options = EncoderOptions { max_tokens, ..options };
        Ok(Self { config, tokenizer, weights: Weights::Cpu(Box::new(weights)), options, isa: Isa::detect(), profile: None })
    }

    /// Moves the weights to `ctx`'s GPU (in their format: f32, or weft's packed levels), so
    /// passes run there from now on. On an error the encoder keeps its CPU weights.
    pub fn upload(&mut self, ctx: Rc<GpuContext>) -> Result<()> {
        let Weights::Cpu(w) = &self.weights else { return Ok(()) };
        let bert = Box::new(GpuBert::upload(&ctx, &self.config, w)?);
        ctx.check()?;
        self.weights = Weights::Gpu { ctx, bert };
        Ok(())
    }

    /// "gpu" or "cpu".
    pub fn backend(&self) -> &'static str {
        match self.weights {
            Weights::Cpu(_) => "cpu",
            Weights::Gpu { .. } => "gpu",
        }
    }

    /// Bytes the weights take on their device.
    pub fn bytes(&self) -> u64 {
        match &self.weights {
            Weights::Cpu(w) => w.bytes(),
            Weights::Gpu { bert, .. } => bert.bytes(),
        }
    }

    pub fn dim(&self) -> usize {
        self.config.dim
    }

    fn threads(&self) -> usize {
        match self.options.threads {
            0 => crate::cpu::threads::available(),
            n => n,
        }
    }

    /// Times tokenization and every op of the CPU passes from now on (a clean slate each call).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn start_profile(&mut self) {
        self.profile = Some(Mutex::new(cpu::Profile::default()));
    }

    /// The phase times summed since `start_profile`.
    pub fn profile(&self) -> Option<cpu::Profile> {
        self.profile.as_ref().map(|p| p.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The ids of `text` as the encoder reads them.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.options.max_tokens)
    }

    /// One pass over already tokenized sequences: one pooled row each, [n, dim] row-major.
    pub async fn encode_ids_async(&self, seqs: &[Vec<u32>], pooling: Pooling, normalize: bool) -> Result<Vec<f32>> {
        self.run(seqs, EncodePass { pooling, normalize, capture: false }).await.map(|r| r.0)
    }

    /// One embedding per text, `batch_size` texts per pass; `progress(done, total)` after each.
    pub async fn embed_async(&self, texts: &[&str], opts: EmbedOptions, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(opts.batch_size.max(1)) {
            // Only `start_profile` (native) sets the profile, so wasm never reads the clock.
            let start = self.profile.as_ref().map(|_| std::time::Instant::now());
            let seqs: Vec<Vec<u32>> = chunk.iter().map(|t| self.tokenize(t)).collect();
            if let (Some(p), Some(start)) = (&self.profile, start) {
                p.lock().unwrap_or_else(|e| e.into_inner()).add("tokenization", start.elapsed().as_secs_f64(), 0.0);
            }
            let pooled = self.encode_ids_async(&seqs, opts.pooling, opts.normalize).await?;
            out.extend(pooled.chunks_exact(self.config.dim).map(<[f32]>::to_vec));
            progress(out.len(), texts.len());
        }
        Ok(out)
    }

    /// Every hidden state of one text (`hidden.0` the embeddings' output, `hidden.{l}` after
    /// block l), [tokens, dim] each.
    pub async fn hidden_states_async(&self, text: &str) -> Result<Vec<Checkpoint>> {
        let pass = EncodePass { pooling: Pooling::Mean, normalize: false, capture: true };
        self.run(&[self.tokenize(text)], pass).await.map(|r| r.1)
    }

    /// [`Encoder::encode_ids_async`], waited for.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn encode_ids(&self, seqs: &[Vec<u32>], pooling: Pooling, normalize: bool) -> Result<Vec<f32>> {
        pollster::block_on(self.encode_ids_async(seqs, pooling, normalize))
    }

    /// [`Encoder::embed_async`], waited for.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn embed(&self, texts: &[&str], opts: EmbedOptions, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Vec<f32>>> {
        pollster::block_on(self.embed_async(texts, opts, progress))
    }

    /// [`Encoder::hidden_states_async`], waited for.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn hidden_states(&self, text: &str) -> Result<Vec<Checkpoint>> {
        pollster::block_on(self.hidden_states_async(text))
    }

    async fn run(&self, seqs: &[Vec<u32>], pass: EncodePass) -> Result<(Vec<f32>, Vec<Checkpoint>)> {
        if seqs.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut starts = vec![0];
        let mut ids = Vec::new();
        for s in seqs {
            ids.extend_from_slice(s);
            starts.push(ids.len());
        }
        let batch = cpu::Batch { ids: &ids, starts: &starts };
        match &self.weights {
            Weights::Cpu(w) => {
                let ops = forward::forward(&self.config, pass);
                cpu::execute(&self.config, w, self.isa, self.threads(), &ops, &batch, self.profile.as_ref())
            }
            Weights::Gpu { ctx, bert } => bert.run(ctx, &self.config, &batch, pass).await,
        }
    }
}

/// Opens a model folder (config.json, tokenizer.json or vocab.txt, model.safetensors) or the
/// same files under an http(s) base URL, read with Range requests.
#[cfg(not(target_arch = "wasm32"))]
pub fn open_native(location: &str, options: EncoderOptions) -> Result<Encoder> {
    use crate::loader::native::NativeSource;
    let base = location.trim_end_matches('/');
    let remote = base.starts_with("http://") || base.starts_with("https://");
    let text = |name: &str| -> Result<Option<String>> {
        let path = format!("{base}/{name}");
        if remote {
            let reader = NativeSource::open(&path);
            let Ok(reader) = reader else { return Ok(None) };
            let bytes = pollster::block_on(reader.read_range(0..reader.len()))?;
            return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
        }
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Model(format!("{path}: {e}"))),
        }
    };
    let config = text("config.json")?.ok_or_else(|| Error::Model(format!("{base}: no config.json")))?;
    let json = text("tokenizer.json")?;
    let vocab = if json.is_none() { text("vocab.txt")? } else { None };
    let lowercase = text("tokenizer_config.json")?
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["do_lower_case"].as_bool())
        .unwrap_or(true);
    let tokenizer = match (&json, &vocab) {
        (Some(j), _) => TokenizerFile::Json(j),
        (None, Some(v)) => TokenizerFile::VocabTxt { text: v, lowercase },
        (None, None) => return Err(Error::Model(format!("{base}: neither tokenizer.json nor vocab.txt"))),
    };
    let reader = NativeSource::open(&format!("{base}/model.safetensors"))?;
    pollster::block_on(Encoder::open(&reader, &config, tokenizer, options, &mut |_, _| {}))
}
