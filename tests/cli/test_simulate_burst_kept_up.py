"""``simulate`` reads a queue that grew only within the trace's own bursts, in a run long enough to show its load whose
mean TTFT did not climb to a knee and whose engine kept pace with the arrivals, as kept up (a fresh user's light-load
run was called "overloaded" and its offered rate labelled the throughput at saturation)."""

from __future__ import annotations

import json
import math

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


def test_the_pace_is_read_only_over_a_window_of_five_stays():
    # the window is 120 − 60 = 60 s. A kept-up engine finishes arrived − (backlog_last − backlog_mid) over it, its
    # backlog at the last arrival rate × S (Little's law), so at least 1 − S/60 of what arrived: sure to pass 0.8
    # only for S ≤ 0.2 × 60 = 12 s. S = 11.9 s: 59.5 s ≤ 60 s, read, and 1.0 of 4.55 req/s (22%) is under 80%: not
    # kept up; S = 12.5 s: 62.5 s > 60 s, not read: kept up on the bursts alone
    def grown(stay_s: float | None) -> QueueGrowth:
        return QueueGrowth(60.0, 120.0, 10, 26, 4.55, 1.0, "", None, 12.8, 13.8, stay_s=stay_s)

    assert grown(11.9).pace_read and not grown(11.9).kept_up
    assert not grown(12.5).pace_read and grown(12.5).kept_up
    assert "those 60.00 s are under 62.50 s, 5 × the 12.50 s" in grown(12.5).burst_note()
    assert grown(math.inf).pace_read and not grown(math.inf).kept_up  # the first half's median never left: read
    assert grown(None).pace_read and not grown(None).kept_up  # no stay kept: read, as before


def test_a_data_parallel_run_at_a_light_load_is_not_called_saturated():
    # DeepSeek-V3 on 8 H200 DP ranks, 200 azure-conv requests at 5 req/s: at most 6 requests waiting, yet 3.32 req/s
    # finished against 8.21 req/s arriving over the second half of the arrivals (12.07 s), the first 200 requests'
    # second half arriving 2.28× faster with outputs 1.76× longer (300 against 171 tokens). The first half's median
    # time in the system is 3.62 s (3.71 s while a step with a prefill past the 512-token CUDA graph priced its
    # unpadded gathers at the all-reduce's 34.32 µs, not the grouped broadcasts' 26.52 µs), 5 × 3.62 = 18.11 s > 12.07
    # s: the pace is not read, and the backlog (33 → 92
    # against 75 expected, within the bursts' 38) reads as kept up: latency bands kept, no saturation band
    res = CliRunner().invoke(app, ["simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "8",
                                   "--enable-expert-parallel", "--num-requests", "200", "--rate", "5", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["overload"] is None
    assert {"ttft_mean", "tpot_mean"} <= set(doc["error_bands"]) and "throughput" not in doc["error_bands"]
    assert any("those 12.07 s are under 18.11 s, 5 × the 3.62 s" in n for n in doc["notes"])
