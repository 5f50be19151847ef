"""The allowed range of every numeric input, by option name: one table the CLI (``kvledger.cli.limits``), the web
app and the Python API all check against.

Keyed by the option's parameter name (with per-command entries where a name means something else in one
command). A NaN, an infinity where none is meaningful, a negative seed, a zero GPU count or a fraction above 1
ends with an :class:`~kvledger.errors.InputError` that names the flag, the value and the allowed range. Upper
bounds keep the work bounded (requests, replicas, users) and match the engine-settings model
(``kvledger.accounting.settings.PlanSettings``) where the two overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvledger.errors import InputError, range_error, show_number

__all__ = ["Range", "ATTAINMENT_TARGET", "TIER_SIZE_GIB", "OPTION_RANGES", "COMMAND_RANGES", "DURATION_OPTIONS",
           "range_for", "range_problems", "check_options"]

_TOKENS_MAX = 1 << 26  # as PlanSettings: beyond any real context window
_SEED_MAX = 2**63 - 1  # numpy's default_rng takes any non-negative int; 63 bits keep seeds portable
_REQUESTS_MAX = 10_000_000  # one simulated or swept run; keeps memory bounded (about 1 KB per request)
#: a monthly volume above these is a slip (an exponent too many), not a deployment: 10¹⁵ tokens a month is 380 million
#: tokens/s and 10¹² requests 380,000 req/s around the clock, more than any one service's traffic (as ``--rate``'s 10⁶)
_MONTHLY_TOKENS_MAX, _MONTHLY_REQUESTS_MAX = 1e15, 1e12
_MONTHLY_TOKENS_WHY = ("tokens/month; 10¹⁵ a month is 380 million tokens/s around the clock, more than any one service "
                       "serves: a larger volume is a slip, such as an exponent too many")
_MONTHLY_REQUESTS_WHY = ("requests/month; 10¹² a month is 380,000 req/s around the clock, more than any one service "
                         "serves: a larger volume is a slip, such as an exponent too many")


@dataclass(frozen=True, slots=True)
class Range:
    """Closed or open interval a number must lie in; ``allow_inf`` admits +inf (e.g. ``--rate inf``)."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    allow_inf: bool = False
    unit: str = ""

    def describe(self) -> str:
        lo = ("(" if self.lo_open else "[") + _num(self.lo)
        if self.allow_inf and math.isinf(self.hi):
            hi = "inf]"
        else:
            hi = _num(self.hi) + (")" if self.hi_open else "]")
        text = f"{lo}, {hi}" + (f" {self.unit}" if self.unit else "")
        return text + " or inf" if self.allow_inf and not math.isinf(self.hi) else text

    def check(self, flag: str, value: float, given: str | None = None) -> None:
        """Raise InputError naming ``flag`` when ``value`` is NaN, an unwanted infinity or outside the range.

        ``given``: the value as the user wrote it (e.g. ``"1e9s"`` for a duration read as seconds), shown instead of
        ``value``.
        """
        if isinstance(value, float) and math.isnan(value):
            raise InputError(f"{flag} nan is not a number; allowed: {self.describe()}")
        if isinstance(value, float) and math.isinf(value):
            if value > 0 and self.allow_inf:
                return
            raise InputError(f"{flag} {value} is not finite; allowed: {self.describe()}")
        too_low = value <= self.lo if self.lo_open else value < self.lo
        too_high = value >= self.hi if self.hi_open else value > self.hi
        if too_low or too_high:
            err = range_error(flag, given or value, self.describe())
            share = (self.lo, self.hi) == (0.0, 1.0) and "%" not in self.unit  # a flag's share typed as a percentage
            if share and flag.startswith("--") and 5 <= value <= 100:
                raise InputError(f"{err}; did you mean {flag} {value / 100:g} ({value:g} %)?")
            raise err


def _num(x: float) -> str:
    """Whole numbers with thousands separators (4,096), others in short form (0.5, 1e+09)."""
    return show_number(x)


def _frac(lo_open: bool = True) -> Range:
    return Range(0.0, 1.0, lo_open=lo_open, unit="(fraction)")


def _count(lo: int, hi: int, unit: str = "") -> Range:
    return Range(lo, hi, unit=unit)


#: the share of requests that must meet the SLO (goodput's, cost's and every capacity search's ``target``).
ATTAINMENT_TARGET = Range(0.0, 1.0, lo_open=True, unit="(share of requests within the SLO, e.g. 0.9 for 90 %)")


