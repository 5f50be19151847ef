"""Which Mamba (linear-attention) states each vLLM release keeps for prefix caching in ``mamba_cache_mode`` "align",
and where its scheduler ends a prefill chunk at a shared prefix's junction.

In align mode a state page holds the state after a block-aligned number of tokens, written only at a chunk end
(``v1/core/sched/scheduler.py : Scheduler._mamba_block_aligned_split`` cuts prefill chunks to block boundaries).
``MambaManager.cache_blocks`` then registers those pages (block hash of the last block they cover), and
``HybridKVCacheCoordinator.find_longest_cache_hit`` takes full attention's chain of cached blocks and walks it back
to the last block whose state is cached (``MambaManager.find_longest_cache_hit``, right to left). Where full
attention hit further than the states, ``num_uncached_common_prefix_tokens`` = the difference marks the shared
prefix's end (the junction), and releases that know it end a chunk there so the junction's state is cached too::

    retention      registers the state at                        releases read
    every chunk    every block-aligned chunk end                 0.19, 0.22–0.28 (prefix_cache_retention_interval
                                                                 unset: VLLM_PREFIX_CACHE_RETENTION_INTERVAL None)
    boundaries     the prompt's last boundary ((P − 1) // B × B)  0.29, 0.33 (prefix_cache_retention_interval
                   and the junction only                         default 0; MambaManager.reachable_block_mask)

    junction stop  none          0.19, 0.22, 0.23 (no uncached-prefix hint)
                   first chunk   0.24, 0.25: the admitted chunk is cut to the uncached common prefix
                                 (_mamba_block_aligned_split's num_uncached_common_prefix_tokens argument)
                   every chunk   0.26–0.33: ``request.shared_prefix_boundary``, a stop of every prefill chunk

Releases between those read take the rule of the last one read before them. vLLM before 0.19 is not modelled
(``vllm_rules.mamba_cache_rule`` gives it one state page, no prefix caching).

``--prefix-cache-retention-interval I`` (0.29 on; ``MambaManager.reachable_block_mask``, read in 0.29 and 0.33) adds
to the boundaries the state at every multiple of ``I`` tokens (``I // B`` ≤ 1: every block-aligned state), where a
chunk ends or exports its checkpoint there. Before 0.29 ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` (``envs.py``) sets
it: 0.23's ``MambaManager`` keeps the base class's dense mask (every chunk end, as unset; and 0.23 starts only a
model that also has a sliding-window group: ``_validate_prefix_cache_retention_interval``); 0.24–0.25's mask keeps the
replay boundary and the multiples of ``I`` but no junction (``reachable_block_mask(num_prompt_tokens=…)``), 0.26–0.28's
the junction too (``reachable_boundaries``), read in each.

The chunk split's last cacheable stop (``_mamba_block_aligned_split``: ``last_cache_position``), by release
(``SPLITS``): up to 0.31 ``num_tokens − num_tokens % B`` (read in 0.19, 0.25, 0.26, 0.27, 0.28, 0.29, 0.30, 0.31);
from 0.32 ``(num_tokens − 1) // B × B`` (``get_mamba_prefill_checkpoint_position``, read in 0.32 and 0.33), so a
prompt of a multiple of B stops a block early. Up to 0.26 a chunk is cut to a block boundary only while it ends short
of that stop (``end < last_cache_position``), from 0.27 while it ends short of the prefill end: the same chunks, but
for a block wider than the step's token limit, which 0.19–0.26 cut to 0 tokens and so never schedule (the simulator
keeps the tokens there, as 0.27 does)::

    B = 320, a 640-token prompt, budget 2,048:  ≤ 0.31 one chunk 0 → 640;  0.32 on 0 → 320, 320 → 640
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.vllm_rules import parse_version

__all__ = ["MambaPrefixRule", "mamba_prefix_rule", "JUNCTION_STOPS", "SPLITS", "mamba_split"]

JUNCTION_STOPS = ("none", "first_chunk", "every_chunk")


@dataclass(frozen=True)
class MambaPrefixRule:
    """One vLLM release's align-mode Mamba prefix-cache rule (module doc).

    Attributes:
        release: the vLLM version the run follows, e.g. "0.33.0".
        every_chunk_end: every block-aligned chunk end registers its state (False: only the prompt's last boundary
            and the junction, ``prefix_cache_retention_interval`` 0).
        junction_stop: a key of ``JUNCTION_STOPS``: where the scheduler ends a chunk at the junction.
        read: the releases whose source the rule was read in.
        retention_interval: ``--prefix-cache-retention-interval`` given > 0 (0.29 on; 0.24–0.28 the environment
            variable): the states at its multiples are kept too, tokens (0: the release's default).
        keeps_junction: the junction's state is kept where not every chunk end's is (False: 0.24–0.25's variable).
    """

    release: str
    every_chunk_end: bool
    junction_stop: str
    read: str
    retention_interval: int = 0
    keeps_junction: bool = True

    def keeps_periodic(self, position: int, block_size: int) -> bool:
        """Whether ``--prefix-cache-retention-interval`` keeps the state after ``position`` tokens (a multiple of
        ``block_size``): ``MambaManager.reachable_block_mask``'s segment boundaries."""
        interval = self.retention_interval
        return bool(interval) and (interval // block_size <= 1 or position % interval == 0)

    @property
    def text(self) -> str:
        """The rule in words, with the release and where it was read."""
        kept = ("the state of every block-aligned chunk end" if self.every_chunk_end else
                "only the states at the prompt's last block boundary and the shared prefix's junction "
                "(prefix_cache_retention_interval 0)")
        if self.retention_interval:
            kept = (f"the states at every multiple of {self.retention_interval:,} tokens where a chunk ends or "
                    "checkpoints, the prompt's last block boundary" + (" and the shared prefix's junction" if
                                                                      self.keeps_junction else " (no junction)") +
                    f" (--prefix-cache-retention-interval {self.retention_interval}, "
                    "MambaManager.reachable_block_mask)")
        stop = {"none": "no chunk stops at the junction",
                "first_chunk": "the admitted chunk stops at the junction (num_uncached_common_prefix_tokens)",
                "every_chunk": "prefill chunks stop at the junction (shared_prefix_boundary)"}[self.junction_stop]
        return (f"Mamba prefix caching as vLLM {self.release} (mamba_cache_mode align, rule read in {self.read}): "
                f"keeps {kept}; {stop}; a hit is full attention's chain walked back to the last cached state "
                "(HybridKVCacheCoordinator.find_longest_cache_hit)")


# (first release, every chunk end, junction stop, releases read): the rule of the newest row ≤ the version
_RULES = (
    ((0, 19, 0), True, "none", "0.19, 0.22, 0.23"),
    ((0, 24, 0), True, "first_chunk", "0.24, 0.25"),
    ((0, 26, 0), True, "every_chunk", "0.26, 0.27, 0.28"),
    ((0, 29, 0), False, "every_chunk", "0.29, 0.33"),
)


def mamba_prefix_rule(engine_version: str, retention_interval: int | None = None) -> MambaPrefixRule | None:
    """The align-mode Mamba prefix-cache rule of ``engine_version`` (a vLLM version), None before 0.19;
    ``retention_interval``: ``--prefix-cache-retention-interval`` (0.29 on; before, the environment variable set,
    0 included), tokens; None: the release's default."""
    ver = parse_version(engine_version)
    row = None
    for r in _RULES:
        if ver >= r[0]:
            row = r
    if row is None:
        return None
    release, every, read, junction = ".".join(map(str, ver)), row[1], row[3], True
    if retention_interval is not None and ver < (0, 29, 0):  # VLLM_PREFIX_CACHE_RETENTION_INTERVAL (module doc)
        if ver < (0, 24, 0):  # 0.23: MambaManager has no mask of its own, every state kept
            return MambaPrefixRule(release, every, row[2], read)
        every, junction = False, ver >= (0, 26, 0)
        read += "; with VLLM_PREFIX_CACHE_RETENTION_INTERVAL: 0.24–0.28"
    return MambaPrefixRule(release, every, row[2], read, retention_interval or 0, junction)


#: (first release, split): the chunk split of the newest row ≤ the version (module doc); "0.32" also with none named
SPLITS = (((0, 0, 0), "0.19"), ((0, 32, 0), "0.32"))


def mamba_split(engine_version: str | None) -> str:
    """The align-mode chunk split ``engine_version`` follows (a key of ``SPLITS``, module doc); "0.32" when none is
    named."""
    if not engine_version:
        return "0.32"
    ver = parse_version(engine_version)
    return [s for since, s in SPLITS if ver >= since][-1]
