"""Simulate with a host KV tier (engine/offload.py) and report per tier: hit rate, tokens loaded, load time, transfer
bandwidth used and host occupancy, next to the same run without the tier (TTFT with and without offload)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.hicache_storage import hicache_manager_class
from kvledger.dynamics.engine.offload import HostTier, OffloadingPagedKVManager
from kvledger.dynamics.engine.offload_tiers import TieredPagedKVManager, needs_tiered_manager
from kvledger.dynamics.outputs.metrics import LatencyStats
from kvledger.dynamics.resume_stats import ResumeStats, resume_stats
from kvledger.dynamics.simulator import SimResult, simulate
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable

__all__ = ["LoadAwareStepCost", "InStepLoadStepCost", "WriteBackStepCost", "OffloadRun", "TierStats", "DiskStats",
           "simulate_offload", "offload_kv_factory"]


class LoadAwareStepCost:
    """A step-cost model whose steps last at least their admissions' HiCache load_back time (SGLang loads layer by
    layer beside the forward pass: the step takes max(compute, load)); everything else is the wrapped model's."""

    def __init__(self, base, managers: list) -> None:
        self.base, self.managers = base, managers
        self.name = getattr(base, "name", type(base).__name__)
        if hasattr(base, "step_time_of"):
            self.step_time_of = self._step_time_of

    def _pending(self) -> float:
        return sum(m.take_pending_load_s() for m in self.managers)

    @staticmethod
    def with_load(t: float, load: float) -> float:
        """The step's time given its compute ``t`` and its admissions' load ``load``, s: overlapped, the larger."""
        return load if load > t else t

    def step_time_s(self, shape: StepShape) -> float:
        return self.with_load(self.base.step_time_s(shape), self._pending())

    def _step_time_of(self, *fields) -> float:
        return self.with_load(self.base.step_time_of(*fields), self._pending())

    def __getattr__(self, name: str):
        return getattr(self.base, name)


class InStepLoadStepCost(LoadAwareStepCost):
    """A step-cost model whose steps also carry their admissions' LMCache loads through ``LMCacheConnectorV1``
    (engine/offload.py ``load_in_step``): a blocking retrieve before the forward pass (``use_layerwise`` off by
    default), so the step takes compute + load."""

    @staticmethod
    def with_load(t: float, load: float) -> float:
        return t + load


class WriteBackStepCost(LoadAwareStepCost):
    """LoadAwareStepCost plus the step's HiCache write-back copies, which the scheduler waits for before the forward
    pass (hicache_write_back.py): max(compute, load_back) + write-back."""

    def _written(self) -> float:
        return sum(m.take_pending_write_s() for m in self.managers)

    def step_time_s(self, shape: StepShape) -> float:
        return super().step_time_s(shape) + self._written()

    def _step_time_of(self, *fields) -> float:
        return super()._step_time_of(*fields) + self._written()


def offload_kv_factory(host: HostTier, managers: list):
    """A ``kv_manager_factory`` for ``simulate``: each replica's KV manager with its own host tier (appended to
    ``managers`` for the statistics)."""

    def make(cfg: EngineConfig, index: int):
        if cfg.prefix_caching_policy == "sglang":
            if host.store_threshold >= 2:
                raise InputError("store_threshold is an option of vLLM's native CPU offloading (0.33.0); SGLang "
                                 "HiCache has no such gate")
            m = hicache_manager_class(host)((cfg.num_gpu_blocks - 1) * cfg.block_size, cfg.block_size, host=host)
        else:
            if cfg.blocks_for_tokens is not None or cfg.kv_allocation != "paged" or cfg.batching == "vllm_v0":
                raise InputError("the host KV tier is modelled for vLLM v1's paged full-attention pool and SGLang's "
                                 "radix cache; hybrid, contiguous and V0 settings are not")
            cls = TieredPagedKVManager if needs_tiered_manager(host) else OffloadingPagedKVManager
            m = cls(cfg.num_usable_blocks + 1, cfg.block_size, True, host=host, max_model_len=cfg.max_model_len)
        managers.append(m)
        return m

    return make


