"""SGLang's prefill CUDA graphs as they enter the default mem_fraction_static: whether a release captures them by
default, the prefill sizes it captures, and the MiB its reserve sets aside for them.

Read in the wheels of 0.5.6, 0.5.8, 0.5.9, 0.5.10, 0.5.12, 0.5.14, 0.5.17, 0.5.20, 0.5.22 and 0.5.23. The reserve adds
8 MiB per captured prefill size, or a flat 1.5 GiB where the model's attention is MLA, whenever the prefill graphs are
on (0.5.23 ``arg_groups/memory_hook.py :: reserve_for_graph_mb``; ``server_args.py :: _handle_gpu_memory_settings``
from 0.5.10), before the 10 GiB floor. The sizes are 4–32 by 4, 48–256 by 16, 288–512 by 32, 576–1,024 by 64,
1,280–4,096 by 256, then by 512, up to the chunked prefill size (4,096 at most for a "llama-2" model path; for MLA
2,048 up to 0.5.22, 8,192 in 0.5.23) (``arg_groups/cuda_graph_hook.py :: generate_prefill_cuda_graph_batch_sizes``,
the piecewise token list before).

  * up to 0.5.9: opt-in (``--enable-piecewise-cuda-graph``, off by default): no term.
  * 0.5.10–0.5.13 (read in 0.5.10 and 0.5.12): piecewise graphs on by default; ``--disable-piecewise-cuda-graph``,
    DP attention, pipeline parallelism or a multimodal model turn them off; ``--disable-cuda-graph`` does not.
  * 0.5.14–0.5.16 (read in 0.5.14): ``cuda_graph_config`` with the tc_piecewise prefill backend by default;
    ``--disable-cuda-graph`` now turns both phases off, ``--disable-prefill-cuda-graph`` the prefill phase; DP
    attention still turns them off.
  * 0.5.17 on (``model_executor/cuda_graph_config.py :: default_prefill_backend``: breakable on CUDA): DP attention no
    longer turns them off; MLA does in 0.5.17 (read there) but not from 0.5.20 (read in 0.5.20–0.5.23).

Pipeline parallelism, an AMD GPU, a multimodal model and the architectures each release lists turn them off too
(``sglang_prefill_off.py``). Settings the plan has no flag for, by release (``_UNFLAGGED``; the functions above):
speculative decoding turns them off in 0.5.10 only (``_handle_piecewise_cuda_graph`` rule 2; gone in 0.5.12), LoRA up
to 0.5.16 (the piecewise and tc_piecewise rules; 0.5.17's breakable backend supports LoRA), two-batch overlap from
0.5.17 (the breakable rules); the plan assumes each off and says so. HiCache (``--enable-hierarchical-cache``, which
the plan reads from its tier flag) turns them off in 0.5.10–0.5.16 ("CPU offload / hierarchical cache") and not from
0.5.17.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_rules import sglang_version_text

__all__ = ["PrefillGraphs", "SGLANG_PREFILL_GRAPHS_FROM", "prefill_capture_sizes", "sglang_prefill_graphs",
           "sglang_prefill_note"]

SGLANG_PREFILL_GRAPHS_FROM = (0, 5, 10)
"""First SGLang release capturing prefill graphs by default (``server_args.py``: 0.5.9 has
``enable_piecewise_cuda_graph = False``, 0.5.10 ``disable_piecewise_cuda_graph = False``)."""
_CONFIG_FROM = (0, 5, 14)
"""First read release with ``cuda_graph_config``, where ``--disable-cuda-graph`` also turns prefill graphs off."""
_BREAKABLE_FROM = (0, 5, 17)
"""First read release whose default prefill backend is breakable on CUDA, which DP attention leaves on."""
_MLA_OFF = ((0, 5, 17), (0, 5, 20))
"""Releases [from, to) whose breakable backend turns prefill graphs off for MLA (read in 0.5.17; not in 0.5.20)."""
_HICACHE_OFF = ((0, 5, 10), (0, 5, 17))
"""Releases [from, to) whose default prefill graphs HiCache turns off (``enable_hierarchical_cache`` in the rules)."""
_UNFLAGGED = (("speculative decoding (--speculative-algorithm)", (0, 5, 10), (0, 5, 12)),
              ("LoRA (--enable-lora, --lora-paths)", (0, 5, 10), (0, 5, 17)),
              ("two-batch overlap (--enable-two-batch-overlap)", (0, 5, 17), (99,)))
"""Settings without a kvledger flag that turn the default prefill graphs off, with the releases [from, to) that do."""
MLA_PREFILL_GRAPH_MIB = 1536
"""The reserve's flat term for MLA models' prefill graphs, MiB (``reserve_for_graph_mb``: 1.5 × 1,024)."""
MIB_PER_PREFILL_SIZE = 8
"""The reserve's term per captured prefill size, MiB (``reserve_for_graph_mb``)."""


@dataclass(frozen=True)
class PrefillGraphs:
    """Whether the prefill graphs are on, how many sizes they capture, the reserve's MiB for them, and why."""

    enabled: bool
    sizes: tuple[int, ...]
    reserve_mib: float
    why: str


def prefill_capture_sizes(max_tokens: int) -> tuple[int, ...]:
    """The prefill token counts SGLang captures up to ``max_tokens`` (``generate_prefill_cuda_graph_batch_sizes``)."""
    steps = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256), (4608, max_tokens, 512))
    return tuple(n for lo, hi, by in steps for n in range(lo, hi + 1, by) if n <= max_tokens)


