"""What the API mix's discounts do not carry to the self-hosted side, said beside the verdict: the API bill prices
``--cache-hit-rate`` of the input at its cached-input price and ``--batch-share`` of the requests at its batch price,
while the self-hosted capacity is what the simulated (or measured) run shows — its own prefix reuse, every request
held to the SLO. A comparison whose two sides assume different traffic says so (``mix_notes``, the verdict's notes),
names the flag that makes them alike, and where they differ enough to move the verdict, is a caveat the verdict rests
on (``mix_caveats``)."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.prefix_ids import has_prefix_ids
from kvledger.dynamics.workload.columns import WorkloadColumns

__all__ = ["mix_notes", "mix_caveats", "LIKE_FOR_LIKE", "drop_batch_words"]

#: the largest difference between the API's cached-input share and the self-hosted run's reused share of prompt tokens
#: read as alike (a threshold of this caveat, not fitted: a tenth of the input tokens priced at another rate)
LIKE_FOR_LIKE = 0.10


def mix_notes(mix: Any, sim: Any) -> list[str]:
    """Notes for an API mix (``ledgers.api_cost.ApiMix``) priced against the self-hosted run: ``sim`` the simulated
    run (``sim_ledgers.SimulatedRun``), None for a measured file."""
    out = []
    if mix.cache_hit_rate > 0:
        out.append(_cache_note(mix.cache_hit_rate, sim))
    elif (reused := _reused(sim)) is not None and reused > LIKE_FOR_LIKE:  # the run reuses; the API bill does not
        cache = "SGLang's radix cache" if sim.setup.config.prefix_caching_policy == "sglang" else "vLLM's prefix cache"
        out.append(f"the self-hosted run reused {reused:.0%} of its prompt tokens from {cache} (simulated, at the load "
                   "priced), while the API bill prices every input token uncached (no --cache-hit-rate): "
                   f"--cache-hit-rate {reused:.2f} prices the API's prompt caching on the same reuse, where its "
                   "provider caches these prefixes")
    if mix.batch_share > 0:
        out.append(f"--batch-share {mix.batch_share:g}: the API bill prices {mix.batch_share:.0%} of the requests at "
                   "the batch API's price (answered within its batch window, no latency SLO); the self-hosted side "
                   "sizes every request to the SLO, so its bill does not fall for the batch share (a separate "
                   "self-hosted batch pool, run at full load off-peak, would be sized apart)")
    return out


def mix_caveats(mix: Any, sim: Any) -> list[str]:
    """The verdict's "rests on" caveats of the mix: the API's cached share against the self-hosted run's reuse where
    they differ by more than ``LIKE_FOR_LIKE``, and a batch share (priced at batch rates on one side only)."""
    out = []
    reused = _reused(sim)
    if reused is not None and abs(mix.cache_hit_rate - reused) > LIKE_FOR_LIKE:
        api = (f"{mix.cache_hit_rate:.0%} cached (--cache-hit-rate)" if mix.cache_hit_rate > 0
               else "priced uncached (no --cache-hit-rate)")
        out.append(f"API input {api} against a self-hosted run that reused {reused:.0%} of its prompt tokens: "
                   f"not like for like — {_like_for_like_fix(mix.cache_hit_rate, reused, sim)}")
    if mix.batch_share > 0:
        out.append(f"API {mix.batch_share:.0%} at batch prices (--batch-share), the self-hosted side all at the SLO")
    return out


def _like_for_like_fix(hit: float, reused: float, sim: Any) -> str:
    """The flag that brings the two sides together: an API caching more than the run reused, on a workload with no
    prefix ids of its own, gets ``--shared-prefix-tokens N`` with the smallest N whose shared share reaches the API's
    (``_shared_share``); otherwise ``--cache-hit-rate`` at the run's own reuse."""
    cfg, info = sim.setup.config, sim.setup.workload_info
    at_reuse = f"--cache-hit-rate {reused:.2f} prices the API at the run's own reuse"
    own_ids = has_prefix_ids(sim.setup.workload) and info.get("shared_prefix_tokens") is None
    if hit <= reused or own_ids or not cfg.enable_prefix_caching:
        return at_reuse
    lengths = _prompt_lengths(sim.setup.workload)
    if lengths is None or not len(lengths):
        return at_reuse
    block = 1 if cfg.prefix_caching_policy == "sglang" else cfg.block_size  # radix: tokens; vLLM: full blocks
    n, share = _shared_prefix_for(hit, lengths, block)
    if share < hit:
        return (f"no one shared system prompt reaches {hit:.0%} of these prompts' tokens (at most {share:.0%}, with "
                f"--shared-prefix-tokens {n:,}), so {at_reuse}")
    return (f"--shared-prefix-tokens {n:,} shares {share:.0%} of the workload's prompt tokens (N × the prompts of "
            f"at least N tokens ÷ all prompt tokens) to match, or {at_reuse}")


