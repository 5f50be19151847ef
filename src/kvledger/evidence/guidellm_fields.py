"""What a GuideLLM ``benchmarks.json`` states beside its requests and metrics: the model (its place moved between
versions) and whether the request lists keep every request or a sample (``--output-sampling``)."""

from __future__ import annotations

from typing import Any

__all__ = ["model_of", "sampled"]


def model_of(obj: dict[str, Any]) -> str | None:
    """The served model a GuideLLM report or one of its benchmarks names, else None."""
    # GuideLLM 0.2–0.3 names it only as worker.backend_model, "None" when the backend had none (scheduler/worker.py,
    # GenerativeRequestsWorker.description: backend.model or "None")
    for path in (("config", "spec", "backend", "model"), ("config", "backend", "model"), ("args", "model"),
                 ("worker", "backend_model")):
        cur: Any = obj
        for k in path:
            cur = cur.get(k) if isinstance(cur, dict) else None
        if isinstance(cur, str) and cur != "None":
            return cur
    return None


def sampled(kept: dict[str, list[tuple[int, Any]]], totals: dict[str, int | None]) -> bool:
    """True when the lists keep fewer successful or errored requests than the run's totals (``--output-sampling``)."""
    return any(totals[s] is not None and totals[s] > len(kept[s]) for s in ("successful", "errored"))
