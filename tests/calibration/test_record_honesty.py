"""What a run's own record holds that kvledger does not model is said, never dropped (fresh-user trial: kubecon's
vllm+eagle sweep validated at saturation throughput +178.8% without a word about its --speculative_config, and
vllm+quantization on the bf16 KV pool without a word about --quantization bitsandbytes); goodput on a stage file,
wrong-file errors, the counted output length and notes that quoted another dataset."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.calibration.run_record import other_settings, recorded_settings
from kvledger.cli.main import app
from kvledger.errors import FormatError

runner = CliRunner()
IP = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
RUNS = (Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs").resolve()
KUBECON = RUNS / "inference-perf-kubecon-na-2025"
SIM = RUNS / "inference-sim-training" / "default_args" / "20260217-231439-llama-2-7b-tp1-general" / "results"
VAL = ["--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B-Instruct"]
EAGLE = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4}'


def _err(args: list[str]) -> str:
    """stderr of the command run as a user runs it: exit 2, one paragraph, no traceback."""
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "400"})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    return " ".join(p.stderr.split())


def _launched(tmp_path: Path, *extra: str) -> Path:
    """The fixture's stage 0 beside its config.yaml, under manifests.yaml whose container args gain ``extra``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("stage_0_lifecycle_metrics.json", "config.yaml"):
        shutil.copy(IP / name, tmp_path / name)
    text = (IP / "manifests.yaml").read_text()
    args = "".join(f"        - {json.dumps(a)}\n" for a in extra)
    (tmp_path / "manifests.yaml").write_text(text.replace('        - "--no-enable-chunked-prefill"\n',
                                                          '        - "--no-enable-chunked-prefill"\n' + args, 1))
    return tmp_path / "stage_0_lifecycle_metrics.json"


def test_speculative_decoding_in_the_manifest_is_refused_naming_the_flag_and_file(tmp_path):
    stage = _launched(tmp_path, "--speculative_config", EAGLE)
    for cmd in ("validate", "calibrate"):
        text = _err([cmd, str(stage), *VAL])
        assert (f"{tmp_path / 'manifests.yaml'} launches vLLM with --speculative-config {EAGLE}: speculative "
                "decoding") in text
        assert "kvledger's replay does not model" in text and text.endswith("runs launched without it.")


def test_bitsandbytes_written_as_one_argument_is_no_flag_to_vllm_0_11(tmp_path):
    # kubecon's vllm+quantization manifest writes "--quantization bitsandbytes" as one argv element under
    # `python3 -m vllm.entrypoints.openai.api_server` (vllm/vllm-openai:v0.11.0, as the fixture's manifest). vLLM
    # 0.11.0's FlexibleArgumentParser leaves it as written and argparse reads it as the optional positional
    # model_tag, which that server never reads: the engine ran bf16, and the replay is the same as without it.
    plain = runner.invoke(app, ["validate", str(_launched(tmp_path / "a")), *VAL, "--json"])
    spaced = runner.invoke(app, ["validate", str(_launched(tmp_path / "b", "--quantization bitsandbytes")), *VAL,
                                 "--json"])
    assert plain.exit_code == 0 and spaced.exit_code == 0, spaced.output
    a, b = json.loads(plain.output), json.loads(spaced.output)
    assert a["comparison"]["rows"] == b["comparison"]["rows"]
    note = next(n for n in b["notes"] if "'--quantization bitsandbytes'" in n)
    assert note.startswith(f"{tmp_path / 'b' / 'manifests.yaml'} passes '--quantization bitsandbytes' as one argument")
    assert note.endswith("vLLM 0.11.0's vllm.entrypoints.openai.api_server takes it as its optional model_tag "
                         "(cli_args.py :: make_arg_parser), which that server never reads: the engine ran without it, "
                         "and so does the replay")


def test_the_positional_rule_is_argparses():
    # the mechanism the rule cites, on Python's own argparse: a parser with vLLM 0.11's optional positional reads the
    # element holding a space as that positional and leaves --quantization unset; written with "=", it is the flag
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--quantization")
    ns = p.parse_args(["--quantization bitsandbytes"])
    assert ns.model_tag == "--quantization bitsandbytes" and ns.quantization is None
    assert p.parse_args(["--quantization=bitsandbytes"]).quantization == "bitsandbytes"


def test_bitsandbytes_as_a_flag_is_still_refused(tmp_path):
    stage = _launched(tmp_path, "--quantization=bitsandbytes")
    text = _err(["validate", str(stage), *VAL])
    assert f"{tmp_path / 'manifests.yaml'} launches vLLM with --quantization bitsandbytes: the weights are " in text
    assert "the KV pool would be another engine's" in text


