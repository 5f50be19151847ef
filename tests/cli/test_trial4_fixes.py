"""What the fourth new-user trial found, each pinned: a no-fit plan's shortfall range, the notes on an engine version
newer than the rules read, vLLM-only flags with another engine, and an engine on hardware it does not run on."""

from __future__ import annotations

import json

import pytest
from cli_run import MODEL
from cli_run import refused as _refused
from cli_run import run_cli as _run


@pytest.mark.parametrize("gpu", [("--gpu", "T4"), ("--gpu", "H100", "--gpu-memory-utilization", "0.2")])
def test_a_plan_that_does_not_fit_gives_its_shortfall_and_range_the_same_sign(gpu):
    # T4: 14.58 GiB × 0.92 = 13.41 GiB against 14.99 weights + 0.56 + 0.25 + 0.73 = 16.52 GiB: short by 3.11 GiB; the
    # signed range of available KV is (−4.39, −2.59) GiB, so the shortfall's is (2.59, 4.39), around its point.
    d = json.loads(_run("plan", MODEL, *gpu, "--json").stdout)["memory"]
    assert d["available_kv_bytes"] == 0.0 and d["ranges"]["available_kv_bytes"] == [0.0, 0.0]
    lo, hi = d["ranges"]["kv_shortfall_bytes"]
    assert 0 < lo <= d["kv_shortfall_bytes"] <= hi
    text = " ".join(_run("plan", MODEL, *gpu).stdout.split())
    short = text.split("no memory left for the KV cache (short by ")[1].split(")")[0]
    assert "−" not in short and "to" not in short  # "3.11 GiB (2.59–4.39": positive ends, an en dash between
    point, ends = short.split(" GiB (")
    low, high = (float(x) for x in ends.split("–"))
    assert 0 < low <= float(point) <= high


def test_a_plan_that_fits_keeps_its_ranges_as_they_were():
    d = json.loads(_run("plan", MODEL, "--gpu", "H100", "--json").stdout)["memory"]
    assert "kv_shortfall_bytes" not in d["ranges"] and d["ranges"]["available_kv_bytes"][0] > 0


@pytest.mark.parametrize("args,note", [
    # vllm_rules.LATEST = 0.33.0, sglang_rules.SGLANG_LATEST = (0, 5, 23), plan_other.TRTLLM_NEWEST_CHECKED = 1.2.1
    (("--engine-version", "0.34"), "vLLM 0.34.0 is newer than the newest release whose code was read (0.33.0)"),
    (("--engine", "sglang", "--engine-version", "0.6.1"),
     "SGLang 0.6.1 is newer than the newest release whose code was read (0.5.23)"),
    (("--engine", "trtllm", "--engine-version", "99.0"),
     "TensorRT-LLM 99.0 is newer than the newest release checked against a start-up log (1.2.1;"),
])
def test_plan_says_when_the_version_is_newer_than_the_rules_read(args, note):
    text = " ".join(_run("plan", MODEL, "--gpu", "H100", *args).stdout.split())
    assert f"note: {note}" in text


@pytest.mark.parametrize("args", [("--engine", "sglang", "--engine-version", "0.5.23"),
                                  ("--engine", "trtllm", "--engine-version", "1.2.1"), ()])
def test_no_newer_note_at_or_below_the_newest_read(args):
    # (an SGLang version past the next minor, 0.7 or 9.9, is refused: test_sglang_far_future_is_refused)
    assert "is newer than the newest release" not in _run("plan", MODEL, "--gpu", "H100", *args).stdout


def test_simulate_says_when_the_vllm_version_is_newer_than_the_rules_read():
    text = " ".join(_run("simulate", MODEL, "--gpu", "H100", "--engine-version", "0.34", "--num-requests", "5")
                    .stdout.split())
    assert "note: vLLM 0.34.0 is newer than the newest release whose code was read (0.33.0): its rules are" in text


