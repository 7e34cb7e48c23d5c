// Picks the next token on the GPU so that only its id is read back: repetition penalty over a
// window of recent tokens, then greedy argmax, or temperature + top-k + top-p sampling with a
// seeded counter-based generator (the same draw for the same seed and position on any GPU).
// One workgroup; each invocation owns a contiguous chunk of the vocabulary, so the cumulative
// scan visits tokens in index order.

struct Params {
    vocab: u32,
    top_k: u32,           // 0: off
    window: u32,          // tokens the repetition penalty looks back over (<= WG)
    seed: u32,
    temperature: f32,     // <= 0: greedy
    top_p: f32,           // >= 1: off
    repeat_penalty: f32,  // 1: off
    max_seq: u32,
}

struct Step {
    pos: u32,
    n_tokens: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;  // [vocab]
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>;  // [max_seq] ring: position i in slot i % max_seq
@group(0) @binding(2) var<storage, read_write> chosen: array<u32>;  // [4] token id, then unused
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

const WG: u32 = 256u;
// Hex: the decimal -3.40282347e38 lies just past f32's range, and Tint (unlike naga) rejects it.
const LOWEST: f32 = -0x1.fffffep+127f;
const NONE: u32 = 0xffffffffu;

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> picked: atomic<u32>;

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn reduce_max(lane: u32, v: f32) -> f32 {
    red_f[lane] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            red_f[lane] = max(red_f[lane], red_f[lane + s]);
        }
        workgroupBarrier();
    }
    let r = red_f[0];
    workgroupBarrier();
    return r;
}

fn reduce_min(lane: u32, v: f32) -> f32 {
    return -reduce_max(lane, -v);
}

fn reduce_sum(lane: u32, v: f32) -> f32 {
    red_f[lane] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            red_f[lane] += red_f[lane + s];
        }
        workgroupBarrier();
    }
    let r = red_f[0];
    workgroupBarrier();
    return r;
}

fn reduce_count(lane: u32, v: u32) -> u32 {
    red_u[lane] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            red_u[lane] += red_u[lane + s];
        }
        workgroupBarrier();
    }
    let r = red_u[0];
    workgroupBarrier();
    return r;
}