TIER_SIZE_GIB = Range(0.0, float(2**20), lo_open=True, hi_open=True, unit="GiB")
"""A KV tier's size (``--kv-offloading-size``, ``--kv-tier-nvme``, ``--kv-tier-remote``): above 0 (a tier of no
bytes holds no block) and below 1 PiB (``units.TIER_GIB_MAX``)."""

#: parameter name → allowed range, for every int/float option of every command.
OPTION_RANGES: dict[str, Range] = {
    "tp": _count(1, 1024, "GPUs"), "pp": _count(1, 1024, "pipeline stages"), "tp_size": _count(1, 1024, "GPUs"),
    "ep_size": _count(1, 1024, "GPUs"),
    "max_running_requests": _count(1, 1 << 20, "requests"), "page_size": _count(1, 4096, "tokens"),
    "data_parallel_size": _count(1, 1024, "data-parallel ranks"), "attn_dp_size": _count(1, 1024, "attention DP ranks"),
    "nnodes": _count(1, 1024, "nodes"),
        "prefill_tp": _count(1, 1024, "GPUs"), "decode_tp": _count(1, 1024, "GPUs"),
    "replicas": _count(1, 4096), "seed": _count(0, _SEED_MAX),
    "seeds": _count(1, 64, "seeds (one simulation each; 64 bounds the work)"),
    "num_requests": _count(1, _REQUESTS_MAX, "requests"), "concurrency": _count(1, 1_000_000, "users"),
    "shared_prefix_tokens": _count(1, _TOKENS_MAX, "tokens"),
    #: --document-pool K:L[:zipf=S] (dynamics/workload/document_pool.py): K documents; S, the Zipf exponent (0: uniform)
    "document_pool_documents": _count(1, 1_000_000, "documents"),
    "zipf_exponent": Range(0.0, 10.0, unit="(Zipf exponent s: P(rank k) ∝ k^-s; 0 is uniform)"),
    "rate": Range(0.0, 1e6, lo_open=True, allow_inf=True, unit="req/s"),  # inf: every request at t = 0
    "rate_scale": Range(0.0, 1e6, lo_open=True), "think_time": Range(0.0, 86_400.0, unit="s"),
    "arrival_cv": Range(0.0, 100.0, unit="(CV of the gaps: 0 = a fixed interval of 1/rate, 1 = Poisson)"),
    "gpu_memory_utilization": _frac(), "mem_fraction_static": _frac(), "free_gpu_memory_fraction": _frac(),
    "achievable_flops_fraction": _frac(), "achievable_bandwidth_fraction": _frac(),
    "flops_fraction": _frac(), "bandwidth_fraction": _frac(), "allreduce_link_share": _frac(),
    "max_num_seqs": _count(1, 1 << 20, "requests"), "block_size": _count(1, 4096, "tokens"),
    "cuda_graph_max_batch_size": _count(1, 1 << 20, "requests"),
    "max_cudagraph_capture_size": _count(1, 1 << 20, "sequences (vLLM's largest CUDA-graph batch)"),
    "num_gpu_blocks_override": _count(1, 1 << 32, "blocks"),
    "max_num_batched_tokens": _count(1, _TOKENS_MAX, "tokens"), "prefill_mnbt": _count(1, _TOKENS_MAX, "tokens"),
    "tune_prefill_mnbt": _count(1, _TOKENS_MAX, "tokens"), "decode_mns": _count(1, 1 << 20, "requests"),
    "tune_decode_mns": _count(1, 1 << 20, "requests"),
    "long_prefill_token_threshold": _count(0, _TOKENS_MAX, "tokens (0: no cap, vLLM's default)"),
    "max_num_partial_prefills": _count(1, 1 << 20, "requests"),
    "max_long_partial_prefills": _count(1, 1 << 20, "requests"),
    "prefix_cache_retention_interval": _count(0, _TOKENS_MAX, "tokens (0: vLLM's default, the boundaries only)"),
    "gpu_bandwidth": Range(0.0, 1000.0, lo_open=True, unit="TB/s"),
    "gpu_bf16_tflops": Range(0.0, 1e6, lo_open=True, unit="TFLOP/s"),
    # goodput / cost
    "target": ATTAINMENT_TARGET, "attainment": ATTAINMENT_TARGET,
    "lo": Range(0.0, 1e9, lo_open=True), "hi": Range(0.0, 1e9, lo_open=True), "tol": Range(0.0, 1e9, lo_open=True),
    "utilization": _frac(), "max_utilization": _frac(),
    "gpu_usd_per_hour": Range(0.0, 1e6, unit="USD/GPU-hour"), "num_gpus": _count(1, 1 << 20, "GPUs"),
    "prefill_share": _frac(lo_open=False), "batch_share": _frac(lo_open=False),
    "cache_hit_rate": _frac(lo_open=False), "cache_write_rate": _frac(lo_open=False),
    "engineer_months": Range(0.0, 1e6, unit="engineer-months/month"), "engineer_usd": Range(0.0, 1e9, unit="USD"),
    "monthly_requests": Range(0.0, _MONTHLY_REQUESTS_MAX, lo_open=True, unit=_MONTHLY_REQUESTS_WHY),
    "monthly_input_tokens": Range(0.0, _MONTHLY_TOKENS_MAX, unit=_MONTHLY_TOKENS_WHY),
    "monthly_output_tokens": Range(0.0, _MONTHLY_TOKENS_MAX, unit=_MONTHLY_TOKENS_WHY),
    "run_index": _count(0, 1_000_000),
    "monthly_tokens": Range(0.0, _MONTHLY_TOKENS_MAX, lo_open=True, unit=_MONTHLY_TOKENS_WHY),
    "peak_to_mean": Range(1.0, 100.0, unit="(the busiest hour's rate ÷ the month's mean)"),
    # the whole self-hosted bill (kvledger.ledgers.host_bill)
    "gpu_capex_usd": Range(0.0, 1e7, lo_open=True, unit="USD per GPU"),
    "amortization_months": Range(1.0, 240.0, unit="months"),
    "annual_interest": Range(0.0, 1.0, unit="(0.08 = 8% a year)"),
    "pue": Range(1.0, 3.0, unit="(facility power ÷ IT power)"), "usd_per_kwh": Range(0.0, 10.0, unit="USD per kWh"),
    "hosting_usd_per_gpu_month": Range(0.0, 1e6, unit="USD"), "board_power_w": Range(0.0, 5000.0, unit="W per GPU"),
    "idle_power_w": Range(0.0, 5000.0, unit="W per GPU"),
    # fp8-kv, spec-decode, kv-eviction, doctor, disagg
    "overhead_ns_per_element": Range(0.0, 1e6, unit="ns"), "overhead_us_per_layer": Range(0.0, 1e9, unit="µs"),
    "draft_tokens": _count(1, 64, "tokens"), "acceptance": Range(0.0, 1.0, unit="(per-token acceptance rate)"),
    "draft_cost_fraction": Range(0.0, 1.0, lo_open=True, unit="of the target's decode step"),
    "output_tokens": _count(1, _TOKENS_MAX, "tokens"),
    "evict": Range(0.0, 1.0, hi_open=True, unit="(share of tokens evicted)"),
    "sink_tokens": _count(0, _TOKENS_MAX, "tokens"),
    "run_tokens": _count(1, _TOKENS_MAX, "tokens"), "context_tokens": _count(1, _TOKENS_MAX, "tokens"),
    "prefix_share": _frac(lo_open=False),
    "prefill_gpus": _count(1, 1 << 20, "GPUs"), "decode_gpus": _count(1, 1 << 20, "GPUs"),
    # KV tiers below HBM (plan, offload); the sizes in GiB, a bare number or with its unit (cli/tier_opts.py)
    "kv_offloading_size": TIER_SIZE_GIB, "kv_tier_remote": TIER_SIZE_GIB,
    "hicache_ratio": Range(0.0, 1000.0, lo_open=True), "hicache_size": _count(0, 1 << 20, "GB"),
    "nvme_read_bandwidth": Range(0.0, 1000.0, lo_open=True, unit="GB/s"),
    "network_bandwidth": Range(0.0, 10_000.0, lo_open=True, unit="GB/s"), "link_fraction": _frac(),
    "store_threshold": _count(0, 1 << 20, "offers (vLLM: < 2 turns the reuse gate off)"),
    "suffix_tokens": _count(1, _TOKENS_MAX, "tokens"), "sessions": _count(1, 1_000_000, "sessions"),
    "session_rate": Range(0.0, 1e6, lo_open=True, unit="sessions/s"), "compare_gpus": _count(1, 4096, "replicas"),
    "compare_replicas": _count(1, 4096, "replicas"),
    "host_memory_usd_per_gib_month": Range(0.0, 1e4, unit="USD/GiB-month"),
    "nvme_usd_per_gib_month": Range(0.0, 1e4, unit="USD/GiB-month"),
    # durations written with their unit (DURATION_OPTIONS), bounded in seconds
    "cpu_overhead": Range(0.0, 10.0, unit="s"),  # as PlanSettings.cpu_overhead_s (ge=0, le=10)
    # a client's and front end's latency (HTTP, gateway, tokenisation, SSE): tens of ms; above 10 s is a typo
    "client_latency": Range(0.0, 10.0, unit="s"),
}

