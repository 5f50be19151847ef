"""What a new user's trial of every command found: a config.json missing a sizing field planned on a transformers class
default that only --verbose named; a misspelt --workload reported as a flag conflict (or, capitalised, refused by
simulate while offload, goodput and search took it); a pair of replicas held to one engine's capacity bound; auto
taken for an unreadable count by SGLang's plan; one file counted as two runs by goodput; a run's timeseries.csv
replaced under --force; a pasted Hub page address looked up as a repo id."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from cli_run import MODEL, cli_json, refused, run_cli


def test_a_layer_count_absent_from_the_config_is_named_in_the_short_plan(tmp_path):
    raw = json.loads((resources.files("kvledger.catalog") / "data/models/meta-llama--Meta-Llama-3.1-70B.json")
                     .read_text())
    del raw["num_hidden_layers"]  # the file says 80; transformers' LlamaConfig default is 32
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(raw))
    out = run_cli("plan", str(cfg), "--gpu", "H100-SXM", "--tp", "4").output
    # 2 (K,V) × 32 layers × 2 KV heads per GPU (8 ÷ TP 4) × 128 head_dim × 2 B = 32,768 B, not the 80 layers' 81,920 B
    assert "KV per token: 32,768 B" in out
    assert ("note: absent from the config, filled with transformers' llama class defaults as vLLM sees them: "
            "num_hidden_layers=32") in out
    assert "--verbose" in out and len(out.splitlines()) <= 26


def test_the_bundled_config_plans_without_that_note():
    out = run_cli("plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4").output
    assert "KV per token: 81,920 B" in out and "absent from the config" not in out


def test_a_misspelt_workload_is_named_before_any_flag_conflict():
    for cmd in (("simulate", MODEL, "--gpu", "H100"),
                ("goodput", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=1s")):
        msg = refused(*cmd, "--workload", "chatt", "--rate", "5")
        assert msg == "--workload must be one of chat, agent, got 'chatt'"


def test_simulate_takes_a_capitalised_workload_as_offload_does():
    lower = json.loads(run_cli("simulate", MODEL, "--gpu", "H100", "--workload", "chat", "--sessions", "5",
                               "--json").stdout)
    upper = json.loads(run_cli("simulate", MODEL, "--gpu", "H100", "--workload", "Chat", "--sessions", "5",
                               "--json").stdout)
    # the same draw: 5 chat sessions of seed 0 send 44 turns, every one finished
    assert upper["summary"]["num_requests"] == lower["summary"]["num_requests"] == 44
    assert upper["summary"]["num_finished"] == 44


def test_the_capacity_bound_of_two_replicas_is_twice_one_engines():
    # the work bound R × k ÷ Σ of the k smallest per-request roofline works: one H100 engine keeps pace with at most
    # 26.31 req/s of azure-conv's first 2,000 requests at 90 %; two replicas behind the router split that work, so
    # 52.62. Before, the pair's 37 req/s SLO capacity was held against one engine's 26.31 and cost sized on 26.31.
    args = ("goodput", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9")
    one = cli_json(*args)["boundary"]
    two = cli_json(*args, "--replicas", "2")["boundary"]
    assert round(one["capacity_bound_req_per_s"], 2) == 26.31
    assert two["capacity_bound_req_per_s"] == pytest.approx(2 * one["capacity_bound_req_per_s"], rel=1e-12)
    assert (one["boundary_value"], two["boundary_value"]) == (17.5, 37.0)
    assert two["sized_on_req_per_s"] is None  # 37 < 52.62: the bound does not cap the pair's capacity
    out = run_cli("cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--monthly-tokens",
                  "3e10", "--replicas", "2").output
    # 3e10 tokens a month at azure-conv's 1,366 tokens a request: 8.334 req/s; ÷ (1 unit × 37 req/s) = 22.5 %
    assert "÷ (37 req/s SLO capacity × 80%)⌉ = 1; utilization = 8.334 req/s mean ÷ (1 × 37) = 22.5%" in out


def test_auto_max_model_len_on_another_engine_says_it_is_vllms():
    # vLLM reads -1/auto as its auto-fit (from 0.14); SGLang's --context-length and TensorRT-LLM's max_seq_len take a
    # count, so the plan of either refuses the word naming why, not as an unreadable token count
    for engine, value in (("sglang", "auto"), ("trtllm", "AUTO")):
        msg = refused("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine", engine, "--max-model-len", value)
        assert msg.startswith(f"--max-model-len {value}: auto (-1) is vLLM's auto-fit") and f"; {engine} reads a " \
            "token count" in msg
    out = run_cli("plan", MODEL, "--gpu", "L4", "--max-model-len", "auto").output
    assert "max_model_len 31,136 (auto)" in out  # vLLM itself still fits it: 1,947 blocks of 16 tokens on an L4


def test_goodput_refuses_a_file_given_twice_as_validate_and_calibrate_do(tmp_path):
    # the llmperf sample served 150 requests; given twice, goodput answered "the best of 2 runs" over one run
    src = (Path(__file__).parents[1] / "evidence/data/llmperf/leaderboard_individual_anyscale_70b.json")
    link = tmp_path / "again.json"
    link.symlink_to(src)
    assert "the best of" not in run_cli("goodput", str(src), "--slo", "ttft=1s").output
    msg = refused("goodput", str(src), str(link), "--slo", "ttft=1s")
    assert msg == f"{src} and {link}: the same file given twice; give each stage or run once"


def test_force_never_replaces_an_llmservingsim_runs_timeseries(tmp_path):
    # the run folder holds requests.jsonl, meta.json and timeseries.csv (upstream bench/core/runner.py); calibrate
    # reads the first two, and --out timeseries.csv --force replaced the third, the run's scheduler record, with JSON
    rows = [{"request_id": str(i), "input_toks": 10, "output_toks": 5, "queued_ts": 10.0 + i, "first_token_ts":
             10.1 + i, "last_token_ts": 10.2 + i} for i in range(3)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ts = tmp_path / "timeseries.csv"
    ts.write_text("t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n0,0,0,0,0,0\n")
    before = ts.read_bytes()
    for cmd in ("calibrate", "goodput"):
        extra = ("--model", MODEL, "--gpu", "H100") if cmd == "calibrate" else ("--slo", "ttft=1s")
        msg = refused(cmd, str(tmp_path / "requests.jsonl"), *extra, "--out", str(ts), "--force")
        assert msg.startswith(f"--out {ts} is also an input of this command") and ts.read_bytes() == before


def test_a_pasted_model_page_address_plans_the_model_it_names():
    # the address of the model's Hub page, as a user copies it from the browser, names repo meta-llama/Llama-3.1-8B:
    # its bundled config, 2 (K,V) × 32 layers × 8 KV heads × 128 head_dim × 2 B = 131,072 B a token
    for url in ("https://huggingface.co/meta-llama/Llama-3.1-8B", "hf.co/meta-llama/Llama-3.1-8B/tree/main"):
        doc = cli_json("plan", url, "--gpu", "H100-SXM")
        assert doc["model"]["name"] == "meta-llama/Llama-3.1-8B (config of meta-llama/Meta-Llama-3.1-8B)"
        assert doc["kv"]["bytes_per_token_per_gpu"] == 131_072
