"""``--step-cost roofline``: the roofline of the memory plan as a simulation prices it (the GPU profile's fractions
and host terms, the measured GEMM efficiency curve, the host term of the engine's version), with its description and
source; and the sentence when it and a bundled calibration disagree (``step_cost_choice.make_step_cost`` chooses)."""

from __future__ import annotations

from typing import Any

from kvledger.accounting.expert_parallel import ep_size
from kvledger.accounting.sglang_steps import GraphPaddedStepCost
from kvledger.accounting.step_term_notes import step_term_notes
from kvledger.accounting.tp_comm import (
    FITTED_SHARE,
    PCIE_ALLREDUCE_SHARE,
    PCIE_ALLREDUCE_SHARE_RANGE,
    link_words,
    over_pcie,
)
from kvledger.accounting.tp_network import span_data, span_words
from kvledger.analyses.serving import gemm_choice as gc
from kvledger.analyses.serving.gemm_choice import gemm_curve_of, gemm_mode, layer_kernels_words

__all__ = ["disagreement_note", "gpu_profile_of", "roofline_step_cost", "link_data", "LINK_GIVEN",
           "UNCALIBRATED_PRICED_BY"]

LINK_GIVEN = "given by --allreduce-link-share"
"""Where a TP all-reduce link share given on the command line is said to come from."""

_PROBES = (("a 1,024-token prefill", dict(num_prefill_tokens=1024, num_prefill_seqs=1, prefill_kv_tokens=1024,
                                         prefill_attn_pairs=1024 * 1025 / 2)),
           ("a decode step of 32 requests at 1,024 tokens", dict(num_decode_seqs=32, decode_kv_tokens=32 * 1024)))


#: the priced-by words (``--json``'s ``step_cost.priced_by``) of a roofline no GPU profile (``calibrate --scope gpu``)
#: priced; what measured kernel curves it reads (operator profiles, none: ``--gemm-efficiency flat``) its source names
UNCALIBRATED_PRICED_BY = ("uncalibrated (the roofline at the default or given fractions, as its source says; no GPU "
                          "profile fitted on serving runs)")

def disagreement_note(roofline: Any, calibrated: Any, used: str = "the roofline", factor: float = 1.5) -> str | None:
    """A sentence when the roofline and a bundled calibration price the probe steps more than ``factor``× apart, else
    None; ``used`` names the one the run used."""
    from kvledger.accounting.stepcost import StepShape

    parts = []
    for label, fields in _PROBES:
        shape = StepShape(**fields)
        a, b = float(roofline.step_time_s(shape)), float(calibrated.step_time_s(shape))
        if a > 0 and b > 0 and max(a / b, b / a) > factor:
            parts.append(f"{label}: roofline {a * 1e3:.1f} ms, {calibrated.name} {b * 1e3:.1f} ms "
                         f"({max(a / b, b / a):.1f}×)")
    if not parts:
        return None
    return ("the roofline and the bundled calibration disagree — " + "; ".join(parts) + f". This run used {used}; "
            "to know which is right for your deployment, fit the step cost to one of your own benchmark runs with "
            "`kvledger calibrate FILE --model M --gpu G` and check it with `kvledger validate`")


def gpu_profile_of(a: Any, gpu_name: str):
    """The GPU profile that prices this run's roofline (``kvledger.accounting.gpu_profile``), or None: the bundled one
    for the GPU unless ``--gpu-profile`` names a file or "none"; none when both fractions are given by hand."""
    from kvledger.accounting.gpu_profile import resolve_gpu_profile

    if a.achievable_flops_fraction is not None and a.achievable_bandwidth_fraction is not None:
        return None
    return resolve_gpu_profile(a.gpu_profile, gpu_name)


