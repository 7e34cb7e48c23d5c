//! The forward pass as data: a list of ops over named activation tensors and named weights,
//! written once per architecture (see `llama/forward.rs`) and executed by every backend. The
//! GPU backend lowers it to prepared dispatches, fusing adjacent ops where a kernel does both
//! (`llama/lower.rs`); the CPU backend runs it op by op (`crate::cpu`).
//!
//! Activations are rows of `n_tokens` tokens each; an op reads and writes whole tensors. Every
//! tensor has one width per model (`Act::width`), so backends size their buffers once.

use super::config::LlamaConfig;

/// Activation tensors of a pass, each [n_tokens, width] (except `Last*`, one row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    /// The residual stream, [t, dim].
    X,
    /// A normalised copy of the stream, [t, dim].
    H,
    /// Queries, [t, n_heads * head_dim]; keys and values, [t, n_kv_heads * head_dim].
    Q,
    K,
    V,
    /// The attention output, [t, n_heads * head_dim].
    Attn,
    /// The attention block's projection back to the stream, [t, dim].
    O,
    /// MLP gate, up and activated product, [t, ffn].
    Gate,
    Up,
    Act,
    /// The MLP's projection back to the stream, [t, dim].
    Down,
    /// The last token's row of the stream and its normalised copy, [1, dim].
    Last,
    LastNorm,
    /// Logits, [t, vocab] (or [1, vocab] when only the last token is scored).
    Logits,
    /// Query and key projections before their per-head norms (Qwen3), widths of Q and K.
    QProj,
    KProj,
    /// A block's attention or MLP output after its post-norm (Gemma 2), [t, dim].
    Post,
}

impl Act {
    /// Values per token.
    pub fn width(self, c: &LlamaConfig) -> usize {
        match self {
            Act::X | Act::H | Act::O | Act::Down | Act::Last | Act::LastNorm | Act::Post => c.dim,
            Act::Q | Act::Attn | Act::QProj => c.q_dim(),
            Act::K | Act::V | Act::KProj => c.kv_dim(),
            Act::Gate | Act::Up | Act::Act => c.ffn_dim,
            Act::Logits => c.vocab,
        }
    }

    /// Rows a pass over `t` tokens holds in this tensor.
    pub fn rows(self, t: usize) -> usize {
        match self {
            Act::Last | Act::LastNorm => 1,
            _ => t,
        }
    }
}

/// Weights of one block, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerWeight {
    AttnNorm,
    Q,
    K,
    V,
    QBias,
    KBias,
    VBias,
    /// Per-head norms of queries and keys (Qwen3, Gemma 3); none of today's models has them.
    QNorm,
    KNorm,
    O,
    FfnNorm,
    /// Norms of the attention and MLP outputs before the residual add (Gemma 2).
    PostAttnNorm,
    PostFfnNorm,
    Gate,
    Up,
    Down,
}

/// A weight of the model, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Weight {
    Embedding,
    Layer(usize, LayerWeight),
    OutNorm,
    /// The output head (the embedding where tied: backends resolve that).
    Head,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// `x / sqrt(mean(x²) + eps) * w`.
    Rms,
    /// `(x - mean) / sqrt(var + eps) * w + b`.
    Layer,
}

/// The nonlinearity of a gated MLP: `act(gate) * up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Silu,
    GeluTanh,
}

