// The top-k / top-p cut of shaders/sample.wgsl found among candidates in workgroup memory: a
// pass counts the tokens and their mass at or above NB bounds below the largest logit; the two
// bounds around the cut (the k-th largest logit, or where the mass from the top reaches its
// goal) make a window, and where it holds at most CAP tokens they are collected there, sorted
// and cut; else the pass runs again on NB bounds spaced evenly inside the window (ROUNDS passes
// at most; then the caller bisects over the vocabulary). Where the window reaches the largest
// logit, every kept token is in workgroup memory and the draw happens there; else over the
// vocabulary. `sample_route` in src/ops/sample.rs mirrors the route.

// Sums eight values (a, then b) over the workgroup into stats[out + q]: three barriers
// instead of a tree's eight per value. cand_x and cand_i serve as scratch.
fn reduce8(lane: u32, a: vec4<f32>, b: vec4<f32>, out: u32) {
    for (var q = 0u; q < 4u; q++) {
        cand_x[q * WG + lane] = a[q];
        cand_i[q * WG + lane] = bitcast<u32>(b[q]);
    }
    workgroupBarrier();
    let q = lane / 32u;
    let part = lane % 32u;
    var s = 0.0;
    for (var l = part * 8u; l < part * 8u + 8u; l++) {
        if (q < 4u) {
            s += cand_x[q * WG + l];
        } else {
            s += bitcast<f32>(cand_i[(q - 4u) * WG + l]);
        }
    }
    red_f[lane] = s;
    workgroupBarrier();
    if (lane < 8u) {
        var t = 0.0;
        for (var k = 0u; k < 32u; k++) {
            t += red_f[lane * 32u + k];
        }
        stats[out + lane] = t;
    }
    workgroupBarrier();
}


// Sorts cand_* [0, n2) (n2 a power of two, uniform): by scaled logit descending then index,
// or by index alone. Entries with index NONE go last either way.
fn before(ax: f32, ai: u32, bx: f32, bi: u32, by_value: bool) -> bool {
    if (!by_value || ai == NONE || bi == NONE) {
        return ai < bi;
    }
    return ax > bx || (ax == bx && ai < bi);
}

fn bitonic(lane: u32, n2: u32, by_value: bool) {
    for (var k = 2u; k <= n2; k = k << 1u) {
        for (var j = k >> 1u; j > 0u; j = j >> 1u) {
            for (var t = lane; t < n2; t += WG) {
                let u = t ^ j;
                if (u > t) {
                    let ax = cand_x[t];
                    let ai = cand_i[t];
                    let bx = cand_x[u];
                    let bi = cand_i[u];
                    let up = (t & k) == 0u;
                    if (select(before(ax, ai, bx, bi, by_value), before(bx, bi, ax, ai, by_value), up)) {
                        cand_x[t] = bx;
                        cand_i[t] = bi;
                        cand_x[u] = ax;
                        cand_i[u] = ai;
                    }
                }
            }
            workgroupBarrier();
        }
    }
}

fn pow2_at_least(n: u32) -> u32 {
    return select(1u << (32u - countLeadingZeros(n - 1u)), 1u, n <= 1u);
}

// Hillis-Steele over the lanes: leaves the inclusive sums in red_f and returns the one before
// this lane's (so that lane l's share is exactly [red_f[l - 1], red_f[l]), no gaps between).
fn scan_lanes(lane: u32, v: f32) -> f32 {
    red_f[lane] = v;
    workgroupBarrier();
    for (var off = 1u; off < WG; off = off << 1u) {
        var s = red_f[lane];
        if (lane >= off) {
            s += red_f[lane - off];
        }
        workgroupBarrier();
        red_f[lane] = s;
        workgroupBarrier();
    }
    var before = 0.0;
    if (lane > 0u) {
        before = red_f[lane - 1u];
    }
    return before;
}

// cand_c[t] = the sum of exp(cand_x[s] - m) over s <= t < n (n <= CAP, four a lane, the lanes'
// sums scanned); returns the whole sum.
fn prefix(lane: u32, n: u32, m: f32) -> f32 {
    let base = lane * 4u;
    var acc = 0.0;
    for (var q = 0u; q < 4u; q++) {
        let t = base + q;
        if (t < n) {
            acc += exp(cand_x[t] - m);
        }
        cand_c[t] = acc;
    }
    let before_lane = scan_lanes(lane, acc);
    for (var q = 0u; q < 4u; q++) {
        cand_c[base + q] += before_lane;
    }
    let total = red_f[WG - 1u];
    workgroupBarrier();
    return total;
}

