"""What the search's winner line says its verdict rests on beyond the candidate's own caveats (``frontier.caveats``):
a ranking that a low-confidence price row decides (the price flip's factor, ``price_flip``), and a ranking across
GPUs whose weight matmuls were priced on different bases (a measured efficiency curve on one, a flat FLOP fraction on
the other: ``gemm_note``) — said in the winner line itself, not only in the notes printed after it."""

from __future__ import annotations

from typing import Any

__all__ = ["basis_flags"]


def basis_flags(spec: Any, winner: dict[str, Any], flip: Any, rival: dict[str, Any] | None) -> list[str]:
    """The flags: ``flip`` (``price_flip.PriceFlip`` or None) where the winner's price row is below high confidence;
    the matmul pricing where the winner's GPU is priced flat and ``rival``'s (the runner-up, or the best-ranked
    candidate on another GPU) on its measured curve, or the other way round."""
    out = []
    pr = winner.get("price") or {}
    if flip is not None and pr.get("confidence") and pr["confidence"] not in ("high", "user input"):
        out.append(f"the ranking over {flip.against} flips at {flip.winner_factor:.2f}× the winner's "
                   f"{pr['confidence']}-confidence price (see the price flip note)")
    if rival is None or rival.get("gpu_id") == winner.get("gpu_id") or getattr(spec, "step_cost", "") != "roofline":
        return out
    from kvledger.accounting.plan import roofline_model
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.search.gemm_note import matmul_mode
    from kvledger.catalog.models import load_model

    model = roofline_model(load_model(spec.model), make_settings(quantization=getattr(spec, "quantization", None)))
    mine, theirs = (matmul_mode(spec, e["gpu_id"], model) for e in (winner, rival))
    if mine != theirs:
        flat = winner if mine == "flat" else rival
        out.append(f"GPU efficiency: weight matmuls on {flat['gpu_id']} at one flat FLOP fraction, on "
                   f"{(rival if flat is winner else winner)['gpu_id']} by its measured curve (a ranking across "
                   "different bases)")
    return out
