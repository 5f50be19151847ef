"""The verdict of ``kvledger disagg`` in plain words, each sentence from the numbers of the report: throughput, goodput
per GPU, the highest rate meeting the attainment target, what each pool's knob moves, and the transfer cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvledger.units import fmt_duration, fmt_rate

if TYPE_CHECKING:
    from kvledger.analyses.judgments.pd_disagg import DeploymentResult
    from kvledger.analyses.judgments.pd_disagg_summary import DisaggReport

__all__ = ["SAME_THROUGHPUT_TOLERANCE", "verdict"]

SAME_THROUGHPUT_TOLERANCE = 0.02  # throughputs within 2 % are called the same


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else fmt_duration(x)


def verdict(r: DisaggReport) -> list[str]:
    """Throughput, goodput per GPU, what each pool's knob moves, and the transfer cost — each sentence from the
    numbers."""
    co, best = r.colocated(), r.best_split()
    if co is None or best is None:
        return []
    out = [_throughput_sentence(r, co, best)]
    out.append(_goodput_sentence(r, co, best))
    if r.tuning:
        out.extend(_tuning_sentences(r.tuning, r.first_token))
    t = best.transfer
    if t and t["num_transfers"]:
        ttft = best.ttft_s["p50"]
        out.append(f"KV transfer ({r.link['name']}, {r.link['bytes_per_s_one_way'] / 1e9:,.0f} GB/s one way): "
                   f"{_ms(t['transfer_s']['mean'])} per request on average (of which wire {_ms(t['wire_s']['mean'])}, "
                   f"waiting for the link {_ms(t['link_wait_s']['mean'])}), p99 {_ms(t['transfer_s']['p99'])}"
                   + (f", against a median TTFT of {_ms(ttft)}." if ttft else "."))
    return out


def _throughput_sentence(r: DisaggReport, co: DeploymentResult, best: DeploymentResult) -> str:
    """Throughput from the numbers. Within 2 % at a finite offered rate, req/s measures the load, not the deployment:
    a replay of N requests finishes no faster than they arrive (req/s = N ÷ (last finish − first arrival) ≤ the
    offered rate), so the sentence sends the reader to goodput and attainment instead of calling the two equal."""
    a, b = co.throughput_req_per_s, best.throughput_req_per_s
    rel = b / a - 1.0 if a else 0.0
    offered = r.workload.get("offered_rate_req_per_s")
    both = f"{co.label} {a:,.2f} req/s, best split {best.label} {b:,.2f} req/s"
    tol = SAME_THROUGHPUT_TOLERANCE
    if abs(rel) <= tol and offered and offered != float("inf"):
        n = r.workload.get("num_requests")
        replay = f"a replay of {n:,} requests" if n else "a replay"
        if min(a, b) >= (1 - tol) * offered:
            return (f"Throughput is set by the offered load, not by the deployment: {both}, both keeping pace with the "
                    f"{offered:,.2f} req/s offered, so req/s does not tell them apart — goodput and attainment below "
                    "do.")
        return (f"Throughput is set by the offered load, not by the deployment: {both}, within {tol:.0%} of each "
                f"other and below the {offered:,.2f} req/s offered — {replay} finishes no faster "
                "than they arrive, so req/s here is its arrival window plus the last requests' drain; goodput and "
                "attainment below tell the deployments apart.")
    if abs(rel) <= tol:
        return f"Throughput: the same within {tol:.0%} ({both}) with every request arriving at once."
    if rel < 0:
        return (f"Throughput: the best split {best.label} serves {b:,.2f} req/s, {-rel:.1%} less than {co.label} "
                f"({a:,.2f} req/s): splitting the GPUs leaves one pool short.")
    why = (f"; the colocated deployment falls behind the offered {offered:,.2f} req/s" if offered and
           a < (1 - tol) * offered else "")
    return (f"Throughput: the best split {best.label} serves {b:,.2f} req/s, {rel:.1%} more than {co.label} "
            f"({a:,.2f} req/s) at this offered load{why}.")


def _goodput_sentence(r: DisaggReport, co: DeploymentResult, best: DeploymentResult) -> str:
    slo = r.slo["text"]
    a, b = co.goodput_req_per_s_per_gpu, best.goodput_req_per_s_per_gpu
    s = (f"Goodput per GPU under {slo} at the offered load: {co.label} {fmt_rate(a)} req/s/GPU ({co.attainment:.1%} "
         f"of requests good), best split {best.label} {fmt_rate(b)} ({best.attainment:.1%})")
    if a and abs(b / a - 1) <= SAME_THROUGHPUT_TOLERANCE:
        s += ": the same within 2 %."
    elif b > a:
        s += f": ×{b / a:.2f} for the split. The gain is in requests that meet the SLO, not in raw throughput."
    else:
        worst = max(best.num_missed, key=best.num_missed.get, default=None) if best.num_missed else None
        worst = worst if worst and best.num_missed[worst] > 0 else None  # a count of 0 is no miss to name
        s += (f": colocated is ahead ×{a / b:.2f}" if b else ": no request of the split meets the SLO") + (
            f"; the split misses mostly on {worst} ({best.num_missed[worst]:,} "
            f"request{'' if best.num_missed[worst] == 1 else 's'})." if worst else
            "; every request of the split met the SLO: the gap is its lower throughput." if b and best.attainment >= 1
            else ".")
    return s + _max_rate_sentence(r, co)


def _max_rate_sentence(r: DisaggReport, co: DeploymentResult) -> str:
    """" Highest rate meeting …: who is ahead", "" without a search. A rate whose search hit its doubling cap is a
    lower bound ("≥ X"): two of them are not compared, and one is ahead of the other only when its bound exceeds it."""
    searched = [x for x in r.deployments if x.kind == "disaggregated" and x.max_rate_search is not None]
    if not searched or co.max_rate_search is None:
        return ""
    top = max(searched, key=lambda x: x.max_rate_per_gpu or 0.0)
    a, b = co.max_rate_per_gpu or 0.0, top.max_rate_per_gpu or 0.0
    la, lb = _lower_bound(co), _lower_bound(top)
    tol = 1 + SAME_THROUGHPUT_TOLERANCE
    if la and lb:
        who = "both searches stopped at their cap with the target still met, so neither is known to be ahead"
    elif la or lb:
        lo_x, ex_x, lo_v, ex_v = (co, top, a, b) if la else (top, co, b, a)
        who = (f"{lo_x.label} is ahead at least ×{lo_v / ex_v:.2f}" if ex_v and lo_v > tol * ex_v else
               f"{lo_x.label}'s search stopped at its cap with the target still met, so which is ahead is not known")
    else:
        who = (f"{top.label} is ahead ×{b / a:.2f}" if a and b > tol * a else
               f"{co.label} is ahead ×{a / b:.2f}" if b and a > tol * b else
               "the same within 2 %" if a and b else "see the table")
    return (f" Highest rate meeting {r.attainment_target:.0%} attainment (DistServe goodput), per GPU: {co.label} "
            f"{_rate(co)}, best split {top.label} {_rate(top)} req/s: {who}.")


def _lower_bound(x: DeploymentResult) -> bool:
    return bool(x.max_rate_search and x.max_rate_search.get("boundary_is_lower_bound"))


def _rate(x: DeploymentResult) -> str:
    if x.max_rate_per_gpu is None:
        return "below the lowest rate tried"
    return ("≥ " if _lower_bound(x) else "") + fmt_rate(x.max_rate_per_gpu)


def _tuning_sentences(rows: list[dict[str, Any]], first_token: str) -> list[str]:
    p, d, c, best, co = rows[1], rows[2], rows[4], rows[0], rows[3]
    why = ("the first token comes from the prefill pool" if first_token == "prefill" else
           "the decode pool streams the first token, but its queue did not change here")
    ttft_d = (f"left TTFT unchanged (identical in every request: {why})" if d["ttft_identical"] else
              f"moved TTFT p90 {_pct(d['ttft_p90_change'])}" + (" (the decode pool streams the first token, so its "
                                                               "queue is in TTFT)" if first_token == "decode" else ""))
    out = [
        f"Decode pool ({d['knob']}): {ttft_d}; ITL p99 {_ms(rows[0]['itl_p99_s'])} → {_ms(d['itl_p99_s'])} "
        f"({_pct(d['itl_p99_change'])}).",
        f"Prefill pool ({p['knob']}): TTFT p90 {_ms(rows[0]['ttft_p90_s'])} → {_ms(p['ttft_p90_s'])} "
        f"({_pct(p['ttft_p90_change'])}); ITL p99 {_pct(p['itl_p99_change'])} (the decode pool's steps carry no prompt "
        "chunks; ITL moves only through when requests reach it).",
        f"Colocated, the same budget change ({c['knob']}): TTFT p90 {_pct(c['ttft_p90_change'])}, ITL p99 "
        f"{_pct(c['itl_p99_change'])} — there prompt chunks and decodes share steps, so one budget sets both.",
    ]
    if best["goodput_req_per_s_per_gpu"] > co["goodput_req_per_s_per_gpu"]:
        g = c["goodput_req_per_s_per_gpu"]
        b, c0 = best["goodput_req_per_s_per_gpu"], co["goodput_req_per_s_per_gpu"]
        part = ("overtakes the split" if g > (1 + SAME_THROUGHPUT_TOLERANCE) * b else "closes the gap" if
                g >= (1 - SAME_THROUGHPUT_TOLERANCE) * b else "recovers part of the gap" if g > c0 else "does not help")
        out.append(f"With that smaller budget the colocated deployment reaches {fmt_rate(g)} req/s/GPU against the "
                   f"split's {fmt_rate(b)}: a smaller prompt chunk {part}.")
    return out
