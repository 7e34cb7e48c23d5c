// Decode attention (one token) with the RoPE + KV store folded in: q is the stacked Q/K/V
// projection's row [n_heads + 2 * n_kv_heads, head_dim], rotated here as
// shaders/rope_store.wgsl rotates, and the caches take the new K/V row. f32 cache, f16 (KV_F16:
// pack2x16float pairs) or q8 (KV_Q8: the row's scale word, then four signed bytes a word),
// stored and read back as the unfolded kernels store and read them; head_dim a multiple of 16
// (<= 256).
//
// Written for latency: at the contexts of a chat (a few hundred positions) a decode step's
// attention reads a few hundred KB a layer, so its time is the chain of dependent memory
// round trips, not bandwidth. One workgroup of WG lanes per (head, chunk of CHUNK positions);
// LPP = WG / CHUNK lanes share a position's K row (adjacent lanes, adjacent words), so the
// scores take one round of at most sixteen loads a lane; the softmax statistics are two-level
// sums in workgroup memory (two barriers each, no trees), or with subgroups (SG) each
// subgroup's maximum and sum combined behind one barrier for both; V is summed by head_dim / 4
// column lanes times WG / (head_dim / 4) position groups, whose first sixteen rows a lane are
// loaded before anything else (they depend on nothing the kernel computes), so their round trip
// overlaps the query's and the scores' instead of following the softmax; further rows in
// rounds of eight. Only the chunks that hold context positions do any work (the grid covers
// max_seq); when one chunk holds the whole context its workgroup writes the output itself,
// with no partial results, counters or merge. Longer contexts write per-chunk partials and
// the last workgroup of each head to arrive merges them (shaders/attention_merge.wgsl).
// Parameters and masks: shaders/attention_common.wgsl.

@group(0) @binding(0) var<storage, read> q: array<f32>;
// Four values of a cache row: f32, with KV_F16 two pack2x16float words, with KV_Q8 one word of
// four bytes after the row's scale word (src/ops/kv.rs).
#ifdef KV_F16
alias Kv4 = vec2<u32>;
#else
#ifdef KV_Q8
alias Kv4 = u32;
#else
alias Kv4 = vec4<f32>;
#endif
#endif
@group(0) @binding(1) var<storage, read_write> k_cache: array<Kv4>;
@group(0) @binding(2) var<storage, read_write> v_cache: array<Kv4>;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>; // [n_heads, chunks, head_dim + 2]
@group(0) @binding(4) var<storage, read> cos_sin: array<f32>;          // [max_seq, rot_dims / 2, 2]
// Workgroups of each head that have written their chunk; the last one sets it back to 0.
@group(0) @binding(5) var<storage, read_write> arrivals: array<atomic<u32>>; // [n_heads]
@group(0) @binding(6) var<storage, read_write> out: array<f32>;      // [1, n_heads, head_dim]
@group(0) @binding(7) var<uniform> p: Params;
@group(0) @binding(8) var<uniform> step: Step;

// Lanes of a workgroup, positions of a chunk (p.chunk_len), and lanes a position's K row.
const WG: u32 = ${WG}u;
const CHUNK: u32 = ${CHUNK}u;
const LPP: u32 = WG / CHUNK;
// Lanes that take the first level of a softmax statistic, CHUNK / RED entries each.
const RED: u32 = min(16u, CHUNK / 4u);
const MAX_HEAD_DIM: u32 = 256u;

var<workgroup> qs4: array<vec4<f32>, MAX_HEAD_DIM / 4u>;
var<workgroup> k_new: array<vec4<f32>, MAX_HEAD_DIM / 4u>;
var<workgroup> v_new: array<vec4<f32>, MAX_HEAD_DIM / 4u>;
var<workgroup> probs: array<f32, CHUNK>;
var<workgroup> dots: array<f32, WG>;
var<workgroup> stats: array<f32, RED>;
var<workgroup> merged: array<vec4<f32>, WG>;
var<workgroup> arrived: u32;
#ifdef SG
// Each subgroup's (maximum score, sum of exp(score - maximum)), subgroup i at i.
var<workgroup> sg_stats: array<vec2<f32>, WG>;
#endif
#ifdef KV_Q8
// The new K/V row's largest magnitudes, a lane's four values at its index, and the row's two
// scales once known: a q8 row is rounded to its scale, which needs the whole row.
var<workgroup> kv_max: array<vec2<f32>, MAX_HEAD_DIM / 4u>;
var<workgroup> fresh_scale: vec2<f32>;
#endif

