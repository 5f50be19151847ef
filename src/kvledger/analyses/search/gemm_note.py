"""How a search's candidates had their weight matmuls priced, in one note: by the GPU's measured efficiency curve
(``kvledger.accounting.gemm_efficiency``) or flat, per GPU — so that a ranking across GPUs priced on different bases
says so (fresh-user trial: an H100 SXM on the curve ranked against an H100 PCIe at a flat 70% without a word); and,
where ``--allreduce-link-share`` was given, the TP all-reduces' share of their link (``link_note``)."""

from __future__ import annotations

from typing import Any

__all__ = ["gemm_note", "link_note", "quantization_note", "matmul_mode"]


def _mode(spec: Any, gid: str, gpu, model) -> str:
    """"measured" or "flat": how simulate prices this model's matmuls on ``gpu`` (the candidates' ``gpu_id``
    ``gid``: a catalog id or a GPU file) with the search's flags."""
    from kvledger.accounting.gemm_efficiency import curve_prices
    from kvledger.analyses.search.bands import search_profile
    from kvledger.analyses.serving.gemm_choice import gemm_mode

    measured = gemm_mode(spec, search_profile(spec, gid)) == "measured"  # the flag, else the profile's, else measured
    return "measured" if measured and curve_prices(model, gpu, bundled=False) else "flat"  # the mode says the rest


def matmul_mode(spec: Any, gid: str, model) -> str:
    """``_mode`` for the candidates' ``gpu_id`` ``gid`` (resolved here) and the roofline's ``model``."""
    from kvledger.catalog.gpu_file import resolve_gpu

    return _mode(spec, gid, resolve_gpu(gid), model)


def gemm_note(spec: Any, entries: list[dict[str, Any]]) -> str | None:
    """The note, over the GPUs of the candidates that were planned; None for a calibrated step cost or no GPU."""
    from kvledger.accounting.plan import roofline_model
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    ids = sorted({e["gpu_id"] for e in entries if e.get("status") not in ("rejected", "error") and "gpu_id" in e})
    if spec.step_cost != "roofline" or not ids:
        return None
    # the weights the steps read: FP8 under --quantization fp8, whose GEMMs the measured (BF16) curve does not price
    model = roofline_model(load_model(spec.model), make_settings(quantization=getattr(spec, "quantization", None)))
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
    """How the TP all-reduces of the planned candidates at TP > 1 were priced, per GPU, in simulate's words
    (``tp_comm.link_words``): at the share ``--allreduce-link-share`` gave (on every link, NVLink too), a GPU
    profile's fitted share, or the PCIe rule's default — which sets such a candidate's capacity. None under a
    calibrated step cost, with no candidate at TP > 1, or where every such GPU's scale-up link is at its catalog
    figure."""
    from kvledger.accounting.tp_comm import link_words
    from kvledger.analyses.search.bands import search_profile
    from kvledger.analyses.serving.roofline_choice import LINK_GIVEN
    from kvledger.catalog.gpu_file import resolve_gpu

    if spec.step_cost != "roofline":
        return None
    share = getattr(spec, "allreduce_link_share", None)
    gpus = list(dict.fromkeys(e["gpu_id"] for e in entries if e.get("status") not in ("rejected", "error")
                              and max(e.get("tp") or 1, e.get("decode_tp") or 1) > 1))
    parts = []
    for gid in gpus:
        g = resolve_gpu(gid)
        fitted = None if share is not None else getattr(search_profile(spec, gid), "allreduce_link_share", None)
        words = link_words(g, share if share is not None else fitted, LINK_GIVEN if share is not None else None)
        if words:
            parts.append(f"{gid} {words}")
    if not parts:
        return None
    return ("TP all-reduces of the candidates at TP > 1: " + "; ".join(parts) + (
        "" if share is not None else " — the share is the host's (peer access, PCIe switches) and moves these "
        "candidates' capacity: --allreduce-link-share X gives yours"))


def quantization_note(spec: Any) -> str | None:
    """Every candidate's ``--quantization`` in words (its plan, its step times, its launch lines), or None."""
    q = getattr(spec, "quantization", None)
    if q is None:
        return None
    return (f"every candidate runs vLLM --quantization {q}: its KV pool is planned with the weights quantized on load "
            f"(as `kvledger plan --quantization {q}`), its steps read those weights, and its launch lines carry the "
            "flag")
