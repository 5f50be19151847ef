"""The figure of a configuration search: output tokens/s per GPU against tokens/s per user for every feasible candidate, the Pareto frontier drawn through the non-dominated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["frontier_figure", "save_figure"]


def frontier_figure(result: Any) -> Any:
    """A matplotlib Figure (no pyplot state): each feasible candidate a point, frontier points joined and labelled."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8), dpi=100)
    ax = fig.add_subplot()
    front = set(result.frontier)
    xs, ys, fx, fy = [], [], [], []
    for e in result.entries:
        if e["status"] != "feasible" or e["capacity"].get("tok_per_s_per_user") is None:
            continue
        x, y = e["capacity"]["tok_per_s_per_user"], e["capacity"]["goodput_output_tok_per_s_per_gpu"]
        (fx if e["id"] in front else xs).append(x)
        (fy if e["id"] in front else ys).append(y)
    ax.scatter(xs, ys, s=18, color="0.6", label="dominated")
    pts = sorted((result.entry(cid)["capacity"]["tok_per_s_per_user"], result.entry(cid)["capacity"]
                  ["goodput_output_tok_per_s_per_gpu"], cid) for cid in result.frontier)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color="C0", ms=5, label="Pareto frontier")
    for x, y, cid in pts:
        gpu, tp, kv = cid.split(":")[:3]
        ax.annotate(f"{gpu.removeprefix('nvidia_')} {tp} {kv}", (x, y), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    sp = result.spec
    ax.set_xlabel("tokens/s per user (1 ÷ median TPOT at the SLO capacity)")
    ax.set_ylabel("good output tokens/s per GPU")
    ax.set_title(f"{sp.model}: SLO {sp.slo}, {sp.target:.0%} of requests", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` as PNG or SVG (by suffix). Raises InputError for another suffix."""
    from kvledger.errors import InputError

    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise InputError(f"--plot {path}: write .png or .svg")
    fig.savefig(path, format=fmt, metadata={"Software": None} if fmt == "png" else {"Date": None})
