"""The typed records of one simulation that cross into the CLI, the ledgers' JSON and the views.

``SimDocument`` is what ``kvledger simulate`` reports (``sim_report.simulate_document``; its ``to_dict`` is
``simulate --json`` and ``summary.json``; ``kvledger.report.simulate_view.render_summary`` draws it).
``SimProvenance`` (with its ``PlanFigures``, both in ``sim_provenance.py``) says what a simulated run was: the
``simulation`` section of ``goodput --simulate``, ``cost --simulate`` and the capacity search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.jsonable import to_jsonable
from kvledger.strict_json import finite_rate, to_strict

if TYPE_CHECKING:
    from kvledger.analyses.serving.prediction_bands import PredictionBand
    from kvledger.analyses.serving.session_report import SessionReport
    from kvledger.analyses.serving.sim_tier_report import SimTierReport
    from kvledger.ledgers.burst_read import BurstRead

__all__ = ["SimDocument", "PlanFigures", "SimProvenance",  # noqa: F822 - these two: __getattr__
           "SIMULATOR", "simulator_description", "workload_text", "load_text", "shared_prefix_text",
           "PACED_MODE", "rejected_warning", "rejected_said", "rejection_rule"]

#: the workload ``mode`` of a paced closed loop (``ClosedLoop.paced``: a rate under a cap on requests in flight)
PACED_MODE = "closed loop, paced"


def __getattr__(name: str) -> Any:
    """``PlanFigures`` and ``SimProvenance``, from ``sim_provenance.py`` on first use (PEP 562): ``simulate`` makes
    neither, and each frozen dataclass costs ~0.5 ms to make at import."""
    if name in ("PlanFigures", "SimProvenance"):
        from kvledger.analyses.serving import sim_provenance

        return getattr(sim_provenance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the simulator, whichever rule it runs
SIMULATOR = "kvledger simulator (kvledger.dynamics.simulator.simulate; deterministic, no wall clock)"

#: batching (EngineConfig.batching) → the name of the scheduling rule it simulates (kvledger.dynamics.engine.scheduler
#: and sglang_scheduler; what each rule does is engine_config.BATCHING_POLICIES's text)
_RULES = {"continuous": "vLLM v1 scheduling rule (preemption by recompute)", "static": "static batching",
          "sglang": "SGLang 0.5.x scheduling rule", "vllm_v0": "vLLM V0 scheduling rule"}


def simulator_description(engine: dict[str, Any]) -> str:
    """The simulator and the rule it ran, from the run's engine settings (``EngineConfig.to_dict()``): batching rule,
    KV allocation, chunked prefill, queue order, prefix caching, async scheduling.

    ``--policy sglang`` reads as SGLang's rule, ``static`` as static batching, ``contiguous`` as contiguous KV.
    """
    from kvledger.dynamics.engine.config import BATCHING_POLICIES, KV_ALLOCATION_POLICIES

    b, kv, chunked = engine["batching"], engine["kv_allocation"], engine["enable_chunked_prefill"]
    caching = engine["prefix_caching_policy"] if engine["enable_prefix_caching"] else "off"
    return (f"{SIMULATOR}: {_RULES.get(b, b)} — {BATCHING_POLICIES.get(b, b)}; {kv} KV: "
            f"{KV_ALLOCATION_POLICIES.get(kv, kv)}; chunked prefill {'on' if chunked else 'off'}; "
            f"queue order {engine['scheduling_policy']}; prefix caching {caching}"
            + ("; async scheduling (batch queue of 2)" if engine.get("async_scheduling") else ""))


@dataclass(frozen=True)
class SimDocument:
    """One simulation's report, in the order ``--json`` writes it.

    Attributes:
        summary: the simulator's summary (latency statistics, throughput, KV usage, cache, preemptions), invariants
            checked (``kvledger.invariants.check_sim_summary``).
        replicas: engine replicas simulated; router: their router (None for one replica).
        engine: the engine settings run (``EngineConfig``'s fields); workload: the trace or synthetic workload and its
            means; step_cost: the step-cost model's name and source.
        overload: an open loop's queue growth (``kvledger.analyses.serving.queue_growth``), None when it kept up or
            the loop was closed.
        too_short: an open loop too short to tell whether it kept up (``queue_growth.ShortRun``; no error band);
            None (null in the JSON: the key is always there) otherwise.
        burst: an open loop whose every request arrived at one instant (``--rate inf``), read at its running
            batch's peak (``ledgers.burst_read.BurstRead``: ``case`` "saturated", its throughput banded as a
            saturated run's, or "one_batch", its throughput a batch's drain, no band; the counts); None (left out of
            the JSON) for any other run.
        at_knee: the run sat at or past its knee (``prediction_bands.knee_withheld``: each quarter of its arrivals'
            mean TTFT, the rule; no TTFT band); None (null in the JSON: the key is always there) otherwise.
        error_bands: the prediction bands of the headline figures (``prediction_bands``); ``band_coverage`` (a
            property, in the JSON) names the figures with no validated band, each null, and why.
        notes: what the reader should know about the run.
        client_latency: the latency added to every TTFT and E2E (``client_latency.ClientLatency``: seconds and
            source); None (null in the JSON) when none was given.
        preemptions: why the run preempted and what to change (``preemption_why.preemption_facts``: the pool, the
            peak running batch, the first preemption's state, doctor's options); None (null) when it had none.
        seed_spread: with ``--seeds N`` (N > 1), each figure's min–max over the seeds
            (``seed_spread.SeedSpread``; its JSON ``{"ttft_s.mean": {"min", "max", "n_seeds"}, …}``); None (null)
            for one seed.
        kv_tiers: with a host KV tier, its report (``sim_tier_report.SimTierReport``: hits, loads and bytes per
            tier, TTFT with and without it); None (left out of the JSON) without one.
        sessions (a property): the multi-turn sessions drawn (``session_report.SessionReport``, read from
            ``workload["sessions"]``); None for a trace or synthetic requests.
    """

    __json__ = ("summary", "replicas", "router", "data_parallel", "engine", ("workload", "workload_json"), "step_cost",
                "client_latency", "overload", "too_short", "burst", "at_knee", "preemptions", "batch", "error_bands",
                "band_coverage", "notes", "seed_spread", "kv_tiers", "pipeline")
    __json_optional__ = ("kv_tiers", "burst", "pipeline")
    summary: dict[str, Any]
    replicas: int
    router: str | None
    engine: dict[str, Any]
    workload: dict[str, Any]
    step_cost: dict[str, Any]
    overload: Any = None
    error_bands: dict[str, PredictionBand] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    client_latency: Any = None
    seed_spread: Any = None
    too_short: Any = None
    at_knee: dict[str, Any] | None = None
    burst: BurstRead | None = None
    preemptions: dict[str, Any] | None = None
    batch: dict[str, Any] | None = None
    #: vLLM's DP ranks in lock-step (``sim_dp.dp_figures``: KV per rank and in all, requests routed per rank, KV usage
    #: per rank, the rules' source); None (left out) without data parallelism
    data_parallel: dict[str, Any] | None = None
    """Requests held at once (``sim_batch.batch_occupancy``): running and waiting, time-weighted mean and max; None
    (null in the JSON: the key is always there) when every request was rejected."""
    kv_tiers: SimTierReport | None = None  # with a host KV tier (sim_tiers.run_with_tier); left out of the JSON else
    pipeline: dict[str, Any] | None = None  # vLLM's PP stages (``sim_pp.pp_figures``); left out of the JSON else

    @property
    def kept_up(self) -> bool:
        """An open loop whose queue did not grow, long enough to tell, or a paced closed loop whose clients kept their
        rate: its throughput is the load it was offered (a run may still have sat at its knee, its TTFT growing
        through the arrivals: ``at_knee``); or a burst the engine ran as one batch (``burst``), whose throughput is
        that batch's drain. A burst past what the engine runs at once did not keep up: it was saturated."""
        return str(self.workload.get("mode", "")).startswith(("open loop", PACED_MODE)) and not \
            self.overload and not self.too_short and not (self.burst is not None and self.burst.saturated)

    @property
    def sessions(self) -> SessionReport | None:
        """The synthetic sessions the run drew (``--workload``; the JSON's ``workload.sessions``), None for a trace
        or synthetic requests."""
        from kvledger.analyses.serving.session_report import SessionReport

        got = self.workload.get("sessions")
        return None if got is None else SessionReport.from_json(got)

    @property
    def band_coverage(self) -> dict[str, Any]:
        """The banded figures, the unbanded ones (each null) and why (``prediction_bands.band_coverage``)."""
        from kvledger.analyses.serving.prediction_bands import band_coverage

        return band_coverage(self.error_bands, self.kept_up, self.burst)

    @property
    def workload_json(self) -> dict[str, Any]:
        """``workload`` as the JSON writes it: an infinite offered rate as null with ``"all_at_once": true``."""
        return finite_rate(self.workload, "offered_rate_req_per_s")

    def to_dict(self) -> dict[str, Any]:
        return to_strict(to_jsonable(self))


