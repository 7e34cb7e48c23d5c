// Merging split attention's per-chunk results (shaders/attention.wgsl with SPLIT):
// out = Σ_c acc_c · e^(m_c − M) / Σ_c l_c · e^(m_c − M), M the largest chunk maximum. Chunks
// with a zero sum saw no position. Used by shaders/attention_combine.wgsl (a dispatch of its
// own) and by the last workgroup of a head in shaders/attention.wgsl with ROPE. The including
// shader declares `partials`, `out`, WG and LOWEST.

// Merges the `chunks` partials of one head starting at `base` into out[dst..dst + head_dim];
// lane `lane` of WG writes dimensions lane, lane + WG, ...
fn merge_chunks(base: u32, chunks: u32, head_dim: u32, lane: u32, dst: u32) {
    let stride = head_dim + 2u;
    var top = LOWEST;
    for (var c = 0u; c < chunks; c++) {
        if (partials[base + c * stride + 1u] > 0.0) {
            top = max(top, partials[base + c * stride]);
        }
    }
    var sum = 0.0;
    for (var c = 0u; c < chunks; c++) {
        let l = partials[base + c * stride + 1u];
        if (l > 0.0) {
            sum += l * exp(partials[base + c * stride] - top);
        }
    }
    let inv = 1.0 / sum;
    for (var d = lane; d < head_dim; d += WG) {
        var acc = 0.0;
        for (var c = 0u; c < chunks; c++) {
            let at = base + c * stride;
            if (partials[at + 1u] > 0.0) {
                acc += partials[at + 2u + d] * exp(partials[at] - top);
            }
        }
        out[dst + d] = acc * inv;
    }
}
