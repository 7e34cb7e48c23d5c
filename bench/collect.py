"""Gathers the benchmark outputs under bench/results/ into one results file and one chart.

    python bench/collect.py            # writes bench/results.json, bench/results.md, bench/chart.svg

Inputs (each written by the command named in bench/RESULTS.md):
  bench/results/h100/run/   weft-<shape>-<format>.json (weft bench --json --profile),
                            torch-<shape>.jsonl (bench/gpu/torch_generate.py), qmatmul.json
  bench/results/local/      weft-native.json (weft bench --json on lavapipe), llama-cpp.json
                            (bench/native/llama_cpp_bench.py), browser.json (bench/browser/run.mjs)
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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
        out["gemv"] = [{"format": r["format"], "gb_s": r["gb_per_s"], "shape": f"{r['n']}x{r['k']}"}
                       for r in q.get("rows", []) if "gb_per_s" in r and "n" in r]
        out["wgpu_copy_gb_s"] = q.get("copy", {}).get("read_write_gb_per_s")
    return out


def local() -> dict:
    d = RESULTS / "local"
    rows = {}
    native = load_json(d / "weft-native.json")
    if native:
        rows["weft native (lavapipe, Vulkan)"] = {"decode_tok_s": native["decode_tok_s_median"],
                                                 "prefill_tok_s": native["prefill_tok_s_median"]}
    cpp = load_json(d / "llama-cpp.json")
    if cpp:
        rows[f"llama.cpp native ({cpp['threads']} threads)"] = {"decode_tok_s": cpp["decode_tok_s_median"],
                                                             "prefill_tok_s": cpp["prefill_tok_s_median"]}
    browser = load_json(d / "browser.json")
    for r in (browser or {}).get("results", []):
        name = "weft browser (SwiftShader WebGPU)" if r["engine"] == "weft" else \
            f"wllama browser ({r.get('threads')} threads, wasm)"
        rows[name] = {"decode_tok_s": r["decodeTokS"], "prefill_tok_s": r["prefillTokS"]}
    return rows


def chart(data: dict, path: Path) -> None:
    panels = 3 if data["local"] else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.8))
    for ax, shape in zip(axes[:2], ["smollm2-135m", "tinyllama-1.1b"]):
        row = data["h100"]["shapes"].get(shape, {})
        names = list(row)
        vals = [row[n]["decode_tok_s"] for n in names]
        ax.barh(names, vals, color=["#2b6cb0" if n.startswith("weft") else "#a0aec0" for n in names])
        ax.set_title(f"H100, {shape} shape: decode tok/s")
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:.0f}", va="center")
        ax.invert_yaxis()
    row = data["local"]
    if not row:
        fig.tight_layout()
        fig.savefig(path, format="svg")
        return
    names = list(row)
    vals = [row[n]["decode_tok_s"] for n in names]
    axes[2].barh(names, vals, color=["#2b6cb0" if n.startswith("weft") else "#a0aec0" for n in names])
    axes[2].set_title("2-core CPU machine, SmolLM2 Q4_1: decode tok/s")
    for i, v in enumerate(vals):
        axes[2].text(v, i, f" {v:.1f}", va="center")
    axes[2].invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, format="svg")


def markdown(data: dict) -> str:
    lines = ["| where | model shape | engine | decode tok/s | prefill tok/s |", "|---|---|---|---|---|"]
    for shape, row in data["h100"]["shapes"].items():
        for name, r in row.items():
            pre = f"{r['prefill_tok_s']:.0f}" if "prefill_tok_s" in r else ""
            lines.append(f"| H100 | {shape} | {name} | {r['decode_tok_s']:.1f} | {pre} |")
    for name, r in data["local"].items():
        lines.append(f"| 2-core CPU | SmolLM2-135M Q4_1 | {name} | {r['decode_tok_s']:.1f} | {r['prefill_tok_s']:.1f} |")
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
            ratios.append(f"- GEMV {g['format']} {g['shape']}: {g['gb_s']:.0f} GB/s = {g['gb_s'] / copy:.1%} of copy")
    return "\n".join(lines) + "\n\n" + "\n".join(ratios) + "\n"


def main() -> None:
    data = {"h100": h100(), "local": local()}
    (ROOT / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    chart(data, ROOT / "chart.svg")
    table = markdown(data)
    (ROOT / "results.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
