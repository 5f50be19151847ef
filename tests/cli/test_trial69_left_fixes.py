"""A fresh-user trial's findings: --out of goodput, cost and calibrate took any suffix (a JSON profile landed in
prof.csv); routers that could not route said nothing; an empty comma-list entry was dropped; pydantic's words for a
bad count or rate; and cosmetic figures (plurals, digits, the flag named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import MODEL, refused, run_cli

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
AIPERF = str(DATA / "aiperf/run1_profile_export.jsonl")


@pytest.mark.parametrize("argv, written", [
    (["goodput", AIPERF, "--slo", "ttft=1s"], "goodput's report is written there as one JSON document"),
    (["cost", AIPERF, "--slo", "ttft=1s", "--gpu", "H100", "--num-gpus", "1"],
     "cost's report is written there as one JSON document"),
    (["calibrate", "--scope", "gpu", AIPERF, "--gpu", "H100"],
     "the fitted profile is written there as one JSON document"),
])
def test_an_out_whose_suffix_contradicts_the_json_written_is_refused(argv, written, tmp_path):
    out = tmp_path / "prof.csv"
    msg = refused(*argv, "--out", str(out))
    assert msg == (f"--out {out}: {written}, not a .csv file; give a name ending in .json. Nothing was run.")
    assert not out.exists()


def test_goodput_json_lines_out_takes_jsonl_and_refuses_json(tmp_path):
    out = tmp_path / "g.json"
    msg = refused("goodput", AIPERF, "--slo", "ttft=1s", "--json-lines", "--out", str(out))
    assert msg == (f"--out {out}: goodput's report is written there as JSON Lines (--json-lines), not a .json file; "
                   "give a name ending in .jsonl or .ndjson. Nothing was run.")
    ok = tmp_path / "g.JSONL"  # any case of the suffix
    res = run_cli("goodput", AIPERF, "--slo", "ttft=1s", "--json-lines", "--out", str(ok))
    assert res.exit_code == 0 and ok.read_text().startswith("{")


def test_report_keeps_its_own_html_suffix_message(tmp_path):
    out = tmp_path / "r.pdf"
    msg = refused("report", MODEL, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--out", str(out))
    assert msg == (f"--out {out}: the report writes one self-contained HTML file (--png DIR adds each figure as a PNG "
                   "file, --json prints the data on stdout), not a .pdf file; give a name ending in .html or .htm (a "
                   "browser's print dialog makes a PDF of it). Nothing was run.")


def test_session_affinity_on_a_trace_without_sessions_says_it_routed_least_loaded():
    # azure-conv's columns carry no client id and no prefix id: router._session_affinity sends every request to the
    # least loaded replica, which the note now says
    out = run_cli("simulate", MODEL, "--gpu", "H100", "--num-requests", "20", "--replicas", "2", "--router",
                  "session_affinity").output
    assert ("note: --router session_affinity: the trace has no session ids (client ids) and no prefix ids to infer "
            "sessions from, so every request went to the least loaded replica, as --router least_loaded routes it"
            ) in out
    # mooncake has prefix ids: sessions are inferred instead, and the fallback note is not given
    moon = run_cli("simulate", MODEL, "--gpu", "H100", "--num-requests", "20", "--replicas", "2", "--router",
                   "session_affinity", "--trace", "mooncake").output
    assert "sessions inferred from shared prefix ids" in moon and "least loaded replica" not in moon


@pytest.mark.parametrize("router", ["least_loaded", "prefix_aware", "session_affinity"])
def test_a_router_with_one_replica_says_it_does_nothing(router):
    out = run_cli("simulate", MODEL, "--gpu", "H100", "--num-requests", "4", "--router", router).output
    assert (f"note: --router {router}: one replica (--replicas 1), so every request goes to it and the router does "
            "nothing; --replicas N (N ≥ 2) puts it to work") in out
    assert "session ids" not in out  # one replica: no routing to explain


def test_the_default_router_with_one_replica_adds_no_note():
    assert "the router does nothing" not in run_cli("simulate", MODEL, "--gpu", "H100", "--num-requests", "4").output


@pytest.mark.parametrize("flag, value, example", [
    ("--tp", "1,,2", "1,2"), ("--gpus", "H100,,L40S", "H100,L40S"), ("--max-num-seqs", "128,", "128,256"),
    ("--kv-cache-dtype", "auto,,fp8", "auto,fp8"), ("--prefix-caching", ",on", "on,off"),
    ("--data-parallel-size", "1,,8", "1,8"),
])
def test_search_refuses_an_empty_entry_in_a_comma_list(flag, value, example):
    # was: --tp 1,,2 searched TP 1 and 2 alone, the missing value dropped without a word
    msg = refused("search", MODEL, "--slo", "ttft=1s", flag, value)
    assert msg == (f"{flag} {value!r} has an empty entry (two commas in a row, or one at an end); give the values "
                   f"separated by single commas (e.g. {flag} {example})")


def test_a_count_written_with_an_exponent_names_the_flag_and_an_example(cli_entry):
    # was: "Invalid value for '--num-requests': Input should be a valid integer, unable to parse string as an integer"
    code, out, err = cli_entry("simulate", MODEL, "--gpu", "H100", "--num-requests", "1e3")
    assert code == 2 and out == ""
    assert err.strip() == ("error: --num-requests '1e3' is not a whole number: write digits only (no exponent, "
                           "fraction or unit), e.g. --num-requests 1000; allowed: [1, 10,000,000] requests "
                           "(see 'kvledger simulate --help')")


def test_a_rate_written_with_its_unit_names_the_flag_and_an_example(cli_entry):
    code, out, err = cli_entry("cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=1s", "--rate=20req/s",
                               "--json")
    assert code == 2
    msg = ("--rate '20req/s' is not a number: write it without a unit or suffix, e.g. --rate 20; allowed: "
           "(0, 1,000,000] req/s or inf")
    assert json.loads(out)["error"]["message"] == msg and err.strip() == f"error: {msg} (see 'kvledger cost --help')"


def test_a_percentage_for_a_fraction_is_shown_as_the_fraction(cli_entry):
    _, _, err = cli_entry("simulate", MODEL, "--gpu", "H100", "--gpu-memory-utilization", "90%")
    assert "e.g. --gpu-memory-utilization 0.9; allowed: (0, 1] (fraction)" in err  # 90 % = 0.9, inside the range


def test_report_prints_the_slo_capacity_to_four_significant_digits():
    from kvledger.report.decision_view import report_answer_lines

    # a bisection lands on 0.609375 req/s (= 39/64): printed as 0.6094, as the capacity band's text prints one; the
    # good req/s beside it is 0.609375 × 0.95 = 0.5789 → 0.58
    cs = {"slo_capacity_req_per_s": 0.609375, "attainment_at_boundary": 0.95, "target": 0.9, "notes": []}
    lines = report_answer_lines({"headline": ["answer: x"], "inputs": {"num_gpus": 1},
                                 "simulation": {"capacity_search": cs}})
    assert lines[1] == ("SLO capacity: 0.6094 req/s per deployment unit (1 GPU), 0.58 good req/s there, 95.0% of "
                        "requests within the SLO (target ≥ 90%)")


def test_simulate_says_one_request_in_the_singular():
    out = run_cli("simulate", MODEL, "--gpu", "H100", "--num-requests", "1", columns=2000).output
    assert "azure-conv — 1 request, open loop" in out and "1 requests" not in out
    assert "largest at the last first token, 1 request (" in out and "a batch of 1 request's drain" in out


def test_a_tiny_gpu_price_keeps_its_significant_digits():
    from cli_run import cli_json

    d = cli_json("cost", AIPERF, "--slo", "ttft=1s", "--gpu", "H100", "--num-gpus", "1", "--gpu-usd-per-hour", "0.001",
                 "--api", "OpenAI:gpt-4.1-nano")
    # one GPU at $0.001/h × 730 h = $0.73/month; the hourly price was printed "$0.00/h"
    assert d["break_even_utilization"]["unit_rental_usd_per_month_basis"].startswith(
        "$0.73/month = H100 $0.0010/h × 730 h")


@pytest.mark.parametrize("argv", [("plan", MODEL, "--gpu", "H100", "--engine", "sglang"),
                                  ("simulate", MODEL, "--gpu", "H100", "--policy", "sglang")])
def test_context_length_auto_is_refused_under_the_flag_typed(argv):
    # was: "--max-model-len auto: auto (-1) is vLLM's auto-fit …", a flag the user had not typed
    msg = refused(*argv, "--context-length", "auto")
    assert msg == ("--context-length auto: auto is vLLM's auto-fit (--max-model-len auto: the longest length its KV "
                   "pool holds), which SGLang does not read; SGLang's --context-length takes a token count: give one "
                   "(e.g. 32768 or 32K), or --max-model-len auto on vLLM, the default engine")


def test_context_length_takes_a_token_count_under_sglang():
    assert "max_model_len 8,192" in run_cli("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--context-length",
                                            "8K").output  # 8K = 8 × 1,024
