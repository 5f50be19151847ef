"""SGLang's prefill chunk and decode CUDA-graph cap as a plan resolves them from the flags given, and the default
mem_fraction_static that follows from them.

Read in SGLang 0.5.23 (``arg_groups/memory_hook.py :: handle_gpu_memory_settings`` and ``reserve_for_graph_mb``): the
memory tier sets ``chunked_prefill_size`` and the decode graphs' ``max_bs`` only where the user left them unset; a
default ``max_bs`` above a given ``--max-running-requests`` is cut to it; then, with ``mem_fraction_static`` unset,
reserved = 512 + 1.5 · max(chunked_prefill_size, 2,048) + TP·PP/8 · 1,024 + 2 · max_bs MiB (the graph term only
while decode graphs are on: ``--disable-cuda-graph`` sets the decode backend to disabled), at least 10 GiB above
60 GiB, and the fraction is round((GPU MiB − reserved) / GPU MiB, 3). So a given prefill chunk or graph cap enters the
fraction, as the defaults do. 0.5.3–0.5.22 use the same reserve (``_handle_gpu_memory_settings``, sglang_rules.py);
the cut by ``--max-running-requests`` is applied from 0.5.23, the release it was read in. Before 0.5.3 the fraction
does not depend on either (sglang_rules.py). From 0.5.10 the prefill CUDA graphs, on by default, add 8 MiB per
captured prefill size (1.5 GiB with MLA) to the reserve before the floor (sglang_prefill_graphs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvledger.accounting.dp_attention import sglang_dp_defaults
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_ep import deepep_defaults, sglang_a2a
from kvledger.accounting.sglang_prefill_graphs import PrefillGraphs, sglang_prefill_graphs
from kvledger.accounting.sglang_rules import SGLANG_LATEST, SglangDefaults, sglang_version_defaults, sglang_version_text
from kvledger.accounting.sglang_steps import decode_capture_sizes

__all__ = ["SglangGraphs", "sglang_resolved_defaults", "sglang_graph_note", "sglang_scheduler_line",
           "SGLANG_RESERVE_FROM", "SGLANG_MAX_PREFILL_TOKENS"]

SGLANG_RESERVE_FROM = (0, 5, 3)
"""The first SGLang release whose default fraction is a reserve built from chunked_prefill_size and max_bs."""
SGLANG_MAX_PREFILL_TOKENS = 16384
"""``--max-prefill-tokens`` default, tokens (SGLang 0.5.23 ``arg_groups/fields/schedule.py``)."""


@dataclass(frozen=True)
class SglangGraphs:
    """The decode CUDA graphs a plan resolves: the cap, whether graphs are on, and where the cap comes from; and the
    prefill graphs (sglang_prefill_graphs.py)."""

    max_bs: int
    enabled: bool
    why: str
    prefill: PrefillGraphs = field(default_factory=lambda: PrefillGraphs(False, (), 0.0, "not resolved"))


def _graphs(ver: tuple[int, ...], d: SglangDefaults, s: PlanSettings, tp: int) -> SglangGraphs:
    """The decode graph cap: given (``--cuda-graph-max-bs``), else the tier's default, cut to a given
    ``--max-running-requests`` from 0.5.23."""
    vtxt = sglang_version_text(ver)
    if s.cuda_graph_max_batch_size is not None:
        return SglangGraphs(s.cuda_graph_max_batch_size, not s.no_cuda_graph, "given, --cuda-graph-max-bs")
    bs, why = d.cuda_graph_max_bs, (f"SGLang {vtxt} default for this GPU's memory tier at TP {tp} (arg_groups/"
                                    f"memory_hook.py; server_args.py before 0.5.23)")
    if ver >= SGLANG_LATEST and s.max_num_seqs is not None and bs > s.max_num_seqs:
        bs, why = s.max_num_seqs, (f"the default {d.cuda_graph_max_bs} cut to --max-running-requests {s.max_num_seqs} "
                                   f"(SGLang {vtxt} arg_groups/memory_hook.py)")
    return SglangGraphs(bs, not s.no_cuda_graph, why)


def sglang_resolved_defaults(ver: tuple[int, ...], smi_mib: float, s: PlanSettings, mla: bool = False,
                             model_path: str = "", prefill_off: str | None = None
                             ) -> tuple[SglangDefaults, SglangGraphs]:
    """SGLang ``ver``'s defaults on a GPU of ``smi_mib`` MiB with the prefill chunk (``--chunked-prefill-size``,
    kvledger's ``max_num_batched_tokens``), the decode graph cap and ``--disable-cuda-graph`` given in ``s`` put in
    their place, and the prefill graphs' term of a model (``mla``: its attention is MLA; ``model_path``: its id), the
    default fraction recomputed from them from 0.5.3 (module docstring), then DP attention's reserve
    (``dp_attention.sglang_dp_defaults``), then DeepEP's (``sglang_ep.deepep_defaults``); and the graphs."""
    d, g = _resolved(ver, smi_mib, s, mla, model_path, prefill_off)
    if sglang_a2a(s) != "deepep" or ver < SGLANG_RESERVE_FROM:
        return d, g
    bs, cps, dp = d.cuda_graph_max_bs, d.chunked_prefill_size, s.data_parallel_size or 1
    dp_mib = bs * dp * (3 + 1.5 * (bs > 300)) if s.enable_dp_attention and dp > 1 else 0.0
    base = (512 + 1.5 * max(cps, 2048) + (2 * bs if g.enabled else 0) + g.prefill.reserve_mib + s.tp * s.pp / 8 * 1024
            + dp_mib)  # memory_hook.py handle_gpu_memory_settings, before the floor
    return deepep_defaults(d, smi_mib, s, g.enabled, g.prefill.enabled, base), g


