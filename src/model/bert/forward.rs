//! The BERT encoder's forward pass as data, the counterpart of `llama/forward.rs`: embeddings
//! (token + position + token type, LayerNorm), post-LayerNorm blocks of bidirectional attention
//! and a GELU (erf) MLP, then pooling. A pass holds several sequences packed one after another
//! (no padding rows): attention of a token sees exactly its own sequence, which is what BERT's
//! padding mask does, and pooling averages each sequence's own rows.

use super::config::BertConfig;

/// Activation tensors of an encoder pass, [tokens, width] (`Pooled`: [sequences, dim]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    X,
    Q,
    K,
    V,
    Attn,
    /// A block's output before its LayerNorm (residual sum), [t, dim].
    Sum,
    Up,
    Pooled,
}

pub const ACTS: [Act; 8] = [Act::X, Act::Q, Act::K, Act::V, Act::Attn, Act::Sum, Act::Up, Act::Pooled];

impl Act {
    pub fn width(self, c: &BertConfig) -> usize {
        match self {
            Act::Up => c.ffn_dim,
            _ => c.dim,
        }
    }
}

/// Weights of one block, by role (Hugging Face names in `weights.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerWeight {
    Q,
    K,
    V,
    O,
    AttnNorm,
    Up,
    Down,
    OutNorm,
}

/// A LayerNorm's scale, or a product's matrix, or either's bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Weight {
    EmbedNorm,
    Layer(usize, LayerWeight),
}

/// How a sequence's token rows become one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The mean over the sequence's tokens (the attention mask's ones).
    Mean,
    /// The `[CLS]` token's row.
    Cls,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `out[t] = word[id] + position[t - start] + token_type[0]`, t over each sequence.
    Embed { out: Act },
    /// `out = (x - mean) / sqrt(var + eps) * w + b`, per row.
    LayerNorm { x: Act, w: Weight, out: Act },
    /// `out = x · wᵀ + b (+ residual)`, then `gelu(out)` (erf) with `gelu`: the residual sum and
    /// the GELU happen while the product's outputs are in registers.
    Linear { w: Weight, x: Act, out: Act, residual: Option<Act>, gelu: bool },
    /// Multi-head attention of each token over every token of its own sequence.
    Attention { q: Act, k: Act, v: Act, out: Act },
    /// One row per sequence.
    Pool { pooling: Pooling, x: Act, out: Act },
    /// `x /= |x|` per row.
    L2Normalize { x: Act },
    /// Keeps a copy of `x` under `name` (hidden states checked against a reference).
    Capture { name: String, x: Act },
}

/// What an encoder pass computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodePass {
    pub pooling: Pooling,
    pub normalize: bool,
    /// Snapshot every hidden state (`hidden.0` after the embeddings, `hidden.{l+1}` per block).
    pub capture: bool,
}

pub fn forward(c: &BertConfig, pass: EncodePass) -> Vec<Op> {
    let mut g = Vec::new();
    let capture = |g: &mut Vec<Op>, name: String, x: Act| {
        if pass.capture {
            g.push(Op::Capture { name, x });
        }
    };
    g.push(Op::Embed { out: Act::Sum });
    g.push(Op::LayerNorm { x: Act::Sum, w: Weight::EmbedNorm, out: Act::X });
    capture(&mut g, "hidden.0".into(), Act::X);
    for l in 0..c.n_layers {
        let w = |part: LayerWeight| Weight::Layer(l, part);
        // x = norm(x + wo · attention(wq · x, wk · x, wv · x))
        let linear = |part, x, out, residual, gelu| Op::Linear { w: w(part), x, out, residual, gelu };
        g.push(linear(LayerWeight::Q, Act::X, Act::Q, None, false));
        g.push(linear(LayerWeight::K, Act::X, Act::K, None, false));
        g.push(linear(LayerWeight::V, Act::X, Act::V, None, false));
        g.push(Op::Attention { q: Act::Q, k: Act::K, v: Act::V, out: Act::Attn });
        g.push(linear(LayerWeight::O, Act::Attn, Act::Sum, Some(Act::X), false));
        g.push(Op::LayerNorm { x: Act::Sum, w: w(LayerWeight::AttnNorm), out: Act::X });
        // x = norm(x + w_down · gelu(w_up · x))
        g.push(linear(LayerWeight::Up, Act::X, Act::Up, None, true));
        g.push(linear(LayerWeight::Down, Act::Up, Act::Sum, Some(Act::X), false));
        g.push(Op::LayerNorm { x: Act::Sum, w: w(LayerWeight::OutNorm), out: Act::X });
        capture(&mut g, format!("hidden.{}", l + 1), Act::X);
    }
    g.push(Op::Pool { pooling: pass.pooling, x: Act::X, out: Act::Pooled });
    if pass.normalize {
        g.push(Op::L2Normalize { x: Act::Pooled });
    }
    g
}
