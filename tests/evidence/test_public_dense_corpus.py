"""The public dense serving corpus (benchmarks/data/public-dense-serving): every row says where it came from, the rows
of one run agree on how to replay it, the stand-in configs are the architectures the sources served, and the replay
script compares a measured value with the band simulate prints in the metric's own unit."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from kvledger.catalog.modelspec import parse_config

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "public-dense-serving"
ROWS = list(csv.DictReader((DATA / "points.csv").open(encoding="utf-8")))
#: the columns that say how a run is replayed: the rows of one run must agree on every one
REPLAY = ("model", "gpu", "tp", "engine_version", "concurrency", "request_rate", "prompt_tokens", "output_tokens",
          "source_num_requests", "extra_flags", "control")


def _check_module():
    spec = importlib.util.spec_from_file_location("dense_serving_check", ROOT / "benchmarks" / "dense_serving_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_row_names_its_source_and_a_known_metric():
    metrics = _check_module().METRICS
    assert len(ROWS) >= 15
    for r in ROWS:
        assert r["source_url"].startswith("https://") and r["licence"] and r["source_date"] and r["notes"], r["run"]
        assert r["metric"] in metrics and float(r["value"]) > 0, r["run"]


def test_rows_of_one_run_agree_on_the_replay():
    runs: dict[str, tuple] = {}
    for r in ROWS:
        key = tuple(r[c] for c in REPLAY)
        assert runs.setdefault(r["run"], key) == key, r["run"]
    # held out: at least 3 GPUs with no measured run in ../shared (the H100 rows are the control)
    assert len({r["gpu"] for r in ROWS if r["control"] != "1"}) >= 3


def test_qwen3_14b_stand_in_has_the_published_size():
    # Qwen3-14B (40 layers, hidden 5120, 40 query / 8 KV heads of 128, intermediate 17,408, untied 151,936 vocab):
    # embedding + head 2 × 151,936 × 5,120 = 1,555,824,640; per layer q 5,120 × 5,120 = 26,214,400, k and v
    # 2 × 5,120 × 1,024 = 10,485,760, o 26,214,400, q/k norms 2 × 128 = 256, MLP 3 × 5,120 × 17,408 = 267,386,880,
    # two norms 10,240 → 330,311,936 × 40 = 13,212,477,440; final norm 5,120 → 14,768,307,200 (the "14.8B" of its card)
    m = parse_config(json.loads((DATA / "Qwen3-14B.config.json").read_text()), source="test")
    assert m.num_params == 1_555_824_640 + 40 * 330_311_936 + 5_120


@pytest.mark.parametrize("gpu, slope_ms, intercept_ms", [
    ("nvidia_b200", 1.80e-05, 3.93),      # the post's fit for the BF16 KV cache on one B200 (FlashInfer)
    ("nvidia_h100_sxm", 4.37e-05, 6.44),  # and on one H100 (FlashAttention-3, after the post's changes): the control
])
def test_blog_rows_are_the_sources_line(gpu, slope_ms, intercept_ms):
    # ITL = slope × input tokens + intercept, at concurrency 1 (the mean ITL is the mean TPOT)
    rows = [r for r in ROWS if r["gpu"] == gpu and r["run"].startswith("vb-")]
    assert len(rows) == 4
    for r in rows:
        assert float(r["value"]) == pytest.approx(intercept_ms + slope_ms * int(r["prompt_tokens"]), abs=5e-4)


def test_band_is_scaled_into_the_metrics_unit():
    # simulate stores the throughput band in req/s; output tok/s is req/s × output tokens, so its band scales by the
    # same factor: 2.0 req/s (band 1.6–2.5) at 100 output tokens → 200 tok/s (band 160–250)
    mod = _check_module()
    out = {"summary": {"throughput_output_tok_per_s": 200.0, "throughput_req_per_s": 2.0},
           "error_bands": {"throughput": {"predicted": 2.0, "low": 1.6, "high": 2.5}}}
    value, band = mod.predicted(out, "output_tok_per_s")
    assert value == 200.0 and band == pytest.approx((160.0, 250.0))
    # a TTFT mean in ms against a band stored in s
    out = {"summary": {"ttft_s": {"mean": 0.5}}, "error_bands": {"ttft_mean": {"predicted": 0.5, "low": 0.4,
                                                                                "high": 0.9}}}
    value, band = mod.predicted(out, "ttft_mean_ms")
    assert value == 500.0 and band == pytest.approx((400.0, 900.0))
    # a median has no band
    out = {"summary": {"itl_s": {"p50": 0.005}}, "error_bands": {}}
    assert mod.predicted(out, "itl_p50_ms") == (5.0, None)
