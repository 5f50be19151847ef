"""The band a searched candidate's capacity takes from its pricing regime (the search's step cost, the GPU's bundled
profile, the model's kind), made honest for the GPU profile that priced it; split from ``bands`` so that the capacity
searches (``capacity``, ``disagg_band``) read it without the ranking's imports."""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.error_band import Band, regime_of
from kvledger.ledgers.profile_band import profile_band

__all__ = ["search_profile", "search_regime", "search_band"]


def search_profile(spec: Any, gpu_name: str):
    """The GPU profile pricing a candidate on ``gpu_name`` (a catalog name or id, or a GPU file) under the search's
    ``--gpu-profile``; None for a calibrated step cost or no profile."""
    from kvledger.accounting.gpu_profile import resolve_gpu_profile
    from kvledger.accounting.gpu_profile_search import choice_for_gpu
    from kvledger.catalog.gpu_file import resolve_gpu

    if spec.step_cost != "roofline":
        return None
    name = resolve_gpu(gpu_name).name
    return resolve_gpu_profile(choice_for_gpu(getattr(spec, "gpu_profile", None), name), name)


def search_regime(spec: Any, gpu_name: str) -> str:
    """The regime a candidate was priced in: the search's step cost, the GPU's bundled profile, the model's kind."""
    from kvledger.catalog.models import load_model

    scope = "model" if spec.step_cost != "roofline" else "gpu" if search_profile(spec, gpu_name) is not None else \
        "uncalibrated"
    return regime_of(scope, load_model(spec.model).is_moe, getattr(spec, "engine", None) or "vllm")  # --engine


def search_band(spec: Any, candidate: dict[str, Any], metric: str = "throughput") -> Band | None:
    """A candidate's capacity band (``metric``'s: the saturation throughput's unless told): its regime's, made honest
    for the GPU profile that priced it (``kvledger.ledgers.profile_band``: the candidate's model and TP against the
    profile's fit)."""
    from kvledger.analyses.serving.prediction_bands import profile_facts
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    facts = profile_facts(search_profile(spec, candidate["gpu_id"]))
    band = profile_band(search_regime(spec, candidate["gpu_id"]), metric, facts, load_model(spec.model).name,
                        candidate.get("tp"))
    gpu = resolve_gpu(candidate["gpu_id"])  # a catalog id, or a GPU file's described GPU
    dp = (candidate.get("data_parallel_size") or 1) > 1  # vLLM's DP ranks: no run behind the bands had them
    return None if band is None else band.on_gpu(gpu.gpu_id, gpu.name).beyond("data parallelism" if dp else None)
