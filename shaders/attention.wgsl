// Causal attention over the KV cache for `n_tokens` queries at positions step.pos + t.
// One workgroup per (head, token). The context is walked in tiles of WG positions with an
// online softmax (running max and sum), so any context length fits in fixed shared memory.
// GQA: query head h reads KV head h / (n_heads / n_kv_heads).
//
// The cache is a ring of max_seq slots (position pos in slot pos % max_seq). A query at
// position P attends to the last min(P + 1, max_seq) positions: before the ring wraps those are
// slots 0..P, after it every slot, so slot j is read for j < n_ctx either way (the softmax
// does not depend on the order it visits positions in). Past max_seq the engine runs one
// token per pass, so no query sees a slot a later token of its own pass overwrote.
// Gemma's masks: with `window` > 0 a query at position P sees only positions P - window + 1 ..
// P (the engine keeps no sinks then, so slot j holds position P - (P - j) % max_seq); with
// `softcap` > 0 each score s becomes softcap * tanh(s / softcap).
// Cache rows (src/ops/kv.rs): f32 values; KV_F16: pack2x16float pairs; KV_Q8: an f32 scale word
// then four signed bytes per word, lowest byte first. Parameters and masks:
// shaders/attention_common.wgsl. Decode steps with the RoPE + KV store folded in run
// shaders/attention_decode.wgsl instead.

#ifdef KV_F16
alias Word = u32;
#else
#ifdef KV_Q8
alias Word = u32;
#else
alias Word = f32;
#endif
#endif

@group(0) @binding(0) var<storage, read> q: array<f32>;          // [n_tokens, n_heads, head_dim]
#ifdef VEC4
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<f32>>; // [n_kv_heads, max_seq, head_dim / 4]
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<f32>>; // [n_kv_heads, max_seq, head_dim / 4]
#else
@group(0) @binding(1) var<storage, read> k_cache: array<Word>;   // [n_kv_heads, max_seq, row_words]
@group(0) @binding(2) var<storage, read> v_cache: array<Word>;   // [n_kv_heads, max_seq, row_words]
#endif
#ifdef SPLIT
// Per chunk of the context: running max, sum and unnormalised output, merged by
// shaders/attention_combine.wgsl. Chunks past the context write a zero sum.
@group(0) @binding(3) var<storage, read_write> partials: array<f32>; // [n_tokens, n_heads, chunks, head_dim + 2]
#else
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [n_tokens, n_heads, head_dim]
#endif
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

const WG: u32 = 64u;
// Dimensions each invocation accumulates: head_dim <= WG * DIMS.
const DIMS: u32 = 4u;
const MAX_HEAD_DIM: u32 = 256u;

var<workgroup> qs: array<f32, MAX_HEAD_DIM>;
var<workgroup> probs: array<f32, WG>;
var<workgroup> partial: array<f32, WG>;

// The context positions [x, y) this workgroup covers: the query's whole context, or with SPLIT
// its chunk `chunk`.
fn context_range(t: u32, chunk: u32) -> vec2<u32> {
    let n_ctx = context_len(t);
#ifdef SPLIT
    let first = chunk * p.chunk_len;
    return vec2<u32>(first, min(first + p.chunk_len, n_ctx));
#else
    return vec2<u32>(0u, n_ctx);
#endif
}

#ifndef VEC4
// The scaled query (in qs) dotted with the K row starting at word `row`.
fn k_dot(row: u32) -> f32 {
    var s = 0.0;
#ifdef KV_F16
    for (var w = 0u; w < p.head_dim / 2u; w++) {
        let kk = unpack2x16float(k_cache[row + w]);
        s += qs[2u * w] * kk.x + qs[2u * w + 1u] * kk.y;
    }
#else
#ifdef KV_Q8
    for (var w = 0u; w < p.head_dim / 4u; w++) {
        let word = bitcast<i32>(k_cache[row + 1u + w]);
        let kk = vec4<f32>(
            f32(extractBits(word, 0u, 8u)),
            f32(extractBits(word, 8u, 8u)),
            f32(extractBits(word, 16u, 8u)),
            f32(extractBits(word, 24u, 8u)),
        );
        s += dot(vec4<f32>(qs[4u * w], qs[4u * w + 1u], qs[4u * w + 2u], qs[4u * w + 3u]), kk);
    }
    s *= bitcast<f32>(k_cache[row]);
#else
    for (var d = 0u; d < p.head_dim; d++) {
        s += qs[d] * k_cache[row + d];
    }
#endif
#endif
    return s;
}

