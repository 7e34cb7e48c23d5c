// Where split attention keeps each chunk's result and how it is written, for
// shaders/attention.wgsl (SPLIT) and shaders/attention_decode.wgsl; shaders/attention_merge.wgsl
// reads it. The including shader declares `partials` and `p` (with chunk_len, the positions of a
// chunk).

// Where chunk `chunk` of query head h of token t keeps its max, sum and head_dim values.
fn partials_at(t: u32, h: u32, chunk: u32) -> u32 {
    let chunks = (p.max_seq + p.chunk_len - 1u) / p.chunk_len;
    return ((t * p.n_heads + h) * chunks + chunk) * (p.head_dim + 2u);
}

// One chunk's result at `at`: the running max m, the sum l and the head_dim unnormalised output
// values (`sum`, column group `lane` of n4).
fn store_partial(at: u32, m: f32, l: f32, sum: vec4<f32>, lane: u32, n4: u32) {
    if (lane == 0u) {
        partials[at] = m;
        partials[at + 1u] = l;
    }
    if (lane < n4) {
        partials[at + 2u + 4u * lane] = sum.x;
        partials[at + 3u + 4u * lane] = sum.y;
        partials[at + 4u + 4u * lane] = sum.z;
        partials[at + 5u + 4u * lane] = sum.w;
    }
}
