"""Which sampler a vLLM 0.9–0.11.0 start-up ran, from its build, and what it moves: the upstream image's FlashInfer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kvledger.analyses.doctor.public_startups import flag_settings, load_rows, replay_row

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("import_vme_startups", ROOT / "benchmarks" / "import_vme_startups.py")
IMPORTER = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(IMPORTER)
VME = {r["id"]: r for r in load_rows(ROOT / "benchmarks" / "data" / "vme_startups.csv")}
PUBLIC = {r["id"]: r for r in load_rows(ROOT / "benchmarks" / "data" / "vllm_public_startups.csv")}


def _available(row):
    return next(t for t in replay_row(row, ROOT).terms if t.term == "available KV")


@pytest.mark.parametrize(("printed", "flag"), [
    ("v0.11.0", "sampler-backend=flashinfer"),  # bare release: the project's image, FlashInfer installed
    ("v0.10.1", "sampler-backend=flashinfer"),
    ("v0.9.0", "sampler-backend=flashinfer"),
    ("v0.11.0+rhai2", None),  # vendor build: contents not stated, plan default
    ("v0.13.1.dev8+g2841a84ac", None),  # development build
    ("v0.11.2", None),  # ≥ 0.11.1 samples with PyTorch unless VLLM_USE_FLASHINFER_SAMPLER=1: nothing to mark
    ("v0.8.5", None),  # 0.8: FlashInfer only below 0.2.3, which the image does not ship
])
def test_release_image_sampler_marks_bare_upstream_builds_of_0_9_to_0_11_0(printed, flag):
    assert IMPORTER.release_image_sampler(printed) == flag


def test_sampler_flag_is_a_plan_setting():
    assert flag_settings("sampler-backend=flashinfer;checkpoint-quantization=fp8") == {"sampler_backend": "flashinfer"}


def test_flashinfer_sampler_explains_the_upstream_0_11_0_gap():
    # Llama-3.3-70B FP8-dynamic, 4 × H200, vLLM 0.11.0, max_model_len 8,192, util 0.92; defaults for a ≥70 GiB non-A100
    # GPU: 8,192 tokens, 1,024 sequences. The dummy sampler runs 1,024 × 128,256 = 131,334,144 logits:
    #   sort (PyTorch):  × (2 + 35.95) B = 4,984,130,765 B = 4.642 GiB
    #   FlashInfer:      × (2 + 4 + 4 + 4) B = 1,838,678,016 B = 1.712 GiB
    # both above the forward (8,192 × (4·8,192 + 3·28,672/4) × 2 B = 0.828 GiB), so the peak is the sampler + hidden
    # states either way and the two plans differ by 2.930 GiB. The logs: upstream v0.11.0 (record 66ba6f71) prints
    # 109.09 GiB, Red Hat's v0.11.0+rhai2/+rhai5 (2d5926ff, b5b1da6d) 105.87.
    upstream, rhai = VME["V66ba6f71"], VME["V2d5926ff"]
    assert "sampler-backend=flashinfer" in upstream["flags"] and "sampler-backend" not in rhai["flags"]
    fi, sort = _available(upstream), _available(rhai)
    assert fi.predicted - sort.predicted == pytest.approx(2.930, abs=0.002)
    assert abs(fi.rel_error) < 0.001 and abs(sort.rel_error) < 0.005  # +0.02% and +0.30%
    # without the flag the upstream row was the sort point, 106.19 GiB (−2.66%)
    plain = dict(upstream, flags=upstream["flags"].replace("sampler-backend=flashinfer;", ""))
    assert _available(plain).predicted == pytest.approx(sort.predicted, abs=1e-9)


def test_l40s_tp2_0_10_2_public_startup():
    # P14 (tim-roethig/ai-platform, vLLM 0.10.2, 2 × L40S, Qwen3-30B-A3B-Instruct-2507-FP8, util 0.95, 32K): budget
    # 44.55 × 0.95 = 42.32 GiB; weights (FP8 blocks, TP 2) 14.54; activation: sort sampler 256 × 151,936 × 37.95 B
    # = 1.376 GiB + hidden 2,048 × 2,048 × 2 B + 0.05 fixed = 1.43; non-torch 0.13 + 0.2 NCCL (assumed) + 24 MiB custom
    # all-reduce = 0.35; 42.32 − 14.54 − 1.43 − 0.35 = 26.00 GiB against 25.91 printed (+0.34%), inside the range.
    t = _available(PUBLIC["P14"])
    assert t.predicted == pytest.approx(26.00, abs=0.01) and t.inside and abs(t.rel_error) < 0.005
