//! The GPU sampler against its CPU reference: greedy exactly, sampling draw for draw.

use weft::gpu::DType;
use weft::ops::rope::step_bytes;
use weft::ops::sample::{params_bytes, sample, sample_cpu, sample_route, SampleParams, SampleRoute};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::ctx;

const MAX_SEQ: usize = 128;

/// Runs the GPU sampler on `logits` with `history` as the sequence so far; returns the token
/// and what the sampler wrote into the sequence.
fn gpu_sample(logits: &[f32], history: &[u32], p: &SampleParams) -> anyhow::Result<(u32, u32)> {
    let ctx = ctx();
    let vocab = logits.len();
    let tl = ctx.upload_f32("logits", &[vocab], logits)?;
    let mut seq = history.to_vec();
    seq.resize(MAX_SEQ, 0);
    let tt = ctx.upload_u32("tokens", &[MAX_SEQ], &seq)?;
    let chosen = ctx.zeros("chosen", &[4], DType::U32)?;
    let params = ctx.uniform_block("sample params", 32);
    ctx.write_uniform(&params, &params_bytes(p, vocab, MAX_SEQ));
    let step = ctx.uniform_block("step", 16);
    let end = history.len() as u32;
    ctx.write_uniform(&step, &step_bytes(end - 1, 1));
    let d = pollster::block_on(sample(ctx, &tl, &tt, &chosen, &params, &step))?;
    ctx.run(&[&d]);
    let id = pollster::block_on(ctx.read_u32(&chosen))?[0];
    let written = pollster::block_on(ctx.read_u32(&tt))?[history.len()];
    Ok((id, written))
}

fn logits(seed: u64, vocab: usize) -> Vec<f32> {
    random_f32(seed, vocab).iter().map(|v| v * 6.0).collect()
}

#[test]
fn greedy_picks_the_argmax_and_records_it() -> anyhow::Result<()> {
    for (i, vocab) in [10usize, 257, 49152].into_iter().enumerate() {
        let l = logits(200 + i as u64, vocab);
        let p = SampleParams::default();
        let (id, written) = gpu_sample(&l, &[1, 2, 3], &p)?;
        assert_eq!(id, sample_cpu(&l, &[1, 2, 3], 3, &p), "vocab {vocab}");
        assert_eq!(written, id);
    }
    // Ties go to the lowest index.
    let (id, _) = gpu_sample(&[0.0, 5.0, 1.0, 5.0], &[0], &SampleParams::default())?;
    assert_eq!(id, 1);
    // Also when one lane of the workgroup meets several of them, a workgroup's width apart.
    // A lane loads 32 logits a run (tokens lane + k * 256, k < 32 in the first run): in 20000
    // logits, ties inside one run (3 + 6 * 256 and 3 + 2 * 256), a lane's ties in different
    // runs (3 + 20 * 256 and 3 + 70 * 256), and in the last run, which reaches past the
    // vocabulary (5 + 66 * 256 and 5 + 77 * 256).
    let cases = [
        (1000, [260, 4, 900], 4),
        (1000, [700, 444, 300], 300),
        (1000, [999, 743, 487], 487),
        (20000, [1539, 515, 4000], 515),
        (20000, [17923, 5123, 19000], 5123),
        (20000, [19717, 16901, 19990], 16901),
        (20000, [19999, 17923, 19843], 17923),
    ];
    for (vocab, tied, lowest) in cases {
        let mut l = vec![0.0f32; vocab];
        for i in tied {
            l[i] = 5.0;
        }
        assert_eq!(gpu_sample(&l, &[0], &SampleParams::default())?.0, lowest, "ties at {tied:?}");
    }
    Ok(())
}

#[test]
fn repetition_penalty_changes_the_greedy_choice() -> anyhow::Result<()> {
    let mut l = vec![0.0f32; 100];
    l[7] = 3.0;
    l[9] = 2.0;
    let p = SampleParams { repeat_penalty: 2.0, ..Default::default() };
    // Token 7 seen twice in the window: penalised once, 3.0 / 2 < 2.0.
    let (id, _) = gpu_sample(&l, &[7, 5, 7], &p)?;
    assert_eq!(id, 9);
    assert_eq!(sample_cpu(&l, &[7, 5, 7], 3, &p), 9);
    // Outside the window it is not penalised.
    let p = SampleParams { penalty_window: 1, ..p };
    assert_eq!(gpu_sample(&l, &[7, 5, 5], &p)?.0, 7);
    Ok(())
}

