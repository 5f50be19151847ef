"""``kvledger simulate`` with a host KV tier below HBM, or on multi-turn sessions: the tier the engine's flags give
(the plan's ``host_dram`` tier, ``accounting/kv_tiers.py``), the run through ``dynamics.offload_sim.simulate_offload``
(with the tier, and the same run without it), and the figures per tier that ``simulate`` reports.

The host tier is built as ``kvledger offload`` builds it (``analyses/judgments/offload.py``): capacity in the
engine's stored units (vLLM blocks, LMCache 256-token chunks, SGLang prompt segments of the workload), bytes per
token from the plan, read and write bandwidth over the host link.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import numpy as np

from kvledger.accounting.kv_tier_rules import LMCACHE_CHUNK_TOKENS, TierSettings
from kvledger.accounting.kv_tiers import TierPlan, build_tier_plan
from kvledger.accounting.max_model_len import config_len, default_max_model_len
from kvledger.analyses.judgments.offload import (
    SESSION_CAP_AUTO,
    SESSION_CAP_GIVEN,
    SESSION_SHAPES,
    host_unit_name,
    session_context_cap,
    sim_host_tier,
    sim_rules,
    tier_judgment,
)
from kvledger.analyses.serving import session_notes as SN
from kvledger.analyses.serving.from_plan import refuses_max_model_len
from kvledger.analyses.serving.plan_pricing import priced_by_run
from kvledger.analyses.serving.session_report import SessionReport
from kvledger.analyses.serving.sim_setup import SimRequestArgs, SimSetup, plan_engine, prepare
from kvledger.analyses.serving.sim_tier_report import SimHostTier, SimTierReport, tier_rows
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.simulator import SimResult
from kvledger.dynamics.workload.reuse import reusable_prefix_tokens
from kvledger.dynamics.workload.sessions import SessionLoop, synthesize_sessions
from kvledger.errors import DoesNotFitError, InputError

__all__ = ["SimTierReport", "host_tier_for", "run_with_tier", "prepare_sessions", "SESSION_SEGMENT_TOKENS",
           "DEFAULT_SESSIONS", "DEFAULT_SESSION_RATE", "session_args", "session_cap_of"]

#: tokens per prefix segment id of a synthetic session (as ``kvledger offload``): SGLang's host tier stores segments
SESSION_SEGMENT_TOKENS = 64
DEFAULT_SESSIONS = 200  # as `kvledger offload --sessions`
DEFAULT_SESSION_RATE = 0.2  # session starts per second, as `kvledger offload --session-rate`
#: the source of a tier report run without its twin (``run_with_tier``'s ``compare`` False)
WITH_TIER_ONLY = "kvledger.dynamics.offload_sim.simulate_offload (the run with the tier alone)"

_RULES = {
    "vllm": "vLLM OffloadingConnector: write-through store of every completed block, prompt and generated; the "
            "request's host-resident continuation of its HBM hit is loaded before it is scheduled (the load is on its "
            "TTFT)",
    "vllm_prompt": "vLLM OffloadingConnector: write-through store of every completed prompt block (offload_prompt_only,"
                   " default from 0.23.0: generated blocks are not stored); the request's host-resident continuation "
                   "of its HBM hit is loaded before it is scheduled (the load is on its TTFT)",
    "lmcache": "LMCache under vLLM 0.33.0 (LMCacheMPConnector): whole 256-token chunks of the prompt stored; the "
               "chunks from the prompt's start beyond the HBM hit loaded before the request is scheduled",
    "lmcache_in_step": "LMCache under vLLM before 0.33.0 (LMCacheConnectorV1, load_async False): whole 256-token "
                       "chunks of the prompt stored; the chunks from the prompt's start beyond the HBM hit loaded in "
                       "the step that schedules the request, the load added to that step's time",
    "sglang": "SGLang HiCache: {policy} backup of radix-tree segments; the host-resident continuation of the device "
              "prefix loaded back at admission (not under 10 tokens), the step taking max(compute, load)",
}


def _segment_tokens(workload: Any) -> int:
    """Tokens per prefix segment of the workload's requests (SGLang's host units); 512 when none lists segments.

    Raises:
        InputError: requests listing segments of different sizes.
    """
    from kvledger.dynamics.workload.columns import WorkloadColumns

    if isinstance(workload, SessionLoop):
        return workload.segment_tokens
    specs = getattr(workload, "requests", workload)
    if isinstance(specs, WorkloadColumns):
        return 512  # columns carry no segments: nothing can hit, the unit only sizes the tier's count
    sizes = {s.segment_tokens for s in specs if s.prefix_segments}
    if len(sizes) > 1:
        raise InputError(f"the workload's requests list prefix segments of {len(sizes)} sizes "
                         f"({', '.join(map(str, sorted(sizes)))} tokens); SGLang's host tier is simulated in one "
                         "segment size")
    return sizes.pop() if sizes else 512


def host_tier_for(setup: SimSetup, tiers: TierSettings) -> tuple[HostTier, TierPlan, int]:
    """The simulated host tier, the plan's tiers and the host unit (tokens per unit: SGLang's segment, LMCache's
    chunk or vLLM's block) for ``setup``'s engine (``--policy sglang``: SGLang's, else vLLM's) and ``tiers``.

    Raises:
        InputError: tier flags the engine refuses or ignores, a model it cannot offload (the plan's rules), no host
            tier, or a cache of the other engine.
    """
    plan = setup.plan
    engine = plan.settings.engine
    tp = build_tier_plan(plan, tiers, step_cost=setup.cost, priced_by=priced_by_run(setup.cost_info))
    cfg = setup.config
    radix = cfg.prefix_caching_policy == "sglang"
    if tp.tier("host_dram") is not None and radix != (engine == "sglang"):
        raise InputError(f"the {engine} host tier needs {engine}'s own prefix cache, but the run uses "
                         f"--prefix-caching-policy {cfg.prefix_caching_policy}: drop --prefix-caching-policy, or use "
                         "--policy sglang for SGLang's HiCache")
    chunk = LMCACHE_CHUNK_TOKENS if engine != "sglang" and tiers.kv_offloading_backend == "lmcache" else 0
    unit = _segment_tokens(setup.workload) if radix else chunk or cfg.block_size
    return sim_host_tier(tp, plan.settings, tiers, unit, chunk), tp, unit


def _rule(engine: str, tiers: TierSettings, host: HostTier) -> str:
    if engine == "sglang":
        return _RULES["sglang"].format(policy=tiers.write_policy)
    if tiers.kv_offloading_backend == "lmcache":
        return _RULES["lmcache_in_step" if host.load_in_step else "lmcache"]
    return _RULES["vllm_prompt" if host.prompt_only else "vllm"]


def run_with_tier(setup: SimSetup, tiers: TierSettings, *, record_steps: bool = False,
                  record_token_times: bool = True, compare: bool = True) -> tuple[SimResult, SimTierReport]:
    """Run ``setup`` with the host tier ``tiers`` give and once without it (``simulate_offload``); the result with
    the tier (its records are the run's) and the tier report. ``compare`` False: the run with the tier alone (a
    capacity search's probe: its attainment is the run with the tier's), the report without the figures the run
    without it gives (its TTFT and HBM hit rate, and the judgment that compares them: None).

    Raises:
        InputError: see :func:`host_tier_for`; prefix caching off; settings the tier is not modelled for.
    """
    host, tp, unit = host_tier_for(setup, tiers)
    run = simulate_offload(setup.workload, setup.config, setup.cost, host, num_replicas=setup.replicas,
                           router=setup.router, record_steps=record_steps, record_token_times=record_token_times,
                           model=setup.model_name, hardware=setup.gpu_name, compare=compare)
    s = run.tiers
    engine = setup.plan.settings.engine
    name = host_unit_name(setup.config.prefix_caching_policy == "sglang", host.chunk_tokens)
    with_s, base = run.with_offload.summary.ttft_s, run.without_offload
    without_s, judged = None, None
    if base is not None:
        without_s = base.summary.ttft_s
        judged = tier_judgment(s, asdict(with_s), asdict(without_s),
                               reusable_tokens=reusable_prefix_tokens(setup.workload),
                               overload=_overload(setup, run.with_offload.records), host_unit=(name, unit))
    rep = SimTierReport(engine, setup.plan.memory.engine_version, _rule(engine, tiers, host), tp,
                        SimHostTier.of(host, unit, name, setup.replicas), tier_rows(s, unit, name), s.prompt_tokens,
                        with_s, without_s, None if base is None else base.summary.prefix_cache_hit_rate, judged,
                        s.occupancy, rules=sim_rules(host), resume=s.resume,
                        **({} if base is not None else {"source": WITH_TIER_ONLY}))
    return run.with_offload, rep


def _overload(setup: SimSetup, records) -> Any:
    """The run's overload as ``simulate_document`` reads it (``queue_growth.run_overload`` by the workload's mode)."""
    from kvledger.analyses.serving.queue_growth import run_overload

    info = setup.workload_info
    return run_overload(records, info.get("mode", ""), {**info, "max_running": setup.config.max_num_seqs *
                                                         setup.replicas})


def prepare_sessions(args: SimRequestArgs, kind: str, num_sessions: int, session_rate: float,
                     cap_source: str | None = None) -> SimSetup:
    """The prepared simulation of ``num_sessions`` synthetic ``kind`` sessions (``SESSION_SHAPES``), starting as a
    Poisson process of ``session_rate`` per second, drawn with ``args.seed``; a session stops before it would pass
    the engine's max_model_len (``cap_source``: where it came from; ``session_args`` gives simulate's).

    Raises:
        InputError: an unknown kind, a count < 1, a rate ≤ 0, or anything ``prepare`` refuses.
    """
    from kvledger.analyses.serving.sim_setup import load_plan

    if cap_source is None:  # search's probes: the session rule applied to the flags (session_spec.SessionSpec)
        cap_source = SESSION_CAP_GIVEN if args.max_model_len else "the plan's default, the model's context"
    if kind not in SESSION_SHAPES:
        raise InputError(f"--workload must be one of {', '.join(SESSION_SHAPES)} (session presets), got {kind!r}")
    plan, _ = load_plan(args)
    shape = SESSION_SHAPES[kind]
    shape = replace(shape, max_context_tokens=min(shape.max_context_tokens, plan.memory.max_model_len))
    sessions = synthesize_sessions(shape, num_sessions, session_rate, np.random.default_rng(args.seed))
    if not sessions:
        fix = ("raise --max-model-len" if plan.memory.max_model_len < config_len(plan.model, plan.settings)[0] else
               "it is the model's own context, which the engine refuses a longer max_model_len past")
        raise InputError(f"no {kind} session fits max_model_len {plan.memory.max_model_len:,}: {fix}")
    left_out = num_sessions - len(sessions)  # their first turn would pass the cap (sessions.synthesize_sessions)
    loop = SessionLoop(tuple(sessions), SESSION_SEGMENT_TOKENS)
    specs = [spec for turns in loop.driver().specs for spec in turns]
    info = {"trace": f"{kind} sessions (synthetic)", "num_requests": len(specs),
            "prompt_tokens_mean": sum(s.num_prompt_tokens for s in specs) / len(specs),
            "output_tokens_mean": sum(s.num_output_tokens for s in specs) / len(specs),
            "mode": (f"sessions: {len(sessions):,} closed loops, each turn sent its think time after the previous "
                     f"one finished; session starts Poisson at {session_rate:g}/s drawn with seed {args.seed}; "
                     f"context cap {plan.memory.max_model_len:,} tokens ({cap_source})"),
            "sessions": SessionReport(kind, len(sessions), session_rate, SESSION_SEGMENT_TOKENS, shape,
                                      plan.memory.max_model_len, cap_source).to_dict()}
    try:
        setup = prepare(args, workload=(loop, len(specs), info))
    except InputError as err:  # the engine refuses a cap the user did not set: say whose it is
        if cap_source in (SESSION_CAP_GIVEN, SESSION_CAP_AUTO) or not refuses_max_model_len(err):
            raise
        raise DoesNotFitError(SN.session_default_cap(plan.memory.max_model_len, str(err))) from err
    if left_out:  # max_model_len bound the cap only where below the preset's own (equal: raising it moves nothing)
        setup.notes.append(SN.left_out_note(num_sessions, len(sessions), shape, SESSION_SHAPES[kind],
                                             config_len(plan.model, plan.settings)[0]))
    if args.replicas > 1 and args.router in ("round_robin", "least_loaded"):
        setup.notes.append(f"sessions on {args.replicas:,} replicas routed {args.router}: a session's turns land on "
                           "different replicas, whose caches do not hold its earlier turns; --router "
                           "session_affinity keeps each session on one replica (sticky sessions)")
    return setup


def session_args(args: SimRequestArgs) -> tuple[SimRequestArgs, str]:
    """(``args`` with the session run's max_model_len, where it came from): ``session_cap_of`` its --max-model-len
    (``auto`` kept for the plan to fit)."""
    from kvledger.catalog.models import load_model

    cap, source = session_cap_of(args.max_model_len, plan_engine(args), args.engine_version,
                                 lambda: load_model(args.model))
    return (args if cap is None else replace(args, max_model_len=cap)), source


def session_cap_of(text: str | int | None, engine: str, engine_version: str | None,
                   model: Any) -> tuple[int | None, str]:
    """(a session run's max_model_len in tokens, None for vLLM's auto-fit; where it came from): --max-model-len read
    as the engine's release reads it (``vllm_auto_len.read_max_model_len``: suffixes by release, -1/auto from vLLM
    0.14.0), else the session rule of every command (``judgments/offload.py : session_context_cap``): the smaller of
    kvledger's session default and the model's context (``model()``: the ModelSpec, loaded only then)."""
    from kvledger.accounting.vllm_auto_len import read_max_model_len

    given, auto = read_max_model_len(None if text is None else str(text), engine, engine_version)
    if auto:  # the plan fits it to the pool (accounting/vllm_auto_len.py); the sessions take the length it fits
        return None, SESSION_CAP_AUTO
    return session_context_cap(given, None if given else default_max_model_len(model(), engine, engine_version))
