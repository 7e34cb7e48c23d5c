//! Where the threads of a pass must meet. A barrier after every op (about 500 per SmolLM2 decode
//! step) costs more than some of the ops: each is a wait for the slowest thread, and in the
//! browser a wake-up through `memory.atomic.notify`. Two ops need one between them only when
//! the second reads what the first wrote, or writes what the first read or wrote, in parts that
//! another thread touches. Matrix products write each token row's `share` of their output rows;
//! element-wise ops touch the same `share` of each row: a residual add after the projection
//! that feeds it, or the gated activation after the gate and up products, read only what their
//! own thread wrote. Products that read the same input (queries, keys and values; gate and up)
//! write different tensors. Each thread quantizes a product's input itself, so that needs no
//! meeting either. A SmolLM2 layer goes from 17 barriers to 8.

use crate::model::graph::{Act, Op};

/// What an op touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource {
    Act(Act),
    /// A layer's KV cache.
    Cache(usize),
}

/// How the threads divide an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Any thread may touch any element (or thread 0 all of them).
    Whole,
    /// Thread `tid` touches `share(width, tid, threads)` of every token row, `width` being the
    /// tensor's row width: the same elements for every op that divides it this way.
    Rows,
}

#[derive(Clone, Copy, Debug)]
struct Access {
    what: Resource,
    write: bool,
    part: Part,
}

fn read(a: Act, part: Part) -> Access {
    Access { what: Resource::Act(a), write: false, part }
}

fn write(a: Act, part: Part) -> Access {
    Access { what: Resource::Act(a), write: true, part }
}

/// What `op` reads and writes, as `exec.rs` divides it among threads.
fn accesses(op: &Op) -> Vec<Access> {
    use Part::{Rows, Whole};
    match *op {
        Op::Embed { out, .. } => vec![write(out, Whole)],
        Op::Norm { x, out, .. } => vec![read(x, Whole), write(out, Whole)],
        Op::Linear { x, out, .. } => vec![read(x, Whole), write(out, Rows)],
        Op::RopeStore { layer, q, k, v } => vec![
            write(q, Whole),
            read(k, Whole),
            read(v, Whole),
            Access { what: Resource::Cache(layer), write: true, part: Whole },
        ],
        Op::Attention { layer, q, out } => vec![
            read(q, Whole),
            Access { what: Resource::Cache(layer), write: false, part: Whole },
            write(out, Whole),
        ],
        Op::Glu { gate, up, out, .. } => vec![read(gate, Rows), read(up, Rows), write(out, Rows)],
        Op::Add { x, y } => vec![write(x, Rows), read(y, Rows)],
        Op::Scale { x, .. } | Op::SoftCap { x, .. } => vec![write(x, Rows)],
        Op::LastRow { x, out } => vec![read(x, Whole), write(out, Whole)],
        Op::Sample { logits } => vec![read(logits, Whole)],
        Op::Capture { x, .. } => vec![read(x, Whole)],
    }
}

/// Whether two accesses from different ops between the same barriers could race.
fn conflict(a: &Access, b: &Access) -> bool {
    a.what == b.what && (a.write || b.write) && !(a.part == Part::Rows && b.part == Part::Rows)
}

/// For each op, whether the threads meet at a barrier before it (never before the first: the
/// pass starts together, and `threads::run` returns only when every thread is done).
pub fn barriers(ops: &[Op]) -> Vec<bool> {
    let mut pending: Vec<Access> = Vec::new();
    ops.iter()
        .map(|op| {
            let mine = accesses(op);
            let meet = mine.iter().any(|a| pending.iter().any(|p| conflict(a, p)));
            if meet {
                pending.clear();
            }
            pending.extend(mine);
            meet
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Pass;
    use crate::model::llama::forward::forward;
    use crate::model::LlamaConfig;

    /// SmolLM2-135M's shape.
    fn smollm() -> LlamaConfig {
        let json = r#"{"model_type":"llama","vocab_size":49152,"hidden_size":576,"intermediate_size":1536,
            "num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,"rms_norm_eps":1e-5,
            "max_position_embeddings":8192}"#;
        LlamaConfig::from_hf_json(json).unwrap()
    }

    #[test]
    fn a_decode_layer_meets_eight_times() {
        let c = smollm();
        let g = forward(&c, Pass::decode());
        let meets = barriers(&g.ops).iter().filter(|&&b| b).count();
        // Per layer: before each norm and the products that read it (4), the rotation, the
        // attention, the output and the down projections; then before the last row, the final
        // norm, the head and the sampler.
        assert_eq!(meets, 30 * 8 + 4, "{meets}");
        assert!(!barriers(&g.ops)[0]);
    }

    #[test]
    fn every_read_after_a_whole_write_waits() {
        let c = smollm();
        for pass in [Pass::decode(), Pass::prefill(7), Pass::scoring(5, true)] {
            let ops = forward(&c, pass).ops;
            let meet = barriers(&ops);
            for (i, op) in ops.iter().enumerate() {
                for a in accesses(op).iter().filter(|a| a.part == Part::Whole) {
                    // The last op before `i` that wrote what `i` touches as a whole must be
                    // separated from it by a barrier.
                    let writer = ops[..i].iter().rposition(|o| accesses(o).iter().any(|b| b.write && b.what == a.what));
                    if let Some(w) = writer {
                        assert!(meet[w + 1..=i].iter().any(|&m| m), "op {i} {op:?} after op {w} {:?}", ops[w]);
                    }
                }
            }
        }
    }
}
