// Attention of a prompt pass, flash-attention style: one workgroup takes BQ query rows of one KV
// head against the context in tiles of BK cache positions staged in workgroup memory, with an
// online softmax (running max and sum, the accumulator rescaled as the max grows). The same
// queries, cache layout, masks and results as shaders/attention.wgsl (see there for the ring of
// slots), which gives each query its own workgroup and so reads every K/V row once per query;
// here a row staged once serves BQ queries.
//
// Rows of KV head kvh, token-major: row g is token g / group of query head kvh * group +
// g % group (group = n_heads / n_kv_heads), so the rows of a tile are a few adjacent tokens of
// every query head reading this KV head, and their causal and window bounds are close.
// Lanes: eight share two rows; for those rows each lane scores four positions of the tile
// (c, c + 8, c + 16, c + 24) and sums DV column groups of four values (c, c + 8, ...), so a
// lane keeps 2 x 4 scores and 2 x DV vec4 sums in registers and reads 6 vec4 of workgroup
// memory per 8 dot products. Row strides are padded by one vec4 so the eight positions (and the
// rows) a load reaches fall in different banks.
// No subgroup operations: the eight lanes of a row meet in workgroup memory, so the kernel runs
// on every adapter (SwiftShader has no subgroups).
// Needs head_dim a multiple of 4 and at most 32 * DV. Cache rows are decoded to f32 while they
// are staged, so every KV format takes the same inner loops.

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>; // [n_tokens, n_heads, head_dim / 4]
#ifdef KV_F16
// Four values a vec2: two pack2x16float words.
@group(0) @binding(1) var<storage, read> k_cache: array<vec2<u32>>; // [n_kv_heads, max_seq, head_dim / 4]
@group(0) @binding(2) var<storage, read> v_cache: array<vec2<u32>>;
#else
#ifdef KV_Q8
@group(0) @binding(1) var<storage, read> k_cache: array<u32>; // [n_kv_heads, max_seq, row_words]
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
#else
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<f32>>; // [n_kv_heads, max_seq, head_dim / 4]
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<f32>>;
#endif
#endif
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>; // [n_tokens, n_heads, head_dim / 4]
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

const WG: u32 = 64u;
const BQ: u32 = 16u;
const BK: u32 = 32u;
// Lanes sharing two rows.
const LANES: u32 = 8u;
// Column groups of four values per lane: head_dim <= 4 * LANES * DV.
const DV: u32 = ${DV}u;
// Largest padded row stride, in vec4.
const STRIDE: u32 = LANES * DV + 1u;
// Probability rows padded by one so the two rows of the four lane groups of a warp differ in bank.
const PSTRIDE: u32 = BK + 1u;

var<workgroup> qs: array<vec4<f32>, BQ * STRIDE>;  // the tile's queries, scaled
var<workgroup> kv: array<vec4<f32>, BK * STRIDE>;  // the K tile, then the V tile
var<workgroup> probs: array<f32, BQ * PSTRIDE>;
var<workgroup> lane_part: array<f32, BQ * LANES>;  // per row and lane: the tile's max, at the end the sum

#ifdef KV_Q8
fn q8x4(word: u32, scale: u32) -> vec4<f32> {
    let w = bitcast<i32>(word);
    let v = vec4<f32>(f32(extractBits(w, 0u, 8u)), f32(extractBits(w, 8u, 8u)), f32(extractBits(w, 16u, 8u)), f32(extractBits(w, 24u, 8u)));
    return v * bitcast<f32>(scale);
}
#endif

#ifdef KV_F16
fn f16x4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
#endif

// Values 4c .. 4c + 3 of cache row `row` (KV head and slot: kvh * max_seq + slot).
fn k4(row: u32, c: u32) -> vec4<f32> {
#ifdef KV_F16
    return f16x4(k_cache[row * (p.head_dim / 4u) + c]);
#else
#ifdef KV_Q8
    return q8x4(k_cache[row * p.row_words + 1u + c], k_cache[row * p.row_words]);
#else
    return k_cache[row * (p.head_dim / 4u) + c];
#endif
#endif
}

fn v4(row: u32, c: u32) -> vec4<f32> {
#ifdef KV_F16
    return f16x4(v_cache[row * (p.head_dim / 4u) + c]);
#else
#ifdef KV_Q8
    return q8x4(v_cache[row * p.row_words + 1u + c], v_cache[row * p.row_words]);
#else
    return v_cache[row * (p.head_dim / 4u) + c];
#endif
#endif
}

// Whether row g sees slot j (rows past the pass's tokens see none).
fn sees(g: u32, j: u32) -> bool {
    let t = g / (p.n_heads / p.n_kv_heads);
    return t < p.n_tokens && j < context_len(t) && in_window(t, j);
}

// Where row g of KV head kvh starts in q and out, in vec4.
fn row_at(g: u32, kvh: u32, n4: u32) -> u32 {
    let group = p.n_heads / p.n_kv_heads;
    return ((g / group) * p.n_heads + kvh * group + g % group) * n4;
}

// Stages cache positions start .. start + BK of K, or with `values` of V, into kv; zeros from
// `end` on, so that no value outside the context reaches a sum.
fn stage(values: bool, kv_row0: u32, start: u32, end: u32, lane: u32, n4: u32) {
    for (var e = lane; e < BK * n4; e += WG) {
        let j = e / n4;
        let c = e % n4;
        var x = vec4<f32>(0.0);
        if (start + j < end) {
            if (values) {
                x = v4(kv_row0 + start + j, c);
            } else {
                x = k4(kv_row0 + start + j, c);
            }
        }
        kv[j * (n4 + 1u) + c] = x;
    }
}

