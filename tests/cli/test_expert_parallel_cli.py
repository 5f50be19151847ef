"""--enable-expert-parallel on the command line (simulate, plan) and from a run's own record (validate)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import engine_for
from kvledger.calibration.replay import load_measured
from kvledger.cli.main import app
from kvledger.errors import InputError

MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
SIM = ["simulate", MIXTRAL, "--gpu", "H100", "--tp", "4", "--max-model-len", "8192", "--prompt-lengths", "fixed:256",
       "--output-lengths", "fixed:16", "--rate", "5", "--num-requests", "20"]


def test_simulate_with_the_flag_names_expert_parallelism_in_its_step_cost():
    res = CliRunner().invoke(app, [*SIM, "--enable-expert-parallel", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    text = json.dumps(out)
    assert "expert parallelism over 4 ranks" in text and "no all-to-all" in text
    plain = CliRunner().invoke(app, [*SIM, "--json"])
    assert "expert parallelism over" not in plain.output


# --enable-expert-parallel's note at TP 4 for Mixtral's 8 routed experts: ⌈8/4⌉ = 2 whole experts on each rank
EP_NOTE = ("--enable-expert-parallel (EP 4 over the TP ranks, data parallel 1): each MoE layer's 8 routed experts are "
           "whole, 2 experts on each (vLLM's linear placement), instead of a 1/4 slice of every expert; attention, "
           "dense layers and shared experts stay TP-sliced; with data parallel 1 there is no all-to-all, the TP "
           "all-reduce combines the experts' outputs, and a step's expert work waits for the busiest rank")


def test_goodput_and_cost_text_say_the_note_as_simulate_does():
    # simulate printed the note; goodput --simulate (one run and a capacity search) and cost --simulate had it only
    # in --json: now each lists it with the simulation's sources
    assert EP_NOTE in " ".join(CliRunner().invoke(app, [*SIM, "--enable-expert-parallel"]).output.split())
    search = ["--slo", "ttft=1s", "--num-requests", "50", "--enable-expert-parallel"]
    runs = {"goodput run": ["goodput", "--simulate", *SIM[1:], "--slo", "ttft=1s", "--enable-expert-parallel"],
            "goodput search": ["goodput", "--simulate", *_no_rate(SIM[1:]), *search, "--target", "0.9"],
            "cost": ["cost", "--simulate", *_no_rate(SIM[1:]), *search, "--utilization", "0.5",
                     "--api", "OpenAI:gpt-4.1"]}
    for what, argv in runs.items():
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 0, (what, res.output)
        assert f"] {EP_NOTE}" in " ".join(res.output.split()), what  # a numbered source line
        off = CliRunner().invoke(app, [a for a in argv if a != "--enable-expert-parallel"])
        assert off.exit_code == 0 and "--enable-expert-parallel" not in off.output, what


def _no_rate(argv: list[str]) -> list[str]:
    """``argv`` less --rate and --num-requests with their values (a capacity search sets both)."""
    out, skip = [], False
    for a in argv:
        if skip or a in ("--rate", "--num-requests"):
            skip = not skip
            continue
        out.append(a)
    return out


def test_the_flag_with_sglang_or_a_dense_model_is_refused_in_words():
    # an InputError (main's handler prints it, or its JSON with --json, exit 2: no traceback), as test_run_record's
    res = CliRunner().invoke(app, [*SIM, "--enable-expert-parallel", "--policy", "sglang", "--json"])
    assert isinstance(res.exception, InputError) and "SGLang's is --ep-size: pass --ep-size" in str(res.exception)
    res = CliRunner().invoke(app, ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--tp", "2", "--enable-expert-parallel",
                                   "--json"])
    assert isinstance(res.exception, InputError) and "no routed experts" in str(res.exception)


def test_plan_json_carries_the_setting_and_its_note():
    res = CliRunner().invoke(app, ["plan", MIXTRAL, "--gpu", "H100", "--tp", "4", "--max-model-len", "8192",
                                   "--enable-expert-parallel", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["settings"]["enable_expert_parallel"] is True
    assert "expert parallelism over 4 ranks" in json.dumps(out["roofline"])


def _run_dir(tmp_path, parallel: dict):
    # as tests/calibration/test_run_record.py's record, for Mixtral at TP 4
    reqs = [{"request_id": f"r{i}", "input_toks": 200, "output_toks": 8, "queued_ts": 1.0 + 0.5 * i,
             "first_token_ts": 1.05 + 0.5 * i, "last_token_ts": 1.2 + 0.5 * i} for i in range(6)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    meta = {"model": MIXTRAL, "vllm_version": "0.19.0",
            "engine_kwargs": {"max_model_len": 4096, "max_num_seqs": 64, "max_num_batched_tokens": 2048},
            "resolved_config": {"parallel_config": parallel}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return tmp_path / "requests.jsonl"


def test_validate_replays_a_recorded_expert_parallel_run_with_it(tmp_path):
    path = _run_dir(tmp_path, {"tensor_parallel_size": 4, "data_parallel_size": 1, "enable_expert_parallel": True})
    setup = engine_for(SimRequestArgs(model=MIXTRAL, gpu="H100", tp=None), load_measured(str(path)))
    assert setup.plan.settings.enable_expert_parallel and setup.plan.settings.tp == 4
    assert any(n.startswith("from the run's own record") and "enable_expert_parallel True" in n for n in setup.notes)
    # the command line wins: --no-enable-expert-parallel replays TP-sliced experts, and says it overrides the record
    args = SimRequestArgs(model=MIXTRAL, gpu="H100", tp=None, enable_expert_parallel=False)
    off = engine_for(args, load_measured(str(path)))
    assert not off.plan.settings.enable_expert_parallel
    assert any("enable_expert_parallel True → False" in n for n in off.notes)
    res = CliRunner().invoke(app, ["validate", str(path), "--gpu", "H100", "--json"])
    assert res.exit_code == 0, res.output
    assert "expert parallelism over 4 ranks" in res.output
    res = CliRunner().invoke(app, ["validate", str(path), "--gpu", "H100", "--no-enable-expert-parallel", "--json"])
    notes = json.loads(res.output)["notes"]
    assert res.exit_code == 0 and any("enable_expert_parallel True → False" in n for n in notes)


def test_the_flag_is_said_where_it_changes_nothing_and_in_the_plans_header():
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    # TP 1: vLLM turns expert parallelism on only when TP × DP > 1, so the run is the same; simulate says so
    res = CliRunner().invoke(app, ["simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--enable-expert-parallel",
                                   "--num-requests", "20", "--rate", "2"])
    assert res.exit_code == 0, res.output
    assert "--enable-expert-parallel changes nothing at TP 1 with data parallel 1" in res.output
    res = CliRunner().invoke(app, ["plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--tp", "2",
                                   "--enable-expert-parallel"])
    header = " ".join(res.output.split("KV per token")[0].split())  # the header line, as the terminal wrapped it
    assert "TP 2, --enable-expert-parallel, max_model_len" in header


def test_spec_decode_takes_expert_parallelism():
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    # Qwen3-30B-A3B at TP 2 with EP: the plain decode step at batch 1 waits for the busiest rank's weight reads
    # (moe_terms.ep_read_imbalance), so it is dearer than without the flag; the step cost names the rule
    runs = [CliRunner().invoke(app, ["spec-decode", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--tp", "2",
                                     "--draft-tokens", "3", "--acceptance", "0.7", "--json", *flag])
            for flag in ([], ["--enable-expert-parallel"])]
    assert all(r.exit_code == 0 for r in runs), runs[1].output
    off, on = (json.loads(r.output) for r in runs)
    assert "expert parallelism over 2 ranks" in json.dumps(on) and "expert parallelism over" not in json.dumps(off)
