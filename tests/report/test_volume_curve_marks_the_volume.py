"""The report's "monthly bill against volume" figure carries the volume the report was asked about: a head of platform
sending the report to a CFO found every row but theirs (752,053 requests a month fell between two sampled rows)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.analyses.serving.cost_curves import volume_curve
from kvledger.catalog.prices import find_gpu_price
from kvledger.ledgers.breakeven import break_even_volume
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.report.figures_serving import cost_by_volume

# as tests/ledgers/test_instances.py: one replica of 1 GPU takes c = 1,000 requests a month at 100 %, the API costs
# $30 a request, Nebius sells H100s 8 to an instance at $2.95/GPU-h (8 × 2.95 × 730 = $17,228 a month, whole)
NEBIUS_H100 = GpuRate.from_catalog(find_gpu_price("nvidia_h100_sxm", "Nebius", "gpu-h100-sxm 8gpu"))
CAP = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)
BV = break_even_volume(CAP, SelfHostSetup(NEBIUS_H100, 1, 1.0, max_utilization=1.0), 30.0)


def test_the_volume_priced_is_a_point_of_the_curve_with_its_bill():
    c = volume_curve({"break_even_volume": BV, "monthly": {"requests": 2_500.0}})
    assert c["volume_requests_per_month"] == 2_500.0
    mine = next(p for p in c["points"] if p["requests_per_month"] == 2_500.0)
    # ⌈2,500 ÷ 1,000⌉ = 3 replicas, all on one 8-GPU instance: $17,228; the API: 2,500 × $30 = $75,000
    assert mine["replicas"] == 3
    assert mine["self_host_usd_per_month"] == pytest.approx(17_228)
    assert mine["api_usd_per_month"] == pytest.approx(75_000)
    # without a volume: no point added, none named
    assert volume_curve({"break_even_volume": BV})["volume_requests_per_month"] is None


def test_the_figure_marks_the_volumes_row_and_says_so():
    c = volume_curve({"break_even_volume": BV, "monthly": {"requests": 2_500.0}})
    data = SimpleNamespace(curves={"volume": c}, cost={"inputs": {"api_price": "OpenAI:gpt-4.1"}})
    f = cost_by_volume(data)
    assert ["2,500 (your volume)", "3", "17,228", "75,000"] in f.rows
    assert f.caption.endswith("Your volume, 2,500 requests a month, is the row marked.")


def test_the_figures_marks_say_requests_not_a_bare_per_month():
    # a head of engineering who typed 3B tokens a month read "break-even 6,900,808/month" as tokens: the marks carry
    # the x axis's unit. Break-even: one whole 8-GPU instance, $17,228 a month, against $30 a request on the API:
    # 17,228 ÷ 30 = 574.27 requests a month (each of its 8 replicas takes 1,000, so self-hosting stays cheaper above)
    c = volume_curve({"break_even_volume": BV, "monthly": {"requests": 2_500.0}})
    data = SimpleNamespace(curves={"volume": c}, cost={"inputs": {"api_price": "OpenAI:gpt-4.1"}})
    ax = cost_by_volume(data).fig.axes[0]
    assert c["break_even_requests_per_month"] == pytest.approx(17_228 / 30)
    assert [t.get_text() for t in ax.texts] == ["break-even 574 requests/month"]
    assert "your volume, 2,500 requests/month" in [t.get_text() for t in ax.get_legend().get_texts()]
