"""``--gpu-profile FILE`` (a GPU-scope calibration from ``kvledger calibrate --scope gpu``) on every command that
simulates: simulate (typer's path and the quick path), goodput --simulate, cost --simulate, search, report; the
output names the profile that priced the steps; a profile fitted on another GPU, or given to --step-cost, is refused
with the way out."""

from __future__ import annotations

import json

import pytest
from cli_run import write_gpu_profile
from typer.testing import CliRunner

from kvledger.cli.main import app, build_app
from kvledger.cli.quick_argv import parse_simulate

runner = CliRunner()
MODEL = "meta-llama/Meta-Llama-3.1-8B"
H100 = "NVIDIA H100 80GB SXM5"  # the catalog name `--gpu H100` resolves to
SIM = ["simulate", MODEL, "--gpu", "H100", "--num-requests", "40"]


def _error(res) -> str:
    """The refusal: the InputError the command raised (the console entry point prints it as one line, no traceback)."""
    assert res.exit_code != 0
    return str(res.exception) if res.exception is not None else res.output


@pytest.fixture()
def profile(tmp_path):
    # a hand-written GPU profile for the H100: 50% of peak FLOP/s, 60% of peak bandwidth, fitted on one run "myrun"
    return write_gpu_profile(tmp_path / "h100.json", H100, MODEL)


