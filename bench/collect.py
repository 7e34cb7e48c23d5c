"""Gathers the benchmark outputs under bench/results/ into one results file and one chart.

    python bench/collect.py            # writes bench/results.json, bench/results.md, bench/chart.svg

Inputs:
  bench/results/h100/run/   bench/gpu/run.sh: weft-<shape>-<format>.json (weft bench --json --profile),
                            torch-<shape>.jsonl (bench/gpu/torch_generate.py), qmatmul.json
  bench/results/h100/session6/  bench/gpu/session.sh: session.log (weft bench and llama-bench on the same GGUF
                            files, the device copy rate), qmatmul-<wg>-<rows>-<lanes>.json
  bench/results/local/      bench/local/run.sh: weft-native.json (weft bench --json on the native
                            Vulkan adapter), llama-cpp.json (bench/native/llama_cpp_bench.py),
                            browser.json (bench/browser/run.mjs), machine.json (CPU and protocol)
  bench/results/h100/*/, h200/*/  bench/gpu/session.sh's dawn step: dawn.jsonl, a record a model file with
                            weft bench --json and bench/dawn/run.mjs's line, from one call
  bench/results/local/cpu-vs-llamacpp.jsonl  bench/native/cpu_vs_llamacpp.sh: weft's CPU backend and
                            llama.cpp on one GGUF, interleaved rounds (the native CPU table)
  bench/results/embed/      bench/embed_compare.py: <machine>.jsonl, weft bench-embed and
                            sentence-transformers runs interleaved (rows of the embedding table)
  bench/results/h100/<session>/embed.jsonl  session.sh's embed step (bench/embed_gpu.py): weft's GPU
                            encoder and PyTorch f32/fp16 on one GPU (rows of the embedding table)
Missing inputs leave their rows out; so does a browser engine that reported a problem.
"""
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from collect_chromium import chromium, chromium_markdown  # noqa: E402

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"


