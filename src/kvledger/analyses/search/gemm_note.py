"""How a search's candidates had their weight matmuls priced, in one note: by the GPU's measured efficiency curve
(``kvledger.accounting.gemm_efficiency``) or flat, per GPU — so that a ranking across GPUs priced on different bases
says so (fresh-user trial: an H100 SXM on the curve ranked against an H100 PCIe at a flat 70% without a word); and,
where ``--allreduce-link-share`` was given, the TP all-reduces' share of their link (``link_note``)."""

from __future__ import annotations

from typing import Any

__all__ = ["gemm_note", "link_note"]


def _mode(spec: Any, gid: str, gpu, model) -> str:
    """"measured" or "flat": how simulate prices this model's matmuls on ``gpu`` (the candidates' ``gpu_id``
    ``gid``: a catalog id or a GPU file) with the search's flags."""
    from kvledger.accounting.gemm_efficiency import curve_prices
    from kvledger.analyses.search.bands import search_profile
    from kvledger.analyses.serving.gemm_choice import gemm_mode

    measured = gemm_mode(spec, search_profile(spec, gid)) == "measured"  # the flag, else the profile's, else measured
    return "measured" if measured and curve_prices(model, gpu, bundled=False) else "flat"  # the mode says the rest


def gemm_note(spec: Any, entries: list[dict[str, Any]]) -> str | None:
    """The note, over the GPUs of the candidates that were planned; None for a calibrated step cost or no GPU."""
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    ids = sorted({e["gpu_id"] for e in entries if e.get("status") not in ("rejected", "error") and "gpu_id" in e})
    if spec.step_cost != "roofline" or not ids:
        return None
    model = load_model(spec.model)
    by: dict[str, list[str]] = {"measured": [], "flat": []}
    for gid in ids:
        gpu = resolve_gpu(gid)
        by[_mode(spec, gid, gpu, model)].append(gpu.name)
    parts = []
    if by["measured"]:
        parts.append("by the GPU's measured efficiency against tokens per step on " + ", ".join(by["measured"]))
    if by["flat"]:
        parts.append("at one flat FLOP fraction on " + ", ".join(by["flat"]))
    return ("weight matmuls priced " + "; ".join(parts) + " (kvledger.accounting.gemm_efficiency; a ranking across "
            "the two compares figures priced on different bases)" if by["measured"] and by["flat"] else
            "weight matmuls priced " + parts[0] + " (kvledger.accounting.gemm_efficiency)")


def link_note(spec: Any, entries: list[dict[str, Any]]) -> str | None:
    """How the TP all-reduces of the planned candidates at TP > 1 were priced (simulate's words): at the share
    ``--allreduce-link-share`` gave, on every link; else, where a candidate's GPU has no scale-up link, at the PCIe
    rule's default share (``tp_comm``) or its GPU profile's fitted one, which set such a candidate's capacity. None
    under a calibrated step cost, or with no candidate at TP > 1 (or only NVLink ones at the catalog figure)."""
    from kvledger.accounting.gpu_profile import choice_for_gpu, resolve_gpu_profile
    from kvledger.accounting.tp_comm import PCIE_ALLREDUCE_SHARE, PCIE_ALLREDUCE_SHARE_RANGE, over_pcie
    from kvledger.analyses.serving.roofline_choice import LINK_GIVEN
    from kvledger.catalog.gpu_file import resolve_gpu

    share = getattr(spec, "allreduce_link_share", None)
    gpus = list(dict.fromkeys(e["gpu_id"] for e in entries if e.get("status") not in ("rejected", "error")
                              and max(e.get("tp") or 1, e.get("decode_tp") or 1) > 1))
    if spec.step_cost != "roofline" or not gpus:
        return None
    if share is not None:
        return (f"TP all-reduces at {share:.3g} of their link's one-direction bandwidth in every candidate at TP > 1, "
                f"over PCIe and scale-up links (NVLink) alike ({LINK_GIVEN}; by default the PCIe rule's "
                f"{PCIE_ALLREDUCE_SHARE:g} of the host link, the catalog's figure for a scale-up link: "
                "accounting/tp_comm.py)")
    parts = []
    for gid in gpus:
        g = resolve_gpu(gid)
        if not over_pcie(g):
            continue
        prof = resolve_gpu_profile(choice_for_gpu(spec.gpu_profile, g.name), g.name)
        fitted = getattr(prof, "allreduce_link_share", None)
        parts.append(f"{gid} at {fitted:.3g} (its GPU profile's fit)" if fitted is not None else
                     f"{gid} at {PCIE_ALLREDUCE_SHARE:g} (the default rule, range {PCIE_ALLREDUCE_SHARE_RANGE[0]:g}–"
                     f"{PCIE_ALLREDUCE_SHARE_RANGE[1]:g})")
    if not parts:
        return None
    return ("TP all-reduces over PCIe (no scale-up link) in the candidates at TP > 1, as a share of the host link's "
            "one-direction bandwidth: " + "; ".join(parts) + " (accounting/tp_comm.py); the share is the host's "
            "(peer access, PCIe switches) and moves these candidates' capacity: --allreduce-link-share X gives yours")