/// Logits of `vocab` tokens: `kind` 0 flat (uniform in [-6, 6]), 1 peaked (in [-40, 40]), 2
/// whole numbers in [-6, 6] (so that many tie), 3 flat with one token in 1638 lifted to about 30
/// (as a model's few likely tokens stand above the bulk, a gap between them), 4 nearly equal
/// (within 0.01), 5 all equal.
fn shaped(seed: u64, vocab: usize, kind: u32) -> Vec<f32> {
    let l = logits(seed, vocab);
    match kind {
        0 => l,
        1 => l.iter().map(|v| v * 40.0 / 6.0).collect(),
        2 => l.iter().map(|v| v.round()).collect(),
        3 => l.iter().enumerate().map(|(i, v)| if i % 1638 == 7 { 30.0 + v / 6.0 } else { *v }).collect(),
        4 => l.iter().map(|v| v / 600.0).collect(),
        _ => vec![0.0; vocab],
    }
}

#[test]
fn sampling_matches_the_cpu_reference_draw_for_draw() -> anyhow::Result<()> {
    // The kernel takes three routes (`sample_route` mirrors its choice), and each case names
    // the one its logits send it down: the whole vocabulary drawn from (no cut), the cut found
    // among at most 1024 candidates sorted in workgroup memory (after so many counting passes
    // narrowed the window around it), or (thousands of exact ties) bisection passes.
    use SampleRoute::{Bisection, Candidates, NoCut};
    let t = |temperature| SampleParams { temperature, ..Default::default() };
    let cases = [
        ("no cut", NoCut, 0, 5000, t(1.0)),
        ("no cut, chunks over 1024 tokens a lane", NoCut, 0, 300_000, t(1.0)),
        ("top-k", Candidates(1), 0, 5000, SampleParams { top_k: 40, ..t(0.7) }),
        ("flat top-p", Candidates(1), 0, 5000, SampleParams { top_p: 0.9, ..t(0.9) }),
        ("nearly equal, top-p", Candidates(3), 4, 5000, SampleParams { top_p: 0.9, ..t(1.0) }),
        ("top-k then top-p", Candidates(1), 0, 5000, SampleParams { top_k: 50, top_p: 0.95, repeat_penalty: 1.1, ..t(1.3) }),
        ("peaked top-p", Candidates(1), 1, 5000, SampleParams { top_p: 0.9, ..t(1.0) }),
        ("a page's settings", Candidates(1), 1, 49152, SampleParams { top_p: 0.9, repeat_penalty: 1.1, ..t(0.3) }),
        ("top-k above the candidates' room", Candidates(2), 0, 5000, SampleParams { top_k: 2000, ..t(1.0) }),
        ("top-k above the room, then top-p", Candidates(3), 0, 5000, SampleParams { top_k: 2000, top_p: 0.5, ..t(1.0) }),
        ("exact ties by the thousand", Bisection, 5, 5000, SampleParams { top_k: 40, ..t(1.0) }),
        ("ties", Candidates(1), 2, 5000, SampleParams { top_k: 40, top_p: 0.95, ..t(1.0) }),
        ("ties, top-p", Candidates(1), 2, 5000, SampleParams { top_p: 0.5, ..t(0.3) }),
        ("top-k past a gap in the bounds", Candidates(3), 3, 49152, SampleParams { top_k: 40, ..t(1.0) }),
    ];
    let (mut same, mut total) = (0, 0);
    for (ci, (name, want, kind, vocab, cfg)) in cases.iter().enumerate() {
        let mut agree = 0;
        for trial in 0..12u32 {
            let l = shaped(300 + ci as u64 * 100 + trial as u64, *vocab, *kind);
            let history: Vec<u32> = (0..20).map(|i| (i * 37 + trial) % *vocab as u32).collect();
            let p = SampleParams { seed: 1000 + trial, ..*cfg };
            assert_eq!(sample_route(&l, &p), *want, "{name}: the route these logits take");
            let (gpu, _) = gpu_sample(&l, &history, &p)?;
            let cpu = sample_cpu(&l, &history, history.len(), &p);
            agree += (gpu == cpu) as usize;
            // Whatever the draw, the choice respects top-k.
            if p.top_k > 0 && p.repeat_penalty == 1.0 {
                let mut sorted: Vec<f32> = l.clone();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let kth = sorted[p.top_k as usize - 1];
                assert!(l[gpu as usize] >= kth, "{name}: token {gpu} is outside the top {}", p.top_k);
            }
        }
        println!("{name}: {agree} of 12 draws agree with the CPU reference");
        same += agree;
        total += 12;
    }
    // The GPU sums masses in another order and exp() may differ in the last place; nearly
    // every draw must agree.
    println!("{same} of {total} draws agree with the CPU reference");
    assert!(same * 100 >= total * 95, "{same} of {total} draws agree");
    Ok(())
}

