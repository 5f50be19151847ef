"""vLLM's version-dependent rules: defaults, which terms the KV budget subtracts, block sizes, the log lines it prints.

Read from the released wheels (0.8.5, 0.10.2, 0.11.0, 0.15.0, 0.20.0, 0.33.0) as summarised in ``docs/engine-model.md``
§1–§2; each function names the engine file it mirrors. Where a change happened between two read versions and the exact
release is unknown, the rule switches at the later read version and the returned source says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kvledger.accounting.vllm_predates import beyond_near_future, far_future_message, predates_message
from kvledger.accounting.vllm_releases import RELEASE_STRING, dev_build_base
from kvledger.errors import InputError
from kvledger.units import GiB

__all__ = ["LATEST", "parse_version", "version_tuple", "era", "default_gpu_memory_utilization", "default_batch_limits",
           "subtracts_cudagraphs", "default_block_size", "printed_capacity_lines",
           "MambaCacheRule", "mamba_cache_rule", "MAMBA_PREFIX_CACHING_ARCHITECTURES", "v0_long_context_chunked"]

LATEST = "0.33.0"
"""Newest vLLM release whose code was read (docs/engine-model.md §0)."""


def version_tuple(v: str) -> tuple[int, int, int] | None:
    """``"0.10.2"`` → (0, 10, 2), "v0.11", "0.24.0rc1" too; None for no version; any release (modelled or not). A
    development build is the release its code holds (``vllm_releases.dev_build_base``: 0.11.1.dev3 → (0, 11, 0))."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(v).strip())
    if not m:
        return None
    ver = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return dev_build_base(str(v), ver) or ver


def parse_version(v: str) -> tuple[int, int, int]:
    """``version_tuple`` of a release read, or the next minor. Raises InputError: none, before 0.5, or further ahead."""
    ver = version_tuple(v)
    if ver is None:
        raise InputError(f"--engine-version {v!r} is not a version like 0.10.2")
    if not RELEASE_STRING.match(str(v).strip()):  # one whole release: "0.19.0,0.33.0" is no version, not 0.19.0
        raise InputError(f"--engine-version {v!r} is not one version like 0.10.2 (run once per version to compare)")
    if ver < (0, 5, 0) or beyond_near_future(ver, version_tuple(LATEST)):
        raise InputError(predates_message(v, ver) if ver < (0, 5, 0) else far_future_message(v, LATEST))
    return ver


def era(ver: tuple[int, int, int]) -> str:
    """Which log-format/memory-formula era: "v0" (<0.8), "v1-0.8", "v1-0.10" (0.9–0.23), "v1-0.24" (≥0.24)."""
    if ver < (0, 8, 0):
        return "v0"
    if ver < (0, 9, 0):
        return "v1-0.8"
    if ver < (0, 24, 0):
        return "v1-0.10"
    return "v1-0.24"


def default_gpu_memory_utilization(ver: tuple[int, int, int]) -> tuple[float, str]:
    """``gpu_memory_utilization`` default (``config/cache.py::CacheConfig``): 0.9 up to 0.19, 0.92 from 0.20."""
    if ver >= (0, 20, 0):
        return 0.92, "vLLM ≥0.20 default (config/cache.py::CacheConfig)"
    return 0.9, ("vLLM ≤0.15 default (config/cache.py::CacheConfig)" if ver < (0, 16, 0) else "vLLM default 0.9 (read "
                 "in ≤0.15; a 0.19.1 start-up at its defaults prints 'increase --gpu-memory-utilization from 0.9000')")


