"""SGLang's expert parallelism in the plan: ``--ep-size`` and ``--moe-a2a-backend``, as SGLang 0.5.23 runs them.

Read in the 0.5.23 wheel (``sglang/srt/``):

* Widths: ``runtime_context.py :: derive_parallel_widths`` gives ``moe_ep_size = ep_size`` and ``moe_tp_size =
  tp_size // ep_size // moe_dp_size``; ``distributed/parallel_state.py :: initialize_model_parallel`` builds the EP
  group as the TP group when ``moe_ep_size == tp_size``, else groups of ``ep_size`` ranks strided by ``moe_tp_size``,
  so a layout needs ep × moe_tp = tp: ``arg_groups/parallel_hook.py`` asserts "ep_size * moe_dp_size must be equal to
  tp_size" where MoE DP is set; at MoE DP 1 an ep_size above tp_size leaves ``moe_tp_size`` 0 and ``FusedMoE`` fails
  on ``intermediate_size % self.moe_tp_size``. ``ep_size`` defaults to 1 (``arg_groups/fields/parallel.py``).
* Placement: ``layers/moe/fused_moe_triton/layer.py :: FusedMoE.__init__`` asserts ``num_global_routed % ep_size ==
  0`` and holds ``num_routed // ep_size`` whole experts per rank, each sliced over ``moe_tp_size``: every rank the
  same count (vLLM's linear placement puts one more on the first E mod ep ranks: SGLang refuses that split). At
  ep = tp a GPU holds 1/tp of the routed bytes, as TP alone gives. EPLB's redundant experts (``--ep-num-redundant-
  experts``, ``--enable-eplb``) add slots: no flag here.
* Shared experts: ``models/deepseek_v2.py :: shared_experts_fusion_disable_reason`` keeps DeepSeek's shared expert
  out of the MoE kernel on CUDA under EP ("… under expert parallelism") and with a DeepEP-class backend; the separate
  ``DeepseekV2MLP`` is ``parallel_group="replicated"`` (whole on every GPU) under an all-to-all backend (deepep,
  mooncake, …: ``_shared_expert_use_tp1``), else TP-sliced; ``models/qwen2_moe.py``'s ``shared_expert`` likewise
  under deepep (not under mooncake).
* Communication: backend "none" (the default, ``arg_groups/fields/exec_.py``) is the standard dispatcher
  (``token_dispatcher/standard.py``): every TP rank holds every token, maps the global expert ids to its own and
  skips the rest, and ``FusedMoE.forward``'s TP all-reduce (``moe_tp_size > 1 or moe_ep_size > 1``) sums the ranks'
  outputs: vLLM's expert parallelism at data parallel 1 (expert_parallel.py), priced the same way (busiest rank,
  grouped GEMM rows; no all-to-all). An all-to-all backend (``arg_groups/overrides.py :: _A2A_EP_SPANNING_BACKENDS``)
  sets ``ep_size`` to ``tp_size`` (``_a2a_ep_size``: "The expert parallel size is adjusted from … to the tensor
  parallel size") and dispatches each token to its experts' ranks and combines it back.
* Memory: ``arg_groups/memory_hook.py :: reserve_for_deepep_a2a_mb`` adds 2,048 MiB to the default fraction's reserve
  after the 10 GiB floor while decode CUDA graphs are on (DeepEP's buffers captured in them), and
  ``reserve_for_graph_mb`` 1,024 MiB before it with breakable prefill graphs (0.5.23's CUDA default).
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_rules import SglangDefaults, parse_sglang_version
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["SGLANG_EP_VERSION", "SGLANG_A2A_BACKENDS", "sglang_ep_size", "sglang_a2a", "check_sglang_ep",
           "shared_replicated_bytes", "sglang_ep_notes", "deepep_defaults"]

SGLANG_EP_VERSION = (0, 5, 23)
"""The SGLang release whose expert-parallel rules were read (``--engine-version`` must be it or newer)."""
SGLANG_A2A_BACKENDS = ("none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer", "megamoe",
                       "deepep_v2", "ascend_tp", "pplx", "flashinfer_megamoe")
"""``--moe-a2a-backend`` choices of 0.5.23 (``arg_groups/fields/exec_.py``); "none" is the default."""
_MODELLED = ("none", "deepep")
_SPANNING = frozenset(SGLANG_A2A_BACKENDS) - {"none", "ascend_tp"}  # overrides.py _A2A_EP_SPANNING_BACKENDS
#: architectures whose shared expert under deepep was read (replicated); models without shared experts need none
_SHARED_READ = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Qwen2MoeForCausalLM"})
DEEPEP_DECODE_MIB, DEEPEP_PREFILL_MIB = 2048, 1024  # memory_hook.py: after the floor; in the graph reserve


def sglang_a2a(s: PlanSettings) -> str:
    """The MoE all-to-all backend of these settings ("none" when not given)."""
    return s.moe_a2a_backend or "none"


def sglang_ep_size(model: ModelSpec, s: PlanSettings) -> int:
    """The expert-parallel size SGLang runs ``model`` at: ``tp`` under an all-to-all backend (``_a2a_ep_size``),
    else ``--ep-size`` (1 when not given or for a model without routed experts)."""
    if not model.is_moe:
        return 1
    return s.tp if sglang_a2a(s) in _SPANNING else (s.ep_size or 1)


def _shared(model: ModelSpec) -> list:
    return [w for w in model.weights if ".shared_expert" in w.path and not w.expert]


def check_sglang_ep(model: ModelSpec, s: PlanSettings) -> None:
    """Refuse what SGLang 0.5.23 refuses of ``--ep-size`` / ``--moe-a2a-backend``, and what the plan does not model.

    Raises:
        InputError: a backend that is not SGLang's or not modelled; an older release; a model without routed experts;
            an EP size not dividing the TP size or the routed experts; 1 < EP < TP (not modelled).
    """
    a2a, ep = sglang_a2a(s), s.ep_size or 1
    if a2a not in SGLANG_A2A_BACKENDS:
        raise InputError(f"--moe-a2a-backend {a2a}: not one of SGLang 0.5.23's choices "
                         f"({', '.join(SGLANG_A2A_BACKENDS)})")
    if a2a not in _MODELLED:
        raise InputError(f"--moe-a2a-backend {a2a}: kvledger plans SGLang's none (the default: TP all-reduce) and "
                         "deepep; other all-to-all backends are not modelled: plan one of those")
    if s.engine_version and parse_sglang_version(s.engine_version) < SGLANG_EP_VERSION:
        raise InputError("--ep-size / --moe-a2a-backend are planned by SGLang 0.5.23's rules (read in that release); "
                         "older releases' are not modelled: leave --engine-version out")
    if not model.is_moe and (ep > 1 or a2a != "none"):
        raise InputError(f"--moe-a2a-backend {a2a}: {model.name} has no routed experts, so the all-to-all has nothing "
                         "to dispatch; drop it" if a2a != "none" else
                         f"--ep-size {ep}: {model.name} has no routed experts, so expert parallelism has nothing to "
                         "place; drop --ep-size")
    eff, e = sglang_ep_size(model, s), model.num_experts
    if not model.is_moe:
        return
    if eff > s.tp or s.tp % eff:
        raise InputError(f"--ep-size {ep} with --tp {s.tp}: SGLang splits each MoE layer's tp_size GPUs into ep_size "
                         "groups of moe_tp_size = tp_size // ep_size (runtime_context.py), so ep_size must divide "
                         f"tp_size (\"ep_size * moe_dp_size must be equal to tp_size\"); --ep-size {s.tp} puts whole "
                         "experts on every GPU")
    if e % eff:
        raise InputError(f"--ep-size {eff}: SGLang places the same number of whole experts on every EP rank and "
                         f"asserts num_experts % ep_size == 0 (FusedMoE); {model.name}'s {e} routed experts do not "
                         f"divide by {eff}: use an EP size that divides {e}")
    if 1 < eff < s.tp:
        raise InputError(f"--ep-size {eff} at --tp {s.tp}: SGLang takes it (MoE TP {s.tp // eff} inside each of "
                         f"{eff} expert groups), but kvledger prices SGLang's EP at ep_size = tp_size only (experts "
                         f"whole on each GPU): use --ep-size {s.tp}, or 1")
    if a2a == "deepep" and _shared(model) and not _SHARED_READ.intersection(model.architectures):
        raise InputError(f"--moe-a2a-backend deepep: how SGLang 0.5.23 places {model.name}'s shared experts under "
                         "DeepEP was read for DeepSeek-V2/V3 and Qwen2-MoE only; plan with the default backend")


def shared_replicated_bytes(model: ModelSpec, s: PlanSettings) -> float:
    """The bytes a GPU holds beyond 1/TP of the shared experts where SGLang builds them whole (``parallel_group=
    "replicated"`` under deepep), B: their bytes × (1 − 1/tp); 0 otherwise."""
    if sglang_a2a(s) != "deepep" or s.tp == 1:
        return 0.0
    return sum(model.quant.bytes_of(w, model.dtype_bytes) for w in _shared(model)) * (1 - 1 / s.tp)


def sglang_ep_notes(model: ModelSpec, s: PlanSettings) -> tuple[str, ...]:
    """The plan's note on SGLang's expert parallelism (after ``check_sglang_ep``); () without it."""
    check_sglang_ep(model, s)
    ep, a2a = sglang_ep_size(model, s), sglang_a2a(s)
    if ep == 1:
        return ()
    e, adj = model.num_experts, (f" (SGLang sets ep_size to tp_size {s.tp} under {a2a})"
                                 if a2a != "none" and s.ep_size != s.tp else "")
    head = (f"--ep-size {ep}{adj}, SGLang 0.5.23: each MoE layer's {e} routed experts are whole, {e // ep} on every "
            f"GPU (FusedMoE: num_experts / ep_size; MoE TP 1), the same bytes as a 1/{s.tp} slice of each; attention "
            "and dense layers stay TP-sliced")
    if a2a == "none":
        dp = " (under DP attention, every DP rank's tokens gathered)" if s.enable_dp_attention else ""
        return (head + f"; shared experts too; with --moe-a2a-backend none (the default) every rank holds every "
                f"token{dp}, runs its own experts and the TP all-reduce sums their outputs (no all-to-all), and a "
                "step's expert work waits for the busiest rank",)
    extra = shared_replicated_bytes(model, s)
    shared = (f"; shared experts whole on every GPU (parallel_group replicated: +{extra / 2**30:.2f} GiB per GPU)"
              if extra else "")
    return (head + shared + "; DeepEP dispatches each token to its experts' GPUs and combines it back (all-to-all); "
            f"its buffers take {DEEPEP_DECODE_MIB:,} MiB of the default reserve with decode CUDA graphs (+"
            f"{DEEPEP_PREFILL_MIB:,} with prefill graphs); the plan's roofline prices the experts as under the "
            "default backend (DeepEP's dispatch and combine are not priced); simulate prices them under "
            "--enable-dp-attention",)


def deepep_defaults(d: SglangDefaults, smi_mib: float, s: PlanSettings, decode_graphs: bool, prefill_graphs: bool,
                    base_mib: float) -> SglangDefaults:
    """``d`` with DeepEP's reserve in the default fraction: ``base_mib`` (the reserve before the floor) + 1,024 MiB
    with prefill graphs, the 10 GiB floor above 60 GiB, + 2,048 MiB with decode graphs (module docstring); ``d``
    unchanged under another backend."""
    if sglang_a2a(s) != "deepep":
        return d
    pre = base_mib + (DEEPEP_PREFILL_MIB if prefill_graphs else 0)
    floored = max(pre, 10 * 1024) if smi_mib > 60 * 1024 else pre
    reserved = floored + (DEEPEP_DECODE_MIB if decode_graphs else 0)
    frac = round((smi_mib - reserved) / smi_mib, 3)
    return replace(d, mem_fraction_static=frac, source=(
        f"SGLang 0.5.23 default with --moe-a2a-backend deepep (arg_groups/memory_hook.py): round(({smi_mib:,.0f} − "
        f"{reserved:,.0f} MiB reserved: {base_mib:,.0f} as without DeepEP"
        + (f" + {DEEPEP_PREFILL_MIB:,} (prefill graphs)" if prefill_graphs else "")
        + (", at least 10 GiB" if smi_mib > 60 * 1024 else "")
        + (f", + {DEEPEP_DECODE_MIB:,} (DeepEP buffers in the decode graphs)" if decode_graphs else "")
        + f") / {smi_mib:,.0f}, 3)"))
