"""What a configuration search searches: the inputs shared by every candidate (``SearchSpec``) and the candidates (the
product of the axes). A candidate is one deployment unit: a GPU from the catalog, a tensor-parallel degree and the
engine settings on the axes (KV dtype, ``max_num_seqs``, ``max_num_batched_tokens``, prefix caching; for a MoE model at
TP > 1, vLLM's expert parallelism off and on; vLLM's DP ranks with ``--data-parallel-size``); an axis left out takes the
engine's default (``None`` here). Defaults for the axes: every catalog GPU with a rental row in
``catalog/data/gpu_prices.csv`` (with ``--gpu-provider``, only that provider's), every TP in 1, 2, 4, 8 that divides the
model's KV heads (a single KV head, MQA or MLA's latent, is replicated and any TP is offered), vLLM's defaults for the
rest. Candidates are ordered as the product of the axes in the order given, and that order is the ledger's, whatever
runs them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kvledger.analyses.serving.session_spec import SessionSpec
from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ranges import range_problems

__all__ = ["SearchSpec", "Candidate", "Axes", "DEFAULT_TPS", "default_gpus", "default_tps", "make_candidates"]

DEFAULT_TPS = (1, 2, 4, 8)
"""Tensor-parallel degrees tried by default: one node of up to 8 GPUs."""


@dataclass(frozen=True)
class SearchSpec:
    """Inputs shared by every candidate: model, workload, SLO, step cost and the pricing and sizing inputs. Attributes:
        model: HF id, alias or config path. slo: the SLO as text (``ttft=200ms,tpot=50ms``). target: attainment target.
        trace, num_requests, seed, synthetic, shared_prefix_tokens, document_pool: the workload of every probe (the
            same seeded requests, system prompt and documents for all); ``synthetic``: a ``SyntheticSpec`` or a
            ``session_spec.SessionSpec`` (sessions at turn rates), ``trace`` then unused and out of the JSON.
        step_cost: ``roofline`` or ``calibrated`` (``kvledger.analyses.serving.step_cost_choice``); cpu_overhead:
            per-step CPU time added to the roofline (``2ms``; None: none). gpu_profile: ``--gpu-profile`` (a GPU-scope
            calibration file prices the candidates on its GPU; "none"; None: each GPU's bundled profile).
            gemm_efficiency: ``--gemm-efficiency`` ("measured", "flat"; None: the GPU profile's, else measured),
            always in the JSON, so a ledger priced before the measured curve became the default is not resumed.
        allreduce_link_share: ``--allreduce-link-share``, the TP all-reduces' share of their link's one-direction
            bandwidth, in (0, 1], for every candidate at TP > 1 (its simulations, its bounds, its disaggregated pools);
            None: each GPU profile's fitted share, else ``accounting.tp_comm``'s rule.
        engine_version, max_model_len, gpu_memory_utilization (SGLang's: mem_fraction_static), mamba_ssm_cache_dtype,
            inter_node_link (a TP group over nodes: a GPU's NIC), prefix_cache_retention_interval (vLLM ≥ 0.29),
            all2all_backend (vLLM's, for the DP candidates): fixed flags (None: default). quantization: vLLM
            ``--quantization`` of every candidate ("fp8": weights quantized on load; None: none). wddm: every
            candidate under the Windows display driver (Windows, WSL2; ``plan --wddm``).
        client_latency: ``--client-latency`` as given (``30ms`` or ``profile:NAME``; None: none), added to every
            candidate's TTFT and E2E before the SLO judges them (``kvledger.analyses.search.latency``).
        gpu_provider: rental provider whose rows price the GPUs (None: the cheapest listed row of each GPU).
        gpu_usd_per_hour: the user's price, USD/GPU-h: one number for every candidate, or a price per GPU
            ``{GPU: USD}`` (keys: catalog names or aliases, or a GPU file's path; kept by catalog id, a GPU left out
            priced by the table; ``kvledger.catalog.given_prices``); None: the price table (a GPU file has no row).
        utilization: average load ÷ capacity over the billed hours for $ per token (None: the sizing's realized one).
        max_utilization: highest average load per replica when sizing for ``rate_req_per_s`` / ``monthly_tokens``.
        rate_req_per_s: target mean request rate, req/s. monthly_tokens: input + output tokens per month.
        monthly_input_tokens, monthly_output_tokens: the volume as tokens of each kind (together; ``search.load``).
        peak_to_mean: the busiest hour's rate ÷ the month's mean: replicas sized for the peak, priced at the mean.
        api, batch_share, cache_hit_rate, cache_write_rate: the API row and traffic mix to compare against."""
    #: absent unless given, so that ledgers written before each option still resume (a ledger of other values is
    #: another search); a price list is an object {catalog id: USD/GPU-h}, one price stays a number (kvledger.jsonable)
    __json_optional__ = ("gpu_usd_per_hour", "gpu_profile", "client_latency", "allreduce_link_share", "quantization",
                         "monthly_input_tokens", "monthly_output_tokens", "shared_prefix_tokens", "all2all_backend",
                         "mamba_ssm_cache_dtype", "inter_node_link", "prefix_cache_retention_interval", "document_pool",
                         "engine", "enable_dp_attention", "mem_fraction_static")

    model: str
    slo: str
    target: float = 0.9
    trace: str = "azure-conv"
    num_requests: int = 2000
    seed: int = 0
    synthetic: SyntheticSpec | SessionSpec | None = None
    shared_prefix_tokens: int | None = None
    document_pool: str | None = None
    step_cost: str = "roofline"
    cpu_overhead: str | None = None
    gpu_profile: str | None = None
    gemm_efficiency: str | None = None
    allreduce_link_share: float | None = None
    engine_version: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None  # SGLang's fraction, every candidate (engine "sglang"; None: its default)
    quantization: str | None = None
    gpu_provider: str | None = None
    utilization: float | None = None
    max_utilization: float = 0.8
    rate_req_per_s: float | None = None
    monthly_tokens: float | None = None
    monthly_input_tokens: float | None = None
    monthly_output_tokens: float | None = None
    peak_to_mean: float = 1.0
    api: str | None = None
    batch_share: float = 0.0
    cache_hit_rate: float = 0.0
    cache_write_rate: float = 0.0
    gpu_usd_per_hour: float | Mapping[str, float] | None = None
    wddm: bool = False
    client_latency: str | None = None
    mamba_ssm_cache_dtype: str | None = None
    inter_node_link: str | None = None
    prefix_cache_retention_interval: int | None = None
    all2all_backend: str | None = None
    engine: str | None = None  # "sglang": SGLang's plan, simulator and launch lines (engine_version its release)
    enable_dp_attention: bool | None = None  # SGLang's DP attention on every candidate at TP > 1 (dp = ep = tp)

    def __post_init__(self) -> None:
        # a price list (a mapping, or its text): checked and keyed by catalog id here; one number: by ``check``
        if isinstance(self.gpu_usd_per_hour, (Mapping, str)):
            from kvledger.catalog.given_prices import parse_gpu_usd

            object.__setattr__(self, "gpu_usd_per_hour", parse_gpu_usd(self.gpu_usd_per_hour, "search"))

    def check(self) -> None:
        """Raises InputError for out-of-range inputs, all of them named together."""
        bad = [str(e) for e in range_problems("search", {  # kvledger.ranges: the CLI's ranges, checked again here for
            "target": self.target, "num_requests": self.num_requests,  # the Python API
            "utilization": self.utilization, "max_utilization": self.max_utilization,
            "rate": self.rate_req_per_s, "monthly_tokens": self.monthly_tokens, "peak_to_mean": self.peak_to_mean,
            "monthly_input_tokens": self.monthly_input_tokens, "monthly_output_tokens": self.monthly_output_tokens})]
        from kvledger.analyses.search.load import load_problems
        bad += load_problems(self)  # one load at most, or a utilization; a peak only with a load
        bad += [str(e) for e in range_problems("search", {
            "batch_share": self.batch_share, "cache_hit_rate": self.cache_hit_rate,
            "cache_write_rate": self.cache_write_rate, "gpu_usd_per_hour": self.gpu_usd_per_hour,
            "allreduce_link_share": self.allreduce_link_share})]  # simulate's words: (0, 1] (fraction)
        from kvledger.catalog.price_names import gpu_provider_problems
        bad += gpu_provider_problems(self.gpu_provider)  # an unknown one, also where --gpu-usd-per-hour sets prices
        if bad:
            raise InputError(bad[0] if len(bad) == 1 else f"{len(bad)} problems with the inputs:\n"
                             + "\n".join(f"  - {b}" for b in bad))
        from kvledger.dynamics.workload.shared_prefix import check_trace_shared_prefix
        if self.synthetic is None:  # a trace naming its own prefixes (hash ids): refused here, not by every candidate
            check_trace_shared_prefix(self.trace, self.shared_prefix_tokens, self.num_requests, self.seed)
        from kvledger.accounting.calibration_profile import load_profile, looks_like_profile
        if looks_like_profile(self.step_cost):  # a profile file: read once here, not refused by every candidate
            load_profile(self.step_cost)
        from kvledger.accounting.gpu_profile import load_gpu_profile
        from kvledger.analyses.serving.gemm_choice import gemm_mode

        # an unknown --gemm-efficiency, or one the GPU profile was not fitted with: refused here, not by every candidate
        gemm_mode(self, load_gpu_profile(self.gpu_profile) if self.gpu_profile not in (None, "auto", "none") else None)
        from kvledger.analyses.search.latency import search_latency

        search_latency(self)  # a bad --client-latency refused here, before any candidate is planned

    def to_dict(self) -> dict[str, Any]:
        d = to_jsonable(self)
        if self.synthetic is not None:  # the workload searched is the synthetic one (its lengths and arrival CV)
            d.pop("trace")
        if not self.wddm:
            del d["wddm"]
        if self.peak_to_mean == 1.0:  # flat traffic: absent, so that a ledger written before the flag resumes
            del d["peak_to_mean"]
        return d


@dataclass(frozen=True)
class Candidate:
    """One deployment unit to evaluate. ``None`` settings take the engine's default (absent from the id).

    Colocated: one engine at TP ``tp``. Disaggregated (``prefill_replicas`` > 0): ``prefill_replicas`` prefill
    engines at TP ``tp`` and ``decode_replicas`` decode engines at TP ``decode_tp``, KV sent between them."""

    gpu_id: str
    tp: int
    kv_cache_dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    prefill_replicas: int = 0
    decode_replicas: int = 0
    decode_tp: int = 0
    enable_expert_parallel: bool | None = None
    data_parallel_size: int | None = None  # vLLM's DP ranks of a MoE model in lock-step, each TP GPUs (dp_axis.py)

    #: the JSON object (a ledger entry's first keys): the id, layout and GPUs per unit, then the fields in order;
    #: ``enable_expert_parallel`` only where on, ``data_parallel_size`` only above 1 (older ledgers unchanged)
    __json__ = ("id", "layout", ("num_gpus_per_unit", "num_gpus"), "gpu_id", "tp", "kv_cache_dtype", "max_num_seqs",
                "max_num_batched_tokens", "enable_prefix_caching", "prefill_replicas", "decode_replicas", "decode_tp",
                "enable_expert_parallel", "data_parallel_size")
    __json_optional__ = ("enable_expert_parallel", "data_parallel_size")

    @property
    def disagg(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def num_gpus(self) -> int:
        """GPUs in one deployment unit: TP (× the DP ranks), or P × prefill TP + D × decode TP."""
        return self.prefill_replicas * self.tp + self.decode_replicas * self.decode_tp if self.disagg else \
            self.tp * (self.data_parallel_size or 1)

    @property
    def id(self) -> str:
        """``nvidia_h100_sxm:tp4:kv-auto`` (or ``…:p2xtp2+d1xtp4:…``, ``…:dp8xtp1:…``) plus ``:seqs-256``,
        ``:mnbt-8192``, ``:pc-off`` for the axes that are set; what ``--show-command`` takes."""
        shape = (f"p{self.prefill_replicas}xtp{self.tp}+d{self.decode_replicas}xtp{self.decode_tp}" if self.disagg
                 else f"dp{self.data_parallel_size}xtp{self.tp}" if self.data_parallel_size else f"tp{self.tp}")
        parts = [self.gpu_id, shape, f"kv-{self.kv_cache_dtype}"]
        if self.max_num_seqs is not None:
            parts.append(f"seqs-{self.max_num_seqs}")
        if self.max_num_batched_tokens is not None:
            parts.append(f"mnbt-{self.max_num_batched_tokens}")
        if self.enable_prefix_caching is not None:
            parts.append("pc-on" if self.enable_prefix_caching else "pc-off")
        return ":".join(parts + (["ep"] if self.enable_expert_parallel else []))

    @property
    def layout(self) -> str:
        """The unit's shape as the table shows it: ``tp4`` (``tp4+ep`` with expert parallelism, ``dp8×tp1+ep`` with
        DP ranks), or ``(p)2×tp2 + (d)1×tp4``."""
        if self.disagg:
            return f"(p){self.prefill_replicas}×tp{self.tp} + (d){self.decode_replicas}×tp{self.decode_tp}"
        dp = f"dp{self.data_parallel_size}×" if self.data_parallel_size else ""
        return f"{dp}tp{self.tp}" + ("+ep" if self.enable_expert_parallel else "")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_entry(cls, e: dict[str, Any]) -> Candidate:
        """The candidate a ledger entry describes (a field of ``__json_optional__`` absent: None, i.e. off)."""
        return cls(*(e.get(f.name) if f.name in cls.__json_optional__ else e[f.name] for f in fields(cls)))


@dataclass
class Axes:
    """The axes of the product; empty tuples mean "the default" (see the module docstring)."""

    gpus: tuple[str, ...] = ()
    tps: tuple[int, ...] = ()
    kv_cache_dtypes: tuple[str, ...] = ("auto",)
    max_num_seqs: tuple[int | None, ...] = (None,)
    max_num_batched_tokens: tuple[int | None, ...] = (None,)
    prefix_caching: tuple[bool | None, ...] = (None,)
    disagg_splits: tuple[tuple[int, int], ...] = ()
    expert_parallel: tuple[bool, ...] = ()
    """vLLM ``--enable-expert-parallel`` for a MoE model's colocated candidates at TP > 1: () both off and on (the
    default), (True,) on only, (False,) off only; a dense model, TP 1 and disaggregated units never take it."""
    data_parallel_sizes: tuple[int, ...] = ()  # vLLM --data-parallel-size of a MoE model (dp_axis.py); (): none


def default_gpus(provider: str | None = None) -> list[str]:
    """Catalog GPU ids with at least one rental row (of ``provider`` when given), in catalog order."""
    from kvledger.catalog.gpus import gpu_catalog
    from kvledger.catalog.prices import gpu_prices

    priced = {r.gpu_id for r in gpu_prices() if provider is None or r.provider.lower() == provider.strip().lower()}
    out = [g for g in gpu_catalog() if g in priced]
    if not out:
        providers = sorted({r.provider for r in gpu_prices()})
        raise InputError(f"no catalog GPU has a rental row for provider {provider!r}; providers in the price table: "
                         f"{', '.join(providers)}")
    return out


def default_tps(num_kv_heads: int) -> list[int]:
    """TPs in 1, 2, 4, 8 dividing the KV heads or a multiple of them (vLLM ``QKVParallelLinear`` replicates a head)."""
    return [t for t in DEFAULT_TPS if num_kv_heads <= 1 or num_kv_heads % t == 0 or t % num_kv_heads == 0]


def make_candidates(axes: Axes, num_kv_heads: int, provider: str | None = None, *,
                    moe: bool = False, model: Any = None) -> list[Candidate]:
    """The product of the axes, defaults filled in, in axis order (GPU, TP, KV dtype, max_num_seqs, budget, caching,
    for a MoE model (``moe``) DP ranks and at TP > 1 expert parallelism: ``dp_axis.py``); a KV dtype spelled twice
    kept once (``kv_axis.kv_dtype_axis``: ``auto`` is the ``model``'s dtype where it is given).

    Raises:
        UnknownNameError: a GPU the catalog does not know (the closest names suggested).
        ConfigError: an unreadable or invalid GPU file (a .json/.toml path, kept as the candidate's GPU).
        InputError: a TP below 1; DP ranks for a dense model.
    """
    from kvledger.catalog.given_prices import gpu_key  # a GPU file validated here, once, rather than per candidate

    gpus = [gpu_key(g) for g in axes.gpus] if axes.gpus else default_gpus(provider)
    gpus = list(dict.fromkeys(gpus))
    tps = list(dict.fromkeys(axes.tps)) if axes.tps else default_tps(num_kv_heads)
    if any(t < 1 for t in tps):
        raise InputError(f"--tp values must be ≥ 1, got {', '.join(map(str, tps))}")
    from kvledger.analyses.search.dp_axis import dp_values, ep_values
    from kvledger.analyses.search.kv_axis import kv_dtype_axis

    kvs = kv_dtype_axis(axes.kv_cache_dtypes, model)  # each KV cache once, its first spelling (auto,bf16; fp8,fp8_e4m3)

    dps = dp_values(axes, moe, model)  # None (no DP) and the ranks above 1; a dense model's refused
    out = [Candidate(g, t, kv, s, b, pc, enable_expert_parallel=ep, data_parallel_size=dp)
           for g, t, kv, s, b, pc in itertools.product(gpus, tps, kvs, axes.max_num_seqs, axes.max_num_batched_tokens,
                                                       axes.prefix_caching) for dp in dps
           for ep in ep_values(axes, moe, t, dp)]
    if any(p < 1 or d < 1 for p, d in axes.disagg_splits):
        raise InputError("--disagg-splits takes P:D pairs of whole numbers ≥ 1, e.g. 1:1,1:2")
    for g in gpus:  # disaggregated units: every prefill TP × decode TP × split (prefix caching at the engine default)
        out += [Candidate(g, pt, kv, s, b, None, p, d, dt) for pt, dt, (p, d), kv, s, b in itertools.product(
            tps, tps, axes.disagg_splits, kvs, axes.max_num_seqs, axes.max_num_batched_tokens)]
    return out
