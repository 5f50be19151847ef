"""What ``kvledger cost`` can say of a run of which no request met the SLO, or of which, from percentiles alone, as few
as none did: a cost per good token with no upper bound, so no one answer (exit status 1, not 2: the file is valid).

A file with only percentiles bounds its good requests, between L and U (``ledgers.estimate``). The self-hosted cost per
good token falls as the good tokens rise, so with L = 0 it lies between the cost at U good requests (all U good, of
the mean token counts: ``GoodputResult.at_upper_bound``), a lower bound, and no finite figure (none good). With U = 0
too, or an exact run of which none was good, there is no bound at all. Either way the command states what it can,
priced at U where U > 0 (the bills for a volume and the verdict there: the API cheaper even then is the API cheaper at
every count the file allows), and the JSON writes each missing bound as null with the reason beside it. Its fix offers
a file with per-request records only where the percentiles left the count open (U > 0): with U = 0 they already show
that none could be good, so each request's record would change nothing.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import NoAnswerError
from kvledger.ledgers.amounts import pct_text
from kvledger.ledgers.decision_notes import tokens_text

__all__ = ["no_good_requests"]

FIX = ("to get one answer, price a run below saturation (a rate sweep: kvledger cost FILES… prices the run at its SLO "
       "boundary){records}, or loosen the SLO")
RECORDS = " or a file with per-request records"  # only where percentiles left the count open (0 < upper)
FIX_SIMULATED = "to get one answer, drop --at-offered-load to price at the SLO capacity found by simulation"


def _between(gp: Any, upper: int) -> str:
    """How many requests met the SLO, in words: ``between 0 and 669 of 13,369 completed requests met the SLO``."""
    of = f"of {gp.num_completed:,} completed request{'' if gp.num_completed == 1 else 's'}"
    if upper == 0:
        return f"no request met the SLO ({gp.slo['text']}; 0 {of})"
    return (f"between 0 and {upper:,} {of} met the SLO ({gp.slo['text']}): the file gives percentiles, not each "
            "request, and they only bound the count")


def _best_case(best: Any, upper: int) -> dict[str, Any]:
    """The figures priced at ``upper`` good requests (``best``: the cost run there), with the sentence for them."""
    rep, d = best.report, best.report.decision
    totals = rep.totals()  # the API's None where no API row serves the model (ledgers.self_host_only)
    out = {"num_good": upper, "utilization": rep.inputs["utilization"],
           "utilization_how": rep.inputs["utilization_how"],
           "self_host_usd_per_mtok_input": rep.self_host_input.total_usd,
           "self_host_usd_per_mtok_output": rep.self_host_output.total_usd, "api": rep.inputs["api_price"],
           "api_usd_per_mtok_input": totals["api_usd_per_mtok_input"],
           "api_usd_per_mtok_output": totals["api_usd_per_mtok_output"],
           "replicas": None, "self_host_usd_per_month": None, "api_usd_per_month": None, "verdict": None}
    text = (f"at {upper:,} good requests (all the file allows), {pct_text(out['utilization'])} utilization "
            f"({out['utilization_how']}): self-hosted ${out['self_host_usd_per_mtok_input']:.4f}/M input, "
            f"${out['self_host_usd_per_mtok_output']:.4f}/M output tokens"
            + ("" if out["api"] is None else f" vs ${out['api_usd_per_mtok_input']:.4f}/M input, "
               f"${out['api_usd_per_mtok_output']:.4f}/M output on the API ({out['api']})"))
    if d is not None:
        v = d.volume
        out.update(replicas=d.replicas, self_host_usd_per_month=d.self_host_usd,
                   api_usd_per_month=d.primary.bill.total_usd, verdict=d.verdict)
        text += (f"; for {tokens_text(v.input_tokens + v.output_tokens)} tokens/month, {d.replicas:,} "
                 f"replica{'' if d.replicas == 1 else 's'}: ${d.self_host_usd:,.2f}/month self-hosted vs "
                 f"${d.primary.bill.total_usd:,.2f}/month on the API — "
                 + ("the API costs less even then, and so at every count the file allows" if d.verdict == "API" else
                    "self-hosting costs less there, but the file cannot say it is so"))
    out["text"] = text
    return out


def no_good_requests(gp: Any, best: Any, basis: Any) -> NoAnswerError:
    """The NoAnswerError of a run of which as few as no request met the SLO: its message (one paragraph) and payload
    (``cost --json``'s object then: strict JSON, each bound it cannot give null with why). ``best``: the cost run
    priced at the upper bound of good requests (None where there is none above 0); ``basis``: the run's capacity
    basis (an over-load warning, which is why most such runs are so)."""
    upper = gp.num_good_upper or 0
    fix = FIX_SIMULATED if gp.simulated else FIX.format(records=RECORDS if upper > 0 else "")
    at_best = None if best is None else _best_case(best, upper)
    if at_best is None:
        answer = f"{_between(gp, upper)}: the cost per good token is unbounded"
        lower_why = "no request met the SLO: no finite cost per good token"
    else:
        answer = (f"{_between(gp, upper)}; so the self-hosted cost per good token is between "
                  f"${at_best['self_host_usd_per_mtok_output']:.4f} (were all {upper:,} good) and unbounded (were "
                  f"none) per 1M output tokens, and between ${at_best['self_host_usd_per_mtok_input']:.4f} and "
                  "unbounded per 1M input tokens")
        lower_why = f"priced at {upper:,} good requests, the most the file allows"
    upper_why = "as few as 0 requests met the SLO: no finite cost per good token bounds it above"
    payload = {"answer": None, "no_answer": answer, "exit_code": 1, "source": gp.file, "slo": gp.slo,
               "good_requests": {"lower": 0, "upper": upper, "completed": gp.num_completed,
                                 "requests": gp.num_requests, "estimate": gp.estimate},
               **{f"self_host_usd_per_mtok_{kind}": {
                   "lower": None if at_best is None else at_best[f"self_host_usd_per_mtok_{kind}"], "upper": None,
                   "lower_why": lower_why, "upper_why": upper_why} for kind in ("input", "output")},
               "at_upper_bound": at_best, "fix": fix, "capacity_basis": basis.to_dict(),
               "notes": [f"WARNING: {basis.warning}"] if basis.warning else [], "goodput": gp.to_dict()}
    return NoAnswerError(f"{gp.file}: {answer}; {fix}", payload)
