// Picks the next token on the GPU so that only its id is read back: repetition penalty over a
// window of recent tokens, then greedy argmax, or temperature + top-k + top-p sampling with a
// seeded counter-based generator (the same draw for the same seed and position on any GPU).
// One workgroup. What it computes is `sample_cpu` in src/ops/sample.rs: top-k keeps the logits
// at or above the k-th largest, top-p the fewest largest (ties kept together) whose mass reaches
// top_p of the kept mass, and the draw walks the kept tokens in index order.
//
// Where it spends its time: a pass over the vocabulary waits one memory round trip per load a
// lane issues before using one, so every pass loads RUN logits a lane (a workgroup's width
// apart, so each load of the workgroup reads one contiguous run) before the first is used. The
// top-k / top-p cut is found among at most CAP candidates in workgroup memory (sorted there,
// shaders/sample_candidates.wgsl) rather than by bisection passes over the whole vocabulary,
// which stay for thousands of logits tied exactly.

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
// Logits a lane loads before it uses the first: eight groups of four, a workgroup's width apart.
const RUN: u32 = 32u;
// Candidates sorted in workgroup memory (three arrays of CAP words: 12 KiB of the 16 KiB every
// WebGPU device offers).
const CAP: u32 = 1024u;
// Candidate bounds m - 2^(b - 3) for b < NB, in units of logit / temperature: 1/8 to 256.
const NB: u32 = 12u;
// Hex: the decimal -3.40282347e38 lies just past f32's range, and Tint (unlike naga) rejects it.
const LOWEST: f32 = -0x1.fffffep+127f;
const NONE: u32 = 0xffffffffu;

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> cand_x: array<f32, CAP>;  // scaled logit
var<workgroup> cand_i: array<u32, CAP>;  // token id (NONE past the last)
var<workgroup> cand_c: array<f32, CAP>;  // inclusive prefix of exp(x - m)
var<workgroup> stats: array<f32, 32>;    // count and mass at each bound, then all the mass
var<workgroup> n_cand: atomic<u32>;
var<workgroup> decided: u32;             // a lane's finding, read back by all of them uniformly

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// Four logits a workgroup's width apart from i, scaled; past the vocabulary a load reads the
// last logit, and `visit` skips it.
fn at4(i: u32, scale: f32) -> vec4<f32> {
    let last = p.vocab - 1u;
    return vec4<f32>(
        logits[min(i, last)],
        logits[min(i + WG, last)],
        logits[min(i + 2u * WG, last)],
        logits[min(i + 3u * WG, last)],
    ) * scale;
}

// What one pass over the vocabulary gathers in a lane; each mode uses its own fields.
struct Acc {
    best: f32,       // GREEDY: the largest logit and its (lowest) index
    best_i: u32,
    hi: f32,         // EXTREMES
    lo: f32,
    c0: vec4<f32>,   // MEASURE: counts at or above bounds 0-3, 4-7, 8-11
    c1: vec4<f32>,
    c2: vec4<f32>,
    m0: vec4<f32>,   // MEASURE: their mass
    m1: vec4<f32>,
    m2: vec4<f32>,
    s: f32,          // MEASURE: all the mass; COUNT, MASS: at or above thr
}

// Bounds 0-11 below the largest scaled logit, four to a vector (kept in registers).
struct Bounds {
    b0: vec4<f32>,
    b1: vec4<f32>,
    b2: vec4<f32>,
}

const GREEDY: u32 = 0u;
const EXTREMES: u32 = 1u;
const MEASURE: u32 = 2u;
const COLLECT: u32 = 3u;   // candidates in [thr, bd.b0.x) into workgroup memory
const COUNT: u32 = 4u;
const MASS: u32 = 5u;

