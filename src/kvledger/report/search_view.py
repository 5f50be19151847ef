"""How ``kvledger search`` prints its result for people: the top-N table, the API comparison, the Pareto frontier, every rejected candidate with its reason, and the winner's launch commands."""

from __future__ import annotations

from typing import Any

__all__ = ["print_search", "print_launch"]


def _f(x: Any, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _settings(e: dict[str, Any], varied: set[str]) -> str:
    p, parts = e["plan"], [e["kv_cache_dtype"]]
    if "max_num_seqs" in varied:
        parts.append(f"seqs {p['max_num_seqs']}")
    if "max_num_batched_tokens" in varied:
        parts.append(f"mnbt {p['max_num_batched_tokens']}")
    if "enable_prefix_caching" in varied:
        parts.append("pc on" if e["enable_prefix_caching"] else "pc off")
    return " ".join(parts)


def _top_table(result: Any, top: int) -> Any:
    from kvledger.report.tables import LedgerTable as Table

    sized = result.spec.rate_req_per_s is not None or result.spec.monthly_tokens is not None
    feasible = [result.entry(cid) for cid in result.ranking]
    varied = {k for k in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching")
              if len({e[k] for e in result.entries}) > 1}
    t = Table(title=f"Top {min(top, len(feasible))} of {len(feasible)} feasible candidate{'' if len(feasible) == 1 else 's'} "
                    f"(ranked by {'monthly bill' if sized else 'USD per 1k good requests'})", title_justify="left")
    cols = ["#", "layout", "GPU", "KV" + (" etc." if varied else ""), "req/s", "tok/s/GPU", "tok/s/user", "$/Mtok in",
            "$/Mtok out"] + (["GPUs", "$/month"] if sized else ["$/1k req"])
    for c in cols:
        t.add_column(c, justify="left" if c in ("layout", "GPU") or c.startswith("KV") else "right", overflow="fold",
                     no_wrap=c in ("#", "layout"))
    for n, e in enumerate(feasible[:top], start=1):
        cap, cost, s = e["capacity"], e["cost"], e.get("sizing") or {}
        row = [str(n), e["layout"], e["gpu_id"].removeprefix("nvidia_"), _settings(e, varied),
               _f(cap["goodput_req_per_s"], ",.2f"), _f(cap["goodput_output_tok_per_s_per_gpu"], ",.0f"),
               _f(cap["tok_per_s_per_user"], ",.1f"), _f(cost["usd_per_mtok_input"], ".3f"),
               _f(cost["usd_per_mtok_output"], ".3f")]
        row += [f"{s['num_gpus']} ({s['replicas']}×)", _f(s["monthly_usd"], ",.0f")] if sized else \
            [_f(cost["usd_per_1k_requests"], ".4f")]
        t.add_row(*row)
    return t


def _legend(result: Any) -> str:
    sp = result.spec
    util = (f"{sp.utilization:.0%} utilization" if sp.utilization is not None
            else "the utilization the sizing realizes (load ÷ capacity of the replicas rented)")
    return (f"req/s: goodput per replica at the SLO capacity (highest simulated rate with ≥ {sp.target:.0%} of "
            f"requests within {sp.slo}; {sp.num_requests:,} requests per probe, seed {sp.seed}); tok/s/GPU: good output "
            "tokens/s ÷ GPUs there; tok/s/user: 1 ÷ median TPOT there; $/Mtok at " + util +
            " (kvledger.ledgers.cost), GPU time split between input and output by the boundary run's steps, each "
            "priced by its step-cost model's terms (kvledger.accounting.step_split; prefill_share in --json); "
            "GPUs (replicas×): to serve the load with each replica at ≤ "
            f"{sp.max_utilization:.0%} of its capacity; $/month: GPUs × $/GPU-h × 730 h; the price rows are in --json/--csv")


def _frontier(con: Any, result: Any) -> None:
    from rich.markup import escape

    pts = [f"{p['id']} at {p['rate_req_per_s']:.3g} req/s ({p['tok_per_s_per_user']:,.1f} tok/s/user, "
           f"{p['output_tok_per_s_per_gpu']:,.0f} out tok/s/GPU)" for p in result.frontier]
    con.print("Pareto frontier of output tok/s per GPU vs tok/s per user, over each candidate's loads up to its SLO "
              "capacity: " + escape("; ".join(pts) or "none"))
    if result.dominated:
        con.print("dominated: " + escape("; ".join(f"{d['id']} by {d['dominated_by']}" for d in result.dominated)))


def _api(con: Any, result: Any) -> None:
    from rich.markup import escape

    a = result.api
    if a is None:
        return
    line = (f"API {a['key']} (list price as of {a['as_of']}): ${a['usd_per_mtok_input']:.3f} per Mtok in, "
            f"${a['usd_per_mtok_output']:.3f} per Mtok out after the mix (batch {a['mix']['batch_share']:.0%}, cache hits "
            f"{a['mix']['cache_hit_rate']:.0%})")
    if a.get("monthly_usd") is not None:
        line += (f"; the same traffic ({a['monthly_input_tokens'] / 1e6:,.0f} M in + {a['monthly_output_tokens'] / 1e6:,.0f} "
                 f"M out tokens per month) costs ${a['monthly_usd']:,.0f} per month")
    con.print(escape(line))
    for n in a["notes"]:
        con.print(escape(f"  note: {n}"))


def _rejections(con: Any, result: Any) -> None:
    from rich.markup import escape

    from kvledger.report.tables import LedgerTable as Table

    rej = [e for e in result.entries if e["status"] != "feasible"]
    if not rej:
        return
    t = Table(title=f"Rejected candidates ({len(rej)} of {len(result.entries)})", title_justify="left")
    for c in ("candidate", "reason", "numbers"):
        t.add_column(c, overflow="fold")
    for e in rej:
        t.add_row(escape(e["id"]), escape(e["reason"] or e["status"]), escape(e.get("detail") or ""))
    con.print(t)


def print_launch(con: Any, entry: dict[str, Any], title: str) -> None:
    """The launch commands of one candidate and the ``kvledger plan`` line that re-derives its pool."""
    from rich.markup import escape

    cmd = entry["launch"]
    con.print(escape(f"{title}: {entry['id']}"))
    for label, key in (("vLLM:  ", "vllm"), ("SGLang:", "sglang"), ("check: ", "check")):
        con.print(escape(f"  {label} {cmd[key]}"), soft_wrap=True)  # one line each, ready to copy
    con.print(escape(f"  ({cmd['note']})"))


def print_search(result: Any, top: int = 10) -> None:
    """Everything for people: counts, top-N table and legend, API line, frontier, rejections, winner's commands."""
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False)
    sp = result.spec
    counts = ", ".join(f"{k}: {v}" for k, v in result.counts().items())  # "does not fit: 2", a reason then its count
    con.print(escape(f"kvledger search: {sp.model}, SLO {sp.slo} for {sp.target:.0%} of requests; {len(result.entries)} "
                     f"candidate{'' if len(result.entries) == 1 else 's'}: {counts}"))
    if result.ranking:
        con.print(_top_table(result, top))
        con.print(escape(_legend(result)))
    _api(con, result)
    if result.ranking:
        _frontier(con, result)
    _rejections(con, result)
    for n in result.notes:
        con.print(escape(f"note: {n}"))
    w = result.winner
    if w is not None:
        pr = w["price"]
        con.print(escape(f"winner's price: ${pr['usd_per_gpu_hour']:g} per GPU-hour, {pr['provider']} {pr['instance_type']} "
                         f"({pr['pricing_model']}, as of {pr['as_of']}, {pr['confidence']} confidence; {pr['source']})"))
        print_launch(con, w, "winner")
        for n in w["capacity"]["notes"][1:]:
            con.print(escape(f"  capacity note: {n}"))
    else:
        con.print("no candidate meets the SLO: see the reasons above (loosen the SLO, lower --target, add GPUs or TP)")
