"""The bucket error measure of issue 20 (analyses/doctor/bucket_error.py), worked by hand on public start-ups."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.analyses.doctor.bucket_error import BucketRecord, bucket_summary, buckets_above, scaled_error
from kvledger.analyses.doctor.public_startups import load_rows, replay_row

ROOT = Path(__file__).resolve().parents[2]
ROWS = {r["id"]: r for r in load_rows(ROOT / "benchmarks" / "data" / "vllm_public_startups.csv")}


def test_memory_term_error_is_over_the_usable_memory():
    # P11 (vllm#13061, vLLM 0.7.2, 2× RTX 4090, gpu_memory_utilization 0.98): non_torch_memory 0.25 GiB printed,
    # 0.33 planned (0.13 TP-1 part + 0.2 NCCL ring, no custom all-reduce without P2P). Per figure: +0.08 / 0.25 = +32%.
    # Usable memory: the catalog's 24,081 MiB (23.517 GiB) × 0.98 = 23.046 GiB → +0.08 / 23.046 = +0.347%.
    x = replay_row(ROWS["P11"], ROOT)
    nt = next(t for t in x.terms if t.term == "non-torch")
    assert x.usable_gib == pytest.approx(24081 / 1024 * 0.98)
    assert nt.rel_error == pytest.approx(0.32, abs=1e-9)
    assert scaled_error("non-torch", nt.predicted, nt.printed, x.usable_gib) == pytest.approx(0.00347, abs=1e-5)


def test_failed_startup_available_kv_is_over_the_usable_memory():
    # P04 (vllm#13882, vLLM 0.7.3, RTX 4060 8.00 GiB at 0.7): the start-up failed with −1.05 GiB printed; per figure
    # −0.13 / −1.05 = +12.4% (a relative error of a negative figure); over the usable 8.00 × 0.7 = 5.6 GiB: −2.32%.
    assert scaled_error("available KV", -1.18, -1.05, 5.6) == pytest.approx(-0.13 / 5.6)
    # A start-up that ran keeps the error relative to its printed figure: 107.72 vs 107.52 GiB → +0.186%.
    assert scaled_error("available KV", 107.72, 107.52, 129.7) == pytest.approx(0.2 / 107.52)
    # Tokens and concurrency stay relative, and with no usable memory known a memory term does too.
    assert scaled_error("KV tokens", 110.0, 100.0, 50.0) == pytest.approx(0.1)
    assert scaled_error("non-torch", 0.13, 0.26, None) == pytest.approx(-0.5)


def test_bucket_summary_and_the_5_percent_test():
    # Two records in bucket "a": scaled 1% and 3% → mean 2%; per figure 30% and 10% → 20%. Bucket "b": one available
    # KV at 6% → mean 6% > 5%, within 2%: 0 of 1; inside the range 1 of 1.
    recs = [BucketRecord("a", "g", "t", "non-torch", 0.30, 0.01, None),
            BucketRecord("a", "g", "t", "weights", -0.10, -0.03, False),
            BucketRecord("b", "g", "t", "available KV", 0.06, 0.06, True)]
    s = bucket_summary(recs, "version")
    assert s["a"]["mean_abs_pct"] == pytest.approx(2.0) and s["a"]["mean_abs_rel_to_figure_pct"] == pytest.approx(20)
    assert s["a"]["inside_range"] == 0.0 and s["a"]["available_n"] == 0
    assert (s["b"]["available_within_2pct"], s["b"]["inside_range"]) == (0.0, 1.0)
    tables = {f: bucket_summary(recs, f) for f in ("version", "gpu", "topology")}
    # GPU "g" pools all three: (1 + 3 + 6) / 3 = 3.33% ≤ 5%, so only version "b" is above.
    assert buckets_above(tables) == [("version", "b", pytest.approx(6.0))]
