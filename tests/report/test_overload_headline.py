"""simulate prints one warning line for an overloaded run above its figures (a fresh user's trial: the overload note
was the 24th line, under the latencies it invalidates); the note itself stays with the notes."""

from __future__ import annotations

from kvledger.report.simulate_view import overload_headline


def test_each_kind_of_overload_has_its_line():
    # the JSON of analyses.serving.overloads' records, by kind (values as simulate --json prints them)
    # the rates are over the second half of the arrivals, said so (a fresh user compared them with the whole run's
    # throughput)
    grew = {"kind": "queue_growth", "arrived_per_s": 208.694, "finished_per_s": 22.131, "backlog_mid": 10,
            "backlog_last": 900, "t_mid_s": 7.43, "t_last_s": 14.98}
    assert overload_headline(grew) == (
        "overloaded: between the median and the last arrival (t = 7.4–15.0 s) requests arrived at 208.69 req/s and "
        "finished at 22.13 req/s, so the queue grew after the median arrival: the TTFT and E2E below measure that "
        "queue, not the engine (see the note below)")
    # a run too short for the backlog: the waiting queue was read, its rate is of first tokens
    assert "and reached a first token at 22.13 req/s" in overload_headline({**grew, "queue": "waiting"})
    behind = {"kind": "paced_behind", "offered_per_s": 35.395, "sent_per_s": 4.744, "num_users": 4, "cap_held": True}
    assert overload_headline(behind) == (
        "the clients fell behind their rate: 4.74 of 35.40 req/s sent, 4 in flight at most; the cap, not the engine, "
        "held the load (see the note below)")
    assert overload_headline({**behind, "cap_held": False}).endswith("the engine held them back (see the note below)")
    # 0.734 of the turns' time before a first token → 73%
    assert overload_headline({"kind": "session_queue", "ttft_share": 0.734, "ttft_mean_s": 3.2, "threshold": 0.1}) == (
        "overloaded: the turns spent 73% of their time in the system waiting for a first token (see the note below)")
    assert overload_headline(None) is None and overload_headline({"kind": "short_run"}) is None


def test_simulate_says_it_above_the_workload_line():
    # 4 clients paced at 40 req/s on 512 + 128-token requests: ~1 s each, so ~4 req/s sent (tests/cli/test_trial_fixes)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    out = CliRunner().invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths",
                                   "fixed:512", "--output-lengths", "fixed:128", "--num-requests", "200", "--rate",
                                   "40", "--concurrency", "4"], env={"COLUMNS": "250"}).output
    lines = out.splitlines()
    assert lines[0].startswith("warning: the clients fell behind their rate: ") and lines[1].startswith("workload: ")
    # the offered rate is the 200 drawn arrivals' ((200 − 1) ÷ their span), which differs from --rate 40 by chance
    assert "paced at 35.395 req/s offered (--rate 40: its 200 drawn arrivals' rate), 4 users" in lines[1]
    assert any(x.startswith("note: the clients fell behind their rate") for x in lines)  # the whole note, below


def test_goodput_of_one_run_opens_with_its_answer():
    # one measured stage (an estimate from percentiles: lower bounds, ≥), its model and GPU from the manifests beside
    # it; the figures the line quotes are the JSON's (a second fresh user found the answer only inside the table)
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    stage = str(Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" /
                "stage_3_lifecycle_metrics.json")
    args = ["goodput", stage, "--slo", "ttft=200ms,tpot=50ms"]
    text = CliRunner().invoke(app, args, env={"COLUMNS": "250"}).output
    d = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    assert d["estimate"] and d["num_good_upper"] != d["num_good"]
    assert text.splitlines()[0] == (f"answer: ≥{d['goodput_req_per_s']:,.3f} good req/s (≥{d['attainment']:.1%} of "
                                    f"{d['num_requests']:,} requests within the SLO) — "
                                    "meta-llama/Llama-3.1-8B-Instruct on nvidia-h100-80gb")


def test_a_latency_table_of_minutes_is_printed_in_seconds():
    # 600 requests of 2,048 + 512 tokens all at t = 0 on one L4: the last waits about half an hour for its first token,
    # so the table reads in seconds (a fresh user read "922,207.6 ms"); the figures are the JSON's, to the ms
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "--prompt-lengths", "fixed:2048",
            "--output-lengths", "fixed:512", "--num-requests", "600", "--rate", "inf", "--max-model-len", "4096"]
    d = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)["summary"]
    assert d["ttft_s"]["p99"] >= 100  # SECONDS_FROM_S
    text = CliRunner().invoke(app, args, env={"COLUMNS": "250"}).output
    assert "latency (s)" in text and "latency (ms)" not in text
    rows = {line.split("│")[0].strip(): line.split("│")[1].strip() for line in text.splitlines() if "│" in line}
    assert rows["TTFT"] == f"{d['ttft_s']['mean']:,.3f}" and rows["TPOT"] == f"{d['tpot_s']['mean']:,.3f}"