#[test]
fn same_seed_same_token_different_seed_varies() -> anyhow::Result<()> {
    let l = vec![0.0f32; 64]; // uniform distribution
    let p = SampleParams { temperature: 1.0, seed: 5, ..Default::default() };
    let a = gpu_sample(&l, &[1, 2], &p)?.0;
    assert_eq!(a, gpu_sample(&l, &[1, 2], &p)?.0);
    let picks: std::collections::HashSet<u32> = (0..16)
        .map(|s| gpu_sample(&l, &[1, 2], &SampleParams { seed: s, ..p }).map(|r| r.0))
        .collect::<anyhow::Result<_>>()?;
    assert!(picks.len() > 8, "{picks:?}");
    Ok(())
}

/// Past max_seq the token history is a ring (position i in slot i % max_seq): the repetition
/// penalty reads the last `min(window, max_seq)` positions through it, and the chosen token
/// lands in the slot of its position.
#[test]
fn repetition_penalty_reads_the_history_ring() -> anyhow::Result<()> {
    let ctx = ctx();
    let ring = 8;
    let vocab = 40;
    // 13 positions: slots hold positions 5..13 once the ring has wrapped.
    let history: Vec<u32> = (0..13).map(|i| (i * 7 % vocab) as u32).collect();
    let mut slots = vec![0u32; ring];
    for (pos, &tok) in history.iter().enumerate() {
        slots[pos % ring] = tok;
    }
    let mut l = logits(300, vocab);
    // Every token of the history a little above the rest, so the penalty decides the choice.
    for &t in &history {
        l[t as usize] = 5.0 + t as f32 * 0.01;
    }
    for window in [4u32, 64] {
        let p = SampleParams { repeat_penalty: 3.0, penalty_window: window, ..Default::default() };
        let tl = ctx.upload_f32("logits", &[vocab], &l)?;
        let tt = ctx.upload_u32("tokens", &[ring], &slots)?;
        let chosen = ctx.zeros("chosen", &[4], DType::U32)?;
        let params = ctx.uniform_block("sample params", 32);
        ctx.write_uniform(&params, &params_bytes(&p, vocab, ring));
        let step = ctx.uniform_block("step", 16);
        ctx.write_uniform(&step, &step_bytes(history.len() as u32 - 1, 1));
        let d = pollster::block_on(sample(ctx, &tl, &tt, &chosen, &params, &step))?;
        ctx.run(&[&d]);
        let id = pollster::block_on(ctx.read_u32(&chosen))?[0];
        // The reference sees the linear history with the window the ring can hold.
        let clamped = SampleParams { penalty_window: window.min(ring as u32), ..p };
        let want = sample_cpu(&l, &history, history.len(), &clamped);
        assert_eq!(id, want, "window {window}");
        assert_eq!(pollster::block_on(ctx.read_u32(&tt))?[history.len() % ring], id);
    }
    Ok(())
}
