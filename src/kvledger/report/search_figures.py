"""The figure of a configuration search: good output tokens/s per GPU against tokens/s per user for every feasible
candidate's operating points, and the Pareto frontier through the non-dominated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["frontier_figure", "save_figure"]


def frontier_figure(result: Any) -> Any:
    """A matplotlib Figure (no pyplot state): each feasible candidate's operating points joined by a grey line (lighter
    loads to the right), the frontier in blue, its points labelled with their candidate."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8), dpi=100)
    ax = fig.add_subplot()
    x, y = "tok_per_s_per_user", "output_tok_per_s_per_gpu"
    for n, e in enumerate(e for e in result.entries if e["status"] == "feasible"):
        pts = sorted((p[x], p[y]) for p in e["capacity"].get("operating_points") or [])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color="0.7", ms=3, lw=0.8,
                label="a candidate at 25–100 % of its SLO capacity" if n == 0 else None)
    front = result.frontier
    ax.plot([p[x] for p in front], [p[y] for p in front], "-o", color="C0", ms=5, label="Pareto frontier")
    last = None
    for p in front:
        gpu, shape, kv = p["id"].split(":")[:3]
        if p["id"] != last:
            ax.annotate(f"{gpu.removeprefix('nvidia_')} {shape} {kv}", (p[x], p[y]), textcoords="offset points",
                        xytext=(4, 4), fontsize=7)
        last = p["id"]
    sp = result.spec
    ax.set_xlabel("tokens/s per user (1 ÷ median TPOT)")
    ax.set_ylabel("good output tokens/s per GPU")
    ax.set_title(f"{sp.model}: SLO {sp.slo} for {sp.target:.0%} of requests "
                 f"({sp.trace if sp.synthetic is None else 'synthetic'})",
                 fontsize=9)
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
    from kvledger.outputs import write_atomic

    meta = {"Software": None} if fmt == "png" else {"Date": None}
    write_atomic(path, lambda tmp: fig.savefig(tmp, format=fmt, metadata=meta))
