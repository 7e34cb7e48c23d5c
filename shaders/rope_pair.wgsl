// The rotation, cache slots and q8 rounding shaders/rope_store.wgsl and
// shaders/attention_decode.wgsl both apply, so that the row a decode step stores is the same
// either way. The including shader
// declares `p` (with rot_dims, max_seq and sinks) and `cos_sin` ([slots, rot_dims / 2, 2]: cos,
// sin).
// Pair layout: NORM rotates (2i, 2i+1) (GGUF llama); NEOX rotates (i, i + rot/2) (HF, Qwen2).

// The cache slot of position `pos`: the first `sinks` positions keep their slots, the rest
// share the others as a ring.
fn ring_slot(pos: u32) -> u32 {
    if (pos < p.sinks) {
        return pos;
    }
    return p.sinks + (pos - p.sinks) % (p.max_seq - p.sinks);
}

fn pair(i: u32) -> vec2<u32> {
#ifdef NEOX
    return vec2<u32>(i, i + p.rot_dims / 2u);
#else
    return vec2<u32>(2u * i, 2u * i + 1u);
#endif
}

// The pair that rotated dimension d (< rot_dims) belongs to.
fn pair_index(d: u32) -> u32 {
#ifdef NEOX
    return d % (p.rot_dims / 2u);
#else
    return d / 2u;
#endif
}

// Dimension d (< rot_dims) after its pair's values x0 (at pair(i).x) and x1 (at pair(i).y) are
// turned by table row `slot`.
fn rotate(d: u32, slot: u32, x0: f32, x1: f32) -> f32 {
    let i = pair_index(d);
    let at = (slot * (p.rot_dims / 2u) + i) * 2u;
    let c = cos_sin[at];
    let s = cos_sin[at + 1u];
    if (d == pair(i).x) {
        return x0 * c - x1 * s;
    }
    return x0 * s + x1 * c;
}

// One signed byte of round(x / scale), in the low 8 bits: a q8 cache row's value at its scale
// (absmax / 127).
fn quant_byte(x: f32, scale: f32) -> u32 {
    if (scale <= 0.0) {
        return 0u;
    }
    let qv = clamp(round(x / scale), -127.0, 127.0);
    return bitcast<u32>(i32(qv)) & 0xffu;
}
