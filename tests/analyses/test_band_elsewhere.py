"""A capacity band measured on other GPUs only says so wherever it is printed: ``cost`` (its robustness line, its
error-band line, its JSON), ``report`` and ``search``, from the one clause ``Band.on_gpu`` writes (``Band.elsewhere``),
as ``simulate`` and ``goodput`` say it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.ledgers.error_band import error_band
from kvledger.report.decision_view import capacity_band_clause

# the uncalibrated throughput band's 9 deployments ran on the H100, the RTX 4090 and the RTX PRO 6000
# (error_bands.json uncalibrated/dense/vllm throughput gpu_ids); an A100 80GB figure is none of them, though the A100
# has measured runs behind another band (the MoE TPOT band's), so it is a measured GPU and keeps the regime's band
ELSEWHERE = ("measured on NVIDIA H100 80GB SXM5, NVIDIA GeForce RTX 4090, NVIDIA RTX PRO 6000 Blackwell Server "
             "Edition only, not on NVIDIA A100 80GB SXM4: its width a floor for the error there, not a measurement")
# an L40S has no measured run behind any band: the unmeasured-GPU band (error_bands.json unmeasured_gpu,
# uncalibrated/dense/vllm throughput: q10 −19.8%, q90 +42.2% from the H100, RTX 4090 and RTX PRO 6000 held out,
# each priced --gemm-efficiency carried --gpu-profile none)
UNMEASURED = ("no measured run on NVIDIA L40S: the unmeasured-GPU band -19.8% … +42.2%, from 9 measured points of 9 "
              "deployments on 3 GPUs, each GPU held out in turn")
COST = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "A100-80GB", "--prompt-lengths", "fixed:900",
        "--output-lengths", "fixed:250", "--slo", "ttft=500ms,tpot=50ms", "--monthly-tokens", "3e10",
        "--num-requests", "200"]


def test_on_gpu_keeps_its_clause_for_lines_that_do_not_print_the_whole_source():
    band = error_band("uncalibrated/dense/vllm", "throughput")
    a100 = band.on_gpu("nvidia_a100_80gb_sxm", "NVIDIA A100 80GB SXM4")
    assert a100.elsewhere == ELSEWHERE and a100.source == band.source + "; " + ELSEWHERE
    assert (a100.low, a100.high) == (band.low, band.high)
    assert band.on_gpu("nvidia_h100_sxm", "NVIDIA H100 80GB SXM5").elsewhere == ""  # one of its GPUs
    # on a GPU nobody measured, the wider unmeasured-GPU band: 1/1.42202 = 0.70323 … 1/0.80191 = 1.24702
    l40s = band.on_gpu("nvidia_l40s", "NVIDIA L40S")
    assert l40s.elsewhere == UNMEASURED and l40s.source.startswith(band.source + "; " + UNMEASURED)
    assert (l40s.low, l40s.high) == (pytest.approx(0.70323, abs=1e-5), pytest.approx(1.24702, abs=1e-5))
    # a lent band's source says "a floor for the error there" once already (no SGLang run: vLLM's band); the
    # clause still says it
    lent = error_band("uncalibrated/dense/sglang", "tpot_mean").on_gpu("nvidia_a100_80gb_sxm", "NVIDIA A100 80GB SXM4")
    assert lent.source.count("a floor for the error there") == 1
    assert lent.elsewhere.endswith(": its width a floor for the error there, not a measurement")


def test_cost_on_a_gpu_the_bands_were_not_measured_on_says_the_band_is_a_floor():
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, [*COST, "--json"]).stdout)
    assert doc["decision"]["band_source"].endswith("9 runs left out one deployment at a time; " + ELSEWHERE)
    assert f", uncalibrated roofline, {ELSEWHERE}; SLO capacity " in doc["error_band"]["text"]
    assert doc["simulation"]["capacity_search"]["error_band"]["elsewhere"] == ELSEWHERE
    text = " ".join(runner.invoke(app, COST, env={"COLUMNS": "300"}).output.split())
    # inside the robustness line's band, before what it does to the verdict
    assert f"9 runs left out one deployment at a time; {ELSEWHERE}): no capacity error flips it" in text
    assert ELSEWHERE in text.split("error band: ")[1]


def test_report_and_search_lines_carry_the_clause_and_a_plot_label_does_not():
    cs = {"error_band": {"low": 3.78, "high": 5.106, "regime": "uncalibrated/dense/vllm", "elsewhere": ELSEWHERE}}
    assert capacity_band_clause(cs) == f" (80% band 3.78–5.106 req/s, uncalibrated roofline, {ELSEWHERE})"
    assert capacity_band_clause(cs, caveat=False) == " (80% band 3.78–5.106 req/s, uncalibrated roofline)"
    del cs["error_band"]["elsewhere"]  # an older JSON
    assert capacity_band_clause(cs) == " (80% band 3.78–5.106 req/s, uncalibrated roofline)"
    out = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus",
                                   "A100-80GB", "--tp", "1", "--rate", "30", "--num-requests", "200"],
                             env={"COLUMNS": "300"}).output
    winner = " ".join(out.split()).split("winner: ")[1]
    # closing the capacity band's bills: the high side ×1/(1 + q10) = ×1/(1 − 0.10653) = ×1.12 (error_bands.json
    # uncalibrated/dense/vllm throughput)
    assert f"at ×1.12; {ELSEWHERE}), SLO capacity" in winner


def test_cost_on_a_gpu_nobody_measured_prints_the_unmeasured_gpu_band():
    runner = CliRunner()
    args = [a if a != "A100-80GB" else "L40S" for a in COST]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert UNMEASURED in doc["decision"]["band_source"]
    assert doc["simulation"]["capacity_search"]["error_band"]["elsewhere"] == UNMEASURED
    text = " ".join(runner.invoke(app, args, env={"COLUMNS": "300"}).output.split())
    assert UNMEASURED in text.split("error band: ")[1]
