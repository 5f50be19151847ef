"""The error band of each searched candidate's SLO capacity, and whether the winner and the runner-up could swap inside
it (``kvledger.ledgers.error_band``)."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.search.frontier import tier_twins
from kvledger.ledgers.error_band import error_band, flips_inside, regime_of

__all__ = ["search_regime", "band_notes"]


def search_regime(spec: Any, gpu_name: str) -> str:
    """The regime a candidate was priced in: the search's step cost, the GPU's bundled profile, the model's kind."""
    from kvledger.accounting.gpu_profile import choice_for_gpu, resolve_gpu_profile
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    if spec.step_cost != "roofline":
        scope = "model"
    else:
        name = resolve_gpu(gpu_name).name
        prof = resolve_gpu_profile(choice_for_gpu(getattr(spec, "gpu_profile", None), name), name)
        scope = "gpu" if prof is not None else "uncalibrated"
    return regime_of(scope, load_model(spec.model).is_moe, "vllm")


def band_notes(spec: Any, feasible_ranked: list[dict[str, Any]], rank_value) -> list[str]:
    """Each ranked candidate gets ``capacity_band`` (req/s low, high, regime); a note when the runner-up's cost is
    within the capacity band of the winner's (the ranking may flip inside the band)."""
    notes = []
    for e in feasible_ranked:
        band = error_band(search_regime(spec, e["gpu_id"]), "throughput")
        cap = e["capacity"]["goodput_req_per_s"]
        e["capacity_band"] = None if band is None else {"low": cap * band.low, "high": cap * band.high,
                                                        "regime": band.regime, "source": band.source}
    if len(feasible_ranked) >= 2:
        a, b = feasible_ranked[0], feasible_ranked[1]
        band = error_band(search_regime(spec, a["gpu_id"]), "throughput")
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
