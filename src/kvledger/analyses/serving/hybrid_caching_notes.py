"""The note a hybrid layout's prefix caching prints: the rule simulated (the release's Mamba rule, or the attention
groups'), or why no hit is simulated (``from_plan._hybrid_fields`` decides which)."""

from __future__ import annotations

from typing import Any

__all__ = ["HYBRID_NO_CACHING", "hybrid_caching", "hybrid_no_caching"]

HYBRID_NO_CACHING = ("prefix caching is not modelled for this hybrid layout (Mamba state groups, mixed block sizes or "
                     "the radix cache): the pool is the one the engine lays out as launched (for vLLM, with prefix "
                     "caching on unless --no-enable-prefix-caching), but no prefix hit is simulated, so repeated "
                     "prefixes cost their full prefill here")


#: what the simulator does with these runs, said so that it does not read as the engine's speed
GENERAL_STEP = "the simulator takes its general step path for these runs (slower to compute, not a slower engine)"


def aligned_split(rule: Any, engine_version: str, given: bool | None) -> str:
    """Align mode's prefill chunks in words (``swa_step.StepRule.aligned_chunk``, vLLM's
    ``Scheduler._mamba_block_aligned_split``) and the steps they add over prefix caching off: a prompt's last chunk
    stops at its last cacheable block boundary unless a prefill-checkpoint page takes the state (0.33, GDN on
    FlashInfer), and a release that stops chunks at a shared prefix's junction adds a step there. With prefix caching
    on by default, the flag that launches as a release without it (hybrid models before 0.26)."""
    B, junction = rule.state_block_size, rule.state_prefix.junction_stop != "none"
    if rule.state_checkpoint_pages:
        last = "the prompt's last chunk is not cut: its state goes to a prefill-checkpoint page"
        more = ("one more prefill step for a prompt that shares a prefix (its chunk stops at the junction)" if junction
                else "no more prefill steps")
    else:
        stop = "(P − 1) // B × B" if rule.state_split == "0.32" else "P − P % B"
        last = f"the prompt's last cacheable chunk ends at {stop} and the rest prefills in a step of its own"
        more = ("one more prefill step per prompt" + (" that does not end on a block" if stop == "P − P % B" else "")
                + (", and one more where a shared prefix's junction stops a chunk" if junction else ""))
    flag = ("; --no-enable-prefix-caching launches as vLLM before 0.26 did (hybrid default off): no cut, no hit"
            if given is None else "")
    return (f"vLLM {engine_version} cuts prefill chunks at block boundaries (B = {B:,} tokens; "
            f"Scheduler._mamba_block_aligned_split, align mode): {last}; against prefix caching off: {more}, so TTFT "
            f"rises by about a step each where no prefix hit saves more{flag}")


def hybrid_caching(rule: Any, engine_version: str, given: bool | None = None) -> str:
    """The prefix-caching rule a hybrid run simulates: the release's Mamba rule (``StepBlockRule.state_prefix``, with
    its chunk split: ``aligned_split``) or the full + sliding one (``StepBlockRule.retention``, the release's
    ``swa_retention.SlidingRetention``). ``given``: ``--enable-prefix-caching`` as given (None: the default)."""
    if rule.state_prefix is not None:
        return f"{rule.state_prefix.text}; {aligned_split(rule, engine_version, given)}; {GENERAL_STEP}"
    if rule.state_per_block:
        return (f"Mamba prefix caching as vLLM {engine_version} (mamba_cache_mode all, read in 0.19 and 0.27): a state "
                "page per block of the step's tokens, every full block's state kept (MambaManager.cache_blocks), a "
                "hit is full attention's chain walked back to the last block whose state is cached "
                f"(MambaManager.find_longest_cache_hit); {GENERAL_STEP}")
    retention = rule.retention
    return (f"hybrid prefix caching as vLLM {engine_version} (ModelConfig.is_prefix_caching_supported): per-group "
            "hashes, sliding groups need only the window's blocks of a hit (kv_cache_coordinator.py) and keep in the "
            f"cache {retention.keeps} ({retention.source}); {GENERAL_STEP}")


def hybrid_no_caching(layout: Any, engine_version: str, given: bool | None = None) -> str:
    """Why no prefix hit is simulated: vLLM launched a Mamba hybrid with caching off (its default before 0.26, or
    ``--no-enable-prefix-caching``: ``given`` False), or the layout is one the simulator does not model."""
    state = [g for g in layout.groups if g.kind == "state"] if layout is not None else []
    if state and all(g.state_pages == 1 and not g.state_page_per_block for g in state):
        why = ("--no-enable-prefix-caching given" if given is False else
               f"vLLM {engine_version} launches this Mamba hybrid without it")
        return (f"prefix caching off: {why} (mamba_cache_mode none; on by default for hybrid models from 0.26, "
                "ModelConfig.is_prefix_caching_supported), so no prefill chunk is cut at a block boundary and no "
                "prompt reuses a prefix" + ("; --enable-prefix-caching launches as 0.26 on do (align mode: hits, "
                                            "and prefill chunks cut at block boundaries)" if given is None else ""))
    return HYBRID_NO_CACHING
