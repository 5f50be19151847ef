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
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.vllm_rules import parse_version

__all__ = ["MambaPrefixRule", "mamba_prefix_rule", "JUNCTION_STOPS"]

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
    """

    release: str
    every_chunk_end: bool
    junction_stop: str
    read: str

    @property
    def text(self) -> str:
        """The rule in words, with the release and where it was read."""
        kept = ("the state of every block-aligned chunk end" if self.every_chunk_end else
                "only the states at the prompt's last block boundary and the shared prefix's junction "
                "(prefix_cache_retention_interval 0)")
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


def mamba_prefix_rule(engine_version: str) -> MambaPrefixRule | None:
    """The align-mode Mamba prefix-cache rule of ``engine_version`` (a vLLM version), None before 0.19."""
    ver = parse_version(engine_version)
    row = None
    for r in _RULES:
        if ver >= r[0]:
            row = r
    if row is None:
        return None
    return MambaPrefixRule(".".join(map(str, ver)), row[1], row[2], row[3])
