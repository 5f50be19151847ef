"""The typed report of one ``simulate`` run with a host KV tier (``SimTierReport``: the ``kv_tiers`` block of
``simulate --json``, ``SimDocument.kv_tiers``): the simulated host tier, one row per tier (HBM, host DRAM, disk,
remote) and the TTFT with and without the tier. ``sim_tiers.run_with_tier`` builds it from the simulator's
``TierStats``; every field is a JSON key of the same name, in the same order."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.jsonable import to_jsonable

if TYPE_CHECKING:  # the types only: ``kvledger.api`` exports these records without importing the simulator
    from kvledger.accounting.kv_tiers import TierPlan
    from kvledger.dynamics.engine.offload import HostTier
    from kvledger.dynamics.offload_sim import DiskStats, TierStats
    from kvledger.dynamics.outputs.metrics import LatencyStats
    from kvledger.dynamics.resume_stats import ResumeStats

__all__ = ["SimTierReport", "SimHostTier", "TierRow", "HbmTierRow", "HostTierRow", "StorageTierRow", "tier_rows"]


@dataclass(frozen=True)
class SimHostTier:
    """The simulated host tier (``dynamics.engine.offload.HostTier``'s settings) and its unit: capacity_units per
    replica (count of unit_name: block, chunk or segment, of unit_tokens tokens each), bytes_per_token (B),
    read_bytes_per_s / write_bytes_per_s (B/s), the disk and remote tiers below it (units, B/s; 0: none),
    load_in_step (LMCache's loads in the step that schedules the request: vLLM before 0.33.0), prompt_only (vLLM's
    native connector from 0.23.0 offloads prompt blocks only: a resumed request reloads no generated block),
    replicas."""

    capacity_units: int
    bytes_per_token: float
    read_bytes_per_s: float
    write_bytes_per_s: float
    write_policy: str
    eviction: str
    chunk_tokens: int
    store_threshold: int
    disk_capacity_units: int
    disk_read_bytes_per_s: float
    remote_capacity_units: int
    remote_read_bytes_per_s: float
    load_in_step: bool
    prompt_only: bool
    unit_tokens: int
    unit_name: str
    replicas: int

    @classmethod
    def of(cls, host: HostTier, unit_tokens: int, unit_name: str, replicas: int) -> SimHostTier:
        return cls(**asdict(host), unit_tokens=unit_tokens, unit_name=unit_name, replicas=replicas)


@dataclass(frozen=True)
class TierRow:
    """One tier's prefix hits and loads over the run (all replicas): hit_rate (share of the prompt tokens at first
    admission), hit_tokens (served from this tier), loaded_tokens / loaded_bytes (B) / load_s (Σ, s): every load,
    served or not (loaded_tokens = hit_tokens + unserved_tokens)."""

    tier: str
    hit_rate: float
    hit_tokens: int
    loaded_tokens: int
    loaded_bytes: float
    load_s: float


@dataclass(frozen=True)
class HbmTierRow(TierRow):
    """HBM's row: it loads nothing (zeros), load_bandwidth_bytes_per_s 0."""

    load_bandwidth_bytes_per_s: float = 0.0


@dataclass(frozen=True)
class HostTierRow(TierRow):
    """The host DRAM tier's row: load_bandwidth_bytes_per_s (bytes loaded from every tier ÷ run duration, B/s), its
    unit, capacity_units / peak_units (per replica; peak: the most held at an admission), stored_units /
    evicted_units (offered to / dropped from it); the rules' counters when on: stores_skipped (vLLM's
    store_threshold, count), write_back_tokens / write_back_s (HiCache write_back), unserved_tokens (loaded, evicted
    before admission and recomputed)."""

    __json_optional__ = ("stores_skipped", "write_back_tokens", "write_back_s", "unserved_tokens")

    load_bandwidth_bytes_per_s: float = 0.0
    unit_tokens: int = 0
    unit_name: str = ""
    capacity_units: int = 0
    peak_units: int = 0
    stored_units: int = 0
    evicted_units: int = 0
    stores_skipped: int | None = None
    write_back_tokens: int | None = None
    write_back_s: float | None = None
    unserved_tokens: int | None = None


@dataclass(frozen=True)
class StorageTierRow(TierRow):
    """A disk (``nvme``) or remote store's row: its read bandwidth (a setting, B/s), unit, capacity, stored and
    evicted units; no occupancy record; unserved_tokens only when > 0."""

    __json_optional__ = ("unserved_tokens",)

    read_bytes_per_s: float = 0.0
    unit_tokens: int = 0
    unit_name: str = ""
    capacity_units: int = 0
    stored_units: int = 0
    evicted_units: int = 0
    unserved_tokens: int | None = None


