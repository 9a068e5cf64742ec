"""The roofline plot: every aggregation forward as (arithmetic intensity, GFLOP/s), under the copy
bandwidth and matrix-product ceilings measured in the same run."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def plot(rows: list[dict], ceilings: dict, device: str, path: Path) -> Path:
    # lazy: matplotlib is an optional (bench) dependency, loaded only to draw
    import matplotlib

    matplotlib.use("Agg")
    # lazy: after the backend is chosen
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    ok = [r for r in rows if r.get("ok")]
    ai = [r["flop"] / r["bytes"] for r in ok] or [0.25]
    x = np.logspace(np.log10(min(ai) / 4), np.log10(max(ai) * 16), 100)
    bw = ceilings["copy_bytes_per_s"] / 1e9
    for name, rate in ceilings.get("matmul", {}).items():
        ax.plot(x, np.minimum(bw * x, rate / 1e9), lw=1, label=f"copy {bw:,.0f} GB/s, {name} {rate / 1e12:.3g} TFLOP/s")
    ax.plot(x, bw * x, "k--", lw=0.8, label="copy bandwidth x intensity")
    providers = sorted({r["provider"].split(" (")[0] for r in ok})
    markers = dict(zip(providers, "os^vD<>ph*"))
    for prov in providers:
        for dtype, colour in (("float32", "tab:blue"), ("bfloat16", "tab:orange")):
            pts = [r for r in ok if r["provider"].split(" (")[0] == prov and r["dtype"] == dtype]
            if pts:
                ax.scatter([r["flop"] / r["bytes"] for r in pts], [r["gflops_fwd"] for r in pts], s=18,
                           marker=markers[prov], color=colour, alpha=0.7, label=f"{prov} {dtype}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory byte)")
    ax.set_ylabel("GFLOP/s (forward)")
    ax.set_title(f"Aggregation roofline on {device}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