def roofline_step_cost(a: Any, plan, overlap_cpu: bool, batching: str, cal: Any) -> tuple[Any, dict[str, Any]]:
    """(the roofline step cost, its description) for ``make_step_cost``'s arguments; ``cal``: the bundled calibration
    for the model, GPU and TP (``find_calibrated_cost``), or None."""
    prof = gpu_profile_of(a, plan.gpu.name)
    given = getattr(a, "allreduce_link_share", None)  # in the plan's settings (plan_pricing.plan_fractions)
    host = {} if prof is None else {"host_step_s": prof.host_step_s, "host_seq_s": prof.host_seq_s}
    offered = gemm_curve_of(a, plan.gpu, prof)  # the GPU's curve in measured mode; the roofline keeps it if it applies
    cost = plan.step_cost(overlap_cpu=overlap_cpu, gemm_curve=offered, **host, **gc.carried_terms(a, plan.gpu, prof))
    curve = cost.gemm_curve
    # SGLang's overlap scheduling (sglang_steps.py) turns it on; its config is synchronous (batching 'sglang',
    # from_plan.default_async_scheduling), so the overlap is named as SGLang's, not as vLLM's async scheduling
    why = "async scheduling" if overlap_cpu else "SGLang's overlap scheduling"
    overlap_cpu = cost.overlap_cpu
    extra = step_term_notes(plan.model, plan.gpu, ep_size(plan.model, plan.settings), cost.moe_config,
                            plan.settings.engine, dp=plan.settings.data_parallel_size or 1)
    extra += [cost.source] if isinstance(cost, GraphPaddedStepCost) else []
    scope = "uncalibrated" if prof is None else "gpu"
    hint = _hint(a, plan, prof, (offered, curve), cost, cal)
    off_engine = _off_engine(prof, plan, a) if prof is not None else None
    data = ({"gpu_profile_data": list(prof.data),
             "priced_by": f"gpu: {prof.label}{_off_fit(prof, plan)}" + (f"; {off_engine}" if off_engine else "")}
            if prof is not None else {"priced_by": UNCALIBRATED_PRICED_BY})
    if off_engine:
        data["engine_mismatch"] = off_engine
    data["gemm_efficiency"] = "measured" if curve is not None else "carried" if gc.carried(a) else "flat"
    hs = getattr(cost, "host_step_s", 0.0), getattr(cost, "host_seq_s", 0.0)
    if hs[0] or hs[1]:  # only a profile fitted with host terms prints them (the others' output is unchanged)
        data.update({"host_step_s": hs[0], "host_seq_s": hs[1]})
    data.update(link_data(cost, given is not None))
    cost, data = _with_host_term(cost, plan, batching, data, async_scheduling=why == "async scheduling"
                                 and overlap_cpu, rule_cpu=not cost.cpu_overhead_s)
    return cost, {"name": "roofline", "scope": scope, **data, "flops_fraction": cost.flops_fraction,
                  "bandwidth_fraction": cost.bandwidth_fraction, "cpu_overhead_s": cost.cpu_overhead_s,
                  "source": _source(cost, data, (why if overlap_cpu else None), hs, plan.settings.engine,
                                    given is not None) + f"; {hint}"
                  + "".join("; " + n for n in extra)}


def _off_fit(prof: Any, plan) -> str:
    """"; this run (MODEL TP n) is not what it was fitted on (…)" when no run the GPU profile was fitted on is this
    model at this TP (a GPU profile carries its fractions to it; ``ledgers.profile_band`` widens its bands); ""."""
    model, tp = plan.model.name, plan.settings.tp
    if not prof.runs or any(r.get("model") == model and r.get("tp") == tp for r in prof.runs):
        return ""
    fitted = ", ".join(sorted({f"{r.get('model')} TP {r.get('tp')}" for r in prof.runs}))
    return (f"; this run ({model} TP {tp}) is not what it was fitted on ({fitted}): its fractions carry to it, its "
            "bands are no narrower than the cross-model ones")


def _off_engine(prof: Any, plan, a: Any) -> str | None:
    """"this run's engine (vLLM 0.11.0) is not the engine release the GPU profile was fitted on (…)" when none of the
    profile's runs recorded the release this run is simulated as — the one stated (--engine-version, or the record
    ``validate`` reads), else kvledger's default, said as such; None when it is one of theirs or they name none (a
    profile's run whose release was assumed names none)."""
    from kvledger.accounting.platforms import plan_release

    stated = getattr(a, "engine_version", None)  # the wording only: the release is the rules' normalised one
    ran = plan_release(plan.settings.engine, plan.memory.engine_version, plan.settings.engine_version)
    fitted = sorted({r["engine"] for r in prof.runs if r.get("engine")})
    if ran is None or not fitted or ran in fitted:
        return None
    how = f"this run's engine ({ran})" if stated else f"this run, simulated as {ran} (kvledger's default release; " \
        "--engine-version to choose),"
    return (f"{how} is not the engine release the GPU profile was fitted on ({', '.join(fitted)}): its fractions carry "
            "that release's per-step host time (scheduler, sampler, graphs), which differs by release")