// Greedy's step over one logit: a larger one, or the first one seen, replaces the best (so a
// lane visiting rising indices keeps its lowest tied index).
fn consider(v: f32, i: u32, best: ptr<function, f32>, best_i: ptr<function, u32>) {
    if (v > *best || *best_i == NONE) {
        *best = v;
        *best_i = i;
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let lane = lid.x;
    let end = step.pos + step.n_tokens;
    let chunk = (p.vocab + WG - 1u) / WG;
    let lo_i = min(lane * chunk, p.vocab);
    let hi_i = min(lo_i + chunk, p.vocab);

    // Repetition penalty, once per distinct token in the window.
    let window = min(min(p.window, end), p.max_seq);
    if (p.repeat_penalty != 1.0 && lane < window) {
        let first = end - window;
        let tok = tokens[(first + lane) % p.max_seq];
        var seen = false;
        for (var j = 0u; j < lane; j++) {
            seen = seen || tokens[(first + j) % p.max_seq] == tok;
        }
        if (!seen && tok < p.vocab) {
            let l = logits[tok];
            logits[tok] = select(l * p.repeat_penalty, l / p.repeat_penalty, l > 0.0);
        }
    }
    storageBarrier();
    workgroupBarrier();

    if (p.temperature <= 0.0) {
        // Greedy: the largest logit, the lowest index among ties. Lanes take every WG-th
        // logit, so each load of the workgroup reads one contiguous run (a lane's own chunk
        // made each load touch WG cache lines); a lane's indices rise, so it keeps its lowest
        // tied index, and the lowest of those wins below.
        // Eight loads are issued before the first comparison waits on one: a loop that loads
        // one logit and compares it waits a memory round trip per iteration, which over a
        // 50k vocabulary was the slowest dispatch of a small model's step.
        var best = LOWEST;
        var best_i = NONE;
        var i = lane;
        for (; i + 7u * WG < p.vocab; i += 8u * WG) {
            let v0 = logits[i];
            let v1 = logits[i + WG];
            let v2 = logits[i + 2u * WG];
            let v3 = logits[i + 3u * WG];
            let v4 = logits[i + 4u * WG];
            let v5 = logits[i + 5u * WG];
            let v6 = logits[i + 6u * WG];
            let v7 = logits[i + 7u * WG];
            consider(v0, i, &best, &best_i);
            consider(v1, i + WG, &best, &best_i);
            consider(v2, i + 2u * WG, &best, &best_i);
            consider(v3, i + 3u * WG, &best, &best_i);
            consider(v4, i + 4u * WG, &best, &best_i);
            consider(v5, i + 5u * WG, &best, &best_i);
            consider(v6, i + 6u * WG, &best, &best_i);
            consider(v7, i + 7u * WG, &best, &best_i);
        }
        for (; i < p.vocab; i += WG) {
            consider(logits[i], i, &best, &best_i);
        }
        let m = reduce_max(lane, best);
        var cand = NONE;
        if (best_i != NONE && best == m) {
            cand = best_i;
        }
        red_u[lane] = cand;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lane < s) {
                red_u[lane] = min(red_u[lane], red_u[lane + s]);
            }
            workgroupBarrier();
        }
        if (lane == 0u) {
            chosen[0] = red_u[0];
            tokens[end % p.max_seq] = red_u[0];
        }
        return;
    }

    let inv_t = 1.0 / p.temperature;
    var local_max = LOWEST;
    var local_min = -LOWEST;
    for (var i = lo_i; i < hi_i; i++) {
        let x = logits[i] * inv_t;
        local_max = max(local_max, x);
        local_min = min(local_min, x);
    }
    let m = reduce_max(lane, local_max);
    var threshold = reduce_min(lane, local_min);

    // top-k: the largest threshold that keeps at least k tokens.
    if (p.top_k > 0u && p.top_k < p.vocab) {
        var lo = threshold;
        var hi = m;
        for (var it = 0u; it < 32u; it++) {
            let mid = lo + (hi - lo) * 0.5;
            var c = 0u;
            for (var i = lo_i; i < hi_i; i++) {
                c += u32(logits[i] * inv_t >= mid);
            }
            if (reduce_count(lane, c) >= p.top_k) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        threshold = lo;
    }

    // top-p: the largest threshold whose kept mass is at least top_p of the top-k mass.
    if (p.top_p < 1.0) {
        var z = 0.0;
        for (var i = lo_i; i < hi_i; i++) {
            let x = logits[i] * inv_t;
            if (x >= threshold) {
                z += exp(x - m);
            }
        }
        let target_mass = reduce_sum(lane, z) * p.top_p;
        var lo = threshold;
        var hi = m;
        for (var it = 0u; it < 32u; it++) {
            let mid = lo + (hi - lo) * 0.5;
            var s = 0.0;
            for (var i = lo_i; i < hi_i; i++) {
                let x = logits[i] * inv_t;
                if (x >= mid) {
                    s += exp(x - m);
                }
            }
            if (reduce_sum(lane, s) >= target_mass) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        threshold = lo;
    }

    // Draw: cumulative mass in index order; the invocation whose chunk holds the target
    // finds the token.
    var mass = 0.0;
    var last_kept = NONE;
    for (var i = lo_i; i < hi_i; i++) {
        let x = logits[i] * inv_t;
        if (x >= threshold) {
            mass += exp(x - m);
            last_kept = i;
        }
    }
    red_f[lane] = mass;
    if (lane == 0u) {
        atomicStore(&picked, NONE);
    }
    workgroupBarrier();
    if (lane == 0u) {
        // Exclusive prefix sums, serially: 256 additions in a fixed order.
        var acc = 0.0;
        for (var j = 0u; j < WG; j++) {
            let v = red_f[j];
            red_f[j] = acc;
            acc += v;
        }
        red_u[0] = bitcast<u32>(acc);
    }
    workgroupBarrier();
    let total = bitcast<f32>(red_u[0]);
    let u = f32(pcg(p.seed ^ pcg(end)) >> 8u) / 16777216.0;
    let goal = u * total;
    // Offsets are compared within the chunk, accumulated in the order `mass` was, so the
    // invocation that accepts the goal always finds its token.
    let rel = goal - red_f[lane];
    if (mass > 0.0 && rel >= 0.0 && rel < mass) {
        var acc = 0.0;
        for (var i = lo_i; i < hi_i; i++) {
            let x = logits[i] * inv_t;
            if (x >= threshold) {
                acc += exp(x - m);
                if (rel < acc) {
                    atomicMin(&picked, i);
                    break;
                }
            }
        }
    }
    workgroupBarrier();
    // Rounding can leave the goal just past the last kept token's mass.
    red_u[lane] = select(0u, last_kept + 1u, last_kept != NONE);
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            red_u[lane] = max(red_u[lane], red_u[lane + s]);
        }
        workgroupBarrier();
    }
    let found = atomicLoad(&picked);
    if (lane == 0u) {
        var id = found;
        if (id == NONE) {
            id = red_u[0] - 1u;
        }
        chosen[0] = id;
        tokens[end % p.max_seq] = id;
    }
}