// A cache row's length in Kv4 units, and where its values start (past Q8's scale word).
fn row_len(n4: u32) -> u32 {
#ifdef KV_Q8
    return n4 + 1u;
#else
    return n4;
#endif
}

fn row_values(row: u32) -> u32 {
#ifdef KV_Q8
    return row + 1u;
#else
    return row;
#endif
}

// Four values of a row; Q8's before its scale (the byte values).
fn kv_load(w: Kv4) -> vec4<f32> {
#ifdef KV_F16
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
#else
#ifdef KV_Q8
    let b = bitcast<i32>(w);
    return vec4<f32>(f32(extractBits(b, 0u, 8u)), f32(extractBits(b, 8u, 8u)), f32(extractBits(b, 16u, 8u)), f32(extractBits(b, 24u, 8u)));
#else
    return w;
#endif
#endif
}

#ifndef KV_Q8

fn kv_store(v: vec4<f32>) -> Kv4 {
#ifdef KV_F16
    return vec2<u32>(pack2x16float(v.xy), pack2x16float(v.zw));
#else
    return v;
#endif
}

// What the cache gives back for `v` once stored: the fresh slot's K/V row is used as the other
// slots' rows are read, so that the result does not depend on whether a row was just written.
fn kv_stored(v: vec4<f32>) -> vec4<f32> {
#ifdef KV_F16
    // Packing to f16 pairs and unpacking rounds, but a driver may fold the two away (NVIDIA's
    // does: on an H200 the fresh row kept its f32 bits and the output left the unfused
    // kernels' by up to 6e-5); the words pass through an operand it cannot know, 0 at run time.
    let unknown = vec2<u32>(select(0u, 1u, p.n_heads == 0u));
    return kv_load(kv_store(v) ^ unknown);
#else
    return kv_load(kv_store(v));
#endif
}
#endif

// Dimension d of the head starting at `src` in the projection, rotated with table row `slot`
// by rope_pair.wgsl's `rotate`; dimensions past rot_dims pass through.
fn rotated(src: u32, d: u32, slot: u32) -> f32 {
    if (d >= p.rot_dims) {
        return q[src + d];
    }
    let dims = pair(pair_index(d));
    return rotate(d, slot, q[src + dims.x], q[src + dims.y]);
}

fn rotated4(src: u32, w: u32, slot: u32) -> vec4<f32> {
    let d = 4u * w;
    return vec4<f32>(rotated(src, d, slot), rotated(src, d + 1u, slot), rotated(src, d + 2u, slot), rotated(src, d + 3u, slot));
}

// Word k of the K row of context slot j (values starting at `row`), before the row's Q8 scale;
// the fresh slot's from k_new.
fn key4(j: u32, row: u32, k: u32, fresh: u32) -> vec4<f32> {
    if (j == fresh) {
        return k_new[k];
    }
    return kv_load(k_cache[row + k]);
}

// What multiplies slot j's score: its K row's Q8 scale (the fresh slot's from fresh_scale, so
// that the slot being written is never read), else 1.
fn key_scale(j: u32, row: u32, fresh: u32) -> f32 {
#ifdef KV_Q8
    if (j == fresh) {
        return fresh_scale.x;
    }
    return bitcast<f32>(k_cache[row - 1u]);
#else
    return 1.0;
#endif
}

