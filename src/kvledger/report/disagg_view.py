"""Terminal view of ``kvledger disagg``: colocated vs every prefill/decode split, latencies, goodput per GPU,
KV-transfer time and the verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.report.step_cost_view import step_cost_lines, step_cost_source_line
from kvledger.report.tables import print_verdict, table
from kvledger.units import fmt_rate

if TYPE_CHECKING:
    from kvledger.analyses.judgments.pd_disagg_summary import DisaggReport

__all__ = ['disagg_row', 'rate_words', 'render_disagg', 'replay_line']


def disagg_row(x) -> list[str]:
    from kvledger.units import fmt_duration as f

    def q(d, k):
        return "—" if d[k] is None else f(d[k])

    t = x.transfer
    xfer = "—" if not t or not t["num_transfers"] else f"{f(t['transfer_s']['mean'])} / {f(t['transfer_s']['p99'])}"
    capped = bool(x.max_rate_search and x.max_rate_search.get("boundary_is_lower_bound"))  # the search hit its cap
    mr = "" if x.max_rate_search is None else ("—" if x.max_rate_per_gpu is None else
                                               ("≥ " if capped else "") + fmt_rate(x.max_rate_per_gpu))
    cells = [x.label, f"{x.num_gpus}", f"{q(x.ttft_s, 'p50')} / {q(x.ttft_s, 'p90')} / {q(x.ttft_s, 'p99')}",
             f"{q(x.itl_s, 'p50')} / {q(x.itl_s, 'p90')} / {q(x.itl_s, 'p99')}",
             f"{q(x.tpot_s, 'p50')} / {q(x.tpot_s, 'p90')} / {q(x.tpot_s, 'p99')}",
             f"{x.throughput_req_per_s:,.2f}", f"{x.attainment:.1%}", fmt_rate(x.goodput_req_per_s_per_gpu), xfer,
             f"{x.num_preemptions:,}"]
    return cells + ([mr] if x.max_rate_search is not None else [])


def rate_words(w: dict, whole_trace: bool = False) -> str:
    """The workload's rate as the header says it: "300 requests at 12.00 req/s offered", or, where the arrivals
    realised another rate than --rate asked (Poisson gaps drawn with the seed), "requested 12 req/s, realised 10.34
    over 300 requests (seed 0)"."""
    n, req = w.get("num_requests"), w.get("requested_rate_req_per_s")
    off = w.get("offered_rate_req_per_s", float("nan"))
    whole = "the whole trace, " if whole_trace else ""
    if req and off == off and abs(off / req - 1) > 0.005:  # off == off: not NaN
        return f"requested {req:g} req/s, realised {off:,.2f} over {n:,} requests ({whole}seed {w.get('seed')})"
    return f"{n:,} requests{' (the whole trace)' if whole_trace else ''} at {off:,.2f} req/s offered"


def replay_line(trace: str, num_requests: int, whole_trace: bool) -> str:
    """What disagg is about to replay, said before it runs (each deployment replays every request), and, for a whole
    trace, how to make it faster."""
    return (f"disagg: replaying {num_requests:,} requests of {trace} on every deployment"
            + (" (the whole trace; --num-requests N replays only the first N, faster)" if whole_trace else ""))


def render_disagg(r: DisaggReport, console, whole_trace: bool = False) -> None:
    w = r.workload
    console.print(f"[bold]Prefill/decode disaggregation: {r.model} on {r.num_gpus} × {r.gpu}[/] — trace "
                  f"{w.get('trace')}, {rate_words(w, whole_trace)}; SLO {r.slo['text']}")
    console.print(f"KV link: {r.link['source']}; transfer = {r.transfer_model}")
    for line in step_cost_lines(r.step_cost) if r.step_cost else ():  # as simulate prints its step cost
        console.print(line)
    searched = any(x.max_rate_search is not None for x in r.deployments)
    cols = ["deployment", "GPUs", "TTFT p50/p90/p99", "ITL p50/p90/p99", "TPOT p50/p90/p99", "req/s", "good",
            "goodput req/s/GPU", "KV transfer mean/p99", "preemptions"] + (["max rate/GPU"] if searched else [])
    t = table("Same GPUs, same requests: colocated vs each prefill:decode split", *cols)
    for x in r.deployments:
        t.add_row(*disagg_row(x))
    console.print(t)
    if r.tuning:
        from kvledger.units import fmt_duration as f

        t = table("One knob, one pool: what moves", "deployment", "pool changed", "knob", "TTFT p50", "TTFT p90",
                  "ITL p50", "ITL p99", "TPOT p90", "goodput req/s/GPU")
        for x in r.tuning:
            t.add_row(x["deployment"], x["pool_changed"], x["knob"], *(("—" if x[k] is None else f(x[k])) for k in
                      ("ttft_p50_s", "ttft_p90_s", "itl_p50_s", "itl_p99_s", "tpot_p90_s")),
                      fmt_rate(x['goodput_req_per_s_per_gpu']))
        console.print(t)
    if r.step_cost:  # the step cost named above the tables: how it prices a step
        console.print(step_cost_source_line(r.step_cost))
    print_verdict(console, r.verdict, r.notes)