@pytest.mark.parametrize("engine,flags,start", [
    ("trtllm", ("--tp", "2", "--enforce-eager", "--disable-custom-all-reduce"),
     "--enforce-eager, --disable-custom-all-reduce are vLLM flags"),
    ("sglang", ("--sampler-backend", "pytorch"), "--sampler-backend is a vLLM flag"),
    ("trtllm", ("--num-gpu-blocks-override", "100"), "--num-gpu-blocks-override is a vLLM flag"),
])
def test_a_vllm_only_flag_with_another_engine_is_refused_as_its_fraction_is(engine, flags, start):
    msg = _refused("plan", MODEL, "--gpu", "H100", "--engine", engine, *flags)
    assert msg.startswith(start) and f"with --engine {engine}" in msg and "use --engine vllm" in msg


@pytest.mark.parametrize("gpu,where,instead", [("MI300X", "ROCm", "--engine vllm or --engine sglang"),
                                               ("TPU-v5e", "TPU", "--engine vllm,"),
                                               ("gaudi3", "Gaudi", "--engine vllm,")])
def test_tensorrt_llm_on_a_gpu_that_is_not_nvidias_is_refused(gpu, where, instead):
    msg = _refused("plan", MODEL, "--engine", "trtllm", "--gpu", gpu)
    assert msg.startswith("TensorRT-LLM runs on NVIDIA GPUs only") and f"is a {where} device" in msg and instead in msg


@pytest.mark.parametrize("gpu,where", [("TPU-v5e", "TPU"), ("gaudi3", "Gaudi")])
def test_vllm_on_a_tpu_or_gaudi_says_its_back_end_is_not_modelled(gpu, where):
    text = " ".join(_run("plan", MODEL, "--gpu", gpu).stdout.split())
    assert f"note: vLLM's {where} back-end is not modelled by these rules" in text


@pytest.mark.parametrize("args", [("--gpu", "MI300X"), ("--gpu", "H100"), ("--gpu", "H100", "--engine", "trtllm")])
def test_no_platform_note_where_the_rules_model_the_platform(args):
    # ROCm: vllm_rocm.py models vLLM's ROCm platform from MI300X start-ups; NVIDIA: CUDA
    assert "back-end is not modelled" not in _run("plan", MODEL, *args).stdout


def test_sglang_without_kv_tokens_does_not_print_max_num_seqs_0():
    # SGLang's max_running_requests = min(clamp(#tokens/context_len·512, 2048, 4096), #tokens // 2) is 0 when the
    # 14.99 GiB of weights leave no KV tokens on a T4
    text = " ".join(_run("plan", MODEL, "--engine", "sglang", "--gpu", "T4").stdout.split())
    assert "max_num_seqs 0" not in text and "max_running_requests 0" not in text
    # the header says SGLang's own name under SGLang (plan_summary.limit_names)
    assert "max_running_requests — (sized from the KV pool, which is empty)" in text  # the short title; in full:
    full = " ".join(_run("plan", MODEL, "--engine", "sglang", "--gpu", "T4", "--verbose").stdout.split())
    assert "max_running_requests — (SGLang sizes max_running_requests from the KV pool, which is empty)" in full
    assert "max_num_seqs 256" in " ".join(_run("plan", MODEL, "--gpu", "T4").stdout.split())  # vLLM: its default


@pytest.mark.parametrize("version", ["9.9", "1.0", "0.35.0"])
def test_a_vllm_version_far_past_the_newest_known_is_refused_as_a_typo(version):
    # vllm_rules.LATEST = 0.33.0 and vllm_predates.NEAR_FUTURE_MINORS = 1: 0.34.x is planned with a note (above);
    # 0.35 (two minors on), 1.0 and 9.9 (a major on) are beyond any release, refused naming the newest known
    msg = _refused("plan", MODEL, "--gpu", "H100", "--engine-version", version)
    assert msg.startswith(f"--engine-version {version}: no such vLLM release is known; the newest known is 0.33.0")
    assert "a version up to 0.34.x is planned with its rules and a note" in msg


@pytest.mark.parametrize("version", ["0.7.0", "9.9", "1.0"])
def test_sglang_far_future_is_refused(version):
    # SGLANG_LATEST = 0.5.23; the next minor (0.6.x) is planned with a note, anything further is no known release.
    from cli_run import refused

    msg = refused("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--engine-version", version)
    assert msg.startswith(f"--engine-version {version}: no such SGLang release is known; the newest known is 0.5.23")
