"""What the cost ledger takes as a replica's capacity, and the check that warns when a measured run was too lightly
loaded to show it.

The self-hosted cost per token is GPU time ÷ good tokens, so it is only as right as the capacity it divides by. The
sound capacity is DistServe's goodput (Zhong et al., OSDI 2024 §2): the highest load at which a target share of
requests meets the SLO. A single measured run gives its *benchmark* goodput at whatever load it was offered; that
equals the capacity only when the run was at (or near) the SLO limit. A run offered less than the replica can take
serves every request it is sent, so its goodput is the offered rate, and the ledger then overstates the cost.

The under-load rule (:func:`check_load`). A run *looks under-loaded* when all of these hold:

1. **its load is stated**: an open-loop request rate R (finite) or a client concurrency C;
2. **the server kept pace and the SLO rejected almost nothing**: open loop, good req/s ≥ :data:`KEPT_PACE_SHARE`
   (90 %) of R — the goodput *is* the offered rate; closed loop (where the rate follows the latency), ≥
   :data:`CLOSED_LOOP_ATTAINMENT` (95 %) of requests good;
3. **the SLO is far from binding**: for every metric the SLO constrains, its p90 over completed requests is ≤
   :data:`SLO_SLACK` (50 %) of the limit. For TTFT this is the "little queueing" test: waiting for a free slot or a
   prefill turn shows up first in TTFT's upper tail, so a TTFT p90 at half its limit leaves room for more load. From
   aggregates, the smallest stated percentile ≥ 90 stands in for p90 (an upper bound, so the test stays conservative;
   ``ledgers.p90_bounds``).
   A file whose TPOT field is not to be trusted (inference-perf) is judged, as goodput judges it, on
   (E2E − TTFT)/(output − 1), its p90 bounded from the E2E and TTFT percentiles (``ledgers.tpot_derived``): the upper.

The over-load rule (also :func:`check_load`). A run *looks over-loaded* when fewer than :data:`OVERLOAD_ATTAINMENT`
(90 %) of its requests are good and some SLO metric's p90 is at least :data:`OVERLOAD_FACTOR` (2×) its limit: the run
was pushed well past its SLO capacity, requests queued, and its goodput understates what the replica serves within the
SLO at a lower load — the self-hosted cost is then overstated just as for an under-loaded run, and a verdict of "the
API is cheaper" may be an artefact of the load, not of the prices. From aggregates its two parts take the bound that
keeps the warning sound: the attainment's upper bound, and each p90's lower bound (the largest stated percentile ≤ 90,
or a derived TPOT's lower bound), so neither warning rests on the looser side of a bound.

Any check that fails means "not flagged" (the run is at or past its limit: capacity ≈ goodput; a closed loop's verdict
says its throughput is what its clients drew); a check the file cannot answer (no rate or concurrency, a ramped rate,
no percentiles, unknown duration) means "cannot tell". Without a TTFT SLO a run at its throughput ceiling also keeps
pace, so the warning then says queueing was not judged. An open-loop run that completed far fewer requests per second
than it was offered *fell behind* (``fell_behind.py``), checked after the over-load rule and before the others,
except on a simulated run whose records the simulator's own queue read found kept up (``kept_up``): there the shortfall
is the drain of requests still in flight after the last arrival (DeepSeek-V3 on 8 H200s, SGLang DP attention 8, 200
requests at 4 req/s: 2.988 of 3.54 req/s served, 84.4%, 20 s of E2E after a 56 s arrival span), not a queue that grew.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kvledger.evidence.aggregate import AggregateRun
from kvledger.jsonable import to_jsonable
from kvledger.ledgers import notes as N
from kvledger.ledgers.burst_read import read_burst
from kvledger.ledgers.fell_behind import FELL_BEHIND_RULE, fell_behind, kept_up_rate, kept_up_words, typical_e2e_s
from kvledger.ledgers.goodput import GoodputResult
from kvledger.ledgers.p90_bounds import derived_tpot, p90_aggregate, p90_records, p90_words
from kvledger.ledgers.slo import SLO
from kvledger.ledgers.tpot_derived import derived_tpot_note
from kvledger.records import RunRecords
from kvledger.units import fmt_duration

__all__ = ["KEPT_PACE_SHARE", "CLOSED_LOOP_ATTAINMENT", "SLO_SLACK", "OVERLOAD_FACTOR", "OVERLOAD_ATTAINMENT",
           "LoadCheck", "check_load", "RULE", "SENT_AT_ONCE", "OVERLOAD_RULE", "CapacityBasis", "measured_basis"]

KEPT_PACE_SHARE = 0.9
"""Open loop: good req/s ≥ this share of the offered rate: the goodput is the offered load (drain tails stay above)."""
CLOSED_LOOP_ATTAINMENT = 0.95
"""Closed loop: at least this share of requests good means the SLO rejected almost nothing."""
SLO_SLACK = 0.5
"""Every constrained metric's p90 at or below this share of its limit: the SLO is far from binding."""

