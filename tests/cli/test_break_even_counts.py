"""cost's break-even utilization is priced at the replicas the volume needs (the verdict's: the factor row compares
that deployment's realized utilization with it), the break-even volume at its own replica count
(``replicas_at_break_even``); when the two differ, the JSON and the report's sentence say which count each is at
(kvledger.ledgers.breakeven, ledgers.cost_summary, report.html_report.break_even_text)."""

from __future__ import annotations

import pytest
from cli_run import cli_json

ARGV = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-provider", "Lambda",
        "--num-requests", "100", "--slo", "ttft=1s,tpot=100ms", "--api", "OpenAI:gpt-4.1", "--monthly-tokens", "100B"]


def test_each_break_even_figure_says_its_replica_count():
    from kvledger.report.html_report import break_even_text

    c = cli_json(*ARGV)
    bu, bv = c["break_even_utilization"], c["break_even_volume"]
    full = bu["requests_per_month_at_full_load"]
    assert full == pytest.approx(19.5 * 3600 * 730)  # 19.5 SLO-capacity req/s × 3600 × 730 = 51,246,000
    # the volume needs 3 replicas: 3 TP-1 engines on 3 Lambda gpu_1x ($4.29/h, below one gpu_8x at $31.92/h):
    # rent $9,395.10; u* = (9,395.10 + 5,000) ÷ (3 × 51,246,000 × $0.0029681) = 14,395.10 ÷ 456,311.6 = 3.15%
    assert (c["decision"]["replicas"], bu["replicas"]) == (3, 3)
    assert bu["utilization"] == pytest.approx(14_395.10 / (3 * 51_246_000 * 0.0029681))
    assert bu["replicas_basis"] == ("the volume's (the verdict's); the break-even volume's are its "
                                    "replicas_at_break_even")
    # V* opens the window of 1 replica: (one gpu_1x $3,131.70 + people $5,000) ÷ $0.0029681 = 2,739,699 requests,
    # which is u* of 1 replica (2,739,699 ÷ 51,246,000 = 5.35%), not the 3.15% of the volume's 3
    assert bv["replicas_at_break_even"] == 1
    assert bv["requests_per_month"] == pytest.approx(8_131.70 / 0.0029681)
    assert bv["requests_per_month"] / full == pytest.approx(bv["first_cheaper_utilization"])
    assert break_even_text(c) == ("Break-even utilization (the 3 replicas this volume needs, sharing the people line) "
                                  "3.15%; break-even volume 2,739,699 requests per month (on 1 replica).")
    # no volume: one replica's u*, and the same count as V*'s: no second count
    one = cli_json(*ARGV[:-2], "--utilization", "0.5")
    assert one["break_even_utilization"]["replicas_basis"] == "one replica: no volume given"
    assert break_even_text(one).endswith("break-even volume 2,739,699 requests per month.")
