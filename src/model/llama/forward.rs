//! The Llama-family forward pass (Llama, SmolLM, TinyLlama, Mistral, Qwen2, Qwen3), written
//! once as a graph that every backend runs: the GPU lowers it to dispatches, the CPU executes it.

use super::super::config::LlamaConfig;
use super::super::graph::{Act, Activation, Graph, Ids, LayerWeight as L, NormKind, Op, Pass, Weight};

/// One pass of the model over `pass.n_tokens` tokens.
pub fn forward(c: &LlamaConfig, pass: Pass) -> Graph {
    let mut g = Graph::new(pass.capture);
    let rms = |x: Act, w: Weight, out: Act| Op::Norm { kind: NormKind::Rms, x, w, bias: None, group: None, eps: c.rms_eps, out };
    let linear = |w: Weight, x: Act, out: Act| Op::Linear { w, bias: None, x, out };

    let ids = if pass.sampled_ids { Ids::Sampled } else { Ids::Input };
    g.push(Op::Embed { ids, out: Act::X });
    g.capture("embedding", Act::X);

    for l in 0..c.n_layers {
        let w = |part: L| Weight::Layer(l, part);
        let bias = |part: L| c.attn_bias.then_some(w(part));

        // Attention: x += wo · attention(rope(wq · norm(x)), cache(rope(wk · norm(x)), wv · norm(x)))
        g.push(rms(Act::X, w(L::AttnNorm), Act::H));
        // Qwen3 normalises each query and key head before rotating it.
        let (q, k) = if c.qk_norm { (Act::QProj, Act::KProj) } else { (Act::Q, Act::K) };
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
        g.push(linear(w(L::O), Act::Attn, Act::O));
        g.capture(format!("blk.{l}.attn_out"), Act::O);
        g.push(Op::Add { x: Act::X, y: Act::O });

        // MLP: x += w_down · (silu(w_gate · norm(x)) * (w_up · norm(x)))
        g.push(rms(Act::X, w(L::FfnNorm), Act::H));
        g.push(linear(w(L::Gate), Act::H, Act::Gate));
        g.push(linear(w(L::Up), Act::H, Act::Up));
        g.push(Op::Glu { act: Activation::Silu, gate: Act::Gate, up: Act::Up, out: Act::Act });
        g.push(linear(w(L::Down), Act::Act, Act::Down));
        g.capture(format!("blk.{l}.mlp_out"), Act::Down);
        g.push(Op::Add { x: Act::X, y: Act::Down });
        g.capture(format!("blk.{l}.residual"), Act::X);
    }

    if pass.all_logits {
        g.push(rms(Act::X, Weight::OutNorm, Act::H));
        g.capture("final_norm", Act::H);
        g.push(linear(Weight::Head, Act::H, Act::Logits));
        g.capture("logits", Act::Logits);
    } else {
        g.push(Op::LastRow { x: Act::X, out: Act::Last });
        g.push(rms(Act::Last, Weight::OutNorm, Act::LastNorm));
        g.push(linear(Weight::Head, Act::LastNorm, Act::Logits));
        g.push(Op::Sample { logits: Act::Logits });
    }
    g
}
