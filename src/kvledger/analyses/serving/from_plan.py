"""Engine settings for the simulator from the KV ledger's memory plan, and the named policy presets.

The pool size, block size and scheduler limits come from ``kvledger.accounting.plan`` (``Plan.memory``:
``num_gpu_blocks``, ``block_size``, ``max_model_len``, ``max_num_batched_tokens``, ``max_num_seqs``, resolved by the
engine's own rules); a hybrid or sliding-window model also brings ``Plan.blocks_for_tokens``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.accounting.engine_pools import RECORDED_MATCH, RECORDED_USED
from kvledger.accounting.platforms import NOT_MODELLED
from kvledger.accounting.resolved_defaults import ASYNC_DEFAULT_FROM
from kvledger.accounting.sglang_rules import (
    SGLANG_LATEST,
    parse_sglang_version,
    sglang_version_defaults,
    sglang_version_text,
)
from kvledger.accounting.sglang_steps import sglang_capture_sizes
from kvledger.accounting.vllm_releases import release_lines
from kvledger.accounting.vllm_rules import parse_version
from kvledger.analyses.serving import hybrid_caching_notes as HN
from kvledger.analyses.serving import notes as N
from kvledger.analyses.serving.online_quant import pool_note
from kvledger.dynamics.engine.config import EngineConfig, PoolTooShortError
from kvledger.dynamics.engine.kv_factory import supports_prefix_caching
from kvledger.dynamics.engine.reservation_fit import ContiguousTooLargeError
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.errors import DoesNotFitError, InputError, UnknownNameError

__all__ = ["POLICY_PRESETS", "engine_config_from_plan", "plan_blocks_for_tokens", "default_async_scheduling",
           "refuses_max_model_len"]

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

    vLLM enables it from 0.14.0 unless something rules it out: ``config/scheduler.py :
    SchedulerConfig.async_scheduling`` defaults to None and ``config/vllm.py : VllmConfig.__post_init__``
    then turns it on (speculative methods other than EAGLE/MTP/n-gram, a padded drafter batch turned off and
    executors without support turn it off — not modelled here). Read in the wheels of 0.11.0 (default False,
    no automatic branch), 0.11.1, 0.12.0, 0.13.0 (the automatic branch is there but the field's default is
    False, so it is reached only from code), 0.14.0 and 0.19.0 (default None: on). The LLMServingSim RTX 4090
    run of 0.19.0 (``../shared/data/measured-runs/llmservingsim``, ``meta.json`` ``resolved_config``) states
    ``async_scheduling`` True with no flag given. Before 0.14 it is on only with ``--async-scheduling``.
    """
    if batching != "continuous":
        extra = (" (SGLang's overlap scheduling: its step timing, max(GPU, CPU), is in the step cost; the one-step lag "
                 "in seeing results is not modelled)") if batching == "sglang" else ""
        return False, f"batching={batching!r} schedules synchronously{extra}"
    if engine != "vllm":
        return False, f"the {engine} memory plan: synchronous steps"
    if parse_version(engine_version) >= ASYNC_DEFAULT_FROM:
        return (
            True,
            f"vLLM {engine_version} default (config/vllm.py: VllmConfig.__post_init__); simulate, goodput --simulate "
            f"and cost --simulate take --no-async-scheduling for a synchronous engine",
        )
    return False, (f"vLLM {engine_version}: off by default before 0.14 (read in 0.11.0–0.13.0); --async-scheduling "
                   "to turn on")


def _sglang_pool(plan) -> str:
    """The KV pool of an SGLang memory plan in words: its token slots and the rule that gives them."""
    m, s = plan.memory, plan.settings
    cell = m.bytes_per_block / m.block_size
    state = " − the Mamba state pool" if any(d.name.startswith("Mamba state") for d in m.deductions) else ""
    older = _older_sglang(plan)
    how = ("given" if s.mem_fraction_static is not None else
           f"SGLang {older}'s default for this GPU and TP, server_args.py" if older else
           "SGLang's default for this GPU and TP, arg_groups/memory_hook.py")
    recorded = next((n for n in m.notes if n.startswith((RECORDED_MATCH, RECORDED_USED))), "")
    if recorded.startswith(RECORDED_USED):  # a measured run's own pool (server_info), the plan's beside it
        return recorded.removeprefix(RECORDED_USED)
    return (f"{m.usable_blocks * m.block_size:,} token slots in {m.usable_blocks:,} pages of {m.block_size} "
            f"token{'s' if m.block_size > 1 else ''} from the SGLang memory plan ({m.engine_version}; `kvledger plan "
            f"--engine sglang`): floor({m.available_kv_bytes / 2**30:.2f} GiB for KV / {cell:,.0f} B per token) "
            f"aligned down to the page, the KV memory being free memory before the weights load × mem_fraction_static "
            f"{m.fraction:g} ({how}) − weights{state} "
            f"({'model_runner.py profile_max_num_token' if older else 'mem_cache/kv_cache_configurator.py'})"
            + (f"; {recorded.removeprefix(RECORDED_MATCH)}" if recorded else ""))


