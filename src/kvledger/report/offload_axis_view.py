"""The search's offload axis as text: each tier variant's capacity against its base, its cost, and the verdict
against the same setup on more GPUs (``analyses/search/offload_axis.py``)."""

from __future__ import annotations

from typing import Any

__all__ = ["print_offload_axis"]


def print_offload_axis(variants: list[dict[str, Any]]) -> None:
    """A table of the tier variants, then one verdict line per feasible variant with what it was compared with."""
    from rich.console import Console
    from rich.markup import escape

    from kvledger.report.tables import table

    con = Console(highlight=False)
    if not variants:
        con.print("offload axis: no feasible colocated candidate to add a tier to")
        return
    t = table("offload axis: KV tier variants (capacity simulated with the tier; priced with its line item)",
              "candidate", "tier", "status", "boundary req/s (base)", "$/1k req at capacity", "$/M out")
    for v in variants:
        if v["status"] != "feasible":
            t.add_row(escape(v["candidate"]), v["offload"], v["status"], escape(v.get("reason", "")), "", "")
            continue
        c = v["cost"]
        t.add_row(escape(v["candidate"]), v["offload"], "feasible",
                  f"{v['boundary_rate_req_per_s']:.3g} ({v['base_boundary_rate_req_per_s']:.3g})",
                  f"{c['usd_per_1k_requests_at_capacity']:.4g}", f"{c['usd_per_mtok_output']:.4g}")
    con.print(t)
    for v in variants:
        if v["status"] == "feasible":
            con.print(escape(v["verdict"]))
            for x in v["vs_more_gpus"]:
                con.print(f"  vs {escape(x['more_gpus'])}: {escape(x['text'])}")
    sources = dict.fromkeys(v["tier_price"]["source"] + f" (as of {v['tier_price']['as_of']})" for v in variants
                            if v.get("tier_price"))
    for src in sources:
        con.print(f"tier price: {escape(src)}")
