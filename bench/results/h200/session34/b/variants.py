"""Writes the kernel variants that calls b and d timed, from the GEMV kernel's source as the
diagnostic build dumps it (qmatmul_bench built with diag-hook.patch applied, run once with
WEFT_DIAG_DIR=DIR WEFT_DIAG_DUMP=1: DIR/qgemv_gpu.wgsl, the kernel and its fragments
concatenated). Every variant but `base` computes wrong sums: they exist to be timed.

    python variants.py DIR/qgemv_gpu.wgsl OUTDIR   # OUTDIR/<variant>/qgemv_gpu.wgsl

base       the kernel as built
nodot      a chunk's term is one xor of its loaded words (no integer products)
nostage    the activations' raw bits staged (no maxima, rounding or inner barrier)
both       nodot and nostage
nobar      every workgroupBarrier removed
bothnobar  both, without barriers: loads and the loop's bookkeeping only
global     no staging: each lane reads its chunks' records (three vec4: 8 words of int8, the
           scale, the sums) from device memory (x's bytes stand in for them)
global2    the same with two vec4 a chunk
keep       (call e) a lane's eight values kept in registers from the maximum to the rounding
           (4 and 8 bits, one quarter a lane; otherwise the staging as it is)
keepmagic  keep, rounded by adding 1.5 * 2^23 instead of round() and a conversion
"""
import os
import sys

src, out = sys.argv[1], sys.argv[2]
base = open(src).read()
cut = base.index("#ifdef DP4\n// A staged chunk")
head, dp4 = base[:cut], base[cut:]
assert dp4.count("fn stage(") == 1 and dp4.count("fn term(") == 1

NODOT = """fn term(w: W, xs: XQ) -> f32 {
#ifdef WB4
    return w.s * xs.d * f32((w.q.x ^ w.q.y ^ w.q.z ^ w.q.w ^ xs.a0 ^ xs.a7) & 255u);
#endif
#ifdef WB8
    return w.s * xs.d * f32((w.q.a.x ^ w.q.a.y ^ w.q.b.z ^ w.q.b.w ^ xs.a0 ^ xs.a7) & 255u);
#endif
}
"""
NOSTAGE = """fn stage(tok: u32, t0: u32, nb: u32, lid: u32) -> f32 {
    let n = min(TILE, nb - t0) * 4u;
    for (var j = lid; j < n; j += WG) {
        let c = t0 + j / 4u;
        let i = j % 4u;
        let at = XQW * (j / 4u);
        let u = xraw(tok, c, 2u * i) + xraw(tok, c, 2u * i + 1u);
        xq[at + 2u * i] = bitcast<u32>(u.x);
        xq[at + 2u * i + 1u] = bitcast<u32>(u.y);
        xq[at + 9u + i] = 1u;
        if (i == 0u) {
            xq[at + 8u] = bitcast<u32>(u.z);
        }
    }
    return 0.0;
}
"""
KEEP = """
fn stage(tok: u32, t0: u32, nb: u32, lid: u32) -> f32 {
    if (BITS < 4u || 8u * LPR > WG) {
        return stage_real(tok, t0, nb, lid);
    }
    let n = min(TILE, nb - t0) * 4u;
    var ss = 0.0;
    let j = lid;
    let has = j < n;
    let c = t0 + select(0u, j, has) / 4u;
    let i = j % 4u;
    var u = vec4<f32>(0.0);
    var v = vec4<f32>(0.0);
    if (has) {
        let r0 = xraw(tok, c, 2u * i);
        let r1 = xraw(tok, c, 2u * i + 1u);
#ifdef NORM
        ss += dot(r0, r0) + dot(r1, r1);
        u = r0 * norm_w[c * 8u + 2u * i];
        v = r1 * norm_w[c * 8u + 2u * i + 1u];
#else
        u = r0;
        v = r1;
#endif
        quarter_max[j] = max(amax4(u), amax4(v));
    }
    workgroupBarrier();
    if (has) {
        let q0 = j & ~3u;
        let amax = max(max(quarter_max[q0], quarter_max[q0 + 1u]), max(quarter_max[q0 + 2u], quarter_max[q0 + 3u]));
        let inv = select(0.0, 127.0 / amax, amax > 0.0);
        let at = XQW * (j / 4u);
        let a = ROUND_U;
        let b = ROUND_V;
#ifdef WB8
        let e = a;
        let o = b;
#else
        let e = vec4<i32>(a.x, a.z, b.x, b.z);
        let o = vec4<i32>(a.y, a.w, b.y, b.w);
#endif
        xq[at + 2u * i] = pack4xI8(e);
        xq[at + 2u * i + 1u] = pack4xI8(o);
        let s = e + o;
        xq[at + 9u + i] = bitcast<u32>((s.x + s.y) + (s.z + s.w));
        if (i == 0u) {
            xq[at + 8u] = bitcast<u32>(amax / 127.0);
        }
    }
    return ss;
}
"""
XGLOB = """
// Diagnostic: a chunk's staged record read from device memory (x's bytes reinterpreted; three
// vec4 a chunk, as a pre-quantized record would be), no workgroup staging, no barriers.
fn xglob(c: u32) -> XQ {
    let r0 = bitcast<vec4<u32>>(x[c * 3u]);
    let r1 = bitcast<vec4<u32>>(x[c * 3u + 1u]);
    let r2 = x[c * 3u + 2u];
    return XQ(r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w, r2.x, r2.yz);
}
"""
XGLOB2 = (XGLOB.replace("let r2 = x[c * 3u + 2u];", "let r2 = vec4<f32>(bitcast<f32>(r0.x), 1.0, 1.0, 0.0);")
          .replace("x[c * 3u]", "x[c * 2u]").replace("x[c * 3u + 1u]", "x[c * 2u + 1u]"))


def staged(nodot=False, nostage=False, nobar=False):
    d = dp4
    if nodot:
        d = d.replace("fn term(", "fn term_real(") + NODOT
    if nostage:
        d = d.replace("fn stage(", "fn stage_real(") + NOSTAGE
    s = head + d
    return s.replace("workgroupBarrier();", "") if nobar else s


def records(fn):
    # The tile's barriers, staging and chunk reads become two reads of records.
    s = head + dp4
    a = s.index("        workgroupBarrier(); // the previous tile's reads are done")
    end = "        let xb = xchunk(lane + LPR);\n"
    b = s.index(end) + len(end)
    return s[:a] + "        let xa = xglob(c);\n        let xb = xglob(d);\n" + s[b:] + fn


def kept(magic):
    # The staging of one quarter a lane with its values held across the barrier.
    rnd = ("bitcast<vec4<i32>>({0} * inv + vec4<f32>(12582912.0)) - vec4<i32>(0x4B400000)" if magic
           else "vec4<i32>(round({0} * inv))")
    fast = KEEP.replace("ROUND_U", rnd.format("u")).replace("ROUND_V", rnd.format("v"))
    return head + dp4.replace("fn stage(", "fn stage_real(") + fast


variants = {
    "base": staged(),
    "nodot": staged(nodot=True),
    "nostage": staged(nostage=True),
    "both": staged(nodot=True, nostage=True),
    "nobar": staged(nobar=True),
    "bothnobar": staged(nodot=True, nostage=True, nobar=True),
    "global": records(XGLOB),
    "global2": records(XGLOB2),
    "keep": kept(False),
    "keepmagic": kept(True),
}
for name, text in variants.items():
    os.makedirs(os.path.join(out, name), exist_ok=True)
    open(os.path.join(out, name, "qgemv_gpu.wgsl"), "w").write(text)
