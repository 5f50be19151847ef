"""`goodput --simulate` and `cost --simulate` take SGLang 0.5.23's DP attention (`--engine sglang --tp 8 --ep-size 8
--enable-dp-attention --dp-size 8`) through the path `simulate` takes (dp_flags.with_dp → sim_sglang_dp.py): the same
lock-step run, so the same figures, on the one TP group's 8 GPUs (SGLang's DP ranks are its attention-TP-1 ranks inside
--tp 8), not DP × TP = 64 as vLLM's DP ranks of TP 8 would be."""

from __future__ import annotations

import pytest
from cli_run import cli_json, run_cli

SG = ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8",
      "--enable-dp-attention", "--dp-size", "8")
RUN = ("--num-requests", "32", "--rate", "20")  # an overload: some first tokens wait past 200 ms


def _simulated(tmp_path, *workload: str) -> tuple[dict, list[float]]:
    """``simulate``'s own run of the workload: (its summary, each request's TTFT in s from its records.parquet)."""
    import pyarrow.parquet as pq

    d = cli_json("simulate", *SG, *workload, "--out", str(tmp_path / "sim"))
    r = pq.read_table(tmp_path / "sim" / "records.parquet").to_pydict()
    return d["summary"], [first - arrival for first, arrival in zip(r["first_token_s"], r["arrival_s"], strict=True)]


def test_goodput_counts_the_requests_simulate_serves_within_the_slo(tmp_path):
    summary, ttft = _simulated(tmp_path, *RUN)
    good = sum(t <= 0.2 for t in ttft)
    # simulate's run: 32 requests, last finish − first arrival 6.6523 s (decode steps at the CUDA-graph batch every
    # rank pads to, sglang_dp_cost.graph_padded); sorted TTFTs … 0.164, 0.178 | 0.220, 0.240 … s: 24 within 200 ms →
    # attainment 24 / 32 = 0.75, goodput 24 / 6.6523 = 3.608 req/s
    assert good == 24 and summary["num_finished"] == 32
    d = cli_json("goodput", "--simulate", *SG, *RUN, "--slo", "ttft=200ms")
    assert d["num_good"] == good and d["attainment"] == 0.75 and d["duration_s"] == summary["duration_s"]
    assert d["goodput_req_per_s"] == pytest.approx(good / summary["duration_s"]) == pytest.approx(3.6078, abs=1e-4)
    assert d["num_gpus"] == 8  # DP attention 8 in TP 8: the 8 GPUs of the one TP group


def test_cost_at_offered_load_prices_simulates_goodput_on_eight_gpus(tmp_path):
    summary, ttft = _simulated(tmp_path, *RUN)
    d = cli_json("cost", "--simulate", *SG, *RUN, "--slo", "ttft=200ms", "--at-offered-load")
    assert d["capacity"]["goodput_req_per_s"] == pytest.approx(sum(t <= 0.2 for t in ttft) / summary["duration_s"])
    # one 8-GPU H200 node rented for the deployment (vLLM's DP 8 × TP 8 would be 64 GPUs, eight nodes)
    assert d["simulation"]["num_gpus"] == 8 and d["inputs"]["num_gpus"] == 8


def test_cost_capacity_is_goodputs_boundary_and_simulate_meets_the_slo_there(tmp_path):
    probe = ("--num-requests", "50", "--slo", "ttft=1s")  # 50: the fewest a capacity probe takes
    c = cli_json("cost", "--simulate", *SG, *probe)
    g = cli_json("goodput", "--simulate", *SG, *probe, "--target", "0.9")
    cap = c["capacity"]["slo_capacity_req_per_s"]
    # the rate search over the lock-step DP ranks (seed 0, 50 requests a probe): 4.25 req/s passes, 4.3125 and up
    # are too short to tell (most requests still in the system at the last arrival); per GPU 4.25 / 8 = 0.53125
    assert cap == g["boundary"]["boundary_value"] == 4.25 and g["boundary"]["boundary_per_gpu"] == 0.53125
    assert any("8 GPUs = 1 replica × DP attention 8 in TP 8" in n for n in g["boundary"]["notes"] + g["notes"])
    summary, ttft = _simulated(tmp_path, "--num-requests", "50", "--rate", str(cap))
    # simulate at that rate: all 50 TTFTs within 1 s (the slowest 0.397 s) over 20.022 s, goodput 50 / 20.022 =
    # 2.4972 req/s, the search's own probe there
    at = next(p for p in g["probes"] if p["value"] == cap)
    assert sum(t <= 1.0 for t in ttft) == 50 and at["attainment"] == 1.0
    assert at["goodput_req_per_s"] == pytest.approx(50 / summary["duration_s"]) == pytest.approx(2.4972, abs=1e-4)


def test_cost_text_names_the_deployment_unit():
    out = " ".join(run_cli("cost", "--simulate", *SG, *RUN, "--slo", "ttft=200ms", "--at-offered-load").stdout.split())
    assert "one deployment unit = 1 replica × DP attention 8 in TP 8 = 8 GPUs" in out
    assert "on 8× NVIDIA H200 141GB SXM5 (DP attention 8 in TP 8 × 1 replica)" in out


def test_report_refuses_dp_attention_without_a_dp_size(tmp_path):
    from cli_run import refused

    # without --dp-size the flag was dropped without a word before; the report simulates the DP ranks with it
    # (tests/cli/test_report_sglang_dp.py)
    said = refused("report", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8",
                   "--enable-dp-attention", "--slo", "ttft=1s", "--out", str(tmp_path / "r.html"))
    assert said.startswith("--enable-dp-attention needs --dp-size above 1: simulate takes SGLang's DP attention")
