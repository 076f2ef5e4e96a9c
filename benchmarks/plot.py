"""``benchmarks/results/benchmarks.png``: item 1's latencies by size and depth, and every ratio against its target."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def draw(latest: dict[str, Any], path: Path) -> bool:
    """Draw the plot; return False (with a message) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[dev]'): skipping the plot")
        return False

    meta = latest["meta"]
    latency = latest["results"].get("latency")
    summary = latest["summary"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.6), gridspec_kw={"width_ratios": [1, 1.25]})

    if latency:
        sizes = sorted({p["size"] for p in latency["points"]})
        colors = plt.get_cmap("viridis")([0.1, 0.5, 0.85])
        for color, size in zip(colors, sizes, strict=False):
            pts = sorted((p for p in latency["points"] if p["size"] == size), key=lambda p: p["depth"])
            depths = [p["depth"] * 100 for p in pts]
            left.plot(depths, [p["keyset_s"] * 1e3 for p in pts], "o-", color=color, label=f"keyset (core), {size:,}")
            left.plot(depths, [p["offset_s"] * 1e3 for p in pts], "s--", color=color, label=f"OFFSET, {size:,}")
            if "what_if_s" in pts[0]:
                left.plot(
                    depths,
                    [p["what_if_s"] * 1e3 for p in pts],
                    "^:",
                    color=color,
                    alpha=0.6,
                    label=f"what-if keyset, {size:,}",
                )
        left.set_yscale("log")
        left.set_xlabel("depth in the inventory (%)")
        left.set_ylabel("median page latency (ms, log)")
        left.set_title(f"1. resources/list page latency ({meta['vendor']}, page {meta['page_size']})")
        left.grid(True, which="both", alpha=0.3)
        left.legend(fontsize=7, ncol=1, loc="upper left")
    else:
        left.text(0.5, 0.5, "item 1 not run", ha="center", va="center")
        left.set_axis_off()

    if summary:
        labels = [f"{row['item']}. {row['measure']}" for row in summary]
        values = [row["value"] or 0 for row in summary]
        bar_colors = ["#2e7d32" if row["ok"] else "#c62828" for row in summary]
        y = list(range(len(summary)))[::-1]
        right.barh(y, values, color=bar_colors, alpha=0.85)
        for yi, row, value in zip(y, summary, values, strict=True):
            right.plot([row["target"], row["target"]], [yi - 0.4, yi + 0.4], color="black", lw=2)
            sign = "<=" if row["at_most"] else ">="
            unit = row.get("unit", "x")
            right.text(
                value * 1.08 if value else 0.01,
                yi,
                f"{value:.2f}{unit} (target {sign} {row['target']:g}{unit})",
                va="center",
                fontsize=7,
            )
        right.set_yticks(y)
        right.set_yticklabels([label if len(label) < 62 else label[:59] + "..." for label in labels], fontsize=7)
        right.set_xscale("log")
        right.set_xlabel("measured ratio (log); black tick = target; green met, red missed")
        right.set_title("ratios measured in one run")
        right.grid(True, axis="x", which="both", alpha=0.3)
        right.set_xlim(min(0.05, min(v for v in values if v) / 2), max([*values, 1]) * 8)

    fig.suptitle(f"django-mcp-resources benchmarks, {meta['mode']} run {meta['finished']} UTC", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return True