OVERLOAD_FACTOR = 2.0
"""Some constrained metric's p90 at or above this multiple of its limit: requests queued far past the SLO."""
OVERLOAD_ATTAINMENT = 0.9
"""…and fewer than this share of requests good: the run is past its SLO capacity."""

#: how the load check's reason on a run sent all at t = 0 (``--request-rate inf``) starts (``burst_read``)
SENT_AT_ONCE = "every request was sent at t = 0 (request rate inf, no concurrency limit)"

OVERLOAD_RULE = (f"over-loaded when fewer than {OVERLOAD_ATTAINMENT:.0%} of requests are good and some SLO metric's "
                 f"p90 is ≥ {OVERLOAD_FACTOR:g}× its limit")

RULE = (f"under-loaded when the run states its load (request rate or concurrency), kept pace with it (open loop: good "
        f"req/s ≥ {KEPT_PACE_SHARE:.0%} of the offered rate; closed loop: ≥ {CLOSED_LOOP_ATTAINMENT:.0%} of requests "
        f"good) and every SLO metric's p90 is ≤ {SLO_SLACK:.0%} of its limit (for TTFT: little queueing)")


@dataclass(slots=True)
class LoadCheck:
    """The verdict of the under-load rule on one run.

    Attributes:
        status: "under_loaded" (warn: capacity likely higher than the goodput), "over_loaded" (warn: the
            run is past its SLO capacity, its goodput understates it), "fell_behind" (warn: completed req/s far below
            the offered rate, ``fell_behind.py``), "not_flagged"
            (at or past its limit, or a saturating load) or "cannot_tell" (the run does not say enough).
        reason: the verdict in words, with the numbers.
        checks: each test as {"check", "value", "limit", "passed" (True/False/None = unknown), "text"}.
        rule: the rule applied (:data:`RULE`).
        notes: what a metric was judged on when not the file's own field (a derived TPOT); carried to the JSON by
            :class:`CapacityBasis`'s ``notes``, not here.
    """

    __json__ = ("status", "reason", "checks", "rule")
    status: str
    reason: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    rule: str = RULE
    notes: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _check(name: str, value: float | None, limit: float, passed: bool | None, text: str) -> dict[str, Any]:
    return {"check": name, "value": value, "limit": limit, "passed": passed, "text": text}


def _notes(run: RunRecords | AggregateRun, slo: SLO) -> list[str] | None:
    d = derived_tpot(run, slo, "tpot")
    return None if d is None else [derived_tpot_note(run, d)]


def _pace_check(run: RunRecords | AggregateRun, gp: GoodputResult) -> tuple[dict[str, Any] | None, str | None]:
    """(the kept-pace check, or None with the reason the load cannot be judged)."""
    rate, conc = _open_loop_rate(run), run.metadata.concurrency
    if isinstance(ramp := run.metadata.extra.get("ramp_up"), dict):  # vllm bench serve --ramp-up-strategy
        return None, (f"its request rate ramped from {ramp['start_rps']:g} to {ramp['end_rps']:g} req/s over the run "
                      f"({ramp['strategy']}): there is no one offered rate to judge its load against")
    if rate is not None:
        if gp.goodput_req_per_s is None:
            return None, "the run's duration is unknown, so its good req/s cannot be set against the offered rate"
        drain = _drain(run)  # the same drain allowance as the fell-behind rule's (fell_behind.py)
        share = gp.goodput_req_per_s / kept_up_rate(rate, **drain)
        cap, of = f" or the client's cap of {conc:,} in flight held it" if conc else "", kept_up_words(rate, **drain)
        ok = share >= KEPT_PACE_SHARE
        return _check("kept pace (open loop)", share, KEPT_PACE_SHARE, ok,
                      f"offered {rate:,.3g} req/s, served {gp.goodput_req_per_s:,.3g} good req/s ({share:.1%}"
                      + (" of " + of if of != "offered" else "")
                      + (")" if ok else f", below {KEPT_PACE_SHARE:.0%}: the server fell behind, the SLO rejected "
                                        f"requests{cap})")), None
    if conc:
        a = gp.attainment
        ok = a >= CLOSED_LOOP_ATTAINMENT
        return _check("SLO rejected almost nothing (closed loop)", a, CLOSED_LOOP_ATTAINMENT, ok,
                      f"{conc:,} concurrent users, {a:.1%} of requests good"
                      + ("" if ok else f" (below {CLOSED_LOOP_ATTAINMENT:.0%}: the SLO binds)")), None
    if run.metadata.request_rate is not None and math.isinf(run.metadata.request_rate):
        return None, _burst_words(run)
    return None, "the file states neither its request rate nor its concurrency"


