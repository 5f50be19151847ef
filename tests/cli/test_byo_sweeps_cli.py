"""`kvledger validate --sweep` on multi-run benchmark files as users have them (tests/data/public-bench, SOURCES.md):
llmperf-bench's summaries keyed by concurrency (one file), InferenceX together_runner levels (one file each), compared
stage by stage as closed loops; llmperf-bench's digest refused in one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import refused, run_cli

DATA = Path(__file__).parents[1] / "data" / "public-bench"
TOGETHER = sorted(DATA.glob("inferencex_together_runner_b200_vllm_gptoss_conc*.json"))


def test_together_runner_levels_are_one_sweep_over_clients():
    res = run_cli("validate", "--sweep", *map(str, TOGETHER), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    # conc 16, 64, 128, 256, 512; model, GPU (hw b200), TP 4 and vLLM 0.22.0 from the files, none given
    assert out["axis"] == "concurrency" and out["clients"] == [16, 64, 128, 256, 512]
    measured = out["measured"]
    # median_ttft_ms 26.27 (conc 16), 101.52 (128), 368.75 (256): knee at 5 × 26.27 ms = 131.37 ms, between 128 and
    # 256 clients: 128 + (131.37 − 101.52) ÷ (368.75 − 101.52) × 128 = 142.30 clients
    assert abs(measured["knee_clients"] - 142.30) < 0.01
    # request_throughput of conc512: 112.36936682758903 req/s, the largest
    assert measured["saturation_throughput_req_per_s"] == 112.36936682758903
    assert all(r["tp"] == 4 for r in out["runs"])
    # the cap named as the file names it (conc), through the run's successful_requests 160
    assert any("(the file's conc 16): replayed as a closed loop of 16 clients" in n and "160 completed" in n
               for n in out["runs"][0]["notes"])


def test_llmperf_bench_collection_is_a_sweep_over_its_levels():
    res = run_cli("validate", "--sweep", str(DATA / "llmperf_bench_llama3_8b_tgi_results.json"), "--gpu", "A10G",
                  "--model", "meta-llama/Meta-Llama-3.1-8B-Instruct", "--max-model-len", "4096", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["clients"] == [1, 2, 4, 8, 16, 32, 64, 128]
    # results_ttft_s_mean of the 1- and 128-client levels: 0.15813857590983388 s, 17.327640365461037 s
    ttft = out["measured"]["ttft_mean_s"]
    assert abs(ttft[0] - 0.15813857590983388) < 1e-12 and abs(ttft[-1] - 17.327640365461037) < 1e-9


def test_llmperf_bench_digest_refused_in_one_line():
    msg = refused("validate", str(DATA / "llmperf_bench_llama3_8b_tgi_summary.json"), "--gpu", "A10G")
    assert msg.count("\n") == 0 and "give the *_results.json it wrote beside it" in msg


def test_aiperf_agentic_run_notes_its_cap_and_its_sessions():
    aiperf = DATA / "inferencex_aiperf_0_8_kimi_conc4_profile_export_aiperf.json"
    # prompts up to input_sequence_length.max 249,764 tokens: a bundled model with a 256k context, TP 8
    res = run_cli("validate", str(aiperf), "--gpu", "MI355X", "--model", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
                  "--tp", "8", "--max-model-len", "262144", "--json")
    assert res.exit_code == 0, res.output
    notes = json.loads(res.output)["notes"]
    # input_config.loadgen.concurrency 4: AIPerf's field is concurrency, not max_concurrency
    assert any("(the file's concurrency 4): replayed as a closed loop of 4 clients" in n for n in notes)
    assert any(n.startswith("AIPerf multi-turn run (") and "not as its sessions" in n for n in notes)


def test_aiperf_multi_turn_export_validated_as_its_sessions(tmp_path):
    # the bundled real single-turn export with one record made turn 1 of another's session (x_correlation_id,
    # turn_index 1, its prompt 550 + 247 + 550 tokens, sent 2 s after that turn finished), its aggregate beside it
    src = Path(__file__).parents[1] / "evidence" / "data" / "aiperf"
    rows = [json.loads(line) for line in (src / "run1_profile_export.jsonl").read_text().splitlines()]
    a, b = rows[19], rows[31]
    b["metadata"].update(x_correlation_id=a["metadata"]["x_correlation_id"], turn_index=1,
                         timestamp_ns=a["metadata"]["timestamp_ns"] + 8_877_620_132 + 2_000_000_000)
    b["metrics"]["input_sequence_length"]["value"] = 1347
    (tmp_path / "run1_profile_export.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "run1_profile_export_aiperf.json").write_bytes((src / "run1_profile_export_aiperf.json").read_bytes())
    res = run_cli("validate", str(tmp_path / "run1_profile_export.jsonl"), "--gpu", "H100", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    # 89 successful turns compared; 88 sessions, one of two turns
    assert out["num_requests"] == 89
    assert any(n.startswith("replayed as its 88 sessions (1 of several turns") for n in out["notes"])
