"""``goodput --simulate --workload chat|agent`` (with --sessions, --session-rate) as simulate and search take it: the
same sessions drawn, the same checks; the Python API's kvledger.goodput takes workload, sessions and session_rate."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused, run_cli, strict_json_file

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


def test_a_session_search_judges_its_capacity_at_the_steady_state_as_search_does(tmp_path):
    # 20 chat sessions a probe at least, searched in [9, 9.25] turns/s (9 meets, 9.25 misses; then 9.125 meets and
    # 9.1875 misses, as the same probes did inside a wider [8, 10]): 9.125 meets (4,415 of 4,791 turns within the
    # SLO, 92.15%), 9.1875 misses. Over the probe's first arrival → last finish (1,512.25 s, its sessions' ramp-up and
    # drain included) that is 4,415 ÷ 1,512.25 = 2.919 good req/s; at the steady state search prices (session_spec.
    # steady_goodput) 9.125 × 4,415 ÷ 4,791 = 8.409 good req/s
    args = ("goodput", "--simulate", MODEL, "--gpu", "H100", "--workload", "chat", "--sessions", "20", "--slo", SLO,
            "--target", "0.9", "--lo", "9", "--hi", "9.25")
    # one search: the text on stdout, the --json document in --out's file (goodput writes the same text to both)
    res = run_cli(*args, "--out", str(tmp_path / "search.json"))
    assert res.exit_code == 0, res.output
    d = strict_json_file(tmp_path / "search.json")
    b = d["boundary"]
    assert (b["boundary_value"], b["first_failing_value"]) == (9.125, 9.1875)
    assert sorted(r["probe"]["value"] for r in d["runs"]) == [9, 9.125, 9.1875, 9.25]
    at = next(r for r in d["runs"] if r["probe"]["value"] == 9.125)
    assert (at["num_requests"], at["num_good"]) == (4791, 4415)
    assert b["goodput_at_boundary_req_per_s"] == pytest.approx(4415 / 1512.25, rel=1e-4)
    assert b["sustained_good_req_per_s_at_boundary"] == pytest.approx(9.125 * 4415 / 4791, rel=1e-12)
    assert ("session workload: capacity at the steady state, 9.125 turns/s × attainment 0.922 = 8.409 good req/s (the "
            "whole probe, ramp-up and drain of its sessions included: 2.919); more --sessions per probe bring the two "
            "closer") in d["notes"]
    text = " ".join(res.output.split())
    assert ("; goodput there 8.409 good req/s at the steady state (9.125 turns/s × 92.2% within the SLO; 8.409 per "
            "GPU), the figure this answer gives, as search and cost price it; 2.919 good req/s (2.919 per GPU) over "
            "the probe's first arrival → last finish, its sessions' ramp-up and drain included") in text