def default_batch_limits(ver: tuple[int, int, int], gpu_total_bytes: int, gpu_name: str, max_model_len: int,
                         sliding_window: bool = False, v0_engine: bool = False) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, source) for ``vllm serve`` when the user sets neither.

    Mirrors ``engine/arg_utils.py::EngineArgs.get_batch_defaults`` (0.33) and its 0.10–0.15 form:
    ≥160 GiB → 16384/1024 (from 0.28.0: the branch is absent in 0.20.0–0.27.0's wheels, present in 0.28–0.31);
    ≥70 GiB and not an A100 → 8192/1024; otherwise 2048/256.
    V0 had no chunked prefill by default: max(max_model_len, 2048) tokens and 256 sequences, except where
    ``v0_long_context_chunked`` turns it on (``SchedulerConfig`` then defaults to 512 tokens in 0.6.3, 2048 in 0.7.3;
    0.6.4–0.6.6 not read: 2048 applied from 0.7.0). Capped at max_num_seqs × max_model_len. ``v0_engine``: the V0 engine
    on a release whose default is V1 (0.8–0.10, ``VLLM_USE_V1=0``): 0.9.0's ``create_engine_config`` calls
    ``_set_default_args_v0`` then, never the V1 usage-context defaults, so V0's rule holds there too.
    """
    gib = gpu_total_bytes / GiB
    if era(ver) == "v0" or v0_engine:
        if v0_long_context_chunked(max_model_len, sliding_window):
            t = 2048 if ver >= (0, 7, 0) else 512
            return t, 256, (f"vLLM V0 turns chunked prefill on above 32K (max_model_len {max_model_len:,} > 32,768; "
                            f"arg_utils.py use_long_context): {t} tokens ({'0.7.3' if t == 2048 else '0.6.3'} "
                            "SchedulerConfig), 256 seqs")
        return max(max_model_len, 2048), 256, "vLLM V0 default (no chunked prefill: max(max_model_len, 2048); 256 seqs)"
    if era(ver) == "v1-0.8":
        mnbt, seqs, why = 2048, 256, "vLLM 0.8 server default (2048 tokens, 256 seqs)"
    elif gib >= 160 and ver >= (0, 28, 0):
        mnbt, seqs, why = 16384, 1024, f"vLLM server default for ≥160 GiB GPUs ({gib:.1f} GiB): 16384 tokens, 1024 seqs"
    elif gib >= 70 and "a100" not in gpu_name.lower():
        mnbt, seqs, why = 8192, 1024, (f"vLLM server default for ≥70 GiB non-A100 GPUs ({gib:.1f} GiB): 8192 tokens, "
                                       "1024 seqs")
    else:
        mnbt, seqs, why = 2048, 256, "vLLM server default for smaller GPUs and A100: 2048 tokens, 256 seqs"
    return min(mnbt, seqs * max_model_len), seqs, why + " (engine/arg_utils.py::get_batch_defaults)"


def v0_long_context_chunked(max_model_len: int, sliding_window: bool) -> bool:
    """True where vLLM V0 turns chunked prefill on by default: ``use_long_context`` (max_model_len > 32768) without
    a sliding window (``engine/arg_utils.py``: ``not use_sliding_window`` in 0.6.3's ``create_engine_config`` and
    0.9.0's ``_set_default_args_v0``; their multimodal, LoRA, spec-decode, pooling, MLA exclusions not modelled)."""
    return max_model_len > 32768 and not sliding_window


#: last vLLM release whose V1 engine turns chunked prefill on whatever the flag says (below)
V1_FORCES_CHUNKED_PREFILL_UNTIL = (0, 11, 0)


def v1_forces_chunked_prefill(ver: tuple[int, int, int]) -> bool:
    """True where vLLM's V1 engine sets ``enable_chunked_prefill = True`` for every generative model before reading
    the user's value ("V1 always uses chunked prefills"): ``engine/arg_utils.py :: _set_default_args_v1`` in 0.9.0,
    ``_set_default_args`` in 0.11.0 — so ``--no-enable-chunked-prefill`` has no effect and the token budget is the
    usage-context default. 0.11.1 honours the flag (it sets the default only when the flag is unset; read in 0.11.1,
    0.11.2, 0.13.0–0.19.0). 0.8.x (V1's first default release) and 0.10.x were not read: assumed as 0.9.0/0.11.0."""
    return (0, 8, 0) <= ver <= V1_FORCES_CHUNKED_PREFILL_UNTIL


def subtracts_cudagraphs(ver: tuple[int, int, int], rocm: bool = False) -> bool:
    """True from 0.20, where the CUDA-graph estimate is subtracted from the KV budget by default (0.20.0 ``envs.py``:
    ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` default "1", 0.19 "0"; its log line says "since v0.21.0", but 0.20.0
    has it on); on ROCm from 0.26: ``gpu_worker.py::determine_available_memory`` estimates only ``if not is_rocm()``
    in 0.20, ``if is_cuda()`` in 0.21–0.25, ``if is_cuda_alike()`` from 0.26 (read in the 0.20–0.26 wheels)."""
    return ver >= ((0, 26, 0) if rocm else (0, 20, 0))


def default_block_size(ver: tuple[int, int, int], is_mla: bool, arch: str) -> tuple[int, str]:
    """Tokens per KV block when the user does not set ``--block-size``.

    16 (``CacheConfig.DEFAULT_BLOCK_SIZE``) unless the attention backend needs more
    (``AttentionBackend.get_preferred_block_size``): MLA on Hopper gets 64 up to 0.17 — with no backend given,
    ``platforms/cuda.py::CudaPlatform.check_and_update_config`` sets ``use_flashmla`` whenever FlashMLA's dense kernel
    is supported and forces ``block_size = 64`` ("Forcing kv cache block size to 64 for FlashMLA backend"; read in
    0.11, 0.14.1, 0.16.0, 0.17.0), even where FLASH_ATTN_MLA then heads the backend list — and 16 from 0.18, where that
    forcing is gone and ``update_block_size_for_backend`` takes FLASH_ATTN_MLA's preferred size (0.18.0; the 0.19
    DeepSeek-V2-Lite H100 log allocates 16 tokens per block). The DeepSeek-R1 H200 start-ups of vme_startups.csv print
    concurrency that only 64-token blocks give up to 0.16 (0.16.0: 10,283 blocks / cdiv(10,000, 64) = 65.50x) and
    16-token blocks from 0.18 (65.40x). MLA on Blackwell from 0.18 is FLASHINFER_MLA's preferred 32 (0.18.0
    ``update_block_size_for_backend``; 0.10.2–0.17.1 force another block: ``vllm_mla_blackwell``).
    """
    if is_mla and arch == "sm90":
        if ver >= (0, 18, 0):
            return 16, "vLLM ≥0.18 on Hopper: FLASH_ATTN_MLA's preferred block 16 (update_block_size_for_backend)"
        return 64, "vLLM ≤0.17 on Hopper forces block 64 for FlashMLA (platforms/cuda.py check_and_update_config)"
    if is_mla and arch == "sm100":
        return 32, "vLLM on Blackwell picks FLASHINFER_MLA: its preferred block 32 (update_block_size_for_backend)"
    return 16, "vLLM default block_size 16 (config/cache.py::DEFAULT_BLOCK_SIZE)"


def printed_capacity_lines(ver: tuple[int, int, int], num_blocks: int, block_size: int, num_groups: int,
                           max_model_len: int, blocks_per_request: int, cpu_blocks: int = 0) -> list[str]:
    """The start-up lines reporting KV capacity, exactly as this vLLM version formats them (docs/engine-model.md §1.7).

    Args:
        num_blocks: GPU blocks including the null block, count. blocks_per_request: R(L), blocks.
        num_groups: KV cache groups. cpu_blocks: V0 swap blocks (4 GiB swap space by default).
    """
    e, L = era(ver), max_model_len
    if e == "v0":
        c = num_blocks * block_size / L
        return [f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}",
                f"Maximum concurrency for {L} tokens per request: {c:.2f}x"]
    if e == "v1-0.8":
        tokens = num_blocks * block_size
        return [f"GPU KV cache size: {tokens:,} tokens", f"Maximum concurrency for {L:,} tokens per request: "
                                                         f"{tokens / L:.2f}x"]
    c = num_blocks / blocks_per_request
    if e == "v1-0.10":
        tokens = (num_blocks // num_groups) * block_size
        return [f"GPU KV cache size: {tokens:,} tokens", f"Maximum concurrency for {L:,} tokens per request: {c:.2f}x"]
    tokens = int(c * L)
    if ver >= (0, 33, 0):
        return [f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {L:,} tokens per request: {c:.2f}x"]
    return [f"GPU KV cache size: {tokens:,} tokens", f"Maximum concurrency for {L:,} tokens per request: {c:.2f}x"]


@dataclass(frozen=True)
class MambaCacheRule:
    """How this vLLM version keeps Mamba / linear-attention state in the block pool.

    Attributes:
        mode: ``mamba_cache_mode``: "none" (one live state per request), "align" (states kept at block
            boundaries for prefix caching) or "all" (a state kept for every block of tokens; the default of
            Mamba-family models with prefix caching in 0.19–0.27).
        enable_prefix_caching: the resolved prefix-caching switch.
        state_pages_per_request: pages one request may claim in each state group (``MambaSpec.max_memory_usage_bytes``
            ÷ page size; no speculative decoding in a plan, so num_speculative_blocks = 0), pages; in "all" mode
            this is per block instead (see ``page_per_block``).
        checkpoint_alignment_tokens: the token grid the hybrid block size must be a multiple of (None: no
            constraint), tokens: in align mode (0.33) where prefill checkpoints land; in "all" mode the Mamba
            kernel's chunk (``get_mamba_chunk_size``).
        source: where the rule was read.
        page_per_block: "all" mode: one state page per block of a request's tokens, so a request may claim
            cdiv(max_model_len, block_size) pages in each state group (``MambaSpec.max_memory_usage_bytes``).
    """

    mode: str
    enable_prefix_caching: bool
    state_pages_per_request: int
    checkpoint_alignment_tokens: int | None
    source: str
    page_per_block: bool = False


MAMBA_PREFIX_CACHING_ARCHITECTURES = frozenset({
    "BambaForCausalLM", "FalconH1ForCausalLM", "FalconMambaForCausalLM", "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM", "Mamba2ForCausalLM", "MambaForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "Zamba2ForCausalLM"})
"""Architectures whose vLLM class implements ``SupportsMambaPrefixCaching`` ("all" mode), read in 0.19 and 0.24
(``models/{bamba,falcon_h1,granitemoehybrid,jamba,mamba,mamba2,nemotron_h,zamba2}.py``; FalconMamba and NemotronH-Puzzle
are registry aliases; Bamba was removed in 0.23)."""


_GDN_FLASHINFER_CHECKPOINT_TOKENS = 64
"""Checkpoint grid of the FlashInfer GDN prefill kernel (``v1/attention/backends/gdn_attn.py``, vLLM 0.33), tokens."""


def _checkpoint(mixers: set[str], arch: str) -> tuple[int, int | None, str]:
    """(checkpoint pages, checkpoint alignment, why) for vLLM 0.33's align mode.

    ``layers/mamba/mamba_mixer2.py : MambaMixer2.get_kv_cache_spec`` always declares one prefill-checkpoint
    page with alignment 1. ``gdn/qwen_gdn_linear_attn.py : GatedDeltaNetAttention.get_kv_cache_spec`` declares one
    (on a 64-token grid) only when ``_resolve_gdn_prefill_backend`` picks FlashInfer: on Hopper always, on
    Blackwell when head_k_dim is 128 and torch's CUDA runtime is 13+ (assumed here: the GDN models read have
    128-wide key heads). Mamba-1 layers (``MambaMixer``) declare none. ``layers/mamba/abstract.py :
    get_mamba_prefill_checkpoint_alignment`` gives an alignment only when every state layer has one.
    """
    if mixers == {"mamba2"}:
        return 1, 1, "Mamba-2 layers export a prefill checkpoint (MambaMixer2.get_kv_cache_spec)"
    if mixers == {"gated_deltanet"}:
        if arch == "sm90" or arch.startswith("sm10") or arch.startswith("sm12"):
            return 1, _GDN_FLASHINFER_CHECKPOINT_TOKENS, (
                f"GDN prefill on FlashInfer ({arch}) exports a prefill checkpoint on a 64-token grid "
                "(qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend; Blackwell assumes CUDA 13 and head_k_dim 128)")
        return 0, None, f"GDN prefill on Triton/FLA ({arch or 'unknown GPU'}): no prefill checkpoint page"
    return 0, None, f"state layers {sorted(mixers)}: no prefill checkpoint page"


def mamba_cache_rule(ver: tuple[int, int, int], enable_prefix_caching: bool | None, has_attention: bool,
                     mixers: set[str], arch: str, *, architectures: tuple[str, ...] = (),
                     mamba_chunk_tokens: int = 2048) -> MambaCacheRule:
    """The Mamba cache mode and per-request state pages of a model with state layers.

    Prefix caching defaults (``config/model.py : ModelConfig.is_prefix_caching_supported``): generative hybrid
    models get it from 0.26 (off in 0.19, 0.24 and 0.25; on in 0.26, 0.27, 0.28 and 0.33);
    attention-free (pure Mamba) models never by default. ``model_executor/models/config.py :
    MambaModelConfig.verify_and_update_config`` then turns prefix caching into ``mamba_cache_mode`` "all" for
    models with ``SupportsMambaPrefixCaching`` (``MAMBA_PREFIX_CACHING_ARCHITECTURES``) and "align" for the others
    in 0.19–0.27 (read in 0.19, 0.22, 0.24, 0.26, 0.27), "align" for every model from 0.28 ("all" only when asked
    for with ``--mamba-cache-mode all``, not a plan option), and "none" without prefix caching.
    ``v1/kv_cache_interface.py : MambaSpec.max_memory_usage_bytes``: "none" → 1 + spec pages; "align" → 2 + spec
    (+ prefill-checkpoint pages in 0.33; 0.29–0.32 not read, checkpoints applied from 0.33); "all" →
    cdiv(max_model_len, mamba_block_size) + spec pages. In "all" mode a hybrid model's blocks are aligned to the
    Mamba kernel chunk (``HybridAttentionMambaModelConfig.verify_and_update_config``, 0.19; in
    ``platforms/interface.py`` from 0.24, same rule for non-MLA attention): attention and Mamba block size =
    lcm(chunk, 16) × cdiv(cdiv(state page, attention bytes per token), lcm(chunk, 16)). vLLM before 0.19 is not
    modelled here (one page, as "none").

    Args:
        enable_prefix_caching: ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``; None = the default.
        has_attention: the model also has attention layers (vLLM ``is_hybrid``).
        mixers: the state layers' kinds ("mamba", "mamba2", "gated_deltanet"). arch: GPU family ("sm90", ...).
        architectures: the config's ``architectures`` (decides "all" support).
        mamba_chunk_tokens: ``ModelConfig.get_mamba_chunk_size`` (``mamba_chunk_size``, else ``chunk_size``, else
            2048), tokens.
    """
    vtxt = ".".join(map(str, ver))
    if enable_prefix_caching is None:
        pc = has_attention and ver >= (0, 26, 0)
        why = (f"prefix caching {'on' if pc else 'off'} by default for "
               f"{'hybrid' if has_attention else 'attention-free'} "
               f"models in vLLM {vtxt} (ModelConfig.is_prefix_caching_supported; hybrid default on from 0.26)")
    else:
        pc = enable_prefix_caching
        why = f"prefix caching {'on' if pc else 'off'} (given)"
    if not pc or ver < (0, 19, 0):
        extra = "" if not pc else "; vLLM < 0.19 Mamba prefix caching not modelled"
        return MambaCacheRule("none", pc, 1, None, f"{why}: mamba_cache_mode none, 1 state page per request "
                              f"(MambaSpec.max_memory_usage_bytes){extra}")
    if ver < (0, 28, 0) and MAMBA_PREFIX_CACHING_ARCHITECTURES.intersection(architectures):
        grid = math.lcm(mamba_chunk_tokens, 16) if has_attention else None
        return MambaCacheRule("all", pc, 1, grid, f"{why}: mamba_cache_mode all ({'/'.join(architectures)} implements "
                              "SupportsMambaPrefixCaching; MambaModelConfig.verify_and_update_config, vLLM 0.19–0.27): "
                              "one state page per block of the request's tokens, cdiv(max_model_len, block) per "
                              "request (MambaSpec.max_memory_usage_bytes)" + (
                                  f"; blocks aligned to the Mamba chunk lcm({mamba_chunk_tokens}, 16) = {grid} tokens "
                                  "(HybridAttentionMambaModelConfig)" if grid else ""), page_per_block=True)
    if ver < (0, 33, 0):
        return MambaCacheRule("align", pc, 2, None, f"{why}: mamba_cache_mode align, 2 state pages per request "
                              "(MambaSpec.max_memory_usage_bytes, read in 0.19–0.28)")
    ck_pages, ck_align, ck_why = _checkpoint(mixers, arch)
    return MambaCacheRule("align", pc, 2 + ck_pages, ck_align,
                          f"{why}: mamba_cache_mode align (MambaModelConfig.verify_and_update_config), "
                          f"2 + {ck_pages} checkpoint = {2 + ck_pages} state pages per request "
                          f"(MambaSpec.max_memory_usage_bytes); {ck_why}")
