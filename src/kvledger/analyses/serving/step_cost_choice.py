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

from kvledger.analyses.serving.online_quant import with_quantization
from kvledger.analyses.serving.profile_scope import refuse_conflicting_profiles, unused_roofline_flags
from kvledger.analyses.serving.roofline_choice import disagreement_note, gpu_profile_of, roofline_step_cost
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
        cost, info = roofline_step_cost(a, plan, overlap_cpu, batching, find_calibrated_cost(a.model, a.gpu, a.tp))
        return cost, with_quantization(plan, cost, info, a.step_cost)  # --quantization fp8: the weights it reads
    cost, info = _replacing_step_cost(a, plan)
    if unused := unused_roofline_flags(a, a.step_cost):  # said, not silently dropped
        info.setdefault("warnings", []).append(unused)
    if is_profile_choice(a.step_cost):  # fitted on one engine's settings: said when simulated under others
        from kvledger.accounting.calibration_profile import load_profile
        from kvledger.analyses.serving.profile_settings import profile_settings_warning

        if said := profile_settings_warning(a.step_cost, load_profile(a.step_cost), plan):
            info.setdefault("warnings", []).append(said)
    return cost, with_quantization(plan, cost, info, a.step_cost)


def _replacing_step_cost(a: Any, plan) -> tuple[Any, dict[str, Any]]:
    """``make_step_cost`` for a ``--step-cost`` other than the roofline: a bundled calibration or a PROFILE.json."""
    if a.step_cost == "calibrated" or a.step_cost.startswith(CALIBRATED_PREFIX):
        cost, info = calibrated_step_cost(a.step_cost, a.model, a.gpu, a.tp)
        info["scope"] = "model (bundled measurements)"
        from kvledger.analyses.serving.gemm_choice import gemm_curve_of

        roof = plan.step_cost(gemm_curve=gemm_curve_of(a, plan.gpu, gpu_profile_of(a, plan.gpu.name)))
        if note := disagreement_note(roof, cost, used=f"the calibration ({cost.name})"):
            info["source"] += "; " + note
        return cost, info
    if is_profile_choice(a.step_cost):
        cost, info = profile_step_cost(a.step_cost, plan.model.name, plan.gpu.name, a.tp)
        info["scope"] = "model"
        return cost, info
    raise UnknownNameError("step cost model", a.step_cost, ["roofline", "calibrated"],
                           hint="Known: roofline, calibrated, calibrated:SOURCE:MODEL@GPU/tpN, or a "
                                "profile PROFILE.json from `kvledger calibrate`.")