def _shared_prefix_for(hit: float, lengths: Any, block: int) -> tuple[int, float]:
    """(N, share): the smallest block-aligned N whose system prompt shares ≥ ``hit`` of the prompt tokens, or the N
    sharing the most where none does. A prompt of p ≥ N tokens shares ⌊N/B⌋·B of them and a shorter one none
    (``dynamics.workload.shared_prefix``), so share(N) = ⌊N/B⌋·B × #(p ≥ N) ÷ Σp."""
    import numpy as np

    p = np.sort(np.asarray(lengths, dtype=np.int64))
    ns = np.arange(block, int(p[-1]) + 1, block, dtype=np.int64)
    if not len(ns):
        return block, 0.0
    shares = ns * (len(p) - np.searchsorted(p, ns, side="left")) / float(p.sum())
    reach = np.nonzero(shares >= hit)[0]
    k = int(reach[0]) if len(reach) else int(np.argmax(shares))
    return int(ns[k]), float(shares[k])


def _prompt_lengths(workload: Any) -> Any:
    """The workload's prompt lengths, tokens (its request specs or columns); None for a closed loop's own."""
    specs = workload.requests if hasattr(workload, "requests") else workload
    if isinstance(specs, WorkloadColumns):
        return specs.num_prompt_tokens
    return [spec.num_prompt_tokens for spec in specs]


def _reused(sim: Any) -> float | None:
    """The share of prompt tokens the simulated run took from its prefix cache (0 with it off); None for a file."""
    if sim is None:
        return None
    return sim.result.summary.prefix_cache_hit_rate if sim.setup.config.enable_prefix_caching else 0.0


def _cache_note(hit: float, sim: Any) -> str:
    """The cached-input share's note: whether the self-hosted run reused prefixes too."""
    head = f"--cache-hit-rate {hit:g}: the API bill prices {hit:.0%} of the input tokens at the cached-input price"
    if sim is None:
        return (f"{head}; the self-hosted capacity is the measured run's, with whatever prefix reuse its own prompts "
                "had")
    cfg, info = sim.setup.config, sim.setup.workload_info
    cache = "SGLang's radix cache" if cfg.prefix_caching_policy == "sglang" else "vLLM's prefix cache"
    if not cfg.enable_prefix_caching:
        return f"{head}; the self-hosted run was simulated with prefix caching off, so its prompts reuse nothing"
    if (n := info.get("shared_prefix_tokens")) is not None and not info.get("shared_prefix_requests"):
        return (f"{head}; the self-hosted run's --shared-prefix-tokens {n:,} reaches no prompt of its workload (each "
                "is shorter, and a shorter prompt is left unshared), so it reused nothing: a smaller N matches it")
    if not has_prefix_ids(sim.setup.workload):
        return (f"{head}; the self-hosted run was simulated on prompts that share no prefix, so {cache} saves it "
                "nothing: if the cached tokens are a shared system prompt, --shared-prefix-tokens N simulates it on "
                "the self-hosted side too, for a like-for-like comparison")
    return (f"{head}; the self-hosted run reused {_reused(sim):.0%} of its prompt tokens from {cache} (simulated, at "
            "the load priced)")


def drop_batch_words(texts: list[str], mix: Any) -> list[str]:
    """``texts`` without the batch share's note and caveat (``mix_notes``, ``mix_caveats``): for an API row with no
    batch API, whose batch share is billed on demand (``ledgers.api_cost``), both sides then price it alike."""
    if mix.batch_share <= 0:
        return texts
    said = (f"--batch-share {mix.batch_share:g}: ", f"API {mix.batch_share:.0%} at batch prices (--batch-share)")
    return [t for t in texts if not t.startswith(said)]
