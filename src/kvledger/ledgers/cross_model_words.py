"""The words of a GPU profile's band where the stored cross-model band is taken in (``ledgers.profile_band``): the
band's data, the GPUs its points ran on, and one sentence naming the band used."""

from __future__ import annotations

from kvledger.catalog.gpus import get_gpu
from kvledger.ledgers.error_band import Band, stored_bands

__all__ = ["cross_model", "points_on", "with_cross_model"]


def cross_model(metric: str) -> tuple[float, float, int, str, tuple[str, ...]] | None:
    """(q10, q90, points, what its data are, the catalog ids of its GPUs) of the stored cross-model band."""
    cm = (stored_bands().get("cross_model") or {}).get("gpu/dense/vllm", {}).get(metric)
    if not cm:
        return None
    return cm["q10"], cm["q90"], cm["num_runs"], cm.get("data", "cross-model evidence"), tuple(cm.get("gpu_ids") or ())


def with_cross_model(head: str, own: str, cm: tuple, q: tuple[float, float], reasons: list[str]) -> list[str]:
    """The band's sentence, ``head`` (the regime) then ``own`` (its own band and points), with the cross-model band
    ``cm`` (``cross_model``) taken in for ``reasons``, said once: where it holds the regime's own band ``q`` whole,
    it is the band used, named first and the regime's own points after ("in place of"), so that the GPUs named are
    those of the band used; else the regime's own, then how far the cross-model band widens it."""
    q10, q90 = q
    data = f"{cm[2]} runs priced by a GPU profile fitted on other models, from {cm[3]}"
    said = f"the cross-model band {cm[0]:+.1%} … {cm[1]:+.1%}"
    if cm[0] <= q10 and cm[1] >= q90 and (cm[0], cm[1]) != (q10, q90):
        return [f"{head}: {said} ({data}), for {' and '.join(reasons)}, in place of the regime's own {own}"]
    widens = cm[0] < q10 or cm[1] > q90
    lo, hi = min(q10, cm[0]), max(q90, cm[1])
    how = "widened, each side, to take in" if widens else "no narrower than"
    return [f"{head}: {own}", f"{how} {said} ({' and '.join(reasons)}; {data})"
            + (f": {lo:+.1%} … {hi:+.1%}" if widens else ", which lies inside it")]


def points_on(base: Band, gpu_id: str | None) -> str:
    """" on X" where the profile's GPU is among those the points ran on (``Band.gpu_ids``), else whose they are."""
    names, n = ", ".join(get_gpu(g).name for g in base.gpu_ids), len(base.gpu_ids)
    if not names or gpu_id is None or gpu_id in base.gpu_ids:
        return f" on {names}" if names else ""
    whose, fitted = ("profile's", "that GPU") if n == 1 else ("profiles'", "the GPU each ran on")
    return (f", the {names} {whose} own runs, priced by a profile fitted on {fitted}, none measured on "
            f"{get_gpu(gpu_id).name} (the GPU this profile prices)")