def load_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def load_jsonl(path: Path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def h100() -> dict:
    run = RESULTS / "h100" / "run"
    out = {"shapes": {}, "copy_gb_s": None, "gemv": None}
    for shape in ["smollm2-135m", "tinyllama-1.1b"]:
        row = {}
        for fmt in ["q4_g32_sym", "q8_g32_sym"]:
            r = load_json(run / f"weft-{shape}-{fmt}.json")
            if r:
                row[f"weft {fmt}"] = {
                    "decode_tok_s": r["decode_tok_s_median"],
                    "prefill_tok_s": r["prefill_tok_s_median"],
                    "ttft_ms": r["ttft_ms_median"],
                    "weight_bytes": r["weight_bytes"],
                }
        for rec in load_jsonl(run / f"torch-{shape}.jsonl"):
            if rec["what"] == "copy":
                out["copy_gb_s"] = rec["gb_s"]
            else:
                row[f"PyTorch bf16 {rec['cache']} cache"] = {"decode_tok_s": rec["tok_s_median"]}
        out["shapes"][shape] = row
    q = load_json(run / "qmatmul.json")
    if q:
        out["gemv"] = [{"format": r["format"], "gb_s": r["gb_per_s"], "shape": f"{r['n']}x{r['k']}",
                        "config": r.get("config", {}).get("gemv")}
                       for r in q.get("rows", []) if "gb_per_s" in r and "n" in r]
        out["wgpu_copy_gb_s"] = q.get("copy", {}).get("read_write_gb_per_s")
        # The other launch shapes tuning may pick (qmatmul-<wg>-<rows>-<lanes>.json): the best per row.
        for other in sorted(run.glob("qmatmul-*.json")):
            for r in (load_json(other) or {}).get("rows", []):
                for g in out["gemv"]:
                    if (g["format"], g["shape"]) == (r["format"], f"{r['n']}x{r['k']}") and \
                            r["gb_per_s"] > g.get("best_gb_s", g["gb_s"]):
                        g["best_gb_s"], g["best_config"] = r["gb_per_s"], r.get("config", {}).get("gemv")
    return out


def session(*names: str, machine: str = "h100", copy_from: str | None = None) -> dict:
    """`session_call` of each folder, merged in order: an engine's figures from a later folder
    replace an earlier one's (so weft can come from a call without llama.cpp's build running
    beside it, and llama.cpp from the call that built it)."""
    merged = {"dir": ", ".join(f"bench/results/{machine}/{n}" for n in names), "machine": machine.upper(),
              "models": {}, "copy_gb_s": None, "gemv": {}, "gemm": {}}
    for name in names:
        one = session_call(name, machine)
        for model, engines in one["models"].items():
            merged["models"].setdefault(model, {}).update(engines)
        for key in ("gemv", "gemm"):
            for shape, by_config in one[key].items():
                merged[key].setdefault(shape, {}).update(by_config)
        for key in ("copy_gb_s", "copy_from"):
            if one.get(key) is not None and merged.get(key) is None:
                merged[key] = one[key]
    if merged["copy_gb_s"] is None and copy_from:
        # The copy rate from another call of the same session, said so.
        other = session_call(copy_from, machine)
        merged["copy_gb_s"], merged["copy_from"] = other["copy_gb_s"], other["dir"]
    return merged


def session_call(name: str, machine: str = "h100") -> dict:
    """weft beside llama.cpp (CUDA) on the same GGUF files, and the GEMV sweep, from one
    bench/gpu/session.sh call: every ratio pairs figures of one machine."""
    run = RESULTS / machine / name
    log = run / "session.log"
    out = {"dir": f"bench/results/{machine}/{name}", "models": {}, "copy_gb_s": None, "gemv": {}, "gemm": {}}
    if not log.exists():
        return out
    current = None
    for line in log.read_text().splitlines():
        # A call script's time stamp after the marker ("== [34 s] weft bench ...") is dropped.
        line = re.sub(r"^== \[\d+ s\] ", "== ", line)
        if line.startswith("device copy"):
            out["copy_gb_s"] = float(line.split(":")[1].split()[0])
        elif line.startswith("== weft bench "):
            # "== weft bench MODEL TYPE [VARIANT FLAGS | (defaults)]": one engine entry a variant.
            # Or "== weft bench MODEL-TYPE [FLAGS | (f32)]", as the llama-bench lines name files.
            words = line.split()
            if "-" in words[3] and (len(words) == 4 or words[4].startswith(("(", "--"))):
                (model, ty), rest = words[3].rsplit("-", 1), words[4:]
            else:
                model, ty, rest = words[3], words[4], words[5:]
            variant = " ".join(rest).strip("()")
            engine = "weft" if variant in ("", "defaults", "f32") else f"weft {variant}"
            current = out["models"].setdefault(f"{model} {ty}", {}).setdefault(engine, {})
        elif line.startswith("== llama-bench "):
            # "== llama-bench MODEL TYPE" or "== llama-bench MODEL-TYPE" (the llama step).
            words = line.split()[2:]
            model, ty = words if len(words) == 2 else words[0].rsplit("-", 1)
            current = out["models"].setdefault(f"{model} {ty}", {}).setdefault("llama.cpp", {})
        elif current is not None and line.startswith(("prefill ", "decode ")):
            current[line.split()[0]] = float(line.split()[1])
        elif current is not None and line.startswith("weights "):
            current["weight_mb"] = float(line.split()[1])
        elif current is not None and line.startswith("step "):
            current["dispatches"] = int(line.split()[1])
        elif current is not None and line.startswith("|") and ("pp128" in line or "tg128" in line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            current["prefill" if "pp128" in line else "decode"] = float(cells[-1].split()[0])
    for f in sorted(run.glob("qmatmul-*.json")):
        config = f.stem.removeprefix("qmatmul-")
        for r in (load_json(f) or {}).get("rows", []):
            key = f"{r['format'].removesuffix('+int8')} {r['n']}x{r['k']}"
            out["gemv"].setdefault(key, {})[config] = r["gb_per_s"]
    for f in sorted(run.glob("qgemm-*-t*.json")):
        kernel = f.stem.removeprefix("qgemm-").rsplit("-t", 1)[0]
        for r in (load_json(f) or {}).get("rows", []):
            out["gemm"].setdefault(f"{r['format']} {r['n']}x{r['k']} {r['tokens']}", {})[kernel] = r["gflop_per_s"]
    if out["copy_gb_s"] is None:
        # The copy rate from another call of the same session (a folder below), said so.
        for other in sorted(run.glob("*/session.log")):
            for line in other.read_text().splitlines():
                if line.startswith("device copy") and out["copy_gb_s"] is None:
                    out["copy_gb_s"] = float(line.split(":")[1].split()[0])
                    out["copy_from"] = str(other.parent.relative_to(ROOT.parent))
    return out


def local() -> dict:
    """The rows of bench/local/run.sh: every engine on this machine's CPU with one protocol."""
    d = RESULTS / "local"
    rows, skipped = {}, []  # skipped: sentences for the notes under the table

    def add(name: str, r: dict, prompt_len: int, gen: int) -> None:
        rows[name] = {"decode_tok_s": r["decode_tok_s_median"], "prefill_tok_s": r["prefill_tok_s_median"],
                      "ttft_ms": r["ttft_ms_median"], "prompt_len": prompt_len, "gen": gen}

    native = load_json(d / "weft-native.json")
    if native:
        adapter = native["adapter"].split(" (")[0]
        add(f"weft native ({native['backend']}: {adapter})", native, native["prompt_len"], native["gen"])
    cpp = load_json(d / "llama-cpp.json")
    if cpp:
        add(f"llama.cpp native ({cpp['threads']} threads)", cpp, cpp["prompt_len"], cpp["gen"])
    browser = load_json(d / "browser.json")
    for r in (browser or {}).get("results", []):
        if r.get("error"):
            skipped.append(f"left out {r['engine']} browser: {r['error']}")
            continue
        if r["engine"] == "weft":
            adapter = r.get("adapter") or {}
            name = f"weft browser (WebGPU: {adapter.get('architecture') or adapter.get('vendor') or '?'})"
        else:
            # wllama says its threads itself; weft's CPU engines in the `cpu` block they report.
            n = r.get("threads") if r.get("multithread") else (r.get("cpu") or {}).get("threads", 1)
            threads = f"{n} threads" if n and n > 1 else "1 thread"
            name = f"{r['engine']} browser (wasm, {threads})"
        if r.get("problems"):
            skipped.append(f"left out {name}: {'; '.join(r['problems'])}")
            continue
        add(name, r, browser["prompt_len"], browser["gen"])
    protocols = {(r["prompt_len"], r["gen"]) for r in rows.values()}
    if len(protocols) > 1:
        skipped.append(f"the rows differ in (prompt, generated) tokens: {sorted(protocols)}")
    machine = load_json(d / "machine.json")
    return {"machine": machine, "rows": rows, "skipped": skipped}


def bars(ax, names: list, vals: list, title: str, fmt: str) -> None:
    ax.barh(names, vals, color=["#2b6cb0" if n.startswith("weft") else "#a0aec0" for n in names])
    ax.set_title(title)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:{fmt}}", va="center")
    ax.invert_yaxis()


def chart(data: dict, path: Path) -> None:
    rows = data["local"]["rows"]
    peers = {n: r for n, r in data["session"]["models"].items() if "weft" in r and "llama.cpp" in r}
    panels = 2 + bool(rows) + bool(peers)
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.8))
    if peers:
        ax = axes[-1]
        names = [f"{e} {n}" for n in peers for e in ["weft", "llama.cpp"]]
        vals = [peers[n][e]["decode"] for n in peers for e in ["weft", "llama.cpp"]]
        bars(ax, names, vals, "H100, same GGUF files: decode tok/s\nweft (Vulkan) and llama.cpp (CUDA)", ".0f")
    for ax, shape in zip(axes[:2], ["smollm2-135m", "tinyllama-1.1b"]):
        row = data["h100"]["shapes"].get(shape, {})
        bars(ax, list(row), [row[n]["decode_tok_s"] for n in row], f"H100, {shape} shape: decode tok/s", ".0f")
    if rows:
        # The engines here span two orders of magnitude: a log axis keeps every bar visible.
        machine = data["local"]["machine"] or {}
        first = next(iter(rows.values()))
        where = f"{machine['cpus']}-CPU machine" if machine.get("cpus") else "this machine"
        model = machine.get("model_name", "")
        ax = axes[2]
        names = list(rows)
        vals = [rows[n]["decode_tok_s"] for n in names]
        bars(ax, names, vals, f"{where}: decode tok/s\n"
             f"{model}\nprompt {first['prompt_len']} tokens + {first['gen']} generated", ".1f")
        ax.set_xscale("log")
        ax.set_xlabel("log scale")
        ax.set_xlim(min(vals) / 3, max(vals) * 8)
    fig.tight_layout()
    fig.savefig(path, format="svg")


