"""``cost --simulate`` with an SLO no request meets even near idle names the limit missed there and does not offer
more replicas (which add capacity, not speed) as the way out."""

from __future__ import annotations

import pytest
from cli_run import MODEL

from kvledger.errors import NoAnswerError


def test_idle_miss_names_the_limit_and_drops_replicas():
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    # Llama-3.1-8B's prefill of one azure-conv prompt (~800 tokens) is ≈ 2 × 8.0e9 × 800 = 12.8 TFLOP, ≈ 16 ms at an
    # H100's ~800 TFLOP/s achievable: over a 5 ms TTFT on an idle engine, so every request misses at every rate.
    with pytest.raises(NoAnswerError) as err:
        CliRunner().invoke(app, ["cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=5ms",
                                 "--num-requests", "100", "--monthly-tokens", "1e9"], catch_exceptions=False)
    msg = " ".join(str(err.value).split())
    assert "missed ttft ≤ 5 ms: with the engine nearly idle the step time itself is over the limit" in msg
    assert "--replicas" not in msg and "no capacity to price: lower --target" in msg