@dataclass(frozen=True)
class TierStats:
    """One run's tier figures (all replicas).

    Attributes:
        prompt_tokens: prompt tokens at first admission, tokens. hbm_hit_tokens / host_hit_tokens: served from each.
        hbm_hit_rate / host_hit_rate: shares of prompt_tokens. host_load_s: Σ time of every host load, served or
        not, s. loaded_bytes: host → HBM bytes of every load, served or not (host_hit_tokens + host_unserved_tokens
        + the resumes' reloads), B. stored_units / evicted_units: units offered to / dropped from the host.
        load_bandwidth_bytes_per_s: bytes loaded (host, disk and remote; served or not) / run duration, B/s.
        host_capacity_units: blocks or segments.
        peak_host_units: the most the host held at an admission. occupancy: (s, units) at each arrival (≤ 200 kept).
        stores_skipped: offered blocks vLLM's ``store_threshold`` kept out of the host (with a gate only), count.
        write_back_tokens / write_back_s: HiCache write_back's copies on eviction and Σ their time on the steps
            (under write_back only), tokens and s.
        disk: the tier below the host (LMCache local_disk, HiCache file storage; with one only).
        remote: the remote store (LMCache remote, below the disk; HiCache mooncake storage; with one only).
        host_unserved_tokens: tokens loaded from the host whose blocks were evicted before the request's admission
            and recomputed (load_hold.py): in loaded_bytes and host_load_s, not in host_hit_tokens (only when > 0).
        resume: what preempted (SGLang: retracted) requests got back from each tier when they resumed
            (resume_stats.py; with a preemption only): its reloads are in loaded_bytes and host_load_s, not in the
            hit rates.
        evicted_wanted_units: host units evicted that a later lookup then missed (wanted after their eviction), each
            once an eviction: the evictions that cost a hit; 0 when no evicted unit was wanted again.
    """

    __json_optional__ = ("stores_skipped", "write_back_tokens", "write_back_s", "disk", "remote",
                         "host_unserved_tokens", "resume")

    prompt_tokens: int
    hbm_hit_tokens: int
    host_hit_tokens: int
    hbm_hit_rate: float
    host_hit_rate: float
    host_load_s: float
    loaded_bytes: float
    stored_units: int
    evicted_units: int
    load_bandwidth_bytes_per_s: float
    host_capacity_units: int
    peak_host_units: int
    occupancy: tuple[tuple[float, int], ...] = field(default_factory=tuple)
    stores_skipped: int | None = None
    write_back_tokens: int | None = None
    write_back_s: float | None = None
    disk: DiskStats | None = None
    remote: DiskStats | None = None
    host_unserved_tokens: int | None = None
    evicted_wanted_units: int = 0
    resume: ResumeStats | None = None

    def __post_init__(self) -> None:
        _check_rates(self, "hbm_hit_rate", "host_hit_rate")


def _check_rates(stats, *names: str) -> None:
    """A hit rate outside [0, 1] is a simulator bug (a tier's hits counted twice or lost): fail loudly."""
    for name in names:
        v = getattr(stats, name)
        if not 0.0 <= v <= 1.0:
            raise RuntimeError(f"{type(stats).__name__}.{name} = {v!r}, outside [0, 1]: the tier accounting is wrong")


@dataclass(frozen=True)
class DiskStats:
    """The disk tier's figures (offload_tiers.py, hicache_storage.py), all replicas.

    Attributes:
        capacity_units: LMCache chunks or HiCache segments per replica. hit_tokens / hit_rate: tokens the disk served
        (LMCache: loaded; HiCache: prefetched into host memory and loaded back from there at the request's admission),
        and their share of the prompt tokens.
        loaded_bytes: bytes read from disk, served or not. load_s: Σ time of every disk read (on TTFT), served or not,
        s. read_bytes_per_s: the tier's read bandwidth, B/s. stored_units / evicted_units: units written to / dropped
        from disk. unserved_tokens: tokens read whose blocks were evicted before the request's admission and
        recomputed (vLLM's paged loads, load_hold.py; HiCache: prefetched, not loaded back): in loaded_bytes and load_s,
        not in hit_tokens (only when > 0).
    """

    __json_optional__ = ("unserved_tokens",)

    capacity_units: int
    hit_tokens: int
    hit_rate: float
    loaded_bytes: float
    load_s: float
    read_bytes_per_s: float
    stored_units: int
    evicted_units: int
    unserved_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_rates(self, "hit_rate")