def test_a_positional_under_an_older_server_or_two_of_them_is_a_warning():
    kw = {"positional_args": ["--quantization bitsandbytes"], "entrypoint": "vllm.entrypoints.openai.api_server"}
    # 0.9.0 declares model_tag on `vllm serve` only: its server module's parser exits on a positional
    old = recorded_settings({"engine_kwargs": kw, "vllm_version": "0.9.0", "record_file": "m.yaml"})
    assert old.positional[0].startswith("WARNING: m.yaml passes '--quantization bitsandbytes' as one argument")
    assert ("vLLM 0.9.0's vllm.entrypoints.openai.api_server takes no positional (from 0.10.0 one): its parser exits "
            "on it (unrecognized arguments)") in old.positional[0]
    two = recorded_settings({"engine_kwargs": {**kw, "positional_args": ["--a b", "--c d"]}, "vllm_version": "0.11.0"})
    assert "takes one positional, not 2" in two.positional[0] and "as one argument each" in two.positional[0]
    serve = recorded_settings({"engine_kwargs": {"positional_args": ["--a b"], "entrypoint": "vllm serve"}})
    assert "vllm serve takes its one positional as the model to serve" in serve.positional[0]
    unversioned = recorded_settings({"engine_kwargs": kw})
    assert "the record names no vLLM version: vllm.entrypoints.openai.api_server from 0.10.0 takes" in \
        unversioned.positional[0]
    other = recorded_settings({"engine_kwargs": {"positional_args": ["--a b"]}, "vllm_version": "0.11.0"})
    assert "does not say which vLLM entry point and version parsed it" in other.positional[0]
    assert old.refused == old.unapplied == [] and "quantization" not in old.flags


def test_another_flag_is_named_in_a_warning_and_a_harmless_one_is_not(tmp_path):
    # --num-scheduler-steps (V0's multi-step) is not modelled; --swap-space is host memory for preemption by
    # swapping, which no one-sequence request takes; --enforce-eager is replayed (the host term prices the launches)
    stage = _launched(tmp_path, "--enforce-eager", "--swap-space=8", "--num-scheduler-steps=8", "--port=8000",
                      "--disable-log-requests")
    res = runner.invoke(app, ["validate", str(stage), *VAL, "--json"])
    assert res.exit_code == 0, res.output
    notes = json.loads(res.output)["notes"]
    warned = [n for n in notes if n.startswith("WARNING: recorded, not modelled")]
    assert warned == ["WARNING: recorded, not modelled: --num-scheduler-steps 8 "
                      f"({tmp_path / 'manifests.yaml'}): the replay runs without it, so whatever it changes in the "
                      "measured engine is in the errors"]
    assert any(n.startswith("from the run's own record") and "enforce_eager True" in n for n in notes), notes


def test_a_meta_json_style_record_is_sorted_the_same_way():
    # LLMServingSim's meta.json keeps engine_kwargs under vLLM's names: model, seed and a 16-bit dtype are harmless
    extra = {"record_file": "run/meta.json", "engine_kwargs": {
        "model": "m", "seed": 42, "dtype": "bfloat16", "max_num_seqs": 256, "num_speculative_tokens": 3,
        "cpu_offload_gb": 4, "quantization": "awq"}}
    refused, unapplied = other_settings(extra)
    assert len(refused) == 1 and refused[0].startswith("run/meta.json launches vLLM with --num-speculative-tokens 3")
    assert unapplied == ["--cpu-offload-gb 4", "--quantization awq"]
    assert recorded_settings(extra).flags == {"max_num_seqs": 256}


@pytest.mark.skipif(not KUBECON.is_dir(), reason="../shared/data/measured-runs not beside the clone")
def test_kubecon_eagle_sweep_is_refused():
    stages = sorted(str(p) for p in (KUBECON / "vllm+eagle" / "results").glob("stage_*_lifecycle_metrics.json"))
    text = _err(["validate", *stages, "--sweep", *VAL])
    assert f"{KUBECON / 'vllm+eagle' / 'manifests.yaml'} launches vLLM with --speculative-config" in text