def _older_sglang(plan) -> str | None:
    """The SGLang release ``--engine-version`` names when it is older than the newest read (its rules apply), else
    None."""
    v = plan.settings.engine_version
    ver = parse_sglang_version(v) if v and plan.memory.engine == "sglang" else SGLANG_LATEST
    return sglang_version_text(ver) if ver < SGLANG_LATEST else None


def _sglang_release_note(plan) -> list[str]:
    """The note naming an older SGLang release's rules the replay applies (none for the newest read)."""
    older = _older_sglang(plan)
    if older is None:
        return []
    g, s = plan.gpu, plan.settings
    d = sglang_version_defaults(parse_sglang_version(older), g.nvidia_smi_mib or g.memory_bytes / 2**20, s.tp, s.pp)
    if s.mem_fraction_static is None:  # the plan's default holds the model's terms (the prefill graphs from 0.5.10)
        d = replace(d, mem_fraction_static=plan.memory.fraction)
    sizes = sglang_capture_sizes(g, s.tp, s.pp, older)
    return [N.sglang_release_rules(older, d, sizes is not None)]


def engine_config_from_plan(plan, *, policy: str | None = None, null_block_edge: bool = False,
                            retention_interval: int | None = None, **overrides: Any) -> tuple[EngineConfig, list[str]]:
    """An EngineConfig sized by ``plan`` (a vLLM or SGLang ``Plan``), with notes on where each setting came from;
    ``policy``: a key of ``POLICY_PRESETS`` (before ``overrides``, EngineConfig fields; None values ignored);
    ``null_block_edge``: at vLLM < 0.29's null-block edge, the pool vLLM starts with (``startup_counts_null_block``),
    for a caller that checks its requests (``null_block_edge.py``), else a refusal; ``retention_interval``: vLLM's
    ``--prefix-cache-retention-interval`` for a hybrid layout's rule (``retention_flag.py``; None: the release's
    default), tokens.

    Raises:
        DoesNotFitError: the KV pool holds no block, or not one max_model_len request (vLLM refuses to start).
        UnknownNameError: unknown policy preset.
    """
    m = plan.memory
    _refuse_unplannable(plan)
    fields: dict[str, Any] = {
        "num_gpu_blocks": m.num_gpu_blocks if m.engine == "vllm" else m.usable_blocks + 1,
        "block_size": m.block_size, "max_model_len": m.max_model_len,
        "max_num_batched_tokens": m.max_num_batched_tokens, "max_num_seqs": m.max_num_seqs,
    }
    notes: list[str] = []
    if policy is not None:
        if policy not in POLICY_PRESETS:
            raise UnknownNameError("policy", policy, POLICY_PRESETS, hint=f"Known: {', '.join(POLICY_PRESETS)}.")
        fields.update(POLICY_PRESETS[policy])
        notes.append(N.policy_preset(policy, POLICY_PRESETS[policy]))
    fields.update({k: v for k, v in overrides.items() if v is not None})
    if (m.engine == "vllm" and parse_version(m.engine_version) < (0, 8, 0) and overrides.get("batching") is None
            and fields.get("batching", "continuous") == "continuous"):  # simulate's own V0 note: sched_defaults
        notes.append(N.v0_engine_by_default(m.engine_version))
    if "async_scheduling" not in fields:
        on, why = default_async_scheduling(m.engine, m.engine_version, fields.get("batching", "continuous"))
        fields["async_scheduling"] = on
        notes.append(N.async_scheduling(on, why))
    bft = plan_blocks_for_tokens(plan)
    if bft is not None:
        fields["blocks_for_tokens"] = bft
        notes.append(N.HYBRID_LAYOUT)
        notes += _hybrid_fields(plan, fields, retention_interval)
    try:
        cfg = EngineConfig(**fields)
    except PoolTooShortError as e:  # vLLM's refusal, restated with the plan's range where it has one
        if _at_null_block_edge(plan, fields, e, null_block_edge):  # before vLLM 0.29: it starts
            return EngineConfig(**fields, startup_counts_null_block=e.need_blocks - e.usable_blocks), notes
        low = _max_len_low(plan, fields)
        if low is not None:
            raise DoesNotFitError(str(e) + N.max_len_low_end(*low)) from e
        est = _max_len_estimate(plan, fields)
        if est is None:
            raise
        raise DoesNotFitError(str(e) + N.max_len_low_end(est)) from e
    except ContiguousTooLargeError as e:  # the same refusal, with the blocks' sizes from the plan
        raise e.with_bytes(m.bytes_per_block) from None
    notes = _pool_notes(plan, cfg) + notes  # the limits the run uses, after the presets and the engine's own rules
    notes += [n for n in plan.memory.notes  # what the flag did, or not; the SSM dtype vLLM resolves auto to
              if n.startswith(("--enable-expert-parallel", "--mamba-ssm-cache-dtype", "Mamba SSM state in"))]
    if cfg.sglang_pool_caps_context:
        notes.append(N.sglang_pool_caps((cfg.num_gpu_blocks - 1) * cfg.block_size, cfg.max_model_len,
                                         cfg.sglang_max_req_len))
    return cfg, notes


