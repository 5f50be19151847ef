"""The simulated engine's settings (vLLM names), their validation, and the policy tables they select from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvledger.accounting.chunked_budget import chunked_off_budget_error
from kvledger.dynamics.engine.kv_factory import make_kv_manager, supports_prefix_caching
from kvledger.dynamics.engine.reservation_fit import check_contiguous_fit
from kvledger.errors import DoesNotFitError, InputError, UnknownNameError
from kvledger.jsonable import json_fields, to_jsonable

__all__ = ["EngineConfig", "PoolTooShortError", "PREFIX_CACHING_POLICIES", "SCHEDULING_POLICIES", "BATCHING_POLICIES",
           "KV_ALLOCATION_POLICIES", "V0_WATERMARK", "make_kv_manager"]

#: vLLM V0 ``BlockSpaceManager(watermark=0.01)``: a prompt is admitted only if int(0.01 × num_gpu_blocks) stay free
V0_WATERMARK = 0.01

PREFIX_CACHING_POLICIES = {
    "vllm": "vLLM automatic prefix caching: chained hashes of full blocks, LRU through the free queue",
    "sglang": "SGLang RadixAttention: token-granular radix tree (page_size 1), LRU eviction of leaves",
}
SCHEDULING_POLICIES = {
    "fcfs": "first come, first served (vLLM and SGLang default)",
    "lpm": "longest prefix match first; FCFS when more than 128 wait (SGLang schedule_policy.py)",
}
BATCHING_POLICIES = {
    "continuous": "iteration-level scheduling: requests join and leave every step (Orca, vLLM)",
    "static": "a batch is formed from waiting requests and runs until its last request ends; no joins",
    "sglang": "SGLang's scheduler (managers/scheduler.py, 0.5.x, mixed chunks off): a step is a prefill "
              "batch whenever one can be formed (running decodes pause), else a decode batch; admission reserves "
              "running requests' future tokens (new_token_ratio); one chunked request; decode-time retraction; "
              "overlap scheduling's step timing, max(GPU, CPU), is in the step cost, its one-step lag in seeing "
              "results (a finished request frees its KV a step later) is not modelled",
    "vllm_v0": "vLLM V0 default scheduler, chunked prefill off (vllm/core/scheduler.py::_schedule; "
               "later _schedule_default): prefills first; a step is prompt-only when a waiting prompt can be "
               "admitted (its blocks + 1% watermark free, max_num_batched_tokens, max_num_seqs, max_paddings), "
               "else every running request decodes one token; recompute preemption of the newest",
}
KV_ALLOCATION_POLICIES = {
    "paged": "blocks allocated as tokens are computed (PagedAttention)",
    "contiguous": "max_model_len worth of blocks reserved per request at admission (pre-paging systems, Orca 'Max')",
}


class PoolTooShortError(DoesNotFitError):
    """vLLM's start-up refusal: a max_model_len request needs more KV blocks than the pool has (a caller knowing the
    plan may restate it with its estimates); exit 3. ``need_blocks`` / ``usable_blocks``: that request's, the pool's."""

    need_blocks: int = 0
    usable_blocks: int = 0


@json_fields(read={"blocks_for_tokens": "blocks_rule_label", "step_blocks": "step_blocks_label"},
             extra=("caps_output", "**scheduler_json"),
             exclude=("startup_counts_null_block", "long_prefill_token_threshold", "long_prefill_cap_alone",
                      "long_prefill_adaptive"))
@dataclass(frozen=True)
class EngineConfig:
    """One replica's engine settings, named as vLLM names them.

    Attributes:
        num_gpu_blocks: KV blocks in the pool, blocks; block 0 is vLLM's null block, so
            ``num_gpu_blocks − 1`` are usable (from the memory plan); V0 had no null block.
        max_model_len: longest sequence (prompt + output) accepted, tokens.
        block_size: tokens per KV block, tokens (vLLM default 16).
        max_num_batched_tokens: token budget per step, tokens (vLLM server default on
            H100/H200: 8192; below 70 GiB: 2048; docs/engine-model.md §1.3).
        max_num_seqs: most requests running at once, count (vLLM: 1024 on ≥ 70 GiB GPUs, else 256).
        enable_chunked_prefill: split prompts across steps under the budget (vLLM v1 default on).
        enable_prefix_caching: reuse KV of shared prompt prefixes (vLLM v1 default on).
        prefix_caching_policy: key of ``PREFIX_CACHING_POLICIES``.
        scheduling_policy: key of ``SCHEDULING_POLICIES``.
        batching: key of ``BATCHING_POLICIES``.
        kv_allocation: key of ``KV_ALLOCATION_POLICIES``.
        scheduler_reserve_full_isl: admit a request only if its whole prompt fits in the free
            blocks (vLLM default True; the ``vllm_v0`` rule always does).
        max_paddings: ``vllm_v0`` only: the padded prompt batches of vLLM 0.2.x (0.2.3 in
            DistServe's runs), which ran prompts as a 2-D [batch, longest prompt] tensor: a prompt
            batch's padded size (batch × longest prompt) must fit ``max_num_batched_tokens``, its
            padding (padded size − Σ prompt tokens) must not exceed ``max_paddings`` tokens (vLLM
            default 256), and the step is priced on the padded size. None: unpadded, as later V0
            releases (``_schedule_default``) count prompt tokens.
        async_scheduling: vLLM v1's async scheduling (``--async-scheduling``; on by default from 0.14,
            ``config/vllm.py : VllmConfig.__post_init__``): a batch queue of two steps
            (``v1/engine/core.py : EngineCore.step_with_batch_queue``), so step k+1 is scheduled
            while step k runs — a request arriving during step k joins step k+2, and a request
            finishing in step k frees its blocks (and its ``max_num_seqs`` seat) only after step
            k+1 is scheduled. Only with ``batching='continuous'``. False: synchronous engine.
        async_output_proc: ``vllm_v0`` only: V0's async output processor (0.6.0 to 0.10, on unless
            ``--enforce-eager``; ``engine/llm_engine.py : step``): a request's last token, sampled in step k, is
            processed during step k+1, so the request is still running when k+1 is scheduled (``core/scheduler.py``:
            "an extra decode run is done") and frees its seat and blocks after it (async_steps.py).
        step_blocks: with ``blocks_for_tokens``, vLLM's per-step sliding-window block rule
            (``kvledger.dynamics.engine.swa_step.StepBlockRule``): a prefill chunk holds blocks for all its
            tokens until the next step frees those left of the window, and admission counts
            ``max_admission_blocks_per_request``; with align-mode Mamba state groups it also cuts prefill chunks to
            block boundaries (vLLM 0.33 ``_mamba_block_aligned_split``); None: the steady-state window throughout.
        ignore_eos: ``batching='sglang'`` only: requests are sent with ``ignore_eos`` (benchmark replays of
            fixed output lengths), so SGLang's admission reserves their whole remaining output; False: it
            reserves ``new_token_ratio`` of it, as for requests that may stop at EOS.
        cap_output_at_max_model_len: vLLM v1 (0.33): serve a request whose prompt + output exceeds
            ``max_model_len`` with its output capped at ``max_model_len − prompt``, rejecting only
            prompts ≥ ``max_model_len``; False: reject prompt + output > ``max_model_len`` (V0's
            OpenAI server; SGLang 0.5.x ``TokenizerManager._validate_one_request`` without
            ``--allow-auto-truncate``). None → False under ``vllm_v0`` and ``sglang``, else True.
        blocks_for_tokens: blocks a request holds with ``n`` computed tokens, summed over KV
            cache groups (hybrid / sliding-window plans); None → ``ceil(n / block_size)``.
            Should accept numpy int64 arrays (elementwise) for speed.
        startup_counts_null_block: blocks past the usable ones vLLM's start-up check lets a max_model_len request need
            (never scheduled): 1 before 0.29 (block 0), more where it counts fewer (vllm_check_demand); not in JSON.
        long_prefill_token_threshold: vLLM v1's cap on a request's chunk per step, tokens (0: none; ``Scheduler.
            long_prefill_cap``), held for a request alone with ``long_prefill_cap_alone`` (vLLM ≤ 0.30), floored at
            the budget's fair share with ``long_prefill_adaptive`` (≥ 0.31 ``--long-prefill-token-threshold-adaptive``).
    """

    num_gpu_blocks: int
    max_model_len: int
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    prefix_caching_policy: str = "vllm"
    scheduling_policy: str = "fcfs"
    batching: str = "continuous"
    kv_allocation: str = "paged"
    scheduler_reserve_full_isl: bool = True
    max_paddings: int | None = None
    blocks_for_tokens: Callable[[int], int] | None = None
    cap_output_at_max_model_len: bool | None = None
    async_scheduling: bool = False
    ignore_eos: bool = True
    step_blocks: Any = None
    async_output_proc: bool = False
    startup_counts_null_block: int = 0
    long_prefill_token_threshold: int = 0
    long_prefill_cap_alone: bool = False
    long_prefill_adaptive: bool = False

    def __post_init__(self) -> None:
        for name in ("num_gpu_blocks", "max_model_len", "block_size", "max_num_batched_tokens", "max_num_seqs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(f"engine setting {name} must be an integer, got {v!r}")
            if v < 1:
                raise InputError(f"engine setting {name} must be ≥ 1, got {v}")
        for name, table in (("prefix_caching_policy", PREFIX_CACHING_POLICIES),
                            ("scheduling_policy", SCHEDULING_POLICIES), ("batching", BATCHING_POLICIES),
                            ("kv_allocation", KV_ALLOCATION_POLICIES)):
            if getattr(self, name) not in table:
                raise UnknownNameError(name.replace("_", " "), getattr(self, name), table,
                                       hint=f"Known: {', '.join(table)}.")
        if (t := self.long_prefill_token_threshold) and (type(t) is not int or t < 0 or self.batching != "continuous"):
            raise InputError(f"long_prefill_token_threshold {t!r}: an integer ≥ 0, with vLLM v1's continuous batching")
        if (pad := self.max_paddings) is not None and (isinstance(pad, bool) or not isinstance(pad, int) or pad < 0):
            raise InputError(f"engine setting max_paddings must be None or an integer ≥ 0, got {pad!r}")
        self._check_combinations()
        if self.batching == "vllm_v0":
            self._check_v0()
        self._check_pool()
        check_contiguous_fit(self)  # the pool fits one request as it grows: does one contiguous reservation?

    def _check_combinations(self) -> None:
        if not self.enable_chunked_prefill and (msg := chunked_off_budget_error(self.max_num_batched_tokens,
                                                                                self.max_model_len)):
            raise InputError(msg)
        if self.kv_allocation == "contiguous" and self.enable_prefix_caching:
            raise InputError("kv_allocation='contiguous' models pre-paging engines, which had no prefix caching; "
                             "set enable_prefix_caching=False (--no-enable-prefix-caching)")
        if self.max_paddings is not None and self.batching != "vllm_v0":
            raise InputError("max_paddings applies to vLLM V0's padded prompt batches only; set batching='vllm_v0' "
                             "or leave max_paddings unset")
        if self.async_scheduling and self.batching != "continuous":
            raise InputError(f"async_scheduling models vLLM v1's batch queue and needs batching='continuous', got "
                             f"batching={self.batching!r}; use --no-async-scheduling for the {self.batching} rule")
        if self.async_output_proc and self.batching != "vllm_v0":
            raise InputError("async_output_proc is vLLM V0's output processor: it needs batching='vllm_v0'")
        if self.step_blocks is not None and (self.blocks_for_tokens is None or self.batching == "vllm_v0"):
            raise InputError("step_blocks (vLLM v1's per-step sliding-window rule) needs blocks_for_tokens and a v1 "
                             "batching rule")
        if self.blocks_for_tokens is not None and self.enable_prefix_caching and not self.hybrid_caching:
            raise InputError("prefix caching is modelled for hybrid layouts only with vLLM's per-step sliding-window "
                             "rule (step_blocks), groups of one block size (attention, or full attention and "
                             "align-mode Mamba state), paged, prefix_caching_policy='vllm'; set "
                             "enable_prefix_caching=False")

    def _check_v0(self) -> None:
        """The settings ``vllm_v0`` models: V0's default scheduler (no chunked prefill), FCFS, paged, no caching."""
        bad = [msg for cond, msg in (
            (self.enable_chunked_prefill, "enable_chunked_prefill=False (--no-enable-chunked-prefill; V0 with chunked "
                                          "prefill used another scheduler, _schedule_chunked_prefill, whose mixed "
                                          "steps are close to batching='continuous')"),
            (self.enable_prefix_caching, "enable_prefix_caching=False (--no-enable-prefix-caching; V0's prefix caching "
                                         "is not modelled)"),
            (self.scheduling_policy != "fcfs", "scheduling_policy='fcfs' (--scheduling-policy fcfs; V0's default "
                                               "scheduler is FCFS)"),
            (self.kv_allocation != "paged", "kv_allocation='paged' (--kv-allocation paged)")) if cond]
        if bad:
            raise InputError("batching='vllm_v0' models vLLM V0's default scheduler and needs " + "; ".join(bad))
        need, wm = self.blocks_needed(self.max_model_len), self.v0_watermark_blocks
        if need > self.num_gpu_blocks - wm:
            raise InputError(
                f"a request of max_model_len {self.max_model_len:,} tokens needs {need:,} KV blocks, more than the "
                f"{self.num_gpu_blocks:,} blocks less vLLM V0's watermark of {wm:,} (1%): V0 would ignore such a "
                "prompt (AllocStatus.NEVER). Lower max_model_len or give the KV cache more blocks")

    @property
    def v0_watermark_blocks(self) -> int:
        """Blocks V0 keeps free when admitting a prompt, ``int(0.01 × num_gpu_blocks)`` (block_manager.py), blocks."""
        return int(V0_WATERMARK * self.num_gpu_blocks)

    @property
    def hybrid_caching(self) -> bool:
        """Prefix caching on a hybrid layout (full + sliding: hybrid_kv.py; + Mamba state: mamba_prefix.py), paged."""
        return (self.enable_prefix_caching and self.step_blocks is not None and self.prefix_caching_policy == "vllm"
                and self.kv_allocation == "paged" and supports_prefix_caching(self.step_blocks))

    @property
    def caps_output(self) -> bool:
        """Whether requests longer than max_model_len are served capped (True) or rejected (see the field)."""
        c = self.cap_output_at_max_model_len
        return self.batching not in ("vllm_v0", "sglang") if c is None else c

    @property
    def num_usable_blocks(self) -> int:
        """Blocks requests can hold: all of them in V0, all but the null block 0 in vLLM v1, blocks."""
        return self.num_gpu_blocks if self.batching == "vllm_v0" else self.num_gpu_blocks - 1

    @property
    def sglang_max_req_len(self) -> int | None:
        """SGLang's ``max_req_len = min(context_len − 1, pool tokens − 1)`` (0.5.23 ``managers/tp_worker.py :
        get_worker_info``; pool tokens = (num_gpu_blocks − 1) × block_size), tokens; None outside ``sglang``."""
        if self.batching != "sglang":
            return None
        return min(self.max_model_len, (self.num_gpu_blocks - 1) * self.block_size) - 1

    @property
    def sglang_pool_caps_context(self) -> bool:
        """SGLang starts with a pool shorter than max_model_len, capping requests to it (tp_worker.py warns)."""
        return self.batching == "sglang" and self.sglang_max_req_len < self.max_model_len - 1

    def _check_pool(self) -> None:
        if self.batching == "sglang":  # SGLang starts (a warning), asserting only max_req_len > 0 (tp_worker.py)
            if self.sglang_max_req_len < 1:
                tokens = (self.num_gpu_blocks - 1) * self.block_size
                raise DoesNotFitError(f"the KV pool holds {tokens:,} tokens: SGLang stops at start-up ('Memory pool "
                                      "size is too small'); give the KV cache more memory")
            return
        usable = self.num_usable_blocks
        need = self.blocks_needed(self.max_model_len)
        if self.step_blocks is not None:  # windows: vLLM's start-up check counts the in-flight tokens and a block more
            need = max(need, self.step_blocks.startup(self.max_model_len))
        if need > usable + self.startup_counts_null_block:
            fit = usable * self.block_size if self.blocks_for_tokens is None else None
            hint = f"; lower max_model_len to ≤ {fit:,} (--max-model-len {fit})" if fit else "; lower max_model_len"
            err = PoolTooShortError(
                f"the KV pool has {usable:,} usable blocks of {self.block_size:,} token{'s' * (self.block_size > 1)} "
                f"(block 0 is the null block), but one request of max_model_len {self.max_model_len:,} tokens needs "
                f"{need:,} blocks, so it could never run (vLLM refuses to start in this case){hint}, or give the KV "
                "cache more memory")
            err.need_blocks, err.usable_blocks = need, usable
            raise err

    def blocks_needed(self, num_tokens: int) -> int:
        """Blocks a request holds with ``num_tokens`` computed tokens, blocks."""
        if self.blocks_for_tokens is None:
            return -(-num_tokens // self.block_size)
        return int(self.blocks_for_tokens(num_tokens))

    @property
    def caching_policy_in_effect(self) -> str | None:
        """The prefix-caching policy that runs, or None when caching is off."""
        return self.prefix_caching_policy if self.enable_prefix_caching else None

    @property
    def blocks_rule_label(self) -> str | None:
        """``blocks_for_tokens`` as JSON: "custom", or None for the default ceil(tokens / block_size)."""
        return None if self.blocks_for_tokens is None else "custom"

    @property
    def scheduler_json(self) -> dict[str, Any]:
        """For JSON, every run: the long-prefill fields (threshold 0: vLLM's default; the other two null) and the hybrid
        rule's ``prefix_cache_retention_interval`` (0: 0.29+'s default; null: no hybrid rule, or every block kept)."""
        t, rule = self.long_prefill_token_threshold, self.step_blocks
        return {"long_prefill_token_threshold": t, "long_prefill_cap_alone": self.long_prefill_cap_alone if t else None,
                "long_prefill_token_threshold_adaptive": self.long_prefill_adaptive if t else None,
                "prefix_cache_retention_interval": rule.retention.prefix_cache_retention_interval if rule else None}

    @property
    def step_blocks_label(self) -> str | None:
        """``step_blocks`` as JSON: the rule's name, or None."""
        return None if self.step_blocks is None else "vLLM per-step hybrid rule (sliding-window / Mamba groups)"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready settings (``blocks_for_tokens`` reported as "custom" or None)."""
        return to_jsonable(self)

