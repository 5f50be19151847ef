"""``goodput --simulate --workload chat|agent`` (with --sessions, --session-rate) as simulate and search take it: the
same sessions drawn, the same checks; the Python API's kvledger.goodput takes workload, sessions and session_rate."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused

import kvledger
from kvledger.errors import InputError

SLO = "ttft=500ms,tpot=50ms"
AIPERF = "tests/evidence/data/aiperf/run1_profile_export.jsonl"


def test_goodput_serves_the_sessions_simulate_draws():
    # 20 chat sessions drawn with seed 0 at simulate's default 0.2 session starts/s hold 77 turns (simulate's own run
    # of the same flags serves 77 requests); every turn meets the SLO on one H100, so goodput is 77 good requests over
    # the run's 466.199 s from first arrival to last finish: 77 ÷ 466.199 = 0.16517 req/s
    sim = cli_json("simulate", MODEL, "--gpu", "H100", "--workload", "chat", "--sessions", "20")
    g = cli_json("goodput", "--simulate", MODEL, "--gpu", "H100", "--workload", "chat", "--sessions", "20",
                 "--slo", SLO)
    assert sim["summary"]["num_requests"] == g["num_requests"] == g["num_good"] == 77
    assert g["goodput_req_per_s"] == pytest.approx(77 / 466.199, rel=1e-4)
    api = kvledger.goodput(MODEL, "H100", slo=SLO, workload="chat", sessions=20, cache=False).to_dict()
    assert (api["num_requests"], api["num_good"]) == (77, 77)
    assert api["goodput_req_per_s"] == pytest.approx(g["goodput_req_per_s"], rel=1e-12)


def test_session_flags_are_checked_as_simulate_and_search_check_them():
    sim = ("goodput", "--simulate", MODEL, "--gpu", "H100", "--slo", SLO)
    assert "--sessions 0 is out of range; allowed: [1, 1,000,000] sessions" in refused(*sim, "--workload", "chat",
                                                                                       "--sessions", "0")
    assert "--workload must be one of chat, agent, got 'chats'" in refused(*sim, "--workload", "chats")
    assert "add --workload chat (or agent)" in refused(*sim, "--sessions", "3")
    assert "--workload chat draws multi-turn sessions" in refused(*sim, "--workload", "chat", "--trace", "azure-conv")
    assert "--session-rate sets one run's load; --target searches the load" in refused(
        *sim, "--workload", "chat", "--session-rate", "1", "--target", "0.9")
    assert "searched on the turn rate (--axis request_rate), not concurrency" in refused(
        *sim, "--workload", "chat", "--target", "0.9", "--axis", "concurrency")
    assert "--workload describes a simulation" in refused("goodput", AIPERF, "--workload", "chat", "--slo", SLO)
    with pytest.raises(InputError, match=r"^kvledger\.goodput: session_rate 0 is out of range"):
        kvledger.goodput(MODEL, "H100", slo=SLO, workload="chat", session_rate=0.0, cache=False)
