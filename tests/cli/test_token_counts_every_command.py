"""Every command that takes vLLM's --max-model-len or --max-num-batched-tokens reads it as the release in force reads
it, through the one reader of ``plan``/``simulate``/``search`` (``accounting/vllm_auto_len.read_max_model_len`` and
``read_engine_tokens`` over ``token_counts``): ``offload``, ``doctor`` (the release given, else the log's), the web
app's /api/plan, ``search``'s --max-num-batched-tokens list, the commands of ``analysis_opts.load_target``
(``kv-eviction``, ``fp8-kv``, ``disagg``) and simulate's and offload's session cap. Before, each took every suffix
whatever the release and refused ``auto``.

The releases' rules (engine/arg_utils.py ``human_readable_int`` / ``human_readable_int_or_auto``, read in the
wheels; tests/cli/test_token_counts_by_release.py): t and T read from 0.13.0; -1/auto from 0.14.0."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import cli_json, refused
from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app

L70 = "meta-llama/Llama-3.1-70B-Instruct"
L8I = "meta-llama/Llama-3.1-8B-Instruct"
# the words every release before 0.13.0 refuses "1T" with (token_counts._no_t_words)
NO_T = ("'1T': vLLM 0.12.0 refuses it (`vllm serve` exits with \"invalid human_readable_int value: '1T'\"): its "
        "suffixes are k m g and K M G; t and T (10^12, 2^40) are read from 0.13.0")
NO_AUTO = "vLLM 0.13.0 has no auto-fit"
# Llama-3.1-70B at TP 4 on H100, vLLM 0.19.0: 28,099 blocks of 16 tokens; one 131,072-token request takes
# 131,072 / 16 = 8,192 of them, so auto keeps the model's 131,072 (test_token_counts_by_release.py works it out)
AUTO_KEPT = 131_072


def test_offload_reads_both_flags_by_release():
    base = ("offload", L70, "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "100", "--sessions", "20")
    assert refused(*base, "--engine-version", "0.12.0", "--max-num-batched-tokens", "1T") == \
        f"--max-num-batched-tokens: {NO_T}"
    assert NO_AUTO in refused(*base, "--engine-version", "0.13.0", "--max-model-len", "auto")
    w = cli_json(*base, "--engine-version", "0.19.0", "--max-model-len", "auto")["workload"]
    # the sessions' cap is the length vLLM fits, said as the user's (no kvledger-default plan beside it)
    assert w["context_cap_tokens"] == AUTO_KEPT
    assert w["context_cap_source"] == "--max-model-len auto: vLLM's fit of the model's length to the KV pool"
    assert "model_default" not in w


def test_simulate_sessions_take_auto_as_the_plan_fits_it():
    d = cli_json("simulate", L70, "--gpu", "H100", "--tp", "4", "--engine-version", "0.19.0", "--max-model-len", "auto",
                 "--workload", "chat", "--sessions", "20")
    assert d["workload"]["mode"].endswith(f"context cap {AUTO_KEPT:,} tokens (--max-model-len auto: vLLM's fit of the "
                                          "model's length to the KV pool)")


def _tail_log(tmp_path: Path) -> str:
    from test_doctor_launch_flags import _metrics_only  # a vLLM 0.19.0 log's metrics lines, no start-up

    return str(_metrics_only(tmp_path))


def test_doctor_reads_max_model_len_as_the_servers_release(tmp_path):
    base = (_tail_log(tmp_path), "--model", L8I, "--gpu", "H100", "--engine-version")
    assert refused("doctor", *base, "0.12.0", "--max-model-len", "1T") == f"--max-model-len: {NO_T}"
    assert NO_AUTO in refused("doctor", *base, "0.13.0", "--max-model-len", "auto")
    # 0.19.0: auto planned as vLLM fits it: Llama-3.1-8B's one 131,072-token request (8,192 blocks) fits the 27,721
    # blocks of the default plan (test_doctor_launch_flags.py), so the model's length is kept and the pool the same
    d = cli_json("doctor", *base, "0.19.0", "--max-model-len", "auto")
    (note,) = [n for n in d["notes"] if n.startswith("launch settings: ")]
    assert ("max_model_len 131,072 [--max-model-len auto (the log does not print it): vLLM's fit of the model's length "
            "to the KV pool]") in note
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert cap["options"][0]["num_gpu_blocks"] == 27_721


def test_doctor_says_auto_is_not_used_where_the_log_prints_the_length():
    full = (Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
            / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
    d = cli_json("doctor", str(full), "--max-model-len", "auto")  # the log's own release, 0.19.0, reads auto
    assert ("--max-model-len auto not used: the log prints max_model_len 8,192 (log line 4), the length the server "
            "ran with") in d["notes"]


def test_the_web_apps_plan_reads_the_field_by_release():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    body = {"model": L70, "gpu": "H100", "tp": 4}
    r = client.post("/api/plan", json={**body, "engine_version": "0.12.0", "max_model_len": "1T"})
    assert r.status_code == 400 and r.json()["error"] == f"the context field (max_model_len): {NO_T}"
    r = client.post("/api/plan", json={**body, "engine_version": "0.19.0", "max_model_len": "auto"})
    assert r.status_code == 200 and r.json()["headline"]["max_model_len"] == AUTO_KEPT
    assert any(n.startswith("max_model_len auto (-1): the model's 131,072 tokens kept") for n in
               r.json()["plan"]["memory"]["notes"])


def test_the_web_apps_serving_panel_takes_auto_as_its_plan_does():
    # the serving request's plan section (decision_data.build_plan_section, also `kvledger report`'s) read the field
    # with every suffix and refused auto, where the simulation's own plan (sim_setup) took it: now one reader
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.post("/api/serving", json={"model": L70, "gpu": "H100", "tp": 4, "slo": "ttft=2s,tpot=100ms",
                                          "num_requests": 50, "engine_version": "0.19.0", "max_model_len": "auto"})
    assert r.status_code == 200, r.text
    engine = r.json()["cost"]["simulation"]["engine"]
    assert (engine["num_gpu_blocks"], engine["max_model_len"]) == (28_099, AUTO_KEPT)


def test_searchs_budget_list_reads_by_release():
    base = ("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s", "--gpus", "H100", "--engine-version")
    assert refused(*base, "0.12.0", "--max-num-batched-tokens", "2k,1T") == f"--max-num-batched-tokens: {NO_T}"
    # 0.13.0 reads 1T = 2^40 = 1,099,511,627,776 tokens, past the flag's range (2^26 = 67,108,864): refused as such
    assert "out of range" in refused(*base, "0.13.0", "--max-num-batched-tokens", "2k,1T")
    from kvledger.cli.search_axes import axes_of

    # 2k = 2,000 and 8K = 8,192 (vLLM's rule: lowercase 10^3, uppercase 2^10) on every release with suffixes
    assert axes_of("H100", None, None, None, "2k,8K", None, (), engine_version="0.12.0").max_num_batched_tokens == \
        (2_000, 8_192)


@pytest.mark.parametrize("command", ["kv-eviction", "fp8-kv"])
def test_the_analysis_commands_read_max_model_len_by_release(command):
    base = (command, "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine-version")
    assert refused(*base, "0.12.0", "--max-model-len", "1T") == f"--max-model-len: {NO_T}"
    assert NO_AUTO in refused(*base, "0.13.0", "--max-model-len", "auto")


def test_offload_takes_minus_one_as_auto():
    # -1 is auto from 0.14.0 (human_readable_int_or_auto): the same fit as auto, the cap a number in the JSON
    d = cli_json("offload", L70, "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "100", "--sessions", "20",
                 "--engine-version", "0.19.0", "--max-model-len", "-1")
    assert d["workload"]["context_cap_tokens"] == AUTO_KEPT


@pytest.mark.parametrize("tp, length", [("2", "9,888"), ("4", "131,072")])
def test_the_short_plans_title_says_the_length_came_from_auto(tp, length):
    # TP 2: 618 blocks of 16 tokens hold one request of 618 × 16 = 9,888 tokens (lowered); TP 4: 131,072 kept
    # (test_token_counts_by_release.py works both out); the title says "(auto)" after it, within 26 lines of 80
    # columns (the short plan's limit)
    from cli_run import run_cli

    args = ("plan", L70, "--gpu", "H100", "--tp", tp, "--engine-version", "0.19.0")
    lines = run_cli(*args, "--max-model-len", "auto", columns=80).stdout.splitlines()
    assert f"max_model_len {length} (auto), max_num_batched_tokens 8,192" in " ".join(lines[:3])
    assert len(lines) <= 26 and max(map(len, lines)) <= 80
    given = run_cli(*args, "--max-model-len", "8192", columns=80).stdout
    assert "max_model_len 8,192, max_num_batched_tokens" in " ".join(given.split()) and "(auto)" not in given