def markdown(data: dict) -> str:
    lines = ["| where | model shape | engine | decode tok/s | prefill tok/s | ttft ms |", "|---|---|---|---|---|---|"]
    num = lambda r, key, fmt: f"{r[key]:{fmt}}" if r.get(key) is not None else ""  # noqa: E731
    for shape, row in data["h100"]["shapes"].items():
        for name, r in row.items():
            lines.append(f"| H100 | {shape} | {name} | {r['decode_tok_s']:.1f} | {num(r, 'prefill_tok_s', '.0f')} "
                         f"| {num(r, 'ttft_ms', '.1f')} |")
    loc = data["local"]
    machine = loc["machine"] or {}
    where = f"{machine['cpus']}-CPU machine" if machine.get("cpus") else "this machine"
    model = machine.get("model_name", "")
    for name, r in loc["rows"].items():
        lines.append(f"| {where} | {model} | {name} | {r['decode_tok_s']:.1f} | {r['prefill_tok_s']:.1f} "
                     f"| {r['ttft_ms']:.0f} |")
    notes = []
    if loc["rows"]:
        first = next(iter(loc["rows"].values()))
        notes.append(f"- {where} ({machine.get('cpu', 'CPU unknown')}, {machine.get('date', 'date unknown')}): "
                     f"prompt {first['prompt_len']} tokens, {first['gen']} generated, greedy, median of "
                     f"{machine.get('reps', '?')} after one untimed run (bench/local/run.sh)")
    notes += [f"- {s}" for s in loc["skipped"]]
    h = data["h100"]
    ratios = []
    copy = h.get("copy_gb_s")
    for shape, row in h["shapes"].items():
        weft = max((r["decode_tok_s"] for n, r in row.items() if n.startswith("weft")), default=None)
        torch = max((r["decode_tok_s"] for n, r in row.items() if n.startswith("PyTorch")), default=None)
        if weft and torch:
            ratios.append(f"- {shape}: weft's best decode / PyTorch's best = {weft / torch:.2f}")
        q4 = row.get("weft q4_g32_sym")
        if q4 and copy:
            limit = copy * 1e9 / q4["weight_bytes"]
            ratios.append(f"- {shape} q4: bandwidth limit {limit:.0f} tok/s (weights {q4['weight_bytes'] / 1e6:.0f} MB "
                          f"per token at {copy:.0f} GB/s); weft reaches {q4['decode_tok_s'] / limit:.1%} of it")
    for g in h.get("gemv") or []:
        if copy:
            line = f"- GEMV {g['format']} {g['shape']}: {g['gb_s']:.0f} GB/s = {g['gb_s'] / copy:.1%} of copy"
            if "best_gb_s" in g:
                c = g["best_config"] or {}
                line += (f"; best tuning candidate (wg {c.get('wg')}, rows {c.get('rows')}, lanes {c.get('lanes')}): "
                         f"{g['best_gb_s']:.0f} GB/s = {g['best_gb_s'] / copy:.1%}")
            ratios.append(line)
    return "\n".join(lines) + "\n\n" + "\n".join(notes + ratios) + "\n" + peer_markdown(data["h200_session"]) \
        + peer_markdown(data["session"]) \
        + gemv_markdown(data["gemv_session"]) + peer_markdown(data["kquant_session"]) \
        + gemv_markdown(data["kquant_gemv"]) + gemm_markdown(data["gemm_session"])