// This lane's share of slot j's score: words sub, sub + LPP, ... of its K row dotted with the
// query, eight loads a round issued together.
fn k_part(j: u32, row: u32, sub: u32, n4: u32, fresh: u32) -> f32 {
    var s0 = 0.0;
    var s1 = 0.0;
    var w = sub;
    // Heads of 64 dimensions one lane a position: the whole row in one round.
    for (; w + 15u * LPP < n4; w += 16u * LPP) {
        let k0 = key4(j, row, w, fresh);
        let k1 = key4(j, row, w + LPP, fresh);
        let k2 = key4(j, row, w + 2u * LPP, fresh);
        let k3 = key4(j, row, w + 3u * LPP, fresh);
        let k4 = key4(j, row, w + 4u * LPP, fresh);
        let k5 = key4(j, row, w + 5u * LPP, fresh);
        let k6 = key4(j, row, w + 6u * LPP, fresh);
        let k7 = key4(j, row, w + 7u * LPP, fresh);
        let k8 = key4(j, row, w + 8u * LPP, fresh);
        let k9 = key4(j, row, w + 9u * LPP, fresh);
        let ka = key4(j, row, w + 10u * LPP, fresh);
        let kb = key4(j, row, w + 11u * LPP, fresh);
        let kc = key4(j, row, w + 12u * LPP, fresh);
        let kd = key4(j, row, w + 13u * LPP, fresh);
        let ke = key4(j, row, w + 14u * LPP, fresh);
        let kf = key4(j, row, w + 15u * LPP, fresh);
        s0 += ((dot(qs4[w], k0) + dot(qs4[w + LPP], k1)) + (dot(qs4[w + 2u * LPP], k2) + dot(qs4[w + 3u * LPP], k3)))
            + ((dot(qs4[w + 8u * LPP], k8) + dot(qs4[w + 9u * LPP], k9)) + (dot(qs4[w + 10u * LPP], ka) + dot(qs4[w + 11u * LPP], kb)));
        s1 += ((dot(qs4[w + 4u * LPP], k4) + dot(qs4[w + 5u * LPP], k5)) + (dot(qs4[w + 6u * LPP], k6) + dot(qs4[w + 7u * LPP], k7)))
            + ((dot(qs4[w + 12u * LPP], kc) + dot(qs4[w + 13u * LPP], kd)) + (dot(qs4[w + 14u * LPP], ke) + dot(qs4[w + 15u * LPP], kf)));
    }
    for (; w + 7u * LPP < n4; w += 8u * LPP) {
        let k0 = key4(j, row, w, fresh);
        let k1 = key4(j, row, w + LPP, fresh);
        let k2 = key4(j, row, w + 2u * LPP, fresh);
        let k3 = key4(j, row, w + 3u * LPP, fresh);
        let k4 = key4(j, row, w + 4u * LPP, fresh);
        let k5 = key4(j, row, w + 5u * LPP, fresh);
        let k6 = key4(j, row, w + 6u * LPP, fresh);
        let k7 = key4(j, row, w + 7u * LPP, fresh);
        s0 += (dot(qs4[w], k0) + dot(qs4[w + LPP], k1)) + (dot(qs4[w + 2u * LPP], k2) + dot(qs4[w + 3u * LPP], k3));
        s1 += (dot(qs4[w + 4u * LPP], k4) + dot(qs4[w + 5u * LPP], k5)) + (dot(qs4[w + 6u * LPP], k6) + dot(qs4[w + 7u * LPP], k7));
    }
    for (; w < n4; w += LPP) {
        s0 += dot(qs4[w], key4(j, row, w, fresh));
    }
    return s0 + s1;
}

// Where a lane's V rows are: its column group c of the head's rows, positions g, g + groups,
// ... of the chunk (the first of which is context slot `first`), `count` of them live.
struct VLane {
    first: u32,
    count: u32,
    kv_base: u32,
    n4: u32,
    c: u32,
    g: u32,
    groups: u32,
    fresh: u32,
    v_at: u32, // the fresh slot's V row in the projection
}

// Column group c of chunk position jj's V row, zero past the live ones. The fresh slot's comes
// from the projection (the bits v_new holds), since its cache row is written in this same
// dispatch and the loads are issued before v_new is; with KV_Q8 it is zero here (its scale is
// not known yet) and added after the softmax.
fn value4(l: VLane, jj: u32) -> vec4<f32> {
    if (jj >= l.count) {
        return vec4<f32>(0.0);
    }
    let j = l.first + jj;
    let row = l.kv_base + j * row_len(l.n4);
#ifdef KV_Q8
    if (j == l.fresh) {
        return vec4<f32>(0.0);
    }
    return kv_load(v_cache[row + 1u + l.c]) * bitcast<f32>(v_cache[row]);
#else
    if (j == l.fresh) {
        let at = l.v_at + 4u * l.c;
        return kv_stored(vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]));
    }
    return kv_load(v_cache[row + l.c]);