def _hint(a: Any, plan, prof: Any, curves: tuple[Any, Any], cost: Any, cal: Any) -> str:
    """Where the roofline's fractions come from (uncalibrated, or the GPU profile with its errors), the GEMM curve
    (``curves``: the GPU's, offered, and the one the roofline applied), and the disagreement with a bundled
    calibration."""
    hint = (f"uncalibrated; measured tables exist for this model, GPU and TP: --step-cost calibrated ({cal.name})"
            if cal is not None else "uncalibrated" + _no_profile_words(a, plan))
    if prof is not None:
        hint = (f"GPU-scope calibration: fractions from the {prof.source}"
                + (f"; its fit errors: {prof.fit_error}" if prof.fit_error else ""))
    hint += _gemm_hint(a, plan, prof, curves, cost) + (gc.carried_words(cost, plan.gpu, a) if prof is None else "")
    if cal is not None and (note := disagreement_note(cost, cal)):
        hint += "; " + note
    return hint


def _no_profile_words(a: Any, plan) -> str:
    """Why no GPU profile priced the run: ``--gpu-profile none`` set aside the GPU's bundled profile, or the GPU has
    none; and no model-scope measured tables exist for this model, GPU and TP either."""
    from kvledger.accounting.gpu_profile import bundled_gpu_profile

    tables = "no model-scope measured tables for this model, GPU and TP"
    if getattr(a, "achievable_flops_fraction", None) is not None and getattr(a, "achievable_bandwidth_fraction",
                                                                             None) is not None:
        return f" (both fractions as given, in place of any GPU profile; {tables})"
    bundled = bundled_gpu_profile(plan.gpu.name, opt_in=True)
    if bundled is None:
        return (f" (no GPU profile for this GPU: `kvledger calibrate --scope gpu` fits one from a measured run; "
                f"{tables})")
    name = bundled.label.split("bundled:", 1)[-1].split(".json", 1)[0]
    if getattr(a, "gpu_profile", None) == "none":
        return f" (--gpu-profile none: the GPU's bundled profile bundled:{name} set aside; {tables})"
    return (f" (this GPU's bundled profile is opt-in, not the default: --gpu-profile bundled:{name} prices with it; "
            f"{tables})")


def _gemm_hint(a: Any, plan, prof: Any, curves: tuple[Any, Any], cost: Any) -> str:
    """The matmul pricing in words: the curve that priced it, or why it is flat (a model the curve does not price, a
    FLOP fraction given alone, --gemm-efficiency flat, a GPU without a curve); "" when there is nothing to say."""
    offered, curve = curves
    given = getattr(a, "gemm_efficiency", None)
    if gc.carried(a):
        return ("; carried (--gemm-efficiency carried): priced as if nobody had profiled this GPU, every matmul at "
                "the flat FLOP fraction of peak, with what a GPU without measured tables carries")
    if curve is not None:
        text = (f"; the measured GEMM efficiency against tokens per step and N·K: {curve.source}, leave-one-shape-out "
                f"error {curve.loso_abs:.3f} of peak (attention at the FLOP fraction × its {curve.grid[-1]:,}-token "
                "plateau, an assumption)")
        if getattr(cost, "layer_kernels", None) is not None:
            text += layer_kernels_words(cost.layer_kernels)
        elif getattr(cost, "gemm_curve", None) is not None:
            text += ("; no layer-kernel term: a hybrid model's other layers (Mamba, linear attention) run kernels "
                     "not measured")
        return text
    if offered is not None:
        lk = getattr(cost, "layer_kernels", None)  # an MoE model's norms, RoPE and add (layer_kernels.layer_ops)
        return ("; flat: the GPU's measured GEMM efficiency is of dense BF16 GEMMs, and this model's are "
                + ("MoE grouped GEMMs" if plan.model.is_moe else f"{cost.model.quant.method}-quantized weights")
                + ", not measured" + (f" (the profile's {prof.flops_fraction:g} scales the flat default 0.7 here)"
                                      if prof is not None and prof.gemm_efficiency == "measured" else "")
                + (layer_kernels_words(lk) if lk is not None else ""))
    from kvledger.accounting.gemm_efficiency import curve_span

    span = curve_span(plan.model, plan.gpu, cost.gemm_nk, bundled=False) if prof is None else None
    if span is not None and given is None and getattr(a, "achievable_flops_fraction", None) is not None:
        return (f"; flat: --achievable-flops-fraction given alone is a share of peak for every matmul, where the "
                f"default on {plan.gpu.name} is 100% of its measured matmul efficiency ({span[0]:.0%}–{span[1]:.0%} "
                "of peak for this model, by tokens per step); add --gemm-efficiency measured to scale that instead; "
                "the error bands were measured on the default pricing")
    if span is not None and given == "flat":
        return ("; flat (--gemm-efficiency flat): every matmul at the FLOP fraction of peak and no layer-kernel term; "
                "this GPU's default prices the weight matmuls by its measured efficiency and adds each layer's small "
                "kernels (norms, RoPE, activation), and the error bands were measured on that default")
    if given == "measured" and gemm_mode(a, prof) == "measured":
        return (f"; no measured GEMM efficiency for {plan.gpu.name} (operator profiles measured A100 80GB SXM, H100 "
                "SXM and RTX PRO 6000 Server; H200 SXM, GH200, A100 40GB SXM and RTX PRO 6000 Workstation share "
                "their dies): flat")
    return ""