def _burst_words(run: RunRecords | AggregateRun) -> str:
    """Why a run sent all at t = 0 is not judged by the rules: a saturating load where a request got its first token
    after the running batch's peak (or the records do not say), one batch's drain where none did
    (``burst_read``)."""
    b = read_burst(run) if isinstance(run, RunRecords) else None
    if b is None or b.saturated:
        return SENT_AT_ONCE + (f" and {b.facts()}" if b else "") + ": a saturating load"
    return (f"{SENT_AT_ONCE}, but {b.facts()}: one batch of {b.num_requests:,} requests draining, its goodput set by "
            "the burst's size, not the replica's capacity")


def _open_loop_rate(run: RunRecords | AggregateRun) -> float | None:
    """An open loop's offered rate (finite, above 0), req/s; None otherwise (closed loop if a concurrency is set)."""
    rate = run.metadata.request_rate
    return rate if rate is not None and math.isfinite(rate) and rate > 0 else None


def _drain(run: RunRecords | AggregateRun) -> dict[str, Any]:
    """The fell-behind rule's drain allowance (``fell_behind.py``): a run's request count and typical E2E, s, from its
    per-request times; none from aggregates."""
    if not isinstance(run, RunRecords):
        return {}
    return {"num_requests": len(run.records), "drain_s": typical_e2e_s(run.records)}


def _overload(run: RunRecords | AggregateRun, gp: GoodputResult, slo: SLO) -> LoadCheck | None:
    """The over-load verdict (module docstring), or None when the run is not over-loaded or cannot tell. An estimate
    from percentiles is judged on its attainment's upper bound and each p90's lower bound (``p90_bounds``)."""
    bounded = gp.estimate and gp.attainment_upper is not None
    attainment = gp.attainment_upper if bounded else gp.attainment
    if attainment >= OVERLOAD_ATTAINMENT:
        return None
    p90 = p90_records(run, slo) if isinstance(run, RunRecords) else p90_aggregate(run, slo, upper=False)
    over = []
    for metric, limit in slo.constraints():
        v = p90.get(metric)
        if v is not None and v >= OVERLOAD_FACTOR * limit:
            name = slo.itl_key if metric == "itl" else metric
            over.append(_check(f"{name} over limit", v / limit, OVERLOAD_FACTOR, True,
                               f"{p90_words(run, slo, metric, name, upper=False)} {fmt_duration(v)} = "
                               f"{v / limit:.1f}× its {fmt_duration(limit)} limit"))
    if not over:
        return None
    share = (f"at most {attainment:.1%}" if bounded and attainment != gp.attainment else f"only {attainment:.1%}")
    reason = f"{share} of requests good (below {OVERLOAD_ATTAINMENT:.0%}); " + "; ".join(c["text"] for c in over)
    return LoadCheck("over_loaded", reason, over, OVERLOAD_RULE, _notes(run, slo))


