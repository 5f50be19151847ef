"""One run's goodput under one SLO (``GoodputResult``), and how exact and estimated goodput both build it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kvledger.errors import InputError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.ledgers.notes import nothing_measured
from kvledger.ledgers.slo import SLO
from kvledger.records import RunRecords

__all__ = ["DEPLOYMENT_SETTINGS", "GoodputResult", "deployment_of", "goodput_result"]


#: the launch settings that make two runs of one model different deployments, as a record states them (a meta.json's
#: ``engine_kwargs``, the simulator's ``engine``, or a vllm bench result's --metadata), with the short name shown
DEPLOYMENT_SETTINGS = (("tensor_parallel_size", "TP"), ("pipeline_parallel_size", "PP"), ("data_parallel_size", "DP"),
                       ("quantization", "quantization"))


def deployment_of(hardware: str | None, num_gpus: int | None, extra: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """What served a run besides its model, as the record states it: (label, value) pairs for the GPU, the GPU count
    and ``DEPLOYMENT_SETTINGS`` (from ``engine_kwargs``, else ``engine``, else the record's own keys)."""
    kw = next((d for d in (extra.get("engine_kwargs"), extra.get("engine")) if isinstance(d, dict)), extra)
    pairs = [("GPU", hardware), ("GPUs", num_gpus), *((label, kw.get(key)) for key, label in DEPLOYMENT_SETTINGS)]
    return tuple((label, v) for label, v in pairs if v is not None and not isinstance(v, (dict, list)))


@json_fields(exclude=("good_mask", "request_ids", "deployment"),
             read={"request_rate": "request_rate_shown", "effective_cost_multiplier": "multiplier_shown"},
             extra=("all_at_once", "effective_cost_multiplier_bound", "no_request_completed"),
             rename={"request_rate": "request_rate_req_per_s"})  # the offered rate, req/s (as simulate's probes)
@dataclass(slots=True)
class GoodputResult:
    """Goodput of one run under one SLO. Counts are requests; rates per second of run duration.

    ``file`` is the file read (``source`` is where the run came from: the same path for
    benchmark files, e.g. "simulator" for a kvledger records file).
    ``estimate`` is True when the numbers are bounds from percentiles (then ``num_good`` and
    ``attainment`` are lower bounds and ``*_upper`` the upper ones) or scaled from a sample.
    Rates are None when the duration is unknown. ``good_mask`` (not serialised) marks the
    good records of an exact result. ``no_request_completed`` (in JSON, last) is True when the run had requests and
    none completed: nothing was measured, and its zeros say so, not how the server performs. In JSON,
    ``effective_cost_multiplier`` is the multiplier the table shows and ``effective_cost_multiplier_bound`` which bound
    it is (:meth:`multiplier_bounded`); ``request_rate`` is ``request_rate_req_per_s``.
    """

    source: str
    source_format: str
    run_label: str | None
    file: str
    slo: dict[str, Any]
    estimate: bool
    num_requests: int
    num_failed: int
    num_completed: int
    num_good: int
    attainment: float
    num_good_upper: int | None = None
    attainment_upper: float | None = None
    attainment_of_completed: float | None = None
    duration_s: float | None = None
    duration_source: str = ""
    goodput_req_per_s: float | None = None
    throughput_req_per_s: float | None = None
    goodput_output_tok_per_s: float | None = None
    throughput_output_tok_per_s: float | None = None
    goodput_input_tok_per_s: float | None = None
    throughput_input_tok_per_s: float | None = None
    effective_cost_multiplier: float | None = None
    num_missed: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    hardware: str | None = None
    num_gpus: int | None = None
    request_rate: float | None = None
    concurrency: int | None = None
    tool_goodput: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    good_mask: np.ndarray | None = None
    deployment: tuple[tuple[str, Any], ...] = ()  # deployment_of: the GPU and launch settings the record states
    request_ids: list[str] | None = None

    def good_request_ids(self) -> list[str]:
        """Ids of the good requests (exact results only)."""
        if self.good_mask is None or self.request_ids is None:
            raise InputError("this goodput is an estimate from percentiles: individual requests are unknown")
        return [rid for rid, g in zip(self.request_ids, self.good_mask) if g]

    @property
    def no_request_completed(self) -> bool:
        """The run had requests and none completed (all failed or were rejected): there is nothing to measure."""
        return self.num_requests > 0 and self.num_completed == 0

    @property
    def simulated(self) -> bool:
        """The run is the simulator's (run here, or read from a records file it wrote)."""
        return self.source_format == "simulator" or self.source == "simulator"

    @property
    def exact_count(self) -> bool:
        """The count of good requests is known: an exact result, or an estimate whose bounds meet."""
        return not self.estimate or self.num_good_upper == self.num_good

    def multiplier_bounded(self) -> tuple[float | None, str | None]:
        """(the effective-cost multiplier, which bound it is): (completed ÷ good, None) when the count is known; of an
        estimate (completed ÷ its lower bound of good, "upper"); with none known good but up to ``num_good_upper``
        that may be, (completed ÷ that many, "lower"); (None, None) when no request is good (unbounded) or none
        completed."""
        if self.exact_count or self.effective_cost_multiplier is not None:
            return self.effective_cost_multiplier, None if self.exact_count else "upper"
        if self.num_completed and self.num_good_upper:
            return self.num_completed / self.num_good_upper, "lower"
        return None, None

    @property
    def multiplier_shown(self) -> float | None:
        return self.multiplier_bounded()[0]

    @property
    def effective_cost_multiplier_bound(self) -> str | None:
        """"upper" or "lower" when the JSON's effective_cost_multiplier is a bound of an estimate; None when exact."""
        return self.multiplier_bounded()[1]

    @property
    def request_rate_shown(self) -> float | None:
        """``request_rate`` as JSON writes it: an infinite one (every request at t = 0) as None, ``all_at_once`` saying
        so (strict JSON: a rate is a number or null)."""
        return None if self.all_at_once else self.request_rate

    @property
    def all_at_once(self) -> bool | None:
        """True where the request rate is infinite (every request at t = 0; ``request_rate_req_per_s`` then null in
        JSON); None (null in the JSON: the key is always there) otherwise."""
        r = self.request_rate
        return True if r is not None and not np.isfinite(r) else None

    def at_upper_bound(self) -> GoodputResult | None:
        """This run's goodput were its upper bound of good requests (``num_good_upper``, an estimate's) all good, the
        good ones of the mean token counts of the completed (as the estimate assumes); None without an upper bound
        above 0, a duration or a completed request. What ``cost`` prices at when only the lower bound is 0."""
        n, done, d = self.num_good_upper or 0, self.num_completed, self.duration_s
        if n <= 0 or not done or not d:
            return None
        share = n / done

        def scaled(x: float | None) -> float | None:
            return None if x is None else x * share

        return replace(self, num_good=n, attainment=n / self.num_requests, attainment_of_completed=share,
                       goodput_req_per_s=n / d, goodput_output_tok_per_s=scaled(self.throughput_output_tok_per_s),
                       goodput_input_tok_per_s=scaled(self.throughput_input_tok_per_s),
                       effective_cost_multiplier=done / n, notes=list(self.notes), good_mask=None, request_ids=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (no mask, no ids)."""
        return to_jsonable(self)


def goodput_result(run: RunRecords | AggregateRun, slo: SLO, n_all: float, n_ok: float, n_good: float,
                   duration: float | None, dsrc: str, notes: list[str], *, estimate: bool = False) -> GoodputResult:
    md = run.metadata
    res = GoodputResult(
        source=md.source, source_format=md.source_format, run_label=md.extra.get("run_label"),
        file=str(md.extra.get("records_file", md.source)), slo=slo.to_dict(),
        estimate=estimate, num_requests=int(round(n_all)), num_failed=int(round(n_all - n_ok)),
            num_completed=int(round(n_ok)),
        num_good=int(round(n_good)), attainment=(n_good / n_all) if n_all else 0.0,
        attainment_of_completed=(n_good / n_ok) if n_ok else None, duration_s=duration, duration_source=dsrc,
        model=md.model, hardware=md.hardware, num_gpus=md.num_gpus, request_rate=md.request_rate,
        concurrency=md.concurrency, tool_goodput=md.extra.get("tool_goodput"), notes=notes,
        deployment=deployment_of(md.hardware, md.num_gpus, md.extra))
    if res.no_request_completed:
        notes.insert(0, nothing_measured(res.num_requests, res.num_failed, simulated=res.simulated))  # first of all
    if duration:
        res.goodput_req_per_s = n_good / duration
        res.throughput_req_per_s = n_ok / duration
    else:
        notes.append(f"duration {dsrc}: rates per second are not given")
    res.effective_cost_multiplier = (n_ok / n_good) if n_good > 0 else None
    if n_good == 0 and n_ok > 0 and not estimate:
        notes.append("no request met the SLO: the effective cost per good request is unbounded")
    return res
