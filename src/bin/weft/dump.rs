//! `weft dump-activations MODEL --ids 1,2,3 --out DIR`: every checkpoint of one forward pass
//! (embedding, each block's attention output, MLP output and residual, final norm, logits)
//! as .npy files, named like the reference files of scripts/dump_activations.py.

use std::path::Path;

use anyhow::Context;
use weft::model::EngineOptions;

use crate::backend::{Backend, CpuFlags, Engine, LoadFlags};

pub fn run(model_path: &str, ids: &str, out: &str, backend: Backend, cpu: &CpuFlags, load: &LoadFlags) -> anyhow::Result<()> {
    let ids: Vec<u32> = ids
        .split(',')
        .map(|s| s.trim().parse::<u32>().with_context(|| format!("token id {s:?}")))
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!ids.is_empty(), "--ids needs at least one token id");
    let engine = EngineOptions { max_seq: ids.len().max(2), max_batch: ids.len(), ..Default::default() };
    let (mut llama, _) = Engine::open(backend, cpu, load.weights(), model_path, engine)?;
    let vocab = llama.config().vocab as u32;
    if let Some(bad) = ids.iter().find(|&&id| id >= vocab) {
        anyhow::bail!("token id {bad} is outside the vocabulary of {vocab}");
    }
    let checkpoints = llama.checkpoints(&ids)?;
    std::fs::create_dir_all(out)?;
    for (name, shape, values) in &checkpoints {
        let path = Path::new(out).join(format!("{name}.npy"));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        weft::format::npy::write_f32(&mut file, &shape, values)?;
    }
    println!("wrote {} checkpoints for {} tokens to {out}", checkpoints.len(), ids.len());
    Ok(())
}