fn visit(mode: u32, x: f32, j: u32, m: f32, thr: f32, bd: Bounds, acc: ptr<function, Acc>) {
    if (j >= p.vocab) {
        return;
    }
    switch mode {
        case 0u: {
            // A larger logit, or the first one seen, replaces the best: a lane visits rising
            // indices, so it keeps its lowest tied index.
            if (x > (*acc).best || (*acc).best_i == NONE) {
                (*acc).best = x;
                (*acc).best_i = j;
            }
        }
        case 1u: {
            (*acc).hi = max((*acc).hi, x);
            (*acc).lo = min((*acc).lo, x);
        }
        case 2u: {
            let e = exp(x - m);
            (*acc).s += e;
            let g0 = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<f32>(x) >= bd.b0);
            let g1 = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<f32>(x) >= bd.b1);
            let g2 = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<f32>(x) >= bd.b2);
            (*acc).c0 += g0;
            (*acc).c1 += g1;
            (*acc).c2 += g2;
            (*acc).m0 += g0 * e;
            (*acc).m1 += g1 * e;
            (*acc).m2 += g2 * e;
        }
        case 3u: {
            if (x >= thr && x < bd.b0.x) {
                let slot = atomicAdd(&n_cand, 1u);
                if (slot < CAP) {
                    cand_x[slot] = x;
                    cand_i[slot] = j;
                }
            }
        }
        case 4u: {
            (*acc).s += select(0.0, 1.0, x >= thr);
        }
        default: {
            if (x >= thr) {
                (*acc).s += exp(x - m);
            }
        }
    }
}

fn visit4(mode: u32, v: vec4<f32>, i: u32, m: f32, thr: f32, bd: Bounds, acc: ptr<function, Acc>) {
    visit(mode, v.x, i, m, thr, bd, acc);
    visit(mode, v.y, i + WG, m, thr, bd, acc);
    visit(mode, v.z, i + 2u * WG, m, thr, bd, acc);
    visit(mode, v.w, i + 3u * WG, m, thr, bd, acc);
}

// A lane's pass over the vocabulary: runs of RUN logits (tokens lane + k * WG), each loaded
// whole before its first logit is visited, in rising index order. The loads are written out:
// an array of them returned by a function went through local memory on NVIDIA's compiler.
fn sweep(mode: u32, lane: u32, scale: f32, m: f32, thr: f32, bd: Bounds) -> Acc {
    let z4 = vec4<f32>(0.0);
    var acc = Acc(LOWEST, NONE, LOWEST, -LOWEST, z4, z4, z4, z4, z4, z4, 0.0);
    for (var i = lane; i < p.vocab; i += RUN * WG) {
        let a0 = at4(i, scale);
        let a1 = at4(i + 4u * WG, scale);
        let a2 = at4(i + 8u * WG, scale);
        let a3 = at4(i + 12u * WG, scale);
        let a4 = at4(i + 16u * WG, scale);
        let a5 = at4(i + 20u * WG, scale);
        let a6 = at4(i + 24u * WG, scale);
        let a7 = at4(i + 28u * WG, scale);
        visit4(mode, a0, i, m, thr, bd, &acc);
        visit4(mode, a1, i + 4u * WG, m, thr, bd, &acc);
        visit4(mode, a2, i + 8u * WG, m, thr, bd, &acc);
        visit4(mode, a3, i + 12u * WG, m, thr, bd, &acc);
        visit4(mode, a4, i + 16u * WG, m, thr, bd, &acc);
        visit4(mode, a5, i + 20u * WG, m, thr, bd, &acc);
        visit4(mode, a6, i + 24u * WG, m, thr, bd, &acc);
        visit4(mode, a7, i + 28u * WG, m, thr, bd, &acc);
    }
    return acc;
}

fn no_bounds() -> Bounds {
    return Bounds(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
}

// Lane 0 sets `decided` once every lane is done reading what it held before.
fn publish(lane: u32, v: u32) {
    workgroupBarrier();
    if (lane == 0u) {
        decided = v;
    }
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

// The largest logit, the lowest index among ties; (value, index) pairs meet in one tree.
fn greedy(lane: u32) -> u32 {
    let acc = sweep(GREEDY, lane, 1.0, 0.0, 0.0, no_bounds());
    let best = acc.best;
    let best_i = acc.best_i;
    red_f[lane] = best;
    red_u[lane] = best_i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            let o = red_u[lane + s];
            let ov = red_f[lane + s];
            let mine = red_u[lane];
            let mv = red_f[lane];
            if (o != NONE && (mine == NONE || ov > mv || (ov == mv && o < mine))) {
                red_f[lane] = ov;
                red_u[lane] = o;
            }
        }
        workgroupBarrier();
    }
    return red_u[0];
}

