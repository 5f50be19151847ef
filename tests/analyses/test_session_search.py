"""``search --workload chat|agent``: session workloads probed at turn rates (``analyses/serving/session_spec.py``) and
their steady-state goodput."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.session_spec import SessionSpec, steady_goodput
from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.ledgers.goodput_result import GoodputResult


def test_sessions_at_a_turn_rate_are_the_same_sessions_started_sooner():
    from dataclasses import replace

    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    s = SessionSpec("agent", 6)
    # seed 0 draws 14, 15, 55, 119, 65 and 1 turns: 269 turns ÷ 6 sessions = 44.83 turns per session
    assert s.turns_per_session(0, 131072) == pytest.approx(269 / 6)
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", rate=2.0, seed=0)
    a, b = s.prepare_setup(args), s.prepare_setup(replace(args, rate=4.0))
    # 2 turns/s ÷ 44.83 turns per session = 0.04461 sessions/s; twice the turn rate, twice the session rate
    ra, rb = a.workload_info["session_rate_per_s"], b.workload_info["session_rate_per_s"]
    assert ra == pytest.approx(2.0 * 6 / 269) and rb == pytest.approx(2 * ra)
    assert a.num_requests == 269 and a.workload_info["offered_rate_req_per_s"] == 2.0
    assert [x.turns for x in a.workload.sessions] == [x.turns for x in b.workload.sessions]
    assert [x.start_s for x in b.workload.sessions] == pytest.approx([x.start_s / 2 for x in a.workload.sessions])
    with pytest.raises(InputError):
        s.session_rate(float("inf"), 0, 131072)
    with pytest.raises(InputError, match="--workload"):
        SessionSpec("batch")


def test_steady_goodput_scales_a_long_probe_and_keeps_a_short_one():
    gp = GoodputResult(source="x", source_format="x", run_label=None, file="x", slo={"text": ""}, estimate=False,
                       num_requests=100, num_failed=0, num_completed=100,
                       num_good=90, attainment=0.9, duration_s=60.0, goodput_req_per_s=1.5,
                       goodput_output_tok_per_s=150.0, goodput_input_tok_per_s=3000.0)
    # probed at 2 turns/s: steady 2 × 0.9 = 1.8 good req/s; f = 1.8 ÷ 1.5 = 1.2 ≤ 2 → every rate × 1.2
    out, note = steady_goodput(gp, 2.0)
    assert out.goodput_req_per_s == pytest.approx(1.8) and out.goodput_output_tok_per_s == pytest.approx(180.0)
    assert out.goodput_input_tok_per_s == pytest.approx(3600.0) and out.duration_s == pytest.approx(50.0)
    assert "steady state" in note
    # probed at 4 turns/s: f = 3.6 ÷ 1.5 = 2.4 > 2 (ramp-up and drain longer than the starts) → kept
    out, note = steady_goodput(gp, 4.0)
    assert out is gp and "too few sessions" in note


def test_search_cli_takes_a_session_workload_and_ranks_its_tier_variant():
    # 8 chat sessions per probe, seed 0: 10, 22, 12, 1, 8, 1, 4 and 3 turns = 61 turns, 7.625 per session;
    # --session-rate 0.01 × 7.625 = 0.07625 req/s to size for
    r = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1",
                                 "--slo", "ttft=2s,tpot=100ms", "--workload", "chat", "--sessions", "8",
                                 "--session-rate", "0.01", "--offload", "cpu:64GiB", "--workers", "1", "--json"],
                           catch_exceptions=False)
    d = json.loads(r.stdout)
    # the session rule of every command (offload, simulate): no --max-model-len, so kvledger's default 32,768
    assert d["spec"]["synthetic"] == {"workload": "chat", "num_sessions": 8, "context_cap_tokens": 32_768,
                                      "context_cap_source": ("kvledger's session default, not the model's context: a "
                                                             "session stops before its context would pass it, so the "
                                                             "cap sets how long sessions grow; pass --max-model-len "
                                                             "to change it")}
    assert d["spec"]["rate_req_per_s"] == pytest.approx(0.07625)
    assert d["notes"][0].startswith("load: --session-rate 0.01 sessions/s × 7.625 turns per session")
    variant = "nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB"
    assert set(d["ranking"]) == {"nvidia_h100_sxm:tp1:kv-auto", variant}
    (o,) = d["offload"]
    assert o["id"] == variant and o["status"] == "feasible"
    assert "tier_prices.csv Bought:host" in o["tier_price"]["source"]
    base = next(e for e in d["candidates"] if e["id"] == "nvidia_h100_sxm:tp1:kv-auto")
    assert base["workload"]["num_requests"] == 61 and base["workload"]["trace"] == (
        "chat sessions (8 per probe, context ≤ 32,768 tokens)")


def test_session_flags_need_a_session_workload():
    r = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--slo", "ttft=2s",
                                 "--sessions", "6", "--rate", "1"])
    assert r.exit_code != 0 and isinstance(r.exception, InputError) and "--workload" in str(r.exception)
