"""What ``kvledger validate`` returns: one replayed run against its measurement (``RunValidation``), and a load
sweep's stages with both sides' knees (``SweepValidation``, ``SweepSide``); ``to_dict`` of each is its ``--json``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.calibration.compare import Comparison
from kvledger.calibration.sweep_bands import RunBands, SweepBands
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.jsonable import to_jsonable

__all__ = ["RunValidation", "SweepSide", "SweepValidation", "LATENCY_COLUMNS"]

#: a sweep's two latency columns (comparison rows), each shown as the first of its figures the measured stages state:
#: the mean where the files give one, else the median (p50); SGLang's bench_serving keeps a median TTFT and ITL only
LATENCY_COLUMNS = (("TTFT mean", "TTFT p50"), ("TPOT mean", "TPOT p50", "ITL mean", "ITL p50"))


@dataclass(frozen=True)
class RunValidation:
    """One replayed run against its measurement: what was replayed (run, source, requests, model, GPU, TP), what
    priced it (``scope``, ``step_cost``: the step cost's name, source and scope), the engine settings, the stage's
    requested rate (req/s; None for a per-request run), the comparison, its headline errors (``errors``: flat
    ``*_rel_error`` keys, ``kvledger.calibration.api.headline_errors``), saturation (None when neither side's queue
    grew), ``at_knee`` (``knee_growth.at_knee``: which side's waits for a first token grew through the run, with
    both sides' figures; None when neither's did), notes, and ``in_sample``: True when the GPU profile pricing it was
    fitted on this very run (its errors are the fit's, not a prediction's); ``client_latency``: the --client-latency
    added to every simulated TTFT and E2E (seconds and source; None, left out of the JSON, when none); ``bands``:
    metric → the 80% band of the regime that priced it (``prediction_bands.setup_band``; not in the JSON);
    ``error_bands``: those bands applied to this run alone (``run_bands``; set by ``validate_file``, None, left out of
    the JSON, for a sweep's stage, which ``sweep_bands`` judges); ``band_member``: the deployment of the stored
    bands whose measured file this run is (``ledgers.band_members``: its bands in sample), else None.
    ``to_dict`` is ``validate --json``."""

    __json__ = ("run", "source", "num_requests", "num_dropped", "model", "gpu", "tp", "scope", "in_sample",
                "band_member", "step_cost", "client_latency", "engine", "rate", "comparison", "**errors", "saturated",
                "at_knee", "error_bands", "profile_frontend", "notes")
    __json_optional__ = ("client_latency", "error_bands", "profile_frontend")
    run: str
    source: str
    num_requests: int
    num_dropped: int
    model: str
    gpu: str
    tp: int
    scope: str
    step_cost: dict[str, Any]
    engine: EngineConfig
    rate: float | None
    comparison: Comparison
    errors: dict[str, float | None]
    saturated: dict[str, Any] | None
    notes: list[str]
    in_sample: bool = False
    client_latency: Any = None
    bands: dict[str, Any] = field(default_factory=dict)
    error_bands: RunBands | None = None
    at_knee: dict[str, Any] | None = None
    band_member: str | None = None
    #: a GPU profile's fitted front-end latency (``profile_frontend.with_profile_frontend``: seconds, profile, applied,
    #: rule); None, left out of the JSON, when the profile fitted none or --client-latency was given
    profile_frontend: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class SweepSide:
    """One side (measured or simulated) of a sweep: its knee (req/s, or clients: ``knee_clients``; None when no stage
    passes the threshold), the
    threshold (s), the mean TTFT per stage (s; None where the measured stage states none), the largest throughput
    over the stages (req/s) and the median TTFT per stage (s; None where the measured stage states none)."""

    knee_req_per_s: float | None
    knee_ttft_threshold_s: float | None
    ttft_mean_s: list[float | None]
    saturation_throughput_req_per_s: float | None
    ttft_median_s: list[float | None] = field(default_factory=list)
    #: a sweep over closed-loop clients: its knee in clients (interpolated; ``knee_req_per_s`` is then None)
    knee_clients: float | None = None


@dataclass(frozen=True)
class SweepValidation:
    """A validated load sweep: the stages' requested rates (req/s), both sides' knees, each stage's ``RunValidation``,
    the notes of them all and the 80% error bands of the simulated figures (``bands``: ``sweep_bands``; None when
    not made). ``to_dict`` is ``validate --sweep --json``."""

    __json__ = ("sweep", "axis", "rates", "clients", "measured", "predicted", "knee_error_req_per_s",
                "knee_error_clients", "knee_rule", "at_knee_rates", "at_knee_clients", "compared_latency", "runs",
                "scope", "step_cost", "profile_frontend", ("error_bands", "bands"), "notes")
    __json_optional__ = ("clients", "knee_error_clients", "at_knee_clients", "profile_frontend")
    rates: list[float]
    measured: SweepSide
    predicted: SweepSide
    knee_rule: str
    runs: list[RunValidation]
    notes: list[str]
    bands: SweepBands | None = None
    #: a sweep over closed loops (runs at request_rate inf under a client cap): each stage's clients, ascending
    #: (``rates`` is then empty); None for a sweep over request rates
    clients: list[int] | None = None

    @property
    def axis(self) -> str:
        """What the stages vary: "request_rate", or "concurrency" (closed-loop clients)."""
        return "request_rate" if self.clients is None else "concurrency"

    @property
    def levels(self) -> list[float]:
        """The stages' places on the axis: their request rates (req/s), or their clients."""
        return list(self.rates) if self.clients is None else [float(c) for c in self.clients]

    @property
    def knee_error_clients(self) -> float | None:
        """Simulated − measured knee in clients (None for a rate sweep, or when either side has none)."""
        m, p = self.measured.knee_clients, self.predicted.knee_clients
        return None if self.clients is None or m is None or p is None else p - m

    @property
    def at_knee_clients(self) -> list[int] | None:
        """The clients of the stages at or past their knee (a concurrency sweep; None for a rate sweep)."""
        if self.clients is None:
            return None
        return [c for c, r in zip(self.clients, self.runs) if r.at_knee is not None]

    @property
    def profile_frontend(self) -> dict[str, Any] | None:
        """The GPU profile's fitted front-end latency over the stages (``RunValidation.profile_frontend``, with the
        runs it was ``applied_to`` and ``not_applied_to``); None when no stage has one."""
        got = [r for r in self.runs if r.profile_frontend]
        if not got:
            return None
        out = {k: v for k, v in got[0].profile_frontend.items() if k != "applied"}
        return {**out, "applied_to": [r.run for r in got if r.profile_frontend["applied"]],
                "not_applied_to": [r.run for r in got if not r.profile_frontend["applied"]]}

    @property
    def sweep(self) -> bool:
        """Always True: tells a script reading the JSON a sweep from one run."""
        return True

    @property
    def knee_error_req_per_s(self) -> float | None:
        """Simulated − measured knee, req/s (None when either side has none)."""
        m, p = self.measured.knee_req_per_s, self.predicted.knee_req_per_s
        return None if m is None or p is None else p - m

    @property
    def at_knee_rates(self) -> list[float]:
        """The requested rates (req/s) of the stages at or past their knee (each stage's ``at_knee``)."""
        return [r.rate for r in self.runs if r.at_knee is not None and r.rate is not None and self.clients is None]

    @property
    def scope(self) -> str:
        """What priced the stages (the first stage's ``scope``; one step cost prices them all)."""
        return self.runs[0].scope

    @property
    def step_cost(self) -> dict[str, Any]:
        """The step cost that priced the stages (the first stage's: its name, source and scope)."""
        return self.runs[0].step_cost

    @property
    def compared_latency(self) -> list[str | None]:
        """The comparison rows the sweep's table shows stage by stage: TTFT's, then the per-token latency's, each the
        first of ``LATENCY_COLUMNS`` a measured stage states (None: no stage states any)."""
        stated = {x.metric for r in self.runs for x in r.comparison.rows if x.measured is not None}
        return [next((m for m in col if m in stated), None) for col in LATENCY_COLUMNS]

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
