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
    """The TP all-reduces' link share ``--allreduce-link-share`` gave every planned candidate at TP > 1 (simulate's
    words, ``roofline_choice.LINK_GIVEN``); None without it, under a calibrated step cost or with no such candidate."""
    from kvledger.accounting.tp_comm import PCIE_ALLREDUCE_SHARE
    from kvledger.analyses.serving.roofline_choice import LINK_GIVEN

    share = getattr(spec, "allreduce_link_share", None)
    tp_gt_1 = any(max(e.get("tp") or 1, e.get("decode_tp") or 1) > 1 for e in entries
                  if e.get("status") not in ("rejected", "error"))
    if share is None or spec.step_cost != "roofline" or not tp_gt_1:
        return None
    return (f"TP all-reduces at {share:.0%} of their link's one-direction bandwidth in every candidate at TP > 1 "
            f"({LINK_GIVEN}; not a GPU profile's fitted share, nor {PCIE_ALLREDUCE_SHARE:.0%} of the host link, the "
            "default rule over PCIe: accounting/tp_comm.py)")
