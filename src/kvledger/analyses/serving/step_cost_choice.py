"""Choosing a simulation's step-cost model from ``--step-cost``: the roofline, the calibrated table for the simulated
model/GPU/TP, or one named by key.

``--step-cost`` takes ``roofline`` (the default, from the memory plan), ``calibrated`` (the
bundled measurements for the simulated model, GPU and TP, found by
``kvledger.accounting.calibrated.get_calibrated_cost``) or ``calibrated:KEY`` to pick a
calibration by hand — ``KEY`` is ``SOURCE:MODEL@GPU/tpN`` as the listing prints it, or a
shorter ``MODEL@GPU/tpN``, ``MODEL@GPU`` or ``SOURCE:MODEL`` (the missing parts taken from the
simulation). A hand-picked table measured on another model or GPU prices this model's steps
with that one's times; the description says so. A path to a calibration profile written by
``kvledger calibrate`` (``PROFILE.json``) selects its fitted step cost.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kvledger.accounting.sglang_steps import GraphPaddedStepCost
from kvledger.accounting.step_term_notes import step_term_notes
from kvledger.analyses.serving.gemm_choice import gemm_curve_of, gemm_mode
from kvledger.analyses.serving.profile_scope import refuse_conflicting_profiles
from kvledger.errors import InputError, UnknownNameError

__all__ = ["CALIBRATED_PREFIX", "find_calibrated_cost", "calibration_listing", "calibrated_step_cost",
           "is_profile_choice", "profile_step_cost", "disagreement_note", "gpu_profile_of", "make_step_cost"]

CALIBRATED_PREFIX = "calibrated:"


def find_calibrated_cost(model: str, gpu: str, tp: int) -> Any | None:
    """The calibrated step cost ``--step-cost calibrated`` would use for (model, GPU, TP), or None when none is
    bundled."""
    from kvledger.accounting.calibration_keys import calibrated_model_keys, calibration_model_key

    if calibration_model_key(model) not in calibrated_model_keys():  # no table for this model at all: skip reading them
        return None
    from kvledger.accounting.calibrated import get_calibrated_cost  # the calibrated models, only for such a model

    try:
        return get_calibrated_cost(model, gpu, tp)
    except (UnknownNameError, InputError):
        return None


def _grouped() -> dict[str, dict[tuple[str, ...], list[tuple[str, int]]]]:
    """model → (sources sharing the same GPU/TP set) → [(gpu, tp)], from the bundled registry."""
    from kvledger.accounting.calibrated import list_calibrated

    per: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for c in list_calibrated():
        per[c.model][c.source].append((c.gpu, c.tp))
    out: dict[str, dict[tuple[str, ...], list[tuple[str, int]]]] = {}
    for model, by_source in sorted(per.items(), key=lambda kv: kv[0].lower()):
        merged: dict[tuple, list[str]] = defaultdict(list)
        for source, combos in by_source.items():
            merged[tuple(sorted(combos))].append(source)
        out[model] = {tuple(sorted(srcs)): list(combos) for combos, srcs in merged.items()}
    return out


def _combos_text(combos: list[tuple[str, int]]) -> str:
    by_gpu: dict[str, list[int]] = defaultdict(list)
    for g, tp in combos:
        by_gpu[g].append(tp)
    return "; ".join(f"{g} tp{','.join(str(t) for t in sorted(tps))}" for g, tps in sorted(by_gpu.items()))


def _example(model: str, gpu_key: str | None, tp: int) -> str:
    """A key from the listing for the calibrated model whose name is closest to ``model``, on the same GPU and TP if it
    has them."""
    import difflib

    from kvledger.accounting.calibrated import list_calibrated

    cals = list_calibrated()
    names = {c.model.rsplit("/", 1)[-1].lower(): c.model for c in cals}
    best = difflib.get_close_matches(model.rsplit("/", 1)[-1].lower(), list(names), n=1, cutoff=0.0)
    pick = [c for c in cals if c.model == names[best[0]]] if best else cals
    return min(pick, key=lambda c: (c.gpu != gpu_key, c.tp != tp, c.tp, c.gpu)).key


def calibration_listing(model: str, gpu: str, tp: int) -> str:
    """The short "no calibration" message: what is bundled, grouped by model → GPUs/TP, and how to pick one."""
    from kvledger.accounting.calibrated import calibration_gpu_key

    try:
        gpu_key = calibration_gpu_key(gpu)
    except UnknownNameError:
        gpu_key = None
    on = f"{gpu} (calibration GPU {gpu_key})" if gpu_key else f"{gpu} (no GPU with calibration data)"
    lines = [f"no calibrated step cost for {model} on {on} at TP {tp}. Bundled calibrations (model — source: GPU and "
             f"TPs):"]
    for m, groups in _grouped().items():
        lines.append(f"  {m} — " + " | ".join(f"{', '.join(srcs)}: {_combos_text(c)}" for srcs, c in groups.items()))
    lines.append(f"Pick one with --step-cost calibrated:SOURCE:MODEL@GPU/tpN (e.g. --step-cost "
                 f"calibrated:{_example(model, gpu_key, tp)}): its measured step times then stand in for this model's, "
                 "sound only for the same layer shapes on the same kind of GPU; or keep --step-cost roofline")
    return "\n".join(lines)


def _parse_key(key: str, gpu: str, tp: int) -> tuple[str, str, int]:
    """(model or SOURCE:MODEL, GPU, TP) from ``SOURCE:MODEL@GPU/tpN`` or a shorter form."""
    if "@" not in key:
        return key, gpu, tp
    model, where = key.split("@", 1)
    if "/tp" in where:
        where, tp_text = where.rsplit("/tp", 1)
        try:
            tp = int(tp_text)
        except ValueError:
            raise InputError(
                f"--step-cost calibrated:{key}: cannot read the TP {tp_text!r}; write e.g. @h100-80gb/tp1"
            ) from None
    return model, where or gpu, tp


def calibrated_step_cost(choice: str, model: str, gpu: str, tp: int) -> tuple[Any, dict[str, Any]]:
    """(StepCostModel, description with its source) for ``calibrated`` or ``calibrated:KEY`` (module docstring).

    Raises:
        InputError: no bundled calibration matches; the message lists what exists, grouped by model, and how to pick
        one.
    """
    from kvledger.accounting.calibrated import get_calibrated_cost

    source = "kvledger.accounting.calibrated: fitted to published measurements (see its docstring)"
    if choice == "calibrated":
        cost = find_calibrated_cost(model, gpu, tp)
        if cost is None:
            raise InputError(calibration_listing(model, gpu, tp))
        return cost, {"name": getattr(cost, "name", "calibrated"), "source": source}
    key = choice[len(CALIBRATED_PREFIX):].strip()
    cal_model, cal_gpu, cal_tp = _parse_key(key, gpu, tp)
    try:
        cost = get_calibrated_cost(cal_model, cal_gpu, cal_tp)
    except UnknownNameError:
        raise InputError(f"--step-cost {choice}: no such calibration. " + calibration_listing(model, gpu, tp)) from None
    name = getattr(cost, "name", key)
    info = {"name": name, "source": source, "chosen_by_key": key}
    if cost is not find_calibrated_cost(model, gpu, tp):
        info["source"] += (f"; chosen by key: the step times measured for {name} stand in for {model} on {gpu} at TP "
                           f"{tp} "
                           "(the KV pool and memory plan are still the simulated model's)")
    return cost, info


def is_profile_choice(choice: str) -> bool:
    """True when ``--step-cost`` names a calibration profile file rather than a model name."""
    from kvledger.accounting.calibration_profile import looks_like_profile

    return choice not in ("roofline",
                          "calibrated") and not choice.startswith(CALIBRATED_PREFIX) and looks_like_profile(choice)


def profile_step_cost(choice: str, model: str, gpu: str, tp: int) -> tuple[Any, dict[str, Any]]:
    """(LinearStepCost, description) from a ``kvledger calibrate`` profile
    (``kvledger.accounting.calibration_profile``)."""
    from kvledger.accounting.calibration_profile import profile_step_cost as load

    return load(choice, model, gpu, tp)


#: probe steps on which the roofline and a bundled calibration are compared: (label, StepShape fields)
_PROBES = (("a 1,024-token prefill", dict(num_prefill_tokens=1024, num_prefill_seqs=1, prefill_kv_tokens=1024,
                                         prefill_attn_pairs=1024 * 1025 / 2)),
           ("a decode step of 32 requests at 1,024 tokens", dict(num_decode_seqs=32, decode_kv_tokens=32 * 1024)))


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


def make_step_cost(a: Any, plan, overlap_cpu: bool = False, batching: str = "continuous") -> tuple[Any, dict[str, Any]]:
    """(StepCostModel, a description of it with its source) for ``--step-cost``: ``roofline``, ``calibrated`` or
    ``calibrated:KEY`` (``kvledger.analyses.serving.step_cost_choice``). ``overlap_cpu``: the engine schedules
    asynchronously, so the roofline's CPU overhead overlaps the GPU. ``batching``: the engine's rule (``vllm_v0``: a
    V0 engine, whose roofline gets the host term of ``accounting/host_overhead.py``, as do eager runs).

    Raises:
        InputError: no bundled calibration for the model/GPU/TP or the key (the bundled ones listed, grouped by model).
        UnknownNameError: another name.
    """
    refuse_conflicting_profiles(a.step_cost, a.gpu_profile)  # --gpu-profile FILE prices only the roofline
    if a.step_cost == "roofline":
        prof = gpu_profile_of(a, plan.gpu.name)
        host = {} if prof is None else {"host_step_s": prof.host_step_s, "host_seq_s": prof.host_seq_s}
        curve = gemm_curve_of(a, plan.gpu, prof)
        cost = plan.step_cost(overlap_cpu=overlap_cpu, gemm_curve=curve, **host)
        # SGLang's overlap scheduling (sglang_steps.py) turns it on; its config is synchronous (batching 'sglang',
        # from_plan.default_async_scheduling), so the overlap is named as SGLang's, not as vLLM's async scheduling
        why = "async scheduling" if overlap_cpu else "SGLang's overlap scheduling"
        overlap_cpu = cost.overlap_cpu
        extra = step_term_notes(plan.model, plan.gpu) + ([cost.source] if isinstance(cost, GraphPaddedStepCost) else [])
        cal = find_calibrated_cost(a.model, a.gpu, a.tp)
        scope = "uncalibrated" if prof is None else "gpu"
        hint = (f"uncalibrated; measured tables exist for this model, GPU and TP: --step-cost calibrated ({cal.name})"
                if cal is not None else "uncalibrated (no bundled measurements for this model, GPU and TP)")
        if prof is not None:
            hint = (f"GPU-scope calibration: fractions from the {prof.source}"
                    + (f"; its fit errors: {prof.fit_error}" if prof.fit_error else ""))
        if curve is not None:
            hint += (f"; weight matmuls at the FLOP fraction × the GPU's measured GEMM efficiency against tokens and "
                     f"N·K ({curve.source}; leave-one-shape-out error {curve.loso_abs:.3f} of peak)")
        elif gemm_mode(a, prof) == "measured":
            hint += f"; no measured GEMM efficiency for {plan.gpu.name} (Vidur profiled A100 80GB SXM, H100 SXM): flat"
        if cal is not None and (note := disagreement_note(cost, cal)):
            hint += "; " + note
        data = {"gpu_profile_data": list(prof.data), "priced_by": f"gpu: {prof.label}"} if prof is not None else {}
        if curve is not None:  # only the measured mode prints it (flat output unchanged)
            data["gemm_efficiency"] = "measured"
        hs = getattr(cost, "host_step_s", 0.0), getattr(cost, "host_seq_s", 0.0)
        if hs[0] or hs[1]:  # only a profile fitted with host terms prints them (the others' output is unchanged)
            data.update({"host_step_s": hs[0], "host_seq_s": hs[1]})
        cost, data = _with_host_term(cost, plan, batching, data, async_scheduling=why == "async scheduling"
                                     and overlap_cpu, rule_cpu=not cost.cpu_overhead_s)
        return cost, {"name": "roofline", "scope": scope, **data, "flops_fraction": cost.flops_fraction,
                      "bandwidth_fraction": cost.bandwidth_fraction, "cpu_overhead_s": cost.cpu_overhead_s,
                      "source": "kvledger.accounting.roofline: weight matmuls then attention, each "
                                "max(FLOPs/achievable "
                                f"peak, bytes/achievable bandwidth) at "
                                f"{cost.flops_fraction:.0%}/{cost.bandwidth_fraction:.0%}, "
                                + "+ TP all-reduces"
                                + (" (vLLM's custom all-reduce below "
                                   f"{cost.custom_allreduce_max_bytes / 2**20:g} MiB a call, NCCL above: "
                                   "accounting/tp_comm.py)" if cost.custom_allreduce_max_bytes else "")
                                + ", " + (f"with the CPU overhead overlapping the GPU ({why}): "
                                                          "max(GPU, CPU) per step" if overlap_cpu else "+ CPU overhead "
                                                              "per step")
                                + (f" (CPU overhead {cost.cpu_overhead_s * 1e3:g} ms)" if cost.cpu_overhead_s else
                                   " (no --cpu-overhead: V1's CPU time from the host term below)"
                                   if "V1 CPU" in data.get("host_term", "") else
                                   " (CPU overhead 0 s: none modelled unless --cpu-overhead is given)")
                                + (f", + the GPU profile's host time in series {hs[0] * 1e3:g} ms per step + "
                                   f"{hs[1] * 1e6:g} µs per sequence" if hs[0] or hs[1] else "")
                                + (f"; {data['host_term']}" if "host_term" in data else "")
                                + f"; {hint}" + "".join("; " + n for n in extra)}
    if a.step_cost == "calibrated" or a.step_cost.startswith(CALIBRATED_PREFIX):
        cost, info = calibrated_step_cost(a.step_cost, a.model, a.gpu, a.tp)
        info["scope"] = "model (bundled measurements)"
        if note := disagreement_note(plan.step_cost(), cost, used=f"the calibration ({cost.name})"):
            info["source"] += "; " + note
        return cost, info
    if is_profile_choice(a.step_cost):
        cost, info = profile_step_cost(a.step_cost, plan.model.name, plan.gpu.name, a.tp)
        info["scope"] = "model"
        return cost, info
    raise UnknownNameError("step cost model", a.step_cost, ["roofline", "calibrated"],
                           hint="Known: roofline, calibrated, calibrated:SOURCE:MODEL@GPU/tpN, or a "
                                "profile PROFILE.json from `kvledger calibrate`.")


def _with_host_term(cost: Any, plan, batching: str, data: dict[str, Any], *, async_scheduling: bool = False,
                    rule_cpu: bool = True) -> tuple[Any, dict[str, Any]]:
    """The roofline wrapped in the host term of its vLLM version and flags (``accounting/host_overhead.py``) where
    one is modelled (V0; V1's CPU time; ``--enforce-eager``), with the rule in ``data["host_term"]``; else unchanged.
    ``rule_cpu`` off: ``--cpu-overhead`` gives the CPU time, which replaces the rule's (V0's and V1's). A GPU
    profile's fitted host terms do not: ``calibration.gpu_fit`` fits them on top of this term (``roofline_with`` keeps
    it), so they are the host time the rule leaves out and are added to it. Under async
    scheduling with CUDA graphs the engine overlaps V1's CPU time with the GPU step and the roofline is returned as
    is, its fast paths kept: max(GPU, CPU) = GPU wherever the CPU time is the shorter (Llama-3.1-8B on an H100:
    5.6 ms for the cheapest step of up to 256 sequences against 0.5 + 256 × 0.02 = 5.62 ms); a small model at
    hundreds of sequences, where the CPU would set the pace, is not priced so (``host_overhead.py``)."""
    from kvledger.accounting.host_overhead import HostStepCost, host_overhead_for

    s = plan.settings
    seats = plan.memory.max_num_seqs or s.max_num_seqs
    h = host_overhead_for(s.engine, s.engine_version, plan.model.num_layers, s.tp,
                          enforce_eager=bool(s.enforce_eager), batching=batching, max_num_seqs=seats,
                          async_scheduling=async_scheduling, rule_cpu=rule_cpu)
    if h is None:
        return cost, data
    if h.overlap and not h.launch_s:  # async scheduling, CUDA graphs: hidden under the GPU step (docstring)
        return cost, data
    return HostStepCost(cost, h), {**data, "host_term": h.source}
