"""The report's engine comparison: continuous vs static batching and paged vs contiguous KV on the same requests at
the capacity rate, as ``ReportData.engine_savings`` holds it. A baseline whose settings cannot admit a request (the
contiguous reservation of max_model_len longer than the KV pool: ``ContiguousTooLargeError``; a static-batching
reservation of a request's whole sequence longer than it: ``StaticTooLongError``; both raised before any simulation)
is kept as a row saying why it was not run, and takes no ratio."""

from __future__ import annotations

from typing import Any

__all__ = ["BASELINES", "engine_savings", "skipped_row"]

BASELINES = (("static", "static batching (a batch runs until its longest member ends)"),
             ("contiguous", "contiguous KV (max_model_len reserved per request)"))
"""The engine comparisons by policy preset, with their labels."""
_COMPARISONS = {"static": "continuous ÷ static batching", "contiguous": "paged ÷ contiguous KV"}


def skipped_row(err: Any) -> dict[str, Any]:
    """The row of a baseline refused before simulating (``ContiguousTooLargeError``, ``StaticTooLongError``): why,
    and the largest max_model_len that would let it run (tokens; 0: none)."""
    return {"skipped": err.reason(), "fit_max_model_len": err.fit_len}


def engine_savings(cap: Any, base: dict[str, Any], runs: dict[Any, Any]) -> dict[str, Any]:
    """The comparison at the capacity sized on (``cap.sizing_req_per_s``, req/s): the engine's row ``base`` and each
    baseline's row in ``runs`` (by policy), labelled, with the ratios of the baselines that ran."""
    engine = {"label": "vLLM v1 rule (continuous batching, paged KV)", **base}
    out = {"rate_req_per_s": cap.sizing_req_per_s, "engine": engine,
           **{p: {"label": label, **runs[p]} for p, label in BASELINES}}
    out["ratios"] = _ratios(out)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _ratios(s: dict[str, Any]) -> list[dict[str, Any]]:
    e = s["engine"]
    rows = []
    for key, _ in BASELINES:
        o = s[key]
        if "skipped" in o:
            continue
        rows.append({"comparison": _COMPARISONS[key], "baseline": o["label"],
                     "throughput_ratio": _ratio(e["summary"]["throughput_output_tok_per_s"],
                                                o["summary"]["throughput_output_tok_per_s"]),
                     "goodput_ratio": _ratio(e["goodput_req_per_s"], o["goodput_req_per_s"]),
                     "ttft_p90_ratio": _ratio(e["summary"]["ttft_s"]["p90"], o["summary"]["ttft_s"]["p90"])})
    return rows