def peer_markdown(s: dict) -> str:
    if not s["models"]:
        return ""
    copy = s["copy_gb_s"]
    out = [f"\n## {s.get('machine', 'H100')}: weft beside llama.cpp CUDA on the same GGUF files ({s['dir']})\n",
           "Where two folders are named they are calls of one session on one lent machine: each engine's figures "
           "come from the last folder that has them (weft from a call without llama.cpp's build running beside it).\n",
           "Random-weight Llama-shape GGUFs (bench/gpu/gen_quant_gguf.py), prompt 128 + 128 generated, "
           "median of 3: `weft bench --prompt-len 128 --gen 128 --reps 3` (Vulkan) and "
           "`llama-bench -p 128 -n 128 -r 3 -ngl 99` (CUDA, built for sm_90 from the llama-cpp-python 0.3.36 sdist). "
           + (f"Device copy (PyTorch, read + write): {copy:.0f} GB/s" if copy else "Device copy: not measured in this call")
           + (f" (measured in {s['copy_from']}, an earlier call of the same session).\n" if s.get("copy_from") else ".\n"),
           "The int8 column: the same files with `--int8-activations` (decode GEMVs on 8-bit activations, "
           "shaders/gemv_dp4.wgsl); it is not the default.\n",
           "| model | weft decode | weft decode int8 | llama.cpp decode | ratio (best) | weft prefill | llama.cpp prefill "
           "| ratio | weft dispatches / token | weft weight GB/s (of copy) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in s["models"].items():
        w, l = r.get("weft", {}), r.get("llama.cpp", {})
        if not w or not l:
            continue
        i8 = r.get("weft --int8-activations", {}).get("decode")
        best = max(w["decode"], i8 or 0)
        # A call that kept only the decode and prefill lines has no weight size: no rate then.
        gbs = w["weight_mb"] * best / 1e3 if "weight_mb" in w else None
        rate = "" if gbs is None else f"{gbs:.0f}{f' ({gbs / copy:.0%})' if copy else ''}"
        out.append(f"| {name} | {w['decode']:.1f} | {f'{i8:.1f}' if i8 else ''} | {l['decode']:.1f} | {best / l['decode']:.2f} "
                   f"| {w['prefill']:.0f} | {l['prefill']:.0f} | {w['prefill'] / l['prefill']:.3f} "
                   f"| {w.get('dispatches', '')} | {rate} |")
    return "\n".join(out) + "\n"



def gemv_markdown(s: dict) -> str:
    """The GEMV sweep of a session.sh call (by launch shape, with and without 8-bit activations)."""
    if not s["gemv"] or not s["copy_gb_s"]:
        return ""
    copy = s["copy_gb_s"]
    out = [f"\n### GEMV ({s['dir']}; device copy {copy:.0f} GB/s)\n"]
    configs = sorted({c for v in s["gemv"].values() for c in v})
    out += ["GEMV GB/s of weight bytes (qmatmul_bench, one buffer per call; 16384x16384 is 3x the 50 MB L2 "
            "at 4 bits), by launch shape wg-rows-lanes, and the best as a fraction of the device copy:", "",
            "| format | shape | " + " | ".join(configs) + " | best of copy |",
            "|---|---|" + "---|" * len(configs) + "---|"]
    for key, v in s["gemv"].items():
        fmt, shape = key.split()
        best = max(v.values())
        out.append(f"| {fmt} | {shape} | " + " | ".join(f"{v[c]:.0f}" if c in v else "" for c in configs)
                   + f" | {best / copy:.0%} |")
    return "\n".join(out) + "\n"


def gemm_markdown(s: dict) -> str:
    """The prefill GEMM of a session.sh call, GFLOP/s by kernel."""
    if not s["gemm"]:
        return ""
    kernels = sorted({k for v in s["gemm"].values() for k in v})
    out = [f"\n### Prefill GEMM ({s['dir']}): GFLOP/s by kernel (qmatmul_bench --tokens T --gemm KERNEL)\n",
           "| format | shape | tokens | " + " | ".join(kernels) + " |", "|---|---|---|" + "---|" * len(kernels)]
    for key, v in s["gemm"].items():
        fmt, shape, t = key.split()
        out.append(f"| {fmt} | {shape} | {t} | " + " | ".join(f"{v[k]:.0f}" if k in v else "" for k in kernels) + " |")
    return "\n".join(out) + "\n"


def dawn() -> list:
    """weft's JS API on Dawn (bench/dawn/run.mjs) beside a native `weft bench` of the same file run
    right before it (bench/gpu/session.sh's dawn step, dawn.jsonl): a row per model file of every
    folder that has them, both figures from one call."""
    rows = []
    for path in sorted(RESULTS.glob("h100/**/dawn.jsonl")) + sorted(RESULTS.glob("h200/**/dawn.jsonl")):
        for rec in load_jsonl(path):
            rows.append({"dir": str(path.parent.relative_to(ROOT.parent)), **rec})
    return rows


def dawn_markdown(rows: list) -> str:
    if not rows:
        return ""
    out = ["\n## H100 and H200: weft's JS API on Dawn beside native wgpu (bench/gpu/session.sh dawn step, one call)\n",
           "`bench/dawn/run.mjs`: js/direct.js's loadModel / generate over the wasm build in Node, Dawn from the npm "
           "package `webgpu` as navigator.gpu, the GGUF served over HTTP with Range; prompt 128 + 128 generated, greedy, "
           "median of 3 after one untimed run, timed around the async iterator. Native: `weft bench --prompt-len 128 "
           "--gen 128 --reps 3` on the same file right before.\n",
           "| folder | model | native decode | Dawn decode | Dawn / native | native prefill | Dawn prefill | Dawn / native "
           "| greedy ids equal | problems |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        n, d = r["native"], r["dawn"]
        errors = "; ".join(f"{k}: {x['error']}" for k, x in (("native", n), ("Dawn", d)) if "error" in x)
        if errors:
            out.append(f"| {r['dir']} | {r['model']} | | | | | | | | {errors} |")
            continue
        out.append(f"| {r['dir']} | {r['model']} | {n['decode_tok_s_median']:.1f} | {d['decode_tok_s_median']:.1f} "
                   f"| {d['decode_tok_s_median'] / n['decode_tok_s_median']:.2f} | {n['prefill_tok_s_median']:.0f} "
                   f"| {d['prefill_tok_s_median']:.0f} | {d['prefill_tok_s_median'] / n['prefill_tok_s_median']:.2f} "
                   f"| {d.get('ids_equal_first', '')} of {len(d.get('ids_dawn', []))} | {'; '.join(d.get('problems', []))} |")
    adapters = sorted({f"{k}: {r[k]['adapter']}" for r in rows for k in ("native", "dawn") if "adapter" in r[k]})
    return "\n".join(out + [""] + [f"- {a}" for a in adapters]) + "\n"


# The variants of one GEMV call (bench/results/h200/session49/d/call.sh, as session45/a): qmatmul_bench's JSON file
# for each, and its column's name.
GEMV_VARIANTS = [("gemv-rot256.json", "f32"), ("gemv-rot256--constant-shape.json", "f32, shape as constants"),
                 ("gemv-rot256--int8.json", "8-bit activations"),
                 ("gemv-rot256--int8--constant-shape.json", "8-bit, shape as constants"),
                 ("gemv-rot0.json", "f32, one buffer"), ("gemv-rot0--int8--constant-shape.json", "8-bit, constants, one buffer")]


def gemv_variants(folder: str) -> dict:
    """The issue's GEMV shapes at the default launch shape, by variant: µs a call and GB/s of weight
    bytes a row, with the device copy rate (PyTorch, session.log) of the same call."""
    d = RESULTS / folder
    log = d / "session.log"
    if not log.exists():
        return {}
    m = re.search(r"device copy .*: (\d+) GB/s", log.read_text())
    rows = {}
    for name, label in GEMV_VARIANTS:
        f = d / name
        if not f.exists():
            continue
        for r in json.loads(f.read_text())["rows"]:
            key = f"{r['format'].split('+')[0]} {r['n']}x{r['k']}"
            rows.setdefault(key, {})[label] = {"us": r["us_per_call"], "gb_s": r["gb_per_s"], "copies": r["copies"]}
    return {"dir": f"bench/results/{folder}", "copy_gb_s": float(m[1]) if m else None, "rows": rows}


def gemv_variants_markdown(g: dict) -> str:
    if not g or not g["rows"] or not g["copy_gb_s"]:
        return ""
    copy = g["copy_gb_s"]
    labels = [label for _, label in GEMV_VARIANTS]
    out = [f"\n## H200: the GEMV at the issue's shapes ({g['dir']}; device copy {copy:.0f} GB/s)\n",
           "qmatmul_bench at the adapter's default launch shape; the calls cycle through copies of the weight "
           "holding 256 MiB (read from memory, as a decode step reads its matrices) unless the column says one "
           "buffer (a matrix the 60 MB L2 holds is then read from it). µs a call, GB/s of weight bytes and "
           "their fraction of the device copy:", "",
           "| format | N x K | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for key, v in g["rows"].items():
        fmt, shape = key.split()
        cells = [f"{v[c]['us']:.1f} µs, {v[c]['gb_s']:,.0f} ({v[c]['gb_s'] / copy:.0%})" if c in v else "" for c in labels]
        out.append(f"| {fmt} | {shape} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def long_prompts(folder: str) -> list:
    """`weft bench` runs of one call at several prompt lengths, two builds interleaved (the call's
    `weft` and the build before it, `weft_old`): a row per build, model and prompt length with
    every run's decode tok/s and the time to first token."""
    log = RESULTS / folder / "session.log"
    if not log.exists():
        return []
    rows, cur = {}, None
    for line in log.read_text().splitlines():
        m = re.match(r"== \[\d+ s\] (\S+) bench (\S+) (\S+) .*--prompt-len (\d+)", line)
        if m:
            cur = rows.setdefault((m[1], m[2], m[3], int(m[4])), {"decode": [], "ttft": []})
            continue
        m = re.match(r"(decode|ttft)\s+([\d.]+)", line)
        if m and cur is not None:
            cur[m[1]].append(float(m[2]))
    return [{"build": k[0], "model": f"{k[1]} {k[2]}", "prompt": k[3], **v} for k, v in rows.items()]


def long_prompts_markdown(folder: str, rows: list) -> str:
    if not rows:
        return ""
    out = [f"\n## H200: decode at long prompts (bench/results/{folder})\n",
           "`weft bench --prompt-len P --gen 128 --reps 3 --int8-activations` on the random-weight 7B Q4_0 GGUF, "
           "the decode attention's chunk chosen by context length (`weft`: chunks of 64 up to 256 positions, 128 up "
           "to 512, 256 beyond) against the build before it (`weft_old`: chunks of 64 at every length), the two "
           "interleaved in one call; every run's median of 3.\n",
           "| model | prompt | build | decode tok/s (runs) | ttft ms |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["model"], -r["prompt"], r["build"])):
        out.append(f"| {r['model']} | {r['prompt']} | {r['build']} | {', '.join(f'{v:.1f}' for v in r['decode'])} "
                   f"| {', '.join(f'{v:.0f}' for v in r['ttft'])} |")
    return "\n".join(out) + "\n"


def embed_table() -> str:
    """Best and median sentences/s per engine, weights and device of each machine's interleaved
    runs (bench/embed_compare.py; on the GPU machine, bench/gpu/session.sh's embed step), with the
    load average they ran under."""
    files = sorted((RESULTS / "embed").glob("*.jsonl")) + sorted((RESULTS / "h100").glob("*/embed.jsonl"))
    if not files:
        return ""
    out = ["", "Interleaved runs (`bench/embed_compare.py`; best and median of the runs, the 1-minute load "
           "average before each):", "",
           "| machine | engine | device | weights | threads | runs | best sentences/s | median | load |",
           "|---|---|---|---|---|---|---|---|---|"]
    for f in files:
        rows = load_jsonl(f)
        # A run of fewer sentences than the 256 says so beside its device.
        for r in rows:
            if r.get("sentences", 256) != 256:
                r["device"] = f"{r['device']}, {r['sentences']} sentences"
        for key in dict.fromkeys((r["engine"], r["device"], r["weights"], r["threads"]) for r in rows):
            sel = [r for r in rows if (r["engine"], r["device"], r["weights"], r["threads"]) == key]
            rates = sorted(r["sentences_per_s"] for r in sel)
            loads = [r["load_1min"] for r in sel]
            machine = f"h100 {f.parent.name}" if f.name == "embed.jsonl" else f.stem
            rate = lambda v: f"{v:.2f}" if v < 1 else f"{v:.1f}"  # noqa: E731
            out.append(f"| {machine} | {key[0]} | {key[1]} | {key[2]} | {key[3]} | {len(sel)} | {rate(rates[-1])} "
                       f"| {rate(rates[len(rates) // 2])} | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(out) + "\n"


def cpu_vs_llamacpp_table() -> str:
    """weft's CPU backend beside llama.cpp natively (bench/native/cpu_vs_llamacpp.sh): per engine
    the best and median of the runs' medians, then weft / llama.cpp of the medians and the range
    of the per-round ratios, with the load average the runs started under."""
    rows = load_jsonl(RESULTS / "local" / "cpu-vs-llamacpp.jsonl")
    if not rows:
        return ""
    out = ["", "weft's CPU backend and llama.cpp natively, interleaved rounds (`bench/native/cpu_vs_llamacpp.sh`; "
           "best and median over the rounds of each run's median, the 1-minute load average before each run):", "",
           "| model | prompt + gen | threads | engine | runs | prefill best | prefill median | decode best "
           "| decode median | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    mid = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    keys = dict.fromkeys((r["model"].split("/")[-1], r["prompt_len"], r["gen"], r["threads"]) for r in rows)
    ratios = []
    for key in keys:
        sel = [r for r in rows if (r["model"].split("/")[-1], r["prompt_len"], r["gen"], r["threads"]) == key]
        medians = {}
        for engine in dict.fromkeys(r["engine"] for r in sel):
            runs = [r for r in sel if r["engine"] == engine]
            pre = [r["prefill_tok_s_median"] for r in runs]
            dec = [r["decode_tok_s_median"] for r in runs]
            loads = [r["load_1min"] for r in runs]
            medians[engine] = (mid(pre), mid(dec))
            out.append(f"| {key[0]} | {key[1]} + {key[2]} | {key[3]} | {engine} | {len(runs)} | {max(pre):.1f} "
                       f"| {mid(pre):.1f} | {max(dec):.1f} | {mid(dec):.1f} | {min(loads):.1f}-{max(loads):.1f} |")
        weft, cpp = medians.get("weft cpu"), medians.get("llama.cpp")
        if weft and cpp:
            by_round = {}
            for r in sel:
                by_round.setdefault(r["round"], {})[r["engine"]] = r
            pairs = [(p["weft cpu"], p["llama.cpp"]) for p in by_round.values() if len(p) == 2]
            span = lambda k: (min(w[k] / c[k] for w, c in pairs), max(w[k] / c[k] for w, c in pairs))  # noqa: E731
            (p0, p1), (d0, d1) = span("prefill_tok_s_median"), span("decode_tok_s_median")
            ratios.append(f"- {key[0]}, {key[3]} threads: weft / llama.cpp of the medians: prefill "
                          f"{weft[0] / cpp[0]:.2f}, decode {weft[1] / cpp[1]:.2f}; per round prefill {p0:.2f}-{p1:.2f}, "
                          f"decode {d0:.2f}-{d1:.2f}")
    return "\n".join(out + [""] + ratios) + "\n"


def main() -> None:
    data = {"h100": h100(), "local": local(), "session": session("session26"),
            # The H200: llama.cpp from call a (which built it; its weft runs found no adapter),
            # weft from call b on the same machine (it was still held).
            # Since: one call, llama.cpp built beside weft, the copy rate measured in it
            # (session 35, call e; again in session 39, call a, with the code of 5a5c9b9, and
            # in session 41, call g, with de0946f's; in session 44, call e, with d852b25's).
            "h200_session": session("session49/a", machine="h200"),
            "gemv_session": session("session26", "session27"),
            # Q4_K_M and Q4_1 files, and every GGUF block type on the repacked GEMV (one
            # session: calls b and c, each model's engines from one call).
            "kquant_session": session("session29/b", "session29/c"), "kquant_gemv": session("session29/c"), "gemm_session": session("session9", "session17", "session19"), "dawn": dawn(),
            "chromium": chromium()}
    # The decode attention's chunk by context length (session 37, call f).
    data["h200_long_prompts"] = long_prompts("h200/session37/f")
    # The GEMV at the shapes, f32 and 8-bit activations, the shape as constants or not
    # (session 45, call a, with the code of note 68).
    data["h200_gemv"] = gemv_variants("h200/session49/d")
    (ROOT / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    chart(data, ROOT / "chart.svg")
    table = markdown(data) + gemv_variants_markdown(data["h200_gemv"]) + dawn_markdown(data["dawn"]) + chromium_markdown(data["chromium"]) + long_prompts_markdown("h200/session37/f", data["h200_long_prompts"])
    # Sentence-embedding figures are measured by hand (their commands are in the file).
    embed = ROOT / "results" / "embed.md"
    if embed.exists():
        table += "\n" + embed.read_text()
    table += embed_table()
    table += cpu_vs_llamacpp_table()
    (ROOT / "results.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