#endif
}

// Eight of a lane's V rows, positions jj, jj + groups, ..., jj + 7 groups.
struct V8 {
    v0: vec4<f32>,
    v1: vec4<f32>,
    v2: vec4<f32>,
    v3: vec4<f32>,
    v4: vec4<f32>,
    v5: vec4<f32>,
    v6: vec4<f32>,
    v7: vec4<f32>,
}

fn v_round(l: VLane, jj: u32) -> V8 {
    let s = l.groups;
    return V8(value4(l, jj), value4(l, jj + s), value4(l, jj + 2u * s), value4(l, jj + 3u * s),
        value4(l, jj + 4u * s), value4(l, jj + 5u * s), value4(l, jj + 6u * s), value4(l, jj + 7u * s));
}

// Position jj's probability: rows past the live ones are zero, and so are their probabilities
// within the chunk (probs is written for every position of it).
fn prob(jj: u32) -> f32 {
    return probs[min(jj, CHUNK - 1u)];
}

// Σ prob · V over the eight rows of `v`, positions jj, jj + groups, ...
fn v_sum(l: VLane, v: V8, jj: u32) -> vec4<f32> {
    let s = l.groups;
    return ((prob(jj) * v.v0 + prob(jj + s) * v.v1) + (prob(jj + 2u * s) * v.v2 + prob(jj + 3u * s) * v.v3))
        + ((prob(jj + 4u * s) * v.v4 + prob(jj + 5u * s) * v.v5) + (prob(jj + 6u * s) * v.v6 + prob(jj + 7u * s) * v.v7));
}

