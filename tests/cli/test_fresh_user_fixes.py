"""Findings of a fresh-user trial: each test fails on the code before its fix."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
L8 = "meta-llama/Llama-3.1-8B"


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def test_a_trace_without_prefix_ids_says_its_zero_hit_rate_is_by_construction():
    # azure-conv rows hold timestamp, prompt and output lengths only: with prefix caching on (vLLM's default) no two
    # prompts can share a block, so the 0 % hit rate is a property of the trace, and both outputs say so
    args = ("simulate", L8, "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "40")
    doc = json.loads(_run(*args, "--json").stdout)
    assert doc["summary"]["prefix_cache_hit_rate"] == 0.0 and doc["workload"]["prefix_ids"] is False
    assert any("carries no prefix ids" in n and "0 by construction" in n for n in doc["notes"])
    text = " ".join(_run(*args).stdout.split())
    q = doc["summary"]["prefix_cache_query_tokens"]
    assert f"prefix cache: hit rate 0.0% (0 of {q:,} prompt tokens) — 0 by construction" in text
    # Mooncake rows carry hash ids: no such note, and the field is absent
    moon = json.loads(_run("simulate", L8, "--gpu", "H100", "--trace", "mooncake", "--num-requests", "40",
                           "--json").stdout)
    assert "prefix_ids" not in moon["workload"] and not any("no prefix ids" in n for n in moon["notes"])
    # prefix caching off: nothing to explain
    off = json.loads(_run(*args, "--no-enable-prefix-caching", "--json").stdout)
    assert not any("no prefix ids" in n for n in off["notes"])


def test_validate_does_not_read_a_burst_as_overload_nor_advise_flags_it_lacks():
    # aiperf run1 sent its 100 requests within 0.0205 s (89 finished): its median arrival came 0.0046 s after the
    # first, its first finish 7.94 s after — a burst's warm-up, not a queue growing with the trace
    doc = json.loads(_run("validate", "tests/evidence/data/aiperf/run1_profile_export.jsonl", "--gpu", "H100",
                          "--json").stdout)
    assert not doc["saturated"]
    assert not any("--rate" in n for n in doc["notes"])


def test_validate_reads_the_model_from_inference_perfs_config_yaml_as_goodput_does(tmp_path):
    # the inference-perf report folder names its model only in config.yaml (server.model_name); goodput read it there,
    # validate said "names no model". Now one reader serves both, and validate says where the name came from.
    import shutil

    from kvledger.errors import KvLedgerError

    src = "tests/evidence/data/inference-perf"
    bare = tmp_path / "bare"  # the stage and its client config, without the Deployment's manifests.yaml
    bare.mkdir()
    for f in ("stage_0_lifecycle_metrics.json", "config.yaml"):
        shutil.copy(f"{src}/{f}", bare)
    with pytest.raises(KvLedgerError, match=r"model meta-llama/Meta-Llama-3-8B-Instruct from config\.yaml "
                                            r"server\.model_name \(no --model given\), but .* not bundled"):
        runner.invoke(app, ["validate", str(bare / "stage_0_lifecycle_metrics.json"), "--gpu", "H100"],
                      catch_exceptions=False, env={"HF_HUB_OFFLINE": "1"})  # not bundled: no Hub look-up either
    # the same folder naming a bundled model: validate replays it and its notes say where the name came from
    shutil.copy(f"{src}/stage_0_lifecycle_metrics.json", tmp_path)
    text = open(f"{src}/config.yaml", encoding="utf-8").read()
    (tmp_path / "config.yaml").write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", L8))
    doc = json.loads(_run("validate", str(tmp_path / "stage_0_lifecycle_metrics.json"), "--gpu", "H100",
                          "--json").stdout)
    assert doc["model"].startswith(L8)
    assert doc["notes"][0] == f"model {L8} from config.yaml server.model_name (no --model given)"
    good = json.loads(_run("goodput", str(tmp_path / "stage_0_lifecycle_metrics.json"), "--slo", "ttft=1s",
                           "--json").stdout)
    assert "model from config.yaml server.model_name" in json.dumps(good)


def test_validate_replays_the_model_the_deployment_served_not_the_name_the_client_sent():
    # the bundled folder's manifests.yaml runs the engine with MODEL_ID meta-llama/Llama-3.1-8B-Instruct (bundled)
    # while its config.yaml's client names meta-llama/Meta-Llama-3-8B-Instruct (not bundled): validate replays the
    # engine's model, and says the client named another (a new user's offline run stopped at "not bundled")
    doc = json.loads(_run("validate", "tests/evidence/data/inference-perf/stage_0_lifecycle_metrics.json", "--gpu",
                          "H100", "--json").stdout)
    assert doc["model"].startswith("meta-llama/Llama-3.1-8B-Instruct")
    assert doc["notes"][0].startswith("model meta-llama/Llama-3.1-8B-Instruct from ")
    assert "manifests.yaml MODEL_ID; the client's config names meta-llama/Meta-Llama-3-8B-Instruct" in doc["notes"][0]


_AIPERF = "tests/evidence/data/aiperf/run1_profile_export.jsonl"
_LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


@pytest.mark.parametrize("argv", [
    ["report", L8, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--out", "{m}/x.html"],
    ["report", L8, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--out", "{t}/x.html", "--png", "{m}/figs"],
    ["cost", _LLMPERF, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--gpu", "H100", "--num-gpus", "4",
     "--out", "{m}/c.json"],
    ["goodput", _AIPERF, "--slo", "ttft=900ms", "--out", "{m}/g.json"],
    ["goodput", _AIPERF, "--slo", "ttft=900ms", "--target", "0.9", "--plot", "{m}/g.png"],
    ["simulate", L8, "--gpu", "H100", "--num-requests", "10", "--out", "{m}/run"],
    ["fp8-kv", L8, "--gpu", "H100-SXM", "--concurrency", "64", "--plot", "{m}/f.png"],
    ["search", L8, "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--csv", "{m}/s.csv"],
    ["calibrate", _AIPERF, "--gpu", "H100", "--out", "{m}/p.json"],
])
def test_an_output_in_a_missing_folder_is_refused_not_created(tmp_path, argv):
    # every command that writes a file checks its folder first (kvledger.outputs): "missing/deeper" does not exist, so
    # the command refuses, naming the first missing folder, and creates nothing (no command has a create-folders flag)
    from kvledger.errors import InputError

    missing = tmp_path / "missing"
    args = [a.format(m=missing / "deeper", t=tmp_path) for a in argv]
    with pytest.raises(InputError, match=f"the folder {missing} does not exist .*creates no folder above its output"):
        _run(*args)
    assert not missing.exists()


def test_an_output_folder_itself_is_still_made_when_its_parent_exists(tmp_path):
    # simulate --out DIR names the folder it writes: DIR itself is made (its parent exists), as before
    res = _run("simulate", L8, "--gpu", "H100", "--num-requests", "10", "--out", str(tmp_path / "run"), "--json")
    assert res.exit_code == 0 and (tmp_path / "run" / "summary.json").is_file()


def test_cost_capacity_line_groups_thousands_in_the_mean_token_counts():
    # cost --simulate on azure-conv printed "mean 1051.6 in / 268.7 out tokens"; every other count groups thousands
    from types import SimpleNamespace

    from rich.console import Console

    from kvledger.report.cost_view import _print_capacity

    cap = {"goodput_req_per_s": 16.292, "good_input_tok_per_s": 17133.2, "good_output_tok_per_s": 4377.6,
           "mean_input_tokens": 1051.6, "mean_output_tokens": 268.7, "prefill_share": 0.35,
           "prefill_share_method": "given"}
    basis = SimpleNamespace(text="capacity basis", probes=None, notes=[], warning=None, load_check=None)
    con = Console(record=True, width=300)
    _print_capacity(con, SimpleNamespace(capacity=cap), None, basis, 0)
    assert "mean 1,051.6 in / 268.7 out tokens per good request" in con.export_text()


def test_launch_commands_serve_the_hub_id_the_user_gave():
    # the bundled config file is meta-llama/Meta-Llama-3.1-8B; a user who typed meta-llama/Llama-3.1-8B (a twin Hub
    # id, or its Instruct checkpoint) gets that id in vllm serve / --model-path / the plan check line, spelled as
    # published; a bare alias no engine can load gets the catalog's Hub id
    from kvledger.analyses.search.launch import serve_model

    assert serve_model(L8) == (L8, None)
    assert serve_model("meta-llama/llama-3.1-8b-instruct") == ("meta-llama/Llama-3.1-8B-Instruct", None)
    assert serve_model("llama-3.1-8b") == ("meta-llama/Meta-Llama-3.1-8B", None)
    doc = json.loads(_run("search", L8, "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1", "--rate", "30",
                          "--json").stdout)
    launch = doc["winner"]["launch"]
    assert launch["vllm"].startswith(f"vllm serve {L8} ") and f"--model-path {L8} " in launch["sglang"]
    assert launch["check"].startswith(f"kvledger plan {L8} ")