/// Where an embedding lookup takes its token ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ids {
    /// The pass's input ids.
    Input,
    /// The token the previous pass sampled (decode steps).
    Sampled,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `out[t] = embedding[ids[t]]`.
    Embed { ids: Ids, out: Act },
    /// Normalises each row of `x` (or each `group` values of it, for per-head norms) into `out`.
    Norm { kind: NormKind, x: Act, w: Weight, bias: Option<Weight>, group: Option<usize>, eps: f32, out: Act },
    /// `out = x · wᵀ (+ bias)`.
    Linear { w: Weight, bias: Option<Weight>, x: Act, out: Act },
    /// Rotates `q` in place and stores rotated `k` and `v` into layer `layer`'s KV cache at
    /// the pass's positions.
    RopeStore { layer: usize, q: Act, k: Act, v: Act },
    /// Causal attention of `q` over layer `layer`'s KV cache (grouped KV heads), into `out`.
    Attention { layer: usize, q: Act, out: Act },
    /// `out = act(gate) * up`.
    Glu { act: Activation, gate: Act, up: Act, out: Act },
    /// `x += y` (the residual connection).
    Add { x: Act, y: Act },
    /// `out` = the last token's row of `x`.
    LastRow { x: Act, out: Act },
    /// Picks the next token from the last row of `logits`.
    Sample { logits: Act },
    /// `x *= by` (Gemma's embedding scale).
    Scale { x: Act, by: f32 },
    /// `x = cap * tanh(x / cap)` (Gemma 2's final logits).
    SoftCap { x: Act, cap: f32 },
    /// Keeps a copy of `x` under `name` (activation dumps, checks against a reference).
    Capture { name: String, x: Act },
}

/// A checkpoint a pass captured: name, shape, values.
pub type Checkpoint = (String, Vec<usize>, Vec<f32>);

/// The checkpoints of consecutive passes over one input (names repeating pass after pass) as
/// one set: each name once, in first-seen order, its rows in pass order.
pub fn concat_checkpoints(passes: Vec<Checkpoint>) -> Vec<Checkpoint> {
    let mut out: Vec<Checkpoint> = Vec::new();
    for (name, shape, values) in passes {
        match out.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, s, v)) => {
                s[0] += shape[0];
                v.extend_from_slice(&values);
            }
            None => out.push((name, shape, values)),
        }
    }
    out
}

/// What a pass computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    pub n_tokens: usize,
    /// Ids from the previous sample (a decode step) instead of the input.
    pub sampled_ids: bool,
    /// Logits for every token (perplexity, checks) instead of sampling after the last.
    pub all_logits: bool,
    /// Snapshot the checkpoints (embedding; per block attention output, MLP output, residual;
    /// final norm; logits).
    pub capture: bool,
    /// Also snapshot every projection's input (`blk.L.attn_in`, `attn_mix`, `ffn_in`,
    /// `ffn_act`): what `weft calibrate` gathers statistics from. Off in every other pass, so
    /// the checkpoint list that tests and the web API compare stays as it is.
    pub inputs: bool,
}

impl Pass {
    /// A decode step: one sampled token in, one sampled token out.
    pub fn decode() -> Self {
        Self { n_tokens: 1, sampled_ids: true, all_logits: false, capture: false, inputs: false }
    }

    /// A prompt pass over `t` tokens that samples after the last.
    pub fn prefill(t: usize) -> Self {
        Self { n_tokens: t, sampled_ids: false, all_logits: false, capture: false, inputs: false }
    }

    /// A pass over `t` tokens returning every token's logits.
    pub fn scoring(t: usize, capture: bool) -> Self {
        Self { n_tokens: t, sampled_ids: false, all_logits: true, capture, inputs: false }
    }

    /// A scoring pass that captures the checkpoints and every projection's input.
    pub fn calibration(t: usize) -> Self {
        Self { inputs: true, ..Self::scoring(t, true) }
    }
}

/// The ops of one pass, in order.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub ops: Vec<Op>,
    pub capture: bool,
    /// Whether [`Graph::capture_input`] adds its checkpoints.
    pub inputs: bool,
}

impl Graph {
    pub fn new(capture: bool) -> Self {
        Self { ops: Vec::new(), capture, inputs: false }
    }

    pub fn push(&mut self, op: Op) {
        self.ops.push(op);
    }

    /// Adds a checkpoint copy when the pass captures.
    pub fn capture(&mut self, name: impl Into<String>, x: Act) {
        if self.capture {
            self.ops.push(Op::Capture { name: name.into(), x });
        }
    }

    /// Adds a checkpoint copy of a projection's input when the pass gathers them.
    pub fn capture_input(&mut self, name: impl Into<String>, x: Act) {
        if self.inputs {
            self.ops.push(Op::Capture { name: name.into(), x });
        }
    }
}
