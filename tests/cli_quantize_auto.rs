//! `--quantize auto` on the command line: `weft generate FOLDER --backend cpu --quantize auto
//! --memory-budget-mb N` plans each matrix's format for the budget (`model::fit::plan_auto`, as
//! `loadModel`'s `quantize: 'auto'`), prints the plan, and loads the matrices so: a smaller
//! budget gives fewer weight bytes, and a budget no format fits is the typed ModelTooLarge error,
//! before any weight is read. The folder is written here: a Llama of 512 x 1024 with two layers
//! and random BF16 weights (about 10 MB), large enough for whole MB to change the plan.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use weft::format::writer::SafetensorsWriter;
use weft::format::SafeDtype;

const DIM: u64 = 512;
const FFN: u64 = 1024;
const KV: u64 = 256;
const VOCAB: u64 = 700;

/// Seeded values of about N(0, 0.02²) as BF16 (the top half of each f32).
fn bf16_values(n: u64, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .flat_map(|_| {
            // The sum of four uniforms, centred: close enough to a normal for a grid's error.
            let v = ((next() + next() + next() + next()) - 2.0) * 0.035;
            ((v.to_bits() >> 16) as u16).to_le_bytes()
        })
        .collect()
}

fn write_folder(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::copy("tests/fixtures/qwen2-tiny/tokenizer.json", dir.join("tokenizer.json"))?;
    let config = serde_json::json!({
        "model_type": "llama", "vocab_size": VOCAB, "hidden_size": DIM, "intermediate_size": FFN,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
        "rms_norm_eps": 1e-5, "max_position_embeddings": 64, "rope_theta": 10000.0,
        "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2
    });
    std::fs::write(dir.join("config.json"), config.to_string())?;
    let mut w = SafetensorsWriter::default();
    let mut seed = 1;
    let mut add = |name: &str, shape: &[u64]| -> anyhow::Result<()> {
        seed += 1;
        let n = shape.iter().product();
        let bytes = if name.ends_with("norm.weight") { (0..n).flat_map(|_| 0x3f80u16.to_le_bytes()).collect() } else { bf16_values(n, seed) };
        Ok(w.add(name, SafeDtype::BF16, shape, bytes)?)
    };
    add("model.embed_tokens.weight", &[VOCAB, DIM])?;
    for l in 0..2 {
        let p = |s: &str| format!("model.layers.{l}.{s}.weight");
        for (name, shape) in [
            (p("input_layernorm"), vec![DIM]),
            (p("self_attn.q_proj"), vec![DIM, DIM]),
            (p("self_attn.k_proj"), vec![KV, DIM]),
            (p("self_attn.v_proj"), vec![KV, DIM]),
            (p("self_attn.o_proj"), vec![DIM, DIM]),
            (p("post_attention_layernorm"), vec![DIM]),
            (p("mlp.gate_proj"), vec![FFN, DIM]),
            (p("mlp.up_proj"), vec![FFN, DIM]),
            (p("mlp.down_proj"), vec![DIM, FFN]),
        ] {
            add(&name, &shape)?;
        }
    }
    add("model.norm.weight", &[DIM])?;
    w.write(&mut std::fs::File::create(dir.join("model.safetensors"))?)?;
    Ok(())
}

fn generate(dir: &Path, budget_mb: Option<u64>) -> anyhow::Result<Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.arg("generate").arg(dir).args(["--backend", "cpu", "--prompt", "hello", "--max-tokens", "2", "--max-seq", "16"]);
    cmd.args(["--ids", "--quantize", "auto"]);
    if let Some(mb) = budget_mb {
        cmd.args(["--memory-budget-mb", &mb.to_string()]);
    }
    Ok(cmd.output()?)
}

/// The plan's matrix bytes and the loaded engine's weight bytes, from stderr.
fn bytes_of(out: &Output) -> (u64, u64) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "weft generate failed:\n{err}");
    let number_after = |key: &str| -> u64 {
        let at = err.find(key).unwrap_or_else(|| panic!("no '{key}' in:\n{err}")) + key.len();
        err[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
    };
    (number_after("matrix bytes "), number_after("weight bytes "))
}

#[test]
fn auto_plans_follow_the_memory_budget() -> anyhow::Result<()> {
    let dir: PathBuf = std::env::temp_dir().join(format!("weft-auto-{}", std::process::id()));
    write_folder(&dir)?;
    let mut runs = Vec::new();
    for budget in [None, Some(6), Some(5)] {
        let out = generate(&dir, budget)?;
        let plan = String::from_utf8_lossy(&out.stderr).lines().find(|l| l.starts_with("quantize auto plan:")).map(str::to_string);
        let (matrix, weights) = bytes_of(&out);
        println!("budget {budget:?} MB: {}; weight bytes {weights}", plan.unwrap_or_default());
        assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty(), "no ids generated");
        if let Some(mb) = budget {
            assert!(weights <= mb * 1_000_000, "{weights} bytes of weights over a budget of {mb} MB");
        }
        runs.push((matrix, weights));
    }
    // Smaller budgets, fewer bytes: planned and held.
    assert!(runs[2].0 < runs[1].0 && runs[1].0 < runs[0].0, "{runs:?}");
    assert!(runs[2].1 < runs[1].1 && runs[1].1 < runs[0].1, "{runs:?}");

    let out = generate(&dir, Some(4))?;
    let err = String::from_utf8_lossy(&out.stderr);
    println!("budget 4 MB: {}", err.trim());
    assert!(!out.status.success());
    // Error::ModelTooLarge's message, with what was needed and what the budget allows.
    assert!(err.contains("the model needs") && err.contains("but only 4000000 are available"), "{err}");
    assert!(err.contains("the smallest quantization of the matrices"), "{err}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