// What multiplies every value of the V row at `row`: its Q8 scale, else 1.
fn v_scale(row: u32) -> f32 {
#ifdef KV_Q8
    return bitcast<f32>(v_cache[row]);
#else
    return 1.0;
#endif
}

// Dimension d of the V row at `row`, before v_scale.
fn v_value(row: u32, d: u32) -> f32 {
#ifdef KV_F16
    return unpack2x16float(v_cache[row + d / 2u])[d % 2u];
#else
#ifdef KV_Q8
    return f32(extractBits(bitcast<i32>(v_cache[row + 1u + d / 4u]), 8u * (d % 4u), 8u));
#else
    return v_cache[row + d];
#endif
#endif
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let t = wid.y;
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let lane = lid.x;
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let q_base = (t * p.n_heads + h) * p.head_dim;
    for (var d = lane; d < p.head_dim; d += WG) {
        qs[d] = q[q_base + d] * p.scale;
    }
    workgroupBarrier();

    var m = LOWEST;
    var l = 0.0;
    var acc = array<f32, DIMS>(0.0, 0.0, 0.0, 0.0);
    let kv_base = kvh * p.max_seq * p.row_words;
    let range = context_range(t, wid.z);
    let first = range.x;
    let limit = range.y;
    for (var start = first; start < limit; start += WG) {
        let j = start + lane;
        let seen = j < limit && in_window(t, j);
        var s = LOWEST;
        if (seen) {
            s = capped(k_dot(kv_base + j * p.row_words));
        }
        partial[lane] = s;
        workgroupBarrier();
        for (var r = WG / 2u; r > 0u; r = r >> 1u) {
            if (lane < r) {
                partial[lane] = max(partial[lane], partial[lane + r]);
            }
            workgroupBarrier();
        }
        let m_new = max(m, partial[0]);
        workgroupBarrier();
        var pj = 0.0;
        if (seen) {
            pj = exp(s - m_new);
        }
        partial[lane] = pj;
        if (j < limit) {
            pj *= v_scale(kv_base + j * p.row_words);
        }
        probs[lane] = pj;
        workgroupBarrier();
        for (var r = WG / 2u; r > 0u; r = r >> 1u) {
            if (lane < r) {
                partial[lane] += partial[lane + r];
            }
            workgroupBarrier();
        }
        let correction = exp(m - m_new);
        l = l * correction + partial[0];
        let count = min(WG, limit - start);
        for (var i = 0u; i < DIMS; i++) {
            let d = lane + i * WG;
            if (d < p.head_dim) {
                var sum = acc[i] * correction;
                for (var jj = 0u; jj < count; jj++) {
                    sum += probs[jj] * v_value(kv_base + (start + jj) * p.row_words, d);
                }
                acc[i] = sum;
            }
        }
        m = m_new;
        workgroupBarrier();
    }
#ifdef SPLIT
    let at = partials_at(t, h, wid.z);
    if (lane == 0u) {
        partials[at] = m;
        partials[at + 1u] = l;
    }
    for (var i = 0u; i < DIMS; i++) {
        let d = lane + i * WG;
        if (d < p.head_dim) {
            partials[at + 2u + d] = acc[i];
        }
    }
#else
    let inv = 1.0 / l;
    for (var i = 0u; i < DIMS; i++) {
        let d = lane + i * WG;
        if (d < p.head_dim) {
            out[q_base + d] = acc[i] * inv;
        }
    }
#endif
}
#endif

