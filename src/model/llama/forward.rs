//! The decoder forward pass (Llama, SmolLM, TinyLlama, Mistral, Qwen2, Qwen3, Gemma 2 and 3), written
//! once as a graph that every backend runs: the GPU lowers it to dispatches, the CPU executes
//! it. Each family's block reads top to bottom; the embedding and the head are shared.

use super::super::config::LlamaConfig;
use super::super::graph::{Act, Activation, Graph, Ids, LayerWeight as L, NormKind, Op, Pass, Weight};

fn rms(c: &LlamaConfig, x: Act, w: Weight, out: Act) -> Op {
    Op::Norm { kind: NormKind::Rms, x, w, bias: None, group: None, eps: c.rms_eps, out }
}

fn linear(w: Weight, x: Act, out: Act) -> Op {
    Op::Linear { w, bias: None, x, out }
}

/// One pass of the model over `pass.n_tokens` tokens.
pub fn forward(c: &LlamaConfig, pass: Pass) -> Graph {
    let mut g = Graph::new(pass.capture);
    g.inputs = pass.inputs;
    let gemma = c.arch.is_gemma();

    let ids = if pass.sampled_ids { Ids::Sampled } else { Ids::Input };
    g.push(Op::Embed { ids, out: Act::X });
    if gemma {
        // √dim rounded to f32 first, as transformers does.
        g.push(Op::Scale { x: Act::X, by: (c.dim as f64).sqrt() as f32 });
    }
    g.capture("embedding", Act::X);

    for l in 0..c.n_layers {
        if gemma {
            gemma_block(&mut g, c, l);
        } else {
            llama_block(&mut g, c, l);
        }
        g.capture(format!("blk.{l}.residual"), Act::X);
    }

    if pass.all_logits {
        g.push(rms(c, Act::X, Weight::OutNorm, Act::H));
        g.capture("final_norm", Act::H);
        g.push(linear(Weight::Head, Act::H, Act::Logits));
    } else {
        g.push(Op::LastRow { x: Act::X, out: Act::Last });
        g.push(rms(c, Act::Last, Weight::OutNorm, Act::LastNorm));
        g.push(linear(Weight::Head, Act::LastNorm, Act::Logits));
    }
    if let Some(cap) = c.final_softcap {
        g.push(Op::SoftCap { x: Act::Logits, cap });
    }
    if pass.all_logits {
        g.capture("logits", Act::Logits);
    } else {
        g.push(Op::Sample { logits: Act::Logits });
    }
    g
}

/// Queries, keys and values of layer `l` from `Act::H`, rotated and stored; the attention over
/// the cache into `Act::Attn`, projected back into `Act::O`.
fn attention(g: &mut Graph, c: &LlamaConfig, l: usize) {
    let w = |part: L| Weight::Layer(l, part);
    let bias = |part: L| c.attn_bias.then_some(w(part));
    // Qwen3 normalises each query and key head before rotating it.
    let (q, k) = if c.qk_norm { (Act::QProj, Act::KProj) } else { (Act::Q, Act::K) };
    // The projections' inputs are captured for calibration statistics (quant::calibration).
    g.capture_input(format!("blk.{l}.attn_in"), Act::H);
    g.push(Op::Linear { w: w(L::Q), bias: bias(L::QBias), x: Act::H, out: q });
    g.push(Op::Linear { w: w(L::K), bias: bias(L::KBias), x: Act::H, out: k });
    g.push(Op::Linear { w: w(L::V), bias: bias(L::VBias), x: Act::H, out: Act::V });
    if c.qk_norm {
        let head = Some(c.head_dim);
        g.push(Op::Norm { kind: NormKind::Rms, x: q, w: w(L::QNorm), bias: None, group: head, eps: c.rms_eps, out: Act::Q });
        g.push(Op::Norm { kind: NormKind::Rms, x: k, w: w(L::KNorm), bias: None, group: head, eps: c.rms_eps, out: Act::K });
    }
    g.push(Op::RopeStore { layer: l, q: Act::Q, k: Act::K, v: Act::V });
    g.push(Op::Attention { layer: l, q: Act::Q, out: Act::Attn });
    g.capture_input(format!("blk.{l}.attn_mix"), Act::Attn);
    g.push(linear(w(L::O), Act::Attn, Act::O));
    g.capture(format!("blk.{l}.attn_out"), Act::O);
}

/// `act(w_gate · h) * (w_up · h)`, projected back into `Act::Down`.
fn mlp(g: &mut Graph, l: usize, act: Activation) {
    let w = |part: L| Weight::Layer(l, part);
    g.capture_input(format!("blk.{l}.ffn_in"), Act::H);
    g.push(linear(w(L::Gate), Act::H, Act::Gate));
    g.push(linear(w(L::Up), Act::H, Act::Up));
    g.push(Op::Glu { act, gate: Act::Gate, up: Act::Up, out: Act::Act });
    g.capture_input(format!("blk.{l}.ffn_act"), Act::Act);
    g.push(linear(w(L::Down), Act::Act, Act::Down));
    g.capture(format!("blk.{l}.mlp_out"), Act::Down);
}

/// x += attention(norm(x)); x += swiglu_mlp(norm(x)).
fn llama_block(g: &mut Graph, c: &LlamaConfig, l: usize) {
    let w = |part: L| Weight::Layer(l, part);
    g.push(rms(c, Act::X, w(L::AttnNorm), Act::H));
    attention(g, c, l);
    g.push(Op::Add { x: Act::X, y: Act::O });

    g.push(rms(c, Act::X, w(L::FfnNorm), Act::H));
    mlp(g, l, Activation::Silu);
    g.push(Op::Add { x: Act::X, y: Act::Down });
}

/// x += norm(attention(norm(x))); x += norm(geglu_mlp(norm(x))): each half normalised on the
/// way in and on the way out (Gemma 2 and 3; Gemma 3's q/k norms are in `attention`).
fn gemma_block(g: &mut Graph, c: &LlamaConfig, l: usize) {
    let w = |part: L| Weight::Layer(l, part);
    g.push(rms(c, Act::X, w(L::AttnNorm), Act::H));
    attention(g, c, l);
    g.push(rms(c, Act::O, w(L::PostAttnNorm), Act::Post));
    g.push(Op::Add { x: Act::X, y: Act::Post });

    g.push(rms(c, Act::X, w(L::FfnNorm), Act::H));
    mlp(g, l, Activation::GeluTanh);
    g.push(rms(c, Act::Down, w(L::PostFfnNorm), Act::Post));
    g.push(Op::Add { x: Act::X, y: Act::Post });
}