# : options given as text with a time unit ("2ms"): read as seconds (kvledger.units.parse_duration_s), then
# range-checked.
DURATION_OPTIONS = frozenset({"cpu_overhead", "client_latency"})

#: (command, parameter name) → range, where a name means something else in that command.
COMMAND_RANGES: dict[tuple[str, str], Range] = {
    ("fp8-kv", "concurrency"): _count(1, 1 << 20, "sequences"),
    ("spec-decode", "num_requests"): _count(1, 100_000, "requests per rate"),
    ("calibrate", "max_paddings"): _count(0, _TOKENS_MAX, "tokens"), ("validate", "max_paddings"): _count(0,
        _TOKENS_MAX, "tokens"),
    ("validate", "client_concurrency"): _count(1, 1_000_000, "requests in flight"),
    ("validate", "run"): _count(0, 1_000_000, "the run's place in its file, from 0"),
    ("calibrate", "client_concurrency"): _count(1, 1_000_000, "requests in flight"),
    ("search", "workers"): _count(1, 4096, "workers"),
    ("calibrate", "workers"): _count(0, 4096, "worker processes (0: one per CPU)"),
    ("search", "rate"): Range(0.0, 1e6, lo_open=True, unit="req/s"),  # a load to size for: inf is meaningless
    # a capacity probe of a handful of requests measures its drain tail, not the replica: at least 50 per probe
    ("search", "num_requests"): _count(50, _REQUESTS_MAX, "requests per probe"), ("search", "top"): _count(1, 100_000,
        "rows"),
    ("ui", "port"): _count(1, 65_535, "TCP port"),
    # the web app's own bound on a request's simulation size (kvledger.report.webapp.serving_payload)
    ("ui", "num_requests"): _count(50, 5_000, "in the web app"),  # a capacity search's floor (sim_boundary)
    # cost prices billed hours: a utilization or a GPU price of 0 would divide by zero
    ("cost", "utilization"): Range(0.0, 1.0, lo_open=True, unit="(share of billed hours spent serving)"),
    ("cost", "max_utilization"): Range(0.0, 1.0, lo_open=True, unit="(share of billed hours spent serving)"),
    ("cost", "gpu_usd_per_hour"): Range(0.0, 1e6, lo_open=True, unit="USD/GPU-hour"),
    ("search", "gpu_usd_per_hour"): Range(0.0, 1e6, lo_open=True, unit="USD/GPU-hour"),
    # a replica's GPUs: --tp's 1,024 × --data-parallel-size's 1,024 (analyses/search/unit_cap.py prunes those over it)
    ("search", "max_gpus_per_replica"): _count(1, 1 << 20, "GPUs per replica"),
}


