"""Data-parallel attention in the memory plan: SGLang's ``--enable-dp-attention --dp-size N`` and vLLM's
``--data-parallel-size N`` (with ``--enable-expert-parallel`` for a MoE model): the settings each engine accepts, the
weights per GPU, the per-rank scheduler limits and the reserve, as read in the engines' code.

SGLang 0.5.23 (read in the wheel): ``arg_groups/parallel_hook.py::handle_deprecated_dp_attention`` turns ``--dp-size N
--enable-dp-attention`` into ``attn_dp_size = N``; ``handle_data_parallelism`` asserts ``tp_size % attn_dp_size == 0``
and divides ``chunked_prefill_size`` by N; ``layers/dp_attention.py::compute_dp_attention_world_info`` gives each DP
rank attention TP ``tp / N``. In ``models/deepseek_v2.py`` (and the other model files built on ``parallel_group=
"attn_tp"``) the attention projections are split over the attention-TP group only, the input embedding too
(``vocab_parallel_embedding.py::get_embedding_tp_kwargs``: ``use_attn_tp_group``), while the LM head
(``enable_dp_lm_head`` off by default), dense MLPs (``moe_dense_tp_size`` unset) and experts stay split over all
``tp`` GPUs. ``arg_groups/memory_hook.py::reserve_for_graph_mb`` reserves ``max_bs × N × 3`` MiB more (another
``× 1.5`` when the decode graphs' max_bs exceeds 300), with the prefill chunk before its division. Each DP rank runs
its own scheduler and KV pool; ``mem_cache/kv_cache_configurator.py::resolve_max_num_reqs`` caps each at a given
``--max-running-requests`` ÷ N.

vLLM 0.33.0 (read in the wheel): each DP rank is its own engine core with its own KV pool, attention at
``--tensor-parallel-size``; ``fused_moe/config.py::FusedMoEParallelConfig.make`` flattens the MoE layers over DP × TP
GPUs, whole experts with ``--enable-expert-parallel`` (EP size DP × TP; expert_parallel.py). A dense model's DP ranks
are independent replicas.
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.attn_dp import dp_attention_words, takes_attn_dp_size
from kvledger.accounting.memory import sglang_reserved_mib
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_ep import sglang_ep_size, shared_replicated_bytes
from kvledger.accounting.sglang_rules import SglangDefaults, parse_sglang_version
from kvledger.accounting.vllm_all2all import DP_CHUNK_TOKENS, settings_choice
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.catalog.expert_placement import local_experts
from kvledger.catalog.layers import kv_heads_per_gpu
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["SGLANG_DP_ATTENTION_ARCHS", "dp_size", "attention_tp", "dp_gpus", "check_data_parallel",
           "sglang_dp_weight_bytes", "sglang_dp_defaults", "sglang_rank_weights", "per_rank_settings", "dp_words",
           "data_parallel_notes", "a2a_rows_words", "unused_all2all_note", "dp_attention_at_dp_1_brief"]

SGLANG_DP_ATTENTION_ARCHS = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Glm4MoeForCausalLM",
    "GlmMoeDsaForCausalLM", "GptOssForCausalLM", "Llama4ForCausalLM", "MiniMaxM2ForCausalLM", "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "KimiLinearForCausalLM",
    "Exaone4ForCausalLM", "NemotronHForCausalLM", "Step3p5ForCausalLM", "MiMoV2FlashForCausalLM"})
"""Architectures whose SGLang 0.5.23 model file builds attention on the attention-TP group (``parallel_group=
"attn_tp"`` or ``get_parallel().attn_tp_size``), hence runs DP attention; others split attention over all TP ranks."""

SGLANG_DP_VERSION = (0, 5, 23)
"""The SGLang release whose DP-attention rules were read (``--engine-version`` must be it or newer)."""


def dp_size(s: PlanSettings) -> int:
    """The data-parallel size these settings run at (1 when not given), ranks."""
    return s.data_parallel_size or 1


def attention_tp(s: PlanSettings) -> int:
    """The TP size each rank's attention (and its KV cache) is split over: tp ÷ dp under SGLang's DP attention, the
    TP size otherwise (vLLM's DP ranks each have their own TP group of --tensor-parallel-size)."""
    return s.tp // dp_size(s) if s.engine == "sglang" and s.enable_dp_attention and dp_size(s) > 1 else s.tp


def dp_gpus(s: PlanSettings) -> int:
    """The GPUs of the deployment's TP groups, count: TP × DP for vLLM's DP ranks (each its own TP group), TP under
    SGLang's DP attention (its ranks inside the one TP group) and without DP."""
    return s.tp if s.engine == "sglang" else s.tp * dp_size(s)


def check_data_parallel(model: ModelSpec, s: PlanSettings) -> None:
    """Refuse the data-parallel settings an engine refuses or the plan does not model.

    Raises:
        InputError: --enable-dp-attention off SGLang, SGLang's dp not dividing tp, --dp-size without DP attention,
            DP with TensorRT-LLM or PP, a model whose SGLang file has no DP attention, a vLLM MoE model without EP.
    """
    dp = dp_size(s)
    if s.engine == "vllm" and s.all2all_backend is not None:
        settings_choice(s.engine_version, s.all2all_backend)  # InputError: a choice that release refuses
    if s.enable_dp_attention and s.engine != "sglang":
        raise InputError("--enable-dp-attention is SGLang's flag; vLLM runs attention data-parallel with "
                         "--data-parallel-size N (with --enable-expert-parallel for a MoE model): use that, or "
                         "--engine sglang")
    if dp == 1:
        return
    if s.engine == "trtllm":
        raise InputError("--data-parallel-size with --engine trtllm: TensorRT-LLM's attention DP is not modelled; plan "
                         "vLLM (--data-parallel-size) or SGLang (--attn-dp-size)")
    if s.pp > 1:
        raise InputError(f"--data-parallel-size {dp} with --pp {s.pp}: data parallelism with pipeline stages is not "
                         "modelled; plan one of them")
    if s.engine == "sglang":
        _check_sglang(model, s, dp, parse_sglang_version(s.engine_version) if s.engine_version else None)
    elif model.is_moe and not s.enable_expert_parallel:
        raise InputError(f"--data-parallel-size {dp} for the MoE model {model.name} without --enable-expert-parallel: "
                         f"vLLM then slices every expert over the {dp * s.tp} GPUs (fused_moe/config.py), which the "
                         "plan does not model; add --enable-expert-parallel (whole experts over DP × TP GPUs)")


def _check_sglang(model: ModelSpec, s: PlanSettings, dp: int, ver: tuple[int, ...] | None) -> None:
    if not s.enable_dp_attention:
        raise InputError(f"--dp-size {dp} without --enable-dp-attention: SGLang runs {dp} whole replicas of TP "
                         f"{s.tp} ({dp * s.tp} GPUs), each as one replica plans; plan one (drop --dp-size), or for "
                         f"attention data-parallel inside the TP group give {dp_attention_words(dp, s.engine_version)}")
    if s.tp % dp:
        raise InputError(f"--dp-size {dp} does not divide --tp {s.tp}: SGLang asserts tp_size % dp_size == 0 under DP "
                         "attention (arg_groups/parallel_hook.py); use a dp size that divides the TP size")
    if ver is not None and ver < SGLANG_DP_VERSION:
        raise InputError("DP attention (--attn-dp-size, or --enable-dp-attention --dp-size) is planned by SGLang "
                         "0.5.23's rules (its reserve and weight split, read in that release); older releases' are "
                         "not modelled: leave --engine-version out")
    if not SGLANG_DP_ATTENTION_ARCHS.intersection(model.architectures):
        arch = model.architectures[0] if model.architectures else model.model_type
        raise InputError(f"--enable-dp-attention: SGLang 0.5.23's model file for {arch} splits attention over the "
                         "whole TP group, not the attention-TP group (models/*.py), so DP attention does not apply "
                         "to it; drop the flag")


def _attention_side(path: str) -> bool:
    """A weight SGLang splits over the attention-TP group under DP attention: attention and the input embedding."""
    return ".self_attn." in path or ".attention." in path or "embed_tokens" in path


def sglang_dp_weight_bytes(model: ModelSpec, tp: int, attn_tp: int) -> tuple[float, str]:
    """Per-GPU weight bytes under SGLang's DP attention, B, and the arithmetic: attention and the input embedding
    split over ``attn_tp`` (whole at 1), the rest (LM head, dense MLPs, experts, shared experts) over ``tp``."""
    q, db = model.quant, model.dtype_bytes
    total = attn_bytes = 0.0
    for w in model.weights:
        b, side = q.bytes_of(w, db), _attention_side(w.path)
        t = attn_tp if side else tp
        kv = kv_heads_per_gpu(model.num_kv_heads, t) / model.num_kv_heads if model.num_kv_heads else 1 / t
        share = 1 / t if w.tp == "shard" else (kv if w.tp == "kv" else 1.0)
        total += b * share
        attn_bytes += b * share if side else 0.0
    how = (f"{model.num_params:,} params ({q.description}; {model.dtype} = {db} B); DP attention: attention and input "
           f"embedding over attention TP {attn_tp} ({attn_bytes / 2**30:.2f} GiB per GPU), LM head, MLPs and experts "
           f"over TP {tp} (SGLang 0.5.23 models/deepseek_v2.py and kin)")
    return total, how


def sglang_dp_defaults(d: SglangDefaults, smi_mib: float, s: PlanSettings, prefill_mib: float = 0.0) -> SglangDefaults:
    """SGLang 0.5.23's default mem_fraction_static under DP attention: the reserve of ``memory.py::
    sglang_mem_fraction_static`` plus the decode graphs' DP terms, max_bs × dp × 3 MiB and another max_bs × dp × 1.5
    above a max_bs of 300 (``arg_groups/memory_hook.py::reserve_for_graph_mb``), and the prefill graphs'
    ``prefill_mib`` (sglang_prefill_graphs.py), with the prefill chunk before its division by dp; ``d`` unchanged
    without DP attention."""
    dp, bs, cps = dp_size(s), d.cuda_graph_max_bs, d.chunked_prefill_size
    if s.engine != "sglang" or not s.enable_dp_attention or dp == 1:
        return d
    extra = bs * dp * 3 + (bs * dp * 1.5 if bs > 300 else 0.0)
    reserved = sglang_reserved_mib(smi_mib, s.tp, cps, bs, extra + prefill_mib)
    frac = round((smi_mib - reserved) / smi_mib, 3)
    pre = f" + prefill graphs {prefill_mib:,.0f}" if prefill_mib else ""
    return replace(d, mem_fraction_static=frac, source=(
        f"SGLang 0.5.23 default under DP attention (arg_groups/memory_hook.py): round(({smi_mib:,.0f} − "
        f"{reserved:,.0f} MiB reserved: 512 + 1.5 × {max(cps, 2048):,} + {s.tp}/8 × 1,024 + 2 × {bs} "
        f"+ DP attention {bs} × {dp} × "
        f"{4.5 if bs > 300 else 3:g}{pre}) / {smi_mib:,.0f}, 3)"))


def per_rank_settings(s: PlanSettings) -> PlanSettings:
    """SGLang's per-DP-rank scheduler limits: a given --max-running-requests ÷ dp (at least 1) and the prefill chunk ÷
    dp (``kv_cache_configurator.py::resolve_max_num_reqs``, ``parallel_hook.py::handle_data_parallelism``)."""
    dp = dp_size(s)
    if s.engine != "sglang" or not s.enable_dp_attention or dp == 1:
        return s
    return replace(s, max_num_seqs=max(1, s.max_num_seqs // dp) if s.max_num_seqs else None,
                   max_num_batched_tokens=max(1, s.max_num_batched_tokens // dp) if s.max_num_batched_tokens else None)


def dp_words(s: PlanSettings) -> str:
    """The flags of these settings' data parallelism as the engine spells them ("" at DP 1)."""
    dp = dp_size(s)
    if dp == 1:
        return ""
    if s.engine == "sglang":  # --attn-dp-size N from 0.5.22 (attn_dp.py)
        return dp_attention_words(dp, s.engine_version)
    return f"--data-parallel-size {dp}" + (" --enable-expert-parallel" if s.enable_expert_parallel else "")


def data_parallel_notes(model: ModelSpec, s: PlanSettings, engine_text: str) -> tuple[str, ...]:
    """The plan's note on its data parallelism (``engine_text``: the engine and version whose rules apply); () at DP 1.
    Call after ``check_data_parallel``."""
    dp, tp = dp_size(s), s.tp
    unused = unused_all2all_note(s)
    if dp == 1:
        return (unused,) if s.engine == "vllm" and s.all2all_backend else \
            (_dp_attention_at_dp_1(s),) if s.engine == "sglang" and s.enable_dp_attention else ()
    engine_text = f"{'SGLang' if s.engine == 'sglang' else 'vLLM'} {engine_text.removesuffix(' rules')} rules"
    tail = ("; figures per GPU are one rank's; no roofline (the step cost prices one TP group, not the DP ranks "
            "stepping together)")
    if s.engine == "sglang":
        a = tp // dp
        split = f"split over {a} GPUs" if a > 1 else "whole on every GPU"
        old = (f"; --enable-dp-attention --dp-size {dp} is its deprecated spelling"
               if takes_attn_dp_size(s.engine_version) else "")
        return (f"{dp_words(s)} ({engine_text}{old}): {dp} DP ranks on the {tp} GPUs, attention TP {a} per rank "
                f"(attention weights and the input embedding {split}, the LM head, MLPs and "
                f"experts over all {tp}); each rank runs its own scheduler and KV pool, with the prefill chunk and "
                f"a given --max-running-requests divided by {dp}, and the decode CUDA graphs reserve "
                f"max_bs × {dp} × 3 MiB more (× 1.5 more above max_bs 300){tail}",)
    if not model.is_moe:
        return (f"{dp_words(s)} ({engine_text}): {dp} independent engine cores of TP {tp} ({dp * tp} GPUs), each "
                f"its own KV pool; a dense model's ranks share no weights{tail}",) + (unused,) * bool(s.all2all_backend)
    e, ep = model.num_experts, dp * tp
    return (f"{dp_words(s)} ({engine_text}): {dp} engine cores, each its own TP {tp} group and KV pool; routed "
            f"experts whole over EP {ep}, {local_experts(e, ep)} of {e} on the busiest GPU (fused_moe/config.py), "
            f"attention, dense layers and shared experts TP {tp}-sliced in each rank; the profile run's MoE layers "
            f"work on {a2a_rows_words(s, dp)}{tail}",)


DP_ATTENTION_AT_DP_1 = "--enable-dp-attention without --dp-size (dp_size 1)"
"""The start of the note on SGLang's DP attention flag given without a DP size."""


def dp_attention_at_dp_1_brief(engine_version: str | None) -> str:
    """That note in one line for ``plan``'s short view (the whole note under --verbose and in the JSON)."""
    return ("--enable-dp-attention without --dp-size: SGLang ignores it (attention over the whole TP group, as "
            f"planned); {_dp_attention_how(engine_version)}")


def _dp_attention_how(engine_version: str | None) -> str:
    """How the release takes DP attention: --attn-dp-size N from 0.5.22 (attn_dp.py), --dp-size N with the flag
    before."""
    if takes_attn_dp_size(engine_version):
        return "for DP attention give --attn-dp-size N (--enable-dp-attention is deprecated)"
    return "add --dp-size N for DP attention"


def _dp_attention_at_dp_1(s: PlanSettings) -> str:
    """The note on SGLang's --enable-dp-attention at dp_size 1, which SGLang ignores without a word: 0.5.23's
    ``arg_groups/parallel_hook.py :: _handle_deprecated_dp_attention`` moves dp_size into attn_dp_size (1) and sets
    the flag off, and nothing reads DP attention at attn_dp_size 1 (``attn_dp_enabled_of``: the memory reserve's DP
    terms, ``memory_hook.py``, are skipped too); 0.5.3's ``server_args.py :: _handle_data_parallelism`` sets it off at
    dp_size 1, after ``_handle_gpu_memory_settings`` has counted its cuda_graph_max_bs × 3 MiB reserve."""
    ver = parse_sglang_version(s.engine_version) if s.engine_version else SGLANG_DP_VERSION
    older = ("" if ver >= SGLANG_DP_VERSION else "; releases before 0.5.23 (read in 0.5.3, server_args.py "
             "_handle_data_parallelism) turn it off too, after their memory reserve counted cuda_graph_max_bs × 3 MiB "
             "for it, which this plan leaves out")
    return (f"{DP_ATTENTION_AT_DP_1}: SGLang ignores it, running attention over the whole "
            f"TP {s.tp} group as without the flag (0.5.23 arg_groups/parallel_hook.py _handle_deprecated_dp_attention: "
            f"attn_dp_size = dp_size = 1, the flag set off){older}; planned so; {_dp_attention_how(s.engine_version)}, "
            "N dividing --tp")


def unused_all2all_note(s: PlanSettings) -> str:
    """The note on a given --all2all-backend where vLLM runs none (DP 1, or no expert parallelism)."""
    return (f"--all2all-backend {s.all2all_backend}: vLLM runs an all2all backend only with DP > 1 and expert "
            "parallelism (fused_moe/config.py::use_all2all_kernels), so it changes nothing here")


def a2a_rows_words(s: PlanSettings, dp: int) -> str:
    """The rows a vLLM DP + EP plan's MoE layers run in the profile, and why, by its all2all backend."""
    if s.all2all_backend is None:  # allgather_reducescatter from 0.11, naive before (vllm_all2all.py)
        return (f"{dp} × max_num_batched_tokens rows on every GPU (the default all2all_backend, "
                f"{settings_choice(s.engine_version, None).backend}, gathers every rank's rows; another "
                "--all2all-backend may dispatch or chunk them)")
    a2a = settings_choice(s.engine_version, s.all2all_backend)
    rows = f"min(max_num_batched_tokens, {DP_CHUNK_TOKENS})" if a2a.rows == "chunked" else "max_num_batched_tokens"
    bound = " at most" if a2a.rows == "routed" else ""
    return f"{dp} × {rows} rows{bound} on every GPU ({a2a.words})"


def sglang_rank_weights(model: ModelSpec, s: PlanSettings) -> tuple[float, str]:
    """(one GPU's weights under SGLang, B, and how): ``--weights-memory`` when given; else 1/TP of every tensor, or
    under DP attention the attention split over the attention-TP group (``sglang_dp_weight_bytes``); under
    ``--ep-size`` whole routed experts (as many bytes) and, under DeepEP, the shared experts whole (sglang_ep.py)."""
    if s.weights_bytes is not None:
        return s.weights_bytes, "given"
    ep = sglang_ep_size(model, s)  # --ep-size: whole experts, the same bytes at ep = tp (sglang_ep.py)
    w, how = (weight_bytes_per_gpu(model, s.tp, include_rope_cache=False, ep=ep) if attention_tp(s) == s.tp
              else sglang_dp_weight_bytes(model, s.tp, attention_tp(s)))
    if ep > 1 and attention_tp(s) != s.tp:
        how += f"; routed experts whole over EP {ep}: {model.num_experts // ep} of {model.num_experts} on each GPU"
    if extra := shared_replicated_bytes(model, s):
        w, how = w + extra, how + f" + {extra:,.0f} B shared experts whole on every GPU (DeepEP: parallel_group " \
            "replicated, models/deepseek_v2.py, qwen2_moe.py)"
    return w, how