// How many of the sorted candidates [0, n) lie at or above x (they are a prefix).
fn kept_through(lane: u32, n: u32, x: f32) -> u32 {
    workgroupBarrier();
    for (var t = lane; t < n; t += WG) {
        if (cand_x[t] >= x && (t + 1u == n || cand_x[t + 1u] < x)) {
            decided = t + 1u;
        }
    }
    return workgroupUniformLoad(&decided);
}

// Count and mass of the scaled logits at or above each bound into stats (counts at [0, NB),
// masses at [NB, 2 NB)); returns the mass of all of them.
fn measure(lane: u32, bd: Bounds, m: f32, inv_t: f32) -> f32 {
    let acc = sweep(MEASURE, lane, inv_t, m, 0.0, bd);
    reduce8(lane, acc.c0, acc.c1, 0u);
    reduce8(lane, acc.c2, acc.m0, 8u);
    reduce8(lane, acc.m1, acc.m2, 16u);
    return reduce_sum(lane, acc.s);
}

fn bound_at(bd: Bounds, b: u32) -> f32 {
    let v = select(select(bd.b2, bd.b1, b < 8u), bd.b0, b < 4u);
    return v[b % 4u];
}

const ROUNDS: u32 = 6u;
const DONE: u32 = 1u;
const AGAIN: u32 = 2u;

// The window the last `narrow` found: its top and bottom, the count and mass at or above its
// top, whether it reaches the largest logit (1.0), the goal it narrowed to.
var<workgroup> win: array<f32, 6>;

// Narrows a cut to a window [bottom, top) of at most CAP tokens: the k-th largest logit where
// `by_count` (count(x >= cut) >= goal), else where the mass from the top reaches goal (times all
// the mass where `of_all`). The window reaches the largest logit while the tokens at or above
// its bottom fit (then every kept token is in workgroup memory). Its tokens are collected and
// sorted by value; returns how many, or NONE where ROUNDS passes did not narrow it that far
// (ties by the thousand).
fn narrow(lane: u32, m: f32, mn: f32, inv_t: f32, by_count: bool, goal_in: f32, of_all: bool) -> u32 {
    let pow2 = vec4<f32>(0.125, 0.25, 0.5, 1.0);
    var bd = Bounds(m - pow2, m - 16.0 * pow2, m - 256.0 * pow2);
    workgroupBarrier();  // every lane done reading the window before
    if (lane == 0u) {
        win = array<f32, 6>(m, mn, 0.0, 0.0, 1.0, goal_in);
    }
    // The count at or above the window's bottom (lane 0's): all tokens at first.
    var c_bottom = f32(p.vocab);
    var goal = goal_in;
    for (var round = 0u; round < ROUNDS; round++) {
        let z = measure(lane, bd, m, inv_t);
        if (lane == 0u) {
            if (of_all && round == 0u) {
                goal = goal_in * z;
                win[5] = goal;
            }
            var b = 0u;
            for (; b < NB; b++) {
                if ((by_count && stats[b] >= goal) || (!by_count && stats[NB + b] >= goal)) {
                    break;
                }
            }
            // The window: from bound b (else the old bottom) up to bound b - 1 (else the old
            // top), or up to the largest logit while all from bound b up fit.
            if (b < NB) {
                win[1] = bound_at(bd, b);
                c_bottom = stats[b];
            }
            if (b > 0u && !(win[4] > 0.0 && c_bottom <= f32(CAP))) {
                win[0] = bound_at(bd, b - 1u);
                win[2] = stats[b - 1u];
                win[3] = stats[NB + b - 1u];
                win[4] = 0.0;
            }
            if (c_bottom - win[2] <= f32(CAP)) {
                decided = DONE;
            } else if (round + 1u < ROUNDS) {
                decided = AGAIN;
            } else {
                decided = NONE;
            }
        }
        let d = workgroupUniformLoad(&decided);
        if (d == NONE) {
            return NONE;
        }
        if (d == DONE) {
            break;
        }
        let top = workgroupUniformLoad(&win[0]);
        let bottom = workgroupUniformLoad(&win[1]);
        let gap = (top - bottom) / f32(NB + 1u);
        let k = vec4<f32>(1.0, 2.0, 3.0, 4.0);
        bd = Bounds(top - gap * k, top - gap * (k + 4.0), top - gap * (k + 8.0));
    }
    publish(lane, 0u);
    if (lane == 0u) {
        atomicStore(&n_cand, 0u);
    }
    let top = workgroupUniformLoad(&win[0]);
    let bottom = workgroupUniformLoad(&win[1]);
    let open = workgroupUniformLoad(&win[4]) > 0.0;
    // Collected in no order (COLLECT keeps x in [thr, bd.b0.x)), then sorted by value.
    let window_top = select(top, -LOWEST, open);
    sweep(COLLECT, lane, inv_t, m, bottom, Bounds(vec4<f32>(window_top), vec4<f32>(0.0), vec4<f32>(0.0)));
    workgroupBarrier();
    publish(lane, min(atomicLoad(&n_cand), CAP));
    let n = workgroupUniformLoad(&decided);
    if (n == 0u) {
        return NONE;  // only where the logits hold NaN or infinities
    }
    let n2 = pow2_at_least(n);
    for (var t = n + lane; t < n2; t += WG) {
        cand_i[t] = NONE;
    }
    workgroupBarrier();
    bitonic(lane, n2, true);
    return n;
}

