"""``search --workload chat|agent``: session workloads probed at turn rates (``analyses/serving/session_spec.py``) and
their steady-state goodput."""

from __future__ import annotations

import json
import math

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
    # their ramp (90% of the turns sent within t_ramp of their session's start, think times alone) is 178.05 s, so
    # 6 sessions reach 6 × 44.83 ÷ (2 × 178.05) = 0.7554 turns/s: probes at 0.3 and 0.6 keep the 6 sessions
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", rate=0.3, seed=0)
    a, b = s.prepare_setup(args), s.prepare_setup(replace(args, rate=0.6))
    # 0.3 turns/s ÷ 44.83 turns per session = 0.006691 sessions/s; twice the turn rate, twice the session rate
    ra, rb = a.workload_info["session_rate_per_s"], b.workload_info["session_rate_per_s"]
    assert ra == pytest.approx(0.3 * 6 / 269) and rb == pytest.approx(2 * ra)
    assert a.num_requests == 269 and a.workload_info["offered_rate_req_per_s"] == 0.3
    assert a.workload_info["probe_sessions"] == b.workload_info["probe_sessions"] == 6
    assert [x.turns for x in a.workload.sessions] == [x.turns for x in b.workload.sessions]
    assert [x.start_s for x in b.workload.sessions] == pytest.approx([x.start_s / 2 for x in a.workload.sessions])
    with pytest.raises(InputError):
        s.session_rate(float("inf"), 0, 131072)
    with pytest.raises(InputError, match="--workload"):
        SessionSpec("batch")


def test_a_probe_above_the_sessions_reach_draws_as_many_as_reach_it():
    from kvledger.analyses.serving.session_ramp import ramp_s, steady_sessions

    s = SessionSpec("agent", 6)
    # at 2 turns/s the 6 sessions' own rule asks for ⌈2 × 2 × 178.05 ÷ 44.83⌉ = 16; the draw of 16 (305 turns, 19.06
    # per session, t_ramp 61.56 s) asks for ⌈2 × 2 × 61.56 ÷ 19.06⌉ = 13 ≤ 16, so 16 it is
    assert s.probe_sessions(2.0, 0, 131072) == 16
    drawn = SessionSpec("agent", 16).draw(0, 131072)
    assert sum(len(x.turns) for x in drawn) == 305 and ramp_s(drawn) == pytest.approx(61.5605, abs=1e-3)
    assert steady_sessions(2.0, 305 / 16, ramp_s(drawn)) == 13
    assert s.probe_sessions(0.3, 0, 131072) == 6  # below their reach: --sessions as given


def _gp(**kw):
    base = dict(source="x", source_format="x", run_label=None, file="x", slo={"text": ""}, estimate=False,
                num_requests=100, num_failed=0, num_completed=100, num_good=90, attainment=0.9, duration_s=60.0,
                goodput_req_per_s=1.5, goodput_output_tok_per_s=150.0, goodput_input_tok_per_s=3000.0)
    return GoodputResult(**{**base, **kw})


def _session_run(turns):
    from kvledger.records import RequestRecord, RunMetadata, RunRecords

    return RunRecords([RequestRecord(i, a, 100, 10, a + 0.1, a + 1.0) for i, a in turns], RunMetadata("hand", "test"))


def test_steady_goodput_scales_a_probe_that_carried_its_rate():
    gp = _gp()
    # probed at 2 turns/s: steady 2 × 0.9 = 1.8 good req/s; f = 1.8 ÷ 1.5 = 1.2 → every rate × 1.2
    out, note = steady_goodput(gp, 2.0)
    assert out.goodput_req_per_s == pytest.approx(1.8) and out.goodput_output_tok_per_s == pytest.approx(180.0)
    assert out.goodput_input_tok_per_s == pytest.approx(3600.0) and out.duration_s == pytest.approx(50.0)
    assert "steady state" in note
    # at 4 turns/s: f = 3.6 ÷ 1.5 = 2.4, scaled as well when the run shows its rate was carried: s0 starts at 0
    # (turns at 0 and 1 s), s1 at 10 s (turn at 10 s): offsets 0, 1, 0; by the last start (10 s) all are sent
    out, _ = steady_goodput(gp, 4.0, _session_run([("s0-t0", 0.0), ("s0-t1", 1.0), ("s1-t0", 10.0)]))
    assert out.goodput_req_per_s == pytest.approx(3.6)


