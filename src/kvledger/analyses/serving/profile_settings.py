"""Whether a model-scope calibration profile (``kvledger calibrate`` → ``--step-cost PROFILE.json``) is applied to the
engine it was fitted on: its fitted step times are those of the runs' engine settings (the vLLM version,
``max_num_seqs``, ``max_num_batched_tokens`` it records), and a simulation under other settings batches otherwise, so
the fit says nothing of it. The warning names each setting, both values and the flags that restore the fitted ones.
"""

from __future__ import annotations

from typing import Any

__all__ = ["profile_settings_warning"]

#: (the profile's key in "engine" or "engine_flags", the plan's memory attribute, the simulate flag)
_SETTINGS = (("engine_version", "engine_version", "--engine-version"),
             ("max_num_seqs", "max_num_seqs", "--max-num-seqs"),
             ("max_num_batched_tokens", "max_num_batched_tokens", "--max-num-batched-tokens"))


def _recorded(profile: dict[str, Any], key: str) -> Any:
    for part in ("engine", "engine_flags"):
        block = profile.get(part)
        if isinstance(block, dict) and block.get(key) not in (None, ""):
            return block[key]
    return None


def _same(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def profile_settings_warning(path: str, profile: dict[str, Any], plan: Any) -> str | None:
    """The sentence for a profile (``path``, loaded as ``profile``) applied under engine settings other than those it
    was fitted on (``plan.memory``'s resolved version, max_num_seqs and max_num_batched_tokens); None when they agree
    or the profile records none of them."""
    memory = getattr(plan, "memory", None)
    if memory is None:
        return None
    differs = []
    for key, attr, flag in _SETTINGS:
        fitted, here = _recorded(profile, key), getattr(memory, attr, None)
        if fitted is not None and here is not None and not _same(fitted, here):
            differs.append((key, fitted, here, flag))
    if not differs:
        return None
    pairs = "; ".join(f"{k}: fitted {a}, simulated {b}" for k, a, b, _ in differs)
    flags = " ".join(f"{f} {a}" for _, a, _, f in differs)
    return (f"--step-cost {path} was fitted on other engine settings ({pairs}): its step times are of the engine it "
            f"was fitted on, which batches otherwise, so the figures are of another engine; pass {flags} to simulate "
            "the engine it was fitted on")
