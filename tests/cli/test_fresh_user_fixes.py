"""Findings of a fresh-user trial: each test fails on the code before its fix."""

from __future__ import annotations

import json

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
    # aiperf run1 sent its 100 requests within 0.0205 s (89 finished): the median → last arrival window is 0.0158 s,
    # against a median decode time (E2E − TTFT) of 6.745 s — a burst, not a queue growing with the trace
    doc = json.loads(_run("validate", "tests/evidence/data/aiperf/run1_profile_export.jsonl", "--gpu", "H100",
                          "--json").stdout)
    assert not doc["saturated"]
    assert not any("--rate" in n for n in doc["notes"])


def test_validate_reads_the_model_from_inference_perfs_config_yaml_as_goodput_does(tmp_path):
    # the inference-perf report folder names its model only in config.yaml (server.model_name); goodput read it there,
    # validate said "names no model". Now one reader serves both, and validate says where the name came from.
    import shutil

    import pytest

    from kvledger.errors import KvLedgerError

    src = "tests/evidence/data/inference-perf"
    with pytest.raises(KvLedgerError, match=r"model meta-llama/Meta-Llama-3-8B-Instruct from config\.yaml "
                                            r"server\.model_name \(no --model given\), but .* not bundled"):
        runner.invoke(app, ["validate", f"{src}/stage_0_lifecycle_metrics.json", "--gpu", "H100"],
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
