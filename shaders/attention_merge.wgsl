// Merging split attention's per-chunk results (shaders/attention.wgsl with SPLIT):
// out = Σ_c acc_c · e^(m_c − M) / Σ_c l_c · e^(m_c − M), M the largest chunk maximum. Chunks
// with a zero sum saw no position. Used by shaders/attention_combine.wgsl (a dispatch of its
// own) and by the last workgroup of a head in shaders/attention.wgsl with ROPE. The including
// shader declares `partials`, `out`, WG (64) and LOWEST.
//
// The merge is on the step's critical path, so it is written for latency: the chunks'
// statistics are loaded by one lane each (one round trip, not one per chunk), their weights
// shared through workgroup memory, and each lane's four output dimensions take the chunks four
// at a time, their loads issued together.

var<workgroup> merge_top: array<f32, WG>;
// e^(m_c − M) of a batch of WG chunks (0 for a chunk that saw nothing), and l_c times it.
var<workgroup> merge_w: array<f32, WG>;
var<workgroup> merge_l: array<f32, WG>;

// Dimension d of the chunk whose values start at `at`; 0 past head_dim.
fn merge_part(at: u32, d: u32, head_dim: u32) -> f32 {
    if (d < head_dim) {
        return partials[at + d];
    }
    return 0.0;
}

// Σ over chunks i .. i + 3 of the batch starting at chunk c0 of dimension d, weighted.
fn merge_four(base: u32, stride: u32, c0: u32, i: u32, d: u32, head_dim: u32) -> f32 {
    let at = base + (c0 + i) * stride + 2u;
    let p0 = merge_part(at, d, head_dim);
    let p1 = merge_part(at + stride, d, head_dim);
    let p2 = merge_part(at + 2u * stride, d, head_dim);
    let p3 = merge_part(at + 3u * stride, d, head_dim);
    return (p0 * merge_w[i] + p1 * merge_w[i + 1u]) + (p2 * merge_w[i + 2u] + p3 * merge_w[i + 3u]);
}

// Merges the `chunks` partials of one head starting at `base` into out[dst..dst + head_dim]
// (head_dim <= 4 · WG); every lane of the workgroup calls it.
fn merge_chunks(base: u32, chunks: u32, head_dim: u32, lane: u32, dst: u32) {
    let stride = head_dim + 2u;
    var top = LOWEST;
    for (var c = lane; c < chunks; c += WG) {
        if (partials[base + c * stride + 1u] > 0.0) {
            top = max(top, partials[base + c * stride]);
        }
    }
    merge_top[lane] = top;
    workgroupBarrier();
    for (var r = WG / 2u; r > 0u; r = r >> 1u) {
        if (lane < r) {
            merge_top[lane] = max(merge_top[lane], merge_top[lane + r]);
        }
        workgroupBarrier();
    }
    top = merge_top[0];
    var sum = 0.0;
    var a0 = 0.0;
    var a1 = 0.0;
    var a2 = 0.0;
    var a3 = 0.0;
    for (var c0 = 0u; c0 < chunks; c0 += WG) {
        let c = c0 + lane;
        var w = 0.0;
        var l = 0.0;
        if (c < chunks) {
            l = partials[base + c * stride + 1u];
            if (l > 0.0) {
                w = exp(partials[base + c * stride] - top);
            }
        }
        merge_w[lane] = w;
        merge_l[lane] = l * w;
        workgroupBarrier();
        let n = min(WG, chunks - c0);
        var i = 0u;
        for (; i + 4u <= n; i += 4u) {
            sum += (merge_l[i] + merge_l[i + 1u]) + (merge_l[i + 2u] + merge_l[i + 3u]);
            a0 += merge_four(base, stride, c0, i, lane, head_dim);
            a1 += merge_four(base, stride, c0, i, lane + WG, head_dim);
            a2 += merge_four(base, stride, c0, i, lane + 2u * WG, head_dim);
            a3 += merge_four(base, stride, c0, i, lane + 3u * WG, head_dim);
        }
        for (; i < n; i++) {
            let at = base + (c0 + i) * stride + 2u;
            let wi = merge_w[i];
            sum += merge_l[i];
            a0 += merge_part(at, lane, head_dim) * wi;
            a1 += merge_part(at, lane + WG, head_dim) * wi;
            a2 += merge_part(at, lane + 2u * WG, head_dim) * wi;
            a3 += merge_part(at, lane + 3u * WG, head_dim) * wi;
        }
        workgroupBarrier(); // the batch's weights are read before the next batch's are written
    }
    let inv = 1.0 / sum;
    merge_store(dst, lane, head_dim, a0 * inv);
    merge_store(dst, lane + WG, head_dim, a1 * inv);
    merge_store(dst, lane + 2u * WG, head_dim, a2 * inv);
    merge_store(dst, lane + 3u * WG, head_dim, a3 * inv);
}

fn merge_store(dst: u32, d: u32, head_dim: u32, v: f32) {
    if (d < head_dim) {
        out[dst + d] = v;
    }
}