def _source(cost: Any, data: dict[str, Any], overlap: str | None, hs: tuple[float, float], engine: str = "vllm",
            link_given: bool = False) -> str:
    """The roofline's formula in words: its fractions, the TP all-reduces, the CPU overhead (added, or overlapping the
    GPU under ``overlap``, the scheduling that overlaps it), the GPU profile's host times ``hs`` and the host term."""
    return ("kvledger.accounting.roofline: weight matmuls then attention, each "
            "max(FLOPs/achievable peak, bytes/achievable bandwidth) at "
            + (f"{cost.flops_fraction:.0%} of the GPU's measured matmul efficiency for the weight matmuls, "
               f"{getattr(cost, 'attn_fraction', cost.flops_fraction):.0%} of peak FLOP/s for attention and "
               f"{cost.bandwidth_fraction:.0%} of peak bandwidth, "
               if data.get("gemm_efficiency") == "measured" else
               f"{cost.flops_fraction:.0%} of peak FLOP/s and {cost.bandwidth_fraction:.0%} of peak bandwidth, ")
            + _allreduce_words(cost, engine, link_given)
            + (f"with the CPU overhead overlapping the GPU ({overlap}): max(GPU, CPU) per step" if overlap else
               "+ CPU overhead per step")
            + _cpu_words(cost.cpu_overhead_s, data.get("host_term", ""), overlap)
            + (f", + the GPU profile's host time in series {hs[0] * 1e3:.4g} ms per step + "
               f"{hs[1] * 1e6:.4g} µs per sequence" if hs[0] or hs[1] else "")
            + (f"; {data['host_term']}" if "host_term" in data else ""))


def _cpu_words(cpu_overhead_s: float, host_term: str, overlap: str | None) -> str:
    """Where the step's CPU time is in the roofline's formula: --cpu-overhead as given, the host term's V0 or V1 CPU
    time in series (``host_overhead.py``'s source words), hidden under the GPU step by ``overlap``, or none."""
    if cpu_overhead_s:
        return f" (CPU overhead {cpu_overhead_s * 1e3:.4g} ms)"
    engine = next((v for v in ("V0", "V1") if f"{v} CPU" in host_term), None)
    if engine:
        return f" (no --cpu-overhead: {engine}'s CPU time from the host term below)"
    if overlap:
        return (f" (the engine's CPU time hidden under the GPU step: {overlap} overlaps it, max(GPU, CPU) = GPU where "
                "the CPU time is the shorter; --cpu-overhead prices one)")
    return " (CPU overhead 0 s: none modelled unless --cpu-overhead is given)"