// The largest (SUM false) or the sum (SUM true) of probs[0..CHUNK], on every lane. The caller
// wrote probs and passed a barrier; `stats` is free again when this returns.
fn reduce(lane: u32, sum: bool) -> f32 {
    if (lane < RED) {
        var acc = select(LOWEST, 0.0, sum);
        // Interleaved, so that the RED lanes read adjacent words (no bank conflicts).
        for (var i = lane; i < CHUNK; i += RED) {
            acc = select(max(acc, probs[i]), acc + probs[i], sum);
        }
        stats[lane] = acc;
    }
    workgroupBarrier();
    var total = select(LOWEST, 0.0, sum);
    for (var i = 0u; i < RED; i++) {
        total = select(max(total, stats[i]), total + stats[i], sum);
    }
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(${WG})
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
#ifdef SG
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
#endif
) {
    let h = wid.x;
    let chunk = wid.z;
    let n_ctx = context_len(0u);
    // Chunks holding context positions; the rest of the grid (it covers max_seq) leaves at once.
    let live = (n_ctx + CHUNK - 1u) / CHUNK;
    if (h >= p.n_heads || chunk >= live) {
        return;
    }
    let lane = lid.x;
    let n4 = p.head_dim / 4u;
    let group = p.n_heads / p.n_kv_heads;
    let kvh = h / group;
    let kv_base = kvh * p.max_seq * row_len(n4);
    // The slot the new position takes; no other slot is read from the projection.
    let fresh = ring_slot(step.pos);
    let first = chunk * CHUNK;
    let count = min(CHUNK, n_ctx - first);
    // This lane's V columns 4c..4c+3 and its position group g (lanes past groups * n4 idle);
    // its first sixteen rows loaded now, used after the softmax.
    let groups = WG / n4;
    let vl = VLane(first, count, kv_base, n4, lane % n4, lane / n4, groups, fresh,
        (p.n_heads + p.n_kv_heads + kvh) * p.head_dim);
    let v_lane = vl.g < groups;
    var va = V8(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    var vb = va;
    if (v_lane) {
        va = v_round(vl, vl.g);
        vb = v_round(vl, vl.g + 8u * groups);
    }
    // The first workgroup of the KV head stores the new row; the others read it from k_new /
    // v_new, so no workgroup reads the slot while it is written.
    let stores = chunk == 0u && h % group == 0u;
    let fresh_row = kv_base + fresh * row_len(n4);
    // The query's word w on lane w, the new K row's on lane n4 + w, V's on lane 2 n4 + w: each
    // lane rotates one word, so the rotations' loads are issued by three times the lanes.
    let role = lane / n4;
    let w = lane % n4;
    if (role == 0u) {
        qs4[w] = rotated4(h * p.head_dim, w, fresh) * p.scale;
    } else if (role == 1u) {
        let kr = rotated4((p.n_heads + kvh) * p.head_dim, w, fresh);
#ifdef KV_Q8
        k_new[w] = kr;
        let ka = abs(kr);
        kv_max[w].x = max(max(ka.x, ka.y), max(ka.z, ka.w));
#else
        k_new[w] = kv_stored(kr);
        if (stores) {
            k_cache[fresh_row + w] = kv_store(k_new[w]);
        }
#endif
    } else if (role == 2u) {
        let v_at = (p.n_heads + p.n_kv_heads + kvh) * p.head_dim + 4u * w;
        let vr = vec4<f32>(q[v_at], q[v_at + 1u], q[v_at + 2u], q[v_at + 3u]);
#ifdef KV_Q8
        v_new[w] = vr;
        let va4 = abs(vr);
        kv_max[w].y = max(max(va4.x, va4.y), max(va4.z, va4.w));
#else
        v_new[w] = kv_stored(vr);
        if (stores) {
            v_cache[fresh_row + w] = kv_store(v_new[w]);
        }
#endif
    }
    workgroupBarrier();
#ifdef KV_Q8
    // The row's scales as shaders/rope_store.wgsl takes them (absmax / 127); k_new and v_new
    // become the byte values, which the cache's rows are read as.
    if (lane < n4) {
        var m = vec2<f32>(0.0);
        for (var i = 0u; i < n4; i++) {
            m = max(m, kv_max[i]);
        }
        let sc = m / 127.0;
        let kr = k_new[lane];
        let vr = v_new[lane];
        var kw = 0u;
        var vw = 0u;
        for (var b = 0u; b < 4u; b++) {
            kw = kw | (quant_byte(kr[b], sc.x) << (8u * b));
            vw = vw | (quant_byte(vr[b], sc.y) << (8u * b));
        }
        if (lane == 0u) {
            fresh_scale = sc;
        }
        if (stores) {
            if (lane == 0u) {
                k_cache[fresh_row] = bitcast<u32>(sc.x);
                v_cache[fresh_row] = bitcast<u32>(sc.y);
            }
            k_cache[fresh_row + 1u + lane] = kw;
            v_cache[fresh_row + 1u + lane] = vw;
        }
        k_new[lane] = kv_load(kw);
        v_new[lane] = kv_load(vw);
    }
    workgroupBarrier();
#endif

    // Scores: lanes LPP * i .. LPP * i + LPP - 1 share position first + i.
    let jp = first + lane / LPP;
    var part = 0.0;
    if (lane / LPP < count) {
        let row = row_values(kv_base + jp * row_len(n4));
        part = k_part(jp, row, lane % LPP, n4, fresh) * key_scale(jp, row, fresh);
    }
    // With one lane a position (chunks of WG positions) a lane's part is its position's dot;
    // otherwise the LPP parts are added through workgroup memory.
    var d = part;
    if (LPP > 1u) {
        dots[lane] = part;
        workgroupBarrier();
        d = 0.0;
        for (var i = 0u; i < LPP; i++) {
            d += dots[lane * LPP + i];
        }
    }
    let j = first + lane;
    let seen = lane < count && in_window(0u, j);
    var s = LOWEST;
    if (seen) {
        s = capped(d);
    }
#ifdef SG
    // Both statistics behind one barrier: each subgroup's maximum and its sum of exp(s - that
    // maximum), then the subgroups' pairs combined (m = the largest, l = the sums rescaled to
    // it) on every lane, the same inputs in the same order everywhere, so the sum is the same on
    // every run: where a subgroup has a lane for each subgroup's pair, by two subgroup
    // reductions of one load a lane; else by a loop over the pairs in the subgroups' order.
    // Subgroup i is lanes i * S .. i * S + S - 1, as adapters lay out a one-dimensional
    // workgroup (the assumption of shaders/gemv_rowsum.wgsl's shuffles too).
    let ms = subgroupMax(s);
    let ls = subgroupAdd(select(0.0, exp(s - ms), seen));
    if (sg_lane == 0u) {
        sg_stats[lane / sg_size] = vec2<f32>(ms, ls);
    }
    workgroupBarrier();
    let n_sg = WG / sg_size;
    var m = LOWEST;
    var l = 0.0;
    if (n_sg <= sg_size) {
        let mine = sg_lane < n_sg;
        var st = vec2<f32>(LOWEST, 0.0);
        if (mine) {
            st = sg_stats[sg_lane];
        }
        m = subgroupMax(st.x);
        l = subgroupAdd(select(0.0, st.y * exp(st.x - m), mine));
    } else {
        for (var i = 0u; i < n_sg; i++) {
            m = max(m, sg_stats[i].x);
        }
        for (var i = 0u; i < n_sg; i++) {
            l += sg_stats[i].y * exp(sg_stats[i].x - m);
        }
    }
    if (lane < CHUNK) {
        probs[lane] = select(0.0, exp(s - m), seen);
    }
    workgroupBarrier();
#else
    if (lane < CHUNK) {
        probs[lane] = s;
    }
    workgroupBarrier();
    let m = reduce(lane, false);
    if (lane < CHUNK) {
        var pj = 0.0;
        if (seen) {
            pj = exp(s - m);
        }
        probs[lane] = pj;
    }
    workgroupBarrier();
    let l = reduce(lane, true);
#endif

    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    if (v_lane) {
        a0 = v_sum(vl, va, vl.g);
        a1 = v_sum(vl, vb, vl.g + 8u * groups);
        // Rows past the sixteenth a lane (wide heads in large chunks), eight at a time.
        for (var jj = vl.g + 16u * groups; jj < count; jj += 8u * groups) {
            a0 += v_sum(vl, v_round(vl, jj), jj);
        }
#ifdef KV_Q8
        // The fresh row, which value4 left out: its lane adds it as the others were added.
        let jf = fresh - first;
        if (fresh >= first && jf < count && jf % groups == vl.g) {
            a0 += prob(jf) * (v_new[vl.c] * fresh_scale.y);
        }
#endif
    }
    merged[lane] = a0 + a1;
    workgroupBarrier();
    var sum = vec4<f32>(0.0);
    if (lane < n4) {
        // Four running sums, so that four loads are in flight rather than one.
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        var gg = 0u;
        for (; gg + 3u < groups; gg += 4u) {
            s0 += merged[gg * n4 + lane];
            s1 += merged[(gg + 1u) * n4 + lane];
            s2 += merged[(gg + 2u) * n4 + lane];
            s3 += merged[(gg + 3u) * n4 + lane];
        }
        for (; gg < groups; gg++) {
            s0 += merged[gg * n4 + lane];
        }
        sum = (s0 + s1) + (s2 + s3);
    }
    let q_base = h * p.head_dim;
    if (live == 1u) {
        // The whole context in this chunk: l > 0, since the new position is always seen.
        if (lane < n4) {
            let o = sum * (1.0 / l);
            out[q_base + 4u * lane] = o.x;
            out[q_base + 4u * lane + 1u] = o.y;
            out[q_base + 4u * lane + 2u] = o.z;
            out[q_base + 4u * lane + 3u] = o.w;
        }
        return;
    }
    let at = partials_at(0u, h, chunk);
    store_partial(at, m, l, sum, lane, n4);
    // The last of the head's live workgroups to get here merges their chunks.
    // storageBarrier is a device-scope release here and an acquire after the count (naga
    // emits Device scope for it), so the last one reads what every other one wrote before
    // counting itself in.
    storageBarrier();
    if (lane == 0u) {
        arrived = atomicAdd(&arrivals[h], 1u);
    }
    let before = workgroupUniformLoad(&arrived);
    if (before + 1u < live) {
        return;
    }
    storageBarrier();
    if (lane == 0u) {
        atomicStore(&arrivals[h], 0u);
    }
    merge_chunks(partials_at(0u, h, 0u), live, p.head_dim, lane, q_base);
}