def workload_text(info: dict[str, Any]) -> str:
    """``azure-conv: 300 requests, open loop at 3.480 req/s offered; prompt mean …`` from a workload description."""
    return (f"{info['trace']}: {info['num_requests']:,} requests, {load_text(info)}; prompt mean "
            f"{info['prompt_tokens_mean']:,.0f}, output mean {info['output_tokens_mean']:,.0f} tokens"
            f"{shared_prefix_text(info)}")


def shared_prefix_text(info: dict[str, Any]) -> str:
    """``; shared prefix 2,000 tokens (19 of 20 prompts reach it)`` for a workload with ``--shared-prefix-tokens``,
    then its document pool's draw (``--document-pool``); "" without either."""
    n, pool = info.get("shared_prefix_tokens"), info.get("document_pool")
    text = "" if n is None else (f"; shared prefix {n:,} tokens ({info['shared_prefix_requests']:,} of "
                                 f"{info['num_requests']:,} prompts reach it; a shorter one is left unshared)"
                                 if pool is None else f"; shared prefix {n:,} tokens before each document")
    if pool is None:
        return text
    length = pool["document_tokens"]
    length = f"{int(length):,}" if length.isdigit() else length
    return (f"{text}; document pool {pool['documents']:,} documents × {length} tokens, "
            f"{pool['popularity']}, one before each question ({pool['distinct_documents_drawn']:,} drawn; "
            f"{pool['seen_before_share']:.1%} of requests drew one seen before)")


