"""The "Goodput against request rate" table carries the good req/s the ledger prices (rate × share within the SLO),
the headline's figure at the capacity, beside the probe's own goodput over first arrival → last finish (a fresh-user
trial: the headline's 2.82 good req/s at 3.125 req/s was found only in the throughput column, 2.55 under goodput)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.report.decision_view import sized_run_figures
from kvledger.report.figures_serving import goodput_by_rate


def _probe(value, attainment, goodput, throughput, phase, **extra):
    return {"value": value, "attainment": attainment, "goodput_req_per_s": goodput,
            "throughput_req_per_s": throughput, "phase": phase, **extra}


CS = {"probes": [_probe(3.125, 0.903, 2.55, 2.82, "bisection"), _probe(4.0, 0.5, 1.7, 3.4, "bracket"),
                 _probe(6.0, 0.3, 1.0, 3.6, "bracket", stopped_early={"attainment_upper": 0.6})],
      "target": 0.9, "slo_capacity_req_per_s": 3.125, "attainment_at_boundary": 0.903, "num_requests_per_probe": 300}
DATA = SimpleNamespace(cost={"simulation": {"capacity_search": CS}}, measured=[], commands={"capacity": "kvledger …"})


def test_priced_column_is_rate_times_share_and_holds_the_headline_figure():
    f = goodput_by_rate(DATA)
    assert f.headers == ["rate, req/s", "within SLO", "good req/s priced (rate × within SLO)",
                         "goodput, req/s (first arrival → last finish)", "throughput, req/s", "probe"]
    rows = {r[0]: r for r in f.rows}
    # 3.125 × 0.903 = 2.8219 → 2.82, the headline's good req/s there; the probe's goodput stays 2.55
    assert rows["3.125"][2:4] == ["2.82", "2.55"]
    assert f"{sized_run_figures(CS)[0]:.2f}" == rows["3.125"][2]
    assert rows["4"][2] == "2"  # 4 × 0.5 = 2
    # stopped early: its share lies in [0.3, 0.6], so 6 × 0.3 = 1.8 to 6 × 0.6 = 3.6
    assert rows["6"][2] == "1.8–3.6*"
    assert "the priced column, the headline's good req/s at the capacity" in f.caption
