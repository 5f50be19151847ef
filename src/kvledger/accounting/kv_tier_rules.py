"""The engines' KV offloading flags and rules (vLLM OffloadingConnector / LMCache, SGLang HiCache): validation, refusals
and the capacity rule of each tier below HBM.

Rules read from engine code:

* vLLM ``--kv-offloading-size GiB`` / ``--kv-offloading-backend native|lmcache`` first appear in 0.11.1
  (``config/cache.py``); 0.11.0 has only ``--kv-transfer-config`` with ``num_cpu_blocks``. Up to 0.13.0 the
  backend defaults to None, and a size without a backend is silently ignored
  (``VllmConfig._post_init_kv_transfer_config`` returns early); 0.14.0 defaults to "native". A backend without a size is
  refused in 0.11.1–0.13.0 ("You must set kv_offloading_size when kv_offloading_backend is set") and silently
  ignored from 0.14.0 (offloading needs the size).
* native capacity: up to 0.14.0 ``kv_bytes_per_rank = size × 2^30 / (TP × PP)`` and one CPU block per GPU block
  (``offloaded_block_size`` = ``block_size``); 0.19.0 and 0.20.0 (``CPUOffloadingSpec``) count the same blocks as
  ``size × 2^30 // (bytes per block × world_size)``; 0.33.0 (``kv_offload/cpu/spec.py : CPUOffloadingSpec``) splits
  ``cpu_bytes_to_use = size × 2^30`` into chunks of ``worker_kv_bytes_per_block × world_size × blocks_per_chunk``
  bytes rounded up to the host page (4,096 B), ``blocks_per_chunk = 1``; a pure-MLA model at TP > 1 without
  PP keeps one copy (``replicated_layout``: every rank's latent KV is identical), not ``world_size``.
* lmcache capacity: ``lmcache.max_local_cpu_size = size / (TP × PP)`` per rank (0.12.0); 0.33.0 starts the
  LMCache multi-process server connector and does not pass the size on (the server's own budget rules).
  LMCache stores 256-token chunks (its default ``chunk_size``). Before 0.33.0 the backend is ``LMCacheConnectorV1``,
  whose loads are synchronous (load_async False: in the step that schedules the request); 0.33.0's
  ``LMCacheMPConnector`` loads asynchronously (load_async True for a hit: the request waits out of the queue).
* A KV connector turns vLLM's hybrid KV cache manager off (0.11.0–0.14.0 always; 0.33.0 unless the connector
  supports it, which the native OffloadingConnector does): hybrid SSM models (Mamba, linear attention state) then
  fail at startup, sliding-window layers are allocated as full layers. No version read refuses MLA models.
* SGLang 0.5.23 HiCache (``mem_cache/pool_host/base.py : HostKVCache``): host tokens =
  ``hicache_size × 10^9 // bytes_per_token`` when ``--hicache-size`` (GB, 10^9 B) is set, else
  ``int(device_tokens × hicache_ratio)`` (ratio default 2.0, ``arg_groups/hicache_hook.py``), then
  ``page_num = size // page_size + 1`` (one padding page). ``--hicache-write-policy`` write_through (default;
  a node is backed up on its first hit), write_through_selective (on its second) or write_back (on device eviction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvledger.errors import InputError
from kvledger.ranges import OPTION_RANGES
from kvledger.units import GiB

__all__ = ["TierSettings", "check_tier_settings", "vllm_host_tokens", "rules_version", "sglang_host_tokens",
           "HOST_PAGE_BYTES", "LMCACHE_CHUNK_TOKENS", "LMCACHE_MP_FROM", "OFFLOAD_PROMPT_ONLY_FROM",
           "HICACHE_WRITE_POLICIES", "DEFAULT_HICACHE_RATIO",
           "NVME_READ_BYTES_PER_S", "NVME_WRITE_BYTES_PER_S", "NETWORK_BYTES_PER_S", "LINK_FRACTION",
           "EVICTION_POLICIES", "HICACHE_PREFETCH_POLICIES", "CPU_SPEC_READ"]

HOST_PAGE_BYTES = 4096  # SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE (vLLM 0.33.0), B
LMCACHE_CHUNK_TOKENS = 256  # LMCache default chunk_size, tokens
LMCACHE_MP_FROM = (0, 33, 0)  # first vLLM read whose lmcache backend is LMCacheMPConnector (asynchronous loads)
OFFLOAD_PROMPT_ONLY_FROM = (0, 23, 0)  # first vLLM read whose native CPU offloading stores prompt blocks only
# (v1/kv_offload/base.py: extra_config offload_prompt_only, default True; absent in 0.19.0, 0.20.0, 0.21.0, 0.22.0)
DEFAULT_HICACHE_RATIO = 2.0  # SGLang 0.5.23 handle_hicache_ratio_default, cache mode
HICACHE_WRITE_POLICIES = ("write_through", "write_through_selective", "write_back")
EVICTION_POLICIES = ("lru", "arc")  # vLLM 0.33.0 OffloadingConnector kv_connector_extra_config eviction_policy
HICACHE_PREFETCH_POLICIES = ("best_effort", "wait_complete", "timeout")  # SGLang 0.5.23, default timeout
# Assumptions (stated as such in the output; flags override): one PCIe Gen4 x4 data-centre NVMe drive's sequential
# datasheet class, and a 400 Gb/s NIC per GPU (ConnectX-7 class) for a remote store.
NVME_READ_BYTES_PER_S = 7.0e9
NVME_WRITE_BYTES_PER_S = 5.0e9
NETWORK_BYTES_PER_S = 50.0e9
LINK_FRACTION = 0.8  # share of the host link's per-direction peak a pinned copy reaches (assumption, as the roofline's)


@dataclass(frozen=True)
class TierSettings:
    """The offloading flags, named as the engines name them (None/0: unset).

    Attributes:
        kv_offloading_size_gib: vLLM ``--kv-offloading-size`` (GiB, summed over TP×PP ranks).
        kv_offloading_backend: vLLM ``--kv-offloading-backend`` ("native" or "lmcache").
        enable_hierarchical_cache: SGLang ``--enable-hierarchical-cache``.
        hicache_ratio: SGLang ``--hicache-ratio`` (host / device pool). hicache_size_gb: ``--hicache-size`` (GB, 10^9).
        hicache_write_policy: SGLang ``--hicache-write-policy`` (None: write_through, SGLang's default; see
            ``write_policy``).
        store_threshold / eviction_policy: vLLM's native connector's opt-in reuse gate (offers, < 2: off) and host
            cache policy (None: lru), simulated only. hicache_storage_prefetch_policy: SGLang's storage prefetch
            (None: timeout, SGLang's default), simulated only.
        offload_prompt_only: vLLM's native connector stores prompt blocks only (kv_connector_extra_config, from
            0.23.0; None: the release's default, True from 0.23.0), simulated only.
        nvme_gib: a local-disk tier (LMCache ``local_disk`` / SGLang ``--hicache-storage-backend file``), GiB per GPU.
        remote_gib: a remote store (LMCache remote / SGLang mooncake backend), GiB per GPU.
        nvme_read_bytes_per_s / nvme_write_bytes_per_s / network_bytes_per_s: tier bandwidths, B/s (assumptions).
        link_fraction: achievable share of the host link's per-direction peak.
        engine_flag: the flag that chose the engine in the command (``--engine``; ``simulate``: ``--policy``), named
            in errors; not a setting.
    """

    kv_offloading_size_gib: float | None = None
    kv_offloading_backend: str | None = None
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    hicache_size_gb: int = 0
    hicache_write_policy: str | None = None
    nvme_gib: float | None = None
    remote_gib: float | None = None
    nvme_read_bytes_per_s: float = NVME_READ_BYTES_PER_S
    nvme_write_bytes_per_s: float = NVME_WRITE_BYTES_PER_S
    network_bytes_per_s: float = NETWORK_BYTES_PER_S
    link_fraction: float = LINK_FRACTION
    store_threshold: int | None = None
    eviction_policy: str | None = None
    hicache_storage_prefetch_policy: str | None = None
    offload_prompt_only: bool | None = None
    engine_flag: str = "--engine"

    @property
    def write_policy(self) -> str:
        """SGLang's write policy in effect (write_through when the flag is not given)."""
        return self.hicache_write_policy or "write_through"

    def echo(self) -> dict:
        """The settings as a plan's ``settings`` block: the engines' defaults filled in, ``engine_flag`` left out."""
        from dataclasses import asdict

        d = asdict(self)
        del d["engine_flag"]
        if self.offload_prompt_only is None:  # its default is the release's: named only when given
            del d["offload_prompt_only"]
        return {**d, "hicache_write_policy": self.write_policy, "store_threshold": self.store_threshold or 0,
                "eviction_policy": self.eviction_policy or "lru",
                "hicache_storage_prefetch_policy": self.hicache_storage_prefetch_policy or "timeout"}

    @property
    def any_set(self) -> bool:
        return (self.kv_offloading_size_gib is not None or self.kv_offloading_backend is not None
                or self.enable_hierarchical_cache or self.nvme_gib is not None or self.remote_gib is not None)


CPU_SPEC_READ = (0, 19, 0)
"""The first release read whose native capacity rule is ``CPUOffloadingSpec``'s (0.19.0 and 0.20.0: ``cpu_bytes_to_use =
size × 2^30`` over ``page_size × layers × world_size`` per block, no host-page rounding): the same count as 0.14.0's
per-rank rule, worded as that release's code words it (0.15.0–0.18.0 were not read)."""


def rules_version(v: str | None) -> tuple[int, ...]:
    from kvledger.accounting.vllm_rules import parse_version

    return parse_version(v) if v else (0, 33, 0)


def _positive(name: str, v: float | None) -> None:
    if v is not None and (not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0):
        what = ("a tier's bandwidth, B/s (the flag: GB/s)" if "bandwidth" in name else "the host memory (or disk) "
                "the engine sets aside for KV blocks evicted from or copied out of GPU memory")
        raise InputError(f"{name} must be a finite number above 0, got {v!r}: it is {what}")


HICACHE_FROM = (0, 4, 3)
"""First SGLang release read with a hierarchical cache (``server_args.py``: none in 0.4.0, 0.4.0.post1, 0.4.1)."""


def check_tier_settings(t: TierSettings, engine: str, engine_version: str | None, has_state_layers: bool) -> None:
    """Refuse tier settings the engine would refuse or silently ignore, and models it cannot offload.

    Raises:
        InputError: one paragraph naming the flag, the engine's rule and what to pass instead.
    """
    for name, v in (("--kv-offloading-size", t.kv_offloading_size_gib), ("--hicache-ratio", t.hicache_ratio),
                    ("--kv-tier-nvme", t.nvme_gib), ("--kv-tier-remote", t.remote_gib),
                    ("--nvme-read-bandwidth", t.nvme_read_bytes_per_s), ("--network-bandwidth", t.network_bytes_per_s)):
        _positive(name, v)
    OPTION_RANGES["link_fraction"].check("--link-fraction", t.link_fraction)
    OPTION_RANGES["hicache_size"].check("--hicache-size", t.hicache_size_gb)  # whole GB (10^9 B)
    vllm_given = [f for f, v in (("--kv-offloading-size", t.kv_offloading_size_gib),
                                 ("--kv-offloading-backend", t.kv_offloading_backend)) if v is not None]
    sglang_given = [f for f, v in (("--enable-hierarchical-cache", t.enable_hierarchical_cache or None),
                                   ("--hicache-ratio", t.hicache_ratio), ("--hicache-size", t.hicache_size_gb or None),
                                   ("--hicache-write-policy", t.hicache_write_policy),
                                   ("--hicache-storage-prefetch-policy", t.hicache_storage_prefetch_policy))
                    if v is not None]
    chosen = f"with {t.engine_flag} {engine}"
    if engine != "vllm" and vllm_given:
        raise InputError(f"{_flags_are(vllm_given, 'a vLLM flag')}; {chosen} {_pronoun(vllm_given)} would be "
                         "ignored. For SGLang pass --enable-hierarchical-cache with --hicache-ratio or "
                         "--hicache-size (host memory per GPU, GB); TensorRT-LLM's host offload is not modelled.")
    if engine != "sglang" and sglang_given:
        raise InputError(f"{_flags_are(sglang_given, 'an SGLang flag')}; {chosen} {_pronoun(sglang_given)} would "
                         "be ignored. For vLLM pass --kv-offloading-size GiB (and --kv-offloading-backend "
                         f"native|lmcache), or choose SGLang ({t.engine_flag} sglang).")
    vllm_flags = bool(vllm_given)
    if engine == "sglang":
        _check_sglang(t, engine_version if sglang_given else None)
    if engine == "vllm" and vllm_flags:
        _check_vllm(t, rules_version(engine_version), engine_version, has_state_layers)


def _flags_are(flags: list[str], what: str) -> str:
    """"--a is a vLLM flag" or "--a and --b are vLLM flags" (``what``: the singular, with its article)."""
    if len(flags) == 1:
        return f"{flags[0]} is {what}"
    return f"{', '.join(flags[:-1])} and {flags[-1]} are {what.split(' ', 1)[1]}s"


def _pronoun(flags: list[str]) -> str:
    return "it" if len(flags) == 1 else "they"


def _check_sglang(t: TierSettings, engine_version: str | None = None) -> None:
    """Refuse SGLang tier flags it would ignore or refuse; ``engine_version``: the release given, when a tier flag is.
    SGLang 0.4.0, 0.4.0.post1 and 0.4.1 have no hierarchical cache (no ``enable_hierarchical_cache`` in their
    ``server_args.py``; 0.4.3's has it, 0.4.2 not read)."""
    from kvledger.accounting.sglang_rules import parse_sglang_version

    if engine_version and parse_sglang_version(engine_version) < HICACHE_FROM:
        raise InputError(f"SGLang {engine_version} has no hierarchical cache (its server_args.py has no "
                         "--enable-hierarchical-cache; 0.4.3's, the next read, has it, and the host tier is replayed "
                         "by 0.5.23's HiCache rules): drop the tier flags, or pass --engine-version 0.4.3 or later")
    if (t.hicache_ratio is not None or t.hicache_size_gb > 0) and not t.enable_hierarchical_cache:
        raise InputError("--hicache-ratio and --hicache-size size SGLang's host KV pool, which exists only with "
                         "--enable-hierarchical-cache; without it SGLang ignores them. Add "
                         "--enable-hierarchical-cache.")
    if t.write_policy not in HICACHE_WRITE_POLICIES:
        raise InputError(f"--hicache-write-policy must be one of {', '.join(HICACHE_WRITE_POLICIES)} (SGLang 0.5.23), "
                         f"got {t.hicache_write_policy!r}")
    p = t.hicache_storage_prefetch_policy
    if p is not None and p not in HICACHE_PREFETCH_POLICIES:
        raise InputError(f"--hicache-storage-prefetch-policy must be one of {', '.join(HICACHE_PREFETCH_POLICIES)} "
                         f"(SGLang 0.5.23), got {p!r}")


def _check_vllm(t: TierSettings, ver: tuple[int, ...], given: str | None, has_state_layers: bool) -> None:
    shown = given or "0.33.0"
    if ver < (0, 11, 1):
        raise InputError(f"vLLM {shown} has no --kv-offloading-size / --kv-offloading-backend (they arrive in 0.11.1); "
                         "its OffloadingConnector is configured through --kv-transfer-config with num_cpu_blocks. "
                         "Plan with --engine-version 0.11.1 or later.")
    if t.kv_offloading_backend not in (None, "native", "lmcache"):
        raise InputError(f"--kv-offloading-backend must be native or lmcache, got {t.kv_offloading_backend!r}")
    if t.kv_offloading_size_gib is None:
        why = ("vLLM refuses this (\"You must set kv_offloading_size when kv_offloading_backend is set\")"
               if ver < (0, 14, 0) else f"vLLM {shown} leaves offloading off without a size")
        raise InputError(f"--kv-offloading-backend without --kv-offloading-size: {why}. Pass the host memory in GiB, "
                         "summed over the TP×PP ranks, e.g. --kv-offloading-size 256GiB.")
    if t.kv_offloading_backend is None and ver < (0, 14, 0):
        raise InputError(f"--kv-offloading-size without --kv-offloading-backend: vLLM {shown} has no default "
                         "backend and silently leaves offloading off (its backend default becomes native in 0.14.0). "
                         "Add "
                         "--kv-offloading-backend native (or lmcache).")
    backend = t.kv_offloading_backend or "native"
    hma_ok = ver >= (0, 33, 0) and backend == "native"
    if has_state_layers and not hma_ok:
        raise InputError(f"vLLM {shown} turns its hybrid KV cache manager off when a KV connector is set "
                         f"(--kv-offloading-backend {backend}), and a model with recurrent state layers (Mamba, "
                         "linear attention) fails at startup without it (\"hybrid SSM models require HMA\"). Drop the "
                         "offloading flags, or plan vLLM 0.33.0's native backend, whose connector supports it.")


def vllm_host_tokens(size_gib: float, backend: str, version: tuple[int, ...], bytes_per_block: float,
                     block_size: int, world_size: int, replicated_mla: bool = False) -> tuple[int, int, str]:
    """(host tokens per GPU, tokens per stored unit, the rule in words) of vLLM's offloading buffer (module doc)."""
    total = size_gib * GiB
    if backend == "lmcache":
        chunk = LMCACHE_CHUNK_TOKENS * bytes_per_block / block_size
        n = int(total / world_size // chunk)
        src = ("lmcache.max_local_cpu_size = size / ranks (read in vLLM 0.12.0 and 0.19.0)" if version < (0, 33, 0) else
               "assumed the LMCache server's budget: vLLM 0.33.0 does not pass the size on")
        per_token = chunk / LMCACHE_CHUNK_TOKENS
        rule = (f"{size_gib:g} GiB / {_ranks(world_size)} // ({LMCACHE_CHUNK_TOKENS} tokens × {per_token:,.0f} "
                f"B/token) = {n:,} chunks ({src})")
        return n * LMCACHE_CHUNK_TOKENS, LMCACHE_CHUNK_TOKENS, rule
    if version >= (0, 33, 0):
        copies = 1 if replicated_mla else world_size
        chunk = bytes_per_block * copies
        aligned = -(-int(math.ceil(chunk)) // HOST_PAGE_BYTES) * HOST_PAGE_BYTES
        n = int(total // aligned)
        what = "1 copy (MLA replicated_layout)" if replicated_mla else _ranks(world_size)
        rule = (f"num_chunks = {size_gib:g} × 2^30 B // round_up({bytes_per_block:,.0f} B × {what}, "
                f"{HOST_PAGE_BYTES} B) = {n:,} (vLLM 0.33.0 CPUOffloadingSpec; blocks_per_chunk 1)")
        return n * block_size, block_size, rule
    n = int(total / world_size // bytes_per_block)
    if version >= CPU_SPEC_READ:  # the same count, over every rank's copy of a block
        rule = (f"num_blocks = {size_gib:g} × 2^30 B // ({bytes_per_block:,.0f} B per block × {_ranks(world_size)}) "
                f"= {n:,} CPU blocks (vLLM CPUOffloadingSpec as read in 0.19.0 and 0.20.0: cpu_bytes_to_use over "
                "every rank's copy of a block, one CPU block per GPU block)")
    else:
        rule = (f"kv_bytes_per_rank = {size_gib:g} × 2^30 B / {_ranks(world_size)}; ÷ {bytes_per_block:,.0f} B per "
                f"block = {n:,} CPU blocks (vLLM 0.11.1–0.14.0: one CPU block per GPU block)")
    return n * block_size, block_size, rule


def _ranks(n: int) -> str:
    return "1 rank" if n == 1 else f"{n} ranks"


def sglang_host_tokens(t: TierSettings, device_tokens: int, bytes_per_token: float, page_size: int) -> tuple[int, str]:
    """(host tokens per GPU, the rule in words) of SGLang's HiCache host pool (module doc)."""
    if t.hicache_size_gb > 0:
        size = int(t.hicache_size_gb * 1e9 // bytes_per_token)
        how = f"--hicache-size {t.hicache_size_gb:g} × 10^9 B // {bytes_per_token:,.0f} B/token"
    else:
        ratio = DEFAULT_HICACHE_RATIO if t.hicache_ratio is None else t.hicache_ratio
        size = int(device_tokens * ratio)
        how = f"int({device_tokens:,} device tokens × hicache_ratio {ratio:g})"
    pages = size // page_size + 1
    return pages * page_size, f"{how} = {size:,}; + 1 padding page of {page_size} → {pages * page_size:,} tokens"
