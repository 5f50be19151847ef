"""The KV-bottleneck figures from ``plan --json`` data: the memory waterfall, concurrency against context length, and
decode step time with the KV share of bytes against batch (the roofline).

Capacity (how many requests' KV fit) and bandwidth (how long each decode step reads weights and
KV) are the two limits; the first two figures show the first, the roofline figure the second.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from kvledger.report.figure import Figure, new_axes

__all__ = ["memory_waterfall", "concurrency_by_context", "conc_text", "decode_roofline", "kv_figures"]

GiB = 2**30
_COMPARE = (8192, 131072)


def memory_waterfall(plan: dict[str, Any]) -> Figure:
    """Device total → the engine's requested share → each deduction → the memory left for KV, in GiB."""
    m = plan["memory"]
    steps = [("device total", m["gpu_total_bytes"], None), (f"× {m['fraction_name']} {m['fraction']:g}",
                                                            m["requested_bytes"], None)]
    level = m["requested_bytes"]
    for d in m["deductions"]:
        steps.append((f"− {d['name']}", level - d["bytes"], d["bytes"]))
        level -= d["bytes"]
    steps.append(("= available KV memory", m["available_kv_bytes"], None))
    fig, ax = new_axes(height=3.4)
    labels = [s[0] for s in steps]
    for i, (_label, top, delta) in enumerate(steps):
        _waterfall_bar(ax, i, top, delta, last=i == len(steps) - 1)
    rng = m.get("ranges", {}).get("available_kv_bytes")
    if rng and rng[0] != rng[1]:  # the range of the last bar, from the terms' and the device total's ranges
        lo, hi, mid = (max(0.0, x) / GiB for x in (rng[0], rng[1], m["available_kv_bytes"]))
        if hi > lo:  # a plan that does not fit has nothing to draw
            ax.errorbar([mid], [len(steps) - 1], xerr=[[max(0.0, mid - lo)], [max(0.0, hi - mid)]], fmt="none",
                        ecolor="#222", capsize=3)
    ax.set_yticks(range(len(steps)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GiB (2^30 bytes) per GPU")
    ax.set_xlim(0, m["gpu_total_bytes"] / GiB * 1.12)
    ax.set_title(f"Memory plan: {m['engine']} {m['engine_version']} on {plan['gpu']['name']}", fontsize=9)
    rows = [[s[0], f"{(s[2] if s[2] is not None else s[1]) / GiB:,.2f}"] for s in steps]
    b_lo, b_hi = m.get("ranges", {}).get("num_gpu_blocks", (m["num_gpu_blocks"], m["num_gpu_blocks"]))
    if rng and rng[0] != rng[1]:
        rows[-1][1] += f" ({max(0.0, rng[0]) / GiB:,.2f}–{rng[1] / GiB:,.2f})"
    rows.append(["KV blocks", f"{m['num_gpu_blocks']:,}" + (f" ({b_lo:,}–{b_hi:,})" if b_lo != b_hi else "")
                 + f" × {m['block_size']} tokens ({m['bytes_per_block']:,} B each)"])
    srcs = [plan["gpu"]["memory_source"]] + [f"{d['name']}: {d['source']}" for d in m["deductions"]]
    if m.get("startup"):  # vLLM under --wddm: whether it starts with the display driver's hold in use
        srcs.append(m["startup"]["message"])
    if rng and rng[0] != rng[1]:
        srcs.append("range in brackets: each fitted or version-dependent term's low and high and the device total's, "
                    "propagated to available KV and blocks (accounting/kv_range.py)")
    return Figure("memory_waterfall", "Where the GPU's memory goes",
                  "The engine's memory split, term by term: what is left after weights, the activation peak, non-torch "
                  "memory "
                  "and CUDA graphs is the KV cache, cut into whole blocks.", fig, ["term", "GiB"], rows, srcs)


def _waterfall_bar(ax: Any, i: int, top: float, delta: float | None, last: bool) -> None:
    """Bar ``i`` of the waterfall and its number: a level (``delta`` None) from 0, or a deduction from ``top`` up by
    ``delta`` (B). Where the deductions exceed the memory (weights larger than the device), what lies below 0 is cut
    at 0 and the number says by how much it is short: a bar or a label far left of the axes would leave the plot no
    room (matplotlib's constrained layout gives up on it)."""
    if delta is None:
        ax.barh(i, max(0.0, top) / GiB, color="#4c72b0" if not last else "#55a868")
        ax.text(max(0.0, top) / GiB + 0.5, i, f"{top / GiB:,.2f}", va="center", fontsize=8)
        return
    low, high = max(0.0, top), max(0.0, top + delta)
    ax.barh(i, (high - low) / GiB, left=low / GiB, color="#c44e52")
    short = f" ({-top / GiB:,.2f} more than is left)" if top < 0 <= top + delta else ""
    ax.text(high / GiB + 0.5, i, f"{delta / GiB:,.2f}{short}", va="center", fontsize=8)


def concurrency_by_context(plan: dict[str, Any]) -> Figure:
    """Whole requests whose KV fits at once, at each context length; 8K and 128K side by side."""
    rows_in = plan["concurrency"]
    fig, (ax, bx) = new_axes(2, height=3.2)
    if plan["memory"]["num_gpu_blocks"] <= 0:  # no KV block at all: say so instead of drawing flat zeros
        for a in (ax, bx):
            a.text(0.5, 0.5, "does not fit:\nno memory left for the KV cache", transform=a.transAxes, ha="center",
                   va="center", fontsize=10, color="#b00020")
            a.set_xticks([])
            a.set_yticks([])
    else:
        _draw_concurrency(ax, bx, rows_in)
    rows = [[f"{r['context_tokens']:,}", f"{r['blocks_per_request']:,}", f"{r['bytes_per_request'] / GiB:,.2f}",
             conc_text(r), f"{r['max_running']:,}",
                 "yes" if r["within_max_model_len"] else "no"] for r in rows_in]
    kv = plan["kv"]
    return Figure("concurrency_by_context", "Capacity: concurrency against context length",
                  f"KV bytes per token {kv['bytes_per_token_per_gpu']:,} B per GPU, so a longer context means fewer "
                  f"requests at once: "
                  f"capacity is the first limit (max_model_len {plan['memory']['max_model_len']:,} tokens).", fig,
                  ["context, tokens", "blocks / request", "GiB / request", "max concurrency", "max running",
                   "≤ max_model_len"], rows,
                  [g["formula"] for g in kv["groups"]] + ["num_gpu_blocks ÷ blocks per request (the engine's 'Maximum "
                                                          "concurrency' rule); in brackets, the same at each end of "
                                                          "the block range"])


def conc_text(row: dict[str, Any]) -> str:
    """The engine's concurrency figure with its range from the block range, "3.44 (3.42–3.46)"."""
    rng = row.get("max_concurrency_range")
    lo_hi = f" ({rng[0]:,.2f}–{rng[1]:,.2f})" if rng and f"{rng[0]:,.2f}" != f"{rng[1]:,.2f}" else ""
    return f"{row['max_concurrency']:,.2f}{lo_hi}"


def _draw_concurrency(ax: Any, bx: Any, rows_in: list[dict[str, Any]]) -> None:
    xs = [r["context_tokens"] for r in rows_in]
    ax.plot(xs, [r["max_concurrency"] for r in rows_in], marker="o", label="KV capacity (engine's figure)")
    ax.plot(xs, [r["max_running"] for r in rows_in], marker=".", ls="--", label="running cap (also max_num_seqs)")
    ax.set_xscale("log", base=2)
    if min(r["max_running"] for r in rows_in) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("context length per request, tokens")
    ax.set_ylabel("concurrent requests")
    ax.legend(fontsize=7)
    pick = [r for r in rows_in if r["context_tokens"] in _COMPARE]
    bars = bx.bar([f"{r['context_tokens'] // 1024}K" for r in pick], [r["max_requests"] for r in pick],
                  color=["#4c72b0", "#c44e52"])
    bx.bar_label(bars, labels=[f"{r['max_requests']:,}" if r["within_max_model_len"] else "0: rejected\n(> "
                               "max_model_len)" for r in pick], fontsize=8)
    bx.set_ylabel("whole requests at once")
    bx.set_xlabel("context length")
    bx.set_title("8K vs 128K", fontsize=9)


def decode_roofline(plan: dict[str, Any]) -> Figure | None:
    """Decode step time and the KV share of HBM bytes against batch (8K and 128K), and the roofline with its ridge
    point;
    None when the plan has no roofline (the model does not fit)."""
    r = plan["roofline"]
    if not r or not r.get("decode"):
        return None
    fig, (ax, bx) = new_axes(2, width=8.0, height=3.4)
    tw = ax.twinx()
    table = []
    for ctx, color in zip(_COMPARE, ("#4c72b0", "#c44e52")):
        pts = [d for d in r["decode"] if d["context_tokens"] == ctx]
        if not pts:
            continue
        b = [d["batch"] for d in pts]
        ax.plot(b, [d["step_s"] * 1e3 for d in pts], marker="o", color=color, label=f"step time, {ctx // 1024}K")
        tw.plot(b, [100 * d["kv_bytes_share"] for d in pts], ls="--", color=color, label=f"KV share, {ctx // 1024}K")
        bx.scatter([d["intensity"] for d in pts], [d["flops"] / d["step_s"] / 1e12 for d in pts], color=color, s=14,
                   label=f"decode steps, {ctx // 1024}K")
        table += [[f"{ctx:,}", f"{d['batch']:,}", f"{d['step_s'] * 1e3:,.2f}", f"{100 * d['kv_bytes_share']:.1f}",
                   f"{d['intensity']:,.1f}", d["bound"]] for d in pts]
    ax.set_xscale("log", base=2)
    ax.set_xlabel("decode batch, sequences")
    ax.set_ylabel("decode step time, ms")
    tw.set_ylabel("KV share of HBM bytes read, %")
    tw.set_ylim(0, 100)
    ax.legend(fontsize=7, loc="upper left")
    ridge, peak = r["ridge_flops_per_byte"], r["peak_flops_per_s"]
    xs = [0.5, ridge, ridge * 64]
    bx.plot(xs, [min(x * r["hbm_bandwidth_bytes_per_s"], peak) / 1e12 for x in xs], color="black", lw=1)
    bx.axvline(ridge, color="grey", ls=":")
    bx.annotate(f"ridge {ridge:,.0f} FLOP/B", (ridge, peak / 1e12), fontsize=7, xytext=(4, -12),
                textcoords="offset points")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlabel("arithmetic intensity, FLOP/byte")
    bx.set_ylabel("FLOP/s achieved, TFLOP/s")
    bx.legend(fontsize=7, loc="lower right")
    caption = (f"Bandwidth is the second limit: decode steps sit left of the ridge ({ridge:,.1f} FLOP/B = peak FLOP/s "
               f"÷ HBM "
               f"bandwidth), so each step's time is the bytes it reads; the KV share of those bytes grows with batch "
               f"and context. "
               f"Weight matmuls turn compute-bound above {r['weight_matmul_crossover_tokens']:,} tokens per step.")
    return Figure("decode_roofline", "Bandwidth: decode step time, KV share and the roofline", caption, fig,
                  ["context, tokens", "batch", "step, ms", "KV share of bytes, %", "FLOP/B", "bound"], table,
                  [f"kvledger.accounting.roofline: max(FLOPs ÷ ({r['flops_fraction']:g} × peak), bytes ÷ "
                   f"({r['bandwidth_fraction']:g} × bandwidth)) "
                   "per operator; fractions are assumptions", *r["notes"],
                   f"GPU catalog (catalog/data/gpus.csv): {peak / 1e12:,.1f} TFLOP/s {r['compute_dtype']}, "
                   f"{r['hbm_bandwidth_bytes_per_s'] / 1e12:,.2f} TB/s"])


def kv_figures(plan: dict[str, Any], keys: Collection[str] | None = None) -> list[Figure]:
    """The three KV-bottleneck figures of a plan (only those named in ``keys`` when given)."""
    makers = (memory_waterfall, concurrency_by_context, decode_roofline)
    figs = (m(plan) for m in makers if keys is None or m.__name__ in keys)
    return [f for f in figs if f is not None]