def refuses_max_model_len(err: BaseException) -> bool:
    """Whether ``err`` is the engine's refusal of max_model_len (vLLM's start-up check, ``PoolTooShortError``), as
    :func:`engine_config_from_plan` raises it: itself, or restated with the plan's range."""
    return isinstance(err, PoolTooShortError) or isinstance(err.__cause__, PoolTooShortError)


def _max_len_low(plan, fields: dict[str, Any]) -> tuple[int, int] | None:
    """(vLLM's estimated max_model_len at the plan's point figure, the estimate at the low end of its memory range)
    when the pool and max_model_len are the plan's and the range reaches lower; else None (``kvledger plan``'s
    advice gives the same pair)."""
    from kvledger.accounting.advice_len import estimate_len, estimate_len_low

    m = plan.memory
    if fields["num_gpu_blocks"] != m.num_gpu_blocks or fields["max_model_len"] != m.max_model_len:
        return None
    est = estimate_len(plan)
    low = estimate_len_low(plan, est)
    return (est, low) if est and low and low < est else None


def _at_null_block_edge(plan, fields: dict[str, Any], err: PoolTooShortError, allowed: bool) -> bool:
    """Whether vLLM starts with the plan's pool though one max_model_len request needs more than its usable blocks (its
    start-up check counts the null block before 0.29, the first KV cache group alone in 0.14–0.18, no padding slot
    before 0.14: ``advice_startup_len``), for a caller that checks its requests (``allowed``); raise DoesNotFitError
    there otherwise, saying so. False off the edge (a pool or max_model_len other than the plan's, another engine, a
    real refusal)."""
    from kvledger.accounting.advice_startup_len import starts_never_scheduled

    m = plan.memory
    if m.engine != "vllm" or fields["num_gpu_blocks"] != m.num_gpu_blocks or fields["max_model_len"] != m.max_model_len:
        return False
    edge = starts_never_scheduled(plan, err.need_blocks)
    if edge is None or allowed:
        return edge is not None
    tail = "a run whose requests are known before it (kvledger simulate) goes ahead where none is that long"
    raise DoesNotFitError(f"{edge.message.removeprefix('fits: ')}; {tail}") from err


def _max_len_estimate(plan, fields: dict[str, Any]) -> int | None:
    """vLLM's estimated max_model_len at the plan's point figure where the refusal cannot name one itself (a hybrid
    layout's per-group rule: ``EngineConfig`` sees only its block function) and the pool is the plan's; else None."""
    from kvledger.accounting.advice_len import estimate_len

    m = plan.memory
    if (fields.get("blocks_for_tokens") is None or fields["num_gpu_blocks"] != m.num_gpu_blocks
            or fields["max_model_len"] != m.max_model_len):
        return None
    return estimate_len(plan)