def test_steady_goodput_refuses_a_probe_whose_sessions_never_carried_its_rate():
    from kvledger.analyses.serving.session_spec import CapacityNotMeasured

    # s0 starts at 0 s (turns at 0, 10, 30 s), s1 at 5 s (turns at 5, 6 s): offsets 0, 10, 30, 0, 1; the last
    # session started at 5 s, when 3 of the 5 turns (offsets 0, 0, 1) are sent: peak 60% of the rate < 75%.
    # t_ramp: the ⌈0.9 × 5⌉ = 5th smallest offset, 30 s; T = 5 ÷ 2 = 2.5 turns per session; 2 sessions reach
    # 2 × 2.5 ÷ (2 × 30) = 0.0833 req/s; 1 req/s needs ⌈2 × 1 × 30 ÷ 2.5⌉ = 24 sessions
    run = _session_run([("s0-t0", 0.0), ("s1-t0", 5.0), ("s1-t1", 6.0), ("s0-t1", 10.0), ("s0-t2", 30.0)])
    with pytest.raises(CapacityNotMeasured) as err:
        steady_goodput(_gp(), 1.0, run)
    msg = str(err.value)
    assert msg.startswith("capacity not measured: the probe at 1 req/s started its 2 sessions within 5 s, by when 60%")
    assert "never arrived faster than about 0.6 req/s: 2 sessions reach at most 0.0833 req/s" in msg
    assert msg.endswith("raise --sessions to 24")


def test_search_cli_takes_a_session_workload_and_ranks_its_tier_variant():
    # 8 chat sessions per probe, seed 0: 10, 22, 12, 1, 8, 1, 4 and 3 turns = 61 turns, 7.625 per session;
    # --session-rate 0.01 × 7.625 = 0.07625 req/s to size for
    # a tight TPOT keeps the capacity, and so the sessions each probe draws, small
    r = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1",
                                 "--slo", "ttft=2s,tpot=8ms", "--workload", "chat", "--sessions", "8",
                                 "--session-rate", "0.01", "--offload", "cpu:64GiB", "--workers", "1", "--json"],
                           catch_exceptions=False)
    d = json.loads(r.stdout)
    # the session rule of every command (offload, simulate): no --max-model-len, so kvledger's default 32,768
    assert d["spec"]["synthetic"] == {"workload": "chat", "num_sessions": 8, "context_cap_tokens": 32_768,
                                      "context_cap_source": ("kvledger's session default, not the model's context: a "
                                                             "session stops before its context would pass it, so the "
                                                             "cap sets how long sessions grow; pass --max-model-len "
                                                             "to change it; the agent preset's own cap is 131,072 "
                                                             "tokens, which --max-model-len 131072 lets agent "
                                                             "sessions reach where the model's context (131,072 "
                                                             "tokens) allows")}
    assert d["spec"]["rate_req_per_s"] == pytest.approx(0.07625)
    assert d["notes"][0].startswith("load: --session-rate 0.01 sessions/s × 7.625 turns per session")
    variant = "nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB"
    assert set(d["ranking"]) == {"nvidia_h100_sxm:tp1:kv-auto", variant}
    (o,) = d["offload"]
    assert o["id"] == variant and o["status"] == "feasible"
    assert "tier_prices.csv Bought:host" in o["tier_price"]["source"]
    base = next(e for e in d["candidates"] if e["id"] == "nvidia_h100_sxm:tp1:kv-auto")
    # the 8 sessions reach 8 × 7.625 ÷ (2 × 421.7 s) = 0.0723 req/s; the boundary probe at 2.4375 req/s draws 297
    # (session_spec.probe_sessions: 2 × 2.4375 × t_ramp ÷ T on each draw until one needs no more), 1,155 turns
    assert SessionSpec("chat", 8).probe_sessions(2.4375, 0, 32_768) == 297
    assert d["notes"][1].startswith("sessions per probe: 8 sessions reach 0.0723 req/s")
    assert base["workload"]["num_requests"] == 1155 and base["workload"]["trace"] == (
        "chat sessions (297 per probe at 2.438 req/s: more than --sessions 8, which reach less, context ≤ 32,768 "
        "tokens)")


def test_session_flags_need_a_session_workload():
    r = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--slo", "ttft=2s",
                                 "--sessions", "6", "--rate", "1"])
    assert r.exit_code != 0 and isinstance(r.exception, InputError) and "--workload" in str(r.exception)