def tier_rows(s: TierStats, unit_tokens: int, unit_name: str) -> tuple[TierRow, ...]:
    """The rows of ``s`` (the simulator's tier figures): HBM, host DRAM, then the disk and remote tiers where run."""
    unit = {"unit_tokens": unit_tokens, "unit_name": unit_name}
    host_unserved = s.host_unserved_tokens or 0
    # the resumes' reloads (resume_stats.py) are loads too, not hits at first arrival
    resumed = s.resume.host_reloaded_tokens + s.resume.host_unserved_tokens if s.resume is not None else 0
    rows: list[TierRow] = [
        HbmTierRow("hbm", s.hbm_hit_rate, s.hbm_hit_tokens, 0, 0.0, 0.0),
        HostTierRow("host_dram", s.host_hit_rate, s.host_hit_tokens, s.host_hit_tokens + host_unserved + resumed,
                    s.loaded_bytes, s.host_load_s, s.load_bandwidth_bytes_per_s, **unit,
                    capacity_units=s.host_capacity_units, peak_units=s.peak_host_units, stored_units=s.stored_units,
                    evicted_units=s.evicted_units, stores_skipped=s.stores_skipped,
                    write_back_tokens=s.write_back_tokens, write_back_s=s.write_back_s,
                    unserved_tokens=s.host_unserved_tokens)]
    return tuple(rows) + tuple(_storage_row(name, d, unit) for name, d in (("nvme", s.disk), ("remote", s.remote))
                               if d is not None)


def _storage_row(name: str, d: DiskStats, unit: dict[str, Any]) -> StorageTierRow:
    return StorageTierRow(name, d.hit_rate, d.hit_tokens, d.hit_tokens + (d.unserved_tokens or 0), d.loaded_bytes,
                          d.load_s, d.read_bytes_per_s, **unit, capacity_units=d.capacity_units,
                          stored_units=d.stored_units, evicted_units=d.evicted_units,
                          unserved_tokens=d.unserved_tokens or None)


@dataclass(frozen=True)
class SimTierReport:
    """The host tier of one ``simulate`` run and what it did; ``to_dict`` is the ``kv_tiers`` block of ``--json``.

    Attributes:
        engine / engine_version: whose rules sized and ran the tier. rule: the simulated rule, in words.
        plan: the tiers per GPU and their break-even prefix lengths (``plan --json``'s ``kv_tiers``).
        host_tier: the simulated host tier (``SimHostTier``).
        per_tier: one row per tier (``HbmTierRow``, ``HostTierRow``, then a ``StorageTierRow`` for a disk tier,
            ``--kv-tier-nvme``, and a remote one, ``--kv-tier-remote``). prompt_tokens: at first admission, tokens.
        ttft_s_with_tier / ttft_s_without_tier: the run's TTFT statistics, s, and the same run without the tier.
        hbm_hit_rate_without_tier: HBM's hit rate without the tier. occupancy_units: (arrival s, host units held).
        judgment: whether the tier adds hits, and why not (``analyses.judgments.offload_verdict.tier_judgment``: the
            workload's reusable prefix tokens, the run's overload).
        The three figures of the run without the tier are None where it was not run (a capacity search's probe,
        ``sim_tiers.run_with_tier``'s ``compare`` False; ``source`` says so): such a report is never shown whole.
        rules: the host tier's opt-in rules in the run, with their sources (``sim_rules``; None: none on).
        resume: what preempted requests got back per tier when they resumed (``TierStats.resume``; None: no
            preemption, or SGLang's tier).
    """

    __json_optional__ = ("rules", "resume")

    engine: str
    engine_version: str
    rule: str
    plan: TierPlan
    host_tier: SimHostTier
    per_tier: tuple[TierRow, ...]
    prompt_tokens: int
    ttft_s_with_tier: LatencyStats
    ttft_s_without_tier: LatencyStats | None
    hbm_hit_rate_without_tier: float | None
    judgment: dict[str, Any] | None
    occupancy_units: tuple[tuple[float, int], ...] = field(default_factory=tuple)
    rules: dict[str, Any] | None = None
    resume: ResumeStats | None = None
    source: str = "kvledger.dynamics.offload_sim.simulate_offload (the run with the tier and the same run without it)"

    def tier(self, name: str) -> TierRow | None:
        """The row of tier ``name`` (hbm, host_dram, nvme, remote); None where the run had no such tier."""
        return next((r for r in self.per_tier if r.tier == name), None)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
