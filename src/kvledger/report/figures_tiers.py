"""The report's KV-tier figure: at the rate the capacity was sized on, the share of prompt tokens each KV tier served
(the run with the tiers the flags give, ``simulate``'s tier run), and for a document pool the shares expected by
Che's LRU formula and by replaying the run's draw through an LRU (``analyses/serving/doc_pool_hits.py``), with TTFT
and the share within the SLO with and without the tiers, and the SLO capacity with the tiers beside the one without
(``analyses/serving/report_tier_capacity.py``). The words are ``simulate``'s: its tier verdict
(``tier_verdict.tier_verdict_line``, its hints in report's flags) and its document-pool note
(``doc_pool_hits.pool_note``)."""

from __future__ import annotations

import math
from typing import Any

from kvledger.analyses.serving.doc_pool_hits import pool_note
from kvledger.analyses.serving.report_data import ReportData
from kvledger.report.figure import Figure, new_axes
from kvledger.report.tier_capacity_text import tier_capacity_text
from kvledger.report.tier_verdict import tier_verdict_line

__all__ = ["kv_tier_hits"]

_CHE = "Che, Tung and Wang, IEEE JSAC 2002 (Che's approximation of an LRU cache's hit probability)"


def _share(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def _rows(sec: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per tier: its capacity (tokens per replica), the simulated share and, with a pool, Che's and the
    replay's (None without)."""
    pool = sec.get("document_pool")
    if pool is not None:
        return [{"tier": r["tier"], "capacity_tokens": r["capacity_tokens"], "documents": r["capacity_documents"],
                 "simulated": r["simulated_hit_share"], "che": r["che_hit_share"],
                 "replay": r["lru_replay_hit_share"]} for r in pool["expected"]]
    caps = {t["name"]: t["capacity_tokens"] for t in sec["kv_tiers"]["plan"]["tiers"]}
    return [{"tier": r["tier"], "capacity_tokens": caps.get(r["tier"]), "documents": None, "simulated": r["hit_rate"],
             "che": None, "replay": None} for r in sec["kv_tiers"]["per_tier"]]


def _with_without(sec: dict[str, Any]) -> str:
    """TTFT p50/p90 and the share within the SLO with the tiers and without (the same requests, the same rate)."""
    t = sec.get("kv_tiers")
    if t is None:
        return ""
    w, wo = t["ttft_s_with_tier"], t["ttft_s_without_tier"]
    return (f" With the tiers TTFT p50 {w['p50'] * 1e3:,.1f} ms, p90 {w['p90'] * 1e3:,.1f} ms against "
            f"{wo['p50'] * 1e3:,.1f} ms and {wo['p90'] * 1e3:,.1f} ms without (the same run simulated twice); "
            f"{sec['with_tier']['attainment']:.1%} of requests within the SLO against "
            f"{sec['without_tier']['attainment']:.1%} in the priced run without them. "
            + tier_verdict_line(t["judgment"], sessions=False, report=True).replace(" (simulated below)", "") + " "
            + f"Tier rule: {t['engine']} {t['engine_version']}: {t['rule']}.")


def _capacities(sec: dict[str, Any]) -> str:
    """The SLO capacity without the tiers → with them (``tier_capacity.tier_capacity_text``), the cost's clause after
    a difference outside the band."""
    c = sec.get("capacity")
    if c is None:
        return ""
    return " " + tier_capacity_text(c, " (the cost above prices the capacity without them)")


def _caption(data: ReportData, sec: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    pool = sec.get("document_pool")
    head = (f"At {sec['rate_req_per_s']:,.4g} req/s, the rate the capacity was sized on: the share of prompt tokens "
            "each KV tier served, per replica. The cost and the headline are priced on the capacity without the "
            "tiers, as cost --simulate prices it (report's tier flags ask what the tiers would change); this is "
            "what the tiers change at that load.")
    sim = {r["tier"]: r["simulated"] for r in rows}
    note = "" if pool is None else " " + pool_note(pool["expected"], sim, {"document_pool": pool}) + "."
    return head + _with_without(sec) + _capacities(sec) + note


def kv_tier_hits(data: ReportData) -> Figure:
    """Bars per tier: the simulated share of prompt tokens it served, and with a document pool the expected ones."""
    import numpy as np

    sec = data.kv_tiers
    rows = _rows(sec)
    fig, ax = new_axes(height=3.0)
    x = np.arange(len(rows))
    series = [("simulated", "simulated")] + ([("che", "Che's LRU formula"), ("replay", "LRU replay of the draw")]
                                             if sec.get("document_pool") else [])
    width = 0.8 / len(series)
    for i, (key, label) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [100 * (r[key] or 0.0) for r in rows], width, label=label)
    if sec.get("document_pool"):
        ax.axhline(100 * sec["document_pool"]["unbounded_hit_share"], color="grey", ls=":", lw=1,
                   label="a cache that never evicts")
    ax.set_xticks(x, [r["tier"] for r in rows])
    ax.set_ylabel("share of prompt tokens served, %")
    ax.set_xlabel("KV tier (a lower tier: what it adds to those above)")
    ax.legend(fontsize=7)
    table = [[r["tier"], "—" if r["capacity_tokens"] is None else f"{r['capacity_tokens']:,}",
              "—" if r["documents"] is None else f"{r['documents']:,.1f}", _share(r["simulated"]), _share(r["che"]),
              _share(r["replay"])] for r in rows]
    sources = [data.commands.get("kv_tiers", ""), *([_CHE, sec["document_pool"]["expected_source"]]
                                                    if sec.get("document_pool") else []),
               *([sec["kv_tiers"]["source"]] if sec.get("kv_tiers") else []),
               *([sec["capacity"]["method"]] if sec.get("capacity") else [])]
    return Figure("kv_tier_hits", "KV tiers: the share of prompt tokens each serves at the capacity",
                  _caption(data, sec, rows), fig,
                  ["tier", "capacity, tokens per replica", "capacity, documents", "simulated share",
                   "Che's LRU formula", "LRU replay"], table, sources)
