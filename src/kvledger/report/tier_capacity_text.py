"""The SLO capacity with the KV tiers beside the one without them, in words (``analyses/serving/report_tier_capacity
.py``'s block): the report's KV tiers caption and ``goodput --simulate … --target`` with tier flags say it alike."""

from __future__ import annotations

import math
from typing import Any

from kvledger.report.decision_view import capacity_band_clause

__all__ = ["tier_capacity_text", "ttft_clause", "print_tier_capacity"]


def _share(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def _verdict(inside: bool | None) -> str:
    if inside is None:
        return "no measured band stands for this regime, so whether the difference matters is not judged"
    if inside:
        return "the difference is inside the band of the capacity without them: the tiers do not change the decision"
    return ("the difference is outside the band of the capacity without them: the tiers change the capacity the "
            "decision rests on")


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1e3:,.1f} ms"


def ttft_clause(t: dict[str, Any] | None) -> str:
    """The TTFT at the capacity chosen (the block's ``ttft_at_capacity``), with the tiers and without: " At R req/s
    (the capacity with them) TTFT mean …, p90 … with the tiers against … and … without (…)."; "" for None."""
    if t is None:
        return ""
    whose = "with them" if t["capacity"] == "with_tier" else "without them"
    w, wo = t["with_tier"], t["without_tier"]
    return (f" At {t['rate_req_per_s']:,.4g} req/s (the capacity {whose}) TTFT mean {_ms(w['mean_s'])}, p90 "
            f"{_ms(w['p90_s'])} with the tiers against {_ms(wo['mean_s'])} and {_ms(wo['p90_s'])} without (the same "
            "requests simulated twice).")


def tier_capacity_text(c: dict[str, Any], priced_note: str = "") -> str:
    """The block ``c`` in one sentence: the SLO capacity without the tiers → with them (req/s, each with its 80%
    band), the tiers' shares of prompt tokens at the capacity with them, and whether the difference is inside the
    band of the one without; ``priced_note`` follows the "outside the band" verdict (the report's cost clause)."""
    wo, w = c["without_tier"], c["with_tier"]
    head = (f"SLO capacity (≥ {c['target']:.0%} of requests within the SLO), the same search with the tiers in every "
            "probe (goodput --simulate's run with the tier flags at each rate): ")
    before = ("no rate meets the target without the tiers" if wo["sized_on_req_per_s"] is None else
              f"{wo['sized_on_req_per_s']:,.4g} req/s without the tiers{capacity_band_clause(wo, False)}")
    if w is None:
        low = min(p[0] for p in c["probes_with_tier"])
        if wo["sized_on_req_per_s"] is None:  # no capacity either way: nothing says the loads cost it
            return head + f"{before}, nor with them down to {low:g} req/s: the tiers do not lift it."
        return (head + f"{before}; with them no rate down to {low:g} req/s meets the target (their loads delay "
                f"TTFT).{ttft_clause(c.get('ttft_at_capacity'))}")
    found = ("" if w["sized_on_req_per_s"] == w["slo_capacity_req_per_s"] else
             f", sized on the deployment's capacity bound; {w['slo_capacity_req_per_s']:,.4g} req/s found")
    shares = ", ".join(f"{t} {_share(h)}" for t, h in w["hit_share"].items())
    verdict = _verdict(c["inside_band"]) + (priced_note if c["inside_band"] is False else "")
    if wo["sized_on_req_per_s"] is None:
        verdict = "nothing to compare the capacity with"
    return head + (f"{before} → {w['sized_on_req_per_s']:,.4g} req/s with them{capacity_band_clause(w, False)}"
                   f"{found}; the share of prompt tokens each tier served at {w['slo_capacity_req_per_s']:,.4g} "
                   f"req/s: {shares}; {verdict}.{ttft_clause(c.get('ttft_at_capacity'))}")


def print_tier_capacity(c: dict[str, Any] | None) -> None:
    """``tier_capacity_text`` on the console, under a bold "KV tiers" label; nothing for None (no tier flags)."""
    if c is None:
        return
    from rich.console import Console
    from rich.markup import escape

    Console(highlight=False, emoji=False).print(f"[bold]KV tiers[/]: {escape(tier_capacity_text(c))}")
