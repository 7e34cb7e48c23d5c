// GGUF blocks written into the GPU layouts quant/repack.rs computes on the CPU, bit for bit:
// Q4_0 / Q8_0 as the weft format that holds them (`to_weft`: `bits` words of levels a block and
// its f16 scale as stored), the other types as their planes (`to_planes`: each 32-weight
// chunk's low nibbles in four words, Q6_K's high bits in two more, the 5-bit types' fifth bits
// in a word of the `high` plane, each (super-)block's codes copied as words into `heads`, and
// an f16 d two a word into `halves`).
//
// Blocks are 18, 20, 22, 24, 34, 144, 176 or 210 bytes, so not word-aligned: the raw bytes are
// read as the words that hold them and shifted (`byte_at` and `u16_at` of decode.wgsl, which
// follows this file). One invocation writes one 32-weight chunk; the first chunk of a block
// also its head, and that of an even block the halves word it shares with the next block: a
// single writer a word, no atomics.

struct Params {
    // 32-weight chunks in this dispatch's upload.
    chunks: u32,
    // The GGML type id: 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K, 13 Q5_K, 14 Q6_K.
    ty: u32,
    // Index of the upload's first chunk in the output planes (its block's index is even).
    out_chunk0: u32,
    // Invocations per row of the dispatch grid.
    stride: u32,
    // Bytes and chunks of a block.
    block: u32,
    block_chunks: u32,
    // Words of a chunk in `words` (4, 6 or 8) and of a block's head in `heads`.
    chunk_words: u32,
    head_words: u32,
    // Byte offsets in the block of the head and of the f16 d for `halves` (none: 0xFFFFFFFF).
    head_at: u32,
    d_at: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> heads: array<u32>;
@group(0) @binding(3) var<storage, read_write> halves: array<u32>;
@group(0) @binding(4) var<storage, read_write> high: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

// Nibble n (0: low, 1: high) of byte `at`.
fn nibble(at: u32, n: u32) -> u32 {
    return (byte_at(at) >> (4u * n)) & 0xFu;
}

// Level l (0..32) of chunk j of the block at byte `at`, as ggml's decoders read it.
fn level(ty: u32, at: u32, j: u32, l: u32) -> u32 {
    switch ty {
        // Element l: the low nibble of qs[l] for l < 16, else the high one of qs[l - 16]; the
        // fifth bit of Q5_0 / Q5_1 is bit l of the little-endian qh.
        case 2u: { return nibble(at + 2u + l % 16u, l / 16u); }
        case 3u: { return nibble(at + 4u + l % 16u, l / 16u); }
        case 6u, 7u: {
            let qh = at + 2u * (ty - 5u);
            return nibble(qh + 4u + l % 16u, l / 16u) | (((byte_at(qh + l / 8u) >> (l % 8u)) & 1u) << 4u);
        }
        // i8 plus the zero point 128: the byte with its top bit flipped.
        case 8u: { return byte_at(at + 2u + l) ^ 0x80u; }
        case 12u: { return nibble(at + 16u + 32u * (j / 2u) + l, j % 2u); }
        case 13u: { return nibble(at + 48u + 32u * (j / 2u) + l, j % 2u) | (((byte_at(at + 16u + l) >> j) & 1u) << 4u); }
        default: {
            let n = j / 4u;
            let k = j % 4u;
            return nibble(at + 64u * n + 32u * (k & 1u) + l, k >> 1u) | (((byte_at(at + 128u + 32u * n + l) >> (2u * k)) & 3u) << 4u);
        }
    }
}

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.y * params.stride + gid.x;
    if c >= params.chunks {
        return;
    }
    let ty = params.ty;
    let b = c / params.block_chunks;
    let j = c % params.block_chunks;
    let at = b * params.block;
    let out_c = params.out_chunk0 + c;
    let out_b = params.out_chunk0 / params.block_chunks + b;
    // Q8_0's levels are bytes; the others' low four bits go as weft's 4-bit words.
    let bits = select(4u, 8u, ty == 8u);
    let per = 32u / bits;
    var w = array<u32, 8>(0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
    var fifth = 0u;
    for (var l = 0u; l < 32u; l++) {
        let q = level(ty, at, j, l);
        w[l / per] |= (q & ((1u << bits) - 1u)) << (bits * (l % per));
        // quant::repack::high_bit: Q6_K's two bits in word 4 + l / 16, the fifth in `high`.
        let c4 = l % 4u;
        if ty == 14u {
            w[4u + l / 16u] |= (q >> 4u) << (16u * ((l / 8u) % 2u) + 4u * c4 + 2u * ((l / 4u) % 2u));
        } else {
            fifth |= (q >> 4u) << (16u * (l / 16u) + 4u * c4 + (l / 4u) % 4u);
        }
    }
    for (var k = 0u; k < params.chunk_words; k++) {
        words[out_c * params.chunk_words + k] = w[k];
    }
    if ty == 6u || ty == 7u || ty == 13u {
        high[out_c] = fifth;
    }
    if j != 0u {
        return;
    }
    for (var k = 0u; k < params.head_words; k++) {
        let h = at + params.head_at + 4u * k;
        heads[out_b * params.head_words + k] = u16_at(h) | (u16_at(h + 2u) << 16u);
    }
    if params.d_at != 0xFFFFFFFFu && b % 2u == 0u {
        let blocks = params.chunks / params.block_chunks;
        var d = u16_at(at + params.d_at);
        if b + 1u < blocks {
            d |= u16_at(at + params.block + params.d_at) << 16u;
        }
        halves[out_b / 2u] = d;
    }
}
