// A K row dotted with the scaled query held in workgroup memory, for the attention kernels
// over an f32 cache read as vec4 (shaders/attention.wgsl with VEC4, shaders/attention_decode.wgsl).
// The including shader declares `k_cache: array<vec4<f32>>` and `qs4`.
//
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
