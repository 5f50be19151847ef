"""The calibration profile: the JSON file ``kvledger calibrate`` writes and ``--step-cost FILE`` reads (inputs, engine
settings, fitted values, errors, data files).

Layout (``"kind": "kvledger-calibration-profile"``, ``"version": 1``): ``model``, ``gpu``, ``tp``;
``engine`` (the simulated engine settings); ``step_cost`` (``LinearStepCost.coefficients()``: the
five GPU terms and the CPU overhead in seconds per unit, ``overlap``), with ``units`` and, when
the model's KV bytes per token are known, ``decode_kv_byte_s``; ``fit`` (start model, objective
before and after, iterations, replays, the metric weights); ``runs`` (each data file: label,
source, requests, and predicted-vs-measured errors of the fitted model); ``leave_one_out`` (with
several runs: each run's errors under a model fitted without it), ``data_files`` and ``fitted_range`` (the steps and
requests the fit saw: ``analyses/serving/profile_scope.py``; absent from profiles written before it). Only
``step_cost`` is needed to simulate; the rest says where the numbers came from.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kvledger.accounting.fitted_cost import GPU_TERMS, LinearStepCost
from kvledger.errors import FormatError, InputError, KvLedgerError

__all__ = ["PROFILE_KIND", "GPU_PROFILE_KIND", "read_profile_json", "load_profile", "profile_step_cost",
           "looks_like_profile", "dump_profile"]

PROFILE_KIND = "kvledger-calibration-profile"
#: a GPU-scope profile (``kvledger.accounting.gpu_profile``): a GPU's efficiency for any model, read by --gpu-profile
GPU_PROFILE_KIND = "kvledger-gpu-profile"
#: ``step_cost`` keys a profile written by an earlier version holds, and their names now (read in place, in order):
#: the KV bytes per token is one GPU's at the profile's TP (the plan's per-GPU pool), not the model's
OLD_KEYS = {"kv_bytes_per_token": "kv_bytes_per_token_per_gpu"}


def looks_like_profile(choice: str) -> bool:
    """True when ``--step-cost`` names a file (a path ending in .json, or an existing file).

    Raises:
        InputError: a name no file system accepts (a component over 255 bytes, a NUL byte).
    """
    from kvledger.names import check_name_or_path

    check_name_or_path(choice, "--step-cost")
    return choice.lower().endswith(".json") or Path(choice).is_file()


def read_profile_json(p: Path, missing: str) -> Any:
    """The parsed JSON of a profile file (calibration or GPU profile).

    Raises:
        FormatError: ``missing`` when ``p`` is not a file; "not JSON" with the parser's reason.
    """
    if p.is_dir():
        raise FormatError(str(p), "a folder, not a profile file: give the JSON file itself")
    if not p.is_file():
        raise FormatError(str(p), missing)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise FormatError(str(p), f"not JSON ({e})") from None


def load_profile(path: str | Path) -> dict[str, Any]:
    """The profile's dict, checked, its ``step_cost`` keys under their current names (``OLD_KEYS``: a profile written by
    an earlier version loads as one written now).

    Raises:
        FormatError: missing file, not JSON, another kind of file, or a malformed ``step_cost``.
    """
    from kvledger.names import check_name_or_path

    check_name_or_path(str(path), "--step-cost")
    p = Path(path)
    d = read_profile_json(p, "no such calibration profile (write one with `kvledger calibrate FILE... --out "
                             "PROFILE.json`)")
    if isinstance(d, dict) and d.get("kind") == GPU_PROFILE_KIND:
        raise FormatError(str(p), f"this is a GPU profile (fitted on {d.get('gpu')}; it prices any model on that GPU): "
                                  f"use --gpu-profile {p}, not --step-cost (which takes a model-scope profile from "
                                  "`kvledger calibrate --scope model`)")
    if not isinstance(d, dict) or d.get("kind") != PROFILE_KIND:
        raise FormatError(str(p), f"not a kvledger calibration profile (expected \"kind\": \"{PROFILE_KIND}\")")
    sc = d.get("step_cost")
    if not isinstance(sc, dict):
        raise FormatError(str(p), "missing the \"step_cost\" object", "step_cost")
    if "kv_bytes_per_token" in sc and "kv_bytes_per_token_per_gpu" not in sc:  # written before the key said its scope
        d["step_cost"] = sc = {OLD_KEYS.get(k, k): v for k, v in sc.items()}
    try:
        LinearStepCost.from_coefficients(sc)
    except (KeyError, ValueError, TypeError) as e:
        need = ", ".join(t[0] for t in GPU_TERMS)
        raise FormatError(str(p), f"malformed step_cost ({e}); it needs {need}, cpu_overhead_s (numbers ≥ 0, s) and "
                                  "overlap (true/false)", "step_cost") from None
    return d


def profile_step_cost(path: str | Path, model: str, gpu: str, tp: int) -> tuple[LinearStepCost, dict[str, Any]]:
    """(the fitted model, a description with its source) for ``--step-cost PROFILE.json``: with the range it was
    fitted on (``fitted_range``, checked against the workload by ``analyses/serving/profile_scope.py``) and, on
    another model or TP, a warning that names what differs and the reason its bands widen.

    Raises:
        InputError: the profile was fitted on another GPU (as ``--gpu-profile`` refuses one).
    """
    d = load_profile(path)
    cost = LinearStepCost.from_coefficients(d["step_cost"], name=f"calibrated profile {Path(path).name}")
    runs = ", ".join(r.get("label", "?") for r in d.get("runs", []))
    src = (f"kvledger calibrate profile {path}: a linear step cost fitted to measured runs ({runs or 'unnamed'}) "
           f"of {d.get('model')} on {d.get('gpu')} at TP {d.get('tp')} (kvledger.calibration.fit)")
    fit = d.get("fit") or {}
    loo = d.get("leave_one_out") or []
    info: dict[str, Any] = {"name": cost.name, "source": src, "coefficients": cost.coefficients(),
                            "fit_objective": fit.get("objective"),
                            "priced_by": f"model: {cost.name}"}  # the scope, in --json as the text says it
    if loo:
        info["leave_one_out"] = [{"run": x.get("run"), "ttft_mean_rel_error": x.get("ttft_mean_rel_error"),
                                  "tpot_mean_rel_error": x.get("tpot_mean_rel_error"),
                                  "throughput_rel_error": x.get("throughput_rel_error")} for x in loo]
    if cost.frontend_s > 0:
        info["source"] += (f"; its frontend latency ({cost.frontend_s * 1e3:.1f} ms per request, outside the engine) "
                           "is not in these engine-side figures (kvledger validate adds it)")
    info["profile_data"] = [str(x) for x in d.get("data_files") or []]  # validate marks these runs IN-SAMPLE
    info["profile_runs"] = [{"source": str(r.get("source") or ""), "sha256": str(r.get("sha256") or "")}  # or copies
                            for r in d.get("runs") or [] if isinstance(r, dict)]
    # each fitted run's in-sample errors (mean TTFT, TPOT, throughput; saturation): its band (ledgers.model_band)
    info["in_sample"] = [{k: r.get(k) for k in ("label", "saturated", "ttft_mean_rel_error", "tpot_mean_rel_error",
                                                "throughput_rel_error")} for r in d.get("runs") or []]
    info["fitted_range"] = d.get("fitted_range")  # None: written before calibrate recorded it (profile_scope.py)
    if d.get("gpu") and str(d["gpu"]).lower() != str(gpu).lower():
        raise InputError(f"--step-cost {path} is a model-scope profile fitted on {d['gpu']}, not {gpu}: its step "
                         "times are that GPU's and do not carry to another (calibrate this GPU with `kvledger "
                         "calibrate --scope gpu` and pass --gpu-profile, or fit a profile on runs of this GPU)")
    differs = _differs(d, model, tp)
    if differs:
        what = " and ".join(k for k, _, _ in differs)
        pairs = "; ".join(f"{k}: fitted {a}, simulated {b}" for k, a, b in differs)
        info["mismatch"] = f"{d.get('model')} at TP {d.get('tp')} on {d.get('gpu')}"
        info["mismatch_what"] = what
        info["band_withheld"] = f"fitted on another {what}"
        info["priced_by"] += f" (fitted on another {what}; {pairs})"
        info.setdefault("warnings", []).append(
            f"{cost.name} was fitted on another {what} ({pairs}): its step times stand "
            f"in for this {what}'s and do not carry across layer shapes or TP, so no error band is printed: no "
            "validation measured a profile carried so, and its errors can pass even the uncalibrated roofline's "
            "(calibrate the GPU instead: kvledger calibrate --scope gpu)")
        info["source"] += f"; fitted on another {what}: the fitted step times stand in for this deployment's"
    return cost, info


def _config_of(name: str) -> str:
    """The bundled config a model name stands for: ``X (config of Y)`` → Y (``catalog.models``), a bundled name →
    its config's Hub id (``resolve_bundled``), else the name."""
    n = str(name)
    if " (config of " in n:
        return n.split(" (config of ", 1)[1].rstrip(")")
    from kvledger.catalog.models import resolve_bundled

    try:
        bm = resolve_bundled(n)
    except (KvLedgerError, OSError, ValueError):  # a name the catalog cannot read is compared as written
        bm = None
    return bm.hf_id if bm is not None else n


def _differs(d: dict[str, Any], model: str, tp: int) -> list[tuple[str, Any, Any]]:
    """What of (model, TP) the profile was not fitted on: [(what, fitted, simulated)]. Two names of one
    bundled config (an -Instruct checkpoint and its base) are the same layer shapes, so the same model here."""
    out = []
    if d.get("model") and _config_of(d["model"]).lower() != _config_of(model).lower():
        out.append(("model", d["model"], model))
    if d.get("tp") is not None and d["tp"] != tp:
        out.append(("TP", d["tp"], tp))
    return out


def _clean(v: Any) -> Any:
    """JSON-safe: non-finite floats become None (strict JSON)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def dump_profile(profile: dict[str, Any]) -> str:
    """The profile as strict, stable JSON text (sorted keys not used: the layout order is the documented one)."""
    return json.dumps(_clean(profile), indent=2, allow_nan=False) + "\n"