@dataclass(frozen=True)
class OffloadRun:
    """The run with the host tier, the same run without it, and the tier figures."""

    __json__ = ("tiers", ("ttft_s_with_offload", "with_offload.summary.ttft_s"), "ttft_s_without_offload")
    with_offload: SimResult
    without_offload: SimResult | None
    tiers: TierStats

    @property
    def ttft_s_without_offload(self) -> LatencyStats | None:
        """TTFT of the run without the host tier, s (None when it was not run)."""
        return None if self.without_offload is None else self.without_offload.summary.ttft_s

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _stats(managers: list, host: HostTier, duration_s: float) -> TierStats:
    q = sum(m.prefix_stats.queries for m in managers)
    c = sum(m.host_hit_tokens for m in managers)
    # vLLM's loaded blocks enter the GPU cache before admission and count there as hits too: not HBM's own
    h = sum(m.prefix_stats.hits - (m.host_hit_tokens if isinstance(m,
                                                                   OffloadingPagedKVManager) else 0) for m in managers)
    paged = bool(managers) and isinstance(managers[0], OffloadingPagedKVManager)
    # tokens the disk tier served: LMCache's loads (they enter the GPU cache as the host's do), HiCache's prefetched
    # tokens loaded back at admission (they came through host memory)
    d = sum(getattr(m, "disk_hit_tokens" if paged else "disk_served_tokens", 0) for m in managers)
    r = sum(getattr(m, "remote_hit_tokens", 0) for m in managers)  # LMCache's remote loads (HiCache's: in ``d``)
    if paged:
        h -= d + r
    else:
        c -= d
    occ = sorted(x for m in managers for x in m.occupancy)
    step = max(1, len(occ) // 200)
    # loads whose blocks were evicted before admission (load_hold.py): moved and timed, not served
    cu, du, ru = (sum(getattr(m, f"{k}_unserved_tokens", 0) for m in managers) for k in ("host", "disk", "remote"))
    resumed = resume_stats(managers)  # vLLM's and LMCache's resumes, SGLang HiCache's after retraction
    loaded = (c + cu + (resumed.host_reloaded_tokens + resumed.host_unserved_tokens if resumed else 0)) \
        * host.bytes_per_token
    lower = ((resumed.lower_reloaded_tokens or 0) if resumed else 0) + d + r + du + ru  # + LMCache's on resume
    return TierStats(q, h, c, h / q if q else 0.0, c / q if q else 0.0, sum(m.host_load_s for m in managers), loaded,
                     sum(m.lru.stored for m in managers), sum(m.lru.evicted for m in managers),
                     (loaded + lower * host.bytes_per_token) / duration_s if duration_s > 0 else 0.0,
                     host.capacity_units, max((u for _, u in occ), default=0), tuple(occ[::step]),
                     *_extras(managers, host, q, d, r), host_unserved_tokens=cu or None,
                     evicted_wanted_units=sum(m.lru.evicted_wanted for m in managers), resume=resumed)


def _extras(managers: list, host: HostTier, q: int, d: int, r: int) -> tuple:
    """(stores_skipped, write_back_tokens, write_back_s, disk, remote) of the rules ``host`` turns on; None for the
    others. HiCache's one storage backend (``d``) is the remote row when it is the remote store."""
    gated = host.store_threshold >= 2
    skipped = sum(m.gate.skipped for m in managers) if gated else None
    wb = host.write_policy == "write_back"
    wb_tokens = sum(getattr(m, "write_back_tokens", 0) for m in managers) if wb else None
    wb_s = sum(getattr(m, "write_back_s", 0.0) for m in managers) if wb else None
    disk = remote = None
    if host.disk_capacity_units > 0:
        disk = _level(managers, "disk", host.disk_capacity_units, d, q, host.bytes_per_token,
                      host.disk_read_bytes_per_s)
    if host.remote_capacity_units > 0:
        paged = isinstance(managers[0], OffloadingPagedKVManager) if managers else True
        remote = _level(managers, "remote" if paged else "disk", host.remote_capacity_units, r if paged else d, q,
                        host.bytes_per_token, host.remote_read_bytes_per_s)
    return skipped, wb_tokens, wb_s, disk, remote


def _level(managers: list, name: str, units: int, served: int, q: int, bpt: float, bw: float) -> DiskStats:
    """One level's figures from the managers' ``{name}_hit_tokens``, ``{name}_load_s`` and ``{name}`` cache."""
    # every read, served or not: vLLM's paged loads evicted before admission (load_hold.py) left the hit counter;
    # HiCache's counter is its prefetches, ``served`` those loaded back
    read = sum(getattr(m, f"{name}_hit_tokens") + getattr(m, f"{name}_unserved_tokens", 0) for m in managers)
    unserved = read - served
    return DiskStats(units, served, served / q if q else 0.0, read * bpt, sum(getattr(m, f"{name}_load_s")
                     for m in managers), bw, sum(getattr(m, name).stored for m in managers),
                     sum(getattr(m, name).evicted for m in managers), unserved or None)


def simulate_offload(requests, config: EngineConfig, cost, host: HostTier, *, num_replicas: int = 1,
                     router: str = "round_robin", compare: bool = True, **kwargs) -> OffloadRun:
    """Run ``simulate`` with ``host`` under each replica (and, with ``compare``, once without it).

    Raises:
        InputError: prefix caching off (nothing to offload), settings the tier is not modelled for, bad workload.
    """
    if not config.enable_prefix_caching:
        raise InputError("a host KV tier serves prefix hits; with prefix caching off there is nothing to load")
    managers: list = []
    step_cost = WriteBackStepCost if host.write_policy == "write_back" else LoadAwareStepCost
    if config.prefix_caching_policy == "sglang":
        run_cost = step_cost(cost, managers)
    else:  # vLLM: LMCacheConnectorV1 loads in the step; the native connector and LMCacheMPConnector off the step
        run_cost = InStepLoadStepCost(cost, managers) if host.load_in_step else cost
    res = simulate(requests, config, run_cost, num_replicas=num_replicas, router=router,
                   kv_manager_factory=offload_kv_factory(host, managers), **kwargs)
    base = simulate(requests, config, cost, num_replicas=num_replicas, router=router, **kwargs) if compare else None
    return OffloadRun(res, base, _stats(managers, host, res.records.duration_s))
