"""The headline of a search with no feasible candidate says why: memory rejections are named as such, with their fix,
instead of an SLO miss (fresh-user trial: `search meta-llama/Llama-3.1-70B --gpu L40S --tp 4` said "no candidate meets
the SLO … loosen the SLO" when the only candidate could not hold one max_model_len request)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.report.search_view import _no_winner_line


def _result(*reasons: str) -> SimpleNamespace:
    return SimpleNamespace(entries=[{"id": f"c{i}", "status": "rejected", "reason": r} for i, r in enumerate(reasons)])


def test_memory_rejections_are_named_with_their_fix():
    line = _no_winner_line(_result("max_model_len", "max_model_len", "does not fit"))
    assert line.startswith("no candidate can start: 2 rejected for max_model_len; 1 rejected for does not fit")
    assert "lower --max-model-len" in line and "SLO" not in line


def test_an_slo_miss_among_them_keeps_the_slo_headline():
    line = _no_winner_line(_result("max_model_len", "SLO not met at any rate"))
    assert line.startswith("no candidate meets the SLO")
