"""The search's offload axis as text, after the ranking it joined: each tier variant's capacity against its base
without the tier, its cost, and its verdict against the same setup on more GPUs (``analyses/search/tier_entries.py``),
then where each tier price came from."""

from __future__ import annotations

from typing import Any

__all__ = ["print_offload_axis"]


def _boundary(v: dict[str, Any]) -> str:
    base = v["offload"]["base_slo_capacity_req_per_s"]
    return f"{v['capacity']['slo_capacity_req_per_s']:.3g} ({'–' if base is None else format(base, '.3g')})"


def print_offload_axis(variants: list[dict[str, Any]], ranking: list[str]) -> None:
    """A table of the tier variants (their rank among all feasible candidates), one verdict line per feasible variant
    with what it was compared with, and each tier price's source."""
    from rich.console import Console
    from rich.markup import escape

    from kvledger.report.tables import table

    con = Console(highlight=False, emoji=False)
    if not variants:
        con.print("offload axis: no colocated candidate to add a tier to")
        return
    rank = {cid: n for n, cid in enumerate(ranking, start=1)}
    t = table("offload axis: KV tier variants, ranked with the rest (capacity simulated with the tier; the tier a "
              "line item)", "rank", "candidate", "status", "boundary req/s (without)", "$/1k req at capacity",
              "$/M out")
    for v in variants:
        if v["status"] != "feasible":
            t.add_row("", escape(v["id"]), v["status"], escape(v.get("reason") or ""), "", "")
            continue
        c = v["cost"]
        t.add_row(str(rank.get(v["id"], "")), escape(v["id"]), "feasible", _boundary(v),
                  f"{c['usd_per_1k_requests_at_capacity']:.4g}", f"{c['usd_per_mtok_output']:.4g}")
    con.print(t)
    for v in variants:
        if v["status"] == "feasible":
            off = v["offload"]
            con.print(escape(off["verdict"]))
            for x in off["vs_more_gpus"]:
                con.print(f"  vs {escape(x['more_gpus'])}: {escape(x['text'])}")
    for sizes in dict.fromkeys(v["offload"]["sizes"] for v in variants):
        con.print(escape(f"tier size: {sizes} (--offload SIZE is per replica, as vLLM's --kv-offloading-size)"))
    tp = [v["offload"]["tier_price"] for v in variants]
    prices = dict.fromkeys(p["source"] + ("" if p["as_of"] == "user input" else f" (as of {p['as_of']})") for p in tp)
    for src in prices:
        con.print(escape(f"tier price: {src}"))