// The first of the window's sorted tokens [0, n) where the mass from the top (win[3] above the
// window, then the window's running sum) reaches goal, or the last one.
fn mass_cut(lane: u32, n: u32, m: f32, goal: f32) -> f32 {
    prefix(lane, n, m);
    let above = win[3];
    publish(lane, n - 1u);
    workgroupBarrier();
    for (var t = lane; t < n; t += WG) {
        if (above + cand_c[t] >= goal && (t == 0u || above + cand_c[t - 1u] < goal)) {
            decided = t;
        }
    }
    let at = workgroupUniformLoad(&decided);
    return cand_x[at];
}

// The top-k / top-p cut and the draw: the token, or NONE (the caller bisects).
fn from_candidates(lane: u32, m: f32, mn: f32, inv_t: f32, k_on: bool, p_on: bool, u: f32) -> u32 {
    var cut = LOWEST;
    var n = 0u;
    var mass_goal = 0.0;
    if (k_on) {
        n = narrow(lane, m, mn, inv_t, true, f32(p.top_k), false);
        if (n == NONE) {
            return NONE;
        }
        cut = cand_x[p.top_k - u32(workgroupUniformLoad(&win[2])) - 1u];
        if (p_on) {
            // top_p of the top-k mass: above the window, then the window's tokens at or above
            // the cut.
            let kept = kept_through(lane, n, cut);
            mass_goal = (win[3] + prefix(lane, kept, m)) * p.top_p;
            if (workgroupUniformLoad(&win[4]) > 0.0) {
                cut = mass_cut(lane, kept, m, mass_goal);
            } else {
                n = narrow(lane, m, mn, inv_t, false, mass_goal, false);
                if (n == NONE) {
                    return NONE;
                }
                cut = mass_cut(lane, n, m, mass_goal);
            }
        }
    } else {
        // top-p alone: top_p of all the mass (which narrow's first pass sums).
        n = narrow(lane, m, mn, inv_t, false, p.top_p, true);
        if (n == NONE) {
            return NONE;
        }
        cut = mass_cut(lane, n, m, workgroupUniformLoad(&win[5]));
    }
    if (workgroupUniformLoad(&win[4]) == 0.0) {
        // Kept tokens lie above the window: the draw goes over the vocabulary.
        return chunked_draw(lane, m, inv_t, cut, u);
    }
    let kept = kept_through(lane, n, cut);

    // The draw over the kept tokens in index order.
    let k2 = pow2_at_least(kept);
    for (var t = kept + lane; t < k2; t += WG) {
        cand_i[t] = NONE;
    }
    workgroupBarrier();
    bitonic(lane, k2, false);
    let total = prefix(lane, kept, m);
    let goal = u * total;
    publish(lane, cand_i[kept - 1u]);  // rounding can leave the goal past the last one's mass
    workgroupBarrier();
    for (var t = lane; t < kept; t += WG) {
        if (goal < cand_c[t] && (t == 0u || goal >= cand_c[t - 1u])) {
            decided = cand_i[t];
        }
    }
    return workgroupUniformLoad(&decided);
}

