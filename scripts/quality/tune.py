"""Tunes the group scales, zero points and norms of a weft file against its source by distillation.

What moves is each group's scale and zero point (on the grid the format stores: f16, or the `k`
scheme's byte codes on the row's unit, rounded in the forward pass with a straight-through
gradient) and the f32 norm weights; with --levels the stored levels too, else they stay as
`weft quantize` chose them. The loss is KL(source || tuned) of the next-token distributions over windows of a
calibration text, the source being the GGUF the file was quantized from, run by the same
transformers model and name mapping as the quality harness. A few windows are held out: the
parameters of the epoch with the lowest held-out KL are written. The file written has the same
tensors, shapes, dtypes and metadata as the one read, so every weft decoder and kernel reads it
unchanged.

usage: tune.py --source GGUF --file IN.st --ids IDS.json [--ids MORE.json] --out OUT.st [--epochs N] [--levels]
       tune.py generate --source GGUF --ids IDS.json --out SAMPLED.json [--count N --seed S]
       tune.py check --file FILE.st [--weft BIN]     (this script's decoding against weft's)
"""

import argparse
import json
import math
import re
import sys
import time

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from harness import Runner, hf_name

FORMAT = re.compile(r"q(\d)_g(\d+)_(sym|asym|k)$")
NORMS = ("attn_norm", "ffn_norm", "output_norm")
K_EXP_MIN = -24