def check_load(run: RunRecords | AggregateRun, gp: GoodputResult, slo: SLO, *, kept_up: bool = False) -> LoadCheck:
    """Apply the over- and under-load rules (module docstring) to a run and its goodput under ``slo``; ``kept_up``:
    the simulator's queue read found the run kept up, so the fell-behind rule is not applied (module docstring)."""
    if (over := _overload(run, gp, slo)) is not None:
        return over
    if not kept_up and not isinstance(run.metadata.extra.get("ramp_up"), dict) and (
            behind := fell_behind(_open_loop_rate(run), gp.throughput_req_per_s, **_drain(run))) is not None:
        return LoadCheck("fell_behind", behind["text"], [behind], FELL_BEHIND_RULE, _notes(run, slo))
    pace, why = _pace_check(run, gp)
    if pace is None:
        status = "not_flagged" if why and why.startswith(SENT_AT_ONCE) and why.endswith("load") else "cannot_tell"
        return LoadCheck(status, why or "")
    checks = [pace]
    p90 = p90_records(run, slo) if isinstance(run, RunRecords) else p90_aggregate(run, slo)
    for metric, limit in slo.constraints():
        v = p90.get(metric)
        if v is None:
            checks.append(_check(f"{metric} slack", None, SLO_SLACK, None, f"{metric} p90 unknown"))
            continue
        share = v / limit
        ok = share <= SLO_SLACK
        checks.append(_check(f"{metric} slack", share, SLO_SLACK, ok,
                             f"{p90_words(run, slo, metric, metric, upper=True)} {fmt_duration(v)} = {share:.0%} of "
                             f"its {fmt_duration(limit)} limit"
                             + ("" if ok else f" (above {SLO_SLACK:.0%}: the SLO is close to binding)")))
    failed = [c for c in checks if c["passed"] is False]
    unknown = [c for c in checks if c["passed"] is None]
    notes = _notes(run, slo)
    if failed:
        conc = run.metadata.concurrency if _open_loop_rate(run) is None else None  # a closed loop, as _pace_check's
        words = N.closed_loop_drew(conc) if conc and all(c is not pace for c in failed) else ""  # only slack failed
        return LoadCheck("not_flagged", "; ".join(c["text"] for c in failed) + words, checks, notes=notes)
    if unknown:
        return LoadCheck("cannot_tell", "the run kept pace, but " + "; ".join(c["text"] for c in unknown)
                         + " (the file gives no percentile ≥ p90 of a per-request distribution)", checks, notes=notes)
    reason = "; ".join(c["text"] for c in checks)
    if slo.ttft_s is None:
        reason += " (no TTFT SLO: queueing was not judged — a run at its throughput ceiling also keeps pace)"
    return LoadCheck("under_loaded", reason, checks, notes=notes)


@dataclass(slots=True)
class CapacityBasis:
    """What the capacity a cost is priced at rests on (``capacity_basis`` in ``cost --json``).

    Attributes:
        kind: "slo_capacity" (an SLO-capacity search), "measured_run" (a file's own goodput) or "offered_load" (a
            simulated run priced at its offered load).
        text: the basis in words; warning: an under- or over-load warning, None when the run passed.
        notes: the capacity search's notes, or the load check's (what a metric was judged on when not the file's own
            field: a derived TPOT); left out of the JSON when there are none.
        load_check: the under-load rule's verdict on a priced run (None for a capacity search).
        sweep: the run of a sweep chosen as the capacity (``cost_run.SweepCapacity``), when a sweep was priced.
        probes: the search's probes in words; error_band: the cost's prediction band. Both for the terminal view only
            (the JSON carries the band at its top level).
    """

    __json__ = ("kind", "text", "warning", "notes", "load_check", "sweep")
    __json_optional__ = ("notes", "sweep")
    kind: str
    text: str
    warning: str | None = None
    notes: list[str] | None = None
    load_check: LoadCheck | None = None
    sweep: dict[str, Any] | None = None
    probes: str | None = None
    error_band: Any = None  # kvledger.analyses.serving.capacity_bands.CostBand (a layer above: not imported)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def measured_basis(gp: GoodputResult, load: LoadCheck, *, simulated: bool = False,
                   run: RunRecords | AggregateRun | None = None) -> CapacityBasis:
    """The ``capacity_basis`` of a run priced at its own goodput (a FILE, or ``--at-offered-load``), with its
    warning; ``run``: the run priced, whose request rate inf (a burst at t = 0) the basis names."""
    rate = None if run is None else run.metadata.request_rate
    burst = load.reason.startswith(SENT_AT_ONCE) or (rate is not None and math.isinf(rate))
    text = N.capacity_basis_text(gp.goodput_req_per_s or 0, simulated=simulated, burst=burst)
    warning = N.one_batch(load.reason, simulated=simulated) if burst and load.status == "cannot_tell" else None
    if load.status == "under_loaded":
        warning = N.under_loaded(load.reason, simulated=simulated)
    elif load.status == "over_loaded":
        warning = N.over_loaded(load.reason, simulated=simulated)
    elif load.status == "fell_behind":
        warning = N.fell_behind(load.reason, simulated=simulated, goodput_req_per_s=gp.goodput_req_per_s or 0.0,
                                served_req_per_s=gp.throughput_req_per_s or 0.0)
    return CapacityBasis("offered_load" if simulated else "measured_run", text, warning, notes=load.notes,
                         load_check=load)