// The bisection over the whole vocabulary where thousands of exact ties defeat the candidates:
// the largest threshold keeping at least k tokens, then the largest whose kept mass reaches
// top_p of the top-k mass.
fn bisect(lane: u32, m: f32, mn: f32, inv_t: f32, k_on: bool, p_on: bool) -> f32 {
    var threshold = mn;
    if (k_on) {
        var lo = threshold;
        var hi = m;
        for (var it = 0u; it < 32u; it++) {
            let mid = lo + (hi - lo) * 0.5;
            if (u32(reduce_sum(lane, mass_from(lane, mid, inv_t, m, false))) >= p.top_k) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        threshold = lo;
    }
    if (p_on) {
        let goal_mass = reduce_sum(lane, mass_from(lane, threshold, inv_t, m, true)) * p.top_p;
        var lo = threshold;
        var hi = m;
        for (var it = 0u; it < 32u; it++) {
            let mid = lo + (hi - lo) * 0.5;
            if (reduce_sum(lane, mass_from(lane, mid, inv_t, m, true)) >= goal_mass) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        threshold = lo;
    }
    return threshold;
}

// A lane's count (or mass) of scaled logits at or above thr.
fn mass_from(lane: u32, thr: f32, inv_t: f32, m: f32, weigh: bool) -> f32 {
    if (weigh) {
        return sweep(MASS, lane, inv_t, m, thr, no_bounds()).s;
    }
    return sweep(COUNT, lane, inv_t, m, thr, no_bounds()).s;
}

fn chunk_add(v: vec4<f32>, i: u32, m: f32, thr: f32, mass: ptr<function, f32>, last: ptr<function, u32>) {
    if (v.x >= thr) { *mass += exp(v.x - m); *last = i; }
    if (v.y >= thr) { *mass += exp(v.y - m); *last = i + 1u; }
    if (v.z >= thr) { *mass += exp(v.z - m); *last = i + 2u; }
    if (v.w >= thr) { *mass += exp(v.w - m); *last = i + 3u; }
}

// The draw over every token at or above thr in index order: each lane sums the mass of a
// contiguous chunk (sixteen loads in flight), the chunks' masses are scanned, and the whole
// workgroup then walks the chunk that holds the goal, one token a lane (where a chunk fits in
// CAP), so that no lane waits on its loads one after another.
fn chunked_draw(lane: u32, m: f32, inv_t: f32, thr: f32, u: f32) -> u32 {
    let chunk = (p.vocab + WG - 1u) / WG;
    let lo_i = min(lane * chunk, p.vocab);
    let hi_i = min(lo_i + chunk, p.vocab);
    var mass = 0.0;
    var last_kept = NONE;
    var i = lo_i;
    for (; i + 16u <= hi_i; i += 16u) {
        let a = vec4<f32>(logits[i], logits[i + 1u], logits[i + 2u], logits[i + 3u]) * inv_t;
        let b = vec4<f32>(logits[i + 4u], logits[i + 5u], logits[i + 6u], logits[i + 7u]) * inv_t;
        let c = vec4<f32>(logits[i + 8u], logits[i + 9u], logits[i + 10u], logits[i + 11u]) * inv_t;
        let d = vec4<f32>(logits[i + 12u], logits[i + 13u], logits[i + 14u], logits[i + 15u]) * inv_t;
        chunk_add(a, i, m, thr, &mass, &last_kept);
        chunk_add(b, i + 4u, m, thr, &mass, &last_kept);
        chunk_add(c, i + 8u, m, thr, &mass, &last_kept);
        chunk_add(d, i + 12u, m, thr, &mass, &last_kept);
    }
    for (; i < hi_i; i++) {
        let x = logits[i] * inv_t;
        if (x >= thr) {
            mass += exp(x - m);
            last_kept = i;
        }
    }
    // The last kept token, where rounding leaves the goal past all the mass.
    red_u[lane] = select(0u, last_kept + 1u, last_kept != NONE);
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            red_u[lane] = max(red_u[lane], red_u[lane + s]);
        }
        workgroupBarrier();
    }
    let fallback = workgroupUniformLoad(&red_u[0]) - 1u;
    let before = scan_lanes(lane, mass);
    let goal = u * red_f[WG - 1u];
    // The chunk holding the goal, and the goal's offset into it.
    publish(lane, NONE);
    workgroupBarrier();
    if (mass > 0.0 && goal >= before && goal < red_f[lane]) {
        decided = lane;
        red_u[0] = bitcast<u32>(goal - before);
    }
    let owner = workgroupUniformLoad(&decided);
    if (owner == NONE) {
        return fallback;
    }
    let rel = bitcast<f32>(red_u[0]);
    let first = owner * chunk;
    let n = min(first + chunk, p.vocab) - first;
    if (chunk <= CAP) {
        for (var t = lane; t < CAP; t += WG) {
            var x = LOWEST;
            if (t < n) {
                let y = logits[first + t] * inv_t;
                x = select(LOWEST, y, y >= thr);
            }
            cand_x[t] = x;
        }
        workgroupBarrier();
        prefix(lane, n, m);
        publish(lane, NONE);
        workgroupBarrier();
        for (var t = lane; t < n; t += WG) {
            if (cand_x[t] != LOWEST && rel < cand_c[t] && (t == 0u || rel >= cand_c[t - 1u])) {
                decided = first + t;
            }
        }
        let found = workgroupUniformLoad(&decided);
        // Summed in another order than the chunk's mass: the offset can fall just past it.
        if (found != NONE) {
            return found;
        }
        return fallback;
    }
    // A chunk larger than CAP (a vocabulary over 262144): its lane walks it alone.
    publish(lane, NONE);
    workgroupBarrier();
    if (lane == owner) {
        var acc = 0.0;
        for (var j = first; j < first + n; j++) {
            let x = logits[j] * inv_t;
            if (x >= thr) {
                acc += exp(x - m);
                if (rel < acc) {
                    decided = j;
                    break;
                }
            }
        }
    }
    // Uniform, so that a caller may still meet barriers after this returns.
    let found = workgroupUniformLoad(&decided);
    if (found != NONE) {
        return found;
    }
    return fallback;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let lane = lid.x;
    let end = step.pos + step.n_tokens;

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

    var id = 0u;
    if (p.temperature <= 0.0) {
        id = greedy(lane);
    } else {
        let inv_t = 1.0 / p.temperature;
        // The largest and smallest scaled logits, in one tree.
        let ext = sweep(EXTREMES, lane, inv_t, 0.0, 0.0, no_bounds());
        let hi = ext.hi;
        let lo = ext.lo;
        red_f[lane] = hi;
        red_u[lane] = bitcast<u32>(lo);
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lane < s) {
                red_f[lane] = max(red_f[lane], red_f[lane + s]);
                red_u[lane] = bitcast<u32>(min(bitcast<f32>(red_u[lane]), bitcast<f32>(red_u[lane + s])));
            }
            workgroupBarrier();
        }
        let m = red_f[0];
        let mn = bitcast<f32>(red_u[0]);
        workgroupBarrier();

        let k_on = p.top_k > 0u && p.top_k < p.vocab;
        let p_on = p.top_p < 1.0;
        let u = f32(pcg(p.seed ^ pcg(end)) >> 8u) / 16777216.0;
        id = NONE;
        if (k_on || p_on) {
            id = from_candidates(lane, m, mn, inv_t, k_on, p_on, u);
        }
        if (id == NONE) {
            var thr = mn;
            if (k_on || p_on) {
                thr = bisect(lane, m, mn, inv_t, k_on, p_on);
            }
            id = chunked_draw(lane, m, inv_t, thr, u);
        }
    }
    if (lane == 0u) {
        chosen[0] = id;
        tokens[end % p.max_seq] = id;
    }
}
