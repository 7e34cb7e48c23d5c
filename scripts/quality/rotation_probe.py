"""Block Hadamard rotation before low-bit quantization, measured (docs/QUALITY.md, "Rotation").

A rotated matrix is W·H with H block-diagonal (Sylvester Hadamard blocks of 32 or 64 columns,
optionally with random signs); the engine would apply H to the activations, so W·x is unchanged
before rounding. Here each variant quantizes the layer matrices (rotated or not) with one
importance-weighted asymmetric quantizer (groups of 32 along the input, f16 scale and minimum, a
grid of scales each refitted by weighted least squares), decodes them back to the source's basis,
and runs a numpy forward of SmolLM2 in GGUF conventions (its base perplexity on the Apache text
equals the harness's, 12.6954). The embedding stays at the source's values, so only the layers'
rounding is compared. Importance: the diagonal of each input's second moment over the
calibration text, in the rotated basis for rotated matrices (diag(Hᵀ C H)).

    weft tokenize MODEL --text /usr/share/common-licenses/Apache-2.0 --json > WORK/ids.json
    weft tokenize MODEL --text data/calibration.txt --json > WORK/cal.json
    python3 scripts/quality/rotation_probe.py MODEL WORK [BITS:ROT:WEIGHTS ...]

ROT is none, h32, h64 or rh64 (random signs), or awq: no rotation but AWQ's equivalent column
scaling (W·diag(s), the activations times 1/s folded into the norm, V or up rows before them;
s = importance^(a/2), a from 0, 0.25, 0.5, 0.75 chosen for each input by the least
calibration-weighted output error tr(ΔW C ΔWᵀ) of the matrices reading it); WEIGHTS imp or flat.
"""
import json
import os
import sys
import time

import numpy as np
import gguf

SRC, WORK = sys.argv[1], sys.argv[2]
r = gguf.GGUFReader(SRC)
W = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32) for t in r.tensors}
L, D, H, KV, HD, FF = 30, 576, 9, 3, 64, 1536
BASE, EPS = 100000.0, 1e-5
ROLES = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
INPUT = {"attn_q": "qkv", "attn_k": "qkv", "attn_v": "qkv", "attn_output": "o", "ffn_gate": "gu", "ffn_up": "gu", "ffn_down": "d"}