def _resolved(ver: tuple[int, ...], smi_mib: float, s: PlanSettings, mla: bool, model_path: str,
              prefill_off: str | None) -> tuple[SglangDefaults, SglangGraphs]:
    """``sglang_resolved_defaults`` but for DeepEP's reserve."""
    d = sglang_version_defaults(ver, smi_mib, s.tp, s.pp)
    g = _graphs(ver, d, s, s.tp)
    cps = s.max_num_batched_tokens or d.chunked_prefill_size
    p = sglang_prefill_graphs(ver, s, cps, mla, model_path, prefill_off)  # prefill_off: sglang_prefill_off.py
    g = replace(g, prefill=p)
    if (cps, g.max_bs, g.enabled, p.reserve_mib) == (d.chunked_prefill_size, d.cuda_graph_max_bs, True, 0.0):
        return sglang_dp_defaults(d, smi_mib, s), g
    d = replace(d, chunked_prefill_size=cps, cuda_graph_max_bs=g.max_bs)
    if ver < SGLANG_RESERVE_FROM:
        return sglang_dp_defaults(d, smi_mib, s), g
    graph_mib = 2 * g.max_bs if g.enabled else 0
    n = s.tp * s.pp
    reserved = 512 + 1.5 * max(cps, 2048) + graph_mib + p.reserve_mib + n / 8 * 1024
    floor = smi_mib > 60 * 1024
    if floor:
        reserved = max(reserved, 10 * 1024)
    frac = round((smi_mib - reserved) / smi_mib, 3)
    graph = f"2 × {g.max_bs}" if g.enabled else "0 (decode CUDA graphs off)"
    pre = f" + {p.reserve_mib:,.0f} (prefill graphs: {p.why})" if p.enabled else ""
    return sglang_dp_defaults(replace(d, mem_fraction_static=frac, source=(
        f"SGLang {sglang_version_text(ver)} rule (arg_groups/memory_hook.py handle_gpu_memory_settings; "
        f"server_args.py before 0.5.23) with the settings given: round(({smi_mib:,.0f} − {reserved:,.0f} MiB reserved: "
        f"512 + 1.5 × {max(cps, 2048):,} + {graph}{pre} + {n}/8 × 1,024{', at least 10 GiB' if floor else ''}) / "
        f"{smi_mib:,.0f}, 3)")), smi_mib, s, p.reserve_mib), g


def sglang_graph_note(ver: tuple[int, ...], g: SglangGraphs, pool_requests: int | None) -> str:
    """The ledger's line on the decode CUDA graphs: the cap, where it comes from, and the sizes captured (0.5.23's
    list, ``arg_groups/cuda_graph_hook.py :: generate_decode_cuda_graph_batch_sizes``, cut to the request pool)."""
    if not g.enabled:
        return (f"decode CUDA graphs off (--disable-cuda-graph): every decode step runs eager; max_bs {g.max_bs} "
                "leaves the reserve (its 2 × max_bs MiB term)")
    head = f"cuda_graph_max_bs {g.max_bs} ({g.why})"
    if ver < SGLANG_LATEST:
        return head + f"; the capture list of SGLang {sglang_version_text(ver)} is not shown (0.5.23's was read)"
    sizes = decode_capture_sizes(g.max_bs, pool_requests=pool_requests)
    shown = ", ".join(map(str, sizes)) if len(sizes) <= 12 else (
        f"{', '.join(map(str, sizes[:6]))}, …, {', '.join(map(str, sizes[-3:]))}")
    return (head + f"; captures {len(sizes)} decode batch sizes: {shown} (arg_groups/cuda_graph_hook.py, "
            "1, 2, 4, 8, 12, 16–256 by 8, 272–496 by 16, 512+ by 32, at most the request pool)")


def sglang_scheduler_line(tokens: int, chunked_prefill_size: int, max_running: int, context_len: int) -> str:
    """The scheduler's start-up line as SGLang prints it (``managers/scheduler.py``, tp_rank 0), up to the free memory
    it measures after the CUDA graphs are captured, which the plan does not know (left as "…")."""
    return (f"max_total_num_tokens={tokens}, chunked_prefill_size={chunked_prefill_size}, "
            f"max_prefill_tokens={SGLANG_MAX_PREFILL_TOKENS}, max_running_requests={max_running}, "
            f"context_len={context_len}, available_gpu_mem=… GB")
