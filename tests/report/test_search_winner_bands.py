"""The winner line names both capacity bands its "runner-up … inside" statement was judged on
(``frontier.ranking_margin``: the winner's cost at its band's low end against the runner-up's at its own high end)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.analyses.search.frontier import ranking_margin
from kvledger.report.search_answer import winner_line


def _entry(cid: str, usd_per_1k: float, band: tuple[float, float] | None) -> dict:
    e = {"id": cid, "gpu_id": "nvidia_h100_sxm", "tp": 1, "launch": {},
         "cost": {"usd_per_1k_requests": usd_per_1k, "usd_per_1k_requests_at_capacity": usd_per_1k},
         "capacity": {"slo_capacity_req_per_s": 10.0, "goodput_req_per_s": 9.0}}
    if band is not None:
        e["capacity_band"] = {"low_multiplier": band[0], "high_multiplier": band[1],
                              "regime": "uncalibrated/dense/vllm", "source": "test"}
    return e


def _line(a: dict, b: dict) -> str:
    by_id = {e["id"]: e for e in (a, b)}
    result = SimpleNamespace(winner=a, entry=by_id.get, margin=lambda: ranking_margin([a, b], "roofline"),
                             ranking=[a["id"], b["id"]], spec=None)  # one GPU, no price row: no basis flag
    return winner_line(result)


def test_the_winner_line_names_the_runner_ups_band_where_it_decided_the_flip():
    # winner $1.00 per 1k good requests, band ×0.95–×1.05; runner-up $1.15 (15% dearer), band ×0.72–×1.12. On the
    # winner's band alone they could not swap: 1.00 ÷ 0.95 = 1.053 < 1.15 ÷ 1.05 = 1.095. On both: the winner's worst
    # 1.053 > the runner-up's best 1.15 ÷ 1.12 = 1.027, so they may swap; the sentence names the band that says so
    line = _line(_entry("a", 1.00, (0.95, 1.05)), _entry("b", 1.15, (0.72, 1.12)))
    assert ("runner-up b only 15% dearer, inside their capacity bands, the winner's ×0.95–×1.05 (±5%) and the "
            "runner-up's ×0.72–×1.12 (−28%/+12%)") in line
    # the same band for both (1.00 ÷ 0.82 = 1.220 > 1.15 ÷ 1.10 = 1.045): named once
    same = _line(_entry("a", 1.00, (0.82, 1.10)), _entry("b", 1.15, (0.82, 1.10)))
    assert "runner-up b only 15% dearer, inside their capacity bands, ×0.82–×1.10 (−18%/+10%) each" in same
    # a runner-up without a band of its own is read against the winner's, and the line says so
    alone = _line(_entry("a", 1.00, (0.82, 1.10)), _entry("b", 1.15, None))
    assert ("inside the winner's capacity band ×0.82–×1.10 (−18%/+10%), the runner-up read against it (none of its "
            "own)") in alone