def _refuse_unplannable(plan) -> None:
    """Raise InputError for a plan the simulator cannot run: no KV cache, or no usable block by the override; and
    DoesNotFitError (exit 3, as ``plan``) for a model too big or an override past the device's memory."""
    from kvledger.accounting.advice_override_oom import override_out_of_memory

    m = plan.memory
    if m.kv_free:
        raise InputError(N.model_without_kv(plan.model.name))
    if not m.fits and m.available_kv_bytes > 0 and m.usable_blocks <= 0 and plan.settings.num_gpu_blocks_override:
        raise InputError(N.override_leaves_no_block(m.num_gpu_blocks, m.available_kv_bytes))
    if oom := override_out_of_memory(plan):  # vLLM zero-fills the override's blocks: CUDA out of memory
        raise DoesNotFitError(oom.message)
    state = next((n for n in m.notes if n.startswith("SGLang would refuse to start")), None)
    if m.state_refused and state:  # SGLang's Mamba state slots serve no request (the plan's note says why); an empty
        raise DoesNotFitError(state)  # pool (max_running_requests 0 for want of KV) is the does-not-fit below
    if not m.fits:
        raise DoesNotFitError(N.does_not_fit(m.available_kv_bytes, m.usable_blocks))


def _pool_notes(plan, cfg: EngineConfig) -> list[str]:
    """Where the KV pool and the scheduler limits ``cfg`` runs with come from (and what of an SGLang plan the simulator
    leaves out)."""
    m = plan.memory
    pool = (_sglang_pool(plan) if m.engine == "sglang" else
            N.pool_from_override(m) if plan.settings.num_gpu_blocks_override else N.pool_from_plan(m))
    notes = [N.kv_pool(pool, N.limits(m, config=cfg))]
    notes += [q] if (q := pool_note(plan)) else []  # vLLM --quantization fp8: the weights the pool was left by
    notes += [plan.nodes.text] if plan.nodes is not None else []  # TP × PP past one node: the nodes plan assumes
    notes += release_lines(m.notes, m.engine, m.engine_version, keep=(NOT_MODELLED,))  # as plan
    if m.startup is not None:  # vLLM under --wddm: whether it starts with the display driver's hold in use (as plan)
        notes.append(m.startup.message)
    # SGLang under --wddm: what the hold takes off the KV; a vLLM plan's MXFP4 experts: the backend assumed and why
    notes += [n for n in m.notes if n.startswith(("--wddm:", "MXFP4 experts:"))]
    if m.engine == "sglang":
        notes += _sglang_release_note(plan)
        notes.append(N.SGLANG_NULL_BLOCK)
        for n in m.notes:
            if n.startswith("Mamba state:"):
                notes.append(n + N.SGLANG_MAMBA_SLOTS)
            elif n.startswith("sliding-window layers have their own pool"):
                notes.append(n + N.SGLANG_SLIDING_POOL)
    return notes


def _hybrid_fields(plan, fields: dict[str, Any], interval: int | None) -> list[str]:
    """Set a hybrid layout's step-block rule (``interval``: the retention interval set, None unset) and prefix
    caching in ``fields``; the notes saying so. In-flight tokens: vLLM ``config/vllm.py max_in_flight_tokens``."""
    m, notes = plan.memory, []
    if m.engine == "vllm" and plan.layout is not None and fields.get("batching", "continuous") != "vllm_v0":
        inflight = plan.inflight_tokens
        if parse_version(m.engine_version) >= (0, 33, 0):  # max_in_flight_tokens = max_concurrent_batches × MNBT
            inflight = (2 if fields["async_scheduling"] else 1) * fields["max_num_batched_tokens"]
        fields["step_blocks"] = StepBlockRule.from_layout(plan.layout, m.max_model_len, inflight, m.engine_version,
                                                          interval)
        if any(g.window_tokens for g in plan.layout.groups):  # the note is about windowed groups (not Mamba-only)
            notes.append(N.sliding_prefill_chunk(inflight))
    rule = fields.get("step_blocks")
    cacheable = rule is not None and supports_prefix_caching(rule) and (
        fields.get("prefix_caching_policy", "vllm"), fields.get("kv_allocation", "paged")) == ("vllm", "paged")
    if fields.get("enable_prefix_caching", True) and not cacheable:
        fields["enable_prefix_caching"] = False
        notes.append(HN.hybrid_no_caching(plan.layout, m.engine_version, plan.settings.enable_prefix_caching))
    elif fields.get("enable_prefix_caching", True):
        notes.append(HN.hybrid_caching(rule, m.engine_version, plan.settings.enable_prefix_caching))
    return notes
