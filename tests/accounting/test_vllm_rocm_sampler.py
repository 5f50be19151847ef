"""The sampler vLLM samples with on ROCm: never FlashInfer, AITER from 0.12 when VLLM_ROCM_USE_AITER=1."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_profile import sampler_peak_bytes
from kvledger.accounting.vllm_sampler import sampler_backends
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError
from kvledger.units import GiB


@pytest.mark.parametrize(("ver", "choice", "rocm", "expected"), [
    # topk_topp_sampler.py: every FlashInfer branch needs current_platform.is_cuda() (0.11.0, 0.12.0, 0.13.0)
    ((0, 11, 0), "auto", True, ("pytorch", None)),  # on CUDA the same release has FlashInfer in its range
    ((0, 11, 0), "auto", False, ("pytorch", "flashinfer")),
    ((0, 11, 2), "auto", True, ("pytorch", None)),  # no forward_hip in 0.11.2
    ((0, 12, 0), "auto", True, ("pytorch", "aiter")),  # forward_hip from 0.12.0, off unless VLLM_ROCM_USE_AITER=1
    ((0, 13, 0), "aiter", True, ("aiter", None)),
    ((0, 13, 0), "pytorch", True, ("pytorch", None)),
])
def test_sampler_backend_on_rocm_and_cuda(ver, choice, rocm, expected):
    assert sampler_backends(ver, choice, rocm)[:2] == expected


@pytest.mark.parametrize(("ver", "choice", "rocm", "words"), [
    ((0, 13, 0), "aiter", False, "runs on AMD GPUs only"),  # forward_hip is ROCm's path; CUDA never takes it
    ((0, 11, 2), "aiter", True, "vLLM 0.11.2 has no AITER sampler"),  # forward_hip absent in 0.11.2, there in 0.12.0
    ((0, 13, 0), "flashinfer", True, "never samples with FlashInfer on ROCm"),  # every branch needs is_cuda()
])
def test_sampler_backend_that_cannot_apply_is_refused(ver, choice, rocm, words):
    # the plan used to swap these for PyTorch without a word; the project refuses a flag it would ignore
    with pytest.raises(InputError, match=words):
        sampler_backends(ver, choice, rocm)


def test_refused_sampler_backend_is_one_line_on_the_cli(capsys, monkeypatch):
    # through the entry point: exit 2, the message on stderr, no traceback
    import sys

    from kvledger.cli.main import run as entry
    for args, words in ((["--gpu", "H100", "--sampler-backend", "aiter"], "use --sampler-backend auto, pytorch or"),
                        (["--gpu", "MI300X", "--sampler-backend", "flashinfer"], "auto or pytorch, or aiter"),
                        (["--gpu", "MI300X", "--sampler-backend", "aiter", "--engine-version", "0.11.2"],
                         "--engine-version 0.12.0 or later")):
        monkeypatch.setattr(sys, "argv", ["kvledger", "plan", "meta-llama/Llama-3.1-8B", *args])
        with pytest.raises(SystemExit) as e:
            entry()
        err = capsys.readouterr().err
        assert e.value.code == 2 and words in err and "Traceback" not in err, (args, err)


def test_aiter_sampler_bytes_and_the_mi300x_plan():
    # aiter_sample: fp32 logits (4 B, temperature in place) + softmax(dtype=float32) probs (4 B) beside the bf16
    # logits (2 B): 1,024 dummy requests × 128,256 vocab × 10 B = 1,313,341,440 B; the sort sampler up to 0.16 keeps
    # 2 + 35.95 B: 4,984,130,765 B; the AITER peak is 3,670,789,325 B = 3.419 GiB lower.
    m = load_model("meta-llama/Meta-Llama-3.1-70B")
    aiter, _ = sampler_peak_bytes(m, (0, 13, 0), 1024, backend="aiter")
    sort, _ = sampler_peak_bytes(m, (0, 13, 0), 1024)
    assert aiter == 1024 * 128_256 * 10 == 1_313_341_440
    assert (sort - aiter) / GiB == pytest.approx(3.4187, abs=1e-4)
    # Llama-3.3-70B (Llama-3.1-70B's architecture), 4 × MI300X, vLLM 0.13.1, 8,192 tokens, util 0.92: both peaks sit
    # above the forward (0.83 GiB), so the plans differ by that 3.419 GiB (137.30 → 140.72 GiB). vme_startups.csv
    # record 9e6c1f39 (a 0.13.1 development build) prints 140.86; Red Hat's 0.13.0 build of the same launch (88462985)
    # prints 137.30, the sort point: the AITER point is −0.10% from the development build's figure.
    kw = dict(engine_version="0.13.1", tp=4, max_model_len=8192, gpu_memory_utilization=0.92)
    plans = {b: build_plan(m, get_gpu("amd_mi300x"), make_settings(**kw, sampler_backend=b), with_roofline=False,
                           with_advice=False).memory for b in ("auto", "aiter")}
    gap = (plans["aiter"].available_kv_bytes - plans["auto"].available_kv_bytes) / GiB
    assert gap == pytest.approx(3.419, abs=0.001)
    assert plans["aiter"].available_kv_bytes / GiB == pytest.approx(140.72, abs=0.01)
    lo, hi = plans["auto"].ranges["available_kv_bytes"]  # auto on ROCm ≥0.12 keeps AITER's end in its range
    assert lo / GiB < 137.30 and hi / GiB > 140.86