def test_a_search_whose_probes_keep_too_few_sessions_stops_at_what_they_carry(monkeypatch):
    # every probe keeps --sessions 8 at any rate (8 chat sessions, 61 turns, T = 7.625 per session). A probe whose
    # turns peak below 75% of its rate (session_ramp.not_carried) counts as a miss whatever its attainment, as a probe
    # too short to show its load: the search halves from 1 req/s (not carried) to 0.0625 (carried, met) and bisects
    # [0.0625, 0.125] to 1% of 0.125: the capacity 0.12109375 req/s is a lower bound, limited by --sessions 8
    # (before: all 11 probes "met", the boundary 0.12109375... was never carried and the candidate was rejected as
    # "capacity not measured" after every probe had run)
    monkeypatch.setattr(SessionSpec, "probe_sessions", lambda self, rate, seed, mml: self.num_sessions)
    r = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1",
                                 "--slo", "ttft=2s,tpot=8ms", "--workload", "chat", "--sessions", "8",
                                 "--session-rate", "0.01", "--workers", "1", "--json"], catch_exceptions=False)
    d = json.loads(r.stdout)
    (e,) = d["candidates"]
    cap = e["capacity"]
    assert e["status"] == "feasible" and cap["slo_capacity_req_per_s"] == 0.12109375
    lim = cap["sessions_limit"]
    assert lim["sessions"] == 8 and lim["probe_sessions"] == 8 and lim["turns_per_session"] == pytest.approx(7.625)
    assert lim["not_carried_req_per_s"] == [0.1220703125, 0.123046875, 0.125, 0.25, 0.5, 1.0]
    assert lim["peak_share"] < 0.75
    # the sessions that carry the lowest rate not carried: ⌈2 × R × t_ramp ÷ T⌉ on its measured ramp
    r0, ramp = 0.1220703125, lim["ramp_s"]
    assert lim["sessions_needed"] == math.ceil(2 * r0 * ramp / 7.625) == 15
    head = "sessions not carried: 0.1221, 0.123, 0.125, 0.25, 0.5, 1 req/s met the attainment target"
    assert any(n.startswith(head) and n.endswith("raise --sessions to 15 to measure above it") for n in cap["notes"])
    # the table marks the capacity as a lower bound: "≥0.1211" (0.12109375 to 4 significant figures)
    text = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1", "--slo",
                                    "ttft=2s,tpot=8ms", "--workload", "chat", "--sessions", "8", "--session-rate",
                                    "0.01", "--workers", "1"], catch_exceptions=False, env={"COLUMNS": "200"}).stdout
    assert "≥0.1211" in text and "SLO capacity at least 0.1211 req/s per replica" in text


def test_sessions_limit_names_the_sessions_that_carry_the_lowest_rate_not_carried():
    from kvledger.analyses.serving.session_ramp import Carried, not_carried_note, sessions_limit

    # 10 req/s: 60 sessions, 1,000 turns (T = 16.67), ramp 170 s, peak 72%; 12 req/s missed its attainment anyway
    # (not listed); 8 req/s carried (None). Sessions for 10 req/s: ⌈2 × 10 × 170 ÷ 16.667⌉ = ⌈204⌉ = 204
    c10 = Carried(60, 1000, 170.0, 106.0, 0.72)
    lim = sessions_limit({8.0: None, 10.0: c10, 12.0: Carried(68, 1192, 349.0, 98.0, 0.57)},
                         {8.0: True, 10.0: True, 12.0: False}, 60)
    assert lim["not_carried_req_per_s"] == [10.0] and lim["sessions_needed"] == 204
    (note,) = not_carried_note(lim)
    assert "(at 10 req/s 60 sessions started within 106 s, by when 72% of a session's turns are sent" in note
    assert note.endswith("204 sessions (2 × 10 req/s × 170 s ÷ 16.67 turns per session) carry 10 req/s: raise "
                         "--sessions to 204 to measure above it")
    assert sessions_limit({8.0: None}, {8.0: True}, 60) is None and not_carried_note(None) == []


def test_the_winner_line_says_a_capacity_limited_by_the_sessions_is_at_least():
    from kvledger.report.search_answer import capacity_words

    # the figures of the trial's agent search after the fix (60 sessions; 9.75 req/s not carried, 199 carry it)
    cap = {"slo_capacity_req_per_s": 9.625, "goodput_req_per_s": 9.44, "sustained_good_req_per_s": 9.44,
           "sessions_limit": {"sessions": 60, "not_carried_req_per_s": [9.75, 10.0], "sessions_needed": 199}}
    assert capacity_words(cap) == (
        "SLO capacity at least 9.625 req/s per replica (9.44 good req/s there), limited by --sessions 60, not the "
        "engine (199 sessions carry 9.75 req/s, the lowest rate that met the SLO without being carried)")
    assert capacity_words({**cap, "sessions_limit": None}) == (
        "SLO capacity 9.625 req/s per replica (9.44 good req/s there)")
