"""From the tier and session flag groups (``cli/flag_groups.py``: TierFlags; ``cli/session_flags.py``: SessionFlags)
to the settings the layers below take: one reading of ``--kv-offloading-size`` & co. for every command taking them."""

from __future__ import annotations

import dataclasses
from typing import Any

from kvledger.cli.flag_groups import TierFlags, WorkloadFlags, given_flags
from kvledger.cli.session_flags import SessionFlags

__all__ = ["tier_settings", "tiers_given", "check_session_flags", "check_tier_sizes", "with_hicache"]


def tiers_given(t: TierFlags) -> bool:
    """Whether any tier flag was given (``--enable-hierarchical-cache`` counts only when on)."""
    return any(v is not None and v is not False for v in dataclasses.astuple(t))


def tier_settings(t: TierFlags, *, engine_flag: str = "--engine", **extra: Any) -> Any:
    """The ``accounting.kv_tier_rules.TierSettings`` of the flags (``engine_flag``: the flag that chose the engine in
    this command, named in errors; ``extra``: other fields, e.g. the plan's remote tier); unset flags stay unset
    (the engines' defaults apply: HiCache ratio 2.0, write_through, lru, no store gate, prefetch timeout).

    Raises:
        InputError: an unreadable size, or a disk-tier flag without ``--kv-tier-nvme`` (it would be ignored).
    """
    from kvledger.accounting.kv_tier_rules import NETWORK_BYTES_PER_S, NVME_READ_BYTES_PER_S, TierSettings
    from kvledger.errors import InputError

    if t.kv_tier_nvme is None:
        alone = [f for f, v in (("--nvme-read-bandwidth", t.nvme_read_bandwidth),
                                ("--hicache-storage-prefetch-policy",
                                 t.hicache_storage_prefetch_policy if t.kv_tier_remote is None else None))
                 if v is not None]
        if alone:
            raise InputError(f"{' and '.join(alone)} describe{'s' if len(alone) == 1 else ''} the disk tier, which "
                             "exists only with --kv-tier-nvme SIZE (GiB per GPU); without it "
                             f"{'it' if len(alone) == 1 else 'they'} would be ignored. Add --kv-tier-nvme, or drop "
                             f"{'it' if len(alone) == 1 else 'them'}.")
    if t.kv_tier_remote is None and t.network_bandwidth is not None:
        raise InputError("--network-bandwidth describes the remote tier, which exists only with --kv-tier-remote SIZE "
                         "(GiB per GPU); without it it would be ignored. Add --kv-tier-remote, or drop it.")
    backend, policy, evict = t.kv_offloading_backend, t.hicache_storage_prefetch_policy, t.eviction_policy
    bw = t.nvme_read_bandwidth
    return TierSettings(kv_offloading_size_gib=_tier_gib(t.kv_offloading_size, "--kv-offloading-size"),
                        kv_offloading_backend=backend.lower() if backend else None,
                        enable_hierarchical_cache=bool(t.enable_hierarchical_cache), hicache_ratio=t.hicache_ratio,
                        hicache_size_gb=t.hicache_size or 0, hicache_write_policy=t.hicache_write_policy,
                        nvme_gib=_tier_gib(t.kv_tier_nvme, "--kv-tier-nvme"),
                        nvme_read_bytes_per_s=NVME_READ_BYTES_PER_S if bw is None else bw * 1e9,
                        remote_gib=_tier_gib(t.kv_tier_remote, "--kv-tier-remote"),
                        network_bytes_per_s=NETWORK_BYTES_PER_S if t.network_bandwidth is None else
                        t.network_bandwidth * 1e9,
                        store_threshold=t.store_threshold, eviction_policy=evict.lower() if evict else None,
                        offload_prompt_only=t.offload_prompt_only,
                        hicache_storage_prefetch_policy=policy.lower() if policy else None, engine_flag=engine_flag,
                        **extra)


def _tier_gib(text: str | None, flag: str) -> float | None:
    """A tier size flag in GiB (``analysis_opts.gib_option``) within ``ranges.TIER_SIZE_GIB``: a bare number at or
    below 0 is refused in the range's words before it is read, as a size with its unit at 0 (``0GiB``) after."""
    import math

    from kvledger.cli.analysis_opts import gib_option
    from kvledger.ranges import TIER_SIZE_GIB

    if text is None:
        return None
    try:
        bare = float(text)
    except ValueError:
        bare = None
    if bare is not None and (math.isnan(bare) or bare <= 0):
        TIER_SIZE_GIB.check(flag, bare, text)
    gib = gib_option(text, flag)
    TIER_SIZE_GIB.check(flag, gib, text)
    return gib


def with_hicache(args: Any, tier: Any) -> Any:
    """``args`` with SGLang HiCache on where the tier flags turn it on (``--enable-hierarchical-cache``): it also sets
    SGLang's prefill-graph rule, so the memory plan's pool (``accounting.sglang_prefill_graphs``), as simulate and
    goodput --simulate both plan it."""
    on = tier is not None and tier.enable_hierarchical_cache
    return dataclasses.replace(args, enable_hierarchical_cache=True) if on else args


def check_tier_sizes(t: Any, gpu: str | Any, tp: int, pp: int = 1) -> None:
    """Refuse tier sizes (``TierSettings`` ``t``; None: none) no node of ``gpu`` (a name, GPU file or GpuSpec) holds,
    before any planning (``accounting.tier_bounds``).

    Raises:
        InputError: a host or disk tier beyond one node's.
    """
    from kvledger.accounting.tier_bounds import check_tier_bounds

    if t is None:
        return
    if isinstance(gpu, str):
        from kvledger.catalog.gpu_file import resolve_gpu

        gpu = resolve_gpu(gpu)
    check_tier_bounds(t, gpu, tp, pp)


def check_session_flags(s: SessionFlags, workload: WorkloadFlags) -> bool:
    """Whether the run is a session workload; refuses session flags without ``--workload`` and workload flags a
    session workload would ignore (its own arrivals and lengths; ``--seed`` draws it).

    Raises:
        InputError: one paragraph naming the flags.
    """
    from kvledger.errors import InputError

    if s.session_workload is None:
        given = [f for f, v in (("--sessions", s.sessions), ("--session-rate", s.session_rate)) if v is not None]
        if given:
            raise InputError("--sessions and --session-rate describe a session workload; add --workload chat (or "
                             f"agent), or drop {_listed(given)}")
        return False
    from kvledger.dynamics.workload.sessions import SESSION_SHAPES

    if s.session_workload.strip().lower() not in SESSION_SHAPES:  # the name first: a typo is the error to fix
        raise InputError(f"--workload must be one of {', '.join(SESSION_SHAPES)}, got {s.session_workload!r}")
    if workload.shared_prefix_tokens is not None:
        from kvledger.dynamics.workload.shared_prefix import shared_prefix_refusal

        raise InputError(shared_prefix_refusal(f"--workload {s.session_workload} (each session's system prompt and "
                                               "earlier turns)"))
    ignored = [f for f in given_flags(workload) if f != "--seed"]
    if ignored:
        raise InputError(f"--workload {s.session_workload} draws multi-turn sessions with their own lengths and "
                         f"arrivals (--sessions, --session-rate, --seed), so {_listed(ignored)} would be ignored: "
                         f"drop {_listed(ignored)}, or drop --workload to replay a trace")
    return True


def _listed(flags: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"