def _off_reason(ver: tuple[int, ...], s: PlanSettings, mla: bool, model_off: str | None) -> str | None:
    """Why ``ver`` leaves the prefill graphs off under ``s``, or None when it captures them; ``model_off``: the reason
    of ``sglang_prefill_off.py`` (PP, AMD GPU, multimodal, architecture lists), taken after the flags."""
    v = sglang_version_text(ver)
    if ver < SGLANG_PREFILL_GRAPHS_FROM:
        return f"opt-in in SGLang {v} (--enable-piecewise-cuda-graph, not planned); none in the reserve"
    if s.disable_prefill_cuda_graph:
        return "off (--disable-prefill-cuda-graph" + (", SGLang's --disable-piecewise-cuda-graph before 0.5.14)"
                                                      if ver < _CONFIG_FROM else ")")
    if s.no_cuda_graph and ver >= _CONFIG_FROM:
        return f"off (--disable-cuda-graph turns both phases off in SGLang {v}, arg_groups/cuda_graph_hook.py)"
    if s.enable_hierarchical_cache and _HICACHE_OFF[0] <= ver < _HICACHE_OFF[1]:
        return (f"off (HiCache, --enable-hierarchical-cache, turns SGLang {v}'s prefill graphs off: server_args.py "
                + ("_handle_piecewise_cuda_graph)" if ver < _CONFIG_FROM else
                   "_disable_tc_piecewise_cudagraph_if_incompatible, 'CPU offload / hierarchical cache')"))
    if model_off:
        return model_off
    if s.enable_dp_attention and ver < _BREAKABLE_FROM:
        return f"off (DP attention turns SGLang {v}'s piecewise prefill graphs off, server_args.py)"
    if mla and _MLA_OFF[0] <= ver < _MLA_OFF[1]:
        return f"off (SGLang {v}'s breakable prefill graphs are turned off for MLA attention, server_args.py)"
    return None


def sglang_prefill_graphs(ver: tuple[int, ...], s: PlanSettings, chunked_prefill_size: int, mla: bool,
                          model_path: str, model_off: str | None = None) -> PrefillGraphs:
    """SGLang ``ver``'s prefill graphs under ``s`` with the resolved prefill chunk: off (module docstring; ``model_off``
    from ``sglang_prefill_off.prefill_off_for_model``), or on with their sizes and reserve (8 MiB a size, 1.5 GiB for
    MLA)."""
    why = _off_reason(ver, s, mla, model_off)
    if why is not None:
        return PrefillGraphs(False, (), 0.0, why)
    top = chunked_prefill_size if not mla else min(chunked_prefill_size, 8192 if ver >= (0, 5, 23) else 2048)
    top = min(top, 4096) if "llama-2" in model_path.lower() else top
    sizes = prefill_capture_sizes(top)
    if mla:
        return PrefillGraphs(True, sizes, float(MLA_PREFILL_GRAPH_MIB), "MLA attention: a flat 1.5 × 1,024 MiB")
    return PrefillGraphs(True, sizes, float(MIB_PER_PREFILL_SIZE * len(sizes)),
                         f"{len(sizes)} prefill sizes up to {top:,} tokens × 8 MiB")


def _backend_words(ver: tuple[int, ...]) -> tuple[str, str]:
    """(the default prefill graph backend of ``ver``, the SGLang flag that turns it off)."""
    if ver >= _BREAKABLE_FROM:
        return "breakable", "--disable-prefill-cuda-graph"
    if ver >= _CONFIG_FROM:
        return "tc_piecewise", "--disable-prefill-cuda-graph"
    return "piecewise", "--disable-piecewise-cuda-graph"


def sglang_prefill_note(ver: tuple[int, ...], p: PrefillGraphs) -> str:
    """The ledger's line on the prefill CUDA graphs: on or off, and their term in the default fraction's reserve."""
    if not p.enabled:
        return f"prefill CUDA graphs {p.why}"
    v = sglang_version_text(ver)
    src = ("arg_groups/memory_hook.py reserve_for_graph_mb" if ver >= (0, 5, 20) else "server_args.py "
           + ("reserve_for_graph_mb" if ver >= _BREAKABLE_FROM else "_handle_gpu_memory_settings"))
    shown = ", ".join(map(str, p.sizes[:4])) + ", …, " + ", ".join(map(str, p.sizes[-2:])) if len(p.sizes) > 6 else (
        ", ".join(map(str, p.sizes)))
    backend, off = _backend_words(ver)
    return (f"prefill CUDA graphs on by default in SGLang {v} ({backend}; off with {off}): {len(p.sizes)} sizes "
            f"captured ({shown} tokens); the default mem_fraction_static reserves {p.reserve_mib:,.0f} MiB for them "
            f"({p.why}; {src}, SGLang {v}){_assumed(ver)}")


def _assumed(ver: tuple[int, ...]) -> str:
    """The settings without a kvledger flag that would turn ``ver``'s prefill graphs off, assumed off, in words."""
    off = [what for what, lo, hi in _UNFLAGGED if lo <= ver[:3] < hi]
    if not off:
        return ""
    return (f"; assumed: no {' and no '.join(off)}, which turn{'s' if len(off) == 1 else ''} them off in SGLang "
            f"{sglang_version_text(ver)} and which kvledger has no flag for")