def test_slo_on_a_stage_file_says_why_there_is_no_goodput():
    res = runner.invoke(app, ["validate", str(IP / "stage_0_lifecycle_metrics.json"), *VAL,
                              "--slo", "ttft=40ms,tpot=12ms", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["comparison"]["slo"]["ttft_s"] == 0.04 and d["comparison"]["slo"]["tpot_s"] == 0.012
    assert not any(r["metric"] == "goodput" for r in d["comparison"]["rows"])
    note = next(n for n in d["notes"] if n.startswith("goodput under ttft ≤ 40.00 ms, tpot ≤ 12.00 ms: not compared"))
    # the fixture's config.yaml (kubecon's) sets report.request_lifecycle.per_request: true
    assert note.endswith(f"{IP / 'config.yaml'} asks for it (report.request_lifecycle.per_request: true), but it is "
                         f"not in {IP}: validate that file with --slo")


def test_wrong_inference_perf_files_say_what_they_are_and_what_to_give():
    summary = runner.invoke(app, ["validate", str(IP / "summary_lifecycle_metrics.json"), *VAL])
    assert isinstance(summary.exception, FormatError)
    assert ("is inference-perf's summary over every stage of the run: it pools all the load rates and records none"
            in str(summary.exception))
    assert "give kvledger validate one stage_N_lifecycle_metrics.json, or all of them with --sweep" in str(
        summary.exception)
    prom = runner.invoke(app, ["calibrate", str(IP / "stage_0_prometheus_metrics.json"), *VAL])
    assert isinstance(prom.exception, FormatError)
    assert str(prom.exception).endswith(f"give kvledger calibrate {IP / 'stage_0_lifecycle_metrics.json'} (the "
                                        "client's lifecycle report of the same stage)")


def test_a_profile_yaml_client_config_gets_the_hint_config_yaml_gets(tmp_path):
    (tmp_path / "results").mkdir()
    shutil.copy(IP / "config.yaml", tmp_path / "profile.yaml")
    shutil.copy(IP / "stage_0_lifecycle_metrics.json", tmp_path / "results" / "stage_0_lifecycle_metrics.json")
    res = runner.invoke(app, ["validate", str(tmp_path / "profile.yaml"), *VAL])
    assert isinstance(res.exception, FormatError)
    assert ("This profile.yaml is an inference-perf client config (what the client sent: load, data, api), read beside "
            "the stage reports it produced; give kvledger validate a stage_N_lifecycle_metrics.json; beside it: "
            "results/stage_0_lifecycle_metrics.json.") in str(res.exception)


def test_llmperf_error_names_the_command_run():
    f = str(IP.parent / "llmperf" / "leaderboard_individual_anyscale_70b.json")
    for cmd in ("validate", "calibrate"):
        res = runner.invoke(app, [cmd, f, "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B"])
        assert isinstance(res.exception, FormatError), res.output
        assert "this is an llmperf per-request file whose requests carry no common clock" in str(res.exception)
        assert f"give kvledger {cmd} a benchmark file that records when each request was sent" in str(res.exception)


@pytest.mark.skipif(not SIM.is_dir(), reason="../shared/data/measured-runs not beside the clone")
def test_the_counted_output_length_is_named_beside_the_output_throughput():
    # Llama-2-7B general stage 0: the file counts successes.output_len mean 210.0275 (min 0); config.yaml asks for 248
    # under ignore_eos; 248/210.0275 − 1 = +18.08%, the output throughput error at +0.0% request throughput
    res = runner.invoke(app, ["validate", str(SIM / "stage_0_lifecycle_metrics.json"), "--gpu", "H100", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    note = next(n for n in d["notes"] if n.startswith("output throughput:"))
    assert note == ("output throughput: the file's tokens/s counts each response's tokens as the client "
                    f"re-tokenized its text (successes.output_len), while {SIM / 'config.yaml'} asks the engine for "
                    "248 tokens per request under ignore_eos, which the replay generates; at the same request rate "
                    "the two lengths alone make them differ by 248/mean − 1: a count, not a step-cost error (TPOT is "
                    "compared on the 248 tokens) (this stage: 1,675.62 tokens/s, output_len mean 210.03, min 0: "
                    "248/210.03 − 1 = +18.1%)")


def test_an_unread_key_of_a_launch_record_is_warned_of(tmp_path):
    # exp-config.yaml (inference-sim/training's launch record) with a key kvledger does not read
    (tmp_path / "results").mkdir()
    for name in ("stage_0_lifecycle_metrics.json", "config.yaml"):
        shutil.copy(IP / name, tmp_path / "results" / name)
    (tmp_path / "exp-config.yaml").write_text("model: meta-llama/Llama-3.1-8B-Instruct\ntensor_parallelism: 1\n"
                                              "max_num_seqs: 128\nnum_scheduler_steps: 8\napp: inference-perf\n")
    res = runner.invoke(app, ["validate", str(tmp_path / "results" / "stage_0_lifecycle_metrics.json"), "--gpu",
                              "H100", "--json"])
    assert res.exit_code == 0, res.output
    warned = [n for n in json.loads(res.output)["notes"] if n.startswith("WARNING: recorded, not modelled")]
    assert warned == [f"WARNING: recorded, not modelled: --num-scheduler-steps 8 ({tmp_path / 'exp-config.yaml'}): the "
                      "replay runs without it, so whatever it changes in the measured engine is in the errors"]
