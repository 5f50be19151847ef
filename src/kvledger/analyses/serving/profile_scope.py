"""Whether a model-scope calibration profile (``--step-cost PROFILE.json``) is used within what it was fitted on.

A profile's step cost is linear in each step's prefill tokens, attention pairs, decoding requests and KV tokens read
(``accounting/fitted_cost.py``), fitted on the steps its runs made. Outside those steps it is extrapolated: the
kubecon Llama-3.1-8B stages (max_model_len 512) never show it a request past 512 tokens of context, and priced an
azure-conv replay (contexts to 131,072 tokens) at a mean TTFT of 11.8 s where the roofline gives 39 ms. So:

- ``kvledger calibrate`` records the range it was fitted on (``fitted_range``: per step, the most prefill tokens,
  decoding requests and KV tokens read, from the replay of each run with the fitted cost; per request, the longest
  prompt and the most KV context reached, prompt + output capped at max_model_len);
- a simulation with such a profile compares its workload with that range (``simulated_range``, from the requests
  alone, with no step log: cheap) and, beyond ``RANGE_FACTOR`` × a fitted maximum, warns naming both ranges and
  widens its bands to at least the uncalibrated regime's (``kvledger.ledgers.profile_band.at_least_uncalibrated``).

``RANGE_FACTOR`` 1.5 is a chosen margin, not a measured limit: within it a linear fit moves little beyond the steps
it saw; past it, the terms the runs barely exercised (attention over long contexts) set the step time unchecked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RANGE_FACTOR", "request_lengths", "lengths_range", "fitted_range", "simulated_range", "beyond_range",
           "check_profile_scope", "refuse_conflicting_profiles", "unused_roofline_flags", "poor_profile_warning"]

#: how far past a fitted maximum a simulated figure may go before the profile counts as extrapolated (docstring)
RANGE_FACTOR = 1.5

#: (key, words, unit) of the ranges compared: a fitted maximum against the simulation's
_COMPARED = (("max_prefill_tokens_per_step", "prefill tokens in a step", "tokens"),
             ("max_context_tokens", "KV context of a request (prompt + output)", "tokens"))


def request_lengths(workload: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(prompt tokens, output tokens) of each request of a workload the simulator takes (a list of ``RequestSpec``,
    ``WorkloadColumns``, a ``ClosedLoop``); None for one whose requests are made as it runs (sessions)."""
    cols = getattr(workload, "num_prompt_tokens", None)
    if isinstance(cols, np.ndarray):  # WorkloadColumns
        return cols.astype(np.int64), np.asarray(workload.num_output_tokens, dtype=np.int64)
    reqs = getattr(workload, "requests", workload)  # ClosedLoop holds its list
    if not isinstance(reqs, (list, tuple)) or not reqs or not hasattr(reqs[0], "num_prompt_tokens"):
        return None
    return (np.fromiter((r.num_prompt_tokens for r in reqs), np.int64, len(reqs)),
            np.fromiter((r.num_output_tokens for r in reqs), np.int64, len(reqs)))


def lengths_range(prompts: np.ndarray, outputs: np.ndarray, config: Any) -> dict[str, int]:
    """The longest prompt served and the most KV context a request reaches, tokens: prompts ≥ max_model_len are
    rejected (vLLM), and a context stops at max_model_len (the output is capped there or the request refused)."""
    mml = int(config.max_model_len)
    served = prompts < mml
    if not served.any():
        return {"max_prompt_tokens": 0, "max_context_tokens": 0}
    p, o = prompts[served], outputs[served]
    return {"max_prompt_tokens": int(p.max()), "max_context_tokens": int(np.minimum(p + o, mml).max())}


def fitted_range(runs: list[tuple[Any, Any]], tables: list[Any]) -> dict[str, Any]:
    """The range a profile was fitted on (docstring), from each run (``MeasuredRun``, ``EngineConfig``) and its step
    table (``calibration.replay.StepTable``: features in ``fitted_cost.GPU_TERMS`` order) under the fitted cost."""
    out = {"max_prefill_tokens_per_step": 0, "max_decode_seqs_per_step": 0, "max_decode_kv_tokens_per_step": 0,
           "max_prompt_tokens": 0, "max_context_tokens": 0}
    for (run, cfg), table in zip(runs, tables):
        f = table.features
        if len(f):
            out["max_prefill_tokens_per_step"] = max(out["max_prefill_tokens_per_step"], int(f[:, 1].max()))
            out["max_decode_seqs_per_step"] = max(out["max_decode_seqs_per_step"], int(f[:, 3].max()))
            out["max_decode_kv_tokens_per_step"] = max(out["max_decode_kv_tokens_per_step"], int(f[:, 4].max()))
        lengths = request_lengths(run.requests)
        if lengths is not None:
            for k, v in lengths_range(*lengths, cfg).items():
                out[k] = max(out[k], v)
    out["source"] = ("the replay of each fitted run with the fitted step cost (steps: prefill tokens, decoding "
                     "requests, KV tokens read) and its requests (prompt; prompt + output capped at max_model_len) "
                     "(kvledger.analyses.serving.profile_scope)")
    return out


def simulated_range(workload: Any, config: Any) -> dict[str, int] | None:
    """What a simulation reaches, from its requests alone (no step log): the longest prompt, the most KV context,
    and a floor on the most prefill tokens in one step (the longest prompt, or the token budget when chunked
    prefill splits it); None when the workload makes its requests as it runs."""
    lengths = request_lengths(workload)
    if lengths is None:
        return None
    r = lengths_range(*lengths, config)
    peak = r["max_prompt_tokens"]
    if getattr(config, "enable_chunked_prefill", True):
        peak = min(peak, int(config.max_num_batched_tokens))
    return {**r, "max_prefill_tokens_per_step": peak}


