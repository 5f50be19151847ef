"""One simulated run with the KV tiers ``simulate``'s tier flags give, on the path ``simulate`` and ``goodput
--simulate`` take with them (``sim_tiers.run_with_tier``: the run with the tier and the same run without it, the tier
built by ``sim_host_tier``; ``doc_pool_hits.setup_with_pool_figures`` adds a document pool's expected hits), kept in
the disk store of simulations (``sim_cache``) under the run's key and the tier settings: a capacity search with the
tier (``sim_prober.SimProber``'s ``tier``) and ``goodput --simulate`` at one of its rates run the same simulation once.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from typing import Any

__all__ = ["simulate_with_tier"]


def _key(args: Any, tiers: Any, synthetic: Any, record_token_times: bool, compare: bool) -> str | None:
    """The run's ``sim_cache`` key with the tier settings added, and whether the run without the tier was run too (its
    report differs; the run with the tier does not): None: not cached, as ``cache_key`` says."""
    from kvledger.analyses.serving import sim_cache

    if not sim_cache.enabled():
        return None
    base = sim_cache.cache_key(args, synthetic, False, record_token_times, None)
    tier = repr(sorted(asdict(tiers).items()))
    twin = "" if compare else "\nwithout the twin"
    return None if base is None else hashlib.sha256(f"{base}\ntier run\n{tier}{twin}".encode()).hexdigest()


def simulate_with_tier(args: Any, tiers: Any, synthetic: Any = None, *,
                       record_token_times: bool = True, compare: bool = True) -> tuple[Any, Any]:
    """(the ``SimulatedRun`` with the tier, its ``sim_tier_report.SimTierReport``) of ``args`` (``SimRequestArgs``,
    its ``rate`` set) with ``tiers`` (``accounting.kv_tier_rules.TierSettings``). ``compare`` False: without the same
    run without the tier (``run_with_tier``'s): a capacity search's probe, whose attainment is the run with the tier's;
    about half the simulation, the run with the tier the same.

    Raises:
        InputError: what ``prepare_run`` or ``run_with_tier`` refuses (tier flags of the other engine, no host tier).
    """
    from kvledger.analyses.serving import sim_cache
    from kvledger.analyses.serving.doc_pool_hits import setup_with_pool_figures
    from kvledger.analyses.serving.sim_ledgers import finish_run, own_copies, prepare_run
    from kvledger.analyses.serving.sim_tiers import run_with_tier

    def compute() -> tuple[Any, Any]:
        setup = prepare_run(args, synthetic)
        result, report = run_with_tier(setup, tiers, record_token_times=record_token_times, compare=compare)
        return finish_run(setup_with_pool_figures(setup, report), args, result, synthetic), report

    sim, report = sim_cache.cached_run(_key(args, tiers, synthetic, record_token_times, compare), compute)
    return own_copies(sim), report
