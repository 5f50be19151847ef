"""vLLM's ``--enable-expert-parallel`` with data parallel 1, as the plan and the step cost take it.

What vLLM does (read in 0.11.0): ``fused_moe/config.py::FusedMoEParallelConfig.make`` turns expert parallelism on
when ``dp × tp > 1`` and the flag is set, with EP size ``tp × dp`` and the MoE layers not TP-sliced;
``fused_moe/layer.py::determine_expert_map`` places whole experts linearly (``E // ep`` each, the first ``E % ep``
ranks one more: catalog/expert_placement.py); ``use_all2all_kernels`` needs ``dp > 1``, so with one engine every TP
rank already holds every token, runs its own experts and the TP all-reduce combines them: no all-to-all. vLLM refuses
the flag for a model without experts (``config/model.py::_verify_with_expert_parallelism``).

So with DP 1: the busiest rank's weights hold ceil(E / TP) whole experts instead of every expert's 1/TP slice, and a
step's expert work waits for the busiest rank, its GEMMs and its weight reads (``moe_terms.ep_imbalance`` and
``ep_read_imbalance`` over TP ranks).
"""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_ep import sglang_ep_notes, sglang_ep_size
from kvledger.catalog.expert_placement import local_experts
from kvledger.catalog.family_base import WARNING_NOTE
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["ep_size", "expert_parallel_notes"]


def ep_size(model: ModelSpec, s: PlanSettings) -> int:
    """The expert-parallel size these settings run ``model`` at: TP × DP for a MoE model with the flag at TP × DP > 1
    (``FusedMoEParallelConfig.make``), SGLang's ``--ep-size`` (sglang_ep.py), else 1."""
    if s.engine == "sglang":
        return sglang_ep_size(model, s)
    n = s.tp * (s.data_parallel_size or 1)
    return n if s.enable_expert_parallel and model.is_moe and n > 1 else 1


def expert_parallel_notes(model: ModelSpec, s: PlanSettings) -> tuple[str, ...]:
    """The plan's note on ``--enable-expert-parallel``; () while it is off.

    Raises:
        InputError: the flag with an engine other than vLLM, or for a model without routed experts (vLLM refuses it);
            SGLang's --ep-size / --moe-a2a-backend off SGLang, or as ``sglang_ep.check_sglang_ep`` refuses them.
    """
    if s.engine == "sglang" and (s.ep_size or s.moe_a2a_backend) and not s.enable_expert_parallel:
        return sglang_ep_notes(model, s)  # InputError: what SGLang refuses, or the plan does not model
    if (s.ep_size or s.moe_a2a_backend) and s.engine != "sglang":
        raise InputError(f"{'--ep-size' if s.ep_size else '--moe-a2a-backend'} is SGLang's flag; plan it with "
                         "--engine sglang (vLLM's expert parallelism is --enable-expert-parallel)")
    if not s.enable_expert_parallel:
        return ()
    if not model.is_moe:  # first: no engine's expert parallelism applies, so "model vLLM" would mislead
        raise InputError(f"--enable-expert-parallel: {model.name} has no routed experts, so no engine's expert "
                         "parallelism applies to it, and vLLM refuses it for such a model (\"Number of experts in the "
                         "model must be greater than 0\"); drop the flag")
    if s.engine == "sglang":  # SGLang's own flag, planned: sglang_ep.py
        raise InputError(f"--enable-expert-parallel is vLLM's flag; SGLang's is --ep-size: pass --ep-size {s.tp} "
                         "(experts whole over the TP GPUs) instead")
    if s.engine != "vllm":  # TensorRT-LLM's: trtllm-serve's --ep_size (serve.py)
        raise InputError("--enable-expert-parallel is vLLM's flag; TensorRT-LLM takes trtllm-serve's --ep_size, which "
                         "kvledger does not model: drop --enable-expert-parallel, or model vLLM")
    idle = _idle_ranks_note(model, s)
    if (s.data_parallel_size or 1) > 1:  # with data parallelism the plan's DP note says it (dp_attention.py)
        return idle
    if s.tp == 1:
        return ("--enable-expert-parallel changes nothing at TP 1 with data parallel 1 (vLLM turns expert parallelism "
                "on only when TP × DP > 1)",)
    e = model.num_experts
    hi, lo = local_experts(e, s.tp), local_experts(e, s.tp, s.tp - 1)
    held = (f"{hi} expert{'s' * (hi != 1)} on each" if hi == lo
            else f"{hi} expert{'s' * (hi != 1)} on the first {e % s.tp}, {lo} on the others")
    return idle + (f"--enable-expert-parallel (EP {s.tp} over the TP ranks, data parallel 1): each MoE layer's {e} "
            f"routed experts are whole, {held} (vLLM's linear placement), instead of a 1/{s.tp} slice of every expert; "
            "attention, dense layers and shared experts stay TP-sliced; with data parallel 1 there is no all-to-all, "
            "the TP all-reduce combines the experts' outputs, and a step's expert work waits for the busiest rank",)


def _idle_ranks_note(model: ModelSpec, s: PlanSettings) -> tuple[str, ...]:
    """A warning where EP is larger than the routed-expert count: ``determine_expert_map`` gives the ranks from E on
    ``E // ep = 0`` experts and does not refuse (vLLM 0.19 ``fused_moe/layer.py``, 0.33 ``expert_map_manager.py``), so
    those GPUs hold no routed expert and add no expert capacity; () otherwise."""
    e, ep = model.num_experts, ep_size(model, s)
    if ep <= e:
        return ()
    return (f"{WARNING_NOTE}EP {ep} over {e} routed experts: vLLM places one expert on each of the first {e} ranks and "
            f"none on the other {ep - e} (determine_expert_map; it does not refuse), so {ep - e} of the {ep} GPUs add "
            f"no expert capacity, and the memory their missing experts leave stays unused (the KV pool is sized by the "
            f"fullest rank, the figures here); an EP of at most {e} spreads the experts without idle ranks",)
