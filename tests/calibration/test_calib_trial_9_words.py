"""The ninth fresh-user trial's words: each fitted constant's folds' range and bounds in calibrate's text, the band
lines as sentences, the unknown-GPU hint naming only the command's options, a model-scope profile given as a GPU
profile, and what a folder given as a run lacks."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.calibration.fit_spread import gpu_spread, model_spread, spread_lines
from kvledger.evidence.run_folder import folder_problem

FF = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_profiles" / "h100_kubecon_fit_frontend.json"
STAGE = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_0_lifecycle_metrics.json"


def test_a_gpu_profile_says_its_folds_range_and_a_fraction_at_its_cap():
    p = json.loads(FF.read_text())
    # the trial's two folds (fit without stage 0, without stage 2): 0.9176/0.8863 and 0.5735/0.7601, their frontends
    # as the fit found them (14.30 and 16.04 ms, the same fit rerun with the folds' frontend_s recorded)
    p["leave_one_out"][0]["frontend_s"], p["leave_one_out"][1]["frontend_s"] = 0.01429629648331505, 0.016038919508206653
    p["fit"]["spread"] = sp = gpu_spread(p, fit_frontend=True)
    assert sp["fold_range"]["flops_fraction"] == [0.5734754376058723, 0.9175607001693956]
    assert sp["fold_range"]["bandwidth_fraction"] == [0.7601094557616296, 0.8862784615384616]
    assert sp["at_bound"] == {"flops_fraction": "upper"}  # 1.0: the search keeps fractions in (0, 1]
    text = "\n".join(spread_lines(p))
    assert ("FLOP/s fraction 0.573–0.918; bandwidth fraction 0.760–0.886; front-end latency (fit.frontend_s) "
            "14.3 ms–16.04 ms") in text
    assert "FLOP/s fraction 1.000 is at its upper bound (1.000, a limit of the search): the data would push past it" \
        in text


def test_a_model_scope_profile_says_the_coefficients_held_at_their_start():
    # the trial's m4090.json: cpu_overhead_s ends where the roofline's projection started it, 8.704 ms
    start = {"fixed_s": 0.01735985543554148, "cpu_overhead_s": 0.008703972766056722, "prefill_step_s": 0.0,
             "overlap": True}
    p = {"kind": "kvledger-calibration-profile", "step_cost": {**start, "fixed_s": 0.017885619982388863},
         "fit": {"initial": start}, "leave_one_out": []}
    p["fit"]["spread"] = model_spread(p)
    assert p["fit"]["spread"]["held_at_start"] == ["cpu_overhead_s"]  # prefill_step_s 0: never fitted, not "held"
    assert spread_lines(p) == ["held at their start value, not fitted (the runs given do not identify them: no step "
                               "of the fit moved them): cpu_overhead_s 0.008704"]


def test_the_unknown_gpu_hint_names_only_the_commands_options(cli_entry):
    from kvledger.catalog.gpu_hint import unknown_gpu_hint

    assert "--gpu-memory" not in unknown_gpu_hint("calibrate") and "--gpu-memory" not in unknown_gpu_hint("validate")
    assert "--gpu-memory/--gpu-bandwidth/--gpu-bf16-tflops" in unknown_gpu_hint("plan")
    rc, _, err = cli_entry("validate", str(STAGE), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "banana")
    assert rc == 2 and "unknown GPU 'banana'" in err and "--gpu-memory" not in err and "Traceback" not in err


def test_a_model_scope_profile_given_as_a_gpu_profile_is_named(tmp_path, cli_entry):
    m = tmp_path / "m4090.json"
    m.write_text(json.dumps({"kind": "kvledger-calibration-profile", "version": 1}))
    rc, _, err = cli_entry("validate", str(STAGE), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                           "--gpu-profile", str(m))
    assert rc == 2 and "a model-scope calibration profile (`kvledger calibrate --scope model`), not a GPU profile: " \
        f"pass it with --step-cost {m}" in " ".join(err.split())


def test_the_band_lines_are_sentences_that_say_what_the_percentages_are():
    from kvledger.report.validation_figures import band_source_line

    band = type("B", (), {"source": "regime gpu/dense/vllm: -11.6% … +22.3%"})()
    line = band_source_line({"saturation throughput": band}, "gpu/dense/vllm")
    assert line.endswith("the percentages are errors, predicted ÷ measured − 1, so the measured figure lies in the "
                         "range the band shows")
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-profile", str(FF),
                                   "--num-requests", "200", "--rate", "2"])
    said = " ".join(res.stdout.split())
    # the TTFT and TPOT bands' sources differ only in their ranges: the words once, on their own lines, each figure's
    # range named in place (the trial read "on 80% of TTFT mean: GPU profile …", and later the whole source twice)
    assert "on 80% of the measured points behind it" in said and "from: GPU profile" in said
    assert said.count("errors of GPU profiles fitted on other models") == 1 and "[TTFT mean " in said
    assert "predicted ÷ measured − 1, so the measured figure lies in the range the band shows" in said


def test_a_folder_says_what_it_lacks(tmp_path, cli_entry):
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text("{}")
    assert folder_problem(run).startswith("is a run folder with no requests.jsonl")
    (run / "requests.jsonl").write_text("\n")
    assert folder_problem(run).startswith("is a run folder whose requests.jsonl is empty")
    (tmp_path / "empty").mkdir()
    assert folder_problem(tmp_path / "empty").startswith("is empty; pass a run folder")
    (run / "requests.jsonl").write_text('{"request_id": 0}\n')
    parent = tmp_path / "gpu"
    (parent / "model").mkdir(parents=True)
    run.rename(parent / "model" / "vllm")
    assert folder_problem(parent) == ("is not one run but holds 1 under it (run folders or benchmark files): pass "
                                      f"them themselves: {parent / 'model' / 'vllm'}")
    rc, _, err = cli_entry("calibrate", "--scope", "gpu", str(tmp_path / "empty"))
    assert rc == 2 and "is empty; pass a run folder" in err and "Traceback" not in err