def link_data(cost: Any, given: bool = False) -> dict[str, Any]:
    """The TP all-reduce's link for ``--json`` where not the catalog figure: the share given (--allreduce-link-share),
    a GPU profile's fit or the PCIe rule's default with its range; a TP group over nodes, the network's terms
    (``tp_network.SpanningLink.data``); {} at TP 1 and on one node's scale-up link priced as catalogued."""
    share, extra = getattr(cost, "allreduce_link_share", None), span_data(cost)
    if not getattr(cost, "num_allreduce_layers", 0) or (share is None and not over_pcie(cost.gpu)):
        return extra
    if share is not None:
        return {**extra, "allreduce_link_share": share, "allreduce_link_share_source": LINK_GIVEN if given else
                f"{FITTED_SHARE} (kvledger.calibration.link_fit)"}
    return {**extra, "allreduce_link_share": PCIE_ALLREDUCE_SHARE,
            "allreduce_link_share_range": list(PCIE_ALLREDUCE_SHARE_RANGE),
            "allreduce_link_share_source": "the default rule over PCIe (kvledger.accounting.tp_comm)"}


def _allreduce_words(cost: Any, engine: str = "vllm", link_given: bool = False) -> str:
    """The TP all-reduces in words, ending ", ": the engine's custom kernel (vLLM, SGLang) and NCCL by message size, or
    NCCL alone where the custom kernel is off or not modelled, and the link; nothing at TP 1."""
    if not getattr(cost, "num_allreduce_layers", 0):
        return ""
    ca, who = cost.custom_allreduce_max_bytes, {"vllm": ("vLLM", "vllm_custom_ar.py"), "sglang": (
        "SGLang", "sglang_rules.sglang_custom_ar_max_bytes")}.get(engine)
    words = (f"+ TP all-reduces ({who[0]}'s custom all-reduce below {ca / 2**20:g} MiB a call, NCCL above: "
             f"{who[1]}, accounting/tp_comm.py)" if ca and who else
             f"+ TP all-reduces (every call NCCL's: {who[0]}'s custom all-reduce is off for this GPU and TP, "
             f"{who[1]})" if who else "+ TP all-reduces (each at NCCL's price: accounting/tp_comm.py)")
    link = link_words(cost.gpu, getattr(cost, "allreduce_link_share", None), LINK_GIVEN if link_given else None)
    return words + (f" {link}" if link else "") + span_words(cost) + ", "


def _with_host_term(cost: Any, plan, batching: str, data: dict[str, Any], *, async_scheduling: bool = False,
                    rule_cpu: bool = True) -> tuple[Any, dict[str, Any]]:
    """The roofline wrapped in the host term of its vLLM version and flags (``accounting/host_overhead.py``) where
    one is modelled (V0; V1's CPU time; ``--enforce-eager``), with the rule in ``data["host_term"]``; else unchanged.
    ``rule_cpu`` off: ``--cpu-overhead`` gives the CPU time, which replaces the rule's (V0's and V1's). A GPU
    profile's fitted host terms do not: ``calibration.gpu_fit`` fits them on top of this term (``roofline_with`` keeps
    it), so they are the host time the rule leaves out and are added to it. Under async
    scheduling with CUDA graphs the engine overlaps V1's CPU time with the GPU step and the roofline is returned as
    is, its fast paths kept: max(GPU, CPU) = GPU wherever the CPU time is the shorter (Llama-3.1-8B on an H100:
    5.6 ms for the cheapest step of up to 256 sequences against 0.5 + 256 × 0.02 = 5.62 ms); where the CPU can set the
    pace (a small model at hundreds of sequences: ``cpu_can_lead``), the overlapped term prices every step."""
    from kvledger.accounting.host_overhead import HostStepCost, cpu_can_lead, host_overhead_for

    s = plan.settings
    seats = plan.memory.max_num_seqs or s.max_num_seqs
    h = host_overhead_for(s.engine, s.engine_version, plan.model.num_layers, s.tp,
                          enforce_eager=bool(s.enforce_eager), batching=batching, max_num_seqs=seats,
                          async_scheduling=async_scheduling, rule_cpu=rule_cpu)
    if h is None:
        return cost, data
    if h.overlapped and not cpu_can_lead(cost, h, seats):  # hidden under every GPU step (docstring)
        return cost, data
    return HostStepCost(cost, h), {**data, "host_term": h.source}
