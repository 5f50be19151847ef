"""A model-scope calibration profile used beyond what it was fitted on: the range calibrate records, the range a
simulation reaches, the warning and the wider band; a profile on another GPU refused, on another model or TP warned
about by name; --gpu-profile with a --step-cost that replaces the roofline refused."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from kvledger.accounting.calibration_profile import PROFILE_KIND, profile_step_cost
from kvledger.analyses.serving.profile_scope import (
    RANGE_FACTOR,
    beyond_range,
    check_profile_scope,
    fitted_range,
    simulated_range,
    unused_roofline_flags,
)
from kvledger.cli.main import app
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError
from kvledger.ledgers.error_band import Band
from kvledger.ledgers.profile_band import at_least_uncalibrated

runner = CliRunner()
H100_GPU_PROFILE = Path(__file__).resolve().parents[2] / "src/kvledger/accounting/data/gpu_profiles/h100-sxm.json"
H100 = "NVIDIA H100 80GB SXM5"
L8B = "meta-llama/Llama-3.1-8B"
STEP = {"fixed_s": 0.007, "prefill_token_s": 1.7e-5, "prefill_pair_s": 6e-8, "decode_seq_s": 3e-5,
        "decode_kv_token_s": 0.0, "cpu_overhead_s": 0.0, "overlap": False}


def _profile(tmp_path, span=None, **kw):
    d = {"kind": PROFILE_KIND, "version": 1, "model": f"{L8B}-Instruct (config of meta-llama/Meta-Llama-3.1-8B)",
         "gpu": H100, "tp": 1, "step_cost": STEP, **kw}
    if span is not None:
        d["fitted_range"] = span
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    return p


def _specs(lengths):
    return [RequestSpec(f"r{i}", float(i), p, o) for i, (p, o) in enumerate(lengths)]


def test_fitted_range_takes_the_step_maxima_and_the_longest_context():
    # two fitted runs at max_model_len 512: the step features (GPU_TERMS order: fixed, prefill tokens, pairs, decode
    # seqs, decode KV tokens, prefill flag) peak at 1,200 prefill tokens (run 2), 40 decoding requests and 9,000 KV
    # tokens (run 1); the requests: 600 + 10 is refused (prompt ≥ 512), 500 + 100 stops at 512, 300 + 100 = 400
    cfg = SimpleNamespace(max_model_len=512)
    t1 = SimpleNamespace(features=np.array([[1, 300, 0, 40, 9000, 1], [1, 0, 0, 12, 4000, 0]], float))
    t2 = SimpleNamespace(features=np.array([[1, 1200, 0, 3, 900, 1]], float))
    runs = [(SimpleNamespace(requests=_specs([(300, 100), (600, 10)])), cfg),
            (SimpleNamespace(requests=_specs([(500, 100)])), cfg)]
    r = fitted_range(runs, [t1, t2])
    assert (r["max_prefill_tokens_per_step"], r["max_decode_seqs_per_step"], r["max_decode_kv_tokens_per_step"],
            r["max_prompt_tokens"], r["max_context_tokens"]) == (1200, 40, 9000, 500, 512)


def test_simulated_range_and_what_goes_beyond():
    # max_model_len 131,072, budget 8,192: the 20,000-token prompt fills at least one whole 8,192-token chunk when
    # chunked prefill is on, all 20,000 in one step when it is off; its context 20,000 + 300 = 20,300
    specs = _specs([(20_000, 300), (700, 50)])
    on = SimpleNamespace(max_model_len=131_072, max_num_batched_tokens=8192, enable_chunked_prefill=True)
    off = SimpleNamespace(max_model_len=131_072, max_num_batched_tokens=8192, enable_chunked_prefill=False)
    assert simulated_range(specs, on) == {"max_prompt_tokens": 20_000, "max_context_tokens": 20_300,
                                          "max_prefill_tokens_per_step": 8192}
    assert simulated_range(specs, off)["max_prefill_tokens_per_step"] == 20_000
    # the kubecon fit's range (steps up to 8,192 prefill tokens, contexts ≤ 512): 8,192 ≤ 1.5 × 8,192 stays inside,
    # 20,300 > 1.5 × 512 = 768 does not
    fitted = {"max_prefill_tokens_per_step": 8192, "max_context_tokens": 512}
    assert RANGE_FACTOR == 1.5
    assert beyond_range(fitted, simulated_range(specs, on)) == [
        "KV context of a request (prompt + output): fitted up to 512 tokens, simulated 20,300 tokens"]
    # 768 tokens exactly is within the margin, 769 is not
    assert beyond_range(fitted, {"max_context_tokens": 768, "max_prefill_tokens_per_step": 1}) == []
    assert len(beyond_range(fitted, {"max_context_tokens": 769, "max_prefill_tokens_per_step": 1})) == 1


def test_check_profile_scope_warns_and_widens_or_says_the_range_is_unknown():
    cfg = SimpleNamespace(max_model_len=131_072, max_num_batched_tokens=8192, enable_chunked_prefill=True)
    info = {"name": "p.json", "fitted_range": {"max_prefill_tokens_per_step": 8192, "max_context_tokens": 512}}
    check_profile_scope(info, _specs([(2000, 100)]), cfg)  # context 2,100 > 768
    assert "beyond the range it was fitted on" in info["warnings"][0] and "2,100 tokens" in info["warnings"][0]
    assert info["band_widened_by"] and info["simulated_range"]["max_context_tokens"] == 2100
    inside = {"name": "p.json", "fitted_range": {"max_prefill_tokens_per_step": 8192, "max_context_tokens": 512}}
    check_profile_scope(inside, _specs([(300, 100)]), cfg)
    assert not inside["warnings"] and "band_widened_by" not in inside
    old = {"name": "p.json", "fitted_range": None}  # a profile written before the range was recorded
    check_profile_scope(old, _specs([(300, 100)]), cfg)
    assert "is unknown" in old["warnings"][0] and "band_widened_by" not in old
    roofline = {"name": "roofline"}  # not a profile: untouched
    check_profile_scope(roofline, _specs([(300, 100)]), cfg)
    assert roofline == {"name": "roofline"}


def test_the_band_widens_to_at_least_the_uncalibrated_one():
    # error_bands.json, uncalibrated/dense/vllm TTFT mean: q10 −71.14%, q90 +13.93% (31 points, 13 deployments) →
    # multipliers low = 1/(1 + q90) = 1/1.1393 = 0.8777 … high = 1/(1 + q10) = 1/(1 − 0.7114) = 3.465; a
    # model-calibrated band 0.88 … 1.07 (2 points) becomes min(0.88, 0.8777) … max(1.07, 3.465) = 0.8777 … 3.465 on
    # max(2, 31) = 31 points: both ends are the uncalibrated band's
    base = Band("model/dense/vllm", "ttft_mean", 0.88, 1.07, 2, "floor")
    b = at_least_uncalibrated(base, "model/dense/vllm", "ttft_mean", ["fitted on another model"])
    assert b.low == pytest.approx(1 / (1 + 0.13928204280475986))
    assert b.high == pytest.approx(1 / (1 - 0.7114126846211342))
    assert b.num_runs == 31 and "fitted on another model" in b.source
    assert at_least_uncalibrated(base, "model/dense/vllm", "ttft_mean", []) is base


def test_a_profile_on_another_gpu_is_refused_and_another_model_or_tp_named(tmp_path):
    p = _profile(tmp_path)
    with pytest.raises(InputError, match="fitted on NVIDIA H100 80GB SXM5, not NVIDIA A100 80GB SXM4"):
        profile_step_cost(p, L8B, "NVIDIA A100 80GB SXM4", 1)
    # the base checkpoint of the Instruct model the profile was fitted on: one bundled config, the same layers
    _, same = profile_step_cost(p, f"{L8B} (config of meta-llama/Meta-Llama-3.1-8B)", H100, 1)
    assert "warnings" not in same and "band_withheld" not in same
    _, tp = profile_step_cost(p, f"{L8B} (config of meta-llama/Meta-Llama-3.1-8B)", H100, 2)
    assert tp["mismatch_what"] == "TP" and "another TP (TP: fitted 1, simulated 2)" in tp["warnings"][0]
    _, qwen = profile_step_cost(p, "Qwen/Qwen3-8B", H100, 2)
    assert qwen["mismatch_what"] == "model and TP" and qwen["band_withheld"] == "fitted on another model and TP"


def test_a_profile_carried_to_another_model_prints_no_band(tmp_path):
    # a model-scope profile's step times are its model's: carried to another model (a 7B profile pricing 70B at TP 4
    # came out at TPOT −54.6% in a trial, outside even the uncalibrated band) nothing measured bounds the error, so
    # simulate prints no mean-latency or throughput band, and its warning says why
    p = _profile(tmp_path)
    args = ["simulate", "Qwen/Qwen3-8B", "--gpu", "H100", "--num-requests", "20", "--rate", "1", "--step-cost", str(p)]
    d = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert d["error_bands"] == {}
    assert any("so no error band is printed: no validation measured a profile carried so" in w
               for w in d["step_cost"].get("warnings", []) + d["notes"])


def test_simulate_prints_the_warning_first_and_the_wider_band(tmp_path):
    p = _profile(tmp_path, {"max_prefill_tokens_per_step": 8192, "max_context_tokens": 512})
    args = ["simulate", L8B, "--gpu", "H100", "--prompt-lengths", "fixed:2000", "--output-lengths", "fixed:100",
            "--num-requests", "20", "--rate", "1", "--step-cost", str(p)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("warning: calibrated profile m.json is used beyond the range it was fitted on")
    # the warning's own words (the terminal wraps them, so compare them with the line breaks folded into spaces)
    flat = " ".join(res.output.split())
    assert ("KV context of a request (prompt + output): fitted up to 512 tokens, simulated 2,100 tokens: its linear "
            "step cost is extrapolated there") in flat
    d = json.loads(runner.invoke(app, [*args, "--json"]).output)
    band = d["error_bands"]["ttft_mean"]
    # the model-calibrated regime has no TTFT band of its own: it borrows gpu/dense/vllm's, which is the cross-model
    # band (error_bands.json cross_model, q10 −64.68%, q90 +183.11%, 31 points): low = 1/(1 + 1.8311) = 0.3532,
    # high = 1/(1 − 0.6468) = 2.831; widened to at least the uncalibrated one (0.8777 … 3.465, previous test):
    # min(0.3532, 0.8777) = 0.3532 … max(2.831, 3.465) = 3.465 × the prediction
    assert band["low"] == pytest.approx(band["predicted"] / (1 + 1.8311048482742291), rel=1e-9)
    assert band["high"] == pytest.approx(band["predicted"] / (1 - 0.7114126846211342), rel=1e-9)
    assert band["num_runs"] == 31 and "the profile was used beyond its fitted range" in band["source"]
    res = runner.invoke(app, [*args[:-2], "--gpu", "A100-80GB", "--step-cost", str(p)])
    # InputError: the CLI's one-paragraph error, exit 2 (kvledger.cli.main)
    assert isinstance(res.exception, InputError) and "model-scope profile fitted on NVIDIA H100" in str(res.exception)


def test_gpu_profile_with_a_calibrated_step_cost_is_refused(tmp_path):
    p = _profile(tmp_path)
    res = runner.invoke(app, ["simulate", L8B, "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "10",
                              "--step-cost", str(p), "--gpu-profile", str(H100_GPU_PROFILE)])
    assert isinstance(res.exception, InputError) and "not both" in str(res.exception)
    res = runner.invoke(app, ["simulate", L8B, "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "10",
                              "--step-cost", str(p), "--gpu-profile", "none"])
    assert res.exit_code == 0, res.output


def test_roofline_only_flags_under_a_replacing_step_cost_are_said_not_dropped(tmp_path):
    # the fractions, the GEMM mode and the link share price only the roofline: under a PROFILE.json they price
    # nothing, under a bundled calibration only the roofline its note compares with; under the roofline, no warning
    a = SimpleNamespace(achievable_flops_fraction=None, achievable_bandwidth_fraction=None, gemm_efficiency=None,
                        allreduce_link_share=0.5)
    assert unused_roofline_flags(a, "roofline") is None
    assert unused_roofline_flags(SimpleNamespace(), "m.json") is None  # none given (a flag group without them)
    w = unused_roofline_flags(a, "m.json")
    assert w.startswith("--allreduce-link-share 0.5 prices the roofline's steps, which --step-cost m.json replaces")
    assert w.endswith("(it is not used)")
    a.achievable_flops_fraction = 0.6
    w = unused_roofline_flags(a, "calibrated")
    assert w.startswith("--achievable-flops-fraction 0.6, --allreduce-link-share 0.5 price the roofline's steps")
    assert w.endswith("(they price only the roofline the step cost's note compares with the calibration)")
    # the judgment commands' flag group names the fractions flops_fraction / bandwidth_fraction
    assert unused_roofline_flags(SimpleNamespace(flops_fraction=0.5), "m.json").startswith(
        "--achievable-flops-fraction 0.5 prices the roofline's steps")
    p = _profile(tmp_path)
    base = ["simulate", L8B, "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "10", "--step-cost", str(p)]
    res = runner.invoke(app, [*base, "--allreduce-link-share", "0.5", "--json"])
    assert res.exit_code == 0, res.output
    warnings = json.loads(res.stdout)["step_cost"]["warnings"]
    assert any(x.startswith("--allreduce-link-share 0.5 prices the roofline's steps") for x in warnings)
    res = runner.invoke(app, [*base, "--json"])
    assert not any("prices the roofline" in x for x in json.loads(res.stdout)["step_cost"].get("warnings") or [])


def test_disagg_under_a_profile_says_the_link_share_is_unused_and_refuses_a_gpu_profile(tmp_path):
    p = _profile(tmp_path)
    base = ["disagg", L8B, "--gpu", "H100", "--num-gpus", "2", "--num-requests", "4", "--step-cost", str(p)]
    res = runner.invoke(app, [*base, "--gemm-efficiency", "flat", "--json"])
    assert res.exit_code == 0, res.output
    assert "--gemm-efficiency flat prices the roofline's steps" in res.stdout
    res = runner.invoke(app, [*base, "--gpu-profile", str(H100_GPU_PROFILE)])
    assert isinstance(res.exception, InputError) and "not both" in str(res.exception)


def test_the_report_header_names_the_gpu_profile_that_priced_the_roofline():
    from kvledger.report.html_report import _step_cost_words

    # make_step_cost sets priced_by when a GPU profile priced the roofline (--gpu-profile FILE or a bundled one)
    sc = {"name": "roofline", "priced_by": "gpu: GPU profile g.json (fitted on run_a)"}
    assert _step_cost_words(sc) == "roofline, priced by gpu: GPU profile g.json (fitted on run_a)"
    assert _step_cost_words({"name": "roofline", "scope": "uncalibrated"}) == "roofline"


def test_goodput_simulate_prints_the_warning_first(tmp_path):
    # the same profile and workload as simulate's test: context 2,000 + 100 > 1.5 × 512
    p = _profile(tmp_path, {"max_prefill_tokens_per_step": 8192, "max_context_tokens": 512})
    res = runner.invoke(app, ["goodput", "--simulate", L8B, "--gpu", "H100", "--prompt-lengths", "fixed:2000",
                              "--output-lengths", "fixed:100", "--num-requests", "20", "--rate", "1",
                              "--slo", "ttft=200ms,tpot=50ms", "--step-cost", str(p)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("warning: calibrated profile m.json is used beyond the range it was fitted on")