#ifdef VEC4
// f32 cache and head_dim a multiple of 16. A GPU keeps one lane's loads in flight only as far
// as its dependent chain allows, so the scalar path's 64-long chains (a K row, then V over 64
// positions) leave each workgroup waiting on memory. Here a K row is 4 independent vec4 sums,
// and V is summed by G = head_dim / 4 column lanes times WG / G position groups, merged once
// at the end; the softmax statistics are read by every lane from shared memory instead of
// tree reductions, so a tile takes four barriers instead of sixteen.
var<workgroup> qs4: array<vec4<f32>, MAX_HEAD_DIM / 4u>;
var<workgroup> merged: array<vec4<f32>, WG>;

// Sixteen loads a round (head_dim 64: the whole row at once), so a lane waits on memory
// n4 / 16 times rather than n4 / 4.
fn k_dot4(row: u32, n4: u32) -> f32 {
    var s0 = 0.0;
    var s1 = 0.0;
    var s2 = 0.0;
    var s3 = 0.0;
    var w = 0u;
    for (; w + 16u <= n4; w += 16u) {
        let k0 = k_cache[row + w];
        let k1 = k_cache[row + w + 1u];
        let k2 = k_cache[row + w + 2u];
        let k3 = k_cache[row + w + 3u];
        let k4 = k_cache[row + w + 4u];
        let k5 = k_cache[row + w + 5u];
        let k6 = k_cache[row + w + 6u];
        let k7 = k_cache[row + w + 7u];
        let k8 = k_cache[row + w + 8u];
        let k9 = k_cache[row + w + 9u];
        let k10 = k_cache[row + w + 10u];
        let k11 = k_cache[row + w + 11u];
        let k12 = k_cache[row + w + 12u];
        let k13 = k_cache[row + w + 13u];
        let k14 = k_cache[row + w + 14u];
        let k15 = k_cache[row + w + 15u];
        s0 += (dot(qs4[w], k0) + dot(qs4[w + 4u], k4)) + (dot(qs4[w + 8u], k8) + dot(qs4[w + 12u], k12));
        s1 += (dot(qs4[w + 1u], k1) + dot(qs4[w + 5u], k5)) + (dot(qs4[w + 9u], k9) + dot(qs4[w + 13u], k13));
        s2 += (dot(qs4[w + 2u], k2) + dot(qs4[w + 6u], k6)) + (dot(qs4[w + 10u], k10) + dot(qs4[w + 14u], k14));
        s3 += (dot(qs4[w + 3u], k3) + dot(qs4[w + 7u], k7)) + (dot(qs4[w + 11u], k11) + dot(qs4[w + 15u], k15));
    }
    for (; w + 8u <= n4; w += 8u) {
        let k0 = k_cache[row + w];
        let k1 = k_cache[row + w + 1u];
        let k2 = k_cache[row + w + 2u];
        let k3 = k_cache[row + w + 3u];
        let k4 = k_cache[row + w + 4u];
        let k5 = k_cache[row + w + 5u];
        let k6 = k_cache[row + w + 6u];
        let k7 = k_cache[row + w + 7u];
        s0 += dot(qs4[w], k0) + dot(qs4[w + 4u], k4);
        s1 += dot(qs4[w + 1u], k1) + dot(qs4[w + 5u], k5);
        s2 += dot(qs4[w + 2u], k2) + dot(qs4[w + 6u], k6);
        s3 += dot(qs4[w + 3u], k3) + dot(qs4[w + 7u], k7);
    }
    if (w < n4) {
        s0 += dot(qs4[w], k_cache[row + w]);
        s1 += dot(qs4[w + 1u], k_cache[row + w + 1u]);
        s2 += dot(qs4[w + 2u], k_cache[row + w + 2u]);
        s3 += dot(qs4[w + 3u], k_cache[row + w + 3u]);
    }
    return (s0 + s1) + (s2 + s3);
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let t = wid.y;
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let lane = lid.x;
    let n4 = p.head_dim / 4u;
    let group = p.n_heads / p.n_kv_heads;
    let kvh = h / group;
    let q_base = (t * p.n_heads + h) * p.head_dim;
    let kv_base = kvh * p.max_seq * n4;
    if (lane < n4) {
        let at = q_base + 4u * lane;
        qs4[lane] = vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]) * p.scale;
    }
    workgroupBarrier();

    // This lane's V columns 4c..4c+3 and its position group g (lanes past groups * n4 idle).
    let c = lane % n4;
    let g = lane / n4;
    let groups = WG / n4;
    var m = LOWEST;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    let range = context_range(t, wid.z);
    let first = range.x;
    let limit = range.y;
    for (var start = first; start < limit; start += WG) {
        let j = start + lane;
        let count = min(WG, limit - start);
        let seen = j < limit && in_window(t, j);
        var s = LOWEST;
        if (seen) {
            s = capped(k_dot4(kv_base + j * n4, n4));
        }
        probs[lane] = s;
        workgroupBarrier();
        var tile_max = LOWEST;
        for (var i = 0u; i < count; i++) {
            tile_max = max(tile_max, probs[i]);
        }
        let m_new = max(m, tile_max);
        workgroupBarrier();
        var pj = 0.0;
        if (seen) {
            pj = exp(s - m_new);
        }
        probs[lane] = pj;
        workgroupBarrier();
        let correction = exp(m - m_new);
        var tile_sum = 0.0;
        for (var i = 0u; i < count; i++) {
            tile_sum += probs[i];
        }
        l = l * correction + tile_sum;
        var a0 = acc * correction;
        var a1 = vec4<f32>(0.0);
        if (g < groups) {
            // Eight positions a round, their loads issued together (head_dim 128 leaves two
            // position groups, so a lane takes 32 positions of a full tile: four rounds).
            var jj = g;
            for (; jj + 7u * groups < count; jj += 8u * groups) {
                let j0 = start + jj;
                let v0 = v_cache[kv_base + j0 * n4 + c];
                let v1 = v_cache[kv_base + (j0 + groups) * n4 + c];
                let v2 = v_cache[kv_base + (j0 + 2u * groups) * n4 + c];
                let v3 = v_cache[kv_base + (j0 + 3u * groups) * n4 + c];
                let v4 = v_cache[kv_base + (j0 + 4u * groups) * n4 + c];
                let v5 = v_cache[kv_base + (j0 + 5u * groups) * n4 + c];
                let v6 = v_cache[kv_base + (j0 + 6u * groups) * n4 + c];
                let v7 = v_cache[kv_base + (j0 + 7u * groups) * n4 + c];
                a0 += (probs[jj] * v0 + probs[jj + groups] * v1) + (probs[jj + 2u * groups] * v2 + probs[jj + 3u * groups] * v3);
                a1 += (probs[jj + 4u * groups] * v4 + probs[jj + 5u * groups] * v5)
                    + (probs[jj + 6u * groups] * v6 + probs[jj + 7u * groups] * v7);
            }
            for (; jj < count; jj += groups) {
                a0 += probs[jj] * v_cache[kv_base + (start + jj) * n4 + c];
            }
        }
        acc = a0 + a1;
        m = m_new;
        workgroupBarrier();
    }
    merged[lane] = acc;
    workgroupBarrier();
    var sum = vec4<f32>(0.0);
    if (lane < n4) {
        sum = merged[lane];
        for (var gg = 1u; gg < groups; gg++) {
            sum += merged[gg * n4 + lane];
        }
    }
#ifdef SPLIT
    let at = partials_at(t, h, wid.z);
    store_partial(at, m, l, sum, lane, n4);
#else
    if (lane < n4) {
        let inv = 1.0 / l;
        out[q_base + 4u * lane] = sum.x * inv;
        out[q_base + 4u * lane + 1u] = sum.y * inv;
        out[q_base + 4u * lane + 2u] = sum.z * inv;
        out[q_base + 4u * lane + 3u] = sum.w * inv;
    }
#endif
}
#endif
