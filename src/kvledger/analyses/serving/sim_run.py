"""One ``kvledger simulate`` run from its checked request: the prepared simulation (a trace, synthetic requests or
multi-turn sessions), run with the host KV tier the flags give or without one, and its document (``SimDocument``,
with the seed spread and the tier report). The command (``cli/simulate_run.py``) and ``kvledger.simulate`` both
run it here, so the two report the same figures for the same inputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.sim_document import SimDocument

__all__ = ["SessionDraw", "SimPrepare", "run_one", "with_seed_spread", "simulate_payload"]

#: the plain run of a prepared setup (no host tier): the simulator's result (the command's shows a progress bar)
PlainRun = Callable[[Any, Any], Any]


@dataclass(frozen=True, slots=True)
class SessionDraw:
    """The multi-turn sessions to draw: ``kind`` (``--workload``: chat or agent), ``num_sessions`` (``--sessions``)
    and ``session_rate_per_s`` (``--session-rate``), None: kvledger's defaults (``sim_tiers.DEFAULT_SESSIONS``,
    ``DEFAULT_SESSION_RATE``)."""

    kind: str
    num_sessions: int | None = None
    session_rate_per_s: float | None = None


class SimPrepare:
    """The prepared simulation for one seed's arguments: a trace or synthetic run, or sessions (``cap_source``: where
    the sessions' context cap came from, ``sim_tiers.session_args``)."""

    def __init__(self, synthetic: Any, sessions: SessionDraw | None, cap_source: str | None) -> None:
        self.synthetic, self.sessions, self.cap_source = synthetic, sessions, cap_source

    def __call__(self, args: Any) -> Any:
        if self.sessions is None:
            from kvledger.analyses.serving.sim_ledgers import prepare_run

            return prepare_run(args, self.synthetic)
        from kvledger.analyses.serving.session_ramp import loop_note
        from kvledger.analyses.serving.sim_tiers import DEFAULT_SESSION_RATE, DEFAULT_SESSIONS, prepare_sessions

        n, rate = self.sessions.num_sessions, self.sessions.session_rate_per_s
        rate = DEFAULT_SESSION_RATE if rate is None else rate
        setup = prepare_sessions(args, self.sessions.kind, DEFAULT_SESSIONS if n is None else n, rate,
                                 self.cap_source)
        setup.notes += loop_note(setup.workload.sessions, rate, setup.replicas)
        return setup


def _plain(record_steps: bool, record_token_times: bool) -> PlainRun:
    from kvledger.analyses.serving.sim_ledgers import run_prepared

    return lambda setup, args: run_prepared(setup, args, record_steps=record_steps,
                                            record_token_times=record_token_times).result


def run_one(setup: Any, args: Any, tier: Any, synthetic: Any, *, record_steps: bool, record_token_times: bool,
            plain: PlainRun | None = None) -> tuple[Any, Any]:
    """(the simulator's result, the host-tier report or None) of one prepared run: without a tier (``tier`` None)
    by ``plain`` (default: ``run_prepared``), else with the tier and once without it (``sim_tiers.run_with_tier``),
    the run's metadata completed as a plain run's (``synthetic``: its drawn workload's spec)."""
    if tier is None:
        return (plain or _plain(record_steps, record_token_times))(setup, args), None
    from kvledger.analyses.serving.sim_ledgers import finish_run
    from kvledger.analyses.serving.sim_tiers import run_with_tier

    result, tier_report = run_with_tier(setup, tier, record_steps=record_steps, record_token_times=record_token_times)
    return finish_run(setup, args, result, synthetic).result, tier_report


def with_seed_spread(payload: SimDocument, args: Any, seeds: int, prep: SimPrepare, tier: Any) -> SimDocument:
    """``payload`` with the spread of its figures over ``seeds`` seeds (unchanged for one): each further seed is the
    same run with only ``seed`` changed, prepared and simulated here in seed order (no step log, no token times)."""
    if seeds == 1:
        return payload
    from kvledger.analyses.serving.seed_spread import SEED_FREE_NOTE, seed_list, seed_used, summary_spread

    def run_seed(seed: int) -> dict:
        a = dataclasses.replace(args, seed=seed)
        result, _ = run_one(prep(a), a, tier, prep.synthetic, record_steps=False, record_token_times=False)
        return result.summary.to_dict()

    used = seed_used(args, prep.synthetic, prep.sessions is not None)
    spread = summary_spread(payload.summary, seed_list(args.seed, seeds), run_seed if used else None,
                            kept_up=payload.kept_up, sessions=prep.sessions is not None)
    note = SEED_FREE_NOTE if spread.seed_free else spread.note
    return dataclasses.replace(payload, seed_spread=spread, notes=payload.notes + ([note] if note else []))


def simulate_payload(args: Any, prep: SimPrepare, tier: Any, seeds: int = 1, *, record_steps: bool = False,
                     record_token_times: bool = False, plain: PlainRun | None = None) -> tuple[SimDocument, Any]:
    """(the document, the simulator's result of the first seed) of ``args`` prepared by ``prep`` and run with the
    host tier ``tier`` (``TierSettings``; None: none): the document's ``kv_tiers`` is the tier's report, its
    ``seed_spread`` the figures' min–max over ``seeds`` seeds."""
    from kvledger.analyses.serving.sim_ledgers import simulate_document

    setup = prep(args)
    result, tier_report = run_one(setup, args, tier, prep.synthetic, record_steps=record_steps,
                                  record_token_times=record_token_times, plain=plain)
    from kvledger.analyses.serving.doc_pool_hits import with_pool_figures

    payload = with_seed_spread(simulate_document(setup, result), args, seeds, prep, tier)
    payload = with_pool_figures(payload, setup, tier_report)  # --document-pool: expected beside simulated
    p = payload.preemptions
    if tier_report is not None and p and "resume" in p:  # the tier's report says it with the tier's reloads
        payload = dataclasses.replace(payload, preemptions={k: v for k, v in p.items() if k != "resume"})
    return dataclasses.replace(payload, kv_tiers=tier_report), result