def beyond_range(fitted: dict[str, Any], simulated: dict[str, int]) -> list[str]:
    """Each compared figure the simulation takes past ``RANGE_FACTOR`` × the fitted maximum, in words."""
    out = []
    for key, words, unit in _COMPARED:
        f, s = fitted.get(key), simulated.get(key)
        if isinstance(f, (int, float)) and isinstance(s, (int, float)) and s > RANGE_FACTOR * f:
            at_least = "at least " if key == "max_prefill_tokens_per_step" else ""
            out.append(f"{words}: fitted up to {f:,} {unit}, simulated {at_least}{s:,} {unit}")
    return out


def check_profile_scope(cost_info: dict[str, Any], workload: Any, config: Any) -> None:
    """For a run priced by a model-scope profile (``cost_info["fitted_range"]`` present, None for a profile written
    before the range was recorded): add the simulated range, and, when the run goes beyond the fitted one, a
    warning and the reason its bands widen (``cost_info["warnings"]``, ``cost_info["band_widened_by"]``)."""
    if "fitted_range" not in cost_info:
        return
    fitted = cost_info["fitted_range"]
    warnings = cost_info.setdefault("warnings", [])
    name = cost_info.get("name", "the profile")
    if not isinstance(fitted, dict):
        warnings.append(f"{name} does not record the range of prompts and contexts it was fitted on (written before "
                        "kvledger calibrate recorded it): whether this run stays within it is unknown; calibrate "
                        "again to record it")
        return
    sim = simulated_range(workload, config)
    if sim is None:
        return
    cost_info["simulated_range"] = sim
    beyond = beyond_range(fitted, sim)
    if beyond:
        warnings.append(f"{name} is used beyond the range it was fitted on (more than {RANGE_FACTOR:g}× its maximum) "
                        f"— {'; '.join(beyond)}: its linear step cost is extrapolated there, so the error bands are "
                        "widened to at least the uncalibrated roofline's")
        cost_info.setdefault("band_widened_by", []).append("used beyond its fitted range (" + "; ".join(beyond) + ")")


def refuse_conflicting_profiles(step_cost: str, gpu_profile: str | None) -> None:
    """Refuse ``--gpu-profile FILE`` with a ``--step-cost`` other than the roofline: the GPU profile prices the
    roofline's steps, which the calibrated step cost replaces, so one of the two would be silently ignored.

    Raises:
        InputError: both given.
    """
    if step_cost != "roofline" and gpu_profile not in (None, "auto", "none"):
        from kvledger.errors import InputError

        raise InputError(f"give either --step-cost {step_cost} or --gpu-profile {gpu_profile}, not both: the GPU "
                         "profile prices the roofline's steps, and this --step-cost replaces the roofline (keep "
                         "--step-cost roofline to price by the GPU profile)")


#: the flags that price only the roofline's steps: (attributes, as simulate's and the judgment commands' flag groups
#: name them; flag)
ROOFLINE_ONLY = ((("achievable_flops_fraction", "flops_fraction"), "--achievable-flops-fraction"),
                 (("achievable_bandwidth_fraction", "bandwidth_fraction"), "--achievable-bandwidth-fraction"),
                 (("gemm_efficiency",), "--gemm-efficiency"), (("allreduce_link_share",), "--allreduce-link-share"))


def unused_roofline_flags(a: Any, step_cost: str | None) -> str | None:
    """The warning for flags that price only the roofline (``ROOFLINE_ONLY``, as given on ``a``) under a ``--step-cost``
    that replaces it, or None: a bundled calibration (``calibrated``, ``calibrated:KEY``) prices every step, the
    roofline only the comparison in its note; a model-scope profile (PROFILE.json) leaves the roofline unused."""
    values = [(flag, next((v for k in keys if (v := getattr(a, k, None)) is not None), None))
              for keys, flag in ROOFLINE_ONLY]
    given = [f"{flag} {v}" for flag, v in values if v is not None]
    if step_cost in (None, "roofline") or not given:
        return None
    one = len(given) == 1
    bundled = step_cost == "calibrated" or step_cost.startswith("calibrated:")
    what = (f"{'it prices' if one else 'they price'} only the roofline the step cost's note compares with the "
            "calibration" if bundled else f"{'it is' if one else 'they are'} not used")
    return (f"{', '.join(given)} price{'s' if one else ''} the roofline's steps, which --step-cost {step_cost} "
            f"replaces: this run's steps are priced by the calibration alone ({what})")


def poor_profile_warning(prof: Any, cost_info: dict[str, Any]) -> None:
    """A warning first, as a model-scope profile used off its range gets one, when the GPU profile pricing the run fits
    its own runs poorly (``ledgers.profile_band.fit_verdict``; its bands already widen to the uncalibrated ones), and
    when its fit priced them no better than no profile (``GpuProfile.recommended``)."""
    from kvledger.ledgers.profile_band import fit_verdict

    if prof is None:
        return
    poor, bad, within, total = fit_verdict(list(prof.runs))
    if poor:
        cost_info.setdefault("warnings", []).append(
            f"{prof.label}: its own fit is poor ({within} of {total} runs within ±15% in-sample; "
            f"{'; '.join(bad[:2])}{'; …' if len(bad) > 2 else ''}): what it prices is no better known than the "
            "uncalibrated roofline, and the error bands say so")
    if not getattr(prof, "recommended", True):
        why = getattr(prof, "recommended_note", "") or ("on its own runs the uncalibrated default (--gpu-profile "
                                                        "none) priced them as well as its fit did")
        cost_info.setdefault("warnings", []).append(
            f"{prof.label}: not recommended — {why} (its \"recommended\": false); keep the default "
            "(--gpu-profile none) or refit")