def test_simulate_prices_the_roofline_with_the_profiles_fractions_and_says_so(profile):
    res = runner.invoke(app, SIM + ["--gpu-profile", str(profile), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    cost = doc["step_cost"]
    assert (cost["flops_fraction"], cost["bandwidth_fraction"], cost["scope"]) == (0.5, 0.6, "gpu")
    assert cost["priced_by"] == f"gpu: GPU profile {profile} (fitted on myrun)"
    # the profile only sets the two fractions (and its matmul pricing, flat: a version-1 profile): the same run with
    # them given by hand, flat (and no profile), is identical
    hand = runner.invoke(app, SIM + ["--gpu-profile", "none", "--achievable-flops-fraction", "0.5",
                                     "--achievable-bandwidth-fraction", "0.6", "--gemm-efficiency", "flat", "--json"])
    assert hand.exit_code == 0, hand.output
    assert json.loads(hand.stdout)["summary"] == doc["summary"]
    # and it differs from the H100's default (uncalibrated: no default H100 profile; the measured matmul curve as
    # measured, bandwidth 0.8)
    plain = json.loads(runner.invoke(app, SIM + ["--json"]).stdout)
    assert plain["step_cost"]["scope"] == "uncalibrated"
    # --json says what priced it as the text does (a fresh-user trial found the key only on a profile's runs)
    assert plain["step_cost"]["priced_by"] == ("uncalibrated (the roofline at the default or given fractions, as its "
                                               "source says; no GPU profile fitted on serving runs)")
    assert plain["summary"]["ttft_s"]["mean"] < doc["summary"]["ttft_s"]["mean"]


def test_simulate_text_output_names_what_priced_the_steps(profile):
    res = runner.invoke(app, SIM + ["--gpu-profile", str(profile)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert f"priced by: gpu: GPU profile {profile} (fitted on myrun)" in res.output
    res = runner.invoke(app, SIM, env={"COLUMNS": "300"})
    assert "priced by: uncalibrated" in res.output


def test_the_quick_path_reads_the_flag_as_typer_does(profile):
    values = parse_simulate([MODEL, "--gpu", "H100", "--gpu-profile", str(profile)])
    assert values is not None and values["gpu_profile"] == str(profile)


def test_a_profile_of_another_gpu_is_refused_naming_both(profile):
    for argv in (["simulate", MODEL, "--gpu", "A100", "--num-requests", "40"],
                 ["goodput", "--simulate", MODEL, "--gpu", "A100", "--num-requests", "50", "--slo", "ttft=500ms"]):
        res = runner.invoke(app, argv + ["--gpu-profile", str(profile)])
        assert f"was fitted on {H100}, not NVIDIA A100 80GB SXM4" in _error(res)


def test_step_cost_given_a_gpu_profile_points_to_gpu_profile(profile):
    err = _error(runner.invoke(app, SIM + ["--step-cost", str(profile)]))
    assert f"this is a GPU profile (fitted on {H100}" in err and f"use --gpu-profile {profile}" in err


def test_goodput_and_cost_simulate_take_the_flag(profile):
    res = runner.invoke(app, ["goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "50", "--slo",
                              "ttft=500ms", "--gpu-profile", str(profile), "--json"])
    assert res.exit_code == 0, res.output
    assert f"gpu: GPU profile {profile} (fitted on myrun)" in res.output
    res = runner.invoke(app, ["cost", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "50", "--slo",
                              "ttft=500ms", "--utilization", "0.5", "--gpu-profile", str(profile)],
                        env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert f"fractions from the GPU profile {profile}" in res.output
    # without --simulate it describes a simulation, as every other engine flag
    res = runner.invoke(app, ["goodput", str(profile), "--slo", "ttft=500ms", "--gpu-profile", str(profile)])
    assert "--gpu-profile describes a simulation" in _error(res)


def test_search_prices_the_candidates_on_the_profiles_gpu_and_refuses_it_for_others(profile):
    from kvledger.accounting.gpu_profile_search import choice_for_gpu
    from kvledger.analyses.search.bands import search_regime
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.search.spec import Candidate, SearchSpec

    # a search over several GPUs: the file prices its own GPU's candidates; another GPU keeps its default (None)
    assert choice_for_gpu(str(profile), H100) == str(profile)
    assert choice_for_gpu(str(profile), "NVIDIA A100 80GB SXM4") is None
    spec = SearchSpec(model=MODEL, slo="ttft=500ms", utilization=0.5, gpu_profile=str(profile))
    assert sim_args(spec, Candidate("nvidia_h100_sxm", 1)).gpu_profile == str(profile)
    assert sim_args(spec, Candidate("nvidia_a100_80gb_sxm", 1)).gpu_profile is None
    # the capacity band is the gpu-scope one on the H100, the uncalibrated one on the A100 (no bundled profile)
    assert search_regime(spec, "nvidia_h100_sxm").startswith("gpu/")
    assert search_regime(spec, "nvidia_a100_80gb_sxm").startswith("uncalibrated/")
    assert spec.to_dict()["gpu_profile"] == str(profile)
    assert "gpu_profile" not in SearchSpec(model=MODEL, slo="ttft=500ms", utilization=0.5).to_dict()
    res = runner.invoke(app, ["search", MODEL, "--gpus", "A100", "--tp", "1", "--slo", "ttft=500ms,tpot=50ms",
                              "--rate", "5", "--gpu-profile", str(profile)])
    assert f"was fitted on {H100}, which this search does not try (NVIDIA A100 80GB SXM4)" in _error(res)


def test_report_takes_the_flag_and_refuses_another_gpus_profile(profile, tmp_path):
    cmd = next(c for c in __import__("typer").main.get_command(build_app("report")).commands["report"].params
               if c.name == "gpu_profile")
    assert cmd.opts == ["--gpu-profile"]
    res = runner.invoke(app, ["report", MODEL, "--gpu", "A100", "--slo", "ttft=500ms", "--num-requests", "50",
                              "--gpu-profile", str(profile), "--out", str(tmp_path / "r.html")])
    assert f"was fitted on {H100}, not NVIDIA A100 80GB SXM4" in _error(res)
    assert not (tmp_path / "r.html").exists()


def test_plans_roofline_view_takes_the_profile_and_names_it(profile):
    base = ["plan", MODEL, "--gpu", "H100", "--json"]
    res = runner.invoke(app, base + ["--gpu-profile", str(profile)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    roof = doc["roofline"]
    assert (roof["flops_fraction"], roof["bandwidth_fraction"]) == (0.5, 0.6)
    assert roof.pop("priced_by") == f"gpu: GPU profile {profile} (fitted on myrun)"
    # the same plan as the two fractions given by hand; without either, the assumed 0.7 / 0.8 and no priced_by
    hand = json.loads(runner.invoke(app, base + ["--achievable-flops-fraction", "0.5",
                                                 "--achievable-bandwidth-fraction", "0.6"]).stdout)
    assert hand == doc
    plain = json.loads(runner.invoke(app, base).stdout)["roofline"]
    assert (plain["flops_fraction"], plain["bandwidth_fraction"], "priced_by" in plain) == (0.7, 0.8, False)
    err = _error(runner.invoke(app, ["plan", MODEL, "--gpu", "A100", "--gpu-profile", str(profile)]))
    assert f"was fitted on {H100}, not NVIDIA A100 80GB SXM4" in err


def test_plan_on_a_gpu_with_a_bundled_profile_prices_the_roofline_as_simulate_does():
    # RTX 4090's bundled profile (accounting/data/gpu_profiles/rtx-4090.json, refitted 2026-12-03 with its two vLLM
    # 0.19 runs replayed under async scheduling, 0.19's default): 0.6989 of peak FLOP/s, 0.8654 of peak bandwidth, the
    # fractions simulate uses by default; both fractions by hand, or --gpu-profile none, leave it out
    base = ["plan", MODEL, "--gpu", "RTX 4090", "--json"]
    roof = json.loads(runner.invoke(app, base).stdout)["roofline"]
    assert (roof["flops_fraction"], roof["bandwidth_fraction"]) == (0.6989, 0.8654)
    assert roof["priced_by"].startswith("gpu: GPU profile bundled:rtx-4090.json")
    none = json.loads(runner.invoke(app, base + ["--gpu-profile", "none"]).stdout)["roofline"]
    hand = json.loads(runner.invoke(app, base + ["--achievable-flops-fraction", "0.7",
                                                 "--achievable-bandwidth-fraction", "0.8"]).stdout)["roofline"]
    assert none == hand and (none["flops_fraction"], none["bandwidth_fraction"], "priced_by" in none) == (0.7, 0.8,
                                                                                                          False)


def test_the_rtx_pro_6000_editions_share_a_profile_other_gpus_do_not():
    # one board (GB202, 96 GB GDDR7) with two coolers: the Server Edition's bundled profile prices the Workstation
    # Edition too, as the GEMM curve does; an H100 profile still does not price an H200 (other memory)
    import pytest as _pytest

    from kvledger.accounting.gpu_profile import bundled_gpu_profile, resolve_gpu_profile
    from kvledger.errors import InputError

    server = bundled_gpu_profile("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    work = bundled_gpu_profile("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")
    assert work == server and (work.flops_fraction, work.bandwidth_fraction) == (0.6989, 0.625)
    assert resolve_gpu_profile("bundled:h100-sxm", "NVIDIA H100 80GB SXM5") is not None
    with _pytest.raises(InputError, match="does not carry to another GPU"):
        resolve_gpu_profile("bundled:h100-sxm", "NVIDIA H200 141GB SXM5")


def test_simulate_names_each_bands_source_where_a_profiles_check_widened_one():
    # Qwen3-32B TP 2 on the RTX PRO 6000, priced by the profile fitted on Llama-3.1-8B TP 1: its TPOT band takes the
    # profile's out-of-sample check (Qwen3-32B TP 2, TPOT −10.0% with its all-reduces over PCIe) and TTFT's does not,
    # so the sources differ and the bands lines name the clause TPOT's alone has (it named the first source alone, which
    # hid why a band widened; then each whole source, twice)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    out = CliRunner().invoke(app, ["simulate", "Qwen/Qwen3-32B", "--gpu", "rtx_pro_6000_server", "--tp", "2",
                                   "--prompt-lengths", "fixed:1000", "--output-lengths", "fixed:300", "--rate", "1",
                                   "--num-requests", "50"]).output
    text = " ".join(out.split())
    assert "from: GPU profile bundled:rtx-pro-6000.json" in text
    assert "TPOT mean only: no narrower than its errors" in text
    # its upper side is the uncalibrated band's +11.8% (error_bands.json uncalibrated/dense/vllm TPOT q90): the
    # profile's one run was saturated, so its latency is not measured (profile_band.latency_unmeasured)
    assert "checked on but not fitted on (Qwen/Qwen3-32B TP 2: -10.0%): -10.0% … +11.8%" in text
    assert "every run the profile was fitted on was saturated" in text


def test_the_priced_by_line_says_when_the_run_is_not_what_the_profile_was_fitted_on():
    # the bundled RTX 4090 profile was fitted on Llama-3.1-8B TP 1: a Qwen3-8B TP 2 run says so on its priced-by line
    # (a fresh-user trial found no line saying it), and a Llama-3.1-8B TP 1 run does not
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    base = ["simulate", "--gpu", "RTX4090", "--num-requests", "20", "--max-model-len", "8K", "--rate", "1", "--json"]
    other = json.loads(CliRunner().invoke(app, [base[0], "Qwen/Qwen3-8B", *base[1:], "--tp", "2"]).stdout)
    said = other["step_cost"]["priced_by"]
    assert said.startswith("gpu: GPU profile bundled:rtx-4090.json (fitted on ")
    assert "; this run (Qwen/Qwen3-8B TP 2) is not what it was fitted on (meta-llama/Llama-3.1-8B" in said
    same = json.loads(CliRunner().invoke(app, [base[0], "meta-llama/Llama-3.1-8B", *base[1:]]).stdout)
    assert "is not what it was fitted on" not in same["step_cost"]["priced_by"]


def test_the_profile_names_the_engine_release_it_was_fitted_on_and_a_stated_other_one():
    # the bundled RTX 4090 profile's two runs are LLMServingSim's vLLM 0.19.0 runs, whose records (meta.json) state
    # the release ("engine": "vLLM 0.19.0", "engine_recorded": true in the file): the priced-by line names it; a run
    # whose release is stated as another (--engine-version 0.11.0) is told its fractions carry 0.19.0's host time, and
    # so is one simulated as kvledger's default release (0.33.0), said as the default (a fresh-user trial found the
    # default run told nothing while typing the same release gave the note)
    base = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "--num-requests", "20", "--max-model-len", "8K",
            "--rate", "1", "--json"]
    said = json.loads(runner.invoke(app, base).stdout)["step_cost"]
    assert said["priced_by"].startswith("gpu: GPU profile bundled:rtx-4090.json (fitted on ")
    assert "; vLLM 0.19.0); this run, simulated as vLLM 0.33.0 (kvledger's default release; --engine-version to " \
        "choose), is not the engine release the GPU profile was fitted on (vLLM 0.19.0)" in said["priced_by"]
    assert said["engine_mismatch"].startswith("this run, simulated as vLLM 0.33.0 (kvledger's default release")
    same = json.loads(runner.invoke(app, [*base, "--engine-version", "0.19.0"]).stdout)["step_cost"]
    assert "engine_mismatch" not in same
    other = json.loads(runner.invoke(app, [*base, "--engine-version", "0.11.0"]).stdout)["step_cost"]
    assert other["engine_mismatch"] == (
        "this run's engine (vLLM 0.11.0) is not the engine release the GPU profile was fitted on (vLLM 0.19.0): its "
        "fractions carry that release's per-step host time (scheduler, sampler, graphs), which differs by release")
    assert other["priced_by"].endswith("; " + other["engine_mismatch"])


def test_a_profile_run_without_a_recorded_release_names_none(tmp_path):
    # a run whose release was assumed (kvledger's default, "engine_recorded": false) or a file of before the field:
    # no release in the label, so no mismatch can be claimed
    from kvledger.accounting.gpu_profile import load_gpu_profile

    path = tmp_path / "p.json"
    runs = [{"label": "a", "source": "a", "model": MODEL, "tp": 1, "engine": "vLLM 0.19.0", "engine_recorded": False},
            {"label": "b", "source": "b", "model": MODEL, "tp": 1}]
    path.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 1, "gpu": H100, "flops_fraction": 0.5,
                                "bandwidth_fraction": 0.6, "runs": runs}))
    prof = load_gpu_profile(str(path))
    assert [r["engine"] for r in prof.runs] == [None, None] and "vLLM" not in prof.label
    out = json.loads(runner.invoke(app, SIM + ["--gpu-profile", str(path), "--engine-version", "0.11.0", "--json"])
                     .stdout)["step_cost"]
    assert "engine_mismatch" not in out


def test_a_band_measured_on_other_gpus_says_so():
    # the uncalibrated regime's TTFT/TPOT bands come from H100 deployments only (kubecon, inference-sim/training:
    # error_bands.json gpu_ids); on the RTX PRO 6000 with no profile, TPOT 12.1 ms gets 10.8–12.9 ms where the
    # profile-priced run gets 13.4–16.2 ms (a fresh-user trial: two "80%" bands that do not overlap), so the
    # borrowed one says it was measured elsewhere; on the H100 itself it does not
    args = ["simulate", "meta-llama/Llama-3.1-8B", "--rate", "2", "--num-requests", "100", "--json"]
    pro = json.loads(runner.invoke(app, [*args, "--gpu", "rtx_pro_6000_server", "--gpu-profile", "none"]).stdout)
    src = pro["error_bands"]["tpot_mean"]["source"]
    assert src.endswith("; measured on NVIDIA H100 80GB SXM5 only, not on NVIDIA RTX PRO 6000 Blackwell Server "
                        "Edition: its width a floor for the error there, not a measurement")
    h100 = json.loads(runner.invoke(app, [*args, "--gpu", "H100"]).stdout)
    assert "measured on" not in h100["error_bands"]["tpot_mean"]["source"]


def test_a_release_written_short_or_of_another_engine_is_compared_as_the_rules_read_it():
    # "--engine-version 0.19" is vLLM 0.19.0 (the rules' normalised release): no mismatch with the profile's 0.19.0 (a
    # reviewer found "vLLM 0.19 is not … vLLM 0.19.0"); an SGLang run is SGLang 0.5.23 (its rules' "0.5.23 rules"),
    # another engine than the profile's vLLM 0.19.0, and is told so
    base = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "--num-requests", "20", "--max-model-len", "8K",
            "--rate", "1", "--json"]
    short = json.loads(runner.invoke(app, [*base, "--engine-version", "0.19"]).stdout)["step_cost"]
    assert "engine_mismatch" not in short
    sg = json.loads(runner.invoke(app, [*base, "--policy", "sglang"]).stdout)["step_cost"]
    assert sg["engine_mismatch"].startswith("this run, simulated as SGLang 0.5.23 (kvledger's default release; "
                                            "--engine-version to choose), is not the engine release the GPU profile "
                                            "was fitted on (vLLM 0.19.0)")


def test_a_profile_priced_band_resting_on_other_gpus_says_so():
    # the bundled RTX PRO 6000 profile's one run (Llama-3.1-8B TP 1) is saturated: at 2 req/s (kept up: TTFT and TPOT
    # banded) each latency band is the cross-model band widened to the uncalibrated one, both measured on H100
    # deployments only, and says so. At 40 req/s (saturated: throughput banded) the band takes in the profile's own
    # run on this GPU, so it does not. The profile's fit errors quote that saturated run by its throughput (the file's
    # throughput_rel_error −2.5%), not by latency it did not measure
    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "rtx_pro_6000_server", "--num-requests", "300", "--json"]
    on_h100 = "measured on NVIDIA H100 80GB SXM5 only, not on NVIDIA RTX PRO 6000 Blackwell Server Edition"
    low = json.loads(runner.invoke(app, [*args, "--rate", "2"]).stdout)
    assert set(low["error_bands"]) == {"ttft_mean", "tpot_mean"}
    assert all(on_h100 in b["source"] for b in low["error_bands"].values())
    assert "Llama-3.1-8B/vllm throughput -3% (saturated)" in low["step_cost"]["source"]
    high = json.loads(runner.invoke(app, [*args, "--rate", "40"]).stdout)
    assert "throughput" in high["error_bands"] and on_h100 not in high["error_bands"]["throughput"]["source"]
