"""Engine settings for the simulator from the KV ledger's memory plan, and the named policy presets.

The pool size, block size and scheduler limits come from ``kvledger.accounting.plan``
(``Plan.memory``: ``num_gpu_blocks``, ``block_size``, ``max_model_len``,
``max_num_batched_tokens``, ``max_num_seqs``, resolved by the engine's own rules); a
hybrid or sliding-window model also brings ``Plan.blocks_for_tokens``.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.vllm_rules import parse_version
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.hybrid_kv import supports_hybrid_caching
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.errors import InputError, UnknownNameError

__all__ = ["POLICY_PRESETS", "engine_config_from_plan", "plan_blocks_for_tokens", "default_async_scheduling"]

POLICY_PRESETS: dict[str, dict[str, Any]] = {
    "vllm": {"prefix_caching_policy": "vllm", "scheduling_policy": "fcfs"},
    "sglang": {"batching": "sglang", "prefix_caching_policy": "sglang", "scheduling_policy": "fcfs"},
    "static": {"batching": "static", "enable_prefix_caching": False},
    "contiguous": {"kv_allocation": "contiguous", "enable_prefix_caching": False},
}


def plan_blocks_for_tokens(plan) -> Any:
    """The plan's ``blocks_for_tokens`` when it differs from ``ceil(n / block_size)`` (hybrid / sliding), else None."""
    B = plan.memory.block_size
    probes = [1, B, B + 1, 100 * B + 3, 4096, 131072, plan.memory.max_model_len]
    if all(plan.blocks_for_tokens(n) == -(-n // B) for n in probes):
        return None
    return plan.blocks_for_tokens


def default_async_scheduling(engine: str, engine_version: str, batching: str) -> tuple[bool, str]:
    """Whether the engine schedules asynchronously by default, and why.

    vLLM 0.33 enables it unless something rules it out (``config/vllm.py : VllmConfig.__post_init__``;
    pipeline parallelism, some speculative methods and executors do — not modelled here). In
    0.10–0.20 it was off unless ``--async-scheduling`` was given (``max_concurrent_batches`` 1);
    0.21–0.32 were not read and are taken as off, the same boundary as the sliding-window
    in-flight rule (``accounting/vllm_rules.py : sliding_inflight_tokens``).
    """
    if batching != "continuous":
        extra = " (SGLang's overlap scheduling is not modelled)" if batching == "sglang" else ""
        return False, f"batching={batching!r} schedules synchronously{extra}"
    if engine != "vllm":
        return False, f"the {engine} memory plan: synchronous steps"
    if parse_version(engine_version) >= (0, 33, 0):
        return True, f"vLLM {engine_version} default (config/vllm.py: VllmConfig.__post_init__); simulate, goodput --simulate and cost --simulate take --no-async-scheduling for a synchronous engine"
    return False, (f"vLLM {engine_version}: off by default (read in 0.10–0.20; 0.21–0.32 assumed the same); "
                   "--async-scheduling to turn on")


def _sglang_pool(plan) -> str:
    """The KV pool of an SGLang memory plan in words: its token slots and the rule that gives them."""
    m, s = plan.memory, plan.settings
    cell = m.bytes_per_block / m.block_size
    state = " − the Mamba state pool" if any(d.name.startswith("Mamba state") for d in m.deductions) else ""
    how = "given" if s.mem_fraction_static is not None else "SGLang's default for this GPU and TP, arg_groups/memory_hook.py"
    return (f"{m.usable_blocks * m.block_size:,} token slots in {m.usable_blocks:,} pages of {m.block_size} "
            f"token{'s' if m.block_size > 1 else ''} from the SGLang memory plan ({m.engine_version}; `kvledger plan "
            f"--engine sglang`): floor({m.available_kv_bytes / 2**30:.2f} GiB for KV / {cell:,.0f} B per token) "
            f"aligned down to the page, the KV memory being free memory before the weights load × mem_fraction_static "
            f"{m.fraction:g} ({how}) − weights{state} (mem_cache/kv_cache_configurator.py)")


def engine_config_from_plan(plan, *, policy: str | None = None, **overrides: Any) -> tuple[EngineConfig, list[str]]:
    """An EngineConfig sized by ``plan``; returns it with notes on where each setting came from.

    Args:
        plan: a ``kvledger.accounting.plan.Plan`` (vLLM or SGLang memory plan).
        policy: a key of ``POLICY_PRESETS`` (applied before ``overrides``), or None.
        overrides: EngineConfig fields (None values are ignored).

    Raises:
        InputError: the plan's KV pool holds no block (the model does not fit).
        UnknownNameError: unknown policy preset.
    """
    m = plan.memory
    if m.kv_free:
        raise InputError(f"{plan.model.name} keeps no KV cache of its own (every layer reads another model's K/V, as a "
                         "speculative draft does): the simulator schedules requests by their KV blocks, so it has nothing to "
                         "model here; simulate the target model (its KV pool is what a request holds)")
    if not m.fits and m.available_kv_bytes > 0 and m.usable_blocks <= 0 and plan.settings.num_gpu_blocks_override:
        raise InputError(f"--num-gpu-blocks-override {m.num_gpu_blocks:,} leaves no usable block: vLLM's block pool takes "
                         "block 0 as its null block (vllm/v1/core/block_pool.py, BlockPool), so an override of 1 leaves "
                         "requests nothing; give --num-gpu-blocks-override 2 or more (the model fits: the memory plan "
                         f"leaves {m.available_kv_bytes / 2**30:.2f} GiB for the KV cache)")
    if not m.fits:
        left = (f"is short by {-m.available_kv_bytes / 2**30:.2f} GiB before any KV cache" if m.available_kv_bytes < 0 else
                f"leaves {m.available_kv_bytes / 2**30:.2f} GiB for the KV cache ({m.usable_blocks} usable blocks)")
        raise InputError(f"the model does not fit: the memory plan {left}; see `kvledger plan` for the breakdown and the fixes")
    fields: dict[str, Any] = {
        "num_gpu_blocks": m.num_gpu_blocks if m.engine == "vllm" else m.usable_blocks + 1,
        "block_size": m.block_size, "max_model_len": m.max_model_len,
        "max_num_batched_tokens": m.max_num_batched_tokens, "max_num_seqs": m.max_num_seqs,
    }
    pool = (_sglang_pool(plan) if m.engine == "sglang" else
            f"{m.num_gpu_blocks:,} blocks of {m.block_size} tokens from --num-gpu-blocks-override "
            f"({m.num_gpu_blocks * m.bytes_per_block / 2**30:.2f} GiB of KV; the {m.engine} {m.engine_version} memory plan would "
            f"leave {m.available_kv_bytes / 2**30:.2f} GiB)" if plan.settings.num_gpu_blocks_override else
            f"{m.num_gpu_blocks:,} blocks of {m.block_size} tokens from the {m.engine} {m.engine_version} memory plan "
            f"({m.available_kv_bytes / 2**30:.2f} GiB for KV)")
    limits = (f"max_model_len {m.max_model_len:,}, chunked_prefill_size {m.max_num_batched_tokens:,} (as "
              f"max_num_batched_tokens), max_running_requests {m.max_num_seqs:,} (as max_num_seqs; SGLang's defaults "
              "unless set)" if m.engine == "sglang" else
              f"max_model_len {m.max_model_len:,}, max_num_batched_tokens {m.max_num_batched_tokens:,}, max_num_seqs "
              f"{m.max_num_seqs:,} (engine defaults unless set)")
    notes = [f"KV pool: {pool}; {limits}"]
    if m.engine == "sglang":
        notes.append("SGLang pool: usable token slots + vLLM's null block convention (one extra block)")
        for n in m.notes:
            if n.startswith("Mamba state:"):
                notes.append(n + "; the simulator does not hold these slots per request (only max_running_requests "
                             "limits the requests running)")
            elif n.startswith("sliding-window layers have their own pool"):
                notes.append(n + "; the simulator holds every token of a request in the full pool and does not model "
                             "the sliding-window pool, which SGLang frees outside the window")
    if policy is not None:
        if policy not in POLICY_PRESETS:
            raise UnknownNameError("policy", policy, POLICY_PRESETS, hint=f"Known: {', '.join(POLICY_PRESETS)}.")
        fields.update(POLICY_PRESETS[policy])
        notes.append(f"policy preset {policy!r}: {POLICY_PRESETS[policy]}")
    fields.update({k: v for k, v in overrides.items() if v is not None})
    if (m.engine == "vllm" and parse_version(m.engine_version) < (0, 8, 0)
            and fields.get("batching", "continuous") == "continuous"):
        notes.append(f"vLLM {m.engine_version} ran the V0 engine by default (V1 became the default in 0.8): this run "
                     "schedules by the v1 rule with that version's memory plan; --batching vllm_v0 models V0's "
                     "prefill-first rule")
    if "async_scheduling" not in fields:
        on, why = default_async_scheduling(m.engine, m.engine_version, fields.get("batching", "continuous"))
        fields["async_scheduling"] = on
        notes.append(f"async scheduling {'on' if on else 'off'}: {why}")
    bft = plan_blocks_for_tokens(plan)
    if bft is not None:
        fields["blocks_for_tokens"] = bft
        notes.append("hybrid / sliding-window KV layout: blocks per request from the plan's KV cache groups")
        if m.engine == "vllm" and plan.layout is not None and fields.get("batching", "continuous") != "vllm_v0":
            inflight = plan.inflight_tokens
            if parse_version(m.engine_version) >= (0, 33, 0):  # max_in_flight_tokens = max_concurrent_batches × MNBT
                inflight = (2 if fields["async_scheduling"] else 1) * fields["max_num_batched_tokens"]
            fields["step_blocks"] = StepBlockRule.from_layout(plan.layout, m.max_model_len, inflight)
            notes.append("sliding-window groups hold a prefill chunk's blocks until the next step and admit on "
                         f"max_admission_blocks_per_request (in-flight tokens {inflight:,}; "
                         "v1/core/single_type_kv_cache_manager.py, config/vllm.py max_in_flight_tokens)")
        rule = fields.get("step_blocks")
        cacheable = (rule is not None and supports_hybrid_caching(rule)
                     and fields.get("prefix_caching_policy", "vllm") == "vllm"
                     and fields.get("kv_allocation", "paged") == "paged")
        if fields.get("enable_prefix_caching", True) and not cacheable:
            fields["enable_prefix_caching"] = False
            notes.append("prefix caching is not modelled for this hybrid layout (Mamba state groups, mixed block sizes "
                         "or the radix cache): simulated with it off")
        elif fields.get("enable_prefix_caching", True):
            notes.append("hybrid prefix caching as vLLM 0.33 (on by default; ModelConfig.is_prefix_caching_supported): "
                         "per-group hashes, sliding groups need only the window's blocks of a hit "
                         "(kv_cache_coordinator.py); these runs take the general step throughout (slower)")
    return EngineConfig(**fields), notes