def rms(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def rope(x, pos):  # x [T, heads, 64], adjacent pairs
    inv = BASE ** (-np.arange(0, HD, 2, dtype=np.float64) / HD)
    a = np.outer(pos, inv)
    c, s = np.cos(a).astype(np.float32)[:, None, :], np.sin(a).astype(np.float32)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def forward(w, ids, stats=None):
    T = len(ids)
    pos = np.arange(T)
    h = w["token_embd.weight"][ids].copy()
    mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
    for i in range(L):
        p = f"blk.{i}."
        x = rms(h, w[p + "attn_norm.weight"])
        q = (x @ w[p + "attn_q.weight"].T).reshape(T, H, HD)
        k = (x @ w[p + "attn_k.weight"].T).reshape(T, KV, HD)
        v = (x @ w[p + "attn_v.weight"].T).reshape(T, KV, HD)
        q, k = rope(q, pos), rope(k, pos)
        o = np.empty((T, H, HD), dtype=np.float32)
        for hh in range(H):
            s = q[:, hh] @ k[:, hh // 3].T / 8.0 + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            o[:, hh] = (s / s.sum(-1, keepdims=True)) @ v[:, hh // 3]
        o = o.reshape(T, D)
        h = h + o @ w[p + "attn_output.weight"].T
        x2 = rms(h, w[p + "ffn_norm.weight"])
        g, u = x2 @ w[p + "ffn_gate.weight"].T, x2 @ w[p + "ffn_up.weight"].T
        a = g / (1 + np.exp(-g)) * u
        if stats is not None:
            for key, val in (("qkv", x), ("o", o), ("gu", x2), ("d", a)):
                v64 = val.astype(np.float64)
                stats[(i, key)] = stats.get((i, key), 0) + v64.T @ v64
        h = h + a @ w[p + "ffn_down.weight"].T
    return rms(h, w["output_norm.weight"])


def log_probs(w, ids):
    out = forward(w, ids)
    lp = np.empty((len(ids), w["token_embd.weight"].shape[0]), dtype=np.float32)
    for s in range(0, len(ids), 256):
        z = (out[s:s + 256] @ w["token_embd.weight"].T).astype(np.float64)
        z -= z.max(-1, keepdims=True)
        lp[s:s + 256] = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return lp


def compare(base, lp, ids):
    n = len(ids) - 1
    b, m = base[:n].astype(np.float64), lp[:n].astype(np.float64)
    kl = np.maximum((np.exp(b) * (b - m)).sum(1), 0)
    nll = -m[np.arange(n), np.asarray(ids[1:])].mean()
    return dict(kld=float(kl.mean()), p99=float(np.quantile(kl, 0.99)), ppl=float(np.exp(nll)),
                top1=float((b.argmax(1) == m.argmax(1)).mean()))


def hadamard(n, seed=None):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    h /= np.sqrt(n)
    if seed is not None:  # randomized: H · diag(±1)
        h = h * np.random.default_rng(seed).choice([-1.0, 1.0], n)[None, :]
    return h


def block_apply(wm, hb):
    """wm [.., cols] times the block-diagonal matrix of hb along cols."""
    b = hb.shape[0]
    return (wm.reshape(*wm.shape[:-1], -1, b) @ hb).reshape(wm.shape)


def quant_asym(w, bits, group, imp):
    """Asymmetric b-bit groups along columns, f16 scale/min, levels and params chosen to minimise
    the importance-weighted squared error (a grid of scale candidates, then a weighted
    least-squares refit of scale and min for each candidate's levels)."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // group, group).astype(np.float64)
    wt = np.broadcast_to(imp.reshape(1, cols // group, group), g.shape)
    lo, hi = g.min(-1, keepdims=True), g.max(-1, keepdims=True)
    nmax = 2 ** bits - 1
    best_err = np.full(lo.shape, np.inf)
    best = np.zeros_like(g)
    for step in np.linspace(-0.5, 0.2, 15):
        rng = np.maximum(hi - lo, 1e-12)
        iscale = (nmax + step) / rng
        lev = np.clip(np.round((g - lo) * iscale), 0, nmax)
        # weighted LS for x ≈ s·lev + m
        sw = wt.sum(-1, keepdims=True)
        sl = (wt * lev).sum(-1, keepdims=True)
        sll = (wt * lev * lev).sum(-1, keepdims=True)
        sx = (wt * g).sum(-1, keepdims=True)
        slx = (wt * lev * g).sum(-1, keepdims=True)
        det = sw * sll - sl * sl
        s = np.where(det > 0, (sw * slx - sl * sx) / np.where(det > 0, det, 1), rng / nmax)
        m = np.where(det > 0, (sx - s * sl) / np.where(sw > 0, sw, 1), lo)
        s = s.astype(np.float16).astype(np.float64)
        m = m.astype(np.float16).astype(np.float64)
        # re-assign levels for the fitted params
        lev = np.clip(np.round((g - m) / np.where(s != 0, s, 1)), 0, nmax)
        rec = s * lev + m
        err = (wt * (rec - g) ** 2).sum(-1, keepdims=True)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best = np.where(better, rec, best)
    return best.reshape(rows, cols).astype(np.float32)


if __name__ == "__main__":
    os.chdir(WORK)
    ids = json.load(open("ids.json"))
    cal = json.load(open("cal.json"))
    t = time.time()
    try:
        base = np.load("base.npy")
    except FileNotFoundError:
        base = log_probs(W, ids)
        np.save("base.npy", base)
    print("base", compare(base, base, ids), f"{time.time() - t:.0f}s", flush=True)
    try:
        C = dict(np.load("cov.npz"))
        stats = {(int(k.split("_")[0]), k.split("_", 1)[1]): v for k, v in C.items()}
    except FileNotFoundError:
        stats = {}
        for s in range(0, len(cal), 512):
            forward(W, cal[s:s + 512], stats)
        np.savez("cov.npz", **{f"{i}_{k}": v for (i, k), v in stats.items()})
    def awq(w2, bits, i, key, roles):
        c = stats[(i, key)]
        d = np.diag(c).copy()
        best = None
        for a in (0.0, 0.25, 0.5, 0.75):
            s = (d / d.mean()) ** (a / 2)
            s /= np.exp(np.log(s).mean())
            err, qs = 0.0, {}
            for role in roles:
                m = W[f"blk.{i}.{role}.weight"]
                imp = d / s**2
                q = quant_asym(m * s[None, :], bits, 32, imp / imp.mean()) / s[None, :]
                dw = (q - m).astype(np.float64)
                err += float(np.einsum("ij,jk,ik->", dw, c, dw))
                qs[f"blk.{i}.{role}.weight"] = q
            if best is None or err < best[0]:
                best = (err, qs)
        w2.update(best[1])

    variants = sys.argv[3:] or ["3:none:imp", "3:h64:imp", "3:h32:imp", "3:rh64:imp", "2:none:imp", "2:h64:imp", "2:rh64:imp", "3:none:flat", "3:h64:flat"]
    for var in variants:
        bits, rot, weigh = var.split(":")
        bits = int(bits)
        if rot == "awq":
            w2 = dict(W)
            for i in range(L):
                for key in ("qkv", "o", "gu", "d"):
                    awq(w2, bits, i, key, [r for r in ROLES if INPUT[r] == key])
            t = time.time()
            print(var, compare(base, log_probs(w2, ids), ids), f"{time.time() - t:.0f}s", flush=True)
            continue
        hb = None
        if rot != "none":
            n = int(rot.lstrip("rh"))
            hb = hadamard(n, seed=1 if rot.startswith("rh") else None)
        w2 = dict(W)
        for i in range(L):
            for role in ROLES:
                name = f"blk.{i}.{role}.weight"
                m = W[name]
                c = stats[(i, INPUT[role])]
                if hb is not None:
                    m = block_apply(m, hb)
                    # diag(Hb^T C Hb) for the block-diagonal Hb
                    n = hb.shape[0]
                    cols = c.shape[0]
                    d = np.empty(cols)
                    for b0 in range(0, cols, n):
                        blk = c[b0:b0 + n, b0:b0 + n]
                        d[b0:b0 + n] = np.einsum("ij,ik,kj->j", hb, blk, hb)
                    imp = d
                else:
                    imp = np.diag(c).copy()
                if weigh == "flat":
                    imp = np.ones_like(imp)
                q = quant_asym(m, bits, 32, imp / imp.mean())
                if hb is not None:
                    q = block_apply(q, hb.T)
                w2[name] = q
        t = time.time()
        print(var, compare(base, log_probs(w2, ids), ids), f"{time.time() - t:.0f}s", flush=True)
