"""``simulate`` reads a queue that grew only within the trace's own bursts, in a run long enough to show its load whose
mean TTFT did not climb to a knee and whose engine kept pace with the arrivals, as kept up (a fresh user's light-load
run was called "overloaded" and its offered rate labelled the throughput at saturation)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.analyses.serving.overloads import KEPT_PACE, QueueGrowth
from kvledger.cli.main import app

RUN = ["simulate", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "a100-80gb-sxm", "--policy", "sglang", "--trace", "azure-conv",
       "--num-requests", "500", "--rate", "4"]


def _growth(last: int, arrived: float, finished: float) -> QueueGrowth:
    # backlog 10 at the median arrival, 12.8 expected at the last from the arrival rate's change, 13.8 the bursts' swing
    return QueueGrowth(60.0, 120.0, 10, last, arrived, finished, "", None, 12.8, 13.8)


def test_kept_up_needs_the_bursts_and_the_pace():
    # 26 − 12.8 = 13.2 ≤ 13.8: within the bursts; 4.26 ÷ 4.55 = 0.936 ≥ 0.8: kept pace
    assert _growth(26, 4.55, 4.26).kept_up
    assert not _growth(27, 4.55, 4.26).kept_up  # 14.2 > 13.8: past the bursts
    assert not _growth(26, 4.55, KEPT_PACE * 4.55 - 0.01).kept_up  # finished under 80% of the arrival rate


def test_a_light_load_is_not_called_overloaded():
    # about half this set-up's SLO capacity (goodput --simulate --target finds 8.25 req/s): the backlog went 10 → 26
    # against 12.8 expected, within the 13.8 the bursts add; mean TTFT 96 ms; 4.26 of 4.55 req/s finished in the second
    # half — kept up: no overload record, the latency bands kept, no "throughput at saturation" band
    res = CliRunner().invoke(app, [*RUN, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["overload"] is None
    assert {"ttft_mean", "tpot_mean"} <= set(doc["error_bands"]) and "throughput" not in doc["error_bands"]
    # the two instants (10 → 26) grow, but the backlog's time averages over the second and last quarters of arrivals
    # do not (backlog_windows: both checks must agree), so the run is not even a growth within the bursts: no note
    assert not any(n.startswith("kept up within the trace's bursts") for n in doc["notes"])
    text = " ".join(CliRunner().invoke(app, RUN).output.split())
    assert "overloaded" not in text and "throughput at saturation" not in text
