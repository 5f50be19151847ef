"""The error band of each searched candidate's SLO capacity, and whether the winner and the runner-up could swap inside
it (``kvledger.ledgers.error_band``)."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.search.frontier import tier_twins
from kvledger.ledgers.error_band import Band, flips_inside, regime_of
from kvledger.ledgers.profile_band import profile_band

__all__ = ["search_regime", "search_band", "band_notes"]


def _profile(spec: Any, gpu_name: str):
    from kvledger.accounting.gpu_profile import choice_for_gpu, resolve_gpu_profile
    from kvledger.catalog.gpu_file import resolve_gpu

    if spec.step_cost != "roofline":
        return None
    name = resolve_gpu(gpu_name).name
    return resolve_gpu_profile(choice_for_gpu(getattr(spec, "gpu_profile", None), name), name)


def search_regime(spec: Any, gpu_name: str) -> str:
    """The regime a candidate was priced in: the search's step cost, the GPU's bundled profile, the model's kind."""
    from kvledger.catalog.models import load_model

    scope = "model" if spec.step_cost != "roofline" else "gpu" if _profile(spec, gpu_name) is not None else \
        "uncalibrated"
    return regime_of(scope, load_model(spec.model).is_moe, "vllm")


def search_band(spec: Any, candidate: dict[str, Any]) -> Band | None:
    """A candidate's capacity band: its regime's, made honest for the GPU profile that priced it
    (``kvledger.ledgers.profile_band``: the candidate's model and TP against the profile's fit)."""
    from kvledger.analyses.serving.prediction_bands import profile_facts
    from kvledger.catalog.models import load_model

    facts = profile_facts(_profile(spec, candidate["gpu_id"]))
    return profile_band(search_regime(spec, candidate["gpu_id"]), "throughput", facts, load_model(spec.model).name,
                        candidate.get("tp"))


def band_notes(spec: Any, feasible_ranked: list[dict[str, Any]], rank_value) -> list[str]:
    """Each ranked candidate gets ``capacity_band`` (req/s low, high, regime); a note when the runner-up's cost is
    within the capacity band of the winner's (the ranking may flip inside the band)."""
    notes = []
    for e in feasible_ranked:
        band = search_band(spec, e)
        cap = e["capacity"]["goodput_req_per_s"]
        e["capacity_band"] = None if band is None else {"low": cap * band.low, "high": cap * band.high,
                                                        "regime": band.regime, "source": band.source}
    if len(feasible_ranked) >= 2:
        a, b = feasible_ranked[0], feasible_ranked[1]
        band = search_band(spec, a)
        if tier_twins(a, b):
            notes.append(f"the winner {a['id']} and the runner-up {b['id']} are one setup with and without a KV tier "
                         f"at the same simulated capacity ({a['capacity']['goodput_req_per_s']:,.4g} good req/s): a "
                         "capacity error moves both alike, so the capacity band cannot flip them; the tier's price "
                         "orders them")
        elif flips_inside(rank_value(a), rank_value(b), band):
            which = band.regime if band else "no band"
            notes.append(f"the winner {a['id']} and the runner-up {b['id']} are closer in cost than the capacity's "
                         f"80% error band ({which}): the ranking may flip inside the band; "
                         "measure both or calibrate the GPU (kvledger calibrate --scope gpu)")
        else:
            notes.append(f"the winner {a['id']} stays ahead of the runner-up {b['id']} across the capacity's 80% error "
                         f"band ({band.regime})")
    return notes
