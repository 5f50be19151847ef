"""A GPU profile's runs are read strictly: they set its poor-fit warning and how far its bands widen, so a damaged
list must be refused, not read as "fitted on unnamed runs" (which dropped the warning and narrowed the bands: a
Llama-3.1-8B TTFT band of 13.4–132 ms under the intact file read 13.4–108 ms with ``"runs": "x"``)."""

import json

import pytest

from kvledger.accounting.gpu_profile import load_gpu_profile
from kvledger.errors import FormatError

RUN = {"label": "a/stage_0", "source": "/data/a.json", "model": "meta-llama/Llama-2-7b-hf", "tp": 1,
       "ttft_mean_rel_error": -0.194, "tpot_mean_rel_error": 0.049, "throughput_rel_error": -0.0005,
       "saturated": False}


def _profile(tmp_path, name, runs):
    d = {"kind": "kvledger-gpu-profile", "version": 4, "gpu": "NVIDIA H100 80GB SXM5", "flops_fraction": 0.768,
         "gemm_efficiency": "measured", "bandwidth_fraction": 0.7367, "allreduce_link_share": None, "runs": runs}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(d), encoding="utf-8")
    return str(p)


def test_an_intact_profile_keeps_each_runs_tp_and_errors(tmp_path):
    prof = load_gpu_profile(_profile(tmp_path, "ok", [RUN, {**RUN, "label": "b/stage_0", "source": "/data/b.json",
                                                            "tp": 2, "ttft_mean_rel_error": None}]))
    assert [r["tp"] for r in prof.runs] == [1, 2]
    assert [r["ttft_mean"] for r in prof.runs] == [-0.194, None]  # null stays "not measured"
    assert prof.data == ("/data/a.json", "/data/b.json")  # both below saturation: validate calls them in-sample


@pytest.mark.parametrize(("runs", "said"), [
    ("x", '"runs" is str, not a list'),
    ([RUN, 5], "runs[1] is int, not an object"),
    ([{**RUN, "tp": "one"}], "runs[0].tp 'one', not a whole number ≥ 1"),
    ([{**RUN, "tp": 0}], "runs[0].tp 0, not a whole number ≥ 1"),
    ([{**RUN, "tp": True}], "runs[0].tp True, not a whole number ≥ 1"),
    ([{**RUN, "ttft_mean_rel_error": "-0.1"}], "runs[0].ttft_mean_rel_error '-0.1', not a number or null"),
])
def test_a_damaged_run_list_is_refused_naming_the_entry(tmp_path, runs, said):
    with pytest.raises(FormatError) as e:
        load_gpu_profile(_profile(tmp_path, "bad", runs))
    assert f"malformed GPU profile ({said})" in str(e.value)


def test_no_runs_at_all_is_still_a_hand_written_profile(tmp_path):
    assert load_gpu_profile(_profile(tmp_path, "none", None)).runs == ()
