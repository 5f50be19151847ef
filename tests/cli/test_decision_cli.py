"""``kvledger cost`` answers volume first (issue 21): the verdict is the cheaper monthly bill, printed first at 80
columns, without --utilization, against the API rows serving the same model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
EXAMPLE = [
    "cost",
    "--simulate",
    "meta-llama/Llama-3.1-8B",
    "--gpu",
    "H100",
    "--slo",
    "ttft=500ms,tpot=50ms",
    "--api",
    "Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "--monthly-input-tokens",
    "240e6",
    "--monthly-output-tokens",
    "60e6",
    "--gpu-provider",
    "RunPod",
]


def _run(args: list[str]) -> str:
    res = runner.invoke(app, args, env={"COLUMNS": "80"}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def example_text() -> str:
    return _run(EXAMPLE)


def test_the_300m_token_example_answers_api_first_without_utilization(example_text):
    head = "\n".join(example_text.splitlines()[:10])
    # the example: 300M tokens/month in requests of the workload's mix (all 2,000 requests of the run priced:
    # mean 1,104.78 in / 264.90 out tokens) is max(240e6 ÷ 1,104.78, 60e6 ÷ 264.90) = 226,498 requests a month, 0.08619
    # req/s offered (0.0854 when the good requests' 1,069.4 / 277.7 made the mix), 0.08619 ÷ 18.5 req/s = 0.47% of
    # one H100 replica's SLO capacity (the roofline with the H100's measured matmul curve and layer kernels; 21 req/s
    # priced flat).
    # API: 240 × $0.18 + 60 × $0.18 = $54.00.
    # Self-hosted: one replica is the minimum, 730 GPU-h × $2.69 (RunPod) = $1,963.70, plus the default people line
    # (team "some": 0.25 engineer-month × $20,000 = $5,000) = $6,963.70
    assert head.startswith("answer: the API — $54.00/month on the API vs $6,963.70/month self-hosted")
    assert "realized utilization 0.5%" in " ".join(head.split())
    assert ("⌈0.08619 req/s offered (the monthly mean: --peak-to-mean 1, flat traffic, the default) ÷ (18.5 req/s SLO "
            "capacity × 80%)⌉ = 1") in " ".join(head.split())
    assert "break-even:" in head


def test_the_example_lists_the_other_rows_serving_the_same_model(example_text):
    flat = " ".join(example_text.split())
    # DeepInfra's row (low confidence): 240 × $0.02 + 60 × $0.03 = $6.60; Groq 240 × 0.05 + 60 × 0.08 = $16.80
    assert "DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo $6.60 [low confidence]" in flat
    assert "Groq:llama-3.1-8b-instant $16.80" in flat
    assert "secondary (not the verdict)" in flat and "effective cost = sticker × throughput ÷ goodput" in flat


def test_json_decision_at_the_volume_s_realized_utilization():
    # 400 requests per probe keep it quick: the numbers below do not depend on the capacity (one replica either way)
    d = json.loads(_run([*EXAMPLE, "--num-requests", "400", "--json"]))
    dec = d["decision"]
    assert dec["verdict"] == "API" and dec["replicas"] == 1 and dec["api_usd_per_month"] == pytest.approx(54.0)
    assert dec["self_host_usd_per_month"] == pytest.approx(730 * 2.69 + 5000)
    # the volume prices its own utilization (an assumed --utilization with a volume is refused:
    # tests/cli/test_cost_utilization_volume_cli.py)
    assert d["inputs"]["utilization"] == dec["realized_utilization"]
    assert d["inputs"]["utilization_how"] == "the volume's realized utilization"
    assert {a["key"].split(":")[0] for a in dec["api_options"]} == {"Together", "DeepInfra", "Groq", "Fireworks"}
    assert dec["holds_within_band"] and any("step cost uncalibrated" in r for r in dec["rests_on"])


def test_a_different_model_named_is_noted():
    out = _run(
        [
            "cost",
            "--simulate",
            "meta-llama/Llama-3.1-8B",
            "--gpu",
            "H100",
            "--slo",
            "ttft=500ms,tpot=50ms",
            "--api",
            "OpenAI:gpt-4.1",
            "--monthly-tokens",
            "3e8",
            "--gpu-provider",
            "RunPod",
            "--json",
        ]
    )
    d = json.loads(out)
    # the named row is the verdict's; the same-model rows are listed beside it, marked as such
    assert d["decision"]["api"] == "OpenAI:gpt-4.1"
    named = [a for a in d["decision"]["api_options"] if a["named"]]
    assert named[0]["same_model"] is False and sum(a["same_model"] for a in d["decision"]["api_options"]) == 4
    assert any(
        h.startswith("  note: OpenAI:gpt-4.1 is not the same model: compare quality separately") for h in d["headline"]
    )