def load_text(info: dict[str, Any]) -> str:
    """How the workload loaded the engine, in words: "closed loop, 16 users, think time 0 s", "open loop at 3.480 req/s
    offered"."""
    rate = info.get("offered_rate_req_per_s")
    if str(info.get("mode")).startswith("closed loop"):
        paced = ""
        if info["mode"] == PACED_MODE and rate is not None and math.isfinite(rate):
            asked = info.get("requested_rate_req_per_s")  # --rate: the drawn arrivals' own rate differs by chance
            drawn = (f" (--rate {asked:g}: its {info['num_requests']:,} drawn arrivals' rate)"
                     if asked and abs(rate / asked - 1) > 0.005 else "")
            paced = f"paced at {rate:.3f} req/s offered{drawn}, "
        return f"closed loop, {paced}{info['concurrency']} users, think time {info['think_time_s']:g} s"
    return ("open loop, all at t = 0" if rate is None or not math.isfinite(rate)
            else f"open loop at {rate:.3f} req/s offered")


def rejected_warning(s: dict, eng: dict, fix: str = "") -> str | None:
    """The warning for requests the engine refused (``s``: the run's summary, ``eng``: its engine; ``fix``: the
    --max-model-len that serves them, in words, ``rejections.Rejections.fix_words``), None when none was: every one
    refused leaves no latency or throughput to report. A note of the document (first), the warning line of the text
    and, under ``--json``, a line on stderr (``rejected_said``)."""
    n, total = s["num_rejected"], s["num_requests"]
    if not n:
        return None
    rule = f"{rejection_rule(eng)}; max_model_len {eng['max_model_len']:,} tokens"
    fix = f" — {fix}" if fix else ""
    if n == total:
        return (f"every request ({total:,}) was rejected ({rule}), as the engine refuses them: there is no latency or "
                f"throughput to report{fix}")
    return (f"{n:,} of {total:,} requests {'was' if n == 1 else 'were'} rejected ({rule}), as the engine refuses "
            f"them: the latencies and throughput are those of the others{fix}")


def rejected_said(doc: Any) -> str | None:
    """The refusals' warning as the document's notes carry it (with its fix), for the text and stderr lines."""
    base = rejected_warning(doc.summary, doc.engine)
    return next((n for n in doc.notes if base and n.startswith(base)), base)


def rejection_rule(eng: dict) -> str:
    """Which requests the engine refuses (``dynamics.engine.request_state.accept``): vLLM V1 a prompt ≥ max_model_len,
    V0 prompt + output past it, SGLang also a prompt ≥ its max_req_len − 5."""
    if eng.get("batching") == "sglang":
        return "prompt + output > max_model_len, or a prompt ≥ SGLang's max_req_len − 5"
    return "a prompt ≥ max_model_len" if eng.get("caps_output", True) else "prompt + output > max_model_len"
