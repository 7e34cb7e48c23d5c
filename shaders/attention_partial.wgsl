// One chunk's result of split attention, as shaders/attention_merge.wgsl reads it: the running
// max m, the sum l and the head_dim unnormalised output values (`sum`, column group `lane` of
// n4) at `at`. Written by shaders/attention.wgsl (SPLIT) and shaders/attention_decode.wgsl; the
// including shader declares `partials`.
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