// The sum of the 8 lanes' values of row r in lane_part, or with `largest` their maximum.
fn lanes(r: u32, largest: bool) -> f32 {
    var x = lane_part[r * LANES];
    for (var i = 1u; i < LANES; i++) {
        let y = lane_part[r * LANES + i];
        x = select(x + y, max(x, y), largest);
    }
    return x;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let lane = lid.x;
    let kvh = wid.y;
    let group = p.n_heads / p.n_kv_heads;
    let n_rows = p.n_tokens * group;
    let tiles = (n_rows + BQ - 1u) / BQ;
    if (wid.x >= tiles || kvh >= p.n_kv_heads) {
        return;
    }
    // The tiles of the last tokens see the most positions: they are dispatched first.
    let row0 = (tiles - 1u - wid.x) * BQ;
    let n4 = p.head_dim / 4u;
    let rs = n4 + 1u;
    let kv_row0 = kvh * p.max_seq;

    for (var e = lane; e < BQ * n4; e += WG) {
        let r = e / n4;
        var x = vec4<f32>(0.0);
        if (row0 + r < n_rows) {
            x = q[row_at(row0 + r, kvh, n4) + e % n4] * p.scale;
        }
        qs[r * rs + e % n4] = x;
    }

    // This lane's rows r0, r0 + 1 (tile rows; g0 in the KV head) and column c.
    let r0 = 2u * (lane / LANES);
    let g0 = row0 + r0;
    let c = lane % LANES;

    // The positions the tile's rows see: up to the last token's, and with a window from the
    // first token's window on when no position reaches past max_seq (then slot = position).
    let t_first = row0 / group;
    let t_last = (min(row0 + BQ, n_rows) - 1u) / group;
    let end = context_len(t_last);
    var begin = 0u;
    if (p.window > 0u && step.pos + t_last < p.max_seq) {
        let first = step.pos + t_first + 1u;
        begin = first - min(first, p.window);
    }

    var m = vec2<f32>(LOWEST);
    var l = vec2<f32>(0.0); // this lane's positions' share of each row's sum
    var acc: array<array<vec4<f32>, DV>, 2>;
    for (var start = begin; start < end; start += BK) {
        stage(false, kv_row0, start, end, lane, n4);
        workgroupBarrier();

        // Scores of positions c, c + 8, c + 16, c + 24: q times the matrix of their K columns.
        var s: array<vec4<f32>, 2>;
        for (var d = 0u; d < n4; d++) {
            let k = mat4x4<f32>(kv[c * rs + d], kv[(c + LANES) * rs + d], kv[(c + 2u * LANES) * rs + d], kv[(c + 3u * LANES) * rs + d]);
            s[0] += qs[r0 * rs + d] * k;
            s[1] += qs[(r0 + 1u) * rs + d] * k;
        }
        var seen: array<vec4<bool>, 2>;
        for (var r = 0u; r < 2u; r++) {
            for (var i = 0u; i < 4u; i++) {
                seen[r][i] = sees(g0 + r, start + c + i * LANES);
                s[r][i] = select(LOWEST, capped(s[r][i]), seen[r][i]);
            }
            lane_part[(r0 + r) * LANES + c] = max(max(s[r].x, s[r].y), max(s[r].z, s[r].w));
        }
        // Every lane is done with the K tile and has written its maxima.
        workgroupBarrier();

        stage(true, kv_row0, start, end, lane, n4);
        for (var r = 0u; r < 2u; r++) {
            let m_new = max(m[r], lanes(r0 + r, true));
            // A row that has seen nothing yet keeps m = LOWEST and takes no probability.
            let pr = select(vec4<f32>(0.0), exp(s[r] - m_new), seen[r]);
            let correction = exp(m[r] - m_new);
            l[r] = l[r] * correction + dot(pr, vec4<f32>(1.0));
            m[r] = m_new;
            for (var i = 0u; i < 4u; i++) {
                probs[(r0 + r) * PSTRIDE + c + i * LANES] = pr[i];
            }
            for (var i = 0u; i < DV; i++) {
                acc[r][i] *= correction;
            }
        }
        workgroupBarrier();

        for (var j = 0u; j < BK; j++) {
            let pj = vec2<f32>(probs[r0 * PSTRIDE + j], probs[(r0 + 1u) * PSTRIDE + j]);
            for (var i = 0u; i < DV; i++) {
                let v = kv[j * rs + c + i * LANES];
                acc[0][i] += pj.x * v;
                acc[1][i] += pj.y * v;
            }
        }
        // The next tile's K overwrites V, probabilities and maxima.
        workgroupBarrier();
    }

    lane_part[r0 * LANES + c] = l.x;
    lane_part[(r0 + 1u) * LANES + c] = l.y;
    workgroupBarrier();
    for (var r = 0u; r < 2u; r++) {
        let sum = lanes(r0 + r, false);
        for (var i = 0u; i < DV; i++) {
            let col = c + i * LANES;
            if (g0 + r < n_rows && col < n4) {
                out[row_at(g0 + r, kvh, n4) + col] = acc[r][i] / sum;
            }
        }
    }
}
