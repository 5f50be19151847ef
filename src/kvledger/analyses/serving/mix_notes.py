"""What the API mix's discounts do not carry to the self-hosted side, said beside the verdict: the API bill prices
``--cache-hit-rate`` of the input at its cached-input price and ``--batch-share`` of the requests at its batch price,
while the self-hosted capacity is what the simulated (or measured) run shows — its own prefix reuse, every request
held to the SLO. A comparison whose two sides assume different traffic says so, and names the flag that makes them
alike."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.prefix_ids import has_prefix_ids

__all__ = ["mix_notes"]


def mix_notes(mix: Any, sim: Any) -> list[str]:
    """Notes for an API mix (``ledgers.api_cost.ApiMix``) priced against the self-hosted run: ``sim`` the simulated
    run (``sim_ledgers.SimulatedRun``), None for a measured file."""
    out = []
    if mix.cache_hit_rate > 0:
        out.append(_cache_note(mix.cache_hit_rate, sim))
    if mix.batch_share > 0:
        out.append(f"--batch-share {mix.batch_share:g}: the API bill prices {mix.batch_share:.0%} of the requests at "
                   "the batch API's price (answered within its batch window, no latency SLO); the self-hosted side "
                   "sizes every request to the SLO, so its bill does not fall for the batch share (a separate "
                   "self-hosted batch pool, run at full load off-peak, would be sized apart)")
    return out


def _cache_note(hit: float, sim: Any) -> str:
    """The cached-input share's note: whether the self-hosted run reused prefixes too."""
    head = f"--cache-hit-rate {hit:g}: the API bill prices {hit:.0%} of the input tokens at the cached-input price"
    if sim is None:
        return (f"{head}; the self-hosted capacity is the measured run's, with whatever prefix reuse its own prompts "
                "had")
    if not sim.setup.config.enable_prefix_caching:
        return f"{head}; the self-hosted run was simulated with prefix caching off, so its prompts reuse nothing"
    if not has_prefix_ids(sim.setup.workload):
        return (f"{head}; the self-hosted run was simulated on prompts that share no prefix, so vLLM's prefix caching "
                "saves it nothing: if the cached tokens are a shared system prompt, --shared-prefix-tokens N "
                "simulates it on the self-hosted side too, for a like-for-like comparison")
    rate = sim.result.summary.prefix_cache_hit_rate
    return (f"{head}; the self-hosted run reused {rate:.0%} of its prompt tokens from vLLM's prefix cache (simulated, "
            "at the load priced)")
