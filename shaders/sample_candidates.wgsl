// The top-k / top-p cut of shaders/sample.wgsl found among candidates in workgroup memory:
// one pass counts the tokens and their mass at or above NB bounds below the largest logit, and
// the tightest bound that holds at most CAP tokens and the whole cut (k tokens for top-k, top_p
// of the mass for top-p alone) collects its tokens there, which are sorted and cut. Where the
// bounds jump from too few tokens to too many, the pass runs again on NB bounds spaced evenly
// between those two (twice at most); where none fits, the caller bisects over the vocabulary.
// `sample_route` in src/ops/sample.rs mirrors the choice.

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

// The top-k / top-p cut among candidates: none (the distribution is too flat for CAP of them)
// or the token drawn.
fn from_candidates(lane: u32, m: f32, inv_t: f32, k_on: bool, p_on: bool, u: f32) -> u32 {
    let pow2 = vec4<f32>(0.125, 0.25, 0.5, 1.0);
    var bd = Bounds(m - pow2, m - 16.0 * pow2, m - 256.0 * pow2);
    var pick = NONE;
    var total_mass = 0.0;
    for (var round = 0u; round < 3u; round++) {
        total_mass = measure(lane, bd, m, inv_t);
        // The tightest bound holding at most CAP tokens and all of the cut: k of them for top-k
        // (whose mass then bounds top-p's), else top_p of all the mass (with a margin for the
        // candidates' mass summed in another order). Else, where the last bound with room and
        // the next one lie, to refine between (REFINE + b), or none.
        if (lane == 0u) {
            var found = NONE;
            var roomy = NONE;
            for (var b = 0u; b < NB; b++) {
                let c = stats[b];
                let fits = c <= f32(CAP);
                let holds_k = !k_on || c >= f32(p.top_k);
                let holds_p = k_on || !p_on || stats[NB + b] >= p.top_p * total_mass * 1.0001;
                if (fits && holds_k && holds_p) {
                    found = b;
                    break;
                }
                if (fits) {
                    roomy = b;
                }
            }
            if (found == NONE && roomy != NONE && roomy + 1u < NB && round < 2u) {
                found = REFINE + roomy;
            }
            decided = found;
        }
        let d = workgroupUniformLoad(&decided);
        if (d < REFINE) {
            pick = d;
            break;
        }
        if (d == NONE) {
            break;
        }
        let hi = bound_at(bd, d - REFINE);
        let lo = bound_at(bd, d - REFINE + 1u);
        let gap = (hi - lo) / f32(NB + 1u);
        let k = vec4<f32>(1.0, 2.0, 3.0, 4.0);
        bd = Bounds(hi - gap * k, hi - gap * (k + 4.0), hi - gap * (k + 8.0));
    }
    if (pick == NONE) {
        return NONE;
    }
    if (lane == 0u) {
        atomicStore(&n_cand, 0u);
    }
    workgroupBarrier();
    let cut = bound_at(bd, pick);

    // The candidates, in no order, then sorted by value.
    sweep(COLLECT, lane, inv_t, m, cut, bd);
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

    var kept = n;
    if (k_on) {
        kept = kept_through(lane, n, cand_x[p.top_k - 1u]);
    }
    if (p_on) {
        let kept_mass = prefix(lane, kept, m);
        var goal_mass = kept_mass * p.top_p;
        if (!k_on) {
            goal_mass = total_mass * p.top_p;
        }
        // The first sorted candidate whose running mass reaches the goal, then its ties.
        publish(lane, NONE);
        workgroupBarrier();
        for (var t = lane; t < kept; t += WG) {
            if (cand_c[t] >= goal_mass && (t == 0u || cand_c[t - 1u] < goal_mass)) {
                decided = t;
            }
        }
        let at = workgroupUniformLoad(&decided);
        if (at != NONE) {
            kept = kept_through(lane, kept, cand_x[at]);
        }
    }

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