def range_for(command: str, name: str) -> Range | None:
    """The range of ``name`` in ``command``, or None for a name with no numeric range."""
    return COMMAND_RANGES.get((command, name)) or OPTION_RANGES.get(name)


def range_problems(command: str, values: dict[str, Any], flags: dict[str, str] | None = None) -> list[InputError]:
    """One InputError per numeric option value (None = not given) outside its range, in option order; and one for an
    empty ``engine_version`` (not a version: left out, the newest is planned, so an empty one is refused)."""
    from kvledger.units import parse_duration_s

    problems = []
    for name, value in values.items():
        flag, given = (flags or {}).get(name, "--" + name.replace("_", "-")), None
        if name == "engine_version" and isinstance(value, str) and not value.strip():  # an unset $VLLM_VERSION
            problems.append(InputError(
                f"{flag} {value!r} is empty: it was read as no version, which would plan the newest release read "
                f"rather than yours; give one release like 0.19.0, or leave {flag} out for the newest"))
            continue
        try:
            if isinstance(value, str) and name == "client_latency" and value.startswith("profile:"):
                continue  # a fitted latency, read and range-checked where it is resolved (serving/client_latency.py)
            if isinstance(value, str) and name in DURATION_OPTIONS:
                value, given = parse_duration_s(value, what=flag), value
            if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            rng = range_for(command, name)
            if rng is None:  # tests/cli/test_limits.py requires a range for every numeric option
                continue
            rng.check(flag, value, given)
        except InputError as err:
            problems.append(err)
    return problems


def check_options(command: str, values: dict[str, Any], flags: dict[str, str] | None = None) -> None:
    """Check every numeric option value given against its range.

    Raises:
        InputError: the value out of range (flag, value and allowed range named); several are reported together.
    """
    problems = range_problems(command, values, flags)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InputError(f"{len(problems)} problems with the inputs:\n" + "\n".join(f"  - {e}" for e in problems))