def unpack_levels(words, bits, group):
    """Stored levels [rows, groups · group] of a packed matrix (docs/FORMAT.md, "Packing")."""
    rows = words.shape[0]
    w = words.astype(np.uint32)
    if bits == 3:
        chunks = w.reshape(rows, -1, 3)
        i = np.arange(32, dtype=np.uint32)
        low = (chunks[:, :, (i // 16)] >> (2 * (i % 16))) & 3
        high = (chunks[:, :, 2:3] >> i) & 1
        return (low | (high << 2)).reshape(rows, -1).astype(np.uint8)
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint32) * bits
    return ((w[:, :, None] >> shifts) & ((1 << bits) - 1)).reshape(rows, -1).astype(np.uint8)


def pack_levels(levels, bits):
    """The inverse of unpack_levels: u32 words as docs/FORMAT.md packs them."""
    rows = levels.shape[0]
    lv = levels.astype(np.uint32)
    if bits == 3:
        chunks = lv.reshape(rows, -1, 32)
        i = np.arange(32, dtype=np.uint32)
        low = (chunks & 3) << (2 * (i % 16))
        words = np.stack([np.bitwise_or.reduce(low[:, :, :16], -1),
                          np.bitwise_or.reduce(low[:, :, 16:], -1),
                          np.bitwise_or.reduce((chunks >> 2) << i, -1)], -1)
        return words.reshape(rows, -1).astype(np.uint32)
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint32) * bits
    return np.bitwise_or.reduce(lv.reshape(rows, -1, per) << shifts, -1).astype(np.uint32)


def f16_ste(x):
    return x + (x.half().float() - x).detach()


def round_ste(x):
    return x + (torch.round(x) - x).detach()


class Matrix:
    """One quantized matrix: fixed levels, tunable scale (log offset) and zero point (offset)."""

    def __init__(self, name, info, tensors, perm):
        m = FORMAT.match(info["format"])
        if not m:
            raise SystemExit(f"{name}: format {info['format']} is not tunable here")
        self.name, self.bits, self.group, self.scheme = name, int(m[1]), int(m[2]), m[3]
        self.rows, self.cols = info["shape"]
        self.perm = None if perm is None else torch.from_numpy(perm)
        self.q = torch.from_numpy(unpack_levels(tensors[name + ".weft_q"], self.bits, self.group))
        scale = tensors[name + ".weft_scale"]
        if self.scheme == "k":
            exps = scale[:, 0].astype(np.int32) + K_EXP_MIN
            self.unit = torch.from_numpy(np.ldexp(np.float32(1), exps).astype(np.float32))[:, None]
            s0 = scale[:, 1:].astype(np.float32) * self.unit.numpy()
            z0 = tensors[name + ".weft_zero"].astype(np.float32) / 8 - 8
        else:
            s0 = scale.astype(np.float32)
            z0 = (tensors[name + ".weft_zero"].astype(np.float32) if self.scheme == "asym"
                  else np.full_like(s0, 2 ** (self.bits - 1)))
        self.s0, self.z0 = torch.from_numpy(s0), torch.from_numpy(z0)
        self.log_ds = torch.zeros_like(self.s0, requires_grad=True)
        self.dz = torch.zeros_like(self.z0, requires_grad=self.scheme != "sym")
        self.v = None

    def free_levels(self):
        """Levels become tunable too: a latent value per weight, in level units, rounded (and
        clamped to the format's range) in the forward pass with a straight-through gradient."""
        self.v = self.q.float().requires_grad_(True)

    def group_params(self):
        """The scale's and zero point's tunables that move (not the levels)."""
        return [q for q in (self.log_ds, self.dz) if q.requires_grad]

    def levels(self):
        if self.v is None:
            return self.q.float()
        return round_ste(self.v).clamp(0, 2**self.bits - 1)

    def grid(self):
        """Scale and zero point as stored (straight-through in the backward pass)."""
        s = self.s0 * torch.exp(self.log_ds)
        z = self.z0 + self.dz
        if self.scheme == "k":
            s = round_ste(s / self.unit).clamp(0, 255) * self.unit
            z = round_ste((z + 8) * 8).clamp(0, 255) / 8 - 8
        elif self.scheme == "asym":
            s, z = f16_ste(s), f16_ste(z)
        else:
            s = f16_ste(s)
        return s, z

    def weight(self):
        s, z = self.grid()
        g = self.group
        w = (self.levels() - z.repeat_interleave(g, dim=1)) * s.repeat_interleave(g, dim=1)
        w = w[:, : self.cols]
        return w if self.perm is None else w.index_select(0, self.perm)

    def stored(self):
        """The tensors to write: the format's dtypes and layout."""
        with torch.no_grad():
            s, z = self.grid()
            if self.scheme == "k":
                codes = torch.round(s / self.unit).clamp(0, 255).numpy().astype(np.uint8)
                exps = (torch.log2(self.unit[:, 0]).round().numpy().astype(np.int32) - K_EXP_MIN).astype(np.uint8)
                out = {".weft_scale": np.concatenate([exps[:, None], codes], axis=1),
                       ".weft_zero": torch.round((z + 8) * 8).clamp(0, 255).numpy().astype(np.uint8)}
            else:
                out = {".weft_scale": s.numpy().astype(np.float16)}
                if self.scheme == "asym":
                    out[".weft_zero"] = z.numpy().astype(np.float16)
            if self.v is not None:
                out[".weft_q"] = pack_levels(self.levels().numpy().astype(np.uint8), self.bits)
        return {self.name + k: v for k, v in out.items()}


def quantized(meta):
    """(name, info) of every quantized matrix a weft file's metadata lists."""
    for key, value in meta.items():
        if key.startswith("weft.q."):
            yield key[len("weft.q."):], json.loads(value)


def generate(a):
    """Token ids sampled from the source model itself (temperature 1), each sequence started from
    a token drawn from the given texts: tuning data from the model's own distribution, which
    covers more than one text's domain."""
    runner = Runner(a.source)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    starts = [t for path in a.ids for t in json.load(open(path))]
    out = []
    for b in range(0, a.count, a.batch):
        n = min(a.batch, a.count - b)
        first = torch.tensor([[starts[i]] for i in torch.randint(len(starts), (n,)).tolist()])
        with torch.no_grad():
            seqs = runner.model.generate(first, attention_mask=torch.ones_like(first), do_sample=True,
                                         temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.ctx - 1,
                                         min_new_tokens=a.ctx - 1, pad_token_id=0)
        out += [s.tolist() for s in seqs]
        print(f"{len(out)} of {a.count} sequences", flush=True)
    json.dump([t for s in out for t in s], open(a.out, "w"))


def check(a):
    """This script's reading of a weft file against weft's own: every quantized matrix decoded
    here must equal `weft dequantize`'s f32 tensor bit for bit, and its levels packed again must
    give the stored words."""
    from run_table import weft_tensors

    tensors = load_file(a.file)
    with safe_open(a.file, "np") as f:
        meta = f.metadata()
    ref = weft_tensors(a, a.file)
    bad, seen = 0, {}
    for name, info in quantized(meta):
        m = Matrix(name, info, tensors, None)
        seen[info["format"]] = seen.get(info["format"], 0) + 1
        if not np.array_equal(m.weight().detach().numpy(), ref[name]):
            bad += 1
            print(f"{name} ({info['format']}): decoded values differ from weft dequantize")
        if not np.array_equal(pack_levels(m.q.numpy(), m.bits), tensors[name + ".weft_q"]):
            bad += 1
            print(f"{name} ({info['format']}): levels packed again differ")
    print(f"{sum(seen.values())} matrices ({', '.join(f'{k}: {v}' for k, v in sorted(seen.items()))}), {bad} differences")
    return 1 if bad else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        c = argparse.ArgumentParser()
        c.add_argument("check")
        c.add_argument("--file", required=True)
        c.add_argument("--weft", default="../../target/release/weft")
        return check(c.parse_args())
    if len(sys.argv) > 1 and sys.argv[1] == "generate":
        g = argparse.ArgumentParser()
        g.add_argument("generate")
        g.add_argument("--source", required=True)
        g.add_argument("--ids", required=True, action="append", help="texts whose tokens start the sequences")
        g.add_argument("--out", required=True)
        g.add_argument("--count", type=int, default=48)
        g.add_argument("--batch", type=int, default=16)
        g.add_argument("--ctx", type=int, default=512)
        g.add_argument("--seed", type=int, default=0)
        g.add_argument("--threads", type=int, default=2)
        return generate(g.parse_args())
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--ids", required=True, action="append",
                   help="token ids of a calibration text (weft tokenize --json); may be given again")
    p.add_argument("--out", required=True)
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--holdout", type=int, default=2, help="windows kept out of training")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--no-norms", action="store_true")
    p.add_argument("--no-zeros", action="store_true")
    p.add_argument("--levels", action="store_true", help="tune the levels too (straight-through rounding)")
    p.add_argument("--level-lr", type=float, default=0.02, help="learning rate of the levels, in level units")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)

    runner = Runner(a.source)
    torch.set_num_threads(a.threads)
    model = runner.model
    for prm in model.parameters():
        prm.requires_grad_(False)
    windows = []
    for path in a.ids:
        ids = json.load(open(path))
        windows += [ids[i : i + a.ctx] for i in range(0, len(ids) - a.ctx // 2, a.ctx)]
    train, held = windows[: len(windows) - a.holdout], windows[len(windows) - a.holdout :]
    started = time.time()
    with torch.no_grad():
        # f16 halves what the teacher's distributions hold in memory (50 MB a window of 512).
        teacher = [torch.log_softmax(model(torch.tensor([w])).logits[0], -1).half() for w in windows]
    print(f"{len(train)} training and {len(held)} held-out windows of <= {a.ctx} tokens; "
          f"teacher {time.time() - started:.0f} s", flush=True)

    tensors = load_file(a.file)
    with safe_open(a.file, "np") as f:
        meta = f.metadata()
    mats = []
    for name, info in quantized(meta):
        # The harness's own row reordering (Q and K), applied to the row indices.
        rows = np.arange(info["shape"][0])
        perm = runner.hf_name(name, rows)[1]
        mats.append(Matrix(name, info, tensors, None if np.array_equal(perm, rows) else perm))
    norms = {}
    if not a.no_norms:
        for name, t in tensors.items():
            role = name.split(".")[2] if name.startswith("blk.") else name.split(".")[0]
            if role in NORMS:
                norms[name] = (torch.from_numpy(t.astype(np.float32)), torch.zeros(t.shape, requires_grad=True))
    for m in mats:
        if a.no_zeros:
            m.dz.requires_grad_(False)
        if a.levels:
            m.free_levels()
    groups = [{"params": [q for m in mats for q in m.group_params()] + [d for _, d in norms.values()], "base": a.lr}]
    if a.levels:
        groups.append({"params": [m.v for m in mats], "base": a.level_lr})
    opt = torch.optim.Adam(groups, lr=a.lr)

    def weights():
        out = {hf_name(m.name): m.weight() for m in mats}
        for name, (n0, d) in norms.items():
            out[hf_name(name)] = n0 * (1 + d)
        return out

    def kld(window, t, grad):
        with torch.set_grad_enabled(grad):
            logits = torch.func.functional_call(model, weights(), (torch.tensor([window]),)).logits[0]
            lp = torch.log_softmax(logits, -1)
            t = t.float()
            return (t.exp() * (t - lp)).sum(-1).mean()

    def held_kld():
        with torch.no_grad():
            return sum(kld(w, t, False).item() for w, t in zip(held, teacher[len(train):])) / len(held)

    def snapshot():
        out = dict(tensors)
        for m in mats:
            out.update(m.stored())
        for name, (n0, d) in norms.items():
            out[name] = (n0 * (1 + d)).detach().numpy().astype(tensors[name].dtype)
        return out

    best = held_kld()
    best_tensors = snapshot()
    print(f"epoch 0: held-out KL {best:.5f} ({time.time() - started:.0f} s)", flush=True)
    steps = a.epochs * len(train)
    step = 0
    for epoch in range(1, a.epochs + 1):
        order = torch.randperm(len(train)).tolist()
        total = 0.0
        for i in order:
            for g in opt.param_groups:  # cosine decay over the run
                g["lr"] = g["base"] * 0.5 * (1 + math.cos(math.pi * step / steps))
            opt.zero_grad()
            loss = kld(train[i], teacher[i], True)
            loss.backward()
            opt.step()
            total += loss.item()
            step += 1
        h = held_kld()
        print(f"epoch {epoch}: training KL {total / len(train):.5f}, held-out KL {h:.5f} "
              f"({time.time() - started:.0f} s)", flush=True)
        if h < best:
            best, best_tensors = h, snapshot()
    save_file(best_tensors, a.out, metadata=meta)
    print(f"wrote {a.out}: held-out KL {best:.5f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
