"""Whether a GPU fit's FLOP fraction was set by TTFT alone (``calibrate --scope gpu`` without --fit-frontend).

The FLOP fraction prices the prefill chunks; the bandwidth fraction the decodes. A run of short prompts at a light load
decodes in steps that hold almost no prefill, so its TPOT barely moves with the FLOP fraction: only its TTFT does. Its
TTFT also holds the set-up's latency outside the engine (the client, the server's front end), which the fit cannot
tell from a slower prefill unless it fits that latency apart (--fit-frontend). A fit that lowers the FLOP fraction to
fill that gap then prices other runs' prefills too slowly — and where prefill chunks ride inside decode steps (chunked
prefill under a load of short outputs), their TPOT too.

Measured (a fresh-user trial): fitted on one stage of Llama-2-7B on an H100 (inference-sim/training, 248-token outputs
at 8 req/s), the fit took the FLOP fraction to 0.68 (the default: 1.0 × the measured curve). Between the two that
stage's simulated TPOT moved 0.5 points (−4.1% → −3.6% against the measured), its TTFT by far more. Applied to
Llama-3.1-8B's kubecon stage 2 (61.8 req/s, 204-token prompts, 62-token outputs: about 12.5k prefill tokens/s inside
the decode steps), TPOT went from −1.3% (no profile) to +59.7%. Fitted with --fit-frontend, the same stage gave a
5.9 ms front end, FLOP fraction 1.0, and kubecon TPOT +0.4%.

So where the fit did not fit the front end, and its FLOP fraction is at least ``FLOPS_GAP`` away from the default's,
each run is replayed at both FLOP fractions (the other terms as fitted): when no run's mean TPOT moves by
``TPOT_SHIFT`` or more, TPOT did not see the FLOP fraction, and the profile is written not recommended with the reason
and the remedy. Both thresholds are this check's, not fitted. Two replays per run.
"""

from __future__ import annotations

from typing import Any

from kvledger.calibration.gpu_fit import GpuFit, default_fractions, roofline_with
from kvledger.calibration.replay import replay

__all__ = ["FLOPS_GAP", "TPOT_SHIFT", "flops_from_ttft_alone", "ttft_alone_note"]

FLOPS_GAP = 0.10  # |fitted ÷ default FLOP fraction − 1|, at least, for the check to run
TPOT_SHIFT = 0.02  # a run's mean simulated TPOT moving by this share between the two: TPOT saw the FLOP fraction


def _mean_tpot(res: Any) -> float | None:
    """Mean simulated TPOT, s, over the replay's completed requests with more than one output token."""
    got = [r.tpot_s for r in res.records.records if r.ok and r.first_token_s is not None and r.num_output_tokens > 1]
    return sum(got) / len(got) if got else None


def flops_from_ttft_alone(items: list[tuple[Any, Any]], fit: GpuFit, fit_frontend: bool) -> dict[str, Any] | None:
    """{flops_fraction, default_flops_fraction, tpot_shift_max, threshold} when the fit's FLOP fraction was set by
    TTFT alone (module doc); None when the front end was fitted, the fraction is near the default's, or some run's
    TPOT moved with it. ``items``: the fit's (measured run, SimSetup) pairs."""
    if fit_frontend or not items:
        return None
    dff = default_fractions(items[0][1])[0]
    if abs(fit.flops_fraction / dff - 1.0) < FLOPS_GAP:
        return None
    shifts = []
    for run, s in items:
        a = _mean_tpot(replay(run, s.config, roofline_with(s, *fit.terms)))
        b = _mean_tpot(replay(run, s.config, roofline_with(s, dff, *fit.terms[1:])))
        if a and b:
            shifts.append(abs(b / a - 1.0))
    if not shifts or max(shifts) >= TPOT_SHIFT:
        return None
    return {"flops_fraction": fit.flops_fraction, "default_flops_fraction": dff, "tpot_shift_max": max(shifts),
            "threshold": TPOT_SHIFT}


def ttft_alone_note(got: dict[str, Any]) -> str:
    """Why a profile whose FLOP fraction TTFT alone set is not recommended, and what to do."""
    return (f"its FLOP fraction ({got['flops_fraction']:.3f}, the default's {got['default_flops_fraction']:g}) was set "
            f"by TTFT alone: between the two no run's simulated mean TPOT moved {got['threshold']:.0%} (at most "
            f"{got['tpot_shift_max']:.1%}), and TTFT holds the set-up's latency outside the engine, which a slower "
            "prefill stands in for; other runs' prefills (and, with chunked prefill under load, their TPOT) would be "
            "priced too slow — refit with --fit-frontend, or add a run whose steps carry prefills (a higher load or "
            "longer prompts)")
