"""From the tier and session flag groups (``cli/flag_groups.py``: TierFlags, SessionFlags) to the settings the layers
below take: one reading of ``--kv-offloading-size`` & co. for every command that takes them."""

from __future__ import annotations

from typing import Any

from kvledger.cli.flag_groups import SessionFlags, TierFlags, WorkloadFlags, given_flags

__all__ = ["tier_settings", "tiers_given", "check_session_flags"]


def tiers_given(t: TierFlags) -> bool:
    """Whether any tier flag was given (``--enable-hierarchical-cache`` counts only when on)."""
    return any(v is not None and v is not False for v in (t.kv_offloading_size, t.kv_offloading_backend,
                                                          t.enable_hierarchical_cache, t.hicache_ratio,
                                                          t.hicache_size, t.hicache_write_policy))


def tier_settings(t: TierFlags, **extra: Any) -> Any:
    """The ``accounting.kv_tier_rules.TierSettings`` of the flags (``extra``: other fields, e.g. the plan's disk
    tiers); the engines' defaults where a flag is not given (HiCache ratio 2.0 is the rule's, policy write_through).

    Raises:
        InputError: an unreadable ``--kv-offloading-size``.
    """
    from kvledger.accounting.kv_tier_rules import TierSettings
    from kvledger.cli.analysis_opts import gib_option

    backend = t.kv_offloading_backend
    return TierSettings(kv_offloading_size_gib=gib_option(t.kv_offloading_size, "--kv-offloading-size"),
                        kv_offloading_backend=backend.lower() if backend else None,
                        enable_hierarchical_cache=bool(t.enable_hierarchical_cache), hicache_ratio=t.hicache_ratio,
                        hicache_size_gb=t.hicache_size or 0,
                        hicache_write_policy=t.hicache_write_policy or "write_through", **extra)


def check_session_flags(s: SessionFlags, workload: WorkloadFlags) -> bool:
    """Whether the run is a session workload; refuses session flags without ``--workload`` and workload flags a
    session workload would ignore (its own arrivals and lengths; ``--seed`` draws it).

    Raises:
        InputError: one paragraph naming the flags.
    """
    from kvledger.errors import InputError

    if s.session_workload is None:
        if s.sessions is not None or s.session_rate is not None:
            raise InputError("--sessions and --session-rate describe a session workload; add --workload chat (or "
                             "agent), or drop them")
        return False
    ignored = [f for f in given_flags(workload) if f != "--seed"]
    if ignored:
        raise InputError(f"--workload {s.session_workload} draws multi-turn sessions with their own lengths and "
                         f"arrivals (--sessions, --session-rate, --seed), so {', '.join(ignored)} would be ignored: "
                         "drop them, or drop --workload to replay a trace")
    return True
